//! Fair shares over the queue tree: root gets the cluster, each parent splits its own share among
//! its children with the water-fill of `fair_share.rs`, each leaf splits its instantaneous share
//! among its runnable jobs. Steady shares count every queue; instantaneous ones only active queues
//! (a runnable job somewhere below).

use std::collections::BTreeSet;

use weir_model::{ResourceKind, Resources, Rounding};

use crate::engine::Engine;
use crate::fair_share::{self, Claim};
use crate::state::{JobSlot, JobSplit, JobState, QueueIx};

/// The shape of the tree the share computation needs, so it can run without an engine.
pub(crate) trait ShareTree {
    fn len(&self) -> usize;
    fn children(&self, q: usize) -> &[QueueIx];
    fn claim(&self, q: usize, kind: ResourceKind) -> (f64, u64, u64);
}

impl ShareTree for [crate::state::Queue] {
    fn len(&self) -> usize {
        <[crate::state::Queue]>::len(self)
    }
    fn children(&self, q: usize) -> &[QueueIx] {
        &self[q].children
    }
    fn claim(&self, q: usize, kind: ResourceKind) -> (f64, u64, u64) {
        let q = &self[q];
        (q.weight, q.min.get(kind), q.max.get(kind))
    }
}

/// Fill `out` with every queue's share of `total` (preorder, root first). With `active`, inactive
/// queues get nothing (instantaneous shares); without, all count (steady shares).
pub(crate) fn tree_shares<T: ShareTree + ?Sized>(
    tree: &T,
    total: Resources,
    rounding: Rounding,
    active: Option<&dyn Fn(usize) -> bool>,
    out: &mut [Resources],
) {
    let mut claims: Vec<Claim> = Vec::new();
    let mut shares: Vec<u64> = Vec::new();
    out[0] = total;
    for p in 0..tree.len() {
        let children = tree.children(p);
        if children.is_empty() {
            continue;
        }
        for kind in ResourceKind::ALL {
            claims.clear();
            for &c in children {
                let (weight, min, max) = tree.claim(c as usize, kind);
                let is_active = active.is_none_or(|f| f(c as usize));
                claims.push(Claim { weight, min, max, active: is_active });
            }
            shares.clear();
            shares.resize(children.len(), 0);
            fair_share::compute(&claims, out[p].get(kind), rounding, active.is_some(), &mut shares);
            for (i, &c) in children.iter().enumerate() {
                out[c as usize].set(kind, shares[i]);
            }
        }
    }
}

/// `n` equal claims (weight 1, no min, no max) on `pool`: YARN's result without running the
/// water-fill `n` times. With exact rounding the first `pool % n` get one unit more.
pub(crate) fn equal_split(n: usize, pool: u64, rounding: Rounding) -> (u64, u64) {
    if n == 0 {
        return (0, 0);
    }
    match rounding {
        Rounding::Exact => (pool / n as u64, pool % n as u64),
        Rounding::Yarn => {
            // Σ over n equal claims is n·floor(ratio): YARN's loop, step for step.
            let used = |ratio: f64| (ratio as u64).saturating_mul(n as u64);
            let mut hi = 1.0f64;
            while used(hi) < pool {
                hi *= 2.0;
            }
            let mut lo = 0.0f64;
            for _ in 0..25 {
                let mid = (lo + hi) / 2.0;
                let planned = used(mid);
                if planned == pool {
                    hi = mid;
                    break;
                } else if planned < pool {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            (hi as u64, 0)
        }
    }
}

impl Engine {
    /// Bring steady, instantaneous and job shares up to date with the tree's activity.
    pub(crate) fn refresh_shares(&mut self) {
        let rounding = self.config.scheduler.rounding;
        let total = self.nodes.total;
        if self.steady_dirty {
            let mut out = vec![Resources::ZERO; self.queues.len()];
            tree_shares(&self.queues[..], total, rounding, None, &mut out);
            for (q, s) in self.queues.iter_mut().zip(out) {
                q.steady = s;
            }
            self.steady_dirty = false;
        }
        if self.shares_dirty {
            let mut out = vec![Resources::ZERO; self.queues.len()];
            {
                let queues = &self.queues;
                let active = |q: usize| queues[q].running_apps > 0;
                tree_shares(&queues[..], total, rounding, Some(&active), &mut out);
            }
            for (q, s) in self.queues.iter_mut().zip(out) {
                q.instantaneous = s;
            }
            self.shares_dirty = false;
            self.activity_changed.clear();
            self.job_shares_dirty.clear();
            for leaf in 0..self.queues.len() {
                if self.queues[leaf].is_leaf() && self.queues[leaf].split != JobSplit::Nobody
                    || !self.queues[leaf].runnable.is_empty()
                {
                    self.split_leaf(leaf as QueueIx);
                }
            }
        } else {
            let changed = std::mem::take(&mut self.activity_changed);
            let mut dirty = std::mem::take(&mut self.job_shares_dirty);
            if !changed.is_empty() {
                self.refresh_instantaneous(&changed, &mut dirty);
            }
            for &leaf in &dirty {
                self.split_leaf(leaf);
            }
            if !changed.is_empty() && self.config.scheduler.preemption.enabled {
                // A recompute of every share split every leaf again, and a split that did not
                // change still had its jobs holding containers looked at for starvation (see
                // `watch_split`): the same looks, so that starvation clocks see what they saw.
                self.watch_unchanged_splits(&dirty);
            }
        }
    }

    /// Instantaneous shares after the leaves in `changed` became active or idle, worked out
    /// again only where they can change: a parent splits its pool again when some leaf below
    /// it changed (its children's activity may have) or when its own share changed; a child
    /// whose share stays as it was keeps its whole subtree's. The water-fill is a function of
    /// the pool and the children's claims and activity, so this gives the numbers a recompute
    /// of the whole tree gives (debug builds check it). Leaves whose share changed, and the
    /// changed leaves themselves, join `split` (their jobs' split follows).
    #[inline(never)]
    fn refresh_instantaneous(&mut self, changed: &[QueueIx], split: &mut BTreeSet<QueueIx>) {
        let rounding = self.config.scheduler.rounding;
        // Parents to split again, taken in preorder: a parent before its children.
        let mut todo: BTreeSet<QueueIx> = BTreeSet::new();
        for &leaf in changed {
            split.insert(leaf);
            let mut q = self.queues[leaf as usize].parent;
            while let Some(p) = q {
                if !todo.insert(p) {
                    break;
                }
                q = self.queues[p as usize].parent;
            }
        }
        let mut claims: Vec<Claim> = Vec::new();
        let mut shares: Vec<u64> = Vec::new();
        let mut moved: Vec<bool> = Vec::new();
        while let Some(p) = todo.pop_first() {
            let pool = self.queues[p as usize].instantaneous;
            let n = self.queues[p as usize].children.len();
            moved.clear();
            moved.resize(n, false);
            for kind in ResourceKind::ALL {
                claims.clear();
                for &c in &self.queues[p as usize].children {
                    let (weight, min, max) = self.queues[..].claim(c as usize, kind);
                    claims.push(Claim { weight, min, max, active: self.queues[c as usize].running_apps > 0 });
                }
                shares.clear();
                shares.resize(n, 0);
                fair_share::compute(&claims, pool.get(kind), rounding, true, &mut shares);
                for (i, &s) in shares.iter().enumerate() {
                    let c = self.queues[p as usize].children[i];
                    let q = &mut self.queues[c as usize];
                    if q.instantaneous.get(kind) != s {
                        q.instantaneous.set(kind, s);
                        moved[i] = true;
                    }
                }
            }
            for (i, &m) in moved.iter().enumerate() {
                let c = self.queues[p as usize].children[i];
                if !m {
                } else if self.queues[c as usize].is_leaf() {
                    split.insert(c);
                } else {
                    todo.insert(c);
                }
            }
        }
        if cfg!(debug_assertions) {
            let mut out = vec![Resources::ZERO; self.queues.len()];
            let queues = &self.queues;
            let active = |q: usize| queues[q].running_apps > 0;
            tree_shares(&queues[..], self.nodes.total, rounding, Some(&active), &mut out);
            for (q, s) in self.queues.iter().zip(out) {
                assert_eq!(q.instantaneous, s, "{}: incremental instantaneous share", q.path);
            }
        }
    }

    /// What `watch_split` looks at for a leaf whose split did not change, for every leaf with
    /// a split that is not in `split`.
    fn watch_unchanged_splits(&mut self, split: &BTreeSet<QueueIx>) {
        let mut look: Vec<JobSlot> = Vec::new();
        for leaf in 0..self.queues.len() as QueueIx {
            let q = &self.queues[leaf as usize];
            if !q.is_leaf() || split.contains(&leaf) {
                continue;
            }
            match &q.split {
                JobSplit::Nobody => continue,
                JobSplit::Equal { .. } => look.extend(q.holding.iter().copied()),
                JobSplit::First { job, .. } => look.extend(q.holding.iter().copied().chain([*job, *job])),
            }
        }
        look.retain(|&s| self.jobs[s as usize].is_some());
        for s in look {
            self.watch_starvation(s);
        }
    }

    /// Split a leaf's instantaneous share among its runnable jobs: O(1) for `yarn` rounding
    /// (O(jobs) under `exact`, to find which jobs get the units left over), plus a starvation
    /// look at every job when preemption is on (their targets follow their shares).
    fn split_leaf(&mut self, leaf: QueueIx) {
        let rounding = self.config.scheduler.rounding;
        let q = &self.queues[leaf as usize];
        let share = q.instantaneous;
        let split = if q.runnable.is_empty() {
            JobSplit::Nobody
        } else if q.policy.leaf_only() {
            // YARN's FifoPolicy.computeShares gives the whole share to the earliest job (weir's
            // `priority` to the first by priority); the others get none.
            let first = q.runnable.first().map_or(0, |k| k.3);
            JobSplit::First { job: first, share }
        } else {
            let n = q.runnable.len();
            let mut base = Resources::ZERO;
            let mut extra = [0u64; 3];
            for (i, kind) in ResourceKind::ALL.iter().enumerate() {
                let (b, e) = equal_split(n, share.get(*kind), rounding);
                base.set(*kind, b);
                extra[i] = e;
            }
            // Ties on the extra unit (exact rounding) go to the earliest jobs: those whose key
            // is below the key of the `extra`-th job.
            let mut cut = [None; 3];
            let most = extra.iter().copied().max().unwrap_or(0);
            if most > 0 {
                for (rank, key) in q.runnable.iter().enumerate().take(most as usize + 1) {
                    for i in 0..3 {
                        if extra[i] == rank as u64 {
                            cut[i] = Some(*key);
                        }
                    }
                }
            }
            JobSplit::Equal { base, cut }
        };
        let old = std::mem::replace(&mut self.queues[leaf as usize].split, split);
        if self.config.scheduler.preemption.enabled {
            self.watch_split(leaf, &old);
        }
    }

    /// After a leaf's split changed: look again at the starvation of the jobs it can change.
    /// A job holding nothing is starving exactly when its target is above zero, so while the
    /// split keeps every target as zero or non-zero as before, only jobs holding containers (and
    /// a fifo leaf's old and new first job) need a look — not every job of a deep backlog.
    fn watch_split(&mut self, leaf: QueueIx, old: &JobSplit) {
        let q = &self.queues[leaf as usize];
        let threshold = q.fair_share_threshold;
        let zeros = |r: Resources| {
            let t = r.scale(threshold);
            [t.cpu > 0, t.memory > 0, t.gpu > 0]
        };
        let signature = |s: &JobSplit| match s {
            JobSplit::Equal { base, .. } => Some((zeros(*base), zeros(*base + Resources::new(1, 1, 1)))),
            _ => None,
        };
        let mut look: Vec<JobSlot> = match (old, &q.split) {
            (JobSplit::Equal { .. }, JobSplit::Equal { .. }) if signature(old) == signature(&q.split) => {
                q.holding.iter().copied().collect()
            }
            (JobSplit::First { job: a, .. }, JobSplit::First { job: b, .. }) => {
                q.holding.iter().copied().chain([*a, *b]).collect()
            }
            _ => q.runnable.iter().map(|k| k.3).collect(),
        };
        look.retain(|&s| self.jobs[s as usize].is_some());
        for s in look {
            self.watch_starvation(s);
        }
    }

    /// A job's fair share: its part of its leaf's instantaneous share if it is runnable, else
    /// nothing.
    pub(crate) fn fair_share_of(&self, slot: JobSlot) -> Resources {
        let j = self.job(slot);
        if j.state != JobState::Runnable {
            return Resources::ZERO;
        }
        match &self.queues[j.leaf as usize].split {
            JobSplit::Nobody => Resources::ZERO,
            JobSplit::First { job, share } => {
                if *job == slot {
                    *share
                } else {
                    Resources::ZERO
                }
            }
            JobSplit::Equal { base, cut } => {
                let key = self.runnable_key(slot);
                let mut r = *base;
                for (i, kind) in ResourceKind::ALL.iter().enumerate() {
                    if cut[i].is_some_and(|c| key < c) {
                        r.set(*kind, r.get(*kind) + 1);
                    }
                }
                r
            }
        }
    }
}

/// Steady and instantaneous fair share of one queue.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueShares {
    pub queue: weir_model::QueuePath,
    pub steady: Resources,
    pub instantaneous: Resources,
}

struct ConfigTree {
    children: Vec<Vec<QueueIx>>,
    claims: Vec<(f64, Resources, Resources)>,
}

impl ShareTree for ConfigTree {
    fn len(&self) -> usize {
        self.children.len()
    }
    fn children(&self, q: usize) -> &[QueueIx] {
        &self.children[q]
    }
    fn claim(&self, q: usize, kind: ResourceKind) -> (f64, u64, u64) {
        let (w, min, max) = &self.claims[q];
        (*w, min.get(kind), max.get(kind))
    }
}

/// Fair shares of every queue of `config` on its configured nodes, depth-first with root first,
/// when exactly the leaves in `active` have a runnable job. The engine computes the same numbers.
pub fn shares_for(config: &weir_model::ClusterConfig, active: &[weir_model::QueueIndex]) -> Vec<QueueShares> {
    let total = config.total_resources();
    let n = config.queues.len();
    let tree = ConfigTree {
        children: config.queues.iter().map(|q| q.children.iter().map(|&c| c as QueueIx).collect()).collect(),
        claims: config
            .queues
            .iter()
            .map(|q| {
                let min = q.min.resolve(&total);
                let weight = fair_share::weight(q.weight, config.scheduler.rounding);
                (weight, min, q.max.resolve(&total).component_max(&min))
            })
            .collect(),
    };
    let mut is_active = vec![false; n];
    for &leaf in active {
        let mut q = Some(leaf);
        while let Some(i) = q {
            is_active[i] = true;
            q = config.queues[i].parent;
        }
    }
    let rounding = config.scheduler.rounding;
    let mut steady = vec![Resources::ZERO; n];
    let mut inst = vec![Resources::ZERO; n];
    tree_shares(&tree, total, rounding, None, &mut steady);
    let f = |q: usize| is_active[q];
    tree_shares(&tree, total, rounding, Some(&f), &mut inst);
    config
        .queues
        .iter()
        .zip(steady.into_iter().zip(inst))
        .map(|(q, (s, i))| QueueShares { queue: q.path.clone(), steady: s, instantaneous: i })
        .collect()
}
