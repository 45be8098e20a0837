//! The workload file: what valid files resolve to (placement, tiers, arrivals, distributions,
//! DAG order), every rule with the exact path and message of its problem, and the example
//! workload against the example cluster.

use weir_model::{
    parse_yaml, Arrival, ClusterConfig, Distribution, Duration, ModelError, QueuePath, Resources, Time,
    Workflow, Workload, WorkloadFile,
};

/// Small nodes of 8 cores / 32 GiB, two large ones with GPUs; requests round up to half a core
/// and 512 MiB. `ads.ranking` has three tier leaves, `ml` an untiered leaf and a tier-2 one.
const CLUSTER: &str = "version: 1
scheduler: {increment: {cpu: 500, memory: 512}}
nodes:
  - {count: 4, resources: {cpu: 8000, memory: 32g}}
  - {count: 2, resources: {cpu: 16000, memory: 128g, gpu: 2}}
queues:
  - name: ads
    children:
      - name: ranking
        children: [{name: tier1, tier: 1}, {name: tier2, tier: 2}, {name: tier3, tier: 3}]
  - name: ml
    children: [{name: shared}, {name: gpu, tier: 2}]
  - {name: default, tier: 3}
placement:
  - {project: ml, queue: root.ml.shared}
  - {project: reports, queue: root.default}
  - {project: ads.ranking, tier: 1, queue: root.ads.ranking.tier1}
";

const EXAMPLE_CLUSTER: &str = include_str!("../../../examples/cluster.yaml");
const EXAMPLE_WORKLOAD: &str = include_str!("../../../examples/workload.yaml");

fn cluster() -> ClusterConfig {
    ClusterConfig::from_yaml("cluster.yaml", CLUSTER).unwrap_or_else(|e| panic!("{e}"))
}

/// One stage `s` of one task with these fields added.
const TASK: &str = "tasks: 1, resources: {cpu: 1000, memory: 1g}, duration: {fixed: 1m}";

/// A workload of one workflow `w` with these flow-map fields; a job `j` with one stage `s` is
/// added unless the fields give `jobs`.
fn wf(fields: &str) -> String {
    let jobs = if fields.contains("jobs:") {
        String::new()
    } else {
        format!(", jobs: [{{name: j, stages: [{{name: s, {TASK}}}]}}]")
    };
    format!("version: 1\nworkflows:\n  - {{name: w, {fields}{jobs}}}\n")
}

/// Workflow `w` in `root.ads.ranking.tier1` with one job `j` holding these stages.
fn stages(stages: &str) -> String {
    wf(&format!("queue: root.ads.ranking.tier1, jobs: [{{name: j, stages: [{stages}]}}]"))
}

/// Workflow `w` in `root.ads.ranking.tier1` with one stage `s` of these fields.
fn stage(fields: &str) -> String {
    stages(&format!("{{name: s, {fields}}}"))
}

fn parse(yaml: &str) -> Workload {
    Workload::from_yaml("w.yaml", yaml, &cluster()).unwrap_or_else(|e| panic!("{e}\nin:\n{yaml}"))
}

fn only(yaml: &str) -> Workflow {
    let mut w = parse(yaml);
    assert_eq!(w.workflows.len(), 1);
    w.workflows.remove(0)
}

/// `yaml` fails validation with exactly these problems (path, message), in this order.
#[track_caller]
fn check(yaml: &str, expected: &[(&str, &str)]) {
    match Workload::from_yaml("w.yaml", yaml, &cluster()) {
        Ok(_) => panic!("expected problems, but this validated:\n{yaml}"),
        Err(ModelError::Syntax { path, message, .. }) => {
            panic!("expected validation problems, got a syntax error at {path}: {message}\nin:\n{yaml}")
        }
        Err(e) => {
            let found: Vec<(String, String)> =
                e.problems().into_iter().map(|p| (p.path, p.message)).collect();
            let expected: Vec<(String, String)> =
                expected.iter().map(|(p, m)| (p.to_string(), m.to_string())).collect();
            assert_eq!(found, expected, "in:\n{yaml}");
        }
    }
}

/// `yaml` does not parse; the error is at `path` with exactly `message`.
#[track_caller]
fn check_syntax(yaml: &str, path: &str, message: &str) {
    match Workload::from_yaml("w.yaml", yaml, &cluster()) {
        Err(ModelError::Syntax { path: p, message: m, .. }) => {
            assert_eq!((p.as_str(), m.as_str()), (path, message), "in:\n{yaml}")
        }
        other => panic!("expected a syntax error, got {other:?}\nin:\n{yaml}"),
    }
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn at(s: u64) -> Time {
    Time(s * 1000)
}

// ---- valid files ------------------------------------------------------------------------------

#[test]
fn a_minimal_workflow_gets_its_defaults() {
    let w = only(&wf("queue: root.ads.ranking.tier2"));
    assert_eq!(w.name, "w");
    assert_eq!(w.queue, QueuePath::parse("root.ads.ranking.tier2").unwrap());
    assert_eq!(w.tier, 2, "the tier of the leaf queue");
    assert_eq!(w.user, "w", "the user defaults to the workflow's name");
    assert_eq!(w.slo, None);
    assert_eq!(w.priority, None);
    assert_eq!(w.arrival, Arrival::At(vec![Time::ZERO]), "one run at time 0");
    assert_eq!(w.jobs.len(), 1);
    let s = &w.jobs[0].stages[0];
    assert_eq!((s.name.as_str(), s.tasks, s.resources), ("s", 1, Resources::new(1000, 1024, 0)));
    assert_eq!(s.duration, Distribution::Fixed(secs(60)));
    assert_eq!(s.failure_probability, 0.0);
}

#[test]
fn the_fields_of_a_workflow_carry_over() {
    let w = only(&wf(
        "queue: 'ads.ranking.tier1', tier: 1, slo: 2h, priority: 500, user: etl, every: 24h, start: 1h",
    ));
    assert_eq!(w.queue.as_str(), "root.ads.ranking.tier1", "`root.` may be left out of a queue");
    assert_eq!((w.tier, w.slo, w.priority, w.user.as_str()), (1, Some(secs(7200)), Some(500), "etl"));
    assert_eq!(w.arrival, Arrival::Every { start: at(3600), every: secs(86_400) });
}

#[test]
fn placement_and_tiers() {
    // (fields, queue, tier)
    let cases: &[(&str, &str, u8)] = &[
        // A leaf without a tier, and no tier given: 3.
        ("queue: root.ml.shared", "root.ml.shared", 3),
        ("queue: root.ml.shared, tier: 1", "root.ml.shared", 1),
        ("queue: root.default", "root.default", 3),
        // The default rule root.<project>.tier<N>.
        ("project: ads.ranking, tier: 2", "root.ads.ranking.tier2", 2),
        ("project: root.ads.ranking, tier: 3", "root.ads.ranking.tier3", 3),
        // Without a tier a project is placed as tier 3, never into a critical queue by accident.
        ("project: ads.ranking", "root.ads.ranking.tier3", 3),
        // A tiered rule; a rule for every tier, whose leaf has no tier (so the tier stays).
        ("project: ads.ranking, tier: 1", "root.ads.ranking.tier1", 1),
        ("project: ml, tier: 1", "root.ml.shared", 1),
        ("project: ml", "root.ml.shared", 3),
        // A rule for every tier whose leaf has a tier: the workflow takes the leaf's tier.
        ("project: reports", "root.default", 3),
    ];
    for (fields, queue, tier) in cases {
        let w = only(&wf(fields));
        assert_eq!((w.queue.as_str(), w.tier), (*queue, *tier), "{fields}");
    }
}

#[test]
fn arrivals() {
    let cases: &[(&str, Arrival)] = &[
        ("", Arrival::At(vec![Time::ZERO])),
        ("start: 90m", Arrival::At(vec![at(5400)])),
        ("every: 1h", Arrival::Every { start: Time::ZERO, every: secs(3600) }),
        ("every: 15m, start: 5m", Arrival::Every { start: at(300), every: secs(900) }),
        (
            "arrivals: {poisson: {mean_interval: 10m}}",
            Arrival::Poisson { start: Time::ZERO, mean_interval: secs(600) },
        ),
        (
            "arrivals: {poisson: {mean_interval: 10m}}, start: 1d",
            Arrival::Poisson { start: at(86_400), mean_interval: secs(600) },
        ),
        // `at` is sorted; two runs at one time stay two runs.
        ("at: [5h, 1h, 5h, 0s]", Arrival::At(vec![at(0), at(3600), at(18_000), at(18_000)])),
    ];
    for (fields, arrival) in cases {
        let sep = if fields.is_empty() { "" } else { ", " };
        let w = only(&wf(&format!("queue: root.default{sep}{fields}")));
        assert_eq!(&w.arrival, arrival, "{fields}");
    }
}

#[test]
fn distributions() {
    let cases: &[(&str, Distribution)] = &[
        ("{fixed: 300s}", Distribution::Fixed(secs(300))),
        ("{fixed: 250ms}", Distribution::Fixed(Duration::from_millis(250))),
        ("{uniform: {min: 30s, max: 90s}}", Distribution::Uniform { min: secs(30), max: secs(90) }),
        ("{uniform: {min: 1m, max: 1m}}", Distribution::Uniform { min: secs(60), max: secs(60) }),
        ("{exponential: {mean: 5m}}", Distribution::Exponential { mean: secs(300) }),
        ("{lognormal: {mu: 4.5, sigma: 0.5}}", Distribution::LogNormal { mu: 4.5, sigma: 0.5 }),
        ("{lognormal: {mu: -1, sigma: 0}}", Distribution::LogNormal { mu: -1.0, sigma: 0.0 }),
        ("{lognormal: {median: 2m, p99: 2m}}", Distribution::LogNormal { mu: 120f64.ln(), sigma: 0.0 }),
        ("{empirical: [1s, 3m, 2s]}", Distribution::Empirical(vec![secs(1), secs(180), secs(2)].into())),
    ];
    for (d, expected) in cases {
        let w = only(&stage(&format!("tasks: 1, resources: {{cpu: 1000}}, duration: {d}")));
        assert_eq!(&w.jobs[0].stages[0].duration, expected, "{d}");
    }
}

#[test]
fn a_lognormal_by_median_and_p99_has_that_median_and_p99() {
    let w =
        only(&stage("tasks: 1, resources: {cpu: 1000}, duration: {lognormal: {median: 120s, p99: 600s}}"));
    let Distribution::LogNormal { mu, sigma } = w.jobs[0].stages[0].duration else {
        panic!("not a lognormal: {:?}", w.jobs[0].stages[0].duration)
    };
    assert!((mu.exp() - 120.0).abs() < 1e-9, "median {}", mu.exp());
    assert!(((mu + 2.326348 * sigma).exp() - 600.0).abs() < 1e-6, "p99 {}", (mu + 2.326348 * sigma).exp());
}

#[test]
fn stage_fields() {
    let w = only(&stages(&format!(
        "{{name: a, tasks: 200, resources: {{cpu: 2000, memory: 8g}}, duration: {{fixed: 1m}}, failure_probability: 0.01}}, {{name: b, tasks: 3, resources: {{gpu: 2}}, duration: {{fixed: 1m}}}}, {{name: c, {TASK}, failure_probability: 0}}"
    )));
    let s = &w.jobs[0].stages;
    assert_eq!(
        (s[0].tasks, s[0].resources, s[0].failure_probability),
        (200, Resources::new(2000, 8192, 0), 0.01)
    );
    assert_eq!(s[1].resources, Resources::new(0, 0, 2), "a gpu-only task fits the gpu nodes");
    assert_eq!(s[2].failure_probability, 0.0);
}

#[test]
fn a_task_may_fill_a_node_exactly_or_after_rounding() {
    for r in
        ["{cpu: 16000, memory: 128g, gpu: 2}", "{cpu: 8000, memory: 32g}", "{cpu: 15600, memory: 131000}"]
    {
        let w = only(&stage(&format!("tasks: 1, resources: {r}, duration: {{fixed: 1m}}")));
        assert!(!w.jobs[0].stages[0].resources.is_zero(), "{r}");
    }
}

/// Names with their `after` indices, in the validated order.
type Deps<'a> = Vec<(&'a str, Vec<usize>)>;

/// The jobs' dependencies, and each job's stages' dependencies.
fn after(w: &Workflow) -> (Deps<'_>, Vec<Deps<'_>>) {
    let jobs = w.jobs.iter().map(|j| (j.name.as_str(), j.after.clone())).collect();
    let stages = w
        .jobs
        .iter()
        .map(|j| j.stages.iter().map(|s| (s.name.as_str(), s.after.clone())).collect())
        .collect();
    (jobs, stages)
}

#[test]
fn an_order_that_is_already_topological_is_kept() {
    let w = only(&stages(&format!(
        "{{name: z, {TASK}}}, {{name: y, {TASK}}}, {{name: x, after: [y, z], {TASK}}}, {{name: w, after: [x, x], {TASK}}}"
    )));
    assert_eq!(after(&w).1[0], [("z", vec![]), ("y", vec![]), ("x", vec![0, 1]), ("w", vec![2])]);
}

#[test]
fn stages_and_jobs_are_put_in_a_topological_order() {
    let stage = |name: &str, after: &str| format!("{{name: {name}, after: [{after}], {TASK}}}");
    let job = |name: &str, after: &str, stages: &[String]| {
        format!("{{name: {name}, after: [{after}], stages: [{}]}}", stages.join(", "))
    };
    let jobs = [
        job("publish", "report, extract", &[stage("write", "")]),
        job("extract", "", &[stage("reduce", "map"), stage("map", ""), stage("audit", "")]),
        job("report", "extract", &[stage("render", "query"), stage("query", "")]),
    ];
    let w = only(&wf(&format!("queue: root.default, jobs: [{}]", jobs.join(", "))));
    let (jobs, stages) = after(&w);
    // Earliest ready first: extract, then report, then publish.
    assert_eq!(jobs, [("extract", vec![]), ("report", vec![0]), ("publish", vec![0, 1])]);
    assert_eq!(stages[0], [("map", vec![]), ("reduce", vec![0]), ("audit", vec![])]);
    assert_eq!(stages[1], [("query", vec![]), ("render", vec![0])]);
    for j in &w.jobs {
        for (i, s) in j.stages.iter().enumerate() {
            assert!(s.after.iter().all(|&a| a < i), "{}: {:?}", s.name, s.after);
        }
    }
}

#[test]
fn several_workflows_keep_their_order() {
    let yaml = format!(
        "version: 1\nworkflows:\n  - {{name: b, queue: root.default, jobs: [{{name: j, stages: [{{name: s, {TASK}}}]}}]}}\n  - {{name: a, project: ml, jobs: [{{name: j, stages: [{{name: s, {TASK}}}]}}]}}\n"
    );
    let names: Vec<String> = parse(&yaml).workflows.into_iter().map(|w| w.name).collect();
    assert_eq!(names, ["b", "a"]);
}

// ---- workflow-level rules ---------------------------------------------------------------------

#[test]
fn file_level_rules() {
    check(
        &wf("queue: root.default").replace("version: 1", "version: 2"),
        &[("version", "unsupported version 2; this weir reads version 1")],
    );
    check("version: 1\nworkflows: []\n", &[("workflows", "the workload has no workflows; add at least one")]);
    check("version: 1\n", &[("workflows", "the workload has no workflows; add at least one")]);
}

#[test]
fn placement_rules() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "tier: 1",
            "workflows.w",
            "the workflow has no `queue` (a leaf such as root.ads.ranking.tier1) or `project` (such as ads.ranking, placed by the cluster's rules)",
        ),
        ("queue: root.default, project: ml", "workflows.w.project", "give either `queue` or `project`, not both"),
        (
            "queue: root.ads.ranking.tier4",
            "workflows.w.queue",
            "no queue root.ads.ranking.tier4 in the cluster; the leaves under root.ads.ranking are root.ads.ranking.tier1, root.ads.ranking.tier2, root.ads.ranking.tier3",
        ),
        ("queue: root.search.tier1", "workflows.w.queue", "no queue root.search.tier1 in the cluster"),
        (
            "queue: root.ads.ranking",
            "workflows.w.queue",
            "root.ads.ranking is not a leaf queue; work goes to leaves: root.ads.ranking.tier1, root.ads.ranking.tier2, root.ads.ranking.tier3",
        ),
        ("queue: 'root..ads'", "workflows.w.queue", "`root..ads` is not a queue path: write it like root.ads.ranking.tier1"),
        ("project: 'ads..ranking'", "workflows.w.project", "`ads..ranking` is not a project: write its queue path without `root`, e.g. ads.ranking"),
        (
            "project: search, tier: 2",
            "workflows.w.project",
            "no placement rule of the cluster matches project `search` at tier 2, and the default rule root.<project>.tier<N> gives root.search.tier2, but no queue root.search.tier2 in the cluster",
        ),
        (
            "project: ads, tier: 1",
            "workflows.w.project",
            "no placement rule of the cluster matches project `ads` at tier 1, and the default rule root.<project>.tier<N> gives root.ads.tier1, but no queue root.ads.tier1 in the cluster; the leaves under root.ads are root.ads.ranking.tier1, root.ads.ranking.tier2, root.ads.ranking.tier3",
        ),
        ("queue: root.default, tier: 0", "workflows.w.tier", "0 is not a tier: tiers are numbered 1 (most critical) to 3"),
        ("queue: root.ml.shared, tier: 4", "workflows.w.tier", "4 is not a tier: tiers are numbered 1 (most critical) to 3"),
        (
            "queue: root.ads.ranking.tier1, tier: 3",
            "workflows.w.tier",
            "tier 3 does not match the workflow's queue root.ads.ranking.tier1, a tier-1 queue",
        ),
        (
            "project: reports, tier: 1",
            "workflows.w.tier",
            "tier 1 does not match the workflow's queue root.default, a tier-3 queue (placed there by the cluster's placement[1])",
        ),
    ];
    for (fields, path, message) in cases {
        check(&wf(fields), &[(path, message)]);
    }
}

#[test]
fn the_default_rule_reaching_a_parent_queue_is_an_error() {
    let cluster = ClusterConfig::from_yaml(
        "c.yaml",
        "version: 1\nnodes: [{resources: {cpu: 8000, memory: 32g}}]\nqueues:\n  - {name: web, children: [{name: tier2, children: [{name: batch}]}]}\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let err = Workload::from_yaml("w.yaml", &wf("project: web, tier: 2"), &cluster).unwrap_err();
    let problems: Vec<(String, String)> = err.problems().into_iter().map(|p| (p.path, p.message)).collect();
    assert_eq!(
        problems,
        [(
            "workflows.w.project".to_string(),
            "no placement rule of the cluster matches project `web` at tier 2, and the default rule root.<project>.tier<N> gives root.web.tier2, but root.web.tier2 is not a leaf queue".to_string()
        )]
    );
}

#[test]
fn a_default_rule_leaf_of_another_tier_is_a_mismatch() {
    let cluster = ClusterConfig::from_yaml(
        "c.yaml",
        "version: 1\nnodes: [{resources: {cpu: 8000, memory: 32g}}]\nqueues:\n  - {name: web, children: [{name: tier2, tier: 3}]}\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let err = Workload::from_yaml("w.yaml", &wf("project: web, tier: 2"), &cluster).unwrap_err();
    let problems: Vec<(String, String)> = err.problems().into_iter().map(|p| (p.path, p.message)).collect();
    assert_eq!(
        problems,
        [(
            "workflows.w.tier".to_string(),
            "tier 2 does not match the workflow's queue root.web.tier2, a tier-3 queue (placed there by the default rule root.<project>.tier<N>)".to_string()
        )]
    );
}

#[test]
fn a_hand_built_rule_to_a_missing_queue_is_reported_not_followed() {
    let mut cluster = cluster();
    cluster.placement[0].queue = QueuePath::parse("root.ml.gone").unwrap();
    let err = Workload::from_yaml("w.yaml", &wf("project: ml"), &cluster).unwrap_err();
    let problems: Vec<(String, String)> = err.problems().into_iter().map(|p| (p.path, p.message)).collect();
    assert_eq!(
        problems,
        [(
            "workflows.w.project".to_string(),
            "the cluster's placement[0] matches, but no queue root.ml.gone in the cluster; the leaves under root.ml are root.ml.shared, root.ml.gpu".to_string()
        )]
    );
}

#[test]
fn workflow_rules() {
    let cases: &[(&str, &str, &str)] = &[
        ("queue: root.default, slo: 0s", "workflows.w.slo", "must be positive (leave it out for no SLO)"),
        (
            "queue: root.default, guarantee: jockey",
            "workflows.w.guarantee",
            "jockey keeps a deadline: give the workflow an `slo` (the deadline of each run)",
        ),
        (
            "queue: root.default, user: ''",
            "workflows.w.user",
            "must not be empty (leave it out to run as the workflow's name)",
        ),
        (
            "queue: root.default, user: '  '",
            "workflows.w.user",
            "must not be empty (leave it out to run as the workflow's name)",
        ),
        ("queue: root.default, every: 0s", "workflows.w.every", "must be positive"),
        // Issue 13: `1ms` for `1m` meant 6×10^8 runs in the default week.
        (
            "queue: root.default, every: 1ms",
            "workflows.w.every",
            "1ms is shorter than the shortest period weir accepts, 1s (`ms` is milliseconds: a minute is `1m`)",
        ),
        (
            "queue: root.default, arrivals: {poisson: {mean_interval: 999ms}}",
            "workflows.w.arrivals.poisson.mean_interval",
            "999ms is shorter than the shortest period weir accepts, 1s (`ms` is milliseconds: a minute is `1m`)",
        ),
        (
            "queue: root.default, arrivals: {poisson: {mean_interval: 0m}}",
            "workflows.w.arrivals.poisson.mean_interval",
            "must be positive",
        ),
        (
            "queue: root.default, at: []",
            "workflows.w.at",
            "needs at least one time (leave `at` out for one run at `start`)",
        ),
        (
            "queue: root.default, at: [1h], start: 1h",
            "workflows.w.start",
            "`at` gives the run times themselves; `start` applies to `every` and `arrivals` only",
        ),
        (
            "queue: root.default, every: 1h, arrivals: {poisson: {mean_interval: 1h}}",
            "workflows.w.arrivals",
            "`every` and `arrivals` both say when runs start; keep one",
        ),
        (
            "queue: root.default, at: [1h], every: 1h",
            "workflows.w.at",
            "`every` and `at` both say when runs start; keep one",
        ),
        ("queue: root.default, jobs: []", "workflows.w.jobs", "a workflow needs at least one job"),
        (
            "queue: root.default, jobs: [{name: j}]",
            "workflows.w.jobs.j.stages",
            "a job needs at least one stage",
        ),
        (
            "queue: root.default, jobs: [{name: j, stages: []}]",
            "workflows.w.jobs.j.stages",
            "a job needs at least one stage",
        ),
    ];
    for (fields, path, message) in cases {
        check(&wf(fields), &[(path, message)]);
    }
}

#[test]
fn names() {
    let s = format!("stages: [{{name: s, {TASK}}}]");
    let one = |name: &str| {
        format!(
            "version: 1\nworkflows:\n  - {{name: {name}, queue: root.default, jobs: [{{name: j, {s}}}]}}\n"
        )
    };
    check(
        &one("''"),
        &[(
            "workflows.<unnamed>.name",
            "`` is not a workflow name: use a non-empty name without dots, brackets, spaces or control characters, not starting with =, +, - or @ (names go into CSV files that spreadsheets open, and into tasks' environment)",
        )],
    );
    check(
        &one("a.b"),
        &[(
            "workflows.a.b.name",
            "`a.b` is not a workflow name: use a non-empty name without dots, brackets, spaces or control characters, not starting with =, +, - or @ (names go into CSV files that spreadsheets open, and into tasks' environment)",
        )],
    );
    check(
        &one("'a b'"),
        &[(
            "workflows.a b.name",
            "`a b` is not a workflow name: use a non-empty name without dots, brackets, spaces or control characters, not starting with =, +, - or @ (names go into CSV files that spreadsheets open, and into tasks' environment)",
        )],
    );
    check(
        &one("'x[1]'"),
        &[(
            "workflows.x[1].name",
            "`x[1]` is not a workflow name: use a non-empty name without dots, brackets, spaces or control characters, not starting with =, +, - or @ (names go into CSV files that spreadsheets open, and into tasks' environment)",
        )],
    );
    check(
        &one("'=HYPERLINK(1)'"),
        &[(
            "workflows.=HYPERLINK(1).name",
            "`=HYPERLINK(1)` is not a workflow name: use a non-empty name without dots, brackets, spaces or control characters, not starting with =, +, - or @ (names go into CSV files that spreadsheets open, and into tasks' environment)",
        )],
    );
    check(
        &format!("{}{}", one("w"), one("w").replace("version: 1\nworkflows:\n", "")),
        &[("workflows.w.name", "another workflow in this list is also named `w`")],
    );
    check(
        &wf(&format!("queue: root.default, jobs: [{{name: j, {s}}}, {{name: j, {s}}}]")),
        &[("workflows.w.jobs.j.name", "another job in this list is also named `j`")],
    );
    check(
        &wf(&format!("queue: root.default, jobs: [{{name: 'x y', {s}}}]")),
        &[(
            "workflows.w.jobs.x y.name",
            "`x y` is not a job name: use a non-empty name without dots, brackets, spaces or control characters, not starting with =, +, - or @ (names go into CSV files that spreadsheets open, and into tasks' environment)",
        )],
    );
    check(
        &stages(&format!("{{name: s, {TASK}}}, {{name: s, {TASK}}}")),
        &[("workflows.w.jobs.j.stages.s.name", "another stage in this list is also named `s`")],
    );
    check(
        &stages(&format!("{{name: '', {TASK}}}")),
        &[(
            "workflows.w.jobs.j.stages.<unnamed>.name",
            "`` is not a stage name: use a non-empty name without dots, brackets, spaces or control characters, not starting with =, +, - or @ (names go into CSV files that spreadsheets open, and into tasks' environment)",
        )],
    );
    // The same name in different lists is fine.
    parse(&wf(&format!("queue: root.default, jobs: [{{name: j, {s}}}, {{name: s, {s}}}]")));
}

// ---- DAG rules --------------------------------------------------------------------------------

#[test]
fn dependency_rules() {
    let st = |name: &str, after: &str| format!("{{name: {name}, after: [{after}], {TASK}}}");
    let jb = |name: &str, after: &str| {
        format!("{{name: {name}, after: [{after}], stages: [{{name: s, {TASK}}}]}}")
    };
    let jobs = |list: &[String]| wf(&format!("queue: root.default, jobs: [{}]", list.join(", ")));
    check(
        &stages(&[st("map", ""), st("reduce", "mapp")].join(", ")),
        &[(
            "workflows.w.jobs.j.stages.reduce.after",
            "no stage named `mapp` in job `j`; its stages are `map`, `reduce`",
        )],
    );
    check(
        &stages(&st("map", "map")),
        &[("workflows.w.jobs.j.stages.map.after", "`map` cannot come after itself")],
    );
    check(
        &jobs(&[jb("extract", ""), jb("publish", "extract, load")]),
        &[(
            "workflows.w.jobs.publish.after",
            "no job named `load` in workflow `w`; its jobs are `extract`, `publish`",
        )],
    );
    check(&jobs(&[jb("a", "a")]), &[("workflows.w.jobs.a.after", "`a` cannot come after itself")]);
    // A cycle is named from its earliest member; a stage that only waits on the cycle is not.
    check(
        &stages(&[st("free", ""), st("waits", "b"), st("a", "c"), st("b", "a"), st("c", "b, free")].join(", ")),
        &[("workflows.w.jobs.j.stages.a.after", "the stages wait for each other in a cycle: `a` waits for `c`, which waits for `b`, which waits for `a`")],
    );
    check(
        &jobs(&[jb("x", "y"), jb("y", "x"), jb("p", "q"), jb("q", "p")]),
        &[
            (
                "workflows.w.jobs.x.after",
                "the jobs wait for each other in a cycle: `x` waits for `y`, which waits for `x`",
            ),
            (
                "workflows.w.jobs.p.after",
                "the jobs wait for each other in a cycle: `p` waits for `q`, which waits for `p`",
            ),
        ],
    );
}

// ---- stage rules ------------------------------------------------------------------------------

#[test]
fn stage_rules() {
    let here = "workflows.w.jobs.j.stages.s";
    let cases: &[(&str, &str, &str)] = &[
        ("tasks: 0, resources: {cpu: 1000}, duration: {fixed: 1m}", "tasks", "must be at least 1"),
        ("tasks: 1, resources: {}, duration: {fixed: 1m}", "resources", "a task needs some cpu, memory or gpu"),
        ("tasks: 1, resources: {cpu: 0, memory: 0}, duration: {fixed: 1m}", "resources", "a task needs some cpu, memory or gpu"),
        (
            "tasks: 1, resources: {cpu: 17000, memory: 4g}, duration: {fixed: 1m}",
            "resources",
            "a task of {cpu: 17000, memory: 4096} fits on no node of the cluster, so it could never run; the nodes are 4 × {cpu: 8000, memory: 32768}, 2 × {cpu: 16000, memory: 131072, gpu: 2}",
        ),
        (
            "tasks: 1, resources: {cpu: 16001}, duration: {fixed: 1m}",
            "resources",
            "a task of {cpu: 16001, memory: 0} (rounded up to {cpu: 16500, memory: 0} by the scheduler's increment) fits on no node of the cluster, so it could never run; the nodes are 4 × {cpu: 8000, memory: 32768}, 2 × {cpu: 16000, memory: 131072, gpu: 2}",
        ),
        (
            "tasks: 1, resources: {cpu: 1000, gpu: 3}, duration: {fixed: 1m}",
            "resources",
            "a task of {cpu: 1000, memory: 0, gpu: 3} fits on no node of the cluster, so it could never run; the nodes are 4 × {cpu: 8000, memory: 32768}, 2 × {cpu: 16000, memory: 131072, gpu: 2}",
        ),
        (
            "tasks: 1, resources: {cpu: 8000, memory: 200g}, duration: {fixed: 1m}",
            "resources",
            "a task of {cpu: 8000, memory: 204800} fits on no node of the cluster, so it could never run; the nodes are 4 × {cpu: 8000, memory: 32768}, 2 × {cpu: 16000, memory: 131072, gpu: 2}",
        ),
        (
            &format!("{TASK}, failure_probability: 1"),
            "failure_probability",
            "1 is not a probability in [0, 1): a task that always fails never finishes",
        ),
        (
            &format!("{TASK}, failure_probability: -0.1"),
            "failure_probability",
            "-0.1 is not a probability in [0, 1): a task that always fails never finishes",
        ),
        (
            &format!("{TASK}, failure_probability: .nan"),
            "failure_probability",
            "NaN is not a probability in [0, 1): a task that always fails never finishes",
        ),
    ];
    for (fields, field, message) in cases {
        check(&stage(fields), &[(&format!("{here}.{field}"), message)]);
    }
}

#[test]
fn duration_rules() {
    let here = "workflows.w.jobs.j.stages.s.duration";
    let cases: &[(&str, &str, &str)] = &[
        ("{fixed: 0s}", "fixed", "must be positive"),
        ("{uniform: {min: 0s, max: 1s}}", "uniform.min", "must be positive"),
        ("{uniform: {min: 2m, max: 90s}}", "uniform.max", "90s is below min 2m"),
        ("{exponential: {mean: 0ms}}", "exponential.mean", "must be positive"),
        ("{lognormal: {median: 0s, p99: 1m}}", "lognormal.median", "must be positive"),
        ("{lognormal: {median: 2m, p99: 1m}}", "lognormal.p99", "1m is below the median 2m"),
        (
            "{lognormal: {median: 2m}}",
            "lognormal",
            "give either `median` and `p99`, or `mu` and `sigma` (of the log of the duration in seconds); got `median`",
        ),
        (
            "{lognormal: {median: 2m, p99: 5m, sigma: 1}}",
            "lognormal",
            "give either `median` and `p99`, or `mu` and `sigma` (of the log of the duration in seconds); got `median`, `p99`, `sigma`",
        ),
        (
            "{lognormal: {}}",
            "lognormal",
            "give either `median` and `p99`, or `mu` and `sigma` (of the log of the duration in seconds); got nothing",
        ),
        ("{lognormal: {mu: .inf, sigma: 1}}", "lognormal.mu", "inf is not a finite number"),
        ("{lognormal: {mu: 1, sigma: -0.5}}", "lognormal.sigma", "-0.5 is not a number ≥ 0"),
        ("{lognormal: {mu: 1, sigma: .nan}}", "lognormal.sigma", "NaN is not a number ≥ 0"),
        ("{empirical: []}", "empirical", "needs at least one sample"),
        ("{empirical: [1s, 0s, 2s]}", "empirical[1]", "must be positive"),
    ];
    for (d, field, message) in cases {
        check(
            &stage(&format!("tasks: 1, resources: {{cpu: 1000}}, duration: {d}")),
            &[(&format!("{here}.{field}"), message)],
        );
    }
}

#[test]
fn every_problem_is_reported_at_once_in_file_order() {
    let yaml = "version: 3
workflows:
  - name: rollup
    queue: root.ads.ranking.tier9
    slo: 0s
    every: 0s
    jobs:
      - name: publish
        after: [extract, nothing]
        stages:
          - {name: write, tasks: 0, resources: {cpu: 1000}, duration: {fixed: 0s}}
      - name: extract
        stages:
          - {name: reduce, after: [map], tasks: 1, resources: {cpu: 99000}, duration: {uniform: {min: 2m, max: 1m}}}
          - {name: map, tasks: 1, resources: {cpu: 1000}, duration: {fixed: 1m}, failure_probability: 2}
  - name: rollup
    project: nowhere
    jobs: []
";
    let found: Vec<String> = match Workload::from_yaml("w.yaml", yaml, &cluster()) {
        Err(e) => e.problems().into_iter().map(|p| p.path).collect(),
        Ok(_) => panic!("validated"),
    };
    assert_eq!(
        found,
        [
            "version",
            "workflows.rollup.queue",
            "workflows.rollup.slo",
            "workflows.rollup.every",
            "workflows.rollup.jobs.publish.after",
            "workflows.rollup.jobs.publish.stages.write.tasks",
            "workflows.rollup.jobs.publish.stages.write.duration.fixed",
            "workflows.rollup.jobs.extract.stages.reduce.resources",
            "workflows.rollup.jobs.extract.stages.reduce.duration.uniform.max",
            "workflows.rollup.jobs.extract.stages.map.failure_probability",
            "workflows.rollup.name",
            "workflows.rollup.project",
            "workflows.rollup.jobs",
        ]
    );
}

#[test]
fn errors_name_the_file_and_the_path() {
    let err = Workload::from_yaml(
        "conf/daily.yaml",
        &stage("tasks: 0, resources: {cpu: 1000}, duration: {fixed: 1m}"),
        &cluster(),
    )
    .unwrap_err();
    assert_eq!(err.file(), "conf/daily.yaml");
    assert_eq!(err.to_string(), "conf/daily.yaml: 1 problem:\n  conf/daily.yaml: workflows.w.jobs.j.stages.s.tasks: must be at least 1");
}

// ---- syntax -----------------------------------------------------------------------------------

#[test]
fn unknown_fields_are_rejected_with_named_paths() {
    check_syntax(
        "version: 1\ncolour: blue\n",
        "colour",
        "unknown field `colour`, expected one of version, workflows at line 2, column 1",
    );
    check_syntax(
        &wf("queue: root.default, colour: red"),
        "workflows.w.colour",
        "unknown field `colour`, expected one of name, queue, project, tier, slo, guarantee, priority, user, start, every, arrivals, at, jobs at line 3, column 36",
    );
    check_syntax(
        &wf("queue: root.default, jobs: [{name: j, stage: []}]"),
        "workflows.w.jobs.j.stage",
        "unknown field `stage`, expected one of name, after, stages, gang at line 3, column 53",
    );
    check_syntax(
        &stage("taks: 1, resources: {cpu: 1000}, duration: {fixed: 1m}"),
        "workflows.w.jobs.j.stages.s.taks",
        "unknown field `taks`, expected one of name, after, tasks, resources, duration, failure_probability, gang, walltime, gpu_milli, gpu_models, node_labels, command, spark, env, max_attempts, outputs, inputs at line 3, column 82",
    );
    check_syntax(
        &stage("tasks: 1, resources: {cpus: 1}, duration: {fixed: 1m}"),
        "workflows.w.jobs.j.stages.s.resources.cpus",
        "unknown field `cpus`, expected one of cpu, memory, gpu at line 3, column 104",
    );
    check_syntax(
        &stage("tasks: 1, resources: {cpu: 1}, duration: {lognormal: {median: 1m, p90: 2m}}"),
        "workflows.w.jobs.j.stages.s.duration.lognormal.p90",
        "unknown field `p90`, expected one of median, p99, mu, sigma at line 3, column 148",
    );
    check_syntax(
        &wf("queue: root.default, arrivals: {poisson: {mean: 1h}}"),
        "workflows.w.arrivals.poisson.mean",
        "unknown field `mean`, expected one of mean_interval at line 3, column 57",
    );
}

#[test]
fn wrong_shapes_say_what_was_expected() {
    check_syntax(
        &stage("tasks: 1, resources: {cpu: 1}, duration: {normal: {mean: 1m}}"),
        "workflows.w.jobs.j.stages.s.duration",
        "unknown variant `normal`, expected one of fixed, uniform, exponential, lognormal, empirical at line 3, column 124",
    );
    check_syntax(
        &stage("tasks: 1, resources: {cpu: 1}, duration: 5m"),
        "workflows.w.jobs.j.stages.s.duration",
        "unknown variant `5m`, expected one of fixed, uniform, exponential, lognormal, empirical at line 3, column 123",
    );
    check_syntax(
        &wf("queue: root.default, arrivals: {uniform: {mean_interval: 1h}}"),
        "workflows.w.arrivals",
        "unknown variant `uniform`, expected one of poisson at line 3, column 47",
    );
    check_syntax(
        &stage("tasks: 1, resources: {cpu: 1}, duration: {empirical: [1s, soon]}"),
        "workflows.w.jobs.j.stages.s.duration.empirical[1]",
        "`soon` is not a duration: write whole numbers with units, e.g. 500ms, 90s, 15m, 2h30m or 1d at line 3, column 140",
    );
    check_syntax(
        &wf("queue: root.default, every: 24"),
        "workflows.w.every",
        "`24` is not a duration: write whole numbers with units, e.g. 500ms, 90s, 15m, 2h30m or 1d at line 3, column 43",
    );
    check_syntax(
        &stage("tasks: -1, resources: {cpu: 1}, duration: {fixed: 1m}"),
        "workflows.w.jobs.j.stages.s.tasks",
        "expected a whole number from 0 to 4,294,967,295, found `-1` at line 3, column 89",
    );
    check_syntax(
        &stage("tasks: 1, resources: {cpu: 1, memory: 2x}, duration: {fixed: 1m}"),
        "workflows.w.jobs.j.stages.s.resources.memory",
        "`2x` is not a memory amount: write MiB as a number, or a whole number with m, g or t (e.g. 512m, 8g) at line 3, column 120",
    );
    check_syntax(
        &stage("resources: {cpu: 1}, duration: {fixed: 1m}"),
        "workflows.w.jobs.j.stages.s",
        "missing field `tasks` at line 3, column 103",
    );
}

#[test]
fn a_path_keeps_its_indices_where_no_name_can_be_read() {
    check_syntax(
        "version: 1\nworkflows:\n  - {queue: root.default}\n",
        "workflows[0]",
        "missing field `name` at line 3, column 6",
    );
    check_syntax(
        &format!("version: 1\nworkflows:\n  - {{name: 'a.b', jobs: [{{name: j, stages: [{{name: s, {TASK}, x: 1}}]}}]}}\n"),
        "workflows[0].jobs[0].stages[0].x",
        "unknown field `x`, expected one of name, after, tasks, resources, duration, failure_probability, gang, walltime, gpu_milli, gpu_models, node_labels, command, spark, env, max_attempts, outputs, inputs at line 3, column 124",
    );
    // Names YAML 1.1 could read as booleans still name the path.
    check_syntax(
        &format!("version: 1\nworkflows:\n  - {{name: on, jobs: [{{name: no, stages: [{{name: y, {TASK}, x: 1}}]}}]}}\n"),
        "workflows.on.jobs.no.stages.y.x",
        "unknown field `x`, expected one of name, after, tasks, resources, duration, failure_probability, gang, walltime, gpu_milli, gpu_models, node_labels, command, spark, env, max_attempts, outputs, inputs at line 3, column 122",
    );
}

#[test]
fn an_empty_file_says_so() {
    check_syntax(
        "# nothing yet\n",
        "",
        "the file is empty: expected a YAML document starting with `version: 1`",
    );
}

// ---- the example ------------------------------------------------------------------------------

#[test]
fn the_file_types_serialize_to_a_file_that_reads_back_the_same() {
    let raw: WorkloadFile =
        parse_yaml("examples/workload.yaml", EXAMPLE_WORKLOAD).unwrap_or_else(|e| panic!("{e}"));
    let text = serde_saphyr::to_string(&raw).unwrap_or_else(|e| panic!("{e}"));
    let again: WorkloadFile = parse_yaml("again.yaml", &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(again, raw);
    assert!(text.contains("lognormal:"), "{text}");
}

fn example() -> (ClusterConfig, Workload) {
    let cluster =
        ClusterConfig::from_yaml("examples/cluster.yaml", EXAMPLE_CLUSTER).unwrap_or_else(|e| panic!("{e}"));
    let workload = Workload::from_yaml("examples/workload.yaml", EXAMPLE_WORKLOAD, &cluster)
        .unwrap_or_else(|e| panic!("{e}"));
    (cluster, workload)
}

#[test]
fn the_example_workload_parses_against_the_example_cluster() {
    let (_, w) = example();
    let by_tier = |t: u8| w.workflows.iter().filter(|f| f.tier == t).count();
    assert_eq!((by_tier(1), by_tier(2), by_tier(3)), (5, 5, 6));
    let find =
        |name: &str| w.workflows.iter().find(|f| f.name == name).unwrap_or_else(|| panic!("no {name}"));
    // Placed by project through the default rule.
    assert_eq!(find("bidding-model-refresh").queue.as_str(), "root.ads.bidding.tier1");
    assert_eq!(find("ads-hourly-features").queue.as_str(), "root.ads.ranking.tier2");
    assert_eq!(find("relevance-experiments").queue.as_str(), "root.search.relevance.tier3");
    // Tier from the leaf: root.default is a tier-3 leaf.
    assert_eq!((find("notebook-scratch").tier, find("notebook-scratch").user.as_str()), (3, "notebooks"));
    assert_eq!(find("adhoc-exploration").user, "adhoc-exploration");
    assert!(matches!(find("warehouse-adhoc-sql").arrival, Arrival::Poisson { .. }));
    assert_eq!(find("reporting-backfill").arrival, Arrival::At(vec![at(36_000), at(122_400), at(208_800)]));
    // Every tier-1 and tier-2 workflow has an SLO, every tier-1 one recurs, and each SLO leaves
    // room beyond the run's critical path.
    for f in w.workflows.iter().filter(|f| f.tier <= 2) {
        let slo = f.slo.unwrap_or_else(|| panic!("{} has no SLO", f.name));
        assert!(matches!(f.arrival, Arrival::Every { .. }), "{} does not recur", f.name);
        assert!(f.critical_path_secs() * 1.5 < slo.as_secs_f64(), "{}: SLO {slo} is too tight", f.name);
    }
}

#[test]
fn the_example_workload_keeps_the_example_cluster_moderately_busy() {
    let (cluster, w) = example();
    let day = 86_400.0;
    let step = cluster.scheduler.increment;
    // Mean demand over a day, in millicore-seconds and MiB-seconds: runs per day × Σ tasks ×
    // mean duration (a failed attempt costs half a duration on average) × the rounded request.
    let (mut cpu, mut memory) = (0.0, 0.0);
    for f in &w.workflows {
        let runs = match &f.arrival {
            Arrival::Every { every, .. } => day / every.as_secs_f64(),
            Arrival::Poisson { mean_interval, .. } => day / mean_interval.as_secs_f64(),
            // One-off runs: spread over the three days they fall in.
            Arrival::At(times) => times.len() as f64 / 3.0,
        };
        for s in f.jobs.iter().flat_map(|j| &j.stages) {
            let p = s.failure_probability;
            let task_secs = s.tasks as f64 * s.duration.mean_secs() * (1.0 + 0.5 * p / (1.0 - p));
            let r = s.resources.round_up_to(&step);
            cpu += runs * task_secs * r.cpu as f64;
            memory += runs * task_secs * r.memory as f64;
        }
    }
    let total = cluster.total_resources();
    let (cpu, memory) = (cpu / (total.cpu as f64 * day), memory / (total.memory as f64 * day));
    assert!((0.4..0.7).contains(&cpu), "mean cpu utilization {cpu:.3}");
    assert!((0.4..0.7).contains(&memory), "mean memory utilization {memory:.3}");
}

#[test]
fn a_stage_whose_total_demand_cannot_be_counted_is_refused() {
    // Issue 13: the engine sums pending demand exactly, so a stage asking for more than 64 bits
    // can hold (here 4 × 2^62 MiB, each task fitting its node) is an error, not a silent clamp.
    let cluster = ClusterConfig::from_yaml(
        "huge.yaml",
        "version: 1\nnodes: [{count: 1, resources: {cpu: 1000, memory: 4611686018427387904}}]\nqueues: [{name: a}]\n",
    )
    .expect("one huge node is representable");
    let text = "version: 1\nworkflows:\n  - {name: w, queue: root.a, jobs: [{name: j, stages: [{name: s, tasks: 4, resources: {cpu: 1, memory: 4611686018427387904}, duration: {fixed: 1m}}]}]}\n";
    let err = Workload::from_yaml("w.yaml", text, &cluster).expect_err("4 × 2^62 MiB overflows");
    let p = err.problems();
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(p[0].path, "workflows.w.jobs.j.stages.s.tasks");
    assert!(p[0].message.contains("ask for more memory than 64 bits can count"), "{}", p[0].message);
    let fine = text.replace("tasks: 4", "tasks: 3");
    Workload::from_yaml("w.yaml", &fine, &cluster).expect("3 × 2^62 MiB is countable");
}

// ---- live runs (weir serve) -------------------------------------------------------------------

/// Problems (path, message) of `yaml` validated for a live run; empty if it is valid.
fn live_problems(yaml: &str) -> Vec<(String, String)> {
    let raw: WorkloadFile = parse_yaml("w.yaml", yaml).unwrap_or_else(|e| panic!("{e}"));
    match Workload::live_from_file("w.yaml", &raw, &cluster()) {
        Ok(_) => Vec::new(),
        Err(e) => e.problems().into_iter().map(|p| (p.path, p.message)).collect(),
    }
}

#[test]
fn a_spark_stage_names_a_python_file_or_a_class_with_its_jar() {
    let ok = stage(
        "tasks: 1, resources: {cpu: 2000}, spark: {main: wc.py, args: [in.txt], conf: {spark.ui.enabled: 'false'}, executors: 2}",
    );
    assert_eq!(live_problems(&ok), Vec::<(String, String)>::new());
    let jvm = stage("tasks: 1, resources: {cpu: 1000}, spark: {main: org.example.Main, jar: app.jar}");
    assert_eq!(live_problems(&jvm), Vec::<(String, String)>::new());
    let at = |field: &str| format!("workflows.w.jobs.j.stages.s.{field}");
    let paths = |yaml: &str| live_problems(&stage(yaml)).into_iter().map(|(p, _)| p).collect::<Vec<_>>();
    assert_eq!(
        paths("tasks: 1, resources: {cpu: 1000}, command: 'echo', spark: {main: wc.py}"),
        vec![at("spark")]
    );
    assert_eq!(
        paths("tasks: 1, resources: {cpu: 1000}, spark: {main: org.example.Main}"),
        vec![at("spark.jar")]
    );
    assert_eq!(
        paths("tasks: 1, resources: {cpu: 1000}, spark: {main: wc.py, jar: a.jar}"),
        vec![at("spark.jar")]
    );
    assert_eq!(paths("tasks: 1, resources: {cpu: 1000}, spark: {main: 'run me.sh'}"), vec![at("spark.main")]);
    assert_eq!(
        paths(
            "tasks: 1, resources: {cpu: 1000}, spark: {main: wc.py, executors: 0, \
             conf: {spark.master: 'local[4]', fs.defaultFS: 'x'}}"
        ),
        vec![at("spark.conf"), at("spark.conf.spark.master"), at("spark.executors")]
    );
    // The message says what a main must be.
    let p = live_problems(&stage("tasks: 1, resources: {cpu: 1000}, spark: {main: 'run me.sh'}"));
    assert!(p[0].1.contains("neither a Python file"), "{p:?}");
}

#[test]
fn a_live_stage_needs_a_command_and_no_duration() {
    let ok = stage("tasks: 2, resources: {cpu: 1000}, command: 'echo hi', env: {A: b}, max_attempts: 2");
    assert_eq!(live_problems(&ok), Vec::<(String, String)>::new());
    let p = |path: &str, m: &str| (path.to_string(), m.to_string());
    assert_eq!(
        live_problems(&stage("tasks: 1, resources: {cpu: 1000}, duration: {fixed: 1m}")),
        vec![p(
            "workflows.w.jobs.j.stages.s.command",
            "a stage of a live run needs a `command` to run (or `spark:`, a Spark application)"
        )]
    );
    assert_eq!(
        live_problems(&stage(
            "tasks: 1, resources: {cpu: 1000}, command: ' ', env: {'A=B': x}, max_attempts: 0"
        )),
        vec![
            p("workflows.w.jobs.j.stages.s.command", "must not be empty"),
            p(
                "workflows.w.jobs.j.stages.s.env",
                "`A=B` is not an environment variable name (non-empty, no `=`)"
            ),
            p("workflows.w.jobs.j.stages.s.max_attempts", "must be at least 1"),
        ]
    );
}

#[test]
fn simulation_still_needs_a_duration_and_ignores_live_fields() {
    check(
        &stage("tasks: 1, resources: {cpu: 1000}, command: 'true'"),
        &[(
            "workflows.w.jobs.j.stages.s.duration",
            "a stage needs a `duration` to be simulated (live runs give a `command` instead)",
        )],
    );
    let w = only(&stage(
        "tasks: 1, resources: {cpu: 1000}, duration: {fixed: 1m}, command: 'true', max_attempts: 2",
    ));
    assert_eq!(w.jobs[0].stages[0].duration, Distribution::Fixed(secs(60)));
}

#[test]
fn a_live_stage_declares_outputs_and_inputs_by_uri() {
    let ok = stage(
        "tasks: 1, resources: {cpu: 1000}, command: 'true', \
         outputs: [{uri: 's3://lake/sales/dt={{logical_date}}/r={{params.region}}/', format: csv}], \
         inputs: [{uri: 's3://lake/orders/dt={{logical_date}}/', require: manifest}]",
    );
    assert_eq!(live_problems(&ok), Vec::<(String, String)>::new());
    let at = |field: &str| format!("workflows.w.jobs.j.stages.s.{field}");
    let p = live_problems(&stage(
        "tasks: 1, resources: {cpu: 1000}, command: 'true', \
         outputs: [{uri: 's3://lake/a', format: csv}, {uri: 's3://lake/{{date}}/', format: jsonl}], \
         inputs: [{uri: 'file:///tmp/x/', require: manifest}]",
    ));
    let paths: Vec<&str> = p.iter().map(|(path, _)| path.as_str()).collect();
    assert_eq!(
        paths,
        [at("outputs[0].uri"), at("outputs[1].uri"), at("inputs[0].uri")]
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
    );
    assert!(p[0].1.contains("must end with `/`"), "{p:?}");
    assert!(p[1].1.contains("unknown placeholder `{{date}}`"), "{p:?}");
    // Several outputs: separate prefixes (whatever the parameters), at most 16.
    let ok = stage(
        "tasks: 1, resources: {cpu: 1000}, command: 'true', \
         outputs: [{uri: 's3://lake/sales/dt={{logical_date}}/', format: csv}, \
                   {uri: 's3://lake/{{params.a}}/', format: jsonl}, {uri: 's3://lake/{{params.b}}/', format: bytes}]",
    );
    assert_eq!(live_problems(&ok), Vec::<(String, String)>::new());
    let p = live_problems(&stage(
        "tasks: 1, resources: {cpu: 1000}, command: 'true', \
         outputs: [{uri: 's3://lake/sales/', format: csv}, {uri: 's3://lake/sales/dt={{logical_date}}/', format: csv}]",
    ));
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(p[0].0, at("outputs[1].uri"));
    assert!(p[0].1.contains("overlaps outputs[0] `s3://lake/sales/`"), "{p:?}");
    let many: Vec<String> = (0..17).map(|i| format!("{{uri: 's3://lake/t{i}/', format: csv}}")).collect();
    let p = live_problems(&stage(&format!(
        "tasks: 1, resources: {{cpu: 1000}}, command: 'true', outputs: [{}]",
        many.join(", ")
    )));
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(p[0].0, at("outputs"));
    assert!(p[0].1.contains("17 outputs: a stage declares at most 16"), "{p:?}");
    // The comparison's settings: a tolerance between 0 and 1, a header only for csv.
    let ok = stage(
        "tasks: 1, resources: {cpu: 1000}, command: 'true', \
         outputs: [{uri: 's3://lake/a/', format: csv, csv_header: false, size_tolerance: 0.05}]",
    );
    assert_eq!(live_problems(&ok), Vec::<(String, String)>::new());
    let p = live_problems(&stage(
        "tasks: 1, resources: {cpu: 1000}, command: 'true', \
         outputs: [{uri: 's3://lake/a/', format: jsonl, csv_header: true, size_tolerance: 1.5}]",
    ));
    assert_eq!(
        p,
        [
            (
                at("outputs[0].size_tolerance"),
                "1.5 is not between 0 and 1 (a relative difference: 0.01 tolerates 1%)".to_string()
            ),
            (
                at("outputs[0].csv_header"),
                "only a csv output has a header line (this one's format is jsonl)".to_string()
            ),
        ]
    );
    // Unknown fields and formats are refused by name.
    let raw = stage(
        "tasks: 1, resources: {cpu: 1000}, command: 'true', outputs: [{uri: 's3://l/a/', format: xml}]",
    );
    let err = parse_yaml::<WorkloadFile>("w.yaml", &raw).unwrap_err().to_string();
    assert!(err.contains("xml") && err.contains("outputs"), "{err}");
    let raw = stage(
        "tasks: 1, resources: {cpu: 1000}, command: 'true', outputs: [{uri: 's3://l/a/', format: csv, header: no}]",
    );
    let err = parse_yaml::<WorkloadFile>("w.yaml", &raw).unwrap_err().to_string();
    assert!(
        err.contains("unknown field `header`, expected one of uri, format, csv_header, size_tolerance"),
        "{err}"
    );
}
