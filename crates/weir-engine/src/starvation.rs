//! Starvation, as YARN's Fair Scheduler tracks it (`FSAppAttempt.fairShareStarvation`,
//! `FSLeafQueue.updateStarvedApps`, `FairScheduler.update`).
//!
//! A job's fair-share target is componentwise min(fair share × threshold, demand); it is
//! starving while its usage is below that target (memory for `fair`, the dominant share for
//! `drf`). A leaf's min-share target is the smaller (by its policy) of its min share and its
//! demand. Each has a clock, YARN's `lastTimeAtFairShare` / `lastTimeAtMinShare`: the last time
//! it was seen at its target. It is starved once its clock is older than its timeout.
//!
//! YARN looks only while cluster utilization is above the preemption threshold, and looks at a
//! job only while it has pending demand and is not waiting out the delay after preemption was
//! tried for it (`FSLeafQueue.fetchAppsWithDemand`, `FSAppAttempt.shouldCheckForStarvation`).
//! A clock stops while nobody looks: a job that asks for more after a quiet stage longer than
//! its timeout is starved at once. After preemption is tried for a job it is not looked at for
//! kill_wait + 4 s (four node heartbeats) + 10 s (`FSPreemptionThread`'s
//! `delayBeforeNextStarvationCheck` with YARN's defaults).
//!
//! The engine is event-driven: clocks are updated when something a job's target or usage
//! depends on changes, and timers wake it when a clock will run out or a delay ends.

use std::cmp::Reverse;

use weir_model::{Duration, Resources, Time};

use crate::engine::{Engine, Starver};
use crate::order::{below, smaller};
use crate::state::{JobSlot, JobState, QueueIx};

/// Four node heartbeats at YARN's default 1 s: the allocation delay after a kill.
const ALLOCATION_DELAY: Duration = Duration(4_000);
/// YARN's `waitTimeBeforeNextStarvationCheck` default.
const NEXT_CHECK_WAIT: Duration = Duration(10_000);

impl Engine {
    pub(crate) fn watch_starvation(&mut self, slot: JobSlot) {
        if self.config.scheduler.preemption.enabled {
            self.starvation_dirty.insert(slot);
        }
    }

    /// Cluster utilization as YARN's `shouldAttemptPreemption` measures it: the larger of the
    /// memory and cpu used, as Java floats (gpus do not count).
    pub(crate) fn utilization(&self) -> f32 {
        let (u, t) = (self.nodes.used, self.nodes.total);
        let ratio = |used: u64, total: u64| if total == 0 { 0.0 } else { used as f32 / total as f32 };
        ratio(u.memory, t.memory).max(ratio(u.cpu, t.cpu))
    }

    /// Whether starvation is looked at: utilization strictly above the threshold.
    pub(crate) fn preemption_gate(&self) -> bool {
        self.utilization() > self.config.scheduler.preemption.utilization_threshold as f32
    }

    /// componentwise min(fair share × threshold, demand) (`fairShareStarvation`'s `fairDemand`).
    pub(crate) fn fair_target(&self, slot: JobSlot) -> Resources {
        let j = self.job(slot);
        let threshold = self.queues[j.leaf as usize].fair_share_threshold;
        self.fair_share_of(slot).scale(threshold).component_min(&j.demand())
    }

    /// The smaller of the leaf's min share and its demand (`minShareStarvation`'s `desiredShare`).
    pub(crate) fn min_target(&self, leaf: QueueIx) -> Resources {
        let q = &self.queues[leaf as usize];
        smaller(q.policy, q.min, q.demand(), &self.nodes.total)
    }

    /// Whether YARN would look at this job's starvation now.
    pub(crate) fn observed(&self, slot: JobSlot) -> bool {
        let j = self.job(slot);
        j.state == JobState::Runnable && j.pending_containers > 0 && j.recheck_at <= self.now
    }

    fn fair_starving(&self, slot: JobSlot) -> bool {
        let j = self.job(slot);
        let q = &self.queues[j.leaf as usize];
        q.fair_share_timeout.is_some()
            && below(q.policy, &j.usage, &self.fair_target(slot), &self.nodes.total)
    }

    fn min_starving(&self, leaf: QueueIx) -> bool {
        let q = &self.queues[leaf as usize];
        q.min_share_timeout.is_some()
            && !q.min.is_zero()
            && below(q.policy, &q.usage, &self.min_target(leaf), &self.nodes.total)
    }

    /// After preemption was tried for a job: not looked at again before the delay is over.
    pub(crate) fn preemption_tried(&mut self, slot: JobSlot) {
        let wait = self.config.scheduler.preemption.kill_wait;
        let at = self.now.plus(wait).plus(ALLOCATION_DELAY).plus(NEXT_CHECK_WAIT);
        self.job_mut(slot).recheck_at = at;
        self.starvation_timers.push(Reverse((at, Starver::Job(slot))));
        self.starvation_dirty.insert(slot);
    }

    /// Bring every clock up to date and the set of starved jobs and leaves with it. Called
    /// only while the utilization gate is open; `self.gate_open` still says whether it was open
    /// at the previous pass.
    pub(crate) fn update_starvation(&mut self) {
        let now = self.now;
        // The last time anyone looked: now, or when the gate closed.
        let seen = if self.gate_open { now } else { self.gate_closed_at };
        while let Some(&Reverse((at, who))) = self.starvation_timers.peek() {
            if at > now {
                break;
            }
            self.starvation_timers.pop();
            match who {
                Starver::Job(s) => self.starvation_dirty.insert(s),
                Starver::Leaf(l) => self.min_share_dirty.insert(l),
            };
        }
        let dirty = std::mem::take(&mut self.starvation_dirty);
        for slot in dirty {
            if self.jobs[slot as usize].is_none() {
                continue;
            }
            let leaf = self.job(slot).leaf;
            self.min_share_dirty.insert(leaf);
            let observed = self.observed(slot);
            let starving = observed && self.fair_starving(slot);
            let timeout = self.queues[leaf as usize].fair_share_timeout.unwrap_or_default();
            let j = self.job_mut(slot);
            if observed && !starving {
                j.fair_clock = None;
            } else if j.fair_clock.is_none() {
                j.fair_clock = Some(seen);
            }
            let due = j.fair_clock.map(|t| t.plus(timeout));
            self.settle(Starver::Job(slot), starving, due);
        }
        let leaves = std::mem::take(&mut self.min_share_dirty);
        for leaf in leaves {
            let starving = self.min_starving(leaf);
            let timeout = self.queues[leaf as usize].min_share_timeout.unwrap_or_default();
            let q = &mut self.queues[leaf as usize];
            if !starving {
                q.min_clock = None;
            } else if q.min_clock.is_none() {
                q.min_clock = Some(seen);
            }
            let due = q.min_clock.map(|t| t.plus(timeout));
            self.settle(Starver::Leaf(leaf), starving, due);
        }
    }

    /// Starved if starving and its clock ran out; else a timer for when it will (one per due
    /// time: `timer` remembers the last one set).
    fn settle(&mut self, who: Starver, starving: bool, due: Option<Time>) {
        match due.filter(|_| starving) {
            Some(at) if at <= self.now => {
                self.starved.insert(who);
            }
            Some(at) => {
                self.starved.remove(&who);
                let timer = match who {
                    Starver::Job(s) => &mut self.job_mut(s).fair_timer,
                    Starver::Leaf(l) => &mut self.queues[l as usize].min_timer,
                };
                if *timer != Some(at) {
                    *timer = Some(at);
                    self.starvation_timers.push(Reverse((at, who)));
                }
            }
            None => {
                self.starved.remove(&who);
            }
        }
    }

    /// What each starved job of a leaf needs, in the leaf's order (`updateStarvedApps`):
    /// fair-share starvation (target − usage) for the jobs starved on it; then the leaf's
    /// min-share starvation (target − usage) less all of that, handed out in order, each job
    /// taking at most its pending demand beyond its own fair-share starvation. Returns
    /// (job, fair-share part, min-share part) for every job with something.
    pub(crate) fn starvation_in(&self, leaf: QueueIx) -> Vec<(JobSlot, Resources, Resources)> {
        let q = &self.queues[leaf as usize];
        let mut jobs: Vec<JobSlot> = q.runnable.iter().map(|k| k.3).filter(|&s| self.observed(s)).collect();
        jobs.sort_by(|&a, &b| self.compare_jobs(a, b));
        let fair: Vec<Resources> = jobs
            .iter()
            .map(|&s| {
                if self.starved.contains(&Starver::Job(s)) {
                    self.fair_target(s) - self.job(s).usage
                } else {
                    Resources::ZERO
                }
            })
            .collect();
        let mut min = if self.starved.contains(&Starver::Leaf(leaf)) {
            let netted = fair.iter().fold(Resources::ZERO, |a, &f| a + f);
            self.min_target(leaf) - q.usage - netted
        } else {
            Resources::ZERO
        };
        let mut out = Vec::new();
        for (&s, &f) in jobs.iter().zip(&fair) {
            let mut give = Resources::ZERO;
            if !min.is_zero() {
                let wants = self.job(s).pending - f;
                // YARN subtracts the remainder from the job's share here (appMinShare − pending)
                // where it means to give the remainder; weir gives the remainder.
                if below(q.policy, &min, &wants, &self.nodes.total) {
                    give = min;
                    min = Resources::ZERO;
                } else {
                    give = wants;
                    min -= wants;
                }
            }
            if !f.is_zero() || !give.is_zero() {
                out.push((s, f, give));
            }
        }
        out
    }
}
