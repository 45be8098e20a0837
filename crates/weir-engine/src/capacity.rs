//! Capacity mode's policy: where the Capacity Scheduler decides differently from the Fair
//! Scheduler, the engine asks this module. The tree walk, the placement loop, running-app
//! limits, reservations, gangs and `explain` stay shared.
//!
//! - **Sibling order** (`PriorityUtilizationQueueOrderingPolicy`, priority respected): a queue's
//!   used capacity is its usage over its guarantee (memory, as YARN's default resource
//!   calculator; the guarantee at least the minimum allocation, `CSQueueUtils.updateUsedCapacity`).
//!   Of two siblings with the same priority, the lower used capacity goes first; with different
//!   priorities, the higher priority goes first when both are under their guarantee or both at or
//!   over it, else the one under its guarantee. Ties: the larger absolute capacity, then the name.
//! - **Elastic capacity**: a queue may grow past its guarantee up to its `max_capacity` (the
//!   engine's queue max), never past it.
//! - **User limit** (`UsersManager.computeUserLimit`, checked as
//!   `AbstractLeafQueue.canAssignToUser`): see [`user_limit`].
//! - **AM limit** (`AbstractLeafQueue.calculateAndGetAMResourceLimitPerPartition`): see
//!   `Engine::capacity_am_limit`.
//! - **Leaf order**: `fifo` is the leaf's `priority` policy: job priority, then submit time
//!   (`FifoOrderingPolicy`: `PriorityComparator`, `FifoComparator`). `fair` is the leaf's `fair`
//!   policy (`FairOrderingPolicy`: `FairComparator` on memory used, then start time; a job
//!   without demand is never ready, so its demand tie-break never decides; then
//!   `FifoComparator`, the id); with `size_based_weight` the memory used is divided by
//!   log2(1 + demand) first: see [`size_weighted_usage`].
//! - **Submissions** (`AbstractLeafQueue.validateSubmitApplication`): refused by a stopped queue
//!   on the path, at the leaf's `max_applications`, or at the user's share of it: see
//!   `Engine::capacity_rejection`.
//! - **Preemption**: the proportional policy, in `capacity_preemption.rs`.

use std::cmp::Ordering;

use weir_model::{ResourceKind, Resources};

use crate::engine::Engine;
use crate::nodes::Ask;
use crate::state::{JobSlot, QueueIx};

/// What [`user_limit`] needs to know about a leaf and its users, all in the leaf's partition
/// (weir has one: the whole cluster).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UserLimitInputs {
    /// The leaf's guarantee (its absolute capacity of the cluster).
    pub capacity: Resources,
    /// The leaf's effective max (its absolute max capacity, at most the cluster).
    pub max_capacity: Resources,
    /// Everything the leaf's users hold.
    pub used: Resources,
    /// What the active users (those with a job that wants containers) hold.
    pub active_used: Resources,
    /// The active users' weights summed (each 1 unless `user_weights` says otherwise).
    pub active_weights: f64,
    /// `min_user_percent` (YARN's `minimum-user-limit-percent`).
    pub min_user_percent: f64,
    /// `user_limit_factor`; -1 for none.
    pub user_limit_factor: f64,
    /// The scheduler's minimum allocation (zero components: none).
    pub minimum_allocation: Resources,
    /// The weight of the user whose limit is wanted.
    pub user_weight: f64,
}

/// The most one user may hold in a leaf before it gets no more containers, as
/// `UsersManager.computeUserLimit` (active users) and `getComputedResourceLimitForActiveUsers`
/// compute it:
///
/// ```text
/// queue_capacity   = max(capacity, minimum_allocation)
/// current_capacity = queue_capacity               if used < queue_capacity
///                  = used + minimum_allocation    otherwise (the queue is over its guarantee)
/// limit            = max( ceil((active_used + minimum_allocation) / active_weights),
///                         ceil(floor(current_capacity × min_user_percent) / 100) )
/// max_user_limit   = floor(queue_capacity × user_limit_factor)
///                    (the leaf's max capacity when the factor is -1 or the capacity is 0)
/// user_limit       = round_up(min(limit, max_user_limit), minimum_allocation)
/// this user's      = floor_to(user_limit × user_weight, minimum_allocation)
/// ```
///
/// `used` is rounded up to the minimum allocation first (YARN's `consumed`). Arithmetic is per
/// resource; `max`, `min` and "less than" compare memory, as YARN's default resource
/// calculator does. A user whose usage is above the result gets no container (a `>` check: it
/// may pass the limit by one container).
pub fn user_limit(i: &UserLimitInputs) -> Resources {
    let step = i.minimum_allocation;
    let by_memory_max = |a: Resources, b: Resources| if a.memory >= b.memory { a } else { b };
    let by_memory_min = |a: Resources, b: Resources| if a.memory <= b.memory { a } else { b };
    let queue_capacity = by_memory_max(i.capacity, step);
    let consumed = i.used.round_up_to(&step);
    let current_capacity =
        if consumed.memory < queue_capacity.memory { queue_capacity } else { consumed + step };
    let per_user = map(i.active_used + step, |v| {
        if i.active_weights > 0.0 {
            (v as f64 / i.active_weights).ceil() as u64
        } else {
            v
        }
    });
    let percent = map(current_capacity, |v| ((v as f64 * i.min_user_percent).floor() / 100.0).ceil() as u64);
    let limit = by_memory_max(per_user, percent);
    let max_user_limit = if i.user_limit_factor == -1.0 || i.capacity.is_zero() {
        i.max_capacity
    } else {
        map(queue_capacity, |v| (v as f64 * i.user_limit_factor).floor() as u64)
    };
    let user_limit = by_memory_min(limit, max_user_limit).round_up_to(&step);
    // multiplyAndNormalizeDown: scaled, then down to a multiple of the minimum allocation.
    map2(user_limit, step, |v, s| {
        let w = (v as f64 * i.user_weight).floor() as u64;
        w.checked_div(s).map_or(w, |n| n * s)
    })
}

fn map(r: Resources, f: impl Fn(u64) -> u64) -> Resources {
    let mut out = Resources::ZERO;
    for k in ResourceKind::ALL {
        out.set(k, f(r.get(k)));
    }
    out
}

fn map2(a: Resources, b: Resources, f: impl Fn(u64, u64) -> u64) -> Resources {
    let mut out = Resources::ZERO;
    for k in ResourceKind::ALL {
        out.set(k, f(a.get(k), b.get(k)));
    }
    out
}

/// A job's place in a `fair`-ordered leaf with `size_based_weight`, as an order-preserving key:
/// `FairOrderingPolicy.getMagnitude`, memory used / (ln(1 + demand) / ln 2), demand being memory
/// used plus pending (`ResourceUsage.getCachedDemand`). Smaller goes first. YARN's comparator
/// would see NaN for a job with neither use nor demand and call it equal to anything; such a job
/// is never ready here, and it is given 0 (first) for a total order.
pub fn size_weighted_usage(used_memory: u64, demand_memory: u64) -> u64 {
    let weight = (demand_memory as f64).ln_1p() / std::f64::consts::LN_2;
    let magnitude = if used_memory == 0 { 0.0 } else { used_memory as f64 / weight };
    // A non-negative f64's bits order as the numbers do (+∞ last).
    magnitude.to_bits()
}

/// A queue's place among its siblings (`PriorityUtilizationQueueOrderingPolicy`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct SiblingKey {
    /// Usage over guarantee, as a Java float (YARN's `QueueCapacities` hold floats).
    pub used: f32,
    pub priority: i32,
    /// The guarantee's memory: for equal standing, the larger guarantee first.
    pub capacity: u64,
}

/// Less: served first. Ties left to the caller (by name).
pub(crate) fn compare_siblings(a: &SiblingKey, b: &SiblingKey) -> Ordering {
    let by_used = || a.used.partial_cmp(&b.used).unwrap_or(Ordering::Equal);
    let first = if a.priority == b.priority {
        by_used()
    } else if (a.used < 1.0) == (b.used < 1.0) {
        b.priority.cmp(&a.priority)
    } else {
        by_used()
    };
    first.then(b.capacity.cmp(&a.capacity))
}

impl Engine {
    #[inline]
    pub(crate) fn capacity_mode(&self) -> bool {
        self.config.scheduler.mode == weir_model::Mode::Capacity
    }

    fn sibling_key(&self, q: QueueIx) -> SiblingKey {
        let queue = &self.queues[q as usize];
        let (used, capacity) = match self.competing_label(q) {
            Some(l) => (self.label_used(q, l), self.label_capacity(q, l).0),
            // With labelled nodes: the standing in the default partition.
            None if self.label_count() > 0 => {
                (queue.usage.memory - self.labelled_used(q), self.in_default_partition(queue.min.memory))
            }
            None => (queue.usage.memory, queue.min.memory),
        };
        let guarantee = capacity.max(self.config.scheduler.minimum_allocation.memory).max(1);
        SiblingKey {
            used: used as f32 / guarantee as f32,
            priority: self.config.queues[q as usize].capacity.as_ref().map_or(0, |c| c.queue_priority),
            capacity,
        }
    }

    /// The node label whose partition a subtree competes in: YARN orders a parent's children
    /// per partition, for a node of that partition (`ParentQueue.assignContainers` →
    /// `PriorityUtilizationQueueOrderingPolicy.getAssignmentIterator(partition)`, comparing
    /// `getUsedCapacity(partition)` and `getAbsoluteCapacity(partition)`). weir descends
    /// before it picks a node, so a subtree whose ready jobs all ask for labels competes by its
    /// standing in the first such label's partition; one with any ready request for the
    /// default partition by its standing there (what it holds off labelled nodes over its
    /// share of the unlabelled nodes).
    fn competing_label(&self, q: QueueIx) -> Option<u32> {
        let by_label = self.ready_by_label(q);
        if by_label.is_empty() {
            return None;
        }
        let labelled: u32 = by_label.iter().sum();
        debug_assert!(labelled <= self.queues[q as usize].ready_jobs);
        if labelled < self.queues[q as usize].ready_jobs {
            return None;
        }
        by_label.iter().position(|&c| c > 0).map(|l| l as u32)
    }

    /// The child of `parent` to serve next in capacity mode: among those with a job ready and
    /// not exhausted in this pass, the first in [`compare_siblings`] order, ties by name.
    pub(crate) fn best_capacity_child(&self, parent: QueueIx, failed: &[Ask]) -> Option<QueueIx> {
        let mut best: Option<(QueueIx, SiblingKey)> = None;
        for &c in &self.queues[parent as usize].children {
            let cq = &self.queues[c as usize];
            if cq.ready_jobs == 0 || cq.exhausted_pass == self.pass || self.subtree_failed(c, failed) {
                continue;
            }
            let k = self.sibling_key(c);
            let better = match &best {
                None => true,
                Some((b, bk)) => match compare_siblings(&k, bk) {
                    Ordering::Less => true,
                    Ordering::Greater => false,
                    Ordering::Equal => cq.name_rank < self.queues[*b as usize].name_rank,
                },
            };
            if better {
                best = Some((c, k));
            }
        }
        best.map(|(c, _)| c)
    }

    /// The user limit of `job`'s user in its leaf and what that user holds there, in capacity
    /// mode; `None` in fair mode. With labelled nodes, a request for no label sees the
    /// default partition (usage off labelled nodes, the leaf's share of the unlabelled ones);
    /// a request for a node label, both in that label's
    /// partition (`UsersManager.computeUserLimit` for the node's partition: the leaf's
    /// guarantee and max there, what it and its active users hold there; the active users and
    /// their weights are the leaf's, as YARN's `activeUsersSet` is not per partition), memory
    /// only. Read from the leaf's user table (`capacity_users.rs`), checked against a walk
    /// over the leaf's jobs in debug builds.
    pub(crate) fn user_standing(&self, job: JobSlot) -> Option<(Resources, Resources)> {
        let j = self.job(job);
        let leaf = j.leaf;
        let cap = self.config.queues[leaf as usize].capacity.as_ref()?;
        if cfg!(debug_assertions) {
            if let Err(e) = self.check_leaf_users(leaf) {
                panic!("{e}");
            }
        }
        let q = &self.queues[leaf as usize];
        let table = self.leaf_users(leaf);
        let mine = table.and_then(|t| t.get(j.user));
        let user_weight =
            mine.map_or_else(|| cap.user_weight(&self.users[j.user as usize].name), |u| u.weight);
        let (active_used, active_weights) =
            table.map_or((Resources::ZERO, 0.0), |t| (t.active_used, t.active_weights));
        let label = j.requests.front().and_then(|r| self.label_of_selector(r.selector));
        let mut inputs = UserLimitInputs {
            capacity: q.min,
            max_capacity: q.max.component_min(&self.nodes.total),
            used: q.usage,
            active_used,
            active_weights,
            min_user_percent: cap.min_user_percent,
            user_limit_factor: cap.user_limit_factor,
            minimum_allocation: self.config.scheduler.minimum_allocation,
            user_weight,
        };
        let mut used = mine.map_or(Resources::ZERO, |u| u.used);
        if label.is_none() && self.label_count() > 0 {
            // The default partition: what is held off labelled nodes, against the leaf's
            // share of the unlabelled nodes.
            let labelled = |v: &[u64]| v.iter().sum::<u64>();
            inputs.capacity.memory = self.in_default_partition(inputs.capacity.memory);
            inputs.max_capacity.memory = self.in_default_partition(inputs.max_capacity.memory);
            inputs.used.memory -= self.labelled_used(leaf);
            inputs.active_used.memory -= table.map_or(0, |t| labelled(&t.active_label_used));
            used.memory -= mine.map_or(0, |u| labelled(&u.label_used));
        }
        if let Some(l) = label {
            let memory = |m: u64| Resources { memory: m, ..Resources::ZERO };
            let (guaranteed, max) = self.label_capacity(leaf, l);
            inputs.capacity = memory(guaranteed);
            inputs.max_capacity = memory(max);
            inputs.used = memory(self.label_used(leaf, l));
            inputs.active_used = memory(table.map_or(0, |t| t.active_label_used[l as usize]));
            used = memory(mine.map_or(0, |u| u.label_used[l as usize]));
        }
        Some((user_limit(&inputs), used))
    }

    /// The most a capacity-mode leaf's application masters may hold
    /// (`AbstractLeafQueue.calculateAndGetAMResourceLimitPerPartition`): `max_am_percent` of
    /// what the queue may use — the larger of its guarantee and its current limit, here its max
    /// capacity within the cluster — rounded up to the minimum allocation.
    pub(crate) fn capacity_am_limit(&self, leaf: QueueIx, percent: f64) -> Resources {
        let q = &self.queues[leaf as usize];
        let usable = q.max.component_min(&self.nodes.total);
        let usable = if usable.memory >= q.min.memory { usable } else { q.min };
        map(usable, |v| (v as f64 * percent).ceil() as u64)
            .round_up_to(&self.config.scheduler.minimum_allocation)
    }
}

/// Jobs one user may have in a leaf, running and waiting (`AbstractLeafQueue`'s
/// `maxApplicationsPerUser`): min(max_applications, ⌊max_applications × min_user_percent / 100
/// × user_limit_factor⌋) in Java floats; with `user_limit_factor` -1 the leaf's own limit
/// (YARN's formula would give a negative limit there and refuse every job).
pub fn max_applications_per_user(
    max_applications: u32,
    min_user_percent: f64,
    user_limit_factor: f64,
) -> u32 {
    if user_limit_factor == -1.0 {
        return max_applications;
    }
    let scaled = max_applications as f32 * (min_user_percent as f32 / 100.0) * user_limit_factor as f32;
    max_applications.min(scaled.max(0.0) as u32)
}

impl Engine {
    /// Why capacity mode refuses a job submitted to `leaf` by `user`, if it does
    /// (`AbstractLeafQueue.validateSubmitApplication`, `ParentQueue.validateSubmitApplication`):
    /// a stopped queue on its path, the leaf at `max_applications` jobs (running and waiting),
    /// or the user at its share of them. `None` in fair mode.
    pub(crate) fn capacity_rejection(&self, leaf: QueueIx, user: &str) -> Option<String> {
        let cap = self.config.queues[leaf as usize].capacity.as_ref()?;
        for q in self.path_up(leaf) {
            let state = self.config.queues[q as usize].capacity.as_ref().map(|c| c.state);
            if state == Some(weir_model::QueueState::Stopped) {
                return Some(format!(
                    "{} is stopped: it takes no new jobs (those it has run to the end)",
                    self.queues[q as usize].path
                ));
            }
        }
        let q = &self.queues[leaf as usize];
        let jobs = q.running_apps + q.waiting_apps;
        if jobs >= cap.max_applications {
            return Some(format!(
                "{} already has {jobs} jobs, its max_applications {} (YARN's maximum-applications; by default \
                 scheduler.max_applications × the queue's share of the cluster)",
                q.path, cap.max_applications
            ));
        }
        let per_user =
            max_applications_per_user(cap.max_applications, cap.min_user_percent, cap.user_limit_factor);
        if jobs < per_user {
            return None;
        }
        let u = self.user_by_name(user)?;
        let waiting = q.waiting.get(&u).map_or(0, |w| w.len());
        let running = q.runnable.iter().filter(|k| self.job(k.3).user == u).count();
        let mine = (waiting + running) as u32;
        (mine >= per_user).then(|| {
            format!(
                "user {user} already has {mine} jobs in {}, its share of max_applications ({per_user}: \
                 max_applications × min_user_percent × user_limit_factor, YARN's maxApplicationsPerUser)",
                q.path
            )
        })
    }
}
