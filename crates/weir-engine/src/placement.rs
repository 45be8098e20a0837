//! The scheduling pass: due kills, fresh shares, held nodes served to their jobs, then
//! containers placed one at a time by walking the tree from root to a job, then preemption for
//! whoever is starved.
//!
//! Each placement descends from root choosing the most deserving child (`order.rs`) that still
//! has pending demand and is not exhausted in this pass. A job that cannot take its next
//! container (queue max, AM share, or no node with room) is skipped for the rest of the pass
//! (`ready.rs`'s cursors) — and, when it is below its fair share, reserves a node
//! (`reservation.rs`). A queue where nothing could be placed is exhausted for the pass, so every
//! pass ends after at most one failed attempt per job.

use std::cmp::{Ordering, Reverse};

use weir_model::{Policy, ResourceKind, Resources, Rounding, Time};

use crate::decision::Decision;
use crate::engine::Engine;
use crate::nodes::Hold;
use crate::order::{self, Standing};
use crate::state::{Container, JobSlot, NodeSlot, QueueIx};

/// Why a job could not take its next container (kept for `explain`).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Blocker {
    QueueMax(QueueIx),
    AmShare { limit: Resources },
    NoRoom,
}

impl Engine {
    /// Run one scheduling pass at `now` and return every decision made since the last call.
    pub fn schedule(&mut self, now: Time) -> Vec<crate::Decision> {
        if now > self.now {
            self.now = now;
        }
        self.pass += 1;
        self.carry_out_kills();
        self.refresh_shares();
        // Held nodes first, so that room a job waited for (a reservation, preempted containers)
        // is its own, and whatever it leaves is free for everyone in this same pass.
        self.serve_holds();
        self.place_all();
        if self.config.scheduler.preemption.enabled {
            self.preempt();
        }
        std::mem::take(&mut self.decisions)
    }

    /// The next time the engine needs `schedule` even if nothing else happens: a kill falling
    /// due, a starvation timeout expiring, or a starved job's next check. Starvation timers
    /// count only while utilization is above the preemption threshold: below it nothing can
    /// come of them until a container starts, which is itself an input.
    pub fn next_wakeup(&self) -> Option<Time> {
        let kill = self.kills.peek().map(|Reverse((t, _))| *t);
        let starve = self.starvation_timers.peek().map(|Reverse((t, _))| *t).filter(|_| self.gate_open);
        match (kill, starve) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn place_all(&mut self) {
        // Requests that found no node in this pass; anything at least as large will not either.
        let mut failed: Vec<Resources> = Vec::new();
        while self.queues[0].ready_jobs > 0 && !self.subtree_failed(0, &failed) {
            if !self.place_one(0, &mut failed) {
                break;
            }
        }
    }

    /// Place one container somewhere under `q`. False when nothing under it can be placed.
    fn place_one(&mut self, q: QueueIx, failed: &mut Vec<Resources>) -> bool {
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
            self.queues[q as usize].exhausted_pass = self.pass;
        }
        placed
    }

    /// Whether every request under `q` is at least as large as one that found no node in this
    /// pass. The smallest-request lookup is skipped while nothing has failed.
    fn subtree_failed(&self, q: QueueIx, failed: &[Resources]) -> bool {
        !failed.is_empty() && dominated(failed, &self.smallest_request(q))
    }

    fn standing(&self, q: QueueIx) -> Standing {
        let q = &self.queues[q as usize];
        // FSQueue.getStartTime is 0 for queues: ties go to the name.
        Standing { usage: q.usage, demand: q.demand(), min: q.min, weight: q.weight, start: 0 }
    }

    fn best_child(&self, parent: QueueIx, failed: &[Resources]) -> Option<QueueIx> {
        let p = &self.queues[parent as usize];
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
                    Ordering::Equal => cq.name < self.queues[*b as usize].name,
                },
            };
            if better {
                best = Some((c, s));
            }
        }
        best.map(|(c, _)| c)
    }

    /// Order of jobs within a leaf: less means served first (the ready sets' order).
    pub(crate) fn compare_jobs(&self, a: JobSlot, b: JobSlot) -> Ordering {
        let (ka, kb) = (self.job_order_key(a), self.job_order_key(b));
        ka.cmp(&kb)
    }

    fn place_in_leaf(&mut self, leaf: QueueIx, failed: &mut Vec<Resources>) -> bool {
        while let Some(((_, job, shape), am)) = self.first_ready(leaf) {
            if self.queues[leaf as usize].holders == 0 && self.subtree_failed(leaf, failed) {
                // Every request left here is at least one that found no node: skipping its jobs
                // one by one would cost a step per waiting job for nothing.
                break;
            }
            // Limits first, from the entry alone: most failures never read the job's record.
            let r: Resources = shape.into();
            // A request at least as large as one that found no node fails too (unless its job
            // holds a node): known without reading the job's record.
            let result = if self.queues[leaf as usize].holders == 0 && dominated(failed, &r) {
                Err(Blocker::NoRoom)
            } else {
                self.limits_allow_for(leaf, &r, am).and_then(|()| self.try_place(job, failed))
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
                Err(_) => self.skip(leaf, job),
            }
        }
        false
    }

    /// Why `job` cannot take its next container now, if it cannot.
    pub(crate) fn blocker(&self, job: JobSlot) -> Option<Blocker> {
        let r = self.job(job).requests.front()?.resources;
        if let Err(b) = self.limits_allow(job) {
            return Some(b);
        }
        self.node_for(job, &r).is_none().then_some(Blocker::NoRoom)
    }

    /// Whether the job's next container is its application master: it runs none, and the
    /// request is marked as one or it is the job's very first container.
    pub(crate) fn next_is_am(&self, job: JobSlot) -> bool {
        let j = self.job(job);
        !j.am_running && (!j.am_started || j.requests.front().is_some_and(|r| r.am))
    }

    /// The most a leaf's application masters may hold (`FSLeafQueue.computeMaxAMResource`):
    /// its fair share, where a resource's share is 0 taking min(what the cluster has free,
    /// the leaf's max) instead, times `share`, rounded up. A fair parent computes memory shares
    /// only (`FairSharePolicy.computeShares`), so under one the cpu limit comes from free cores.
    pub(crate) fn am_limit(&self, leaf: QueueIx, share: f64) -> Resources {
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

    /// A node for the job's next container: one held for it first, else the best fit.
    pub(crate) fn node_for(&self, job: JobSlot, r: &Resources) -> Option<NodeSlot> {
        let j = self.job(job);
        j.reservations.iter().copied().find(|&n| self.nodes.fits(n, r)).or_else(|| self.nodes.best_fit(r))
    }

    /// Queue maxes on the path (`FSQueue.fitsInMaxShare`) and, for an application master, the
    /// leaf's AM share (`FSLeafQueue.canRunAppAM`), for the job's next container.
    pub(crate) fn limits_allow(&self, job: JobSlot) -> Result<(), Blocker> {
        let j = self.job(job);
        match j.requests.front() {
            Some(r) => self.limits_allow_for(j.leaf, &r.resources, self.next_is_am(job)),
            None => Ok(()),
        }
    }

    /// The same for a container of `r` in `leaf`, an AM or not.
    fn limits_allow_for(&self, leaf: QueueIx, r: &Resources, am: bool) -> Result<(), Blocker> {
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

    /// Start the job's next container on a node, its limits already checked.
    fn try_place(&mut self, job: JobSlot, failed: &mut Vec<Resources>) -> Result<(), Blocker> {
        let Some(r) = self.job(job).requests.front().map(|r| r.resources) else {
            return Err(Blocker::NoRoom);
        };
        let has_hold = !self.job(job).reservations.is_empty();
        if !has_hold && dominated(failed, &r) {
            return Err(Blocker::NoRoom);
        }
        let Some(node) = self.node_for(job, &r) else {
            if !has_hold {
                // Keep `failed` minimal: drop entries the new, smaller failure covers.
                failed.retain(|f| !r.fits_in(f));
                failed.push(r);
            }
            self.try_reserve(job, &r);
            return Err(Blocker::NoRoom);
        };
        self.start_container(job, node);
        Ok(())
    }

    /// Start the job's next requested container on `node`.
    pub(crate) fn start_container(&mut self, job: JobSlot, node: NodeSlot) {
        let am = self.next_is_am(job);
        let seq = self.next_seq;
        self.next_seq += 1;
        let Some(front) = self.job(job).requests.front().copied() else { return };
        let r = front.resources;
        let id =
            self.new_container(|id| Container { id, job, node, resources: r, am, seq, preemption: None });
        self.nodes.allocate(node, &r);
        if self.nodes.slots[node as usize].hold == Some((job, Hold::Reserved)) {
            // FSAppAttempt.assignContainer: an allocation on a reserved node ends the reservation.
            self.release_hold(node, job, true);
        }
        let j = self.job_mut(job);
        if let Some(f) = j.requests.front_mut() {
            f.count -= 1;
            if f.count == 0 {
                j.requests.pop_front();
            }
        }
        j.pending -= r;
        j.pending_containers -= 1;
        j.usage += r;
        j.am_started = true;
        j.am_running |= am;
        j.containers.insert((seq, id));
        let (leaf, job_id, first) = (j.leaf, j.id, j.containers.len() == 1);
        if first {
            self.queues[leaf as usize].holding.insert(job);
        }
        self.total_pending -= r;
        let mut q = Some(leaf);
        while let Some(ix) = q {
            let queue = &mut self.queues[ix as usize];
            queue.usage += r;
            queue.pending -= r;
            queue.pending_containers -= 1;
            q = queue.parent;
        }
        if am {
            self.queues[leaf as usize].am_usage += r;
        }
        self.touched(job);
        let node_id = self.nodes.slots[node as usize].id;
        self.decisions.push(Decision::StartContainer {
            container: id,
            job: job_id,
            node: node_id,
            resources: r,
            tag: front.tag,
            am,
        });
    }
}

/// Whether `r` is at least as large, on every resource, as some request that found no node.
fn dominated(failed: &[Resources], r: &Resources) -> bool {
    failed.iter().any(|f| f.fits_in(r))
}
