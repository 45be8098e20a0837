//! The scheduling pass: due kills, fresh shares, then containers placed one at a time by walking
//! the tree from root to a job, then preemption for whoever is still starved.
//!
//! Each placement descends from root choosing the most deserving child (`order.rs`) that still
//! has pending demand and is not blocked in this pass. A job that cannot take its next container
//! (queue max, AM share, or no node with room) is blocked for the rest of the pass, and a queue
//! whose children are all blocked is blocked too, so every pass ends after at most one failed
//! attempt per job.

use std::cmp::{Ordering, Reverse};

use weir_model::{Policy, Resources, Time};

use crate::decision::Decision;
use crate::engine::Engine;
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
        self.place_all();
        self.release_drained_reservations();
        if self.config.scheduler.preemption.enabled {
            self.preempt();
        }
        std::mem::take(&mut self.decisions)
    }

    /// The next time the engine needs `schedule` even if nothing else happens: a kill falling
    /// due or a starvation timeout expiring.
    pub fn next_wakeup(&self) -> Option<Time> {
        let kill = self.kills.peek().map(|Reverse((t, _))| *t);
        let starve = self.starvation_timers.peek().map(|Reverse((t, _))| *t);
        match (kill, starve) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn place_all(&mut self) {
        self.serve_reservations();
        // Requests that found no node in this pass; anything at least as large will not either.
        let mut failed: Vec<Resources> = Vec::new();
        let mut blocked: Vec<JobSlot> = Vec::new();
        while self.queues[0].ready_jobs > 0 && !self.subtree_failed(0, &failed) {
            if !self.place_one(0, &mut failed, &mut blocked) {
                break;
            }
        }
        // Blocked jobs rejoin their leaves' ready sets for the next pass.
        for slot in blocked {
            if self.jobs[slot as usize].is_some() {
                self.job_mut(slot).blocked_pass = 0;
                self.sync_ready(slot);
            }
        }
    }

    /// Give each node held for a starved job to that job first, once its victims are gone.
    fn serve_reservations(&mut self) {
        let held: Vec<NodeSlot> = self.nodes.reserved.iter().copied().collect();
        for node in held {
            let Some(job) = self.nodes.slots[node as usize].reserved_for else { continue };
            let Some(front) = self.job(job).requests.front().copied() else { continue };
            if self.job(job).state == crate::state::JobState::Runnable
                && self.nodes.fits(node, &front.resources)
                && self.limits_allow(job, &front.resources).is_ok()
            {
                let am = !self.job(job).am_started;
                self.start_container(job, node, front.resources, front.tag, am);
            }
        }
    }

    /// Place one container somewhere under `q`. False when nothing under it can be placed.
    fn place_one(&mut self, q: QueueIx, failed: &mut Vec<Resources>, blocked: &mut Vec<JobSlot>) -> bool {
        let placed = if self.queues[q as usize].is_leaf() {
            self.place_in_leaf(q, failed, blocked)
        } else {
            loop {
                let Some(child) = self.best_child(q, failed) else { break false };
                if self.place_one(child, failed, blocked) {
                    break true;
                }
            }
        };
        if !placed {
            // Blocked jobs stay blocked and `failed` only grows, so this holds for the pass.
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

    fn job_standing(&self, slot: JobSlot) -> Standing {
        let j = self.job(slot);
        Standing {
            usage: j.usage,
            demand: j.demand(),
            min: Resources::ZERO,
            weight: 1.0,
            start: j.start_time.as_millis(),
        }
    }

    /// Order of jobs within a leaf: less means served first.
    pub(crate) fn compare_jobs(&self, policy: Policy, a: JobSlot, b: JobSlot) -> Ordering {
        let (ja, jb) = (self.job(a), self.job(b));
        let by_policy = match policy {
            Policy::Fifo | Policy::Priority => {
                jb.priority.cmp(&ja.priority).then(ja.submit_time.cmp(&jb.submit_time))
            }
            _ => order::compare(policy, &self.job_standing(a), &self.job_standing(b), &self.nodes.total),
        };
        by_policy.then(ja.id.cmp(&jb.id))
    }

    fn place_in_leaf(
        &mut self,
        leaf: QueueIx,
        failed: &mut Vec<Resources>,
        blocked: &mut Vec<JobSlot>,
    ) -> bool {
        while let Some(&(_, job)) = self.queues[leaf as usize].ready.first() {
            match self.try_place(job, failed) {
                Ok(()) => return true,
                Err(_) => {
                    self.job_mut(job).blocked_pass = self.pass;
                    self.sync_ready(job);
                    blocked.push(job);
                }
            }
        }
        false
    }

    /// Why `job` cannot take its next container now, if it cannot.
    pub(crate) fn blocker(&self, job: JobSlot) -> Option<Blocker> {
        let r = self.job(job).requests.front()?.resources;
        if let Err(b) = self.limits_allow(job, &r) {
            return Some(b);
        }
        self.node_for(job, &r).is_none().then_some(Blocker::NoRoom)
    }

    /// `max_am_share` × the leaf's fair share, on the resources its policy looks at. A leaf
    /// whose share is still zero (nothing computed yet) is measured against its max instead.
    pub(crate) fn am_limit(&self, leaf: QueueIx, share: f64) -> Resources {
        let l = &self.queues[leaf as usize];
        let base = if l.instantaneous.memory == 0 {
            l.max.component_min(&self.nodes.total)
        } else {
            l.instantaneous
        };
        let scaled = base.scale(share);
        match l.policy {
            Policy::Drf => scaled,
            Policy::Fair | Policy::Fifo | Policy::Priority => {
                Resources { memory: scaled.memory, ..Resources::UNBOUNDED }
            }
        }
    }

    /// A node for the job's next container: one reserved for it first, else the best fit.
    fn node_for(&self, job: JobSlot, r: &Resources) -> Option<NodeSlot> {
        let j = self.job(job);
        j.reservations.iter().copied().find(|&n| self.nodes.fits(n, r)).or_else(|| self.nodes.best_fit(r))
    }

    /// Queue maxes on the path and the AM share, for the job's next container of size `r`.
    fn limits_allow(&self, job: JobSlot, r: &Resources) -> Result<(), Blocker> {
        let j = self.job(job);
        let mut q = Some(j.leaf);
        while let Some(ix) = q {
            let queue = &self.queues[ix as usize];
            if !(queue.usage + *r).fits_in(&queue.max) {
                return Err(Blocker::QueueMax(ix));
            }
            q = queue.parent;
        }
        if !j.am_started {
            let l = &self.queues[j.leaf as usize];
            if let Some(share) = l.max_am_share {
                let limit = self.am_limit(j.leaf, share);
                if !(l.am_usage + *r).fits_in(&limit) {
                    return Err(Blocker::AmShare { limit });
                }
            }
        }
        Ok(())
    }

    fn try_place(&mut self, job: JobSlot, failed: &mut Vec<Resources>) -> Result<(), Blocker> {
        let j = self.job(job);
        let Some(front) = j.requests.front().copied() else { return Err(Blocker::NoRoom) };
        let r = front.resources;
        self.limits_allow(job, &r)?;
        let has_reservation = !self.job(job).reservations.is_empty();
        if !has_reservation && dominated(failed, &r) {
            return Err(Blocker::NoRoom);
        }
        let Some(node) = self.node_for(job, &r) else {
            if !has_reservation {
                // Keep `failed` minimal: drop entries the new, smaller failure covers.
                failed.retain(|f| !r.fits_in(f));
                failed.push(r);
            }
            return Err(Blocker::NoRoom);
        };
        let am = !self.job(job).am_started;
        self.start_container(job, node, r, front.tag, am);
        Ok(())
    }

    fn start_container(&mut self, job: JobSlot, node: NodeSlot, r: Resources, tag: u64, am: bool) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let id =
            self.new_container(|id| Container { id, job, node, resources: r, am, seq, preemption: None });
        self.nodes.allocate(node, &r);
        if self.nodes.slots[node as usize].reserved_for == Some(job) {
            self.nodes.unreserve(node);
            self.job_mut(job).reservations.retain(|&n| n != node);
        }
        let j = self.job_mut(job);
        let front = j.requests.front_mut().expect("placed job has a request");
        front.count -= 1;
        if front.count == 0 {
            j.requests.pop_front();
        }
        j.pending -= r;
        j.pending_containers -= 1;
        j.usage += r;
        j.am_started = true;
        j.containers.insert((seq, id));
        let (leaf, job_id) = (j.leaf, j.id);
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
            tag,
            am,
        });
    }
}

/// Whether `r` is at least as large, on every resource, as some request that found no node.
fn dominated(failed: &[Resources], r: &Resources) -> bool {
    failed.iter().any(|f| f.fits_in(r))
}
