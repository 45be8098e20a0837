//! Capacity mode's per-user bookkeeping in each leaf, kept up to date as jobs change instead of
//! recomputed from the leaf's jobs on every placement — YARN's `UsersManager`:
//!
//! - each user of a leaf has what its runnable jobs hold (`User.getUsed`, kept by
//!   `UsersManager.updateUserResourceUsage` on every allocation and release, per partition);
//! - the users with a job that wants containers are active; the leaf keeps what they hold
//!   together (`totalResUsageForActiveUsers`) and their weights summed
//!   (`activeUsersTimesWeights`); a user turning active or not moves its whole usage between
//!   the totals (`activateApplication`/`updateActiveUsersResourceUsage`,
//!   `deactivateApplication`/`updateNonActiveUsersResourceUsage`) and the weights are summed
//!   again (`sumActiveUsersTimesWeights`), in user order here so the sum is the same float as
//!   a recompute's.
//!
//! The one hook is [`Engine::count_user`], called wherever a job's usage, demand or state
//! changes (`touched`, and `leave`): it compares what the job is counted for with what it now
//! is and moves the difference. A user limit then costs a lookup of the user
//! (`Engine::user_standing`), not a walk over the leaf's jobs. Debug builds check the table
//! against that walk on every lookup.
//!
//! With node labels, the table also keeps each user's memory on each label's nodes (moved by
//! `charge_label` as containers start and end) and, per queue, how many ready jobs ask for
//! each label next (for the sibling order in a label's partition, `capacity.rs`).

use weir_model::Resources;

use crate::engine::Engine;
use crate::state::{JobSlot, JobState, QueueIx};

/// Every capacity-mode leaf's users; empty in fair mode.
#[derive(Debug, Default)]
pub(crate) struct UserTable {
    /// By queue index (parents stay empty).
    leaves: Vec<LeafUsers>,
    /// By job slot: what the job is counted for now (`None`: not counted, not runnable).
    counted: Vec<Option<Counted>>,
    /// Labels in the engine's label table (0 without labelled nodes).
    labels: usize,
    /// `[queue × labels + label]`: ready jobs in the queue's subtree whose next request asks
    /// for that label.
    ready_by_label: Vec<u32>,
}

/// A leaf's users.
#[derive(Debug, Default)]
pub(crate) struct LeafUsers {
    /// Users with a runnable job in the leaf, by user index.
    users: Vec<LeafUser>,
    /// What the active users hold (`totalResUsageForActiveUsers`).
    pub active_used: Resources,
    /// The active users' weights summed, in user order (`activeUsersTimesWeights`).
    pub active_weights: f64,
    /// What the active users hold on each label's nodes, memory.
    pub active_label_used: Vec<u64>,
}

/// One user of a leaf.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct LeafUser {
    pub user: u32,
    /// Its weight in the leaf's user limit (`user_weights`, default 1).
    pub weight: f64,
    /// Its runnable jobs in the leaf.
    pub jobs: u32,
    /// Those of them that want containers.
    pub active_jobs: u32,
    /// What they hold.
    pub used: Resources,
    /// Memory they ask for and were not given.
    pub pending_memory: u64,
    /// Memory they hold on each label's nodes.
    pub label_used: Vec<u64>,
}

/// What a runnable job is counted for.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Counted {
    leaf: QueueIx,
    user: u32,
    used: Resources,
    pending_memory: u64,
    active: bool,
    /// The label its next request asks for, while it is ready.
    ready_label: Option<u32>,
}

impl LeafUsers {
    /// The user's entry, if it has a runnable job here.
    pub(crate) fn get(&self, user: u32) -> Option<&LeafUser> {
        self.users.binary_search_by_key(&user, |u| u.user).ok().map(|i| &self.users[i])
    }

    pub(crate) fn users(&self) -> &[LeafUser] {
        &self.users
    }

    /// Change one user's entry (made if missing) and keep the active totals in step; the entry
    /// goes once it counts no job.
    fn adjust(
        &mut self,
        user: u32,
        weight: impl FnOnce() -> f64,
        labels: usize,
        f: impl FnOnce(&mut LeafUser),
    ) {
        let i = match self.users.binary_search_by_key(&user, |u| u.user) {
            Ok(i) => i,
            Err(i) => {
                let entry = LeafUser {
                    user,
                    weight: weight(),
                    jobs: 0,
                    active_jobs: 0,
                    used: Resources::ZERO,
                    pending_memory: 0,
                    label_used: vec![0; labels],
                };
                self.users.insert(i, entry);
                i
            }
        };
        let u = &mut self.users[i];
        let (was_active, old_used) = (u.active_jobs > 0, u.used);
        f(u);
        let now_active = u.active_jobs > 0;
        if was_active {
            self.active_used -= old_used;
        }
        if now_active {
            self.active_used += u.used;
        }
        if was_active != now_active {
            for (total, mine) in self.active_label_used.iter_mut().zip(&u.label_used) {
                *total = if now_active { *total + mine } else { *total - mine };
            }
            self.active_weights =
                self.users.iter().filter(|u| u.active_jobs > 0).fold(0.0, |s, u| s + u.weight);
        }
        if self.users[i].jobs == 0 {
            debug_assert!(self.users[i].used.is_zero() && self.users[i].label_used.iter().all(|&m| m == 0));
            self.users.remove(i);
        }
    }
}

impl Engine {
    /// The users of a capacity-mode leaf (empty in fair mode or before any job ran there).
    pub(crate) fn leaf_users(&self, leaf: QueueIx) -> Option<&LeafUsers> {
        self.user_table.leaves.get(leaf as usize)
    }

    /// A job's usage, demand or state may have changed: count it anew in its leaf's user
    /// table. Nothing in fair mode.
    pub(crate) fn count_user(&mut self, slot: JobSlot) {
        if !self.capacity_mode() {
            return;
        }
        let j = self.job(slot);
        let want = (j.state == JobState::Runnable).then(|| Counted {
            leaf: j.leaf,
            user: j.user,
            used: j.usage,
            pending_memory: j.pending.memory,
            active: j.pending_containers > 0,
            ready_label: self.ready_label(slot),
        });
        let had = self.user_table.counted.get(slot as usize).copied().flatten();
        if want == had {
            return;
        }
        if self.user_table.leaves.len() < self.queues.len() {
            self.user_table.leaves.resize_with(self.queues.len(), Default::default);
            self.user_table.labels = self.label_count();
            let n = self.user_table.labels;
            self.user_table.ready_by_label = vec![0; n * self.queues.len()];
            for l in &mut self.user_table.leaves {
                l.active_label_used = vec![0; n];
            }
        }
        if self.user_table.counted.len() <= slot as usize {
            self.user_table.counted.resize(slot as usize + 1, None);
        }
        self.user_table.counted[slot as usize] = want;
        let ready = (
            had.and_then(|h| h.ready_label.map(|l| (h.leaf, l))),
            want.and_then(|w| w.ready_label.map(|l| (w.leaf, l))),
        );
        if ready.0 != ready.1 {
            self.count_ready_label(ready.0, false);
            self.count_ready_label(ready.1, true);
        }
        let labels = self.user_table.labels;
        let (config, names) = (&self.config, &self.users);
        // Read only when the user gets an entry.
        let weight_of = |leaf: QueueIx, user: u32| {
            move || {
                config.queues[leaf as usize]
                    .capacity
                    .as_ref()
                    .map_or(1.0, |c| c.user_weight(&names[user as usize].name))
            }
        };
        match (had, want) {
            (Some(h), Some(w)) if (h.leaf, h.user) == (w.leaf, w.user) => {
                self.user_table.leaves[w.leaf as usize].adjust(
                    w.user,
                    weight_of(w.leaf, w.user),
                    labels,
                    |u| {
                        u.used -= h.used;
                        u.used += w.used;
                        u.pending_memory = u.pending_memory - h.pending_memory + w.pending_memory;
                        u.active_jobs = u.active_jobs - u32::from(h.active) + u32::from(w.active);
                    },
                );
            }
            _ => {
                if let Some(h) = had {
                    self.user_table.leaves[h.leaf as usize].adjust(
                        h.user,
                        || 1.0,
                        labels,
                        |u| {
                            u.jobs -= 1;
                            u.used -= h.used;
                            u.pending_memory -= h.pending_memory;
                            u.active_jobs -= u32::from(h.active);
                        },
                    );
                }
                if let Some(w) = want {
                    self.user_table.leaves[w.leaf as usize].adjust(
                        w.user,
                        weight_of(w.leaf, w.user),
                        labels,
                        |u| {
                            u.jobs += 1;
                            u.used += w.used;
                            u.pending_memory += w.pending_memory;
                            u.active_jobs += u32::from(w.active);
                        },
                    );
                }
            }
        }
    }

    /// A container of `memory` of `job`'s started (`add`) or ended on the nodes of label
    /// `label`: the job's user's usage there follows (`User.getUsed(partition)`).
    pub(crate) fn count_user_label(&mut self, job: JobSlot, label: usize, memory: u64, add: bool) {
        if self.user_table.labels == 0 {
            return;
        }
        let (leaf, user) = (self.job(job).leaf, self.job(job).user);
        let Some(l) = self.user_table.leaves.get_mut(leaf as usize) else { return };
        let Ok(i) = l.users.binary_search_by_key(&user, |u| u.user) else {
            debug_assert!(false, "a container for a job whose user is not counted");
            return;
        };
        let u = &mut l.users[i];
        u.label_used[label] = if add { u.label_used[label] + memory } else { u.label_used[label] - memory };
        if u.active_jobs > 0 {
            let t = &mut l.active_label_used[label];
            *t = if add { *t + memory } else { *t - memory };
        }
    }

    /// Ready jobs under `q` whose next request asks for each label (empty without labels).
    pub(crate) fn ready_by_label(&self, q: QueueIx) -> &[u32] {
        let n = self.user_table.labels;
        self.user_table.ready_by_label.get(q as usize * n..(q as usize + 1) * n).unwrap_or(&[])
    }

    fn count_ready_label(&mut self, at: Option<(QueueIx, u32)>, add: bool) {
        let Some((leaf, label)) = at else { return };
        let n = self.user_table.labels;
        let mut q = Some(leaf);
        while let Some(ix) = q {
            let c = &mut self.user_table.ready_by_label[ix as usize * n + label as usize];
            *c = if add { *c + 1 } else { *c - 1 };
            q = self.queues[ix as usize].parent;
        }
    }

    /// A user's weight in a leaf's user limit.
    fn user_weight_in(&self, leaf: QueueIx, user: u32) -> f64 {
        self.config.queues[leaf as usize]
            .capacity
            .as_ref()
            .map_or(1.0, |c| c.user_weight(&self.users[user as usize].name))
    }

    /// The leaf's users as the walk over its runnable jobs finds them: what the table must
    /// hold (checked in debug builds).
    pub(crate) fn leaf_users_by_walk(&self, leaf: QueueIx) -> Vec<LeafUser> {
        let mut users: Vec<LeafUser> = Vec::new();
        for &(_, _, _, slot) in &self.queues[leaf as usize].runnable {
            let j = self.job(slot);
            let i = match users.binary_search_by_key(&j.user, |u| u.user) {
                Ok(i) => i,
                Err(i) => {
                    let weight = self.user_weight_in(leaf, j.user);
                    let entry = LeafUser {
                        user: j.user,
                        weight,
                        jobs: 0,
                        active_jobs: 0,
                        used: Resources::ZERO,
                        pending_memory: 0,
                        label_used: Vec::new(),
                    };
                    users.insert(i, entry);
                    i
                }
            };
            let labels = self.user_table.labels;
            let u = &mut users[i];
            u.jobs += 1;
            u.used += j.usage;
            u.pending_memory += j.pending.memory;
            u.active_jobs += u32::from(j.pending_containers > 0);
            u.label_used.resize(labels, 0);
            for &(_, id) in &j.containers {
                let Some(c) = self.container(id) else { continue };
                let label = self.nodes.slots[c.node as usize].label.as_deref();
                if let Some(l) = label.and_then(|l| self.label_index(l)) {
                    u.label_used[l as usize] += c.resources.memory;
                }
            }
        }
        users
    }

    /// The leaf's table is what a walk over its jobs finds (checked on every read in debug
    /// builds, and by `check_invariants` for every leaf).
    pub(crate) fn check_leaf_users(&self, leaf: QueueIx) -> Result<(), String> {
        let walk = self.leaf_users_by_walk(leaf);
        let empty = LeafUsers::default();
        let table = self.leaf_users(leaf).unwrap_or(&empty);
        let path = &self.queues[leaf as usize].path;
        if table.users != walk {
            return Err(format!(
                "capacity user table of {path} out of step: {:?} against {walk:?}",
                table.users
            ));
        }
        let active: Vec<&LeafUser> = walk.iter().filter(|u| u.active_jobs > 0).collect();
        let used = active.iter().fold(Resources::ZERO, |s, u| s + u.used);
        let weights = active.iter().fold(0.0, |s, u| s + u.weight);
        let mut labelled = vec![0; self.user_table.labels];
        for u in &active {
            for (t, m) in labelled.iter_mut().zip(&u.label_used) {
                *t += m;
            }
        }
        if (table.active_used, table.active_weights.to_bits(), &table.active_label_used)
            != (used, f64::to_bits(weights), &labelled)
        {
            return Err(format!("capacity user table of {path}: the active users' totals are out of step"));
        }
        Ok(())
    }

    /// Every capacity-mode leaf's user table against a walk over its jobs.
    pub(crate) fn check_user_tables(&self) -> Result<(), String> {
        if !self.capacity_mode() || self.user_table.leaves.is_empty() {
            return Ok(());
        }
        (0..self.queues.len() as QueueIx)
            .filter(|&q| self.queues[q as usize].is_leaf())
            .try_for_each(|q| self.check_leaf_users(q))
    }
}
