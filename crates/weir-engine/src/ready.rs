//! The ready sets: per leaf, the runnable jobs that want a container and are not blocked in the
//! current pass, ordered by the leaf's policy; per queue, how many such jobs sit below it and
//! the sizes of their next requests.
//!
//! These keep a scheduling pass proportional to the containers it places rather than to the
//! jobs that wait: the best job of a leaf is the first of its set, a blocked job leaves the set
//! until the pass ends, and a subtree whose smallest next request (per resource) is at least a
//! request that already found no node is skipped whole.

use std::collections::BTreeMap;
use std::ops::Bound;

use weir_model::{JobOrder, Policy, ResourceKind, Resources};

use crate::engine::Engine;
use crate::nodes::Ask;
use crate::state::{JobKey, JobSlot, JobState, ReadyEntry};

/// Order-preserving bits of a non-negative float.
fn bits(x: f32) -> u64 {
    u64::from(x.max(0.0).to_bits())
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
        match self.queues[j.leaf as usize].policy {
            Policy::Fair if self.queues[j.leaf as usize].size_based_weight => (
                [crate::capacity::size_weighted_usage(j.usage.memory, j.demand().memory), 0, 0],
                submit,
                j.id.0,
            ),
            Policy::Fair => ([j.usage.memory, 0, 0], submit, j.id.0),
            Policy::Drf => {
                let total = self.nodes.total;
                let mut d = [0f32; 3];
                for (i, &k) in ResourceKind::ALL.iter().enumerate() {
                    let t = total.get(k);
                    d[i] = if t == 0 { 0.0 } else { j.usage.get(k) as f32 / t as f32 };
                }
                d.sort_by(|a, b| b.total_cmp(a));
                ([bits(d[0]), bits(d[1]), bits(d[2])], submit, j.id.0)
            }
            Policy::Fifo => match self.queues[j.leaf as usize].job_order {
                JobOrder::Submit => ([0, 0, 0], submit, j.id.0),
                // Shortest job first by its next request's walltime; none counts as longest.
                JobOrder::Shortest => {
                    let w = j.requests.front().and_then(|r| r.walltime).map_or(u64::MAX, |w| w.as_millis());
                    ([w, 0, 0], submit, j.id.0)
                }
                JobOrder::Largest => ([u64::MAX - j.demand().cpu, 0, 0], submit, j.id.0),
            },
            // Higher priority first.
            Policy::Priority => ([(i32::MAX as i64 - j.priority as i64) as u64, 0, 0], submit, j.id.0),
        }
    }

    /// Put the job in, move it within, or take it out of its leaf's ready sets.
    pub(crate) fn sync_ready(&mut self, slot: JobSlot) {
        let j = self.job(slot);
        let eligible = j.state == JobState::Runnable && j.pending_containers > 0;
        let want = if eligible {
            let ask = j.requests.front().map(|r| r.ask()).unwrap_or(Ask::plain(Resources::ZERO));
            Some((self.job_order_key(slot), ask, self.next_is_am(slot)))
        } else {
            None
        };
        let had = self.job(slot).ready;
        if want == had {
            return;
        }
        let leaf = self.job(slot).leaf as usize;
        if let Some((key, _, lane)) = want {
            // A job that lands at or before its lane's cursor in this pass (its AM just
            // started) has not failed: remember it beside the cursor.
            let pass = self.pass;
            let q = &mut self.queues[leaf];
            let lane = usize::from(lane);
            if q.cursor[lane].is_some_and(|(p, after)| p == pass && (key, slot) <= after) {
                q.ahead[lane].push((key, slot));
            }
        }
        if let (Some((old, old_shape, old_lane)), Some((key, shape, lane))) = (had, want) {
            if old_shape == shape {
                // Only its place in the leaf moved (its usage changed, or its AM started): the
                // counts of ready jobs and request sizes up the tree stay as they are.
                let q = &mut self.queues[leaf];
                let from = if old_lane { &mut q.ready_am } else { &mut q.ready };
                from.remove(&(old, slot));
                let to = if lane { &mut q.ready_am } else { &mut q.ready };
                to.insert((key, slot));
                if old_lane != lane {
                    count(&mut q.am_shapes, &shape.r, lane);
                }
                self.job_mut(slot).ready = want;
                return;
            }
        }
        self.unready(slot);
        if let Some((key, shape, lane)) = want {
            let q = &mut self.queues[leaf];
            let to = if lane { &mut q.ready_am } else { &mut q.ready };
            to.insert((key, slot));
            if lane {
                count(&mut q.am_shapes, &shape.r, true);
            }
            self.job_mut(slot).ready = want;
            self.count_shape(leaf as u32, &shape.r, true);
        }
    }

    /// Take the job out of its leaf's ready sets, if it is there.
    pub(crate) fn unready(&mut self, slot: JobSlot) {
        let Some((key, shape, lane)) = self.job_mut(slot).ready.take() else { return };
        let leaf = self.job(slot).leaf;
        let q = &mut self.queues[leaf as usize];
        let from = if lane { &mut q.ready_am } else { &mut q.ready };
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
    /// two lanes, past the jobs that failed (the cursors skip them in one step); the AM lane
    /// left out once not even its smallest AM fits the AM share in this pass.
    pub(crate) fn first_ready(&mut self, leaf: u32) -> Option<(ReadyEntry, bool)> {
        let normal = self.first_in_lane(leaf, 0);
        let am = if self.queues[leaf as usize].am_blocked_pass == self.pass {
            None
        } else {
            self.first_in_lane(leaf, 1)
        };
        match (normal, am) {
            (Some(a), Some(b)) if b < a => Some((b, true)),
            (Some(a), _) => Some((a, false)),
            (None, b) => b.map(|x| (x, true)),
        }
    }

    fn first_in_lane(&mut self, leaf: u32, lane: usize) -> Option<ReadyEntry> {
        let pass = self.pass;
        let q = &self.queues[leaf as usize];
        let set = if lane == 0 { &q.ready } else { &q.ready_am };
        let from = match q.cursor[lane] {
            Some((p, after)) if p == pass => Bound::Excluded(after),
            _ => {
                // The usual case: the first job has not failed in this pass.
                let first = set.first().copied();
                if first.is_none_or(|e| !self.failed_in_pass(leaf, e.1)) {
                    return first;
                }
                Bound::Unbounded
            }
        };
        let mut cursor = None;
        let mut found = None;
        for &entry in set.range((from, Bound::Unbounded)) {
            if self.failed_in_pass(leaf, entry.1) {
                cursor = Some(entry);
            } else {
                found = Some(entry);
                break;
            }
        }
        let q = &mut self.queues[leaf as usize];
        if let Some(c) = cursor {
            if q.cursor[lane].is_none_or(|(p, _)| p != pass) {
                q.ahead[lane].clear();
            }
            q.cursor[lane] = Some((pass, c));
        }
        // Jobs that landed before the cursor in this pass, still there and not failed since.
        if q.cursor[lane].is_some_and(|(p, _)| p == pass) && !q.ahead[lane].is_empty() {
            let jobs = &self.jobs;
            let failed: &[JobSlot] = if q.failed.0 == pass { &q.failed.1 } else { &[] };
            let live = |e: &ReadyEntry| {
                !failed.contains(&e.1)
                    && jobs[e.1 as usize]
                        .as_ref()
                        .is_some_and(|j| j.ready.is_some_and(|(k, _, l)| k == e.0 && usize::from(l) == lane))
            };
            let mut ahead = std::mem::take(&mut q.ahead[lane]);
            ahead.retain(live);
            q.ahead[lane] = ahead;
            if let Some(&first) = q.ahead[lane].iter().min() {
                if found.is_none_or(|f| first < f) {
                    found = Some(first);
                }
            }
        }
        found
    }

    /// Skip `job`, which failed to place, for the rest of the pass.
    pub(crate) fn skip(&mut self, leaf: u32, job: JobSlot) {
        let pass = self.pass;
        let failed = &mut self.queues[leaf as usize].failed;
        if failed.0 != pass {
            *failed = (pass, Vec::new());
        }
        failed.1.push(job);
    }

    fn failed_in_pass(&self, leaf: u32, job: JobSlot) -> bool {
        let (pass, jobs) = &self.queues[leaf as usize].failed;
        *pass == self.pass && jobs.contains(&job)
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
