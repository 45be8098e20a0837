//! Rigid parallel jobs replayed from SWF at 1.5× and 2× a machine's capacity: no job starts
//! piecemeal, EASY backfilling gives a much lower mean wait than first come, first served (as
//! the HPC literature reports: Mu'alem & Feitelson, IEEE TPDS 2001), and never starts a job
//! later than the start EASY reserved for it. Also GPU pods end to end, gangs restarted whole
//! after a node failure, and the container limit.

use std::collections::BTreeMap;

use weir_model::{ClusterConfig, Duration, Time, Workload};
use weir_sim::import::{import, import_nodes, ImportOptions, TraceKind};
use weir_sim::synth_swf::SwfModel;
use weir_sim::{NodeFailures, Outcome, SimConfig, Simulation};

/// 32 one-processor nodes, one FIFO leaf; `backfill` none or easy; gangs hold room for ever.
fn hpc(backfill: &str) -> ClusterConfig {
    let yaml = format!(
        "version: 1
scheduler: {{backfill: {backfill}, gang_timeout: 0s}}
nodes: [{{count: 32, resources: {{cpu: 1000, memory: 2048}}}}]
queues: [{{name: default, policy: fifo}}]
"
    );
    ClusterConfig::from_yaml("hpc.yaml", &yaml).unwrap_or_else(|e| panic!("{e}"))
}

fn swf_workload(load: f64) -> Workload {
    let text = SwfModel { jobs: 300, processors: 32, load, seed: 11 }.swf();
    import(TraceKind::Swf, "synthetic.swf", text.as_bytes(), &ImportOptions::default())
        .expect("imports")
        .workload
}

/// Replay, recording the first start EASY reserved for each workflow's job.
fn replay(backfill: &str, load: f64) -> (Outcome, BTreeMap<u32, Time>) {
    let config = SimConfig { am: None, check_invariants: true, ..SimConfig::default() };
    let mut sim =
        Simulation::new(hpc(backfill), swf_workload(load), config).unwrap_or_else(|e| panic!("{e}"));
    let mut reserved: BTreeMap<u32, Time> = BTreeMap::new();
    while sim.step().unwrap_or_else(|e| panic!("{e}")) {
        if let Some((job, at)) = sim.engine().easy_reservation() {
            let w = sim.workflow_of(job).expect("a simulated job");
            let e = reserved.entry(w).or_insert(at);
            *e = (*e).min(at);
        }
    }
    (sim.finish().unwrap_or_else(|e| panic!("{e}")), reserved)
}

fn mean_wait_s(o: &Outcome) -> f64 {
    let waits: Vec<u64> =
        o.runs.iter().filter_map(|r| r.start.map(|s| s.since(r.submit).as_millis())).collect();
    waits.iter().sum::<u64>() as f64 / waits.len().max(1) as f64 / 1000.0
}

#[test]
fn easy_backfilling_waits_far_less_than_fifo_and_never_delays_a_reserved_start() {
    for load in [1.5, 2.0] {
        let (fifo, none_reserved) = replay("none", load);
        let (easy, reserved) = replay("easy", load);
        for o in [&fifo, &easy] {
            // Every job ran, each started whole once (the simulator checks in every step that a
            // gang's tasks all started together, and the engine that none is partly running).
            assert_eq!(o.summary.runs_completed, 300, "load {load}");
            assert_eq!(o.summary.gangs.expect("gangs").started, 300, "load {load}");
        }
        assert!(none_reserved.is_empty(), "no reservations without backfilling");
        // Over capacity, work waits: the samples see pending demand, and never a preemption.
        assert!(fifo.samples.iter().any(|s| s.pending.cpu > 0), "load {load}: no pending work sampled");
        assert!(fifo.samples.iter().all(|s| s.preempted == 0));
        let (w_fifo, w_easy) = (mean_wait_s(&fifo), mean_wait_s(&easy));
        assert!(w_easy < 0.5 * w_fifo, "load {load}: EASY mean wait {w_easy:.0} s, FIFO {w_fifo:.0} s");
        // FIFO holds room for the head job; EASY fills it: the machine finishes sooner.
        assert!(easy.summary.simulated_seconds < fifo.summary.simulated_seconds);
        assert!(easy.summary.utilization.cpu > fifo.summary.utilization.cpu);
        // The head job starts no later than any start EASY reserved for it (walltimes are
        // upper bounds of run times: the importer raises any below).
        assert!(reserved.len() >= 5, "load {load}: only {} reservations", reserved.len());
        for (w, at) in &reserved {
            let run = easy.runs.iter().find(|r| r.workflow == *w).expect("run");
            let start = run.start.expect("started");
            assert!(start <= *at, "load {load}: workflow {w} reserved for {at} started at {start}");
        }
    }
}

#[test]
fn a_gang_that_loses_a_task_to_a_node_failure_restarts_whole() {
    let config = SimConfig {
        am: None,
        check_invariants: true,
        // A week per node: on 32 nodes a failure every ~5 h. (At 6 h per node, one every ~11
        // minutes, a job as wide as the machine and longer than that restarts whole for ever.)
        node_failures: Some(NodeFailures {
            mtbf: Duration::from_secs(7 * 86400),
            repair: Duration::from_secs(600),
        }),
        ..SimConfig::default()
    };
    let sim = Simulation::new(hpc("none"), swf_workload(1.0), config).unwrap_or_else(|e| panic!("{e}"));
    let out = sim.finish().unwrap_or_else(|e| panic!("{e}"));
    let gangs = out.summary.gangs.expect("gangs");
    assert!(out.summary.node_failures > 0);
    assert!(gangs.tasks_restarted > 0, "a lost task ends the rest of its gang");
    assert!(gangs.started > 300, "restarted gangs start again, whole");
    assert_eq!(out.summary.runs_completed, 300);
}

// ---- GPU pods end to end -----------------------------------------------------------------

const NODES: &str = "sn,cpu_milli,memory_mib,gpu,model
n0,32000,131072,1,T4
n1,32000,131072,1,T4
n2,32000,131072,4,V100M32
";

/// Pods start in the order of arrival, then name. At t=0 the two half-GPU pods share one T4,
/// the 0.6 takes the other T4, and the 0.5 that arrives with them waits until a T4 has half of
/// it free (t=20: the halves end), although the 0.6's T4 has 0.4 free all along. At t=25 a V100
/// pod arrives: a T4 is free, but it waits for the V100 node (busy until t=50). A failed pod
/// fails its run; a pending pod is not replayed.
const PODS: &str = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
a-half,1000,1024,1,500,T4,LS,Running,0,20,0
b-half,1000,1024,1,500,T4,LS,Running,0,20,0
big-v100,1000,1024,4,1000,V100M32,Burstable,Running,0,50,0
c-six,1000,1024,1,600,T4,BE,Succeeded,0,30,0
d-five,1000,1024,1,500,T4,BE,Succeeded,0,2,0
late-v100,1000,1024,1,1000,V100M32,BE,Running,25,35,25
broken,1000,1024,1,1000,,BE,Failed,100,105,100
never,1000,1024,1,1000,,BE,Pending,0,5,
";

#[test]
fn gpu_pods_share_gpus_keep_to_their_models_and_report_fragmentation() {
    let nodes = import_nodes("nodes.csv", NODES.as_bytes()).expect("reads");
    let mut file = ClusterConfig::from_yaml(
        "gpu.yaml",
        "version: 1\nnodes: [{resources: {cpu: 1000, memory: 1024}}]\nqueues: [{name: default}]\nscheduler: {queue_max_am_share_default: -1}\n",
    )
    .expect("valid")
    .file;
    file.nodes = nodes
        .groups
        .iter()
        .map(|g| weir_model::cluster_file::NodeGroupSpec {
            count: g.count,
            resources: weir_model::PartialResources::from_resources(g.resources),
            label: None,
            gpu_model: g.gpu_model.clone(),
        })
        .collect();
    let cluster = ClusterConfig::from_file("gpu.yaml", file).expect("valid");
    let imported = import(TraceKind::AlibabaGpu2023, "pods.csv", PODS.as_bytes(), &ImportOptions::default())
        .expect("imports");
    assert_eq!(imported.skipped_rows(), 1, "the pending pod");
    let names: Vec<String> = imported.workload.workflows.iter().map(|w| w.name.clone()).collect();
    let config = SimConfig {
        am: None,
        check_invariants: true,
        sample_every: Duration::from_secs(1),
        ..SimConfig::default()
    };
    let out = Simulation::new(cluster, imported.workload, config).expect("sim").finish().expect("runs");
    let run = |n: &str| {
        let w = names.iter().position(|x| x == n).expect("pod") as u32;
        out.runs.iter().find(|r| r.workflow == w).expect("run").clone()
    };
    let at = |n: &str| run(n).start.map(|t| t.as_millis() / 1000);
    // The two halves share one T4 from t=0; the other T4 takes the 0.6; the 0.5 waits.
    assert_eq!((at("a-half"), at("b-half"), at("c-six")), (Some(0), Some(0), Some(0)));
    assert_eq!(at("d-five"), Some(20), "0.6 and 0.5 never share a GPU");
    assert_eq!(at("big-v100"), Some(0));
    assert_eq!(at("late-v100"), Some(50), "the V100 node is busy until t=50s; free T4s do not count");
    assert_eq!(at("broken"), Some(100));
    assert!(run("broken").failed, "a failed pod's run fails");
    let gpus = out.summary.gpus.expect("a GPU cluster reports its GPUs");
    assert_eq!(gpus.gpus, 6.0);
    assert!(gpus.allocated_avg > 0.0 && gpus.idle_avg > 0.0);
    assert!(gpus.fragmented_avg > 0.0, "a half-used T4 is lost to whole-GPU pods");
    let ratio = gpus.fragmentation_ratio_avg.expect("idle GPUs were sampled");
    assert!((0.0..=1.0).contains(&ratio) && gpus.fragmentation_ratio_max.expect("sampled") >= ratio);
    assert_eq!(gpus.tasks_unplaced, 0);
}

#[test]
fn the_container_limit_bounds_what_runs_at_once() {
    let yaml = "version: 1
scheduler: {queue_max_am_share_default: -1}
nodes: [{count: 1, resources: {cpu: 1000000000, memory: 1000000000}}]
queues: [{name: default}]
";
    let cluster = ClusterConfig::from_yaml("huge.yaml", yaml).expect("valid");
    let workload = "version: 1
workflows:
  - name: tiny
    queue: root.default
    jobs: [{name: j, stages: [{name: s, tasks: 20000, resources: {cpu: 1, memory: 1}, duration: {fixed: 1s}}]}]
";
    let workload = Workload::from_yaml("w.yaml", workload, &cluster).expect("valid");
    let config = SimConfig { am: None, check_invariants: false, max_containers: 500, ..SimConfig::default() };
    let mut sim = Simulation::new(cluster, workload, config).expect("sim");
    let mut most = 0u64;
    while sim.step().expect("steps") {
        most = most.max(sim.engine().cluster_used().cpu);
    }
    let out = sim.finish().expect("ends");
    assert_eq!(most, 500, "never more than 500 one-millicore tasks at once");
    assert_eq!(out.summary.tasks_completed, 20_000);
    assert_eq!(out.summary.simulated_seconds, 40.0, "500 at a time, one second each");
}
