//! How a simulation ended, in words: every run done, the horizon reached with work unfinished,
//! or no progress possible — and for unfinished work, what holds it, grouped by the engine's
//! own explanation, so that a run never ends with thousands of jobs stuck and no word said.

use std::collections::BTreeMap;

use serde::Serialize;
use weir_engine::JobStatus as EngineStatus;
use weir_model::Duration;

use crate::execution::AM_STAGE;
use crate::pending::PendingJob;
use crate::sim::{EndReason, Simulation};

/// `summary.json`'s `ending`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Ending {
    pub reason: EndReason,
    /// Whether the figures cover the whole workload: every run submitted ended and nothing of a
    /// streamed trace was left unread. `false` means the replay stopped early — at the horizon
    /// or where no progress was possible — and its figures describe only what ran.
    pub complete: bool,
    /// Whether a streamed trace still had jobs that were never read (the horizon came first).
    pub trace_unread: bool,
    /// One or two sentences for a person: what happened and what to look at.
    pub note: String,
    /// The horizon (`--until`, seconds) the simulation stopped short of, because every run had
    /// ended long before it and no later run was held back by it.
    pub horizon_cut_seconds: Option<f64>,
    /// Runs and jobs still going at the end.
    pub runs_unfinished: u64,
    pub jobs_unfinished: u64,
    /// Unfinished jobs grouped by what holds them (the leaf and the first sentence of the
    /// engine's explanation, without its figures), most jobs first; at most [`GROUPS`].
    pub unfinished_by_reason: Vec<ReasonCount>,
    /// How long the unfinished job submitted first had been waiting at the end, seconds.
    pub longest_unfinished_seconds: Option<f64>,
}

/// Unfinished jobs sharing one reason.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReasonCount {
    pub reason: String,
    pub jobs: u64,
    /// The first such job's number, for `--explain`.
    pub example_job: u64,
}

/// Groups listed in `unfinished_by_reason`.
pub const GROUPS: usize = 10;

pub(crate) fn ending(sim: &Simulation, pending: &[PendingJob], runs_unfinished: u64) -> Ending {
    let (reason, cut) = sim.ending.unwrap_or((EndReason::Completed, None));
    let now = sim.now;
    let jobs = pending.len() as u64;
    let what = format!(
        "{runs_unfinished} run{} ({jobs} job{})",
        if runs_unfinished == 1 { "" } else { "s" },
        if jobs == 1 { "" } else { "s" }
    );
    let note = match (reason, cut) {
        (EndReason::Completed, Some(u)) => format!(
            "every run ended by t={}, long before the horizon --until {}: the simulation stopped there \
             (figures cover {} of simulated time)",
            Duration(now.as_millis()).human(),
            Duration(u.as_millis()).human(),
            Duration(now.as_millis()).human()
        ),
        (EndReason::Completed, None) => "every run submitted ended".to_string(),
        (EndReason::Horizon, _) => format!(
            "the horizon was reached with {what} unfinished; a longer --until lets them end, \
             pending.csv says what each was doing"
        ),
        (EndReason::NoProgress, _) => format!(
            "the replay stopped early: {what} could make no progress from t={} (its last progress): \
             nothing was running and nothing but the engine's timers and node faults was due, so the \
             simulation stopped there and its figures cover only what ran until then; {}",
            Duration(now.as_millis()).human(),
            stuck(sim)
        ),
    };
    let mut groups: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for p in pending {
        let g = groups.entry(reason_key(p)).or_insert((0, p.job));
        g.0 += 1;
    }
    let mut by_reason: Vec<ReasonCount> = groups
        .into_iter()
        .map(|(reason, (jobs, example_job))| ReasonCount { reason, jobs, example_job })
        .collect();
    by_reason.sort_by(|a, b| b.jobs.cmp(&a.jobs).then(a.example_job.cmp(&b.example_job)));
    by_reason.truncate(GROUPS);
    let trace_unread = sim.trace_unread();
    let note = if trace_unread {
        format!("{note}; the trace still had jobs that were never read (the horizon came first)")
    } else {
        note
    };
    Ending {
        reason,
        complete: reason == EndReason::Completed && runs_unfinished == 0 && !trace_unread,
        trace_unread,
        note,
        horizon_cut_seconds: cut.map(|u| u.as_millis() as f64 / 1000.0),
        runs_unfinished,
        jobs_unfinished: jobs,
        unfinished_by_reason: by_reason,
        longest_unfinished_seconds: pending
            .iter()
            .map(|p| now.since(p.submit))
            .max()
            .map(|d| d.as_millis() as f64 / 1000.0),
    }
}

/// What the cluster looks like when no progress is possible.
fn stuck(sim: &Simulation) -> String {
    let (mut ams, mut tasks) = (0u64, 0u64);
    for t in
        sim.tasks.iter().flatten().filter(|t| sim.jobs.get(t.job as usize).is_some_and(|j| j.is_active()))
    {
        if t.stage == AM_STAGE {
            ams += 1;
        } else {
            tasks += 1;
        }
    }
    match (ams, tasks) {
        (0, 0) => "no job could take a container: the reasons below (and pending.csv) say which limit \
                   holds each"
            .to_string(),
        (ams, 0) => format!(
            "every running container ({ams}) is an application master whose tasks find no room \
             (the AMs fill the room their own tasks need): use smaller AMs (--am), fewer jobs at once \
             (max_running_apps), a lower max_am_share, or --am none"
        ),
        (_, tasks) => format!(
            "{tasks} containers hold tasks that never end by themselves; the reasons below say what \
             the others wait for"
        ),
    }
}

/// A job's reason without its figures: its leaf and the first sentence of the engine's
/// explanation, cut before the details in brackets, so that jobs held by one limit group.
fn reason_key(p: &PendingJob) -> String {
    let e = &p.explanation;
    let first = match e.reasons.first() {
        Some(r) => r.as_str(),
        None if e.status == EngineStatus::Waiting => "waiting for a running-app slot",
        None => "running, with every container it asked for",
    };
    let cut = [" (", "; "].iter().filter_map(|sep| first.find(sep)).min().unwrap_or(first.len());
    format!("{}: {}", e.queue, &first[..cut])
}

/// The longest a job waited for all it asked for, finished or not, in seconds: the summary's
/// largest delay, or the longest wait of a job still unfinished.
pub fn longest_wait(delay_max: Option<f64>, unfinished: Option<f64>) -> Option<f64> {
    match (delay_max, unfinished) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

impl Ending {
    /// The one-screen lines for unfinished work (nothing when every run ended at the horizon
    /// or before), ending with where to look.
    pub fn screen(&self) -> String {
        if self.reason == EndReason::Completed && self.horizon_cut_seconds.is_none() {
            return String::new();
        }
        let mut t = match self.reason {
            EndReason::Completed => format!("note: {}\n", self.note),
            EndReason::Horizon => format!("unfinished work (horizon reached): {}\n", self.note),
            EndReason::NoProgress => format!("unfinished work (no progress possible): {}\n", self.note),
        };
        for g in &self.unfinished_by_reason {
            t.push_str(&format!(
                "  {:>7} job{} {} (e.g. --explain {})\n",
                g.jobs,
                if g.jobs == 1 { " " } else { "s" },
                g.reason,
                g.example_job
            ));
        }
        let listed: u64 = self.unfinished_by_reason.iter().map(|g| g.jobs).sum();
        if listed < self.jobs_unfinished {
            t.push_str(&format!("  {:>7} more jobs for other reasons\n", self.jobs_unfinished - listed));
        }
        if self.jobs_unfinished > 0 {
            t.push_str("  pending.csv has every unfinished job with the engine's full explanation\n");
        }
        t
    }
}

/// Seconds as a duration a person reads, with years spelled out past one.
pub fn human_wait(seconds: f64) -> String {
    const YEAR: f64 = 365.0 * 86_400.0;
    let d = Duration((seconds * 1000.0).round() as u64).human();
    if seconds >= YEAR {
        format!("{d} ({:.1} years)", seconds / YEAR)
    } else {
        d
    }
}

/// A wait past this is flagged on the one-screen summary: a queue or a cluster far too small
/// for the work, or a trace replayed into a capped queue.
pub const LONG_WAIT: Duration = Duration(30 * 86_400_000);
