//! A file with several shape errors reports each (one per list item), with its line, its path
//! and `expected …, found …` wording, not only the first.

use weir_model::{ClusterConfig, ModelError, Workload};

fn problems(e: ModelError) -> Vec<String> {
    e.problems().iter().map(ToString::to_string).collect()
}

#[test]
fn a_cluster_file_with_three_type_errors_reports_three() {
    let yaml = "version: 1
nodes:
  - count: 4
    resources: {cpu: 1000, memory: -3}
  - count: two
    resources: {cpu: 1000, memory: 4g}
queues:
  - name: a
    weight: heavy
  - name: b
    max_running_apps: 2.5
  - name: c
";
    let err = ClusterConfig::from_yaml("c.yaml", yaml).expect_err("invalid");
    assert!(matches!(err, ModelError::Invalid { .. }), "{err}");
    let p = problems(err);
    assert_eq!(p.len(), 4, "{p:#?}");
    assert!(p[0].starts_with("nodes[0].resources.memory: expected a memory amount"), "{}", p[0]);
    assert!(p[0].ends_with("found -3 at line 4, column 28"), "{}", p[0]);
    assert_eq!(
        p[1],
        "nodes[1].count: expected a whole number from 0 to 4,294,967,295, found `two` at line 5, column 12"
    );
    assert_eq!(
        p[2],
        "queues.a.weight: expected a number (e.g. 2 or 0.5), found `heavy` at line 9, column 13"
    );
    assert_eq!(
        p[3],
        "queues.b.max_running_apps: expected a whole number from 0 to 4,294,967,295, found `2.5` at line 11, column 23"
    );
}

#[test]
fn an_unnamed_item_after_a_masked_one_keeps_its_index() {
    let yaml = "version: 1
nodes: [{count: 4, resources: {cpu: 1000, memory: 4g}}]
queues:
  - {weight: x}
  - {weight: 1, wat: 2}
";
    let p = problems(ClusterConfig::from_yaml("c.yaml", yaml).expect_err("invalid"));
    assert_eq!(p.len(), 2, "{p:#?}");
    assert!(p[0].starts_with("queues[0].weight: expected a number"), "{}", p[0]);
    assert!(p[1].starts_with("queues[1].wat: unknown field `wat`"), "{}", p[1]);
}

#[test]
fn a_workload_reports_an_error_in_each_workflow_and_stage() {
    let cluster = ClusterConfig::from_yaml(
        "c.yaml",
        "version: 1\nnodes: [{count: 4, resources: {cpu: 8000, memory: 8g}}]\nqueues: [{name: default}]\n",
    )
    .expect("valid");
    let yaml = "version: 1
workflows:
  - name: a
    queue: root.default
    jobs:
      - name: j
        stages:
          - {name: s, tasks: -1, resources: {cpu: 1, memory: 1}, duration: {fixed: 1s}}
          - {name: t, tasks: 1, resources: {cpu: 1, memroy: 1}, duration: {fixed: 1s}}
  - name: b
    queue: root.default
    tier: high
    jobs: []
";
    let p = problems(Workload::from_yaml("w.yaml", yaml, &cluster).expect_err("invalid"));
    assert_eq!(p.len(), 3, "{p:#?}");
    assert!(
        p[0].contains("stages")
            && p[0].contains("tasks: expected a whole number from 0 to 4,294,967,295, found `-1` at line 8"),
        "{}",
        p[0]
    );
    assert!(p[1].contains("unknown field `memroy`") && p[1].contains("line 9"), "{}", p[1]);
    assert!(p[2].contains("tier") && p[2].contains("line 12"), "{}", p[2]);
}

#[test]
fn one_error_stays_one_syntax_error() {
    let err = ClusterConfig::from_yaml("c.yaml", "queues:\n  - {name: a}\n").expect_err("invalid");
    assert!(matches!(err, ModelError::Syntax { .. }), "{err}");
}
