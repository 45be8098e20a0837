//! Guaranteed resources that are consistent down the tree, for the formats that state a
//! guarantee per queue (YuniKorn's `guaranteed`, Kueue's `nominalQuota`, the Capacity
//! Scheduler's capacities).
//!
//! The starting point is each queue's steady fair share (weir-engine, exact rounding): it covers
//! the queue's `min` and follows the weights. A child's `min` can exceed what its parent's own
//! share leaves it (the Fair Scheduler clamps each level on its own), and then the children's
//! guarantees add up to more than their parent's — which YuniKorn refuses
//! (`checkQueueResource`: "guaranteed resource of parent … is smaller than sum of guaranteed
//! resources of the children") and which Kueue cannot honour (quotas beyond the cluster). Here
//! such siblings are scaled down, per resource, to fit exactly, and each `min` that is no longer
//! covered is reported.

use weir_model::{ClusterConfig, Resources, Rounding};

use super::largest_remainder;

pub(crate) struct Guarantees {
    /// Per queue (index as in `cfg.queues`); root's is the cluster.
    pub per_queue: Vec<Resources>,
    /// One sentence per queue whose `min` could not be guaranteed in full.
    pub losses: Vec<String>,
}

pub(crate) fn guarantees(cfg: &ClusterConfig) -> Guarantees {
    let mut exact = cfg.clone();
    exact.scheduler.rounding = Rounding::Exact;
    let steady: Vec<Resources> = weir_engine::shares_for(&exact, &[]).into_iter().map(|s| s.steady).collect();
    let total = cfg.total_resources();
    let mut g = steady.clone();
    let mut losses = Vec::new();
    if g.is_empty() {
        return Guarantees { per_queue: g, losses };
    }
    g[0] = total;
    // Parents come before their children in `queues`, so top-down is index order.
    for p in 0..cfg.queues.len() {
        let children = &cfg.queues[p].children;
        if children.is_empty() {
            continue;
        }
        let parent = g[p];
        for (get, set, name) in COMPONENTS {
            let want: Vec<u64> = children.iter().map(|&c| get(&steady[c])).collect();
            let sum: u128 = want.iter().map(|&v| u128::from(v)).sum();
            let parts = if sum <= u128::from(get(&parent)) {
                want
            } else {
                let weights: Vec<f64> = want.iter().map(|&v| v as f64).collect();
                largest_remainder(&weights, get(&parent))
            };
            for (&c, v) in children.iter().zip(parts) {
                set(&mut g[c], v);
                let min = get(&cfg.queues[c].min.resolve(&total));
                if v < min && min != u64::MAX {
                    losses.push(format!(
                        "{}: min {name} {min} cannot be guaranteed in full: its siblings' guarantees already need more \
                         than {} offers; guaranteed {v}",
                        cfg.queues[c].path, cfg.queues[p].path
                    ));
                }
            }
        }
    }
    Guarantees { per_queue: g, losses }
}

type Component = (fn(&Resources) -> u64, fn(&mut Resources, u64), &'static str);

const COMPONENTS: [Component; 3] = [
    (|r| r.cpu, |r, v| r.cpu = v, "cpu (millicores)"),
    (|r| r.memory, |r, v| r.memory = v, "memory (MiB)"),
    (|r| r.gpu, |r, v| r.gpu = v, "gpu"),
];

#[cfg(test)]
mod tests {
    use super::*;

    /// ads has weight 1 of 4 (a quarter of 40 cores = 10) but its child wants a min of 16:
    /// YARN would give the child 16 under a parent of 10. The guarantees fit instead.
    #[test]
    fn children_never_add_up_to_more_than_their_parent() {
        let yaml = "version: 1\nnodes: [{count: 4, resources: {cpu: 10000, memory: 10g}}]\n\
                    queues:\n  - {name: ads, children: [{name: t1, min: {cpu: 16000}}, {name: t2}]}\n  - {name: other, weight: 3}\n";
        let cfg = ClusterConfig::from_yaml("c.yaml", yaml).unwrap();
        let g = guarantees(&cfg);
        let ads = cfg.find(&weir_model::QueuePath::parse("root.ads").unwrap()).unwrap();
        for q in &cfg.queues {
            let sum = q.children.iter().fold(Resources::ZERO, |a, &c| a + g.per_queue[c]);
            let me = g.per_queue[cfg.find(&q.path).unwrap()];
            assert!(sum.cpu <= me.cpu && sum.memory <= me.memory, "{}: {sum:?} > {me:?}", q.path);
        }
        let kids: u64 = cfg.queues[ads].children.iter().map(|&c| g.per_queue[c].cpu).sum();
        assert_eq!(kids, g.per_queue[ads].cpu);
        assert_eq!(g.losses.len(), 1, "{:?}", g.losses);
        assert!(
            g.losses[0].starts_with("root.ads.t1: min cpu (millicores) 16000 cannot be guaranteed"),
            "{:?}",
            g.losses
        );
    }
}
