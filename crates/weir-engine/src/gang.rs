//! Gangs: a set of containers that start together, in one pass, or not at all — an MPI job's
//! ranks, a training job's workers, a Spark job's fixed executors.
//!
//! A job's gang is every pending request carrying its front request's gang number. At the
//! job's turn in a pass the engine tries to place all of them at once: if every container finds
//! a node, all start in that pass. If not:
//!
//! - without backfilling (`scheduler.backfill: none`), the containers that did fit become
//!   **placeholders**: their room is held for the gang (counted as its usage, invisible to the
//!   host), and the gang keeps taking room as it frees up, in its turn, until all of it fits and
//!   the placeholders are announced as its containers — YuniKorn's gang scheduling, where
//!   placeholder pods hold room for a task group (`objects/application.go`: the placeholder
//!   timer starts with the first placeholder, `addAllocationInternal`). If the gang has not
//!   started `scheduler.gang_timeout` (default 15 minutes, YuniKorn's
//!   `defaultPlaceholderTimeout`) after its first placeholder, the placeholders are released
//!   and the job goes to the back of its leaf's order (`timeoutPlaceholderProcessing` releases
//!   them too; its "Soft" style then schedules the pods without a gang, "Hard" fails the job —
//!   weir keeps the gang and re-queues it). Going to the back is not enough under a `fair` leaf:
//!   the released gang's usage falls to zero, so the fair order hands the room straight back to
//!   it, and gangs each holding a part of a full cluster wait for each other for ever (issue 18).
//!   So a timeout **hands the released room over** (`hand_over`): to the most senior waiting gang
//!   (earliest submission, then id) that can start whole with the room free now; else to the
//!   most senior gang not itself released since the last gang start, as placeholders. The
//!   released gang is **barred** from taking placeholders until some gang starts (or no
//!   placeholders are held anywhere), so each timeout moves room to fewer gangs until one
//!   completes. And when a timeout finds nothing running but placeholders — a true deadlock —
//!   every placeholder is released and the most senior gang that fits starts at once, so such a
//!   state never outlasts one gang timeout. (Under EASY backfilling the heads of successive passes
//!   that got no planned start can end up holding a cluster between them the same way: the
//!   same timeout rules apply, except that room is never handed over as placeholders.) Slurm
//!   never reaches that state: it allocates a job whole or not at all, and once a job in a
//!   partition is left pending no lower-priority job there is started by the main scheduler
//!   (Slurm's Scheduling Configuration Guide, sched_config.html). YuniKorn's gang-scheduling
//!   guide asks for the FIFO application sort policy with gangs, not StateAware (YUNIKORN-1493),
//!   so the oldest gang is served first. Seniority here plays the role of both; weir copies
//!   neither's code;
//! - under EASY backfilling (`backfill: easy`, `backfill.rs`), the first gang that cannot start
//!   gets a reserved start instead, and holds no room; other gangs that do not fit simply wait.
//!
//! A gang is never an application master, and is never partly running: preemption takes a whole
//! gang or none of it (`preemption.rs`).

use std::cmp::Reverse;

use weir_model::{Backfill, Resources, Time};

use crate::engine::Engine;
use crate::nodes::Ask;
use crate::placement::{dominated, Blocker};
use crate::state::{JobSlot, NodeSlot};

/// Gangs tried when a timeout hands room over (see `hand_over`).
const HAND_OVER_TRIES: usize = 64;

/// One container placed for a gang before the gang is known to fit.
pub(crate) struct Tentative {
    pub index: usize,
    pub ask: Ask,
    pub node: NodeSlot,
    pub gpu: u16,
}

impl Engine {
    /// The job's front gang: (gang number, indices of its requests, containers in all).
    pub(crate) fn front_gang(&self, job: JobSlot) -> Option<(u32, Vec<usize>, u64)> {
        let j = self.job(job);
        let g = j.requests.front().map(|r| r.gang).filter(|&g| g != 0)?;
        let indices: Vec<usize> = (0..j.requests.len()).filter(|&i| j.requests[i].gang == g).collect();
        let left: u64 = indices.iter().map(|&i| u64::from(j.requests[i].count)).sum();
        Some((g, indices, left))
    }

    /// What the gang still needs, summed.
    pub(crate) fn gang_demand(&self, job: JobSlot, indices: &[usize]) -> Resources {
        let j = self.job(job);
        indices
            .iter()
            .fold(Resources::ZERO, |a, &i| a + j.requests[i].resources.times(u64::from(j.requests[i].count)))
    }

    /// Try to start the job's front gang, all of it, now. See the module docs for what happens
    /// when it does not fit.
    pub(crate) fn try_place_gang(&mut self, job: JobSlot, failed: &mut Vec<Ask>) -> Result<(), Blocker> {
        let Some((_, indices, left)) = self.front_gang(job) else { return Err(Blocker::NoRoom) };
        let leaf = self.job(job).leaf;
        let demand = self.gang_demand(job, &indices);
        if let Some(q) = self.path_up(leaf).find(|&q| {
            let q = &self.queues[q as usize];
            !(q.usage + demand).fits_in(&q.max)
        }) {
            return Err(Blocker::QueueMax(q));
        }
        // Capacity mode: the whole gang under each label's max capacity, or none of it.
        self.gang_label_max_allows(job, &indices)?;
        if self.at_container_limit(left as usize) {
            self.limited_pass = self.pass;
            return Err(Blocker::ContainerLimit);
        }
        if self.config.scheduler.backfill == Backfill::Conservative {
            self.drop_booking(job);
            if self.place_or_book(job, &indices) {
                return Ok(());
            }
            if self.bookings.last().is_some_and(|b| b.job == job) {
                return Err(Blocker::NoRoom);
            }
            // No plan (no walltime): it starts only if it fits now around the bookings.
            let (placed, short) = self.place_tentatively(job, &indices);
            if short.is_empty() {
                self.start_gang(job, placed);
                return Ok(());
            }
            self.roll_back(&placed);
            return Err(Blocker::NoRoom);
        }
        let easy = self.config.scheduler.backfill == Backfill::Easy;
        let head_chosen = self.shadow.is_some() || self.easy_head_seen();
        if easy && head_chosen && !demand.fits_in(&(self.nodes.total - self.nodes.used)) {
            // Behind the EASY head a gang only starts whole and now: not even the cluster's free
            // room, added up, holds it.
            return Err(Blocker::NoRoom);
        }
        let (placed, short) = self.place_tentatively(job, &indices);
        if short.is_empty() {
            self.start_gang(job, placed);
            return Ok(());
        }
        if easy && !head_chosen {
            // The first gang of the pass that cannot start: the EASY reservation is its.
            self.roll_back(&placed);
            if self.reserve_start(job) {
                return Err(Blocker::NoRoom);
            }
            // No start can be planned (running work without walltimes): it holds room instead
            // (unless its placeholders timed out and no gang has started since).
            let (placed, _) = self.place_tentatively(job, &indices);
            if self.barred(job) {
                self.roll_back(&placed);
            } else {
                self.hold_placeholders(job, placed);
            }
            self.shadow_less_head = Some((self.pass, job));
            return Err(Blocker::NoRoom);
        }
        if easy || self.barred(job) {
            // A barred gang leaves the free room to others (it may still start whole).
            self.roll_back(&placed);
            return Err(Blocker::NoRoom);
        }
        self.hold_placeholders(job, placed);
        // What is left of the free room holds none of the asks that came up short.
        for ask in short {
            if !dominated(failed, &ask) {
                failed.retain(|f| !ask.covers(f));
                failed.push(ask);
            }
        }
        Err(Blocker::NoRoom)
    }

    /// Whether an EASY head (with or without a reserved start) was chosen in this pass.
    fn easy_head_seen(&self) -> bool {
        self.shadow_less_head.is_some_and(|(p, _)| p == self.pass)
    }

    /// Allocate room for as many of the gang's containers as fit, request by request; returns
    /// them and the asks that came up short.
    fn place_tentatively(&mut self, job: JobSlot, indices: &[usize]) -> (Vec<Tentative>, Vec<Ask>) {
        let mut placed = Vec::new();
        let mut short = Vec::new();
        for &index in indices {
            let request = self.job(job).requests[index];
            for _ in 0..request.count {
                match self.node_for(job, &request) {
                    Some(node) => {
                        let ask = request.ask();
                        let gpu = self.nodes.allocate(node, &ask);
                        placed.push(Tentative { index, ask, node, gpu });
                    }
                    None => {
                        short.push(request.ask());
                        break;
                    }
                }
            }
        }
        (placed, short)
    }

    fn roll_back(&mut self, placed: &[Tentative]) {
        for t in placed.iter().rev() {
            self.nodes.release(t.node, &t.ask, t.gpu);
        }
    }

    /// Every container of the gang found a node: its placeholders and the new containers start.
    pub(crate) fn start_gang(&mut self, job: JobSlot, placed: Vec<Tentative>) {
        let held = std::mem::take(&mut self.job_mut(job).placeholders);
        for (id, request) in held {
            self.start_placeholder(id, &request);
        }
        // Later requests first, so the indices of earlier ones stay valid as counts run out.
        let mut placed = placed;
        placed.sort_by_key(|t| Reverse(t.index));
        for t in placed {
            self.add_container(job, t.index, t.node, t.gpu, false, false);
        }
        let j = self.job_mut(job);
        j.gang_since = None;
        j.gang_deadline = None;
        j.gang_barred = None;
        self.gang_starts += 1;
    }

    /// Keep tentatively placed containers as the gang's placeholders.
    fn hold_placeholders(&mut self, job: JobSlot, placed: Vec<Tentative>) {
        if placed.is_empty() {
            return;
        }
        let mut placed = placed;
        placed.sort_by_key(|t| Reverse(t.index));
        for t in placed {
            self.add_container(job, t.index, t.node, t.gpu, false, true);
        }
        let now = self.now;
        let timeout = self.config.scheduler.gang_timeout;
        let j = self.job_mut(job);
        if j.gang_since.is_none() {
            j.gang_since = Some(now);
            if timeout.as_millis() > 0 {
                let deadline = now.plus(timeout);
                j.gang_deadline = Some(deadline);
                self.gang_timers.push(Reverse((deadline, job)));
            }
        }
    }

    /// Room freed for the job's gang by preemption on `node`: as many of its containers as fit
    /// there become placeholders.
    pub(crate) fn hold_on_node(&mut self, job: JobSlot, node: NodeSlot) {
        let Some((_, indices, left)) = self.front_gang(job) else { return };
        if self.job(job).state != crate::state::JobState::Runnable || self.at_container_limit(left as usize) {
            return;
        }
        let mut placed = Vec::new();
        for index in indices {
            let request = self.job(job).requests[index];
            let ask = request.ask();
            for _ in 0..request.count {
                if !self.nodes.fits(node, &ask) {
                    break;
                }
                let gpu = self.nodes.allocate(node, &ask);
                placed.push(Tentative { index, ask, node, gpu });
            }
        }
        if placed.len() as u64 == left {
            self.start_gang(job, placed);
        } else {
            self.hold_placeholders(job, placed);
        }
    }

    /// When the next placeholder timeout falls due.
    pub(crate) fn next_gang_timeout(&self) -> Option<Time> {
        self.gang_timers.peek().map(|Reverse((t, _))| *t)
    }

    /// Release the placeholders of every gang whose timeout has come, ask for their containers
    /// again, and send each such job to the back of its leaf's order.
    pub(crate) fn time_out_gangs(&mut self) {
        while let Some(&Reverse((at, job))) = self.gang_timers.peek() {
            if at > self.now {
                break;
            }
            self.gang_timers.pop();
            let due = self
                .jobs
                .get(job as usize)
                .and_then(|j| j.as_ref())
                .is_some_and(|j| j.gang_deadline == Some(at));
            if !due {
                continue;
            }
            self.release_placeholders(job);
            self.gang_timeouts += 1;
            let (now, starts) = (self.now, self.gang_starts);
            let j = self.job_mut(job);
            j.order_time = now;
            j.gang_barred = Some(starts);
            self.touched(job);
            self.hand_over(job);
        }
    }

    /// Whether the job's gang may not take placeholders now: it timed out, no gang has started
    /// since, and some gang holds placeholders (room released by it went, or may go, there).
    pub(crate) fn barred(&self, job: JobSlot) -> bool {
        self.job(job).gang_barred == Some(self.gang_starts) && !self.placeholder_room.is_zero()
    }

    /// Runnable jobs whose front request is a gang, most senior first (submission, then id).
    fn waiting_gangs(&self) -> Vec<JobSlot> {
        let mut gangs: Vec<(Time, crate::JobId, JobSlot)> = self
            .jobs
            .iter()
            .enumerate()
            .filter_map(|(slot, j)| {
                let j = j.as_ref()?;
                let gang = j.requests.front().is_some_and(|r| r.gang != 0);
                (gang && j.state == crate::state::JobState::Runnable).then_some((
                    j.submit_time,
                    j.id,
                    slot as JobSlot,
                ))
            })
            .collect();
        gangs.sort_unstable();
        gangs.into_iter().map(|g| g.2).collect()
    }

    /// Whether the job's queues and the container limit leave room for its whole front gang.
    fn gang_within_limits(&self, job: JobSlot) -> bool {
        let Some((_, indices, left)) = self.front_gang(job) else { return false };
        let demand = self.gang_demand(job, &indices);
        let leaf = self.job(job).leaf;
        self.path_up(leaf).all(|q| {
            let q = &self.queues[q as usize];
            (q.usage + demand).fits_in(&q.max)
        }) && self.gang_label_max_allows(job, &indices).is_ok()
            && !self.at_container_limit(left as usize)
    }

    /// Room just released by `released`'s timeout goes to another gang: see the module docs.
    /// At most [`HAND_OVER_TRIES`] gangs are tried, so a timeout costs a bounded number of
    /// node walks however many gangs wait.
    fn hand_over(&mut self, released: JobSlot) {
        let running = self.nodes.used - self.placeholder_room;
        let order = self.waiting_gangs();
        if running.is_zero() && !self.placeholder_room.is_zero() {
            // Nothing runs, so nothing will free room: every gang's placeholders go back.
            for &g in &order {
                if !self.job(g).placeholders.is_empty() {
                    self.release_placeholders(g);
                    self.touched(g);
                }
            }
        }
        let free = self.nodes.total - self.nodes.used;
        let mut tries = 0;
        for &g in order.iter().filter(|&&g| g != released) {
            if tries == HAND_OVER_TRIES {
                break;
            }
            let Some((_, indices, _)) = self.front_gang(g) else { continue };
            if !self.gang_demand(g, &indices).fits_in(&free) || !self.gang_within_limits(g) {
                continue;
            }
            tries += 1;
            let (placed, short) = self.place_tentatively(g, &indices);
            if short.is_empty() {
                self.start_gang(g, placed);
                return;
            }
            self.roll_back(&placed);
        }
        if self.config.scheduler.backfill != Backfill::None {
            // Under backfilling only an EASY pass's head holds room, and the next pass chooses it.
            return;
        }
        // No gang completes with the room: the most senior one that may hold it takes it.
        let mut tries = 0;
        for &g in order.iter().filter(|&&g| g != released) {
            if tries == HAND_OVER_TRIES {
                break;
            }
            if self.job(g).gang_barred == Some(self.gang_starts) || !self.gang_within_limits(g) {
                continue;
            }
            tries += 1;
            let Some((_, indices, _)) = self.front_gang(g) else { continue };
            let (placed, short) = self.place_tentatively(g, &indices);
            if short.is_empty() {
                self.start_gang(g, placed);
                return;
            }
            if !placed.is_empty() {
                self.hold_placeholders(g, placed);
                return;
            }
        }
    }

    /// Give back a job's placeholders and ask for their containers again.
    pub(crate) fn release_placeholders(&mut self, job: JobSlot) {
        let held = std::mem::take(&mut self.job_mut(job).placeholders);
        let mut again = Vec::with_capacity(held.len());
        for (id, request) in held {
            if self.release_container(id).is_some() {
                again.push(request);
            }
        }
        let j = self.job_mut(job);
        j.gang_since = None;
        j.gang_deadline = None;
        if !again.is_empty() {
            self.add_requests_front(job, again);
        }
    }

    /// Why the job's front gang cannot start now (for `explain`).
    pub(crate) fn gang_blocker(&self, job: JobSlot) -> Option<Blocker> {
        let (_, indices, left) = self.front_gang(job)?;
        let leaf = self.job(job).leaf;
        let demand = self.gang_demand(job, &indices);
        if let Some(q) = self.path_up(leaf).find(|&q| {
            let q = &self.queues[q as usize];
            !(q.usage + demand).fits_in(&q.max)
        }) {
            return Some(Blocker::QueueMax(q));
        }
        if let Err(b) = self.gang_label_max_allows(job, &indices) {
            return Some(b);
        }
        if self.at_container_limit(left as usize) {
            return Some(Blocker::ContainerLimit);
        }
        (self.gang_fits_now(job) < left).then_some(Blocker::NoRoom)
    }

    /// How many of the front gang's missing containers would find room now (each taken as it
    /// is counted), for `explain`.
    pub(crate) fn gang_fits_now(&self, job: JobSlot) -> u64 {
        let Some((_, indices, _)) = self.front_gang(job) else { return 0 };
        let j = self.job(job);
        let mut room: std::collections::HashMap<NodeSlot, (Resources, u32, u64)> =
            std::collections::HashMap::new();
        let mut fits = 0u64;
        for &i in &indices {
            let request = j.requests[i];
            let ask = request.ask();
            'containers: for _ in 0..request.count {
                for slot in 0..self.nodes.slots.len() as NodeSlot {
                    let n = &self.nodes.slots[slot as usize];
                    if !n.alive
                        || n.hold.is_some_and(|(h, _)| h != job)
                        || !self.nodes.allows(slot, ask.selector)
                    {
                        continue;
                    }
                    let (taken, frac_taken, gpus_taken) = room.get(&slot).copied().unwrap_or_default();
                    let mut free = n.free() - taken;
                    free.gpu = free.gpu.saturating_sub(gpus_taken);
                    let frac_ok = ask.milli == 0
                        || (n.frac_room >= ask.milli + frac_taken && frac_taken == 0)
                        || free.gpu >= 1;
                    if ask.r.fits_in(&free) && frac_ok {
                        let e = room.entry(slot).or_default();
                        e.0 += ask.r;
                        if ask.milli > 0 {
                            if n.frac_room >= ask.milli && e.1 == 0 {
                                e.1 += ask.milli;
                            } else {
                                e.2 += 1;
                            }
                        }
                        fits += 1;
                        continue 'containers;
                    }
                }
                break;
            }
        }
        fits
    }
}
