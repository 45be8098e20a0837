//! The scheduling pass: due kills, fresh shares, held nodes served to their jobs, then
//! containers placed one at a time by walking the tree from root to a job, then preemption for
//! whoever is starved.
//!
//! Each placement descends from root choosing the most deserving child (`order.rs`) that still
//! has pending demand and is not exhausted in this pass. A job that cannot take its next
//! container (queue max, AM share, or no node with room) is set aside from its leaf's ready set
//! for the rest of the pass (`ready.rs`) — and, when it is below its fair share, reserves a node
//! (`reservation.rs`). A queue where nothing could be placed is exhausted for the pass, so every
//! pass ends after at most one failed attempt per job. A job whose next request is a gang places
//! the whole gang or none of it (`gang.rs`); under EASY backfilling the first gang that cannot
//! start gets a reserved start, which every later placement of the pass respects (`backfill.rs`).
//! No more containers than the container limit exist at once.

use std::cmp::{Ordering, Reverse};

use weir_model::{Policy, ResourceKind, Resources, Rounding, Time};

use crate::engine::Engine;
use crate::input::Request;
use crate::nodes::Ask;
use crate::order::{self, Standing};
use crate::state::{JobSlot, NodeSlot, QueueIx};

/// Why a job could not take its next container (kept for `explain`).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Blocker {
    QueueMax(QueueIx),
    AmShare {
        limit: Resources,
    },
    NoRoom,
    /// Capacity mode: the job's user holds more than its user limit in the leaf.
    UserLimit {
        limit: Resources,
    },
    /// The engine holds as many containers as its limit allows.
    ContainerLimit,
    /// Capacity mode: a request for a node label would pass `queue`'s max capacity in that
    /// label's partition (`capacity_labels.rs`; memory, MiB).
    LabelMax {
        queue: QueueIx,
        label: u32,
        max: u64,
        used: u64,
    },
}

impl Engine {
    /// Run one scheduling pass at `now` and return every decision made since the last call.
    pub fn schedule(&mut self, now: Time) -> Vec<crate::Decision> {
        if now > self.now {
            self.now = now;
        }
        self.pass += 1;
        self.unpark();
        self.shadow = None;
        self.refresh_bookings();
        self.backfill_tried = 0;
        self.carry_out_kills();
        self.capacity_preemption_round();
        self.time_out_gangs();
        self.refresh_shares();
        // Held nodes first, so that room a job waited for (a reservation, preempted containers)
        // is its own, and whatever it leaves is free for everyone in this same pass.
        self.serve_holds();
        self.place_guaranteed();
        self.place_all();
        if self.config.scheduler.preemption.enabled && !self.capacity_mode() {
            self.preempt();
        }
        // The next pass's list starts as large as this one's: growing it by doubling copied
        // every decision several times per pass (issue 22 §3).
        let room = self.decisions.len();
        std::mem::replace(&mut self.decisions, Vec::with_capacity(room))
    }

    /// The next time the engine needs `schedule` even if nothing else happens: a kill falling
    /// due, a starvation timeout expiring, or a starved job's next check. Starvation timers
    /// count only while utilization is above the preemption threshold: below it nothing can
    /// come of them until a container starts, which is itself an input.
    pub fn next_wakeup(&self) -> Option<Time> {
        let kill = self.kills.peek().map(|Reverse((t, _))| *t);
        let starve = self.starvation_timers.peek().map(|Reverse((t, _))| *t).filter(|_| self.gate_open);
        let gang = self.next_gang_timeout();
        let guarantee = self.next_guarantee_due();
        [kill, starve, gang, guarantee, self.capacity_round_wakeup()].into_iter().flatten().min()
    }

    fn place_all(&mut self) {
        // Requests that found no node in this pass; anything they cover will not either.
        let mut failed: Vec<Ask> = Vec::new();
        while self.queues[0].ready_jobs > 0 && !self.subtree_failed(0, &failed) && !self.backfill_spent() {
            if self.at_container_limit(1) {
                self.limited_pass = self.pass;
                break;
            }
            if !self.rekey_pending.is_empty() {
                self.flush_rekeys();
            }
            if !self.place_one(0, &mut failed) {
                break;
            }
        }
        self.restore_set_aside();
    }

    /// Whether `more` containers would take the engine past its container limit.
    pub(crate) fn at_container_limit(&self, more: usize) -> bool {
        self.containers.len() - self.free_containers.len() + more > self.container_limit
    }

    /// Under EASY, whether the pass has tried as many jobs after its head as `backfill_depth`
    /// allows (Slurm's backfill scheduler bounds its scan at `bf_max_job_test` jobs; Flux's queue
    /// policies at `queue-depth`): each one after the head means a walk of the nodes.
    fn backfill_spent(&self) -> bool {
        (self.shadow.is_some()
            || !self.bookings.is_empty()
            || self.shadow_less_head.is_some_and(|(p, _)| p == self.pass))
            && self.backfill_tried >= self.config.scheduler.backfill_depth
    }

    /// Place one container somewhere under `q`. False when nothing under it can be placed.
    fn place_one(&mut self, q: QueueIx, failed: &mut Vec<Ask>) -> bool {
        let placed = if self.queues[q as usize].is_leaf() {
            self.place_in_leaf(q, failed)
        } else {
            loop {
                let Some(child) = self.best_child(q, failed) else { break false };
                if self.place_one(child, failed) {
                    break true;
                }
            }
        };
        if !placed {
            // Failed jobs stay skipped and `failed` only grows, so this holds for the pass.
            self.exhaust(q);
        }
        placed
    }

    /// Whether every request under `q` is at least as large as one that found no node in this
    /// pass (anywhere, with no GPU fraction). The smallest-request lookup is skipped while
    /// nothing has failed.
    pub(crate) fn subtree_failed(&self, q: QueueIx, failed: &[Ask]) -> bool {
        !failed.is_empty() && {
            let smallest = self.smallest_request(q);
            failed.iter().any(|f| f.selector.0 == 0 && f.milli == 0 && f.r.fits_in(&smallest))
        }
    }

    pub(crate) fn standing(&self, q: QueueIx) -> Standing {
        let q = &self.queues[q as usize];
        // FSQueue.getStartTime is 0 for queues: ties go to the name.
        Standing { usage: q.usage, demand: q.demand(), min: q.min, weight: q.weight, start: 0 }
    }

    fn best_child(&mut self, parent: QueueIx, failed: &[Ask]) -> Option<QueueIx> {
        if self.capacity_mode() {
            return self.best_capacity_child(parent, failed);
        }
        let p = &self.queues[parent as usize];
        if p.policy != Policy::Drf {
            return self.first_fair_child(parent, failed);
        }
        let cluster = self.nodes.total;
        let mut best: Option<(QueueIx, Standing)> = None;
        for &c in &p.children {
            let cq = &self.queues[c as usize];
            if cq.ready_jobs == 0 || cq.exhausted_pass == self.pass || self.subtree_failed(c, failed) {
                continue;
            }
            let s = self.standing(c);
            let better = match &best {
                None => true,
                Some((b, bs)) => match order::compare(p.policy, &s, bs, &cluster) {
                    Ordering::Less => true,
                    Ordering::Greater => false,
                    Ordering::Equal => cq.name_rank < self.queues[*b as usize].name_rank,
                },
            };
            if better {
                best = Some((c, s));
            }
        }
        best.map(|(c, _)| c)
    }

    /// `best_child` under a fair parent (`order::compare` under `fair`) by comparing every
    /// child, each child's key worked out once: what `first_fair_child` must find (debug builds
    /// check it on every descent).
    pub(crate) fn best_fair_child_by_scan(&self, parent: QueueIx, failed: &[Ask]) -> Option<QueueIx> {
        let mut best: Option<(QueueIx, order::FairKey)> = None;
        for &c in &self.queues[parent as usize].children {
            let cq = &self.queues[c as usize];
            if cq.ready_jobs == 0 || cq.exhausted_pass == self.pass || self.subtree_failed(c, failed) {
                continue;
            }
            let k = order::FairKey::of(&self.standing(c));
            let better = match &best {
                None => true,
                Some((b, bk)) => match k.cmp(bk) {
                    Ordering::Less => true,
                    Ordering::Greater => false,
                    Ordering::Equal => cq.name_rank < self.queues[*b as usize].name_rank,
                },
            };
            if better {
                best = Some((c, k));
            }
        }
        best.map(|(c, _)| c)
    }

    /// Order of jobs within a leaf: less means served first (the ready sets' order).
    pub(crate) fn compare_jobs(&self, a: JobSlot, b: JobSlot) -> Ordering {
        let (ka, kb) = (self.job_order_key(a), self.job_order_key(b));
        ka.cmp(&kb)
    }

    fn place_in_leaf(&mut self, leaf: QueueIx, failed: &mut Vec<Ask>) -> bool {
        while let Some(((_, job), am)) = self.first_ready(leaf, failed) {
            if self.queues[leaf as usize].holders == 0 && self.subtree_failed(leaf, failed) {
                // Every request left here is at least one that found no node: skipping its jobs
                // one by one would cost a step per waiting job for nothing.
                break;
            }
            if self.backfill_spent() {
                return false;
            }
            if self.backfill_counts() {
                self.backfill_tried += 1;
            }
            // Limits first, from the next container's needs as the ready set holds them.
            let Some((_, ask, _)) = self.job(job).ready else { break };
            // A request at least as large as one that found no node fails too (unless its job
            // holds a node): known without reading the job's record.
            let result = if self.queues[leaf as usize].holders == 0 && dominated(failed, &ask) {
                Err(Blocker::NoRoom)
            } else {
                self.limits_allow_for(leaf, &ask.r, am)
                    .and_then(|()| self.capacity_limits_allow(job))
                    .and_then(|()| self.try_place(job, failed))
            };
            match result {
                Ok(()) => return true,
                Err(Blocker::AmShare { limit })
                    if !(self.queues[leaf as usize].am_usage + self.smallest_am(leaf)).fits_in(&limit) =>
                {
                    // Not even the smallest AM waiting here fits, and the limit only tightens
                    // as the pass places containers: the whole AM lane waits for the next pass.
                    self.queues[leaf as usize].am_blocked_pass = self.pass;
                }
                Err(_) => self.skip(job),
            }
        }
        false
    }

    /// Why `job` cannot take its next container now, if it cannot.
    pub(crate) fn blocker(&self, job: JobSlot) -> Option<Blocker> {
        let front = *self.job(job).requests.front()?;
        if front.gang != 0 {
            return self.gang_blocker(job);
        }
        if let Err(b) = self.limits_allow(job) {
            return Some(b);
        }
        if self.at_container_limit(1) {
            return Some(Blocker::ContainerLimit);
        }
        self.node_for(job, &front).is_none().then_some(Blocker::NoRoom)
    }

    /// Whether the job's next container is its application master: it runs none, and the
    /// request is marked as one or it is the job's very first container. A gang is never one.
    pub(crate) fn next_is_am(&self, job: JobSlot) -> bool {
        let j = self.job(job);
        let Some(front) = j.requests.front() else { return !j.am_running && !j.am_started };
        front.gang == 0 && !j.am_running && (!j.am_started || front.am)
    }

    /// The most a leaf's application masters may hold (`FSLeafQueue.computeMaxAMResource`):
    /// its fair share, where a resource's share is 0 taking min(what the cluster has free,
    /// the leaf's max) instead, times `share`, rounded up. A fair parent computes memory shares
    /// only (`FairSharePolicy.computeShares`), so under one the cpu limit comes from free cores.
    pub(crate) fn am_limit(&self, leaf: QueueIx, share: f64) -> Resources {
        if self.capacity_mode() {
            return self.capacity_am_limit(leaf, share);
        }
        let l = &self.queues[leaf as usize];
        let mut base = l.instantaneous;
        if l.parent_policy != Policy::Drf {
            base = Resources { memory: base.memory, ..Resources::ZERO };
        }
        let available = self.nodes.total - self.nodes.used;
        let share = match self.config.scheduler.rounding {
            Rounding::Yarn => f64::from(share as f32),
            Rounding::Exact => share,
        };
        let mut limit = Resources::ZERO;
        for k in ResourceKind::ALL {
            let v = match base.get(k) {
                0 => available.get(k).min(l.max.get(k)),
                v => v,
            };
            limit.set(k, (v as f64 * share).ceil() as u64);
        }
        limit
    }

    /// A node for a container of `request` of `job`: one held for it first, else the best fit
    /// — among the nodes where it does not delay the EASY reservation, if there is one and it
    /// is not this job's.
    pub(crate) fn node_for(&self, job: JobSlot, request: &Request) -> Option<NodeSlot> {
        let ask = request.ask();
        let j = self.job(job);
        if let Some(n) = j.reservations.iter().copied().find(|&n| self.nodes.fits(n, &ask)) {
            return Some(n);
        }
        if !self.bookings.is_empty() {
            let end = request.walltime.map(|w| self.now.plus(w));
            let bookings = &self.bookings;
            return self.nodes.best_fit_where(&ask, |n| {
                bookings.iter().filter(|b| b.job != job).all(|b| b.allows(n, &ask.r, end))
            });
        }
        match self.shadow.as_ref().filter(|s| s.job != job) {
            Some(shadow) => {
                let end = request.walltime.map(|w| self.now.plus(w));
                self.nodes.best_fit_where(&ask, |n| shadow.allows(n, &ask.r, end))
            }
            None => self.nodes.best_fit(&ask),
        }
    }

    /// Queue maxes on the path (`FSQueue.fitsInMaxShare`) and, for an application master, the
    /// leaf's AM share (`FSLeafQueue.canRunAppAM`), for the job's next container.
    pub(crate) fn limits_allow(&self, job: JobSlot) -> Result<(), Blocker> {
        let j = self.job(job);
        match j.requests.front() {
            Some(r) => self
                .limits_allow_for(j.leaf, &r.resources, self.next_is_am(job))
                .and_then(|()| self.capacity_limits_allow(job)),
            None => Ok(()),
        }
    }

    /// Capacity mode's own limits for the job's next container: its user's limit in the leaf,
    /// then the max capacity in its label's partition. Fair mode has neither, so one test of
    /// the mode stands for both calls (issue 22 §2: they cost every placement attempt).
    #[inline]
    pub(crate) fn capacity_limits_allow(&self, job: JobSlot) -> Result<(), Blocker> {
        if !self.capacity_mode() {
            return Ok(());
        }
        self.user_limit_allows(job).and_then(|()| self.label_max_allows(job))
    }

    /// Capacity mode: whether the job's user is within its user limit in the leaf
    /// (`AbstractLeafQueue.canAssignToUser`: blocked only while it holds more than the limit).
    /// Always true in fair mode.
    pub(crate) fn user_limit_allows(&self, job: JobSlot) -> Result<(), Blocker> {
        match self.user_standing(job) {
            Some((limit, used)) if used.memory > limit.memory => Err(Blocker::UserLimit { limit }),
            _ => Ok(()),
        }
    }

    /// The same for a container of `r` in `leaf`, an AM or not.
    pub(crate) fn limits_allow_for(&self, leaf: QueueIx, r: &Resources, am: bool) -> Result<(), Blocker> {
        let mut q = Some(leaf);
        while let Some(ix) = q {
            let queue = &self.queues[ix as usize];
            if !(queue.usage + *r).fits_in(&queue.max) {
                return Err(Blocker::QueueMax(ix));
            }
            q = queue.parent;
        }
        let l = &self.queues[leaf as usize];
        if let (true, Some(share)) = (am, l.am_share) {
            let limit = self.am_limit(leaf, share);
            if !(l.am_usage + *r).fits_in(&limit) {
                return Err(Blocker::AmShare { limit });
            }
        }
        Ok(())
    }

    /// Start the job's next container on a node, its limits already checked; a gang goes to
    /// `gang.rs`.
    fn try_place(&mut self, job: JobSlot, failed: &mut Vec<Ask>) -> Result<(), Blocker> {
        let Some(front) = self.job(job).requests.front().copied() else {
            return Err(Blocker::NoRoom);
        };
        if front.gang != 0 {
            return self.try_place_gang(job, failed);
        }
        let ask = front.ask();
        let has_hold = !self.job(job).reservations.is_empty();
        if !has_hold && dominated(failed, &ask) {
            return Err(Blocker::NoRoom);
        }
        let Some(node) = self.node_for(job, &front) else {
            if !has_hold && self.shadow.is_none() && self.bookings.is_empty() {
                // Keep `failed` minimal: drop entries the new failure covers. (Under an EASY
                // reservation a request may find no node only because of it: not a failure
                // of its size.)
                failed.retain(|f| !ask.covers(f));
                failed.push(ask);
            }
            self.try_reserve(job, &ask);
            return Err(Blocker::NoRoom);
        };
        self.start_container(job, node);
        Ok(())
    }

    /// Start the job's next requested container on `node`.
    pub(crate) fn start_container(&mut self, job: JobSlot, node: NodeSlot) {
        let am = self.next_is_am(job);
        let Some(front) = self.job(job).requests.front().copied() else { return };
        let gpu = self.nodes.allocate(node, &front.ask());
        self.add_container(job, 0, node, gpu, am, false);
    }
}

/// Whether some request that found no node covers `ask` (see [`Ask::covers`]).
pub(crate) fn dominated(failed: &[Ask], ask: &Ask) -> bool {
    failed.iter().any(|f| f.covers(ask))
}
