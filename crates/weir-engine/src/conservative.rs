//! Conservative backfilling (`scheduler.backfill: conservative`; Mu'alem & Feitelson, IEEE TPDS
//! 2001): in each pass every gang that cannot start now gets a reservation — the earliest time
//! its containers fit for their whole walltime, given what runs (planned to end at its start +
//! walltime) and the reservations made before it in the pass — and a later job may start now
//! only if it delays none of them. Reservations are made again every pass, in the leaf's order,
//! up to `backfill_depth` jobs.
//!
//! The plan is safe rather than tight: at a candidate start `t` a node's room is its free room
//! now, plus what running containers give back by `t`, minus every reservation overlapping
//! `[t, t + walltime)` (room freed inside that window is not counted).
//!
//! Reservations persist from pass to pass, and each job, at its turn, gives up its own and is
//! planned again with every other in place — Mu'alem and Feitelson's compression: its old slot
//! is still free (running work ends no later than its walltime), so a job never starts later
//! than a start once reserved for it, as long as no job is put ahead of it in its leaf's order.
//! A gang or a running
//! container without a walltime cannot be planned around: such a gang waits without a
//! reservation, and room held by containers without one is never counted as coming back.

use std::collections::HashMap;

use weir_model::{Resources, Time};

use crate::engine::Engine;
use crate::nodes::Ask;
use crate::state::{JobSlot, NodeSlot};

/// A conservative reservation.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Booking {
    pub job: JobSlot,
    pub id: crate::JobId,
    pub start: Time,
    pub end: Time,
    /// What it takes on each node it uses, by node.
    pub usage: Vec<(NodeSlot, Resources)>,
    /// The room each of those nodes has left at its start, which a container running past the
    /// start may still take.
    pub spare: Vec<(NodeSlot, Resources)>,
}

/// Where a planned gang goes: its start, and each container's request index and node.
pub(crate) struct Plan {
    pub start: Time,
    pub end: Time,
    pub placed: Vec<(usize, NodeSlot)>,
    pub usage: Vec<(NodeSlot, Resources)>,
}

impl Booking {
    /// Whether a container of `r` on `node` expected to end at `end` leaves this booking whole.
    pub fn allows(&self, node: NodeSlot, r: &Resources, end: Option<Time>) -> bool {
        crate::backfill::leaves_room(self.start, &self.spare, node, r, end)
    }

    pub fn take(&mut self, node: NodeSlot, r: &Resources, end: Option<Time>) {
        crate::backfill::take_room(self.start, &mut self.spare, node, r, end);
    }
}

impl Engine {
    /// Under conservative backfilling, start the job's front gang now if its plan says so, else
    /// book its reservation. True when it started.
    pub(crate) fn place_or_book(&mut self, job: JobSlot, indices: &[usize]) -> bool {
        let Some(plan) = self.plan_booking(job, indices) else { return false };
        if plan.start <= self.now {
            let mut placed = Vec::with_capacity(plan.placed.len());
            for (index, node) in plan.placed {
                let request = self.job(job).requests[index];
                let ask = request.ask();
                let gpu = self.nodes.allocate(node, &ask);
                placed.push(crate::gang::Tentative { index, ask, node, gpu });
            }
            self.start_gang(job, placed);
            return true;
        }
        let id = self.job(job).id;
        let booking =
            Booking { job, id, start: plan.start, end: plan.end, usage: plan.usage, spare: Vec::new() };
        self.shift_spares(&booking, false);
        self.bookings.push(booking);
        let last = self.bookings.len() - 1;
        self.bookings[last].spare = self.spare_of(last);
        false
    }

    /// Bookings that start while `b` is active lose (or, when it goes, regain) its room on the
    /// nodes they share.
    fn shift_spares(&mut self, b: &Booking, regain: bool) {
        for k in self.bookings.iter_mut().filter(|k| k.job != b.job && b.start <= k.start && k.start < b.end)
        {
            for (n, r) in &b.usage {
                if let Ok(i) = k.spare.binary_search_by_key(n, |e| e.0) {
                    k.spare[i].1 = if regain { k.spare[i].1 + *r } else { k.spare[i].1.saturating_sub(r) };
                }
            }
        }
    }

    /// At the start of a pass: bookings of jobs gone, started or no longer waiting on a gang are
    /// dropped, and every booking's spare room is worked out afresh.
    pub(crate) fn refresh_bookings(&mut self) {
        if self.bookings.is_empty() {
            return;
        }
        let jobs = &self.jobs;
        self.bookings.retain(|b| {
            jobs.get(b.job as usize)
                .and_then(|j| j.as_ref())
                .is_some_and(|j| j.id == b.id && j.requests.front().is_some_and(|r| r.gang != 0))
        });
        self.refresh_spares();
    }

    /// The job gives up its booking before it is planned again (compression).
    pub(crate) fn drop_booking(&mut self, job: JobSlot) {
        if let Some(i) = self.bookings.iter().position(|b| b.job == job) {
            let b = self.bookings.remove(i);
            self.shift_spares(&b, true);
        }
    }

    /// Each booking's spare room on each of its nodes: the node's room at the booking's start
    /// (free now, plus what running containers give back by then, less every booking active
    /// then, itself included). Room only shrinks at a booking's start, so a container that fits
    /// the spare of every booking it runs into never delays one.
    fn refresh_spares(&mut self) {
        let spares: Vec<_> = (0..self.bookings.len()).map(|k| self.spare_of(k)).collect();
        for (b, s) in self.bookings.iter_mut().zip(spares) {
            b.spare = s;
        }
    }

    /// The `k`-th booking's spare room on each of its nodes (see `refresh_spares`).
    fn spare_of(&self, k: usize) -> Vec<(NodeSlot, Resources)> {
        let b = &self.bookings[k];
        let mut room: Vec<(NodeSlot, Resources)> =
            b.usage.iter().map(|&(n, _)| (n, self.nodes.slots[n as usize].free())).collect();
        for &(_, id) in self.ends.range(..=(b.start, crate::ids::ContainerId(u64::MAX))) {
            if let Some(c) = self.container(id) {
                if let Ok(i) = room.binary_search_by_key(&c.node, |e| e.0) {
                    room[i].1 += c.resources;
                }
            }
        }
        for o in self.bookings.iter().filter(|o| o.start <= b.start && b.start < o.end) {
            for (n, r) in &o.usage {
                if let Ok(i) = room.binary_search_by_key(n, |e| e.0) {
                    room[i].1 = room[i].1.saturating_sub(r);
                }
            }
        }
        room
    }

    /// The earliest start of the job's front gang that delays no booking, and where it goes.
    fn plan_booking(&self, job: JobSlot, indices: &[usize]) -> Option<Plan> {
        let j = self.job(job);
        let asks: Vec<(usize, Ask, u64)> =
            indices.iter().map(|&i| (i, j.requests[i].ask(), u64::from(j.requests[i].count))).collect();
        if asks.iter().any(|(_, a, _)| a.milli > 0 || a.r.is_zero()) {
            return None;
        }
        let walltime = indices.iter().map(|&i| j.requests[i].walltime).collect::<Option<Vec<_>>>()?;
        let length = walltime.into_iter().max()?;
        let usable = |n: NodeSlot| {
            let node = &self.nodes.slots[n as usize];
            node.alive && node.hold.is_none_or(|(h, _)| h == job)
        };
        let mut times: Vec<Time> = vec![self.now];
        times.extend(self.ends.iter().map(|&(t, _)| t.max(self.now)));
        times.extend(self.bookings.iter().map(|b| b.end.max(self.now)));
        times.sort_unstable();
        times.dedup();
        let mut freed: HashMap<NodeSlot, Resources> = HashMap::new();
        let mut ends = self.ends.iter().peekable();
        for t in times {
            while let Some(&&(e, id)) = ends.peek() {
                if e.max(self.now) > t {
                    break;
                }
                ends.next();
                if let Some(c) = self.container(id) {
                    *freed.entry(c.node).or_default() += c.resources;
                }
            }
            let end = t.plus(length);
            let mut booked: HashMap<NodeSlot, Resources> = HashMap::new();
            for b in self.bookings.iter().filter(|b| b.start < end && b.end > t) {
                for (n, r) in &b.usage {
                    *booked.entry(*n).or_default() += *r;
                }
            }
            let room = |n: NodeSlot| {
                let node = &self.nodes.slots[n as usize];
                (node.free() + freed.get(&n).copied().unwrap_or_default())
                    .saturating_sub(&booked.get(&n).copied().unwrap_or_default())
            };
            if let Some((placed, usage)) = self.pack_booking(&asks, &usable, &room) {
                return Some(Plan { start: t, end, placed, usage });
            }
        }
        None
    }

    /// Containers onto nodes with the room `room` gives, in slot order, and what each node
    /// gives. `None` if they do not all fit.
    #[allow(clippy::type_complexity)]
    fn pack_booking(
        &self,
        asks: &[(usize, Ask, u64)],
        usable: &dyn Fn(NodeSlot) -> bool,
        room: &dyn Fn(NodeSlot) -> Resources,
    ) -> Option<(Vec<(usize, NodeSlot)>, Vec<(NodeSlot, Resources)>)> {
        let mut left: HashMap<NodeSlot, Resources> = HashMap::new();
        let mut used: HashMap<NodeSlot, Resources> = HashMap::new();
        let mut placed = Vec::new();
        for &(index, ask, count) in asks {
            let mut count = count;
            for n in 0..self.nodes.slots.len() as NodeSlot {
                if count == 0 {
                    break;
                }
                if !usable(n) || !self.nodes.allows(n, ask.selector) {
                    continue;
                }
                let mut free = left.get(&n).copied().unwrap_or_else(|| room(n));
                let mut took = false;
                while count > 0 && ask.r.fits_in(&free) {
                    free -= ask.r;
                    count -= 1;
                    placed.push((index, n));
                    *used.entry(n).or_default() += ask.r;
                    took = true;
                }
                if took {
                    left.insert(n, free);
                }
            }
            if count > 0 {
                return None;
            }
        }
        let mut usage: Vec<_> = used.into_iter().collect();
        usage.sort_unstable_by_key(|e| e.0);
        Some((placed, usage))
    }

    /// The conservative reservations held now: each job and its planned start.
    pub fn conservative_reservations(&self) -> Vec<(crate::JobId, Time)> {
        self.bookings.iter().map(|b| (self.job(b.job).id, b.start)).collect()
    }
}
