//! Work that can never run says why: guarantees that can never be met are errors (a `min` above
//! its own `max` or an ancestor's, weights so large that shares overshoot the pool), and what is
//! valid but leaves work unschedulable is a warning (a cap of nothing, `max_running_apps: 0`,
//! children guaranteed more than their parent may hold, tasks larger than their queue's cap).

use weir_model::{ClusterConfig, Problem, Workload};

const NODES: &str = "nodes:\n  - {count: 4, resources: {cpu: 8000, memory: 32g}}\n";

fn cluster(queues: &str) -> Result<ClusterConfig, Vec<Problem>> {
    ClusterConfig::from_yaml("c.yaml", &format!("version: 1\n{NODES}queues:\n{queues}"))
        .map_err(|e| e.problems())
}

#[track_caller]
fn error(queues: &str, path: &str, words: &str) {
    let problems = cluster(queues).err().unwrap_or_else(|| panic!("expected an error for\n{queues}"));
    assert!(
        problems.iter().any(|p| p.path == path && p.message.contains(words)),
        "no {path}: …{words}… in {problems:#?}"
    );
}

#[track_caller]
fn warning(queues: &str, path: &str, words: &str) {
    let c = cluster(queues).unwrap_or_else(|p| panic!("{p:#?}"));
    assert!(
        c.warnings.iter().any(|p| p.path == path && p.message.contains(words)),
        "no warning {path}: …{words}… in {:#?}",
        c.warnings
    );
}

#[test]
fn a_min_above_its_own_max_or_an_ancestors_is_an_error() {
    // YARN's AllocationFileQueueParser.checkMinAndMaxResource only logs a warning for min > max;
    // weir refuses a guarantee that can never be met.
    error(
        "  - {name: a, min: {cpu: 4000, memory: 16g}, max: {cpu: 2000, memory: 16g}}\n",
        "queues.a.min",
        "min {cpu: 4000, memory: 16384} is above max {cpu: 2000, memory: 16384",
    );
    error("  - {name: a, min: \"50%\", max: \"25%\"}\n", "queues.a.min", "is above max");
    error(
        "  - name: org\n    max: {cpu: 8000, memory: 32g}\n    children:\n      - {name: big, min: {cpu: 16000, memory: 8g}}\n",
        "queues.org.children.big.min",
        "is above the max {cpu: 8000, memory: 32768, gpu: unbounded} of root.org, which caps everything under it",
    );
    // Equal is fine, and so is a min within every cap.
    cluster("  - {name: a, min: \"25%\", max: \"25%\"}\n").unwrap_or_else(|p| panic!("{p:#?}"));
}

#[test]
fn a_weight_so_large_that_shares_overshoot_the_pool_is_an_error() {
    // With YARN's 32-bit float weights, 1e15 against siblings of 1 gave one queue 22,737% of the
    // cluster; past about 1e7 the shares stop adding up to the pool.
    error(
        "  - {name: a, weight: 1e15}\n  - {name: b}\n",
        "queues.a.weight",
        "above the largest weight weir accepts",
    );
    error("  - {name: a, weight: 1e7}\n", "queues.a.weight", "1000000");
    cluster("  - {name: a, weight: 1e6}\n  - {name: b, weight: 0.001}\n")
        .unwrap_or_else(|p| panic!("{p:#?}"));
}

#[test]
fn caps_that_leave_work_unschedulable_are_warnings() {
    warning("  - {name: shut, max: {cpu: 0, memory: 0}}\n", "queues.shut.max", "leaves no cpu and memory");
    warning("  - {name: a, max: {memory: 0}}\n", "queues.a.max", "leaves no memory for a container");
    warning(
        "  - {name: closed, max_running_apps: 0}\n",
        "queues.closed.max_running_apps",
        "0 admits no job: jobs submitted here wait forever",
    );
    warning(
        "  - name: org\n    max: {cpu: 8000, memory: 32g}\n    children:\n      - {name: a, min: {cpu: 6000, memory: 8g}}\n      - {name: b, min: {cpu: 6000, memory: 8g}}\n",
        "queues.org.children",
        "the mins of root.org's children add up to {cpu: 12000, memory: 16384}, more than its max",
    );
    warning(
        "  - name: org\n    min: {cpu: 2000, memory: 8g}\n    children:\n      - {name: a, min: {cpu: 4000, memory: 8g}}\n",
        "queues.org.children.a.min",
        "is above the min {cpu: 2000, memory: 8192} of its parent root.org",
    );
    // An ordinary layout warns about nothing.
    let c = cluster("  - {name: a, min: \"10%\", max: \"50%\", max_running_apps: 5}\n  - {name: b}\n")
        .unwrap_or_else(|p| panic!("{p:#?}"));
    assert!(c.warnings.is_empty(), "{:#?}", c.warnings);
}

#[test]
fn a_workload_warns_about_tasks_its_queues_can_never_hold() {
    let c = cluster(
        "  - name: org\n    max: {cpu: 4000, memory: 64g}\n    children:\n      - {name: small, max: {cpu: 8000, memory: 8g}}\n  - {name: closed, max_running_apps: 0}\n  - {name: open}\n",
    )
    .unwrap_or_else(|p| panic!("{p:#?}"));
    let stage = |cpu: u64, mem: &str| {
        format!("[{{name: j, stages: [{{name: s, tasks: 1, resources: {{cpu: {cpu}, memory: {mem}}}, duration: {{fixed: 1s}}}}]}}]")
    };
    let text = format!(
        "version: 1\nworkflows:\n  - {{name: wide, queue: root.org.small, jobs: {}}}\n  - {{name: tall, queue: root.org.small, jobs: {}}}\n  - {{name: shut, queue: root.closed, jobs: {}}}\n  - {{name: fine, queue: root.open, jobs: {}}}\n",
        stage(6000, "1g"),
        stage(1000, "16g"),
        stage(1000, "1g"),
        stage(8000, "32g"),
    );
    let w = Workload::from_yaml("w.yaml", &text, &c).unwrap_or_else(|e| panic!("{e}"));
    let warnings: Vec<(String, String)> = w.warnings(&c).into_iter().map(|p| (p.path, p.message)).collect();
    assert_eq!(warnings.len(), 3, "{warnings:#?}");
    assert_eq!(warnings[0].0, "workflows.wide.jobs.j.stages.s.resources");
    assert!(warnings[0].1.contains("its cpu 6000 is above 4000, the max of root.org;"), "{}", warnings[0].1);
    assert_eq!(warnings[1].0, "workflows.tall.jobs.j.stages.s.resources");
    assert!(
        warnings[1].1.contains("its memory 16384 is above 8192, the max of root.org.small;"),
        "{}",
        warnings[1].1
    );
    assert_eq!(warnings[2].0, "workflows.shut");
    assert!(warnings[2].1.contains("root.closed has max_running_apps 0"), "{}", warnings[2].1);
}
