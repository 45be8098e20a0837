//! Large files load: the YAML reader's budget grows with the file, so a workload of 100,000
//! workflows (19 MB) reads, where serde-saphyr's defaults stopped at about 8,300; the limits
//! that remain (aliases, nesting) say which limit and what to do.

use weir_model::{ClusterConfig, ModelError, Workload};

const CLUSTER: &str = "
version: 1
nodes:
  - {count: 4, resources: {cpu: 8000, memory: 32g}}
queues:
  - {name: default}
";

fn workflows(n: usize) -> String {
    let mut text = String::from("version: 1\nworkflows:\n");
    for i in 0..n {
        text.push_str(&format!(
            "  - name: w{i}\n    queue: root.default\n    start: {i}s\n    jobs:\n      - name: j\n        stages:\n          - {{name: s, tasks: 1, resources: {{cpu: 100, memory: 100}}, duration: {{fixed: 10s}}}}\n"
        ));
    }
    text
}

#[test]
fn a_workload_of_100000_workflows_loads() {
    let cluster = ClusterConfig::from_yaml("c.yaml", CLUSTER).unwrap_or_else(|e| panic!("{e}"));
    let w = Workload::from_yaml("w.yaml", &workflows(100_000), &cluster).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(w.workflows.len(), 100_000);
    assert_eq!(w.workflows[99_999].name, "w99999");
}

#[test]
fn the_limits_left_say_which_and_what_to_do() {
    // 60,000 workflows sharing one job list through an alias: a small file that would expand
    // into a large one, which the reader refuses with the limit's name.
    let mut text = String::from(
        "version: 1\nworkflows:\n  - name: w0\n    queue: root.default\n    jobs: &jobs [{name: j, stages: [{name: s, tasks: 1, resources: {cpu: 100, memory: 100}, duration: {fixed: 10s}}]}]\n",
    );
    for i in 1..60_000 {
        text.push_str(&format!("  - {{name: w{i}, queue: root.default, jobs: *jobs}}\n"));
    }
    let cluster = ClusterConfig::from_yaml("c.yaml", CLUSTER).unwrap_or_else(|e| panic!("{e}"));
    let e = Workload::from_yaml("w.yaml", &text, &cluster).expect_err("refused");
    let ModelError::Syntax { message, .. } = &e else { panic!("{e}") };
    assert!(message.contains("YAML") && message.contains("write the repeated parts out"), "{message}");
}
