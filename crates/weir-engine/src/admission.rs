//! Running-app limits: which jobs may run, and who is promoted when a slot frees up.
//!
//! A job is runnable only if its leaf and every ancestor are below `max_running_apps` and its user
//! is below the per-user limit. When a runnable job leaves, the highest queue on its path that was
//! at its limit admits waiting jobs from the leaves under it, best promotion key first, until it is
//! full again. With `promotion: priority` the key is (priority, submit time), so tier-1 work that
//! arrived late is not stuck behind tier-3 work that arrived early; `fifo` is YARN's submit order.

use weir_model::Promotion;

use crate::decision::Decision;
use crate::engine::Engine;
use crate::state::{JobSlot, JobState, PromotionKey, QueueIx, RunnableKey};

impl Engine {
    pub(crate) fn promotion_key(&self, slot: JobSlot) -> PromotionKey {
        let j = self.job(slot);
        let priority = match self.config.scheduler.promotion {
            Promotion::Priority => -(j.priority as i64),
            Promotion::Fifo => 0,
        };
        (priority, j.submit_time.as_millis(), j.id.0)
    }

    /// The job's place in its leaf's share split (see `RunnableKey`).
    pub(crate) fn runnable_key(&self, slot: JobSlot) -> RunnableKey {
        let j = self.job(slot);
        let priority = match self.queues[j.leaf as usize].policy {
            weir_model::Policy::Priority => -i64::from(j.priority),
            _ => 0,
        };
        (priority, j.submit_time.as_millis(), j.id.0, slot)
    }

    /// The first queue, from the leaf up, that is at its running-app limit.
    pub(crate) fn full_queue_on_path(&self, leaf: QueueIx) -> Option<QueueIx> {
        self.path_up(leaf).find(|&q| {
            let q = &self.queues[q as usize];
            q.max_running_apps.is_some_and(|m| q.running_apps >= m)
        })
    }

    pub(crate) fn user_full(&self, user: u32) -> bool {
        self.config.scheduler.user_max_running_apps.is_some_and(|m| self.users[user as usize].running >= m)
    }

    pub(crate) fn admit_or_wait(&mut self, slot: JobSlot) {
        let (leaf, user) = (self.job(slot).leaf, self.job(slot).user);
        if self.full_queue_on_path(leaf).is_none() && !self.user_full(user) {
            self.make_runnable(slot);
        } else {
            let key = self.promotion_key(slot);
            let l = &mut self.queues[leaf as usize];
            let mine = l.waiting.entry(user).or_default();
            if let Some(&head) = mine.first() {
                if (key, slot) < head {
                    l.waiting_heads.remove(&head);
                    l.waiting_heads.insert((key, slot));
                }
            } else {
                l.waiting_heads.insert((key, slot));
            }
            mine.insert((key, slot));
            let path: Vec<QueueIx> = self.path_up(leaf).collect();
            for q in path {
                self.queues[q as usize].waiting_apps += 1;
            }
        }
    }

    /// Take a waiting job out of its leaf's waiting sets (not out of `waiting_apps`).
    fn unwait(&mut self, slot: JobSlot, key: PromotionKey) {
        let (leaf, user) = (self.job(slot).leaf, self.job(slot).user);
        let l = &mut self.queues[leaf as usize];
        let Some(mine) = l.waiting.get_mut(&user) else { return };
        mine.remove(&(key, slot));
        if l.waiting_heads.remove(&(key, slot)) {
            match mine.first() {
                Some(&next) => {
                    l.waiting_heads.insert(next);
                }
                None => {
                    l.waiting.remove(&user);
                }
            }
        }
    }

    fn make_runnable(&mut self, slot: JobSlot) {
        let j = self.job_mut(slot);
        j.state = JobState::Runnable;
        let (leaf, user, pending, count, id) = (j.leaf, j.user, j.pending, j.pending_containers, j.id);
        let mut q = Some(leaf);
        while let Some(ix) = q {
            let queue = &mut self.queues[ix as usize];
            queue.running_apps += 1;
            q = queue.parent;
        }
        self.users[user as usize].running += 1;
        let key = self.runnable_key(slot);
        let l = &mut self.queues[leaf as usize];
        l.runnable.insert(key);
        if l.runnable.len() == 1 {
            self.activity_changed.push(leaf);
        } else {
            self.job_shares_dirty.insert(leaf);
        }
        self.change_pending(leaf, pending, count, true);
        self.touched(slot);
        self.decisions.push(Decision::JobRunnable { job: id });
    }

    /// Take a job out of the running-app accounting, promoting waiting jobs into its slot.
    pub(crate) fn leave(&mut self, slot: JobSlot) {
        let (leaf, user, state) = (self.job(slot).leaf, self.job(slot).user, self.job(slot).state);
        if state == JobState::Waiting {
            let key = self.promotion_key(slot);
            self.unwait(slot, key);
            let path: Vec<QueueIx> = self.path_up(leaf).collect();
            for q in path {
                self.queues[q as usize].waiting_apps -= 1;
            }
            return;
        }
        // The highest queue on the path that was at its limit before this job left.
        let top = self
            .path_up(leaf)
            .filter(|&q| {
                let q = &self.queues[q as usize];
                q.max_running_apps.is_some_and(|m| q.running_apps >= m)
            })
            .last();
        let user_was_full = self.user_full(user);
        let mut q = Some(leaf);
        while let Some(ix) = q {
            let queue = &mut self.queues[ix as usize];
            queue.running_apps -= 1;
            q = queue.parent;
        }
        self.users[user as usize].running -= 1;
        let key = self.runnable_key(slot);
        let l = &mut self.queues[leaf as usize];
        l.runnable.remove(&key);
        if l.runnable.is_empty() {
            self.activity_changed.push(leaf);
        } else {
            self.job_shares_dirty.insert(leaf);
        }
        self.job_mut(slot).state = JobState::Waiting;
        self.sync_ready(slot);
        self.count_user(slot);
        if let Some(top) = top {
            self.promote_under(top);
        }
        if user_was_full {
            self.promote_under(0);
        }
    }

    /// Admit waiting jobs from the leaves under `top`, best key first, while limits allow.
    fn promote_under(&mut self, top: QueueIx) {
        loop {
            let t = &self.queues[top as usize];
            if t.max_running_apps.is_some_and(|m| t.running_apps >= m) || t.waiting_apps == 0 {
                return;
            }
            let mut best: Option<(PromotionKey, JobSlot)> = None;
            for leaf in top..t.subtree_end {
                let l = &self.queues[leaf as usize];
                if l.waiting.is_empty() || self.full_queue_on_path(leaf).is_some() {
                    continue;
                }
                let first = l.waiting_heads.iter().find(|(_, s)| !self.user_full(self.job(*s).user));
                if let Some(&(k, s)) = first {
                    if best.is_none_or(|(bk, _)| k < bk) {
                        best = Some((k, s));
                    }
                }
            }
            let Some((key, slot)) = best else { return };
            let leaf = self.job(slot).leaf;
            self.unwait(slot, key);
            let path: Vec<QueueIx> = self.path_up(leaf).collect();
            for q in path {
                self.queues[q as usize].waiting_apps -= 1;
            }
            self.make_runnable(slot);
        }
    }
}
