//! Waiting spells and the "why pending" text in words.
//!
//! A job waits from when it enters the engine until its first task gets a container (or its
//! run ends). The actor records that wait as spells, one per reason: the engine's cheap reason
//! code (`Engine::wait_reason`: the rule, its queue and limit, no node search), or the
//! backend's being unhealthy. A job's first spell opens in the pass it entered the engine
//! (dated from then); reasons are sampled again about once a second, and a changed reason
//! closes the spell and opens the next; the first container closes it at once. Spells go to
//! the store with the pass's fenced batch (`Change::WaitBegan` / `WaitEnded`); a run's end
//! closes its open spells in the store.
//!
//! The published explanation (`publish`) names runs and jobs, states resources in cores and
//! GiB, says how long the job has waited and where it stands in the start order, and flags
//! tier-1 work waiting behind lower tiers.

use std::collections::{BTreeMap, HashMap};

use weir_engine::{StartPosition, WaitReason};
use weir_store::{Change, WaitRow};

use super::actor::Actor;
use super::live::{engine_job, split_job, JobPhase};
use crate::backend_status::BackendState;
use crate::words;

/// How often every waiting job's reason is sampled again.
const SWEEP_MS: i64 = 1000;
/// Most runs named as holding a queue's slots.
const HOLDERS_NAMED: usize = 5;
/// A run taken up this long after its submission has its wait until then recorded as a spell
/// (`taken_up`): a healthy worker takes a run up within a pass or two.
const TAKEN_UP_LATE_MS: i64 = 1000;

/// The spells the actor has open, and the jobs that entered the engine without one yet.
#[derive(Debug, Default)]
pub(crate) struct WaitBook {
    open: HashMap<(i64, u32), Open>,
    /// Jobs that entered the engine and have no spell yet, with when they entered.
    entered: Vec<(i64, u32, i64)>,
    last_sweep: i64,
}

#[derive(Debug)]
struct Open {
    /// (code, queue, limit): a change of any opens a new spell.
    key: (String, String, String),
    /// When the job began to wait (its first spell).
    waiting_since: i64,
    /// The spell's detail line (who holds the queue's slots, the cluster's use, the backend).
    detail: String,
}

/// A reason the actor records: the engine's, or the backend's.
struct Reason {
    code: String,
    queue: String,
    limit: String,
    detail: String,
}

impl WaitBook {
    /// Since when the job has waited, if it does.
    pub fn waiting_since(&self, run: i64, job: u32) -> Option<i64> {
        self.open
            .get(&(run, job))
            .map(|o| o.waiting_since)
            .or_else(|| self.entered.iter().find(|e| e.0 == run && e.1 == job).map(|e| e.2))
    }
}

impl Actor {
    /// A queued run was taken up (routed) at `at`. If that was late — its cluster's backend could
    /// not be set up, or no server drove the cluster — nobody was there to record why while it
    /// waited, so its jobs in the engine get one closed spell from its submission until now,
    /// with the reason the backend's status kept (`BackendStatus::last_unhealthy`).
    pub(super) fn taken_up(&mut self, run: i64, submitted_ms: i64, at: i64) {
        if at - submitted_ms < TAKEN_UP_LATE_MS {
            return;
        }
        let status = self.settings.statuses.get(&self.cluster);
        let (code, detail) = match status.and_then(|s| s.last_unhealthy.map(|u| (s.kind, u))) {
            Some((kind, (seen_ms, why))) if seen_ms >= submitted_ms => (
                "backend_unhealthy",
                format!(
                    "queued until the cluster's worker took it up: the {kind} backend was unhealthy: {why}"
                ),
            ),
            _ => (
                "not_taken_up",
                "queued until the cluster's worker took it up: no server drove the cluster meanwhile \
                 (none was running or held its lease, or its worker was starting)"
                    .to_string(),
            ),
        };
        let Some(live) = self.runs.get(&run) else { return };
        let jobs: Vec<u32> = (0..live.jobs.len())
            .filter(|&j| live.jobs[j].phase == JobPhase::InEngine)
            .map(|j| j as u32)
            .collect();
        for job in jobs {
            self.changes.push(Change::WaitBegan(WaitRow {
                run_id: run,
                job_idx: job,
                from_ms: submitted_ms,
                to_ms: None,
                reason: code.to_string(),
                queue: String::new(),
                limit: String::new(),
                detail: detail.clone(),
            }));
            self.changes.push(Change::WaitEnded { run, job, at });
        }
    }

    /// A job entered the engine at `at`.
    pub(super) fn wait_entered(&mut self, run: i64, job: usize, at: i64) {
        self.waits.entered.push((run, job as u32, at));
    }

    /// A job's first task got a container at `at`: its wait is over.
    pub(super) fn wait_over(&mut self, run: i64, job: usize, at: i64) {
        let job = job as u32;
        self.waits.entered.retain(|e| !(e.0 == run && e.1 == job));
        if self.waits.open.remove(&(run, job)).is_some() {
            self.changes.push(Change::WaitEnded { run, job, at });
        }
    }

    /// After a scheduling pass: open the first spell of jobs that entered and still wait, and
    /// about once a second sample every waiting job's reason again.
    pub(super) fn sample_waits(&mut self, now: i64) {
        let mut holders = Holders::default();
        for (run, job, since) in std::mem::take(&mut self.waits.entered) {
            if !self.waits_in_engine(run, job) {
                continue;
            }
            match self.reason(run, job, &mut holders) {
                Some(r) => self.open_spell(run, job, since, since, r),
                // Nothing holds it back: the next pass places it (or it is asked again then).
                None => self.waits.entered.push((run, job, since)),
            }
        }
        if now - self.waits.last_sweep < SWEEP_MS {
            return;
        }
        self.waits.last_sweep = now;
        let keys: Vec<(i64, u32)> = self.waits.open.keys().copied().collect();
        for (run, job) in keys {
            if !self.waits_in_engine(run, job) {
                self.waits.open.remove(&(run, job));
                self.changes.push(Change::WaitEnded { run, job, at: now });
                continue;
            }
            let Some(r) = self.reason(run, job, &mut holders) else { continue };
            let Some(open) = self.waits.open.get(&(run, job)) else { continue };
            if open.key != (r.code.clone(), r.queue.clone(), r.limit.clone()) {
                let since = open.waiting_since;
                self.open_spell(run, job, now, since, r);
            }
        }
    }

    fn open_spell(&mut self, run: i64, job: u32, from: i64, waiting_since: i64, r: Reason) {
        self.waits.open.insert(
            (run, job),
            Open {
                key: (r.code.clone(), r.queue.clone(), r.limit.clone()),
                waiting_since,
                detail: r.detail.clone(),
            },
        );
        self.changes.push(Change::WaitBegan(WaitRow {
            run_id: run,
            job_idx: job,
            from_ms: from,
            to_ms: None,
            reason: r.code,
            queue: r.queue,
            limit: r.limit,
            detail: r.detail,
        }));
    }

    /// The job is in the engine and none of its tasks has started yet.
    fn waits_in_engine(&self, run: i64, job: u32) -> bool {
        self.runs.get(&run).is_some_and(|r| {
            r.ending.is_none()
                && r.jobs.get(job as usize).is_some_and(|j| j.phase == JobPhase::InEngine && !j.started)
        })
    }

    /// Why the job waits now: the backend first (nothing starts while it is unhealthy), then
    /// the engine's reason code.
    fn reason(&self, run: i64, job: u32, holders: &mut Holders) -> Option<Reason> {
        if let Some(status) = self.settings.statuses.get(&self.cluster) {
            if status.state == BackendState::Unhealthy {
                return Some(Reason {
                    code: "backend_unhealthy".into(),
                    queue: String::new(),
                    limit: String::new(),
                    detail: format!(
                        "the {} backend is unhealthy: {}",
                        status.kind,
                        status.reason.as_deref().unwrap_or("no reason given")
                    ),
                });
            }
        }
        // A stage held until its inputs are complete (`commit.rs`).
        let held = self.runs.get(&run).and_then(|r| r.jobs.get(job as usize)).and_then(|j| {
            j.stages.iter().find_map(|s| {
                let why = s.io.hold.as_ref().filter(|_| !s.io.inputs_ok)?;
                let uris: Vec<String> = s.inputs.iter().map(|u| u.to_string()).collect();
                Some((uris.join(", "), format!("stage {}: {why}", s.name)))
            })
        });
        if let Some((limit, detail)) = held {
            return Some(Reason { code: "inputs".into(), queue: String::new(), limit, detail });
        }
        let r = self.engine.wait_reason(engine_job(run, job as usize)).ok()??;
        let tier = self.runs.get(&run).map_or(0, |r| r.tier);
        let (limit, detail) = match &r {
            WaitReason::QueueMaxRunningApps { queue, limit } => {
                let held = holders.under(self, &queue.to_string());
                (limit.to_string(), held.sentence(tier))
            }
            WaitReason::UserMaxRunningApps { limit, .. } => (limit.to_string(), String::new()),
            WaitReason::QueueMax { max, .. } => (words::resources(max), String::new()),
            WaitReason::AmShare { limit, .. } => (words::resources(limit), String::new()),
            WaitReason::UserLimit { limit, .. } => (words::resources(limit), String::new()),
            WaitReason::ContainerLimit { limit } => (limit.to_string(), String::new()),
            WaitReason::Gang { size, .. } => (format!("{size} tasks"), String::new()),
            WaitReason::NoRoom { .. } => (
                String::new(),
                format!(
                    "cluster {} of {} in use",
                    words::resources(&self.engine.cluster_used()),
                    words::resources(&self.engine.cluster_total())
                ),
            ),
        };
        Some(Reason { code: r.code().to_string(), queue: r.subject(), limit, detail })
    }

    /// `nightly/extract (run 42, tier 1)` for an engine job id.
    pub(super) fn job_name(&self, id: u64) -> Option<String> {
        let (run, j) = split_job(weir_engine::JobId(id));
        let r = self.runs.get(&run)?;
        let job = r.jobs.get(j)?;
        Some(format!("{}/{} (run {run}, tier {})", r.workflow, job.name, r.tier))
    }

    /// The "why pending" text of a job in words (see the module's comment), from the
    /// engine's explanation `e` of it. `None` when the run is not this actor's.
    pub(super) fn explain_in_words(
        &self,
        run: i64,
        j: usize,
        e: &weir_engine::Explanation,
        now: i64,
    ) -> Option<String> {
        let id = engine_job(run, j);
        let r = self.runs.get(&run)?;
        let name = self.job_name(id.0)?;
        let mut out = String::new();
        let since = self.waits.waiting_since(run, j as u32);
        let waited = since.map(|s| format!(", waiting for {}", words::span(now - s))).unwrap_or_default();
        out.push_str(&format!(
            "{name} in {}{waited}: {} running task(s) holding {}, fair share {}, {} more task(s) wanted\n",
            e.queue,
            e.running_containers,
            words::resources(&e.usage),
            words::resources(&e.fair_share),
            e.pending_containers
        ));
        if let Some(open) = self.waits.open.get(&(run, j as u32)) {
            let (code, queue, limit) = &open.key;
            out.push_str(&format!("waits on {}", words::reason(code, queue, limit)));
            if !open.detail.is_empty() {
                out.push_str(&format!(": {}", open.detail));
            }
            out.push('\n');
        }
        if let Ok(Some(p)) = self.engine.start_position(id) {
            out.push_str(&self.position_sentence(&p, r.tier));
        }
        for reason in &e.reasons {
            out.push_str("  - ");
            out.push_str(&words::humanize(reason, |x| self.job_name(x)));
            out.push('\n');
        }
        Some(out.trim_end().to_string())
    }

    /// "2nd of 8 to start under root.ads (promotion order: tier, then submit time); ahead of
    /// it: …", with the tier-1 flag when lower tiers stand ahead.
    fn position_sentence(&self, p: &StartPosition, tier: u8) -> String {
        let order = if p.promotion {
            "the order running-app slots are given: tier priority, then submit time"
        } else {
            "its leaf's order"
        };
        let mut s =
            format!("{} of {} to start under {} ({order})", words::ordinal(p.position), p.of, p.scope);
        let ahead: Vec<(String, u8)> = p
            .ahead
            .iter()
            .filter_map(|a| {
                let (run, _) = split_job(*a);
                Some((self.job_name(a.0)?, self.runs.get(&run)?.tier))
            })
            .collect();
        if !ahead.is_empty() {
            let names: Vec<&str> = ahead.iter().map(|(n, _)| n.as_str()).collect();
            let more = (p.position - 1).saturating_sub(names.len() as u64);
            s.push_str(&format!("; ahead of it: {}", names.join(", ")));
            if more > 0 {
                s.push_str(&format!(" and {more} more"));
            }
        }
        s.push('\n');
        let lower: Vec<&str> = ahead.iter().filter(|(_, t)| *t > tier).map(|(n, _)| n.as_str()).collect();
        if tier == 1 && !lower.is_empty() {
            s.push_str(&format!("  ! tier-1 work waiting behind lower tiers: {}\n", lower.join(", ")));
        }
        s
    }

    /// The explanations the snapshot carries: every job in the engine that wants more.
    pub(super) fn explanations(&self, now: i64) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        for (key, text) in self.input_holds() {
            let entry: &mut String = out.entry(key).or_default();
            entry.push_str(&text);
            entry.push('\n');
        }
        for (&id, run) in &self.runs {
            for (j, job) in run.jobs.iter().enumerate() {
                if job.phase != JobPhase::InEngine || out.len() >= 1000 {
                    continue;
                }
                let Ok(e) = self.engine.explain(engine_job(id, j)) else { continue };
                if e.pending_containers == 0 {
                    continue;
                }
                if let Some(text) = self.explain_in_words(id, j, &e, now) {
                    out.entry(format!("{id}/{j}")).or_default().push_str(&text);
                }
            }
        }
        out
    }
}

/// The runs holding running-app slots under a queue, gathered once per sample.
#[derive(Default)]
struct Holders {
    by_queue: HashMap<String, Held>,
}

#[derive(Clone, Default)]
struct Held {
    /// (name, tier) of runs with a started job under the queue.
    runs: Vec<(String, u8)>,
}

impl Holders {
    fn under(&mut self, actor: &Actor, queue: &str) -> Held {
        if let Some(h) = self.by_queue.get(queue) {
            return h.clone();
        }
        let prefix = format!("{queue}.");
        let mut held = Held::default();
        for (&id, r) in &actor.runs {
            let q = r.queue.to_string();
            if (q == queue || q.starts_with(&prefix) || queue == "root") && r.jobs.iter().any(|j| j.started) {
                held.runs.push((format!("{} (run {id}, tier {})", r.workflow, r.tier), r.tier));
            }
        }
        self.by_queue.insert(queue.to_string(), held.clone());
        held
    }
}

impl Held {
    /// "held by 3 running runs: a (run 1, tier 3), …", flagged when a tier-1 run waits behind
    /// lower tiers.
    fn sentence(&self, tier: u8) -> String {
        if self.runs.is_empty() {
            return String::new();
        }
        let names: Vec<&str> = self.runs.iter().take(HOLDERS_NAMED).map(|(n, _)| n.as_str()).collect();
        let more = self.runs.len().saturating_sub(HOLDERS_NAMED);
        let mut s = format!("held by {} running run(s): {}", self.runs.len(), names.join(", "));
        if more > 0 {
            s.push_str(&format!(" and {more} more"));
        }
        let lower = self.runs.iter().filter(|(_, t)| *t > tier).count();
        if tier == 1 && lower > 0 {
            s = format!("tier-1 work waiting behind lower tiers ({lower} of them): {s}");
        }
        s
    }
}
