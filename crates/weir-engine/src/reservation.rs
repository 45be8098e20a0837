//! Nodes held for one job: YARN's reservations, and room being freed by preemption.
//!
//! A job below its fair share (or given min-share starvation) whose next container fits on no
//! node reserves one (`FSAppAttempt.assignContainer` → `reserve`, when `isReservable`): the node
//! with the most free room among those that could hold the container when empty. Nobody else is
//! placed on a reserved node (`FSQueue.assignContainerPreCheck`), so a stream of small containers
//! cannot starve a large one. YARN's limits hold: the container must be at least the reservation
//! threshold (the increment, `yarn.scheduler.reservation-threshold.increment-multiple` 1), and a
//! job holds at most ceil(nodes × `reservable_nodes`) reservations
//! (`FSAppAttempt.reservationExceedsThreshold`). At every pass a reservation is checked
//! (`FSAppAttempt.assignReservedContainer`): it is dropped when the job no longer wants the
//! container, the container can never fit the node, a queue max or the AM share forbids it
//! (`isValidReservation`); it turns into the container as soon as it fits, and then ends.
//!
//! A node where containers are being preempted for a job is held for that job until they are
//! gone (`FSSchedulerNode.addContainersForPreemption`); it takes what fits there first
//! (`FairScheduler.assignPreemptedContainers`), then the node is free for all in the same pass.

use weir_model::Resources;

use crate::engine::Engine;
use crate::nodes::{Ask, Hold};
use crate::order::below;
use crate::state::{JobSlot, JobState, NodeSlot};

/// What reservations did since the engine started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReservationStats {
    /// Nodes reserved for a job.
    pub made: u64,
    /// Reservations that ended with the job's container started on the node.
    pub fulfilled: u64,
    /// Reservations let go unused: the job no longer needed them, ended, or preemption for
    /// another job took the node.
    pub released: u64,
    /// Nodes reserved now.
    pub active: u64,
}

impl Engine {
    /// Reservations made, fulfilled and released since the start, and how many hold now.
    pub fn reservation_stats(&self) -> ReservationStats {
        self.reservation_counts
    }

    /// Every reserved node and the job it is reserved for, by node (preemption holds aside).
    pub fn reserved_nodes(&self) -> Vec<(crate::NodeId, crate::JobId)> {
        self.nodes
            .reserved
            .iter()
            .filter(|&&n| self.hold_kind(n) == Some(Hold::Reserved))
            .filter_map(|&n| {
                let job = self.nodes.slots[n as usize].held_for()?;
                Some((self.nodes.slots[n as usize].id, self.job(job).id))
            })
            .collect()
    }

    pub(crate) fn hold_kind(&self, node: NodeSlot) -> Option<Hold> {
        self.nodes.slots[node as usize].hold.map(|(_, h)| h)
    }

    /// Hold `node` for `job`. A reservation of another job on it gives way (a preemption hold
    /// takes over the node, as YARN serves preempted containers before reservations).
    pub(crate) fn hold(&mut self, node: NodeSlot, job: JobSlot, kind: Hold) {
        if let Some((other, old)) = self.nodes.slots[node as usize].hold {
            if other == job {
                if old == Hold::Reserved && kind == Hold::Preempted {
                    // The reservation becomes a preemption hold: it no longer counts as one.
                    self.reservation_counts.released += 1;
                    self.reservation_counts.active -= 1;
                    self.nodes.reserve(node, job, kind);
                }
                return;
            }
            self.release_hold(node, other, false);
        }
        self.nodes.reserve(node, job, kind);
        let j = self.job_mut(job);
        j.reservations.push(node);
        if j.reservations.len() == 1 {
            let leaf = j.leaf;
            self.queues[leaf as usize].holders += 1;
        }
        if kind == Hold::Reserved {
            self.reservation_counts.made += 1;
            self.reservation_counts.active += 1;
        }
    }

    /// Let `node` go, if it is held for `job`.
    pub(crate) fn release_hold(&mut self, node: NodeSlot, job: JobSlot, fulfilled: bool) {
        let Some((holder, kind)) = self.nodes.slots[node as usize].hold else { return };
        if holder != job {
            return;
        }
        self.nodes.unreserve(node);
        if let Some(j) = self.jobs[job as usize].as_mut() {
            j.reservations.retain(|&n| n != node);
            if j.reservations.is_empty() {
                self.queues[j.leaf as usize].holders -= 1;
            }
        }
        if kind == Hold::Reserved {
            self.reservation_counts.active -= 1;
            if fulfilled {
                self.reservation_counts.fulfilled += 1;
            } else {
                self.reservation_counts.released += 1;
            }
        }
    }

    /// Let every node held for `job` go (it ended or wants nothing more).
    pub(crate) fn drop_reservations(&mut self, job: JobSlot) {
        for node in self.job(job).reservations.clone() {
            self.release_hold(node, job, false);
        }
    }

    /// Give each held node to its job first: a reservation becomes the container as soon as it
    /// fits (and is dropped once it is no longer valid); drained preemption room is taken, then
    /// let go.
    pub(crate) fn serve_holds(&mut self) {
        if self.nodes.reserved.is_empty() {
            return;
        }
        let held: Vec<NodeSlot> = self.nodes.reserved.iter().copied().collect();
        for node in held {
            let Some((job, kind)) = self.nodes.slots[node as usize].hold else { continue };
            match kind {
                Hold::Reserved => {
                    if !self.valid_reservation(job, node) {
                        self.release_hold(node, job, false);
                    } else if self.front_fits(job, node) {
                        self.start_container(job, node);
                    }
                }
                Hold::Preempted => {
                    if self.job(job).requests.front().is_some_and(|r| r.gang != 0) {
                        // A gang takes the room as placeholders; it starts when all of it fits.
                        self.hold_on_node(job, node);
                    }
                    while self.job(job).state == JobState::Runnable
                        && self.job(job).requests.front().is_some_and(|r| r.gang == 0)
                        && self.front_fits(job, node)
                        && self.limits_allow(job).is_ok()
                        && !self.at_container_limit(1)
                    {
                        self.start_container(job, node);
                    }
                    if self.nodes.slots[node as usize].marked.is_zero() {
                        self.release_hold(node, job, false);
                    }
                }
            }
        }
    }

    fn front_fits(&self, job: JobSlot, node: NodeSlot) -> bool {
        self.job(job).requests.front().is_some_and(|r| self.nodes.fits(node, &r.ask()))
    }

    /// `FSAppAttempt.isValidReservation`: the job still wants the container, it can fit the node
    /// when empty, and neither a queue max nor the AM share forbids it.
    fn valid_reservation(&self, job: JobSlot, node: NodeSlot) -> bool {
        let j = self.job(job);
        let Some(r) = j.requests.front() else { return false };
        j.state == JobState::Runnable
            && r.gang == 0
            && self.nodes.could_hold(node, &r.ask())
            && self.limits_allow(job).is_ok()
    }

    /// After the job's next container (`ask`) found no node: reserve one if YARN would. Not
    /// while an EASY reservation plans the nodes' room.
    pub(crate) fn try_reserve(&mut self, job: JobSlot, ask: &Ask) {
        let ratio = self.config.scheduler.reservable_nodes;
        if ratio <= 0.0 || self.shadow.is_some() || !self.bookings.is_empty() || !self.reservable(job, &ask.r)
        {
            return;
        }
        // Java: (int) Math.ceil(nodes * ratio) in float arithmetic (0.05 × 40 is 2, not 2.0000001).
        let limit = (self.nodes.count() as f32 * ratio as f32).ceil() as usize;
        let held =
            self.job(job).reservations.iter().filter(|&&n| self.hold_kind(n) == Some(Hold::Reserved)).count();
        if held >= limit {
            return;
        }
        if self.reserve_misses.0 != self.pass {
            self.reserve_misses = (self.pass, Vec::new());
        }
        if self.reserve_misses.1.iter().any(|m| m.covers(ask)) {
            return;
        }
        match self.nodes.reservation_candidate(ask, |_| false) {
            Some(node) => self.hold(node, job, Hold::Reserved),
            None => self.reserve_misses.1.push(*ask),
        }
    }

    /// `FSAppAttempt.isReservable`: the job is starved (below its fair share, or given min-share
    /// starvation) and the container is at least the reservation threshold.
    fn reservable(&self, job: JobSlot, r: &Resources) -> bool {
        let j = self.job(job);
        let policy = self.queues[j.leaf as usize].policy;
        let cluster = &self.nodes.total;
        let starved =
            below(policy, &j.usage, &self.fair_share_of(job), cluster) || !j.min_share_starvation.is_zero();
        starved && !below(policy, r, &self.config.scheduler.increment, cluster)
    }
}
