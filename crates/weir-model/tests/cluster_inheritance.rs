//! How a valid cluster file resolves: tier defaults, inheritance down the tree, limits, and the
//! example files under `examples/`.

use weir_model::{
    ClusterConfig, Duration, Limit, Mode, Policy, Promotion, QueueConfig, QueuePath, Resources, Rounding,
};

const EXAMPLE: &str = include_str!("../../../examples/cluster.yaml");
const SMALL: &str = include_str!("../../../examples/cluster-small.yaml");

fn parse(yaml: &str) -> ClusterConfig {
    ClusterConfig::from_yaml("c.yaml", yaml).unwrap_or_else(|e| panic!("{e}"))
}

/// A cluster of 4 × {8 cores, 32 GiB} with the given extra sections and queue items.
fn cluster(sections: &str, queues: &str) -> ClusterConfig {
    parse(&format!(
        "version: 1\n{sections}\nnodes:\n  - {{count: 4, resources: {{cpu: 8000, memory: 32g}}}}\nqueues:\n{queues}"
    ))
}

fn queue<'a>(c: &'a ClusterConfig, path: &str) -> &'a QueueConfig {
    let p = QueuePath::parse(path).unwrap();
    &c.queues[c.find(&p).unwrap_or_else(|| panic!("no queue {path}"))]
}

fn secs(s: u64) -> Option<Duration> {
    Some(Duration::from_secs(s))
}

#[test]
fn the_example_cluster_parses_as_written() {
    let c = ClusterConfig::from_yaml("examples/cluster.yaml", EXAMPLE).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.node_count(), 40);
    assert_eq!(c.total_resources(), Resources::new(640_000, 2_621_440, 0));
    assert_eq!(c.scheduler.mode, Mode::Fair);
    assert_eq!(c.scheduler.rounding, Rounding::Yarn);
    assert_eq!(c.scheduler.promotion, Promotion::Priority);
    assert_eq!(c.scheduler.increment, Resources::new(1000, 512, 0));
    assert!(c.scheduler.preemption.enabled);
    assert_eq!(c.scheduler.preemption.utilization_threshold, 0.8);
    assert_eq!(c.scheduler.preemption.kill_wait, Duration::from_secs(15));
    // root + 4 orgs + 11 projects + 32 tier leaves + default.
    assert_eq!(c.queues.len(), 49);
    assert_eq!(c.leaves().count(), 33);
    assert!(c.leaves().all(|q| q.tier.is_some()), "every leaf of the example has a tier");

    let t1 = queue(&c, "root.ads.ranking.tier1");
    assert_eq!((t1.tier, t1.priority, t1.allow_preemption_from), (Some(1), 300, false));
    assert_eq!(t1.fair_share_preemption_timeout, secs(30));
    assert_eq!(t1.fair_share_preemption_threshold, 0.9);
    assert_eq!(t1.min_share_preemption_timeout, secs(15));
    assert_eq!(t1.min, Limit::Absolute(Resources::new(96_000, 384 * 1024, 0)));
    assert_eq!(t1.max_am_share, Some(0.3));

    let t3 = queue(&c, "root.ads.ranking.tier3");
    assert_eq!((t3.priority, t3.allow_preemption_from), (100, true));
    assert_eq!(t3.fair_share_preemption_timeout, secs(300));
    assert_eq!(t3.max, Limit::Percent(25.0));
    assert_eq!(t3.max_running_apps, Some(30));

    assert_eq!(queue(&c, "root.data-platform").policy, Policy::Drf);
    assert_eq!(queue(&c, "root.data-platform.ingestion.tier1").policy, Policy::Fifo);
    let default = queue(&c, "root.default");
    assert!(default.is_leaf());
    assert_eq!((default.tier, default.parent), (Some(3), Some(0)));
}

#[test]
fn the_example_protects_all_of_search_indexing() {
    let c = parse(EXAMPLE);
    let indexing = QueuePath::parse("root.search.indexing").unwrap();
    let under: Vec<&QueueConfig> =
        c.queues.iter().filter(|q| q.path.as_str().starts_with(indexing.as_str())).collect();
    assert_eq!(under.len(), 4);
    assert!(under.iter().all(|q| !q.allow_preemption_from), "{under:#?}");
    // ... while the same tier elsewhere is preemptable.
    assert!(queue(&c, "root.search.query-logs.tier3").allow_preemption_from);
}

#[test]
fn the_small_example_parses() {
    let c = ClusterConfig::from_yaml("examples/cluster-small.yaml", SMALL).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.node_count(), 4);
    assert_eq!(c.total_resources(), Resources::new(32_000, 131_072, 0));
    let names: Vec<&str> = c.leaves().map(|q| q.name.as_str()).collect();
    assert_eq!(names, ["a", "b", "default"]);
    // Its tiers table overrides timeouts only: the built-in priorities stay.
    assert_eq!(queue(&c, "b").priority, 200);
    assert_eq!(queue(&c, "b").fair_share_preemption_timeout, secs(30));
    assert_eq!(queue(&c, "default").max.resolve(&c.total_resources()), Resources::new(16_000, 65_536, 0));
}

#[test]
fn the_tree_is_flattened_depth_first_with_root_first() {
    let c = cluster("", "  - {name: a, children: [{name: x}, {name: y}]}\n  - {name: b}\n");
    let paths: Vec<&str> = c.queues.iter().map(|q| q.path.as_str()).collect();
    assert_eq!(paths, ["root", "root.a", "root.a.x", "root.a.y", "root.b"]);
    assert_eq!(c.queues[0].children, [1, 4]);
    assert_eq!(c.queues[1].children, [2, 3]);
    assert_eq!(c.queues[3].parent, Some(1));
    assert_eq!(c.queues[2].name, "x");
}

#[test]
fn defaults_without_tiers_or_settings() {
    let c = cluster("", "  - {name: a}\n");
    let a = queue(&c, "a");
    assert_eq!(a.weight, 1.0);
    assert_eq!(a.policy, Policy::Fair);
    assert_eq!(a.min, Limit::Absolute(Resources::ZERO));
    assert_eq!(a.max, Limit::Absolute(Resources::UNBOUNDED));
    assert_eq!((a.tier, a.priority, a.allow_preemption_from), (None, 0, true));
    assert_eq!((a.fair_share_preemption_timeout, a.min_share_preemption_timeout), (None, None));
    assert_eq!(a.fair_share_preemption_threshold, 0.5);
    assert!(!c.scheduler.preemption.enabled);
    assert_eq!(c.scheduler.promotion, Promotion::Priority);
    // YARN's queueMaxAMShareDefault (0.5) and reservable-nodes (0.05); no minimum allocation.
    assert_eq!((c.scheduler.queue_max_am_share_default, a.am_share), (Some(0.5), Some(0.5)));
    assert_eq!(c.scheduler.reservable_nodes, 0.05);
    assert_eq!(c.scheduler.minimum_allocation, Resources::ZERO);
    assert_eq!(queue(&c, "root").am_share, None, "AM shares apply to leaves");
}

#[test]
fn am_shares_resolve_from_the_leaf_or_the_scheduler_default() {
    let c = cluster(
        "scheduler: {queue_max_am_share_default: 0.3}",
        "  - {name: a}\n  - {name: b, max_am_share: 0.8}\n  - {name: c, max_am_share: -1}\n  - {name: p, max_am_share: 0.2, children: [{name: x}]}\n",
    );
    let shares: Vec<Option<f64>> =
        ["a", "b", "c", "p", "p.x"].iter().map(|q| queue(&c, q).am_share).collect();
    assert_eq!(shares, [Some(0.3), Some(0.8), None, None, Some(0.3)]);
    let off = cluster(
        "scheduler: {queue_max_am_share_default: -1}",
        "  - {name: a}\n  - {name: b, max_am_share: 0.4}\n",
    );
    assert_eq!((queue(&off, "a").am_share, queue(&off, "b").am_share), (None, Some(0.4)));
}

#[test]
fn requests_normalize_to_the_minimum_allocation_then_the_increment() {
    // YARN's normalization: max(request, minimum), rounded up to a multiple of the increment.
    let c = cluster(
        "scheduler: {minimum_allocation: {cpu: 1000, memory: 1g}, increment: {cpu: 500, memory: 512}}",
        "  - {name: a}\n",
    );
    let n = |cpu, memory| c.scheduler.normalize(&Resources::new(cpu, memory, 0));
    assert_eq!(n(100, 100), Resources::new(1000, 1024, 0));
    assert_eq!(n(1200, 1100), Resources::new(1500, 1536, 0));
    assert_eq!(n(2000, 2048), Resources::new(2000, 2048, 0));
}

#[test]
fn tier_defaults_apply_to_leaves_that_name_a_tier() {
    let c = cluster(
        "tiers:\n  2: {priority: 250, fair_share_preemption_timeout: 60s, fair_share_preemption_threshold: 0.7, min_share_preemption_timeout: 20s}",
        "  - {name: t1, tier: 1}\n  - {name: t2, tier: 2}\n  - {name: t3, tier: 3}\n  - {name: none}\n",
    );
    let t2 = queue(&c, "t2");
    assert_eq!((t2.priority, t2.allow_preemption_from), (250, true));
    assert_eq!(t2.fair_share_preemption_timeout, secs(60));
    assert_eq!(t2.fair_share_preemption_threshold, 0.7);
    assert_eq!(t2.min_share_preemption_timeout, secs(20));
    // Built-in defaults where the table says nothing.
    assert_eq!((queue(&c, "t1").priority, queue(&c, "t3").priority), (300, 100));
    assert_eq!(queue(&c, "none").fair_share_preemption_timeout, None);
    assert_eq!(c.tiers[&1].percentile, 95.0);
    assert_eq!(c.tiers[&3].percentile, 70.0);
}

#[test]
fn tier_one_is_not_preemptable_by_default() {
    let c = cluster("", "  - {name: t1, tier: 1}\n  - {name: t2, tier: 2}\n  - {name: t3, tier: 3}\n");
    let allowed: Vec<bool> = ["t1", "t2", "t3"].iter().map(|n| queue(&c, n).allow_preemption_from).collect();
    assert_eq!(allowed, [false, true, true]);
    // A leaf may still opt in, and a tiers table may change the default.
    let c = cluster("", "  - {name: t1, tier: 1, allow_preemption_from: true}\n");
    assert!(queue(&c, "t1").allow_preemption_from);
    let c = cluster(
        "tiers: {1: {allow_preemption_from: true}, 3: {allow_preemption_from: false}}",
        "  - {name: t1, tier: 1}\n  - {name: t3, tier: 3}\n",
    );
    assert!(queue(&c, "t1").allow_preemption_from);
    assert!(!queue(&c, "t3").allow_preemption_from);
}

#[test]
fn explicit_settings_win_over_the_tier() {
    let c = cluster(
        "tiers: {2: {priority: 200, fair_share_preemption_timeout: 60s, fair_share_preemption_threshold: 0.7, min_share_preemption_timeout: 20s}}",
        "  - {name: q, tier: 2, priority: 7, allow_preemption_from: false, fair_share_preemption_timeout: 45s, fair_share_preemption_threshold: 0.2, min_share_preemption_timeout: 5s}\n",
    );
    let q = queue(&c, "q");
    assert_eq!((q.priority, q.allow_preemption_from), (7, false));
    assert_eq!(q.fair_share_preemption_timeout, secs(45));
    assert_eq!(q.fair_share_preemption_threshold, 0.2);
    assert_eq!(q.min_share_preemption_timeout, secs(5));
}

#[test]
fn preemption_settings_flow_from_the_scheduler_through_parents() {
    let c = cluster(
        "scheduler: {preemption: {enabled: true, fair_share_preemption_timeout: 10m, fair_share_preemption_threshold: 0.6, min_share_preemption_timeout: 1m}}",
        "  - name: org
    fair_share_preemption_timeout: 2m
    fair_share_preemption_threshold: 0.8
    children:
      - name: proj
        children:
          - {name: plain}
          - {name: t3, tier: 3}
  - {name: other}
",
    );
    // From the scheduler section, through root, to a queue that sets nothing.
    let other = queue(&c, "other");
    assert_eq!(other.fair_share_preemption_timeout, secs(600));
    assert_eq!(other.fair_share_preemption_threshold, 0.6);
    assert_eq!(other.min_share_preemption_timeout, secs(60));
    // From a parent, two levels down, to a leaf with no tier...
    let plain = queue(&c, "org.proj.plain");
    assert_eq!(plain.fair_share_preemption_timeout, secs(120));
    assert_eq!(plain.fair_share_preemption_threshold, 0.8);
    assert_eq!(plain.min_share_preemption_timeout, secs(60));
    // ... and to a tier leaf whose tier sets no timeouts.
    let t3 = queue(&c, "org.proj.t3");
    assert_eq!(t3.fair_share_preemption_timeout, secs(120));
    assert_eq!(t3.fair_share_preemption_threshold, 0.8);
}

/// The current rule (spec > tier > inherited) lets a tier's default beat a value an ancestor set
/// explicitly. This test pins that down so a change to it is deliberate.
#[test]
fn a_tier_default_beats_a_value_inherited_from_an_ancestor() {
    let c = cluster(
        "tiers: {2: {fair_share_preemption_timeout: 60s, priority: 200}}",
        "  - {name: org, priority: 5, fair_share_preemption_timeout: 2m, children: [{name: t2, tier: 2}, {name: x}]}\n",
    );
    let t2 = queue(&c, "org.t2");
    assert_eq!((t2.fair_share_preemption_timeout, t2.priority), (secs(60), 200));
    let x = queue(&c, "org.x");
    assert_eq!((x.fair_share_preemption_timeout, x.priority), (secs(120), 5));
}

#[test]
fn a_parent_that_forbids_preemption_covers_every_descendant() {
    let c = cluster(
        "",
        "  - name: org
    allow_preemption_from: false
    children:
      - name: proj
        children:
          - {name: t1, tier: 1}
          - {name: t2, tier: 2}
          - {name: t3, tier: 3}
          - {name: plain, allow_preemption_from: false}
  - {name: free, tier: 3}
",
    );
    for q in c.queues.iter().filter(|q| q.path.as_str().starts_with("root.org")) {
        assert!(!q.allow_preemption_from, "{} should not be preemptable", q.path);
    }
    assert!(queue(&c, "free").allow_preemption_from);
}

#[test]
fn limits_resolve_against_the_cluster() {
    let c = cluster(
        "",
        "  - {name: p, min: 25%, max: '50%'}\n  - {name: a, min: {cpu: 2000}, max: {memory: 100g}}\n",
    );
    let total = c.total_resources();
    assert_eq!(total, Resources::new(32_000, 131_072, 0));
    let p = queue(&c, "p");
    assert_eq!(p.min, Limit::Percent(25.0));
    assert_eq!(p.min.resolve(&total), Resources::new(8_000, 32_768, 0));
    assert_eq!(p.max.resolve(&total), Resources::new(16_000, 65_536, 0));
    // Components left out: nothing guaranteed, nothing capped.
    let a = queue(&c, "a");
    assert_eq!(a.min.resolve(&total), Resources::new(2000, 0, 0));
    assert_eq!(a.max.resolve(&total), Resources::new(u64::MAX, 102_400, u64::MAX));
    // An unbounded pool stays unbounded under a percentage.
    assert_eq!(Limit::Percent(10.0).resolve(&Resources::UNBOUNDED), Resources::UNBOUNDED);
}

#[test]
fn the_file_as_written_is_kept() {
    let c = parse(SMALL);
    assert_eq!(c.file.queues.len(), 3);
    assert_eq!(c.file.queues[0].weight, Some(3.0));
    assert_eq!(c.file.queues[1].min, None, "nothing is filled in on the raw file");
}
