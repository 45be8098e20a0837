//! Fair shares over the queue tree: root gets the cluster, each parent splits its own share among
//! its children with the water-fill of `fair_share.rs`, each leaf splits its instantaneous share
//! among its runnable jobs. Steady shares count every queue; instantaneous ones only active queues
//! (a runnable job somewhere below).

use weir_model::{ResourceKind, Resources, Rounding};

use crate::engine::Engine;
use crate::fair_share::{self, Claim};
use crate::state::{JobSlot, QueueIx};

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
            self.job_shares_dirty.clear();
            for leaf in 0..self.queues.len() {
                if self.queues[leaf].is_leaf() && !self.queues[leaf].runnable.is_empty() {
                    self.split_leaf(leaf as QueueIx);
                }
            }
        } else {
            let dirty = std::mem::take(&mut self.job_shares_dirty);
            for leaf in dirty {
                self.split_leaf(leaf);
            }
        }
    }

    /// Split a leaf's instantaneous share among its runnable jobs.
    fn split_leaf(&mut self, leaf: QueueIx) {
        let rounding = self.config.scheduler.rounding;
        let q = &self.queues[leaf as usize];
        let share = q.instantaneous;
        let mut jobs: Vec<JobSlot> = q.runnable.clone();
        if q.policy.leaf_only() {
            // YARN's FifoPolicy.computeShares gives the whole share to the earliest job (weir's
            // `priority` to the first by priority); the others get none.
            let priority = q.policy == weir_model::Policy::Priority;
            jobs.sort_by_key(|&s| {
                let j = self.job(s);
                (if priority { -(j.priority as i64) } else { 0 }, j.submit_time, j.id)
            });
            for (i, &s) in jobs.iter().enumerate() {
                self.job_mut(s).fair_share = if i == 0 { share } else { Resources::ZERO };
                self.watch_starvation(s);
            }
            return;
        }
        // Ties on the extra unit (exact rounding) go to the earliest job.
        jobs.sort_by_key(|&s| (self.job(s).submit_time, self.job(s).id));
        let n = jobs.len();
        let mut each = [(0u64, 0u64); 3];
        for (i, kind) in ResourceKind::ALL.iter().enumerate() {
            each[i] = equal_split(n, share.get(*kind), rounding);
        }
        for (rank, &s) in jobs.iter().enumerate() {
            let mut r = Resources::ZERO;
            for (i, kind) in ResourceKind::ALL.iter().enumerate() {
                let (base, extra) = each[i];
                r.set(*kind, base + u64::from((rank as u64) < extra));
            }
            self.job_mut(s).fair_share = r;
            self.watch_starvation(s);
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
