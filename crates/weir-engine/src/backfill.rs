//! EASY backfilling (`scheduler.backfill: easy`): the rule of HPC batch schedulers for rigid
//! jobs (Lifka's EASY scheduler for the IBM SP; Mu'alem & Feitelson, "Utilization,
//! predictability, workloads, and user runtime estimates in scheduling the IBM SP2 with
//! backfilling", IEEE TPDS 2001).
//!
//! In each pass, the first gang that cannot start (the head) gets a reservation: the earliest
//! time its containers would all fit if every running container ended at its expected end
//! (start + requested walltime), with the nodes it would use then. Every other placement of the
//! pass must leave that start alone: a container may go on a node the head needs only if it is
//! expected to end by the reserved start, or if the room the head leaves on that node at its
//! start holds it. Only the head holds a reservation (Flux's `easy` queue policy is its
//! backfill policy with a reservation depth of 1, `queue_policy_bf_base_t::
//! allocate_orelse_reserve_jobs`; its reservations are dropped and made again every scheduling
//! loop, as weir's are every pass). A container without a walltime is planned as never ending,
//! and may only take room the head leaves; a container past its walltime is planned as ending
//! now. A head whose start cannot be planned (it would fit only when containers without a
//! walltime end) holds room instead, as without backfilling (`gang.rs`).
//!
//! The plan uses cpu, memory and whole GPUs; a gang asking for GPU fractions is not planned.

use std::collections::HashMap;

use weir_model::{Resources, Time};

use crate::engine::Engine;
use crate::nodes::Ask;
use crate::state::{JobSlot, NodeSlot};

/// The EASY reservation of one pass.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Shadow {
    pub job: JobSlot,
    /// When the head is planned to start.
    pub start: Time,
    /// For each node the head will use at its start, by node: the room it leaves there then,
    /// which containers ending later may still take.
    pub spare: Vec<(NodeSlot, Resources)>,
}

impl Shadow {
    /// Whether a container of `r` expected to end at `end` (`None`: unknown) may go on `node`.
    pub fn allows(&self, node: NodeSlot, r: &Resources, end: Option<Time>) -> bool {
        leaves_room(self.start, &self.spare, node, r, end)
    }

    /// A container of `r` ending at `end` started on `node`: what it takes from the head's room.
    pub fn take(&mut self, node: NodeSlot, r: &Resources, end: Option<Time>) {
        take_room(self.start, &mut self.spare, node, r, end);
    }
}

/// Whether a container of `r` on `node` expected to end at `end` (`None`: unknown) leaves a
/// planned start at `start` its room: `spare`, by node, is what the planned gang leaves on the
/// nodes it uses. A container ending by the start, or on a node the gang does not use, always
/// does. (EASY's shadow and conservative backfilling's bookings alike.)
pub(crate) fn leaves_room(
    start: Time,
    spare: &[(NodeSlot, Resources)],
    node: NodeSlot,
    r: &Resources,
    end: Option<Time>,
) -> bool {
    if end.is_some_and(|e| e <= start) {
        return true;
    }
    match spare.binary_search_by_key(&node, |e| e.0) {
        Ok(i) => r.fits_in(&spare[i].1),
        Err(_) => true,
    }
}

/// A container of `r` ending at `end` started on `node`: what it takes from the room `spare`
/// a planned start at `start` keeps there.
pub(crate) fn take_room(
    start: Time,
    spare: &mut [(NodeSlot, Resources)],
    node: NodeSlot,
    r: &Resources,
    end: Option<Time>,
) {
    if end.is_some_and(|e| e <= start) {
        return;
    }
    if let Ok(i) = spare.binary_search_by_key(&node, |e| e.0) {
        spare[i].1 = spare[i].1.saturating_sub(r);
    }
}

impl Engine {
    /// Plan the EASY reservation for `job`'s front gang; false when no start can be planned.
    pub(crate) fn reserve_start(&mut self, job: JobSlot) -> bool {
        match self.plan_start(job) {
            Some(shadow) => {
                self.shadow = Some(shadow);
                true
            }
            None => false,
        }
    }

    /// The asks still missing from the job's front gang, with their counts.
    fn missing(&self, job: JobSlot) -> Vec<(Ask, u64)> {
        let j = self.job(job);
        let Some(g) = j.requests.front().map(|r| r.gang) else { return Vec::new() };
        j.requests.iter().filter(|r| r.gang == g).map(|r| (r.ask(), u64::from(r.count))).collect()
    }

    fn plan_start(&self, job: JobSlot) -> Option<Shadow> {
        let missing = self.missing(job);
        if missing.is_empty() || missing.iter().any(|(a, _)| a.milli > 0) {
            return None;
        }
        let usable = |n: NodeSlot| {
            let node = &self.nodes.slots[n as usize];
            node.alive && node.hold.is_none_or(|(h, _)| h == job)
        };
        // Room on each node once the containers walked so far have ended (only nodes that
        // change are kept; the others have their free room now).
        let mut freed: HashMap<NodeSlot, Resources> = HashMap::new();
        let room = |freed: &HashMap<NodeSlot, Resources>, n: NodeSlot| {
            self.nodes.slots[n as usize].free() + freed.get(&n).copied().unwrap_or_default()
        };
        // Containers that fit on each node, per ask, summed over the nodes.
        let fit = |r: &Resources, free: &Resources| -> u64 {
            let mut k = u64::MAX;
            for (need, have) in [(r.cpu, free.cpu), (r.memory, free.memory), (r.gpu, free.gpu)] {
                if let Some(q) = have.checked_div(need) {
                    k = k.min(q);
                }
            }
            k
        };
        let mut totals: Vec<u64> = missing
            .iter()
            .map(|(a, _)| {
                (0..self.nodes.slots.len() as NodeSlot)
                    .filter(|&n| usable(n) && self.nodes.allows(n, a.selector))
                    .map(|n| fit(&a.r, &room(&freed, n)).min(1 << 40))
                    .sum()
            })
            .collect();
        let enough = |totals: &[u64]| totals.iter().zip(&missing).all(|(t, (_, c))| t >= c);
        let mut start = self.now;
        let mut ends = self.ends.iter().peekable();
        loop {
            if enough(&totals) {
                if let Some(spare) = self.pack(job, &missing, &freed) {
                    return Some(Shadow { job, start, spare });
                }
            }
            // The next batch of ends: every container expected to end at the next end time.
            let &&(t, _) = ends.peek()?;
            start = t.max(self.now);
            while let Some(&&(t2, id)) = ends.peek() {
                if t2.max(self.now) != start {
                    break;
                }
                ends.next();
                let Some(c) = self.container(id) else { continue };
                let n = c.node;
                if !usable(n) {
                    continue;
                }
                let before = room(&freed, n);
                *freed.entry(n).or_default() += c.resources;
                let after = room(&freed, n);
                for (i, (a, _)) in missing.iter().enumerate() {
                    if self.nodes.allows(n, a.selector) {
                        totals[i] =
                            totals[i] - fit(&a.r, &before).min(1 << 40) + fit(&a.r, &after).min(1 << 40);
                    }
                }
            }
        }
    }

    /// Where the gang's missing containers go once `freed` has been given back: first on the
    /// nodes that free up by its start, then on nodes idle now, each group in slot order; the
    /// room each node it uses has left then. `None` if they do not all fit. Textbook EASY
    /// (Lifka; Mu'alem & Feitelson 2001) counts the "extra" nodes as those free at the shadow
    /// time that the head does not need: packing the head onto the nodes being released leaves
    /// the idle ones unclaimed, so long jobs may backfill onto them now.
    fn pack(
        &self,
        job: JobSlot,
        missing: &[(Ask, u64)],
        freed: &HashMap<NodeSlot, Resources>,
    ) -> Option<Vec<(NodeSlot, Resources)>> {
        let mut order: Vec<NodeSlot> = freed.keys().copied().collect();
        order.sort_unstable();
        order.extend((0..self.nodes.slots.len() as NodeSlot).filter(|n| !freed.contains_key(n)));
        let mut left: HashMap<NodeSlot, Resources> = HashMap::new();
        for (ask, count) in missing {
            let mut count = *count;
            for &n in &order {
                if count == 0 {
                    break;
                }
                let node = &self.nodes.slots[n as usize];
                if !node.alive
                    || node.hold.is_some_and(|(h, _)| h != job)
                    || !self.nodes.allows(n, ask.selector)
                {
                    continue;
                }
                let free = left
                    .get(&n)
                    .copied()
                    .unwrap_or_else(|| node.free() + freed.get(&n).copied().unwrap_or_default());
                let mut free = free;
                let mut took = 0;
                while count > 0 && ask.r.fits_in(&free) && !ask.r.is_zero() {
                    free -= ask.r;
                    count -= 1;
                    took += 1;
                }
                if took > 0 {
                    left.insert(n, free);
                }
            }
            if count > 0 {
                return None;
            }
        }
        let mut left: Vec<(NodeSlot, Resources)> = left.into_iter().collect();
        left.sort_unstable_by_key(|e| e.0);
        Some(left)
    }

    /// The EASY reservation made in the last pass: the job and its planned start.
    pub fn easy_reservation(&self) -> Option<(crate::JobId, Time)> {
        self.shadow.as_ref().map(|s| (self.job(s.job).id, s.start))
    }
}
