//! The ready sets: per leaf, the runnable jobs that want a container and are not blocked in the
//! current pass, ordered by the leaf's policy; per queue, how many such jobs sit below it and
//! the sizes of their next requests.
//!
//! These keep a scheduling pass proportional to the containers it places rather than to the
//! jobs that wait: the best job of a leaf is the first of its set, a blocked job leaves the set
//! until the pass ends, and a subtree whose smallest next request (per resource) is at least a
//! request that already found no node is skipped whole.

use std::collections::BTreeMap;

use weir_model::{JobOrder, Policy, ResourceKind, Resources};

use crate::engine::Engine;
use crate::nodes::Ask;
use crate::placement::dominated;
use crate::state::{JobKey, JobSlot, JobState, ReadyEntry};

/// Order-preserving bits of a non-negative float (32 of them).
fn bits(x: f32) -> u128 {
    u128::from(x.max(0.0).to_bits())
}

impl Engine {
    /// A job's input changed (usage, demand, state): keep every derived index in step.
    pub(crate) fn touched(&mut self, slot: JobSlot) {
        self.sync_ready(slot);
        self.watch_starvation(slot);
        // Capacity mode's user tables: the mode tested here, not behind a call (issue 22 §2).
        if self.capacity_mode() {
            self.count_user(slot);
        }
    }

    /// The job's place in its leaf's order. Jobs have no min share and weight 1 (YARN: app
    /// priority 1), so `fair` reduces to (memory used, submit time, id) — also capacity mode's
    /// `FairOrderingPolicy`, whose size-based weight divides the memory used first —
    /// `drf` to (usage / cluster per resource as f32, largest first; submit time; id), YARN's
    /// `fifo` to (submit time, id) and weir's `priority` to (priority, submit time, id).
    pub(crate) fn job_order_key(&self, slot: JobSlot) -> JobKey {
        let j = self.job(slot);
        let submit = j.order_time.as_millis();
        // One `u64` of order sits above 32 zero bits; drf's three shares fill the 96.
        let word = |v: u64| u128::from(v) << 32;
        let order = match self.queues[j.leaf as usize].policy {
            Policy::Fair if self.queues[j.leaf as usize].size_based_weight => {
                word(crate::capacity::size_weighted_usage(j.usage.memory, j.demand().memory))
            }
            Policy::Fair => word(j.usage.memory),
            Policy::Drf => {
                let total = self.nodes.total;
                let mut d = [0f32; 3];
                for (i, &k) in ResourceKind::ALL.iter().enumerate() {
                    let t = total.get(k);
                    d[i] = if t == 0 { 0.0 } else { j.usage.get(k) as f32 / t as f32 };
                }
                d.sort_by(|a, b| b.total_cmp(a));
                (bits(d[0]) << 64) | (bits(d[1]) << 32) | bits(d[2])
            }
            Policy::Fifo => match self.queues[j.leaf as usize].job_order {
                JobOrder::Submit => 0,
                // Shortest job first by its next request's walltime; none counts as longest.
                JobOrder::Shortest => {
                    word(j.requests.front().and_then(|r| r.walltime).map_or(u64::MAX, |w| w.as_millis()))
                }
                JobOrder::Largest => word(u64::MAX - j.demand().cpu),
            },
            // Higher priority first.
            Policy::Priority => word((i32::MAX as i64 - j.priority as i64) as u64),
        };
        JobKey::new(order, submit, j.id.0, slot)
    }

    /// Put the job in, move it within, or take it out of its leaf's ready sets. A job set
    /// aside in this pass (`first_in_lane`) stays out of its lane until the pass ends.
    pub(crate) fn sync_ready(&mut self, slot: JobSlot) {
        let j = self.job(slot);
        let eligible = j.state == JobState::Runnable && j.pending_containers > 0;
        let (old, old_shape, old_lane) = match (eligible, j.ready) {
            (true, Some(had)) => had,
            (true, None) => return self.make_ready(slot),
            (false, Some(_)) => return self.unready(slot),
            (false, None) => return,
        };
        let shape = j.requests.front().map(|r| r.ask()).unwrap_or(Ask::plain(Resources::ZERO));
        let lane = self.next_is_am(slot);
        let key = self.job_order_key(slot);
        if shape != old_shape {
            self.unready(slot);
            self.make_ready(slot);
            return;
        }
        if lane == old_lane && key == old {
            return;
        }
        // Only its place in the leaf moved (its usage changed, or its AM started): the counts
        // of ready jobs and request sizes up the tree stay as they are.
        let leaf = self.job(slot).leaf as usize;
        let aside = self.job(slot).aside;
        let q = &mut self.queues[leaf];
        if !aside && lane == old_lane {
            let set = if lane { &mut q.ready_am } else { &mut q.ready };
            set.replace(&(old, slot), (key, slot));
        } else if !aside {
            let from = if old_lane { &mut q.ready_am } else { &mut q.ready };
            from.remove(&(old, slot));
            let to = if lane { &mut q.ready_am } else { &mut q.ready };
            to.insert((key, slot));
        }
        if old_lane != lane {
            count(&mut q.am_shapes, &shape.r, lane);
        }
        self.job_mut(slot).ready = Some((key, shape, lane));
    }

    /// Put an eligible job that is in no lane into its lane (unless set aside in this pass),
    /// and count its next request up the tree.
    fn make_ready(&mut self, slot: JobSlot) {
        let j = self.job(slot);
        let shape = j.requests.front().map(|r| r.ask()).unwrap_or(Ask::plain(Resources::ZERO));
        let (leaf, aside) = (j.leaf as usize, j.aside);
        let lane = self.next_is_am(slot);
        let key = self.job_order_key(slot);
        let q = &mut self.queues[leaf];
        if !aside {
            let to = if lane { &mut q.ready_am } else { &mut q.ready };
            to.insert((key, slot));
        }
        if lane {
            count(&mut q.am_shapes, &shape.r, true);
        }
        self.job_mut(slot).ready = Some((key, shape, lane));
        self.count_shape(leaf as u32, &shape.r, true);
    }

    /// Take the job out of its leaf's ready sets, if it is there.
    pub(crate) fn unready(&mut self, slot: JobSlot) {
        let Some((key, shape, lane)) = self.job_mut(slot).ready.take() else { return };
        let leaf = self.job(slot).leaf;
        let q = &mut self.queues[leaf as usize];
        let from = if lane { &mut q.ready_am } else { &mut q.ready };
        // A job set aside in this pass is in neither lane (nothing to remove).
        from.remove(&(key, slot));
        if lane {
            count(&mut q.am_shapes, &shape.r, false);
        }
        self.count_shape(leaf, &shape.r, false);
    }

    /// The componentwise smallest AM waiting in a leaf's AM lane.
    pub(crate) fn smallest_am(&self, leaf: u32) -> Resources {
        first_keys(&self.queues[leaf as usize].am_shapes)
    }

    /// The leaf's most deserving ready job that has not failed in this pass: the first of its
    /// two lanes past the jobs that failed; the AM lane left out once not even its smallest AM
    /// fits the AM share in this pass.
    ///
    /// When an attempt on a job whose request is covered by one that found no node (`failed`)
    /// could only fail and be skipped — no node held in the leaf, no backfill count to keep —
    /// such jobs are passed over here, and those the attempts would have reached (ordered
    /// before the job found) are marked failed as `skip` would have: one walk along the lane
    /// instead of a lookup and an attempt for each.
    pub(crate) fn first_ready(&mut self, leaf: u32, failed: &[Ask]) -> Option<(ReadyEntry, bool)> {
        let quick = !failed.is_empty() && self.queues[leaf as usize].holders == 0 && !self.backfill_counts();
        let dominated_by = if quick { failed } else { &[] };
        let mut passed = std::mem::take(&mut self.passed_over);
        passed.clear();
        let normal = self.first_in_lane(leaf, false, dominated_by, &mut passed);
        let am = if self.queues[leaf as usize].am_blocked_pass == self.pass {
            None
        } else {
            self.first_in_lane(leaf, true, dominated_by, &mut passed)
        };
        let first = match (normal, am) {
            (Some(a), Some(b)) if b < a => Some((b, true)),
            (Some(a), _) => Some((a, false)),
            (None, b) => b.map(|x| (x, true)),
        };
        let pass = self.pass;
        for &(key, slot) in &passed {
            if first.is_none_or(|(f, _)| (key, slot) < f) {
                self.job_mut(slot).failed_pass = pass;
            }
        }
        self.passed_over = passed;
        debug_assert_eq!(first, self.first_by_scan(leaf, dominated_by), "leaf {leaf}");
        first
    }

    /// Whether a placement attempt counts toward `backfill_depth` (an EASY or conservative
    /// reservation stands in this pass).
    pub(crate) fn backfill_counts(&self) -> bool {
        self.shadow.is_some()
            || !self.bookings.is_empty()
            || self.shadow_less_head.is_some_and(|(p, _)| p == self.pass)
    }

    /// The first job of a lane, past the jobs that failed in this pass and those whose next
    /// request `dominated_by` covers (pushed to `passed`). A walk past many failed jobs sets
    /// them aside, out of the lane until the pass ends, so that no walk repeats a long one.
    fn first_in_lane(
        &mut self,
        leaf: u32,
        am: bool,
        dominated_by: &[Ask],
        passed: &mut Vec<ReadyEntry>,
    ) -> Option<ReadyEntry> {
        const SET_ASIDE_AFTER: usize = 32;
        let pass = self.pass;
        let q = &self.queues[leaf as usize];
        let set = if am { &q.ready_am } else { &q.ready };
        let mut walked_failed = std::mem::take(&mut self.walked_failed);
        walked_failed.clear();
        let mut found = None;
        for &(key, slot) in set {
            let j = self.job(slot);
            if j.failed_pass == pass {
                walked_failed.push((key, slot));
                continue;
            }
            if !dominated_by.is_empty() && j.ready.is_some_and(|(_, ask, _)| dominated(dominated_by, &ask)) {
                passed.push((key, slot));
                continue;
            }
            found = Some((key, slot));
            break;
        }
        if walked_failed.len() >= SET_ASIDE_AFTER {
            let q = &mut self.queues[leaf as usize];
            let set = if am { &mut q.ready_am } else { &mut q.ready };
            for e in &walked_failed {
                set.remove(e);
            }
            for &(_, slot) in &walked_failed {
                self.job_mut(slot).aside = true;
                self.set_aside.push(slot);
            }
        }
        self.walked_failed = walked_failed;
        found
    }

    /// `first_ready` by working out the order key of every job in both lanes (debug builds
    /// check it on every lookup).
    fn first_by_scan(&self, leaf: u32, dominated_by: &[Ask]) -> Option<(ReadyEntry, bool)> {
        let q = &self.queues[leaf as usize];
        let mut lanes = vec![(false, &q.ready)];
        if q.am_blocked_pass != self.pass {
            lanes.push((true, &q.ready_am));
        }
        lanes
            .into_iter()
            .flat_map(|(am, set)| set.iter().map(move |e| (e.1, am)))
            .filter(|&(slot, _)| {
                let j = self.job(slot);
                j.failed_pass != self.pass
                    && !j.ready.is_some_and(|(_, ask, _)| dominated(dominated_by, &ask))
            })
            .map(|(slot, am)| ((self.job_order_key(slot), slot), am))
            .min()
    }

    /// Mark `job`, which failed to place, as failed for the rest of the pass: lookups pass
    /// over it (and set it aside once many such are passed over: `first_in_lane`).
    pub(crate) fn skip(&mut self, job: JobSlot) {
        self.job_mut(job).failed_pass = self.pass;
    }

    /// The pass's placements are over: the jobs set aside in it go back into their lanes.
    pub(crate) fn restore_set_aside(&mut self) {
        for slot in std::mem::take(&mut self.set_aside) {
            let Some(j) = self.jobs[slot as usize].as_mut() else { continue };
            if !std::mem::take(&mut j.aside) {
                continue;
            }
            if let Some((key, _, am)) = j.ready {
                let q = &mut self.queues[j.leaf as usize];
                let set = if am { &mut q.ready_am } else { &mut q.ready };
                set.insert((key, slot));
            }
        }
    }

    /// Every ready job is in its lane under its order key, and nothing else is
    /// (`check_invariants`; between passes, so no job is set aside).
    pub(crate) fn check_ready_sets(&self) -> Result<(), String> {
        let mut in_lanes = 0usize;
        for (slot, j) in self.jobs.iter().enumerate() {
            let Some(j) = j else { continue };
            if j.aside {
                return Err(format!("job {}: still set aside between passes", j.id.0));
            }
            let Some((key, _, am)) = j.ready else { continue };
            let q = &self.queues[j.leaf as usize];
            let set = if am { &q.ready_am } else { &q.ready };
            if !set.contains(&(key, slot as JobSlot)) {
                return Err(format!("job {}: not in its lane of {} under {key:?}", j.id.0, q.path));
            }
            let now = self.job_order_key(slot as JobSlot);
            if key != now {
                return Err(format!("job {}: in its lane under {key:?}, not its order key {now:?}", j.id.0));
            }
            in_lanes += 1;
        }
        let total: usize = self.queues.iter().map(|q| q.ready.len() + q.ready_am.len()).sum();
        if total != in_lanes {
            return Err(format!("the lanes hold {total} entries, {in_lanes} jobs are ready"));
        }
        Ok(())
    }

    fn count_shape(&mut self, leaf: u32, shape: &Resources, add: bool) {
        let mut q = Some(leaf);
        while let Some(ix) = q {
            let queue = &mut self.queues[ix as usize];
            if add {
                queue.ready_jobs += 1;
            } else {
                queue.ready_jobs -= 1;
            }
            count(&mut queue.ready_shapes, shape, add);
            queue.smallest = first_keys(&queue.ready_shapes);
            let (ready, parent) = (queue.ready_jobs, queue.parent);
            // A child enters its parent's ordered set with its first ready job, leaves it with
            // its last (`fair_children.rs`).
            match (add, ready) {
                (true, 1) => self.kid_enter(ix),
                (false, 0) => self.kid_leave(ix),
                _ => {}
            }
            q = parent;
        }
    }

    /// The componentwise smallest next request under a queue.
    pub(crate) fn smallest_request(&self, q: u32) -> Resources {
        self.queues[q as usize].smallest
    }
}

/// The smallest value of each per-resource multiset (0 when empty).
fn first_keys(maps: &[BTreeMap<u64, u32>; 3]) -> Resources {
    let first = |i: usize| maps[i].keys().next().copied().unwrap_or(0);
    Resources::new(first(0), first(1), first(2))
}

/// Count a request size in (or out of) per-resource multisets.
fn count(maps: &mut [BTreeMap<u64, u32>; 3], shape: &Resources, add: bool) {
    for (i, &k) in ResourceKind::ALL.iter().enumerate() {
        let map = &mut maps[i];
        let v = shape.get(k);
        if add {
            *map.entry(v).or_insert(0) += 1;
        } else if let Some(n) = map.get_mut(&v) {
            *n -= 1;
            if *n == 0 {
                map.remove(&v);
            }
        }
    }
}
