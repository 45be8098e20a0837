//! The SLO report over run records: per tier and per workflow, runs, runs meeting their SLO,
//! the SLO success ratio, SLO-successful workflows and runtime percentiles — Monarch's
//! definitions, the ones `weir simulate` reports (`summary.json`'s `tiers`), so a live server's
//! figures and a simulation's can be set side by side.
//!
//! - A run's SLO outcome ([`RunOutcome::met`]) is known when it ended — met if it succeeded
//!   within its SLO (submission to the end of its last job), missed if it failed or took longer
//!   — or when it is still going past its deadline (missed). A run still within its deadline,
//!   and a run that was killed (its owner stopped it), has no outcome.
//! - The SLO success ratio of a workflow or a tier is met / runs with an outcome; a workflow is
//!   SLO-successful when its ratio is at least [`SLO_SUCCESSFUL`] (90%).
//! - `runs` counts runs that ended (succeeded or failed); runtime percentiles are nearest-rank
//!   over their submission-to-end times.
//!
//! Pure: callers hand in the records and `now`.

use std::collections::BTreeMap;

use serde::Serialize;

/// A workflow is SLO-successful when at least this share of its runs meet the SLO.
pub const SLO_SUCCESSFUL: f64 = 0.9;

/// How a run ended, or that it has not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RunEnd {
    Succeeded,
    Failed,
    /// Stopped by its owner: no SLO outcome, not counted among ended runs.
    Killed,
    /// Still queued or running.
    Unfinished,
}

/// One run as the report sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunOutcome {
    pub workflow: String,
    pub tier: u8,
    /// Milliseconds on any one clock shared by all records (Unix ms for a server).
    pub submit_ms: u64,
    /// When it ended; `None` while unfinished.
    pub end_ms: Option<u64>,
    pub end: RunEnd,
    /// The workflow's runtime SLO.
    pub slo_ms: Option<u64>,
}

impl RunOutcome {
    /// Whether it met its SLO, as of `now_ms`: `None` without an SLO, for a killed run, and for
    /// one still going within its deadline.
    pub fn met(&self, now_ms: u64) -> Option<bool> {
        let slo = self.slo_ms?;
        match (self.end, self.end_ms) {
            (RunEnd::Succeeded, Some(end)) => Some(end.saturating_sub(self.submit_ms) <= slo),
            (RunEnd::Failed, _) => Some(false),
            (RunEnd::Killed, _) => None,
            (RunEnd::Succeeded | RunEnd::Unfinished, _) => {
                (self.submit_ms.saturating_add(slo) <= now_ms).then_some(false)
            }
        }
    }

    fn runtime_ms(&self) -> Option<u64> {
        match self.end {
            RunEnd::Succeeded | RunEnd::Failed => self.end_ms.map(|e| e.saturating_sub(self.submit_ms)),
            RunEnd::Killed | RunEnd::Unfinished => None,
        }
    }
}

/// SLO figures of a group of runs (a tier, or a workflow).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SloFigures {
    /// Runs that ended (succeeded or failed).
    pub runs: u64,
    /// Runs with a known SLO outcome.
    pub runs_with_slo: u64,
    pub slo_met: u64,
    pub slo_success_ratio: Option<f64>,
    /// Submission to end of ended runs, nearest rank.
    pub runtime_p50_ms: Option<u64>,
    pub runtime_p99_ms: Option<u64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TierSlo {
    pub tier: u8,
    #[serde(flatten)]
    pub figures: SloFigures,
    /// Workflows of this tier with at least one run with a known SLO outcome.
    pub workflows: u64,
    /// Those meeting their SLO in at least 90% of those runs.
    pub slo_successful_workflows: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WorkflowSlo {
    pub workflow: String,
    pub tier: u8,
    #[serde(flatten)]
    pub figures: SloFigures,
    /// `None` when no run has a known outcome.
    pub slo_successful: Option<bool>,
}

/// Tiers 1 to 3 (always present) and every workflow (by tier, then name).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SloReport {
    pub tiers: Vec<TierSlo>,
    pub workflows: Vec<WorkflowSlo>,
}

#[derive(Default)]
struct Acc {
    figures: SloFigures,
    runtimes: Vec<u64>,
}

impl Acc {
    fn add(&mut self, r: &RunOutcome, met: Option<bool>) {
        if let Some(rt) = r.runtime_ms() {
            self.figures.runs += 1;
            self.runtimes.push(rt);
        }
        if let Some(m) = met {
            self.figures.runs_with_slo += 1;
            self.figures.slo_met += u64::from(m);
        }
    }

    fn finish(mut self) -> SloFigures {
        let f = &mut self.figures;
        f.slo_success_ratio = (f.runs_with_slo > 0).then(|| f.slo_met as f64 / f.runs_with_slo as f64);
        self.runtimes.sort_unstable();
        f.runtime_p50_ms = percentile(&self.runtimes, 0.50);
        f.runtime_p99_ms = percentile(&self.runtimes, 0.99);
        self.figures
    }
}

/// The report over `runs` as of `now_ms` (which decides the outcome of runs still going).
pub fn slo_report(runs: &[RunOutcome], now_ms: u64) -> SloReport {
    let mut tiers: BTreeMap<u8, Acc> = (1..=3).map(|t| (t, Acc::default())).collect();
    let mut workflows: BTreeMap<(u8, &str), Acc> = BTreeMap::new();
    for r in runs {
        let met = r.met(now_ms);
        tiers.entry(r.tier).or_default().add(r, met);
        workflows.entry((r.tier, r.workflow.as_str())).or_default().add(r, met);
    }
    let workflows: Vec<WorkflowSlo> = workflows
        .into_iter()
        .map(|((tier, name), acc)| {
            let figures = acc.finish();
            let slo_successful = (figures.runs_with_slo > 0)
                .then_some(figures.slo_met as f64 >= SLO_SUCCESSFUL * figures.runs_with_slo as f64);
            WorkflowSlo { workflow: name.to_string(), tier, figures, slo_successful }
        })
        .collect();
    let tiers = tiers
        .into_iter()
        .map(|(tier, acc)| {
            let mine = workflows.iter().filter(|w| w.tier == tier && w.slo_successful.is_some());
            let (n, ok) =
                mine.fold((0, 0), |(n, ok), w| (n + 1, ok + u64::from(w.slo_successful == Some(true))));
            TierSlo { tier, figures: acc.finish(), workflows: n, slo_successful_workflows: ok }
        })
        .collect();
    SloReport { tiers, workflows }
}

/// Nearest-rank percentile of sorted values (as weir-sim's summary computes it).
pub fn percentile(sorted: &[u64], p: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(wf: &str, tier: u8, submit: u64, end: Option<u64>, how: RunEnd, slo: Option<u64>) -> RunOutcome {
        RunOutcome { workflow: wf.into(), tier, submit_ms: submit, end_ms: end, end: how, slo_ms: slo }
    }

    #[test]
    fn outcomes_follow_the_deadline() {
        let ok = run("a", 1, 0, Some(100), RunEnd::Succeeded, Some(100));
        assert_eq!(ok.met(1_000), Some(true), "exactly at the deadline is met");
        let late = run("a", 1, 0, Some(101), RunEnd::Succeeded, Some(100));
        assert_eq!(late.met(1_000), Some(false));
        let failed = run("a", 1, 0, Some(5), RunEnd::Failed, Some(100));
        assert_eq!(failed.met(1_000), Some(false), "a failed run misses even when quick");
        let killed = run("a", 1, 0, Some(5), RunEnd::Killed, Some(100));
        assert_eq!(killed.met(1_000), None);
        let going = run("a", 1, 0, None, RunEnd::Unfinished, Some(100));
        assert_eq!(going.met(99), None, "still within its deadline");
        assert_eq!(going.met(100), Some(false), "past its deadline: missed");
        let no_slo = run("a", 1, 0, Some(5), RunEnd::Succeeded, None);
        assert_eq!(no_slo.met(1_000), None);
    }

    #[test]
    fn tiers_and_workflows() {
        // Workflow a (tier 1): 9 of 10 met → SLO-successful; b (tier 1): 1 of 2 → not.
        let mut runs: Vec<RunOutcome> =
            (0..9).map(|i| run("a", 1, i * 10, Some(i * 10 + 5), RunEnd::Succeeded, Some(10))).collect();
        runs.push(run("a", 1, 100, Some(200), RunEnd::Succeeded, Some(10)));
        runs.push(run("b", 1, 0, Some(1), RunEnd::Succeeded, Some(10)));
        runs.push(run("b", 1, 0, Some(3), RunEnd::Failed, Some(10)));
        runs.push(run("c", 3, 0, Some(7), RunEnd::Succeeded, None));
        runs.push(run("c", 3, 0, None, RunEnd::Killed, None));
        let r = slo_report(&runs, 1_000);
        let t1 = &r.tiers[0];
        assert_eq!((t1.tier, t1.figures.runs, t1.figures.runs_with_slo, t1.figures.slo_met), (1, 12, 12, 10));
        assert_eq!((t1.workflows, t1.slo_successful_workflows), (2, 1));
        assert_eq!(t1.figures.slo_success_ratio, Some(10.0 / 12.0));
        // Runtimes of ended runs: nine 5s, 100, 1 and 3.
        assert_eq!((t1.figures.runtime_p50_ms, t1.figures.runtime_p99_ms), (Some(5), Some(100)));
        assert_eq!(r.tiers[1].figures, SloFigures::default());
        let t3 = &r.tiers[2];
        assert_eq!((t3.figures.runs, t3.figures.runs_with_slo, t3.workflows), (1, 0, 0));
        let names: Vec<(&str, Option<bool>)> =
            r.workflows.iter().map(|w| (w.workflow.as_str(), w.slo_successful)).collect();
        assert_eq!(names, [("a", Some(true)), ("b", Some(false)), ("c", None)]);
    }
}
