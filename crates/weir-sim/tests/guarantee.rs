//! A per-job guarantee set by the host between steps (how weir-slo applies an SLO job's
//! allocation): the engine places the job's containers ahead of fair share and, when the
//! cluster is full, preempts for it after the leaf's min-share timeout — in a simulation that
//! otherwise steps only on its own events.

use weir_engine::JobId;
use weir_model::{
    Arrival, ClusterConfig, Distribution, Duration, JobTemplate, QueuePath, Resources, Stage, Time, Workflow,
    Workload,
};
use weir_sim::{SimConfig, Simulation, TaskOutcome, TaskRecord};

/// Eight nodes of one core and 1 GiB (memory is what `fair` shares); `slo` preempts for
/// guarantees after 5 s, victims go 5 s after. No fair-share preemption.
const CLUSTER: &str = "
version: 1
scheduler:
  preemption: {enabled: true, kill_wait: 5s}
nodes:
  - {count: 8, resources: {cpu: 1000, memory: 1g}}
queues:
  - {name: batch}
  - {name: slo, min_share_preemption_timeout: 5s}
";

fn workflow(name: &str, queue: &str, at: u64, tasks: u32, secs: u64) -> Workflow {
    Workflow {
        name: name.into(),
        queue: QueuePath::parse(queue).expect("path"),
        tier: 1,
        slo: None,
        priority: None,
        user: "u".into(),
        arrival: Arrival::At(vec![Time(at * 1000)]),
        jobs: vec![JobTemplate {
            name: "j".into(),
            after: vec![],
            stages: vec![Stage {
                name: "s".into(),
                after: vec![],
                tasks,
                resources: Resources::new(1000, 1024, 0),
                duration: Distribution::Fixed(Duration::from_secs(secs)),
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

/// A batch job fills the cluster with 100 s tasks at 0; the SLO job (4 tasks of 10 s) comes at
/// 1 s. With `guarantee`, the host guarantees it that many cores as soon as it sees it. Returns
/// the SLO tasks' (start s, end s), sorted, and how many batch tasks were preempted.
fn slo_tasks(guarantee: u64) -> (Vec<(u64, u64)>, usize) {
    let cluster = ClusterConfig::from_yaml("c.yaml", CLUSTER).unwrap_or_else(|e| panic!("{e}"));
    let workload = Workload {
        workflows: vec![workflow("batch", "root.batch", 0, 8, 100), workflow("slo", "root.slo", 1, 4, 10)],
    };
    let config = SimConfig { am: None, check_invariants: true, ..SimConfig::default() };
    let mut sim = Simulation::new(cluster, workload, config).unwrap_or_else(|e| panic!("{e}"));
    sim.keep_task_records();
    let mut records: Vec<TaskRecord> = Vec::new();
    let mut set = false;
    while sim.step().unwrap_or_else(|e| panic!("{e}")) {
        if !set && sim.workflow_of(JobId(1)) == Some(1) {
            let done = sim.set_job_guarantee(JobId(1), Resources::new(1000, 1024, 0).times(guarantee));
            assert!(done.unwrap_or_else(|e| panic!("{e}")), "the SLO job is running");
            set = true;
        }
        records.extend(sim.take_task_records());
    }
    assert!(set, "the SLO job was seen");
    // An ended job has no guarantee to set.
    assert!(!sim
        .set_job_guarantee(JobId(1), Resources::new(1000, 1024, 0))
        .unwrap_or_else(|e| panic!("{e}")));
    let mut spans: Vec<(u64, u64)> = records
        .iter()
        .filter(|r| r.workflow == 1 && r.outcome == TaskOutcome::Done)
        .map(|r| (r.start.as_millis() / 1000, r.end.as_millis() / 1000))
        .collect();
    spans.sort();
    let preempted = records.iter().filter(|r| r.workflow == 0 && r.outcome == TaskOutcome::Lost).count();
    (spans, preempted)
}

#[test]
fn a_guaranteed_job_gets_its_cores_by_preemption_after_the_timeout() {
    // No guarantee (and no fair-share preemption configured): the SLO job waits for the batch
    // tasks to end at 100 s.
    let (spans, preempted) = slo_tasks(0);
    assert_eq!(spans, vec![(100, 110); 4]);
    assert_eq!(preempted, 0);
    // Guaranteed 4 cores at 1 s: short of them from 1 s, preemption at 6 s (the 5 s timeout),
    // the victims killed at 11 s (kill_wait), the SLO tasks start on the freed cores at once.
    let (spans, preempted) = slo_tasks(4);
    assert_eq!(spans, vec![(11, 21); 4]);
    assert_eq!(preempted, 4);
}
