//! A task no node of the cluster can hold is a bad row like any other: every importer skips it
//! and counts it by reason, and the rest of the trace replays (docs/importers.md: an import
//! never stops at a bad row).

use weir_model::{ClusterConfig, Resources};
use weir_sim::import::{import, ImportOptions, Imported, NodeFit, TraceKind};
use weir_sim::{SimConfig, Simulation};

const CLUSTER: &str = "
version: 1
scheduler: {minimum_allocation: {memory: 1024}, increment: {memory: 1024}}
nodes:
  - {count: 4, resources: {cpu: 8000, memory: 32g}}
  - {count: 1, resources: {cpu: 32000, memory: 16g}}
queues:
  - {name: default}
";

fn cluster() -> ClusterConfig {
    ClusterConfig::from_yaml("c.yaml", CLUSTER).unwrap_or_else(|e| panic!("{e}"))
}

fn options() -> ImportOptions {
    ImportOptions { fit: NodeFit::of(&cluster()), machine_memory: 32768, ..ImportOptions::default() }
}

fn run(kind: TraceKind, text: &str) -> Imported {
    import(kind, "t", text.as_bytes(), &options()).expect("imports")
}

const REASON: &str = "task larger than any node of the cluster";

#[test]
fn fitting_follows_the_nodes_and_the_rounding() {
    let fit = NodeFit::of(&cluster());
    assert!(fit.fits(&Resources::new(8000, 32768, 0)), "a whole 8-core node");
    assert!(fit.fits(&Resources::new(32000, 16384, 0)), "the big-cpu node");
    assert!(!fit.fits(&Resources::new(16000, 32768, 0)), "cpu of one shape, memory of the other");
    // 32,769 MiB rounds up to 33 GiB: more than any node.
    assert!(!fit.fits(&Resources::new(1000, 32769, 0)));
    assert!(!fit.fits(&Resources::new(1000, 1024, 1)), "no node has a GPU");
    assert!(NodeFit::default().fits(&Resources::new(u64::MAX, u64::MAX, 9)), "no nodes: no check");
}

#[test]
fn an_swf_job_whose_task_fits_no_node_is_skipped_and_counted() {
    // Field 10 is requested memory in KB per processor: 40 GiB on the second line.
    let line = |id: u64, kb: u64| format!("{id} {id}0 -1 100 4 -1 -1 4 -1 {kb} 1 1 1 -1 -1 -1 -1 -1\n");
    let text = format!("{}{}{}", line(1, 1 << 20), line(2, 40 << 20), line(3, 1 << 20));
    let i = run(TraceKind::Swf, &text);
    assert_eq!(i.workload.workflows.len(), 2);
    let s = &i.skipped[REASON];
    assert_eq!((s.count, s.first_lines.as_slice()), (1, &[2][..]));
}

#[test]
fn an_alibaba_task_that_fits_no_node_is_skipped_and_its_dependants_kept() {
    // plan_cpu 4000 = 40 cores: more than any node. M2 depends on it; its dependency goes.
    let text = "\
M1,2,j_1,1,Terminated,100,200,100,10
R2_1,1,j_1,1,Terminated,200,300,4000,10
R3_2,1,j_1,1,Terminated,300,400,100,10
";
    let i = run(TraceKind::Alibaba2018, text);
    assert_eq!(i.skipped[REASON].count, 1);
    assert_eq!(i.skipped[REASON].first_lines, vec![2]);
    let stages = &i.workload.workflows[0].jobs[0].stages;
    assert_eq!(stages.len(), 2);
    assert!(stages.iter().all(|s| s.after.is_empty()), "{stages:?}");
    assert_eq!(i.adjusted["dependency on an absent task dropped"].count, 1);
}

#[test]
fn an_sls_task_that_fits_no_node_is_dropped_and_a_job_of_only_such_tasks_skipped() {
    let text = r#"
{"job.id": "a", "job.start.ms": 0, "job.tasks": [
  {"container.duration.ms": 5000, "container.memory-mb": 2048, "count": 3},
  {"container.duration.ms": 5000, "container.memory-mb": 65536, "count": 2}]}
{"job.id": "b", "job.start.ms": 10, "job.tasks": [
  {"container.duration.ms": 5000, "container.vcores": 64}]}
"#;
    let i = run(TraceKind::Sls, text);
    assert_eq!(i.workload.workflows.len(), 1);
    assert_eq!(i.workload.workflows[0].jobs[0].stages[0].tasks, 3);
    assert_eq!(i.adjusted["task larger than any node of the cluster dropped"].count, 2);
    assert_eq!(i.skipped[REASON].count, 1);
}

#[test]
fn the_rest_of_the_trace_replays() {
    let line = |id: u64, procs: u64, kb: u64| {
        format!("{id} {id}0 -1 100 {procs} -1 -1 {procs} -1 {kb} 1 1 1 -1 -1 -1 -1 -1\n")
    };
    let text: String = (1..=20).map(|i| line(i, 2, if i == 7 { 64 << 20 } else { 1 << 20 })).collect();
    let i = run(TraceKind::Swf, &text);
    let sim = Simulation::new(cluster(), i.workload, SimConfig { am: None, ..SimConfig::default() })
        .unwrap_or_else(|e| panic!("{e}"));
    let out = sim.finish().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((out.summary.runs, out.summary.runs_completed), (19, 19));
}
