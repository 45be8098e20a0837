//! Gangs, walltimes, GPU fractions, GPU models and node labels in the cluster and workload
//! files: what they resolve to, and every rule with its path and message.

use weir_model::{Backfill, ClusterConfig, Duration, GangPreemption, ModelError, TaskPlacement, Workload};

/// Four CPU nodes labelled `cpu`, two A100 nodes of 8 GPUs and one V100 node of 4, labelled `gpu`.
const CLUSTER: &str = "version: 1
scheduler: {backfill: easy, gang_timeout: 5m}
nodes:
  - {count: 4, resources: {cpu: 32000, memory: 128g}, label: cpu}
  - {count: 2, resources: {cpu: 64000, memory: 512g, gpu: 8}, label: gpu, gpu_model: A100}
  - {count: 1, resources: {cpu: 32000, memory: 256g, gpu: 4}, label: gpu, gpu_model: V100}
queues:
  - name: hpc
    gang_preemption: protected
    children: [{name: mpi}, {name: other, gang_preemption: whole}]
  - {name: default}
";

fn cluster() -> ClusterConfig {
    ClusterConfig::from_yaml("cluster.yaml", CLUSTER).unwrap_or_else(|e| panic!("{e}"))
}

/// A workload of one job `j` in `root.default` whose one stage `s` has these fields.
fn stage(fields: &str) -> String {
    format!(
        "version: 1\nworkflows:\n  - {{name: w, queue: root.default, jobs: [{{name: j, stages: [{{name: s, {fields}}}]}}]}}\n"
    )
}

#[track_caller]
fn problems(yaml: &str) -> Vec<(String, String)> {
    match Workload::from_yaml("w.yaml", yaml, &cluster()) {
        Ok(_) => panic!("expected problems, but this validated:\n{yaml}"),
        Err(ModelError::Invalid { problems, .. }) => {
            problems.into_iter().map(|p| (p.path, p.message)).collect()
        }
        Err(e) => panic!("expected validation problems, got {e}"),
    }
}

#[test]
fn the_cluster_file_resolves_backfill_gang_settings_and_gpu_models() {
    let c = cluster();
    assert_eq!(c.scheduler.backfill, Backfill::Easy);
    assert_eq!(c.scheduler.gang_timeout, Duration::from_secs(300));
    assert_eq!(c.nodes[1].gpu_model.as_deref(), Some("A100"));
    assert_eq!(c.nodes[0].gpu_model, None);
    let gang = |path: &str| {
        c.queues[c.find(&weir_model::QueuePath::parse(path).expect("path")).expect("queue")].gang_preemption
    };
    // Inherited from the parent, overridden where set, `whole` at the top.
    assert_eq!(gang("root.hpc.mpi"), GangPreemption::Protected);
    assert_eq!(gang("root.hpc.other"), GangPreemption::Whole);
    assert_eq!(gang("root.default"), GangPreemption::Whole);
    // YuniKorn's placeholder timeout is the default (objects/application.go, 15 minutes).
    let plain = ClusterConfig::from_yaml(
        "c.yaml",
        "version: 1\nnodes: [{resources: {cpu: 1000, memory: 1g}}]\nqueues: [{name: a}]\n",
    )
    .expect("valid");
    assert_eq!(plain.scheduler.gang_timeout, Duration::from_secs(900));
    assert_eq!(plain.scheduler.backfill, Backfill::None);
}

#[test]
fn cluster_rules_for_gpu_models_and_gang_settings() {
    let bad = "version: 1
scheduler: {backfill_depth: 0}
nodes:
  - {count: 1, resources: {cpu: 1000, memory: 1g}, gpu_model: A100}
  - {count: 1, resources: {cpu: 1000, memory: 1g, gpu: 1}, gpu_model: ' ', label: 'a,b'}
queues: [{name: a}]
";
    let Err(ModelError::Invalid { problems, .. }) = ClusterConfig::from_yaml("c.yaml", bad) else {
        panic!("expected problems")
    };
    let found: Vec<(String, String)> = problems.into_iter().map(|p| (p.path, p.message)).collect();
    let want = [
        ("scheduler.backfill_depth", "must be at least 1 (leave it out for 500)"),
        ("nodes[0].gpu_model", "the nodes have no GPUs (resources.gpu is 0), so they have no GPU model"),
        ("nodes[1].label", "must be a non-empty name without commas"),
        ("nodes[1].gpu_model", "must be a non-empty name without commas"),
    ];
    let want: Vec<(String, String)> = want.iter().map(|(p, m)| (p.to_string(), m.to_string())).collect();
    assert_eq!(found, want);
}

#[test]
fn stage_fields_carry_over() {
    let yaml = stage(
        "tasks: 4, resources: {cpu: 1000, memory: 1g}, duration: {fixed: 1m}, gang: true, walltime: 2h, \
         gpu_milli: 500, gpu_models: [A100, V100], node_labels: [gpu]",
    );
    let w = Workload::from_yaml("w.yaml", &yaml, &cluster()).unwrap_or_else(|e| panic!("{e}"));
    let s = &w.workflows[0].jobs[0].stages[0];
    assert!(s.gang);
    assert_eq!(s.walltime, Some(Duration::from_secs(7200)));
    assert_eq!(
        s.placement,
        TaskPlacement {
            gpu_milli: 500,
            gpu_models: vec!["A100".into(), "V100".into()],
            node_labels: vec!["gpu".into()]
        }
    );
    assert!(!w.workflows[0].jobs[0].gang);
    let job_gang = "version: 1\nworkflows:\n  - {name: w, queue: root.default, jobs: [{name: j, gang: true, \
                    stages: [{name: s, tasks: 1, resources: {cpu: 1000}, duration: {fixed: 1m}}]}]}\n";
    let w = Workload::from_yaml("w.yaml", job_gang, &cluster()).unwrap_or_else(|e| panic!("{e}"));
    assert!(w.workflows[0].jobs[0].gang);
    assert!(!w.workflows[0].jobs[0].stages[0].gang);
}

#[test]
fn placement_allows_nodes_by_label_and_model() {
    let p = TaskPlacement { gpu_milli: 0, gpu_models: vec!["A100".into()], node_labels: vec![] };
    assert!(p.allows(Some("gpu"), Some("A100")));
    assert!(!p.allows(Some("gpu"), Some("V100")));
    assert!(!p.allows(Some("gpu"), None), "a model is asked for; a node without one does not qualify");
    let l = TaskPlacement { node_labels: vec!["a".into(), "b".into()], ..TaskPlacement::default() };
    assert!(l.allows(Some("b"), None));
    assert!(!l.allows(None, None));
    assert!(TaskPlacement::default().allows(None, None));
}

#[test]
fn stage_rules_for_gangs_walltimes_and_gpus() {
    let here = "workflows.w.jobs.j.stages.s";
    let cases: &[(&str, &str, &str)] = &[
        (
            "tasks: 1, resources: {cpu: 1000}, duration: {fixed: 1m}, gpu_milli: 1000",
            "gpu_milli",
            "1000 is not a fraction of one GPU: use 1 to 999 thousandths, or whole GPUs as resources.gpu",
        ),
        (
            "tasks: 1, resources: {cpu: 1000}, duration: {fixed: 1m}, gpu_milli: 0",
            "gpu_milli",
            "0 is not a fraction of one GPU: use 1 to 999 thousandths, or whole GPUs as resources.gpu",
        ),
        (
            "tasks: 1, resources: {cpu: 1000, gpu: 1}, duration: {fixed: 1m}, gpu_milli: 500",
            "gpu_milli",
            "a task asks for whole GPUs (resources.gpu) or a fraction of one (gpu_milli), not both",
        ),
        (
            "tasks: 1, resources: {cpu: 1000}, duration: {fixed: 1m}, gpu_models: [H100]",
            "gpu_models",
            "no node has GPU model `H100`; the cluster's models are A100, V100",
        ),
        (
            "tasks: 1, resources: {cpu: 1000}, duration: {fixed: 1m}, node_labels: [fpga]",
            "node_labels",
            "no node has label `fpga`; the cluster's labels are cpu, gpu",
        ),
        (
            "tasks: 1, resources: {cpu: 1000}, duration: {fixed: 1m}, walltime: 0s",
            "walltime",
            "must be positive (leave it out when unknown)",
        ),
        (
            // Five GPUs fit an A100 node, never a V100 one.
            "tasks: 1, resources: {cpu: 1000, gpu: 5}, duration: {fixed: 1m}, gpu_models: [V100]",
            "resources",
            "a task of {cpu: 1000, memory: 0, gpu: 5} with GPU model in [V100] fits on no node of the cluster, \
             so it could never run; the nodes are 4 × {cpu: 32000, memory: 131072} label cpu, \
             2 × {cpu: 64000, memory: 524288, gpu: 8} label gpu A100, 1 × {cpu: 32000, memory: 262144, gpu: 4} label gpu V100",
        ),
        (
            "tasks: 1, resources: {cpu: 1000}, duration: {fixed: 1m}, gpu_milli: 300, node_labels: [cpu]",
            "resources",
            "a task of {cpu: 1000, memory: 0} with 300 thousandths of a GPU, label in [cpu] fits on no node of \
             the cluster, so it could never run; the nodes are 4 × {cpu: 32000, memory: 131072} label cpu, \
             2 × {cpu: 64000, memory: 524288, gpu: 8} label gpu A100, 1 × {cpu: 32000, memory: 262144, gpu: 4} label gpu V100",
        ),
        (
            // 2 × 8 A100 GPUs: 16 one-GPU tasks at once, never 17.
            "tasks: 17, resources: {cpu: 1000, gpu: 1}, duration: {fixed: 1m}, gpu_models: [A100], gang: true",
            "gang",
            "a gang of 17 tasks of {cpu: 1000, memory: 0, gpu: 1} can never start: all of its tasks start \
             together, and the nodes it may use hold at most 16 of them at once",
        ),
        (
            // Three 0.3-GPU tasks per GPU: 3 × 4 on the V100 node.
            "tasks: 13, resources: {cpu: 1000}, duration: {fixed: 1m}, gpu_milli: 300, gpu_models: [V100], gang: true",
            "gang",
            "a gang of 13 tasks of {cpu: 1000, memory: 0} can never start: all of its tasks start \
             together, and the nodes it may use hold at most 12 of them at once",
        ),
    ];
    for (fields, field, message) in cases {
        let found = problems(&stage(fields));
        assert_eq!(found, vec![(format!("{here}.{field}"), message.to_string())], "{fields}");
    }
    // A gang that fits exactly is fine; so is a GPU fraction on its own.
    let ok = [
        "tasks: 16, resources: {cpu: 1000, gpu: 1}, duration: {fixed: 1m}, gpu_models: [A100], gang: true",
        "tasks: 12, resources: {cpu: 1000}, duration: {fixed: 1m}, gpu_milli: 300, gpu_models: [V100], gang: true",
        "tasks: 1, resources: {}, duration: {fixed: 1m}, gpu_milli: 300",
    ];
    for fields in ok {
        Workload::from_yaml("w.yaml", &stage(fields), &cluster()).unwrap_or_else(|e| panic!("{fields}: {e}"));
    }
}

#[test]
fn a_job_order_needs_a_fifo_leaf() {
    let yaml = "version: 1
nodes: [{count: 2, resources: {cpu: 1000, memory: 1024}}]
queues:
  - {name: a, policy: fifo, job_order: shortest}
  - {name: b, job_order: largest}
";
    let e = weir_model::ClusterConfig::from_yaml("c.yaml", yaml).expect_err("b is not fifo").to_string();
    assert!(
        e.contains("queues.b.job_order: largest orders jobs inside a fifo leaf: set policy: fifo on a leaf"),
        "{e}"
    );
    assert!(!e.contains("queues.a"), "{e}");
    let ok = yaml.replace("{name: b, job_order: largest}", "{name: b, policy: fifo, job_order: largest}");
    let c = weir_model::ClusterConfig::from_yaml("c.yaml", &ok).expect("valid");
    assert_eq!(
        c.queues.iter().find(|q| q.name == "b").map(|q| q.job_order),
        Some(weir_model::JobOrder::Largest)
    );
}

#[test]
fn a_job_gang_larger_than_the_cluster_is_a_validation_error() {
    let cluster = weir_model::ClusterConfig::from_yaml(
        "c.yaml",
        "version: 1\nnodes: [{count: 2, resources: {cpu: 1000, memory: 2048}}]\nqueues: [{name: a}]\n",
    )
    .expect("cluster");
    let workload = |second: &str| {
        format!(
            "version: 1
workflows:
  - name: big
    queue: root.a
    jobs:
      - name: j
        gang: true
        stages:
          - {{name: s, tasks: 1, resources: {{cpu: 1000, memory: 1g}}, duration: {{fixed: 30s}}}}
          - {{name: t, tasks: 2, {second}resources: {{cpu: 1000, memory: 1g}}, duration: {{fixed: 30s}}}}
"
        )
    };
    // Both stages start at once as one gang of 3 on 2 one-core nodes: it could never start.
    let e =
        weir_model::Workload::from_yaml("w.yaml", &workload(""), &cluster).expect_err("too big").to_string();
    assert!(e.contains("workflows.big.jobs.j.gang: its first stages start as one gang of 3 tasks"), "{e}");
    // The second stage after the first: gangs of 1 and 2, each fits.
    weir_model::Workload::from_yaml("w.yaml", &workload("after: [s], "), &cluster).expect("fits");
}
