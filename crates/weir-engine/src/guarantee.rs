//! Per-job guarantees: an allocation a host (weir-slo's SLO controller) sets for one job and
//! changes while it runs, honoured like a min share for that job alone.
//!
//! - **Placement.** At every pass, after held nodes are served and before the walk from root,
//!   each guaranteed job below its guarantee (by its leaf's policy: memory for `fair`, the
//!   dominant share for `drf`) takes its next containers where they fit, ahead of fair share,
//!   until it reaches the guarantee. Queue maxes, the AM share, user limits and the container
//!   limit still apply. Beyond its guarantee the job competes at fair share like any other.
//! - **Preemption.** With preemption enabled, a job below min(guarantee, demand) past its leaf's
//!   min-share preemption timeout (`min_share_preemption_timeout`; a leaf without one preempts at
//!   once) has containers taken for it as for min-share starvation (`preemption.rs`, reason
//!   [`Starvation::JobGuarantee`](crate::Starvation::JobGuarantee)). The clock follows YARN's
//!   `lastTimeAtMinShare`: the last time the job was seen at its target, looked at only while
//!   utilization is above the preemption threshold and the job has pending demand.
//! - **Protection.** No preemption takes a guaranteed job below max(fair share, guarantee).
//!
//! Without guarantees nothing here runs and the engine decides exactly as before.

use std::collections::BTreeMap;

use weir_model::{Duration, Resources, Time};

use crate::decision::Starvation;
use crate::engine::Engine;
use crate::error::EngineError;
use crate::ids::JobId;
use crate::order::{below, smaller};
use crate::state::{JobSlot, JobState};

/// One job's guarantee and its starvation clock.
#[derive(Clone, Debug)]
pub(crate) struct Guarantee {
    pub resources: Resources,
    /// The last time it was seen at min(guarantee, demand); `None` while it is there.
    pub short_since: Option<Time>,
}

/// Guarantees by job slot (ordered: jobs are served in slot order, a fixed tie-break), and
/// whether one was set or changed since the last pass (the host should call `schedule` soon:
/// `next_wakeup` says so).
#[derive(Debug, Default)]
pub(crate) struct Guarantees {
    pub jobs: BTreeMap<JobSlot, Guarantee>,
    pub changed: bool,
}

impl Engine {
    /// Guarantee `job` at least `resources` from now on (zero: no guarantee). Replaces an earlier
    /// guarantee; the starvation clock carries on. Applied by the next `schedule`.
    pub fn set_job_guarantee(
        &mut self,
        now: Time,
        job: JobId,
        resources: Resources,
    ) -> Result<(), EngineError> {
        self.advance(now)?;
        let slot = self.slot_of(job)?;
        self.guarantees.changed = true;
        if resources.is_zero() {
            self.guarantees.jobs.remove(&slot);
        } else {
            self.guarantees
                .jobs
                .entry(slot)
                .and_modify(|g| g.resources = resources)
                .or_insert(Guarantee { resources, short_since: None });
        }
        Ok(())
    }

    /// The guarantee `job` holds, if any.
    pub fn job_guarantee(&self, job: JobId) -> Option<Resources> {
        let slot = self.job_by_id.get(&job)?;
        self.guarantees.jobs.get(slot).map(|g| g.resources)
    }

    /// What preemption may not take the job below: its fair share, or its guarantee if larger.
    pub(crate) fn protected_share(&self, slot: JobSlot) -> Resources {
        let share = self.fair_share_of(slot);
        match self.guarantees.jobs.get(&slot) {
            Some(g) => share.component_max(&g.resources),
            None => share,
        }
    }

    /// Whether the job's usage is below its guarantee by its leaf's policy.
    fn below_guarantee(&self, slot: JobSlot, guarantee: &Resources) -> bool {
        let j = self.job(slot);
        let policy = self.queues[j.leaf as usize].policy;
        below(policy, &j.usage, guarantee, &self.nodes.total)
    }

    /// Place containers for guaranteed jobs below their guarantee, ahead of fair share.
    pub(crate) fn place_guaranteed(&mut self) {
        self.guarantees.changed = false;
        if self.guarantees.jobs.is_empty() {
            return;
        }
        let jobs: Vec<(JobSlot, Resources)> =
            self.guarantees.jobs.iter().map(|(&s, g)| (s, g.resources)).collect();
        for (slot, guarantee) in jobs {
            while self.job(slot).state == JobState::Runnable
                && self.below_guarantee(slot, &guarantee)
                && !self.at_container_limit(1)
            {
                let Some(front) = self.job(slot).requests.front().copied() else { break };
                // A gang starts whole through its own path (`gang.rs`).
                if front.gang != 0 || self.limits_allow(slot).is_err() {
                    break;
                }
                let Some(node) = self.node_for(slot, &front) else { break };
                self.start_container(slot, node);
            }
        }
    }

    /// The guarantee's timeout: the leaf's min-share preemption timeout, else none (at once).
    fn guarantee_timeout(&self, slot: JobSlot) -> Duration {
        self.queues[self.job(slot).leaf as usize].min_share_timeout.unwrap_or_default()
    }

    /// min(guarantee, demand) − usage, when the job is looked at (runnable, with pending
    /// demand); zero otherwise.
    fn guarantee_shortfall(&self, slot: JobSlot, guarantee: &Resources) -> Resources {
        let j = self.job(slot);
        if j.state != JobState::Runnable || j.pending_containers == 0 {
            return Resources::ZERO;
        }
        let q = &self.queues[j.leaf as usize];
        let target = smaller(q.policy, *guarantee, j.demand(), &self.nodes.total);
        if below(q.policy, &j.usage, &target, &self.nodes.total) {
            target.saturating_sub(&j.usage)
        } else {
            Resources::ZERO
        }
    }

    /// Preemption for guaranteed jobs below their guarantee past the timeout. Called from
    /// `preempt` while the utilization gate is open.
    pub(crate) fn preempt_for_guarantees(&mut self) {
        if self.guarantees.jobs.is_empty() {
            return;
        }
        let now = self.now;
        let jobs: Vec<(JobSlot, Resources)> =
            self.guarantees.jobs.iter().map(|(&s, g)| (s, g.resources)).collect();
        let mut due = Vec::new();
        for (slot, guarantee) in jobs {
            let short = self.guarantee_shortfall(slot, &guarantee);
            let timeout = self.guarantee_timeout(slot);
            let g = self.guarantees.jobs.get_mut(&slot).expect("listed");
            if short.is_zero() {
                g.short_since = None;
                continue;
            }
            let since = *g.short_since.get_or_insert(now);
            // After preemption was tried for it, it waits out the same delay as a starved job.
            if since.plus(timeout) <= now && self.job(slot).recheck_at <= now {
                due.push((slot, short));
            }
        }
        if due.is_empty() {
            return;
        }
        let mut candidates = self.candidates();
        for (slot, short) in due {
            let amount = short.saturating_sub(&self.job(slot).incoming);
            self.preempt_for(slot, amount, Starvation::JobGuarantee, &mut candidates);
            self.preemption_tried(slot);
        }
    }

    /// For `next_wakeup`: now, if a guarantee changed since the last pass; else when a
    /// guaranteed job's clock runs out, if it has not yet and the utilization gate is open.
    pub(crate) fn next_guarantee_due(&self) -> Option<Time> {
        if self.guarantees.changed {
            return Some(self.now);
        }
        if !self.gate_open {
            return None;
        }
        self.guarantees
            .jobs
            .iter()
            .filter_map(|(&s, g)| g.short_since.map(|t| t.plus(self.guarantee_timeout(s))))
            .filter(|&t| t > self.now)
            .min()
    }

    /// The explain line of a guaranteed job: what it is guaranteed, what it has, what follows.
    pub(crate) fn guarantee_reason(&self, slot: JobSlot) -> Option<String> {
        let g = self.guarantees.jobs.get(&slot)?;
        let j = self.job(slot);
        let running = j.containers.len();
        let size = j.requests.front().map(|r| r.resources).or_else(|| {
            j.containers.iter().next_back().and_then(|&(_, c)| self.container(c)).map(|c| c.resources)
        });
        let count = size.map_or(String::new(), |s| {
            format!(" ({} containers of {s})", crate::preemption::whole_containers(&g.resources, &s))
        });
        let mut line = format!(
            "guaranteed {}{count} by the SLO controller, has {} ({running} containers)",
            g.resources, j.usage
        );
        if self.below_guarantee(slot, &g.resources) {
            let leaf = &self.queues[j.leaf as usize];
            line.push_str(&format!(
                ": its containers are placed ahead of fair share, and if it stays below its guarantee \
                 for {} (min_share_preemption_timeout of {}) containers above their own share are \
                 preempted for it",
                self.guarantee_timeout(slot),
                leaf.path
            ));
            if let Some(since) = g.short_since {
                line.push_str(&format!("; below it since {since}"));
            }
        } else {
            line.push_str(": at its guarantee; beyond it the job competes at fair share");
        }
        Some(line)
    }
}
