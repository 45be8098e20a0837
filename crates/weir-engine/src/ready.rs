//! The ready sets: per leaf, the runnable jobs that want a container and are not blocked in the
//! current pass, ordered by the leaf's policy; per queue, how many such jobs sit below it and
//! the sizes of their next requests.
//!
//! These keep a scheduling pass proportional to the containers it places rather than to the
//! jobs that wait: the best job of a leaf is the first of its set, a blocked job leaves the set
//! until the pass ends, and a subtree whose smallest next request (per resource) is at least a
//! request that already found no node is skipped whole.

use weir_model::{Policy, ResourceKind, Resources};

use crate::engine::Engine;
use crate::state::{JobKey, JobSlot, JobState};

/// Order-preserving bits of a non-negative float.
fn bits(x: f32) -> u64 {
    u64::from(x.max(0.0).to_bits())
}

impl Engine {
    /// A job's input changed (usage, demand, state): keep every derived index in step.
    pub(crate) fn touched(&mut self, slot: JobSlot) {
        self.sync_ready(slot);
        self.watch_starvation(slot);
    }

    /// The job's place in its leaf's order. Jobs have no min share and weight 1 (YARN: app
    /// priority 1, no size-based weight), so `fair` reduces to (memory used, submit time, id),
    /// `drf` to (usage / cluster per resource as f32, largest first; submit time; id), YARN's
    /// `fifo` to (submit time, id) and weir's `priority` to (priority, submit time, id).
    pub(crate) fn job_order_key(&self, slot: JobSlot) -> JobKey {
        let j = self.job(slot);
        let submit = j.submit_time.as_millis();
        match self.queues[j.leaf as usize].policy {
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
            Policy::Fifo => ([0, 0, 0], submit, j.id.0),
            // Higher priority first.
            Policy::Priority => ([(i32::MAX as i64 - j.priority as i64) as u64, 0, 0], submit, j.id.0),
        }
    }

    /// Put the job in, move it within, or take it out of its leaf's ready set.
    pub(crate) fn sync_ready(&mut self, slot: JobSlot) {
        let j = self.job(slot);
        let eligible =
            j.state == JobState::Runnable && j.pending_containers > 0 && j.blocked_pass != self.pass;
        let want = if eligible {
            let shape = j.requests.front().map(|r| r.resources).unwrap_or_default();
            Some((self.job_order_key(slot), shape))
        } else {
            None
        };
        let had = self.job(slot).ready;
        if want == had {
            return;
        }
        if let (Some((old, old_shape)), Some((key, shape))) = (had, want) {
            if old_shape == shape {
                // Only its place in the leaf moved (its usage changed): the counts of ready jobs
                // and request sizes up the tree stay as they are.
                let leaf = self.job(slot).leaf as usize;
                let ready = &mut self.queues[leaf].ready;
                ready.remove(&(old, slot));
                ready.insert((key, slot));
                self.job_mut(slot).ready = Some((key, shape));
                return;
            }
        }
        self.unready(slot);
        if let Some((key, shape)) = want {
            let leaf = self.job(slot).leaf;
            self.queues[leaf as usize].ready.insert((key, slot));
            self.job_mut(slot).ready = Some((key, shape));
            self.count_shape(leaf, &shape, true);
        }
    }

    /// Take the job out of its leaf's ready set, if it is there.
    pub(crate) fn unready(&mut self, slot: JobSlot) {
        let Some((key, shape)) = self.job_mut(slot).ready.take() else { return };
        let leaf = self.job(slot).leaf;
        self.queues[leaf as usize].ready.remove(&(key, slot));
        self.count_shape(leaf, &shape, false);
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
            for (i, &k) in ResourceKind::ALL.iter().enumerate() {
                let map = &mut queue.ready_shapes[i];
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
            q = queue.parent;
        }
    }

    /// The componentwise smallest next request under a queue.
    pub(crate) fn smallest_request(&self, q: u32) -> Resources {
        let m = &self.queues[q as usize].ready_shapes;
        let first = |i: usize| m[i].keys().next().copied().unwrap_or(0);
        Resources::new(first(0), first(1), first(2))
    }
}
