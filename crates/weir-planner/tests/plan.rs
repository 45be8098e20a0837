//! `plan` end to end on hand-computed histories: allocations, `max_running_apps`, weights up
//! the tree, gaps, unsorted rows, overlaps, vacant and unmentioned leaves, SLO floors, the
//! window, usage/capacity, the tier-order check and the cluster verdict.

use weir_model::{
    Arrival, ClusterConfig, Distribution, Duration, JobTemplate, QueuePath, Resources, Stage, Time, Workflow,
    Workload,
};
use weir_planner::{
    plan, NameKey, Plan, PlanError, PlanInput, PlanSettings, QueueStatus, UsageHistory, Verdict,
};

const H: u64 = 3_600_000;
const CORES16: u64 = 16_000;

fn cluster(nodes: u32) -> ClusterConfig {
    let yaml = format!(
        "version: 1
nodes: [{{count: {nodes}, resources: {{cpu: 16000, memory: 64g}}}}]
queues:
  - name: ads
    weight: 5
    children:
      - {{name: tier1, tier: 1, weight: 3}}
      - {{name: tier2, tier: 2, weight: 2, max_running_apps: 7}}
      - {{name: tier3, tier: 3, weight: 1}}
  - {{name: idle, tier: 3, weight: 4, max_running_apps: 9}}
"
    );
    ClusterConfig::from_yaml("cluster.yaml", &yaml).expect("valid cluster")
}

/// tier1: 60 h at 2 instances, 35 h at 4, 5 h at 10 (apps = instances).
/// tier2, out of order: 50–100 h at 1 instance of memory (3 apps), 0–10 h at 3 of cpu (1 app);
///   10–50 h is a gap (vacant).
/// tier3: rows, all with zero usage. idle: no rows. Plus rows for queues that are not leaves.
fn history_csv() -> String {
    let rows = [
        format!("0,{},root.ads.tier1,{},8192,2", 60 * H, 2 * CORES16),
        format!("{},{},root.ads.tier1,{},8192,4", 60 * H, 95 * H, 4 * CORES16),
        format!("{},{},ads.tier1,{},8192,10", 95 * H, 100 * H, 10 * CORES16),
        format!("{},{},root.ads.tier2,0,65536,3", 50 * H, 100 * H),
        format!("0,{},root.ads.tier2,{},0,1", 10 * H, 3 * CORES16),
        format!("0,{},root.ads.tier3,0,0,0", 100 * H),
        format!("0,{},root.ghost,{},0,1", 10 * H, CORES16),
        format!("0,{},root.ads,{},0,1", 10 * H, CORES16),
        format!("0,{},bad..name,{},0,1", 10 * H, CORES16),
    ];
    format!("start,end,queue,cpu,memory,running_apps\n{}\n", rows.join("\n"))
}

fn run(
    cfg: &ClusterConfig,
    csv: &str,
    settings: &PlanSettings,
    workload: Option<&Workload>,
) -> Result<Plan, PlanError> {
    let history = UsageHistory::read_csv(csv.as_bytes(), "usage.csv", NameKey::default())?;
    plan(&PlanInput {
        cluster: cfg,
        history: &history,
        history_name: "usage.csv",
        settings,
        workload,
        threads: 1,
    })
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn leaves_get_their_percentile_and_parents_the_sum_of_their_children() {
    let cfg = cluster(10);
    let p = run(&cfg, &history_csv(), &PlanSettings::defaults_for(&cfg), None).unwrap();
    assert_eq!((p.window.start_ms, p.window.end_ms), (0, 100 * H));

    let t1 = p.queue("root.ads.tier1").unwrap();
    // 95% of 100 h in use is 95 h: 60 h at 2 plus 35 h at 4 reach it. Apps: 4 × 1.2 → 5.
    assert_eq!((t1.status, t1.instances, t1.peak_instances), (QueueStatus::Planned, 4, 10));
    assert_eq!((t1.weight, t1.max_running_apps, t1.previous_weight), (4.0, Some(5), 3.0));
    assert!(close(t1.in_use_hours, 100.0));

    let t2 = p.queue("root.ads.tier2").unwrap();
    // In use 60 h (the 40 h gap is vacant); 85% = 51 h: 50 h at 1 is not enough, so 3.
    // Apps over in-use time: 1 for 10 h, 3 for 50 h → 3 × 1.2 = 3.6 → 4.
    assert_eq!((t2.instances, t2.max_running_apps, t2.previous_max_running_apps), (3, Some(4), Some(7)));
    assert!(close(t2.in_use_hours, 60.0));

    let t3 = p.queue("root.ads.tier3").unwrap();
    assert_eq!(
        (t3.status, t3.instances, t3.weight, t3.max_running_apps),
        (QueueStatus::Vacant, 0, 0.0, Some(1))
    );

    // idle had 4 of the 9 weight units at the top: 44.4% of the cluster. It keeps that share, in
    // the plan's unit (instances): the planned leaves hold 7, so idle weighs 7 / (1 − 4/9) = 5.6.
    let idle = p.queue("root.idle").unwrap();
    assert_eq!((idle.status, idle.weight, idle.max_running_apps), (QueueStatus::NoHistory, 5.6, Some(9)));
    assert!(
        (idle.previous_share - 4.0 / 9.0).abs() < 1e-6 && (idle.share - idle.previous_share).abs() < 1e-3,
        "{idle:?}"
    );

    let ads = p.queue("root.ads").unwrap();
    assert_eq!(
        (ads.status, ads.weight, ads.instances, ads.previous_weight),
        (QueueStatus::Parent, 7.0, 7, 5.0)
    );

    // The planned cluster carries the same settings.
    let weight = |path: &str| {
        let ix = p.planned.find(&QueuePath::parse(path).unwrap()).unwrap();
        (p.planned.queues[ix].weight, p.planned.queues[ix].max_running_apps)
    };
    assert_eq!(weight("root.ads"), (7.0, None));
    assert_eq!(weight("root.ads.tier1"), (4.0, Some(5)));
    assert_eq!(weight("root.idle"), (5.6, Some(9)));

    let ignored: Vec<(&str, &str)> = p.ignored_history.iter().map(|q| (q.queue.as_str(), q.reason)).collect();
    assert_eq!(
        ignored,
        [
            ("bad..name", "not a queue path"),
            ("root.ads", "not a leaf queue"),
            ("root.ghost", "not a queue of the cluster")
        ]
    );
}

#[test]
fn usage_capacity_per_queue_tier_and_cluster_and_the_tier_order_check() {
    let cfg = cluster(10);
    let p = run(&cfg, &history_csv(), &PlanSettings::defaults_for(&cfg), None).unwrap();
    // tier1: 60·2 + 35·4 + 5·10 = 310 instance-hours over 4 instances × 100 h.
    let t1 = p.queue("root.ads.tier1").unwrap();
    assert!(close(t1.used.instance_hours, 310.0));
    assert!(close(t1.usage_capacity.instances.unwrap(), 0.775));
    assert!(close(t1.usage_capacity.cpu.unwrap(), 0.775));
    assert!(close(t1.usage_capacity.memory.unwrap(), 100.0 * 8192.0 / (4.0 * 65536.0 * 100.0)));
    // tier2: 50·1 (memory) + 10·3 (cpu) = 80 over 3 × 100.
    let t2 = p.queue("root.ads.tier2").unwrap();
    assert!(close(t2.usage_capacity.instances.unwrap(), 80.0 / 300.0));
    assert!(close(t2.usage_capacity.cpu.unwrap(), 30.0 / 300.0));
    assert!(close(t2.usage_capacity.memory.unwrap(), 50.0 / 300.0));
    // A vacant leaf has no capacity to measure against.
    assert_eq!(p.queue("root.ads.tier3").unwrap().usage_capacity.instances, None);
    // The parent sums its children: 390 over 7 × 100.
    assert!(close(p.queue("root.ads").unwrap().usage_capacity.instances.unwrap(), 390.0 / 700.0));

    assert!(close(p.tiers[&1].usage_capacity.instances.unwrap(), 0.775));
    assert_eq!((p.tiers[&1].instances, p.tiers[&2].instances, p.tiers[&3].instances), (4, 3, 0));
    assert_eq!((p.tiers[&3].leaves, p.tiers[&3].usage_capacity.instances), (1, None));
    // Percentiles fall 95 > 85 > 70, but tier 2 (0.27) has more headroom than tier 1 (0.775).
    assert!(!p.tier_order.ok);
    assert_eq!(p.tier_order.steps[0].ratio_rises, Some(false));
    assert_eq!(p.tier_order.steps[1].ratio_rises, None);
    assert!(p.tier_order.steps.iter().all(|s| s.percentile_falls));
    assert_eq!(p.tier_order.violations.len(), 1, "{:?}", p.tier_order.violations);
    assert!(p.tier_order.violations[0].contains("tier-2 usage/capacity (0.267) is below tier 1's (0.775)"));

    // Cluster: 390 instance-hours over 10 instances × 100 h; tier 1 + 2 need 7 of 10: keep.
    assert!(close(p.cluster.usage_capacity.instances.unwrap(), 0.39));
    assert_eq!(
        (p.cluster.verdict, p.cluster.tier1_tier2_allocated, p.cluster.allocated),
        (Verdict::Keep, 7, 7)
    );
    assert!(close(p.cluster.instances, 10.0));
}

#[test]
fn the_verdict_is_grow_when_tiers_1_and_2_exceed_the_cluster_and_shrink_below_the_floor() {
    // Per leaf, tiers 1 and 2 are allocated 4 + 3 = 7 instances, as if their peaks coincided.
    // Added up hour by hour, resources first (tier1 2/4/10 instances of cpu with 8 GiB; tier2 3
    // instances of cpu, then 1 of memory): 5 for 10 h, 2 for 40 h, 2 for 10 h (8 + 64 GiB is 1.1
    // instances of memory), 4 for 35 h, 10 for 5 h. The 85th percentile of that sum is 4, so
    // six instances are plenty though the per-leaf sum says 7.
    let six = cluster(6);
    let p = run(&six, &history_csv(), &PlanSettings::defaults_for(&six), None).unwrap();
    assert_eq!((p.cluster.tier1_tier2_allocated, p.cluster.tier1_2_summed.instances), (7, 4));
    assert_eq!((p.cluster.tier1_2_summed.peak_instances, p.cluster.tier1_summed.instances), (10, 4));
    assert!(close(p.cluster.tier1_2_summed.in_use_hours, 100.0));
    assert_eq!(p.cluster.verdict, Verdict::Keep, "{}", p.cluster.reason);
    let small = cluster(3);
    let p = run(&small, &history_csv(), &PlanSettings::defaults_for(&small), None).unwrap();
    assert_eq!(p.cluster.verdict, Verdict::Grow);
    assert!(
        p.cluster.reason.contains(
            "the tier-1 leaves' usage added up needs 4 instances at the 95th percentile, more than the cluster's 3"
        ),
        "{}",
        p.cluster.reason
    );

    let cfg = cluster(10);
    let mut s = PlanSettings::defaults_for(&cfg);
    s.shrink_floor = 0.5;
    let p = run(&cfg, &history_csv(), &s, None).unwrap();
    assert_eq!(p.cluster.verdict, Verdict::Shrink);
    assert!(
        p.cluster.reason.contains("0.390, below the shrink floor 0.5 (3.9 of 10 instances"),
        "{}",
        p.cluster.reason
    );
}

#[test]
fn the_window_keeps_only_the_most_recent_span() {
    let cfg = cluster(10);
    let mut s = PlanSettings::defaults_for(&cfg);
    s.window = Duration(50 * H);
    let p = run(&cfg, &history_csv(), &s, None).unwrap();
    assert_eq!((p.window.start_ms, p.window.end_ms), (50 * H, 100 * H));
    // 10 h at 2, 35 h at 4, 5 h at 10: 95% of 50 h = 47.5 h needs 10.
    assert_eq!(p.queue("root.ads.tier1").unwrap().instances, 10);
    // tier2 is in use 50 h at 1 instance in this window.
    assert_eq!(p.queue("root.ads.tier2").unwrap().instances, 1);
}

#[test]
fn overlapping_rows_of_one_queue_are_rejected_with_both_lines() {
    let cfg = cluster(10);
    let csv = format!(
        "0,{},root.ads.tier1,1000,0,1\n0,{},root.ads.tier2,1000,0,1\n{},{},ads.tier1,1000,0,1\n",
        10 * H,
        10 * H,
        5 * H,
        20 * H
    );
    let err = run(&cfg, &csv, &PlanSettings::defaults_for(&cfg), None).unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "usage.csv: queue root.ads.tier1: the interval 0..{} ms (line 1) overlaps {}..{} ms (line 3); \
             give one row per period of constant usage",
            10 * H,
            5 * H,
            20 * H
        )
    );
    // Touching intervals and zero-length rows are fine.
    let ok = "0,10,root.ads.tier1,1000,0,1\n10,20,root.ads.tier1,1000,0,1\n15,15,root.ads.tier1,1,0,1\n";
    assert!(run(&cfg, ok, &PlanSettings::defaults_for(&cfg), None).is_ok());
    let empty =
        run(&cfg, "start,end,queue,cpu,memory,running_apps\n", &PlanSettings::defaults_for(&cfg), None);
    assert!(matches!(empty, Err(PlanError::EmptyHistory { .. })));
}

fn slo_workflow(queue: &str, slo_hours: u64, tasks: u32, task_secs: u64) -> Workflow {
    Workflow {
        name: format!("daily-{queue}"),
        queue: QueuePath::parse(queue).unwrap(),
        tier: 2,
        slo: Some(Duration(slo_hours * H)),
        priority: None,
        user: "etl".into(),
        arrival: Arrival::Every { start: Time::ZERO, every: Duration(24 * H) },
        jobs: vec![JobTemplate {
            name: "load".into(),
            after: vec![],
            stages: vec![Stage {
                name: "map".into(),
                after: vec![],
                tasks,
                resources: Resources::new(4000, 8192, 0),
                duration: Distribution::Fixed(Duration::from_secs(task_secs)),
                failure_probability: 0.0,
                gang: false,
                walltime: None,
                placement: Default::default(),
                recorded_failure: false,
            }],
            gang: false,
        }],
    }
}

#[test]
fn an_slo_floor_raises_the_allocation_and_shows_in_the_plan() {
    let cfg = cluster(10);
    // 40 tasks × 1 h × a quarter instance (4 of 16 cores) = 10 instance-hours; SLO 2 h → 5.
    let w = Workload {
        workflows: vec![slo_workflow("root.ads.tier2", 2, 40, 3600), slo_workflow("root.idle", 1, 4, 3600)],
    };
    let p = run(&cfg, &history_csv(), &PlanSettings::defaults_for(&cfg), Some(&w)).unwrap();
    let t2 = p.queue("root.ads.tier2").unwrap();
    assert_eq!((t2.percentile_instances, t2.instances, t2.weight), (3, 5, 5.0));
    assert!(close(t2.slo_floor.unwrap(), 5.0));
    // A floor below the percentile changes nothing; a leaf without history keeps its share.
    let w = Workload { workflows: vec![slo_workflow("root.ads.tier1", 10, 4, 3600)] };
    let p = run(&cfg, &history_csv(), &PlanSettings::defaults_for(&cfg), Some(&w)).unwrap();
    assert_eq!(p.queue("root.ads.tier1").unwrap().instances, 4);
    let idle = p.queue("root.idle").unwrap();
    assert!((idle.share - idle.previous_share).abs() < 1e-3, "{idle:?}");
}

#[test]
fn the_plan_does_not_depend_on_row_order_or_threads() {
    let cfg = cluster(10);
    let s = PlanSettings::defaults_for(&cfg);
    let csv = history_csv();
    let mut lines: Vec<&str> = csv.lines().skip(1).collect();
    lines.reverse();
    let reversed = lines.join("\n");
    let a = run(&cfg, &csv, &s, None).unwrap();
    let b = run(&cfg, &reversed, &s, None).unwrap();
    let history = UsageHistory::read_csv(csv.as_bytes(), "usage.csv", NameKey::default()).unwrap();
    let c = plan(&PlanInput {
        cluster: &cfg,
        history: &history,
        history_name: "usage.csv",
        settings: &s,
        workload: None,
        threads: 3,
    })
    .unwrap();
    let json = |p: &Plan| serde_json::to_string(p).unwrap();
    assert_eq!(json(&a), json(&b));
    assert_eq!(json(&a), json(&c));
}

#[test]
fn histories_that_mean_nothing_are_refused_or_get_no_verdict() {
    let cfg = cluster(10);
    let s = PlanSettings::defaults_for(&cfg);
    // No queue of the history is a leaf of this cluster.
    let err = run(&cfg, "0,3600000,root.other.q,1000,0,1\n0,3600000,x.y,1000,0,1\n", &s, None)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("usage.csv: none of its 2 queues is a leaf of the cluster (root.other.q, x.y)"),
        "{err}"
    );
    // Leaves that never used anything.
    let err = run(&cfg, &format!("0,{},root.ads.tier1,0,0,0\n", 48 * H), &s, None).unwrap_err().to_string();
    assert!(err.contains("show no usage in the 48.0 h window"), "{err}");
    // One second of history: a plan, but no verdict.
    let p = run(&cfg, "0,1000,root.ads.tier1,16000,0,1\n", &s, None).unwrap();
    assert_eq!(p.cluster.verdict, Verdict::None);
    assert!(p.cluster.reason.contains("less than the 1d a verdict needs"), "{}", p.cluster.reason);
    assert!(p.warnings.iter().any(|w| w.contains("less than the 30d window")), "{:?}", p.warnings);
    // A row using 38 million times the cluster: named, and no verdict.
    let huge = 38_000_000u64 * 160_000;
    let csv =
        format!("0,{},root.ads.tier1,16000,0,1\n{},{},root.ads.tier1,{huge},0,1\n", 47 * H, 47 * H, 48 * H);
    let p = run(&cfg, &csv, &s, None).unwrap();
    assert_eq!(p.cluster.verdict, Verdict::None);
    let w = p.warnings.join("\n");
    assert!(w.contains("1 row of usage.csv use more than the whole cluster, up to 38000000 times it (root.ads.tier1 line 2)"), "{w}");
}

#[test]
fn the_readme_example_keeps_the_share_of_every_leaf_without_history() {
    let text =
        |p: &str| std::fs::read_to_string(format!("{}/../../{p}", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let cfg = ClusterConfig::from_yaml("examples/cluster.yaml", &text("examples/cluster.yaml")).unwrap();
    let p = run(&cfg, &text("examples/usage.csv"), &PlanSettings::defaults_for(&cfg), None).unwrap();
    let kept: Vec<_> = p.queues.iter().filter(|q| q.status == QueueStatus::NoHistory).collect();
    assert_eq!(kept.len(), 24);
    for q in kept {
        // min and max clamps move a share a little; nothing moves by more than a point.
        assert!(
            (q.share - q.previous_share).abs() < 0.01,
            "{}: {:.4} → {:.4}",
            q.queue,
            q.previous_share,
            q.share
        );
    }
    // root.ml.eval has no history: its share stays, it does not double.
    let eval = p.queue("root.ml.eval").unwrap();
    assert!(eval.share < eval.previous_share * 1.1, "{eval:?}");
    // The summed tier-1 percentile is reported beside the per-leaf sum.
    assert!(p.cluster.tier1_summed.instances <= p.cluster.tier1_summed.per_leaf_sum);
    assert!(p.cluster.tier1_summed.instances > 0);
}
