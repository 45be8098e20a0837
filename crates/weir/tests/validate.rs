//! `weir validate`, run as a real process on the examples and on broken files.

mod common;

use common::{text, weir, Scratch};

#[test]
fn the_examples_are_valid() {
    let out = weir(&["validate", "examples/cluster.yaml", "examples/cluster-small.yaml"]);
    assert_eq!(text(&out.stderr), "");
    assert_eq!(
        text(&out.stdout),
        "examples/cluster.yaml: ok — 40 nodes, 48 queues (33 leaves), total {cpu: 640000, memory: 2621440}\n\
         examples/cluster-small.yaml: ok — 4 nodes, 3 queues (3 leaves), total {cpu: 32000, memory: 131072}\n"
    );
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn an_invalid_file_lists_every_problem_with_file_and_path() {
    let scratch = Scratch::new("invalid");
    let bad = scratch.file(
        "bad.yaml",
        "version: 1
nodes: [{count: 0, resources: {cpu: 1000}}]
queues:
  - name: ads
    children:
      - name: ranking
        children:
          - {name: tier1, weight: -1, tier: 5}
",
    );
    let out = weir(&["validate", &bad]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stdout), "");
    let stderr = text(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(
        lines,
        [
            format!("{bad}: nodes[0].count: must be at least 1"),
            format!("{bad}: queues.ads.children.ranking.children.tier1.weight: -1 is not a weight: use a number ≥ 0 (0 = served last)"),
            format!("{bad}: queues.ads.children.ranking.children.tier1.tier: 5 is not a tier: tiers are numbered 1 (most critical) to 3"),
        ]
    );
}

#[test]
fn an_unknown_field_names_the_file_the_path_and_the_line() {
    let scratch = Scratch::new("unknown-field");
    let bad = scratch.file(
        "typo.yaml",
        "version: 1\nnodes: [{resources: {cpu: 1000}}]\nqueues:\n  - {name: a, wieght: 2}\n",
    );
    let out = weir(&["validate", &bad]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with(&format!("{bad}: queues.a.wieght: unknown field `wieght`, expected one of")),
        "{stderr}"
    );
    assert!(stderr.trim_end().ends_with("at line 4, column 15"), "{stderr}");
}

#[test]
fn several_type_errors_are_each_reported_in_words_with_line_and_path() {
    let scratch = Scratch::new("type-errors");
    let bad = scratch.file(
        "types.yaml",
        "version: 1
nodes:
  - {count: 2, resources: {cpu: 1000, memory: 4g}}
queues:
  - name: a
    weight: heavy
  - name: b
    max_running_apps: -3
  - {name: c, wieght: 2}
",
    );
    let out = weir(&["validate", &bad]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 3, "{stderr}");
    assert_eq!(
        lines[0],
        format!(
            "{bad}: queues.a.weight: expected a number (e.g. 2 or 0.5), found `heavy` at line 6, column 13"
        )
    );
    assert_eq!(
        lines[1],
        format!("{bad}: queues.b.max_running_apps: expected a whole number from 0 to 4,294,967,295, found `-3` at line 8, column 23")
    );
    assert!(lines[2].starts_with(&format!("{bad}: queues.c.wieght: unknown field `wieght`")), "{stderr}");
    assert!(lines[2].ends_with("at line 9, column 15"), "{stderr}");
}

#[test]
fn every_file_is_checked_even_after_a_bad_one() {
    let scratch = Scratch::new("several");
    let bad =
        scratch.file("bad.yaml", "version: 2\nnodes: [{resources: {cpu: 1000}}]\nqueues: [{name: a}]\n");
    let out = weir(&["validate", &bad, "examples/cluster-small.yaml"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        format!("{bad}: version: unsupported version 2; this weir reads version 1\n")
    );
    assert!(text(&out.stdout).starts_with("examples/cluster-small.yaml: ok — 4 nodes"));
}

#[test]
fn an_unreadable_file_exits_2_and_names_the_file() {
    let scratch = Scratch::new("missing");
    let missing = scratch.0.join("missing.yaml").display().to_string();
    let out = weir(&["validate", &missing, "examples/cluster-small.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(stderr.contains(&format!("cannot read {missing}")), "{stderr}");
    assert!(text(&out.stdout).contains("cluster-small.yaml: ok"));
}

#[test]
fn usage_errors_exit_2() {
    let out = weir(&["validate"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("<FILE>"));
}

#[test]
fn help_teaches_by_example() {
    let out = weir(&["validate", "--help"]);
    assert_eq!(out.status.code(), Some(0));
    let help = text(&out.stdout);
    assert!(help.contains("weir validate examples/cluster.yaml"), "{help}");
    assert!(help.contains("FILE: PATH: MESSAGE"), "{help}");
    let top = text(&weir(&["--help"]).stdout);
    assert!(top.contains("validate"), "{top}");
}

#[test]
fn workload_files_are_checked_against_the_cluster() {
    let o = weir(&[
        "validate",
        "--cluster",
        "examples/story/cluster-tiered.yaml",
        "examples/story/workload.yaml",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.contains("examples/story/workload.yaml: ok — 13 workflows (tier 1: 4, tier 2: 3, tier 3: 6"),
        "{out}"
    );

    // The same workload on a cluster without the project queues: every workflow named, with its path.
    let o = weir(&["validate", "--cluster", "examples/cluster-small.yaml", "examples/story/workload.yaml"]);
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert_eq!(err.lines().count(), 13, "{err}");
    assert!(
        err.contains("examples/story/workload.yaml: workflows.index-build.project: no placement rule of the cluster matches project `search.indexing` at tier 1"),
        "{err}"
    );
}

#[test]
fn a_drf_queue_under_a_fair_parent_is_an_error_under_yarn_rounding_and_a_warning_otherwise() {
    let scratch = Scratch::new("drf-under-fair");
    let tree =
        "nodes: [{count: 1, resources: {cpu: 1000, memory: 1024}}]\nqueues: [{name: a, policy: drf}]\n";
    let yarn = scratch.file("yarn.yaml", &format!("version: 1\n{tree}"));
    let out = weir(&["validate", &yarn]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains(&format!("{yarn}: queues.a.policy: drf under a fair parent")),
        "{}",
        text(&out.stderr)
    );
    let exact = scratch.file("exact.yaml", &format!("version: 1\nscheduler: {{rounding: exact}}\n{tree}"));
    let out = weir(&["validate", &exact]);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        text(&out.stderr).starts_with(&format!("{exact}: warning: queues.a.policy: drf under a fair parent")),
        "{}",
        text(&out.stderr)
    );
    assert!(text(&out.stdout).contains("ok"));
}

#[test]
fn a_workload_written_for_serve_is_valid_and_its_serve_only_stages_are_named() {
    let scratch = Scratch::new("serve-workload");
    let wl = scratch.file(
        "serve.yaml",
        "version: 1
workflows:
  - name: report
    queue: root.default
    jobs:
      - name: extract
        stages:
          - {name: query, tasks: 2, resources: {cpu: 100, memory: 64}, command: echo hi}
          - {name: load, tasks: 1, resources: {cpu: 100, memory: 64}, command: echo done, duration: {fixed: 1m}, after: [query]}
",
    );
    let out = weir(&["validate", "--cluster", "examples/cluster-small.yaml", &wl]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("1 jobs, 2 stages (1 only for weir serve)"), "{}", text(&out.stdout));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("workflows.report.jobs.extract.stages.query: a command and no duration"),
        "{stderr}"
    );
    assert!(!stderr.contains("stages.load"), "{stderr}");
    // A serve workload is still checked: a stage without a command is an error for serve.
    let bad = scratch.file(
        "bad.yaml",
        "version: 1
workflows:
  - name: report
    queue: root.default
    jobs:
      - name: extract
        stages:
          - {name: query, tasks: 2, resources: {cpu: 100, memory: 64}, command: echo hi}
          - {name: load, tasks: 1, resources: {cpu: 100, memory: 64}}
",
    );
    let out = weir(&["validate", "--cluster", "examples/cluster-small.yaml", &bad]);
    assert_eq!(out.status.code(), Some(1));
}
