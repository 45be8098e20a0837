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
        let mut smallest_failure: Option<Resources> = None;
        while self.queues[0].pending_containers > 0 && self.queues[0].blocked_pass != self.pass {
            if !self.place_one(0, &mut smallest_failure) {
                self.queues[0].blocked_pass = self.pass;
            }
        }
    }

    /// Place one container somewhere under `q`. False when nothing under it can be placed.
    fn place_one(&mut self, q: QueueIx, smallest_failure: &mut Option<Resources>) -> bool {
        if self.queues[q as usize].is_leaf() {
            return self.place_in_leaf(q, smallest_failure);
        }
        loop {
            let Some(child) = self.best_child(q) else { return false };
            if self.place_one(child, smallest_failure) {
                return true;
            }
            self.queues[child as usize].blocked_pass = self.pass;
        }
    }

    fn standing(&self, q: QueueIx) -> Standing {
        let q = &self.queues[q as usize];
        Standing { usage: q.usage, demand: q.demand(), min: q.min, weight: q.weight, start: 0 }
    }

    fn best_child(&self, parent: QueueIx) -> Option<QueueIx> {
        let p = &self.queues[parent as usize];
        let cluster = self.nodes.total;
        let mut best: Option<(QueueIx, Standing)> = None;
        for &c in &p.children {
            let cq = &self.queues[c as usize];
            if cq.pending_containers == 0 || cq.blocked_pass == self.pass {
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
        Standing { usage: j.usage, demand: j.demand(), min: Resources::ZERO, weight: 1.0, start: j.start_time.as_millis() }
    }

    /// Order of jobs within a leaf: less means served first.
    pub(crate) fn compare_jobs(&self, policy: Policy, a: JobSlot, b: JobSlot) -> Ordering {
        let (ja, jb) = (self.job(a), self.job(b));
        let by_policy = match policy {
            Policy::Fifo => jb.priority.cmp(&ja.priority).then(ja.submit_time.cmp(&jb.submit_time)),
            _ => order::compare(policy, &self.job_standing(a), &self.job_standing(b), &self.nodes.total),
        };
        by_policy.then(ja.id.cmp(&jb.id))
    }

    fn place_in_leaf(&mut self, leaf: QueueIx, smallest_failure: &mut Option<Resources>) -> bool {
        loop {
            let l = &self.queues[leaf as usize];
            let mut best: Option<JobSlot> = None;
            for &s in &l.runnable {
                let j = self.job(s);
                if j.pending_containers == 0 || j.blocked_pass == self.pass {
                    continue;
                }
                if best.is_none_or(|b| self.compare_jobs(l.policy, s, b) == Ordering::Less) {
                    best = Some(s);
                }
            }
            let Some(job) = best else { return false };
            match self.try_place(job, smallest_failure) {
                Ok(()) => return true,
                Err(_) => self.job_mut(job).blocked_pass = self.pass,
            }
        }
    }

    /// Why `job` cannot take its next container now, if it cannot.
    pub(crate) fn blocker(&self, job: JobSlot) -> Option<Blocker> {
        let j = self.job(job);
        let r = j.requests.front()?.resources;
        for q in self.path_up(j.leaf) {
            let queue = &self.queues[q as usize];
            if !(queue.usage + r).fits_in(&queue.max) {
                return Some(Blocker::QueueMax(q));
            }
        }
        if !j.am_started {
            let l = &self.queues[j.leaf as usize];
            if let Some(share) = l.max_am_share {
                let limit = self.am_limit(j.leaf, share);
                if !(l.am_usage + r).fits_in(&limit) {
                    return Some(Blocker::AmShare { limit });
                }
            }
        }
        if self.node_for(job, &r).is_none() {
            return Some(Blocker::NoRoom);
        }
        None
    }

    /// `max_am_share` × the leaf's fair share, on the resources its policy looks at. A leaf
    /// whose share is still zero (nothing computed yet) is measured against its max instead.
    pub(crate) fn am_limit(&self, leaf: QueueIx, share: f64) -> Resources {
        let l = &self.queues[leaf as usize];
        let base = if l.instantaneous.memory == 0 { l.max.component_min(&self.nodes.total) } else { l.instantaneous };
        let scaled = base.scale(share);
        match l.policy {
            Policy::Drf => scaled,
            Policy::Fair | Policy::Fifo => {
                Resources { memory: scaled.memory, ..Resources::UNBOUNDED }
            }
        }
    }

    /// A node for the job's next container: one reserved for it first, else the best fit.
    fn node_for(&self, job: JobSlot, r: &Resources) -> Option<NodeSlot> {
        let j = self.job(job);
        j.reservations.iter().copied().find(|&n| self.nodes.fits(n, r)).or_else(|| self.nodes.best_fit(r))
    }

    fn try_place(&mut self, job: JobSlot, smallest_failure: &mut Option<Resources>) -> Result<(), Blocker> {
        let j = self.job(job);
        let Some(front) = j.requests.front() else { return Err(Blocker::NoRoom) };
        let r = front.resources;
        let tag = front.tag;
        let leaf = j.leaf;
        let am = !j.am_started;
        let mut q = Some(leaf);
        while let Some(ix) = q {
            let queue = &self.queues[ix as usize];
            if !(queue.usage + r).fits_in(&queue.max) {
                return Err(Blocker::QueueMax(ix));
            }
            q = queue.parent;
        }
        if am {
            if let Some(share) = self.queues[leaf as usize].max_am_share {
                let limit = self.am_limit(leaf, share);
                if !(self.queues[leaf as usize].am_usage + r).fits_in(&limit) {
                    return Err(Blocker::AmShare { limit });
                }
            }
        }
        // Nothing at least as large as a request that already found no node will find one.
        if j.reservations.is_empty() && smallest_failure.is_some_and(|f| f.fits_in(&r)) {
            return Err(Blocker::NoRoom);
        }
        let Some(node) = self.node_for(job, &r) else {
            if self.job(job).reservations.is_empty() {
                *smallest_failure = Some(smallest_failure.map_or(r, |f| f.component_min(&r)));
            }
            return Err(Blocker::NoRoom);
        };
        self.start_container(job, node, r, tag, am);
        Ok(())
    }

    fn start_container(&mut self, job: JobSlot, node: NodeSlot, r: Resources, tag: u64, am: bool) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let id = self.new_container(|id| Container { id, job, node, resources: r, am, seq, preemption: None });
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
        self.watch_starvation(job);
        let node_id = self.nodes.slots[node as usize].id;
        self.decisions.push(Decision::StartContainer { container: id, job: job_id, node: node_id, resources: r, tag, am });
    }
}
