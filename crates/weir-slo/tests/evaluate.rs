//! The evaluation end to end on a small cluster where plain fair share cannot meet the
//! deadline: the SLO queue's fair share is 4 of 32 cores beside a saturating batch queue,
//! while the SLO job (40 one-minute tasks, deadline 8 minutes) needs about 8 containers.

use weir_model::{ClusterConfig, Duration, Workload};
use weir_slo::{evaluate, report_html, ControlConfig, EvalConfig, Indicator, Policy, TableConfig};

const CLUSTER: &str = "
version: 1
scheduler:
  preemption: {enabled: true, kill_wait: 5s}
tiers:
  1: {allow_preemption_from: false, min_share_preemption_timeout: 10s}
  3: {allow_preemption_from: true}
nodes:
  - {count: 4, resources: {cpu: 8000, memory: 32g}}
queues:
  - {name: deadlines, tier: 1, weight: 1, min: {cpu: 20000, memory: 80g}}
  - {name: batch, tier: 3, weight: 7}
";

const WORKLOAD: &str = "
version: 1
workflows:
  - name: nightly
    queue: root.deadlines
    tier: 1
    slo: 8m
    every: 30m
    start: 5m
    jobs:
      - name: nightly
        stages:
          - {name: work, tasks: 40, resources: {cpu: 1000, memory: 2g}, duration: {fixed: 60s}}
  - name: backlog
    queue: root.batch
    tier: 3
    every: 2m
    start: 0s
    jobs:
      - name: backlog
        stages:
          - {name: work, tasks: 32, resources: {cpu: 1000, memory: 2g}, duration: {fixed: 5m}}
  # An SLO workflow of two jobs: not one the controller guards (it says so); its first run
  # would come after the window.
  - name: pipeline
    queue: root.deadlines
    tier: 1
    slo: 1h
    every: 24h
    start: 20h
    jobs:
      - name: extract
        stages:
          - {name: work, tasks: 2, resources: {cpu: 1000, memory: 2g}, duration: {fixed: 60s}}
      - name: load
        stages:
          - {name: work, tasks: 2, resources: {cpu: 1000, memory: 2g}, duration: {fixed: 60s}}
";

#[test]
fn the_controller_meets_deadlines_fair_share_misses_with_fewer_containers_than_maximal() {
    let cluster = ClusterConfig::from_yaml("c.yaml", CLUSTER).unwrap_or_else(|e| panic!("{e}"));
    let workload = Workload::from_yaml("w.yaml", WORKLOAD, &cluster).unwrap_or_else(|e| panic!("{e}"));
    let config = EvalConfig {
        until: Duration::from_secs(3 * 3600),
        table: TableConfig { max_allocation: 40, runs: 3, buckets: 10, indicator: Indicator::Work, seed: 1 },
        control: ControlConfig {
            quantile: 0.99,
            slack_start: 1.5,
            slack_end: 1.2,
            ..ControlConfig::default()
        },
        slow_share: 0.0,
        extra_failure: 0.0,
        ..EvalConfig::default()
    };
    let report = evaluate(&cluster, &workload, &config).unwrap_or_else(|e| panic!("{e}"));
    let of = |p: Policy| report.policies.iter().find(|f| f.policy == p).expect("every policy ran");
    let (jockey, max, fair, fixed) =
        (of(Policy::Jockey), of(Policy::Max), of(Policy::Fair), of(Policy::Static));
    // Runs at 5m, 35m, … 2h35m: six in three hours.
    assert_eq!(jockey.slo_runs, 6);
    assert_eq!(
        jockey.met,
        6,
        "{:#?}",
        report.jobs.iter().filter(|j| j.policy == Policy::Jockey).collect::<Vec<_>>()
    );
    assert_eq!(max.met, 6);
    // Every run maximal allocation met, the controller met too; fair share none of them.
    assert_eq!((jockey.met_where_max_met, fair.met_where_max_met), (Some(6), Some(0)));
    // Four cores of fair share: ten one-minute waves, past eight minutes.
    assert_eq!(fair.met, 0, "{fair:?}");
    assert!(fixed.met >= jockey.met - 1);
    // The controller holds far less than the job's full parallelism (40) for its life.
    assert!(
        jockey.allocated_hours < 0.6 * max.allocated_hours,
        "{} vs {}",
        jockey.allocated_hours,
        max.allocated_hours
    );
    // The work itself is the same: 40 task-minutes per run.
    assert!((jockey.used_hours - 6.0 * 40.0 / 60.0).abs() < 1e-9, "{}", jockey.used_hours);
    // With room for all 40 tasks at once, a run takes its one-minute wave (and the moment its
    // master and tasks are placed): every deadline can be met, and fair share's runs, in four
    // containers, take longer than that.
    for j in &report.jobs {
        let alone = j.alone_ms.expect("finished");
        assert!((60_000..65_000).contains(&alone), "{j:?}");
        assert!(j.completion_ms.expect("finished") >= alone || j.policy != Policy::Fair, "{j:?}");
    }
    for f in &report.policies {
        assert_eq!((f.feasible_runs, f.met_where_feasible), (6, f.met), "{f:?}");
    }
    // The deadline against the controller's plan at maximal allocation: 31 containers (the
    // cluster's 32 less the master), two waves, times the starting slack: admitted.
    let nightly = &report.slo_jobs[0];
    assert_eq!(
        (nightly.workflow.as_str(), nightly.deadline_ms, nightly.max_allocation),
        ("nightly", 480_000, 31)
    );
    assert!(nightly.predicted_p99_ms >= 120_000, "{nightly:?}");
    assert!(nightly.controller_ms >= nightly.predicted_p99_ms * 14 / 10, "{nightly:?}");
    assert!(nightly.controller_ms <= nightly.deadline_ms, "{nightly:?}");
    assert_eq!(report.slo_jobs.len(), 1);
    assert_eq!(report.unguarded, ["pipeline: 2 jobs; the controller guards workflows of one job"]);
    // The controller decided for every run (at least its first allocation).
    let decided = report.jobs.iter().filter(|j| j.policy == Policy::Jockey).all(|j| !j.decisions.is_empty());
    assert!(decided);
    // The page: the policies' table, a bar per run and policy, and allocation-over-time charts.
    let html = report_html(&report);
    assert!(html.contains("<td>fair</td>") || html.contains(">fair<"), "the fair row");
    assert!(html.contains("nightly #5"), "the last run's bars");
    assert!(html.contains("Allocation over time against progress"));
    // Each chart names itself twice: its aria-label and its heading.
    assert_eq!(
        html.matches(": deadline 8 min, finished at").count(),
        2 * 6,
        "one chart per run, at most six"
    );
}

#[test]
fn an_evaluation_is_the_same_for_the_same_seeds_and_differs_for_others() {
    let cluster = ClusterConfig::from_yaml("c.yaml", CLUSTER).unwrap_or_else(|e| panic!("{e}"));
    let workload = Workload::from_yaml("w.yaml", WORKLOAD, &cluster).unwrap_or_else(|e| panic!("{e}"));
    let config = EvalConfig {
        until: Duration::from_secs(3600),
        table: TableConfig { max_allocation: 40, runs: 2, buckets: 10, indicator: Indicator::Work, seed: 1 },
        // Perturbed: which runs are slowed and which attempts fail are drawn from the seed.
        slow_share: 0.5,
        extra_failure: 0.1,
        policies: vec![Policy::Jockey],
        ..EvalConfig::default()
    };
    let a = evaluate(&cluster, &workload, &config).unwrap_or_else(|e| panic!("{e}"));
    let b = evaluate(&cluster, &workload, &config).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(a, b);
    let c =
        evaluate(&cluster, &workload, &EvalConfig { seed: 99, ..config }).unwrap_or_else(|e| panic!("{e}"));
    assert_ne!(a.jobs, c.jobs, "another seed perturbs and replays differently");
}
