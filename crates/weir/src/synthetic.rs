//! Synthetic clusters and workloads for `weir bench`: an org > project > tier tree of any size,
//! identical nodes, and a seeded stream of jobs. Deterministic for a seed.

use weir_model::cluster_file::{NodeGroupSpec, QueueSpec, SchedulerSpec};
use weir_model::{ClusterConfig, ClusterFile, PartialResources, Resources};

/// A small, fast, seeded generator (SplitMix64): benchmarks need repeatable streams, not quality.
pub struct SplitMix(u64);

impl SplitMix {
    pub fn new(seed: u64) -> SplitMix {
        SplitMix(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// A cluster of `nodes` identical 16-core, 64 GiB nodes and an org > project > tier tree with
/// exactly `leaves` leaves (three tiers per project, as many orgs as projects per org).
pub fn cluster(nodes: u32, leaves: usize, scheduler: SchedulerSpec) -> ClusterConfig {
    let projects = leaves.div_ceil(3).max(1);
    let orgs = (projects as f64).sqrt().ceil() as usize;
    let per_org = projects.div_ceil(orgs);
    let mut left = leaves;
    let mut queues = Vec::new();
    for o in 0..orgs {
        let mut org =
            QueueSpec { name: format!("org{o}"), weight: Some(1.0 + (o % 4) as f64), ..Default::default() };
        for p in 0..per_org {
            if left == 0 {
                break;
            }
            let mut project = QueueSpec { name: format!("p{p}"), ..Default::default() };
            for t in 1..=3u8 {
                if left == 0 {
                    break;
                }
                project.children.push(QueueSpec {
                    name: format!("tier{t}"),
                    tier: Some(t),
                    weight: Some(f64::from(4 - t)),
                    ..Default::default()
                });
                left -= 1;
            }
            org.children.push(project);
        }
        if !org.children.is_empty() {
            queues.push(org);
        }
    }
    let file = ClusterFile {
        version: 1,
        scheduler,
        nodes: vec![NodeGroupSpec {
            count: nodes,
            resources: PartialResources { cpu: Some(16_000), memory: Some(65_536), gpu: None },
            label: None,
            gpu_model: None,
        }],
        queues,
        ..Default::default()
    };
    ClusterConfig::from_file("<synthetic>", file).expect("the synthetic cluster is valid")
}

/// The same cluster in capacity mode: each queue's fair-mode weight becomes its capacity as a
/// weight (`3w`, normalised among siblings), leaves' users are limited only by the queue's max
/// (`user_limit_factor: -1`, as fair mode has no user limit), and `max_applications` is high
/// enough that no synthetic job is refused.
pub fn capacity_cluster(nodes: u32, leaves: usize, scheduler: SchedulerSpec) -> ClusterConfig {
    let mut file = cluster(nodes, leaves, SchedulerSpec::default()).file;
    file.scheduler = SchedulerSpec {
        mode: weir_model::Mode::Capacity,
        max_applications: Some(1_000_000_000),
        queue_max_am_share_default: None,
        ..scheduler
    };
    fn convert(q: &mut QueueSpec) {
        q.capacity = Some(weir_model::CapacitySpec::Weight(q.weight.take().unwrap_or(1.0)));
        if q.children.is_empty() {
            q.user_limit_factor = Some(-1.0);
        }
        q.children.iter_mut().for_each(convert);
    }
    file.queues.iter_mut().for_each(convert);
    ClusterConfig::from_file("<synthetic>", file).expect("the synthetic capacity cluster is valid")
}

/// A tree with about `total` queues in all (root, orgs, projects and tier leaves).
pub fn cluster_with_queues(total: usize) -> ClusterConfig {
    // Each project brings 4 queues (itself + 3 tiers); orgs add about √projects more.
    let mut leaves = total * 3 / 4;
    loop {
        let c = cluster(100, leaves, SchedulerSpec::default());
        if c.queues.len() <= total || leaves <= 3 {
            return c;
        }
        leaves -= 3;
    }
}

/// A container size drawn from a few common shapes (1–4 cores, 2–16 GiB).
pub fn container(rng: &mut SplitMix) -> Resources {
    const SHAPES: [(u64, u64); 4] = [(1000, 2048), (1000, 4096), (2000, 8192), (4000, 16384)];
    let (cpu, memory) = SHAPES[rng.below(SHAPES.len() as u64) as usize];
    Resources::new(cpu, memory, 0)
}
