//! Task limits set by the host between steps (how weir-slo applies an SLO job's allocation):
//! the job asks for no more containers than its limit, a raise takes effect at the next step,
//! a cut lets running tasks finish and asks for no more until it is met.

use weir_engine::JobId;
use weir_model::{
    Arrival, ClusterConfig, Distribution, Duration, JobTemplate, QueuePath, Resources, Stage, Time, Workflow,
    Workload,
};
use weir_sim::{SimConfig, Simulation, TaskRecord};

/// Eight one-core nodes.
const CLUSTER: &str = "
version: 1
nodes:
  - {count: 8, resources: {cpu: 1000, memory: 4g}}
queues:
  - {name: batch}
";

/// One job of 8 one-core tasks of 10 s, submitted at 0.
fn sim() -> Simulation {
    let cluster = ClusterConfig::from_yaml("c.yaml", CLUSTER).unwrap_or_else(|e| panic!("{e}"));
    let wf = Workflow {
        name: "slo".into(),
        queue: QueuePath::parse("root.batch").expect("path"),
        tier: 1,
        slo: None,
        priority: None,
        user: "u".into(),
        arrival: Arrival::At(vec![Time::ZERO]),
        jobs: vec![JobTemplate {
            name: "j".into(),
            after: vec![],
            stages: vec![Stage {
                name: "s".into(),
                after: vec![],
                tasks: 8,
                resources: Resources::new(1000, 1024, 0),
                duration: Distribution::Fixed(Duration::from_secs(10)),
                failure_probability: 0.0,
                gang: false,
                walltime: None,
                placement: Default::default(),
                recorded_failure: false,
            }],
            gang: false,
        }],
    };
    let config = SimConfig { am: None, check_invariants: true, ..SimConfig::default() };
    let mut sim =
        Simulation::new(cluster, Workload { workflows: vec![wf] }, config).unwrap_or_else(|e| panic!("{e}"));
    sim.keep_task_records();
    sim
}

/// Run to the end, calling `at(sim)` after each step; the task spans (start s, end s), sorted.
fn run(mut sim: Simulation, mut at: impl FnMut(&mut Simulation)) -> Vec<(u64, u64)> {
    let mut records: Vec<TaskRecord> = Vec::new();
    while sim.step().unwrap_or_else(|e| panic!("{e}")) {
        at(&mut sim);
        records.extend(sim.take_task_records());
    }
    let mut spans: Vec<(u64, u64)> =
        records.iter().map(|r| (r.start.as_millis() / 1000, r.end.as_millis() / 1000)).collect();
    spans.sort();
    spans
}

#[test]
fn a_capped_job_runs_no_more_tasks_than_its_limit() {
    let mut s = sim();
    s.set_workflow_task_limit(0, 2).unwrap_or_else(|e| panic!("{e}"));
    let spans = run(s, |_| {});
    assert_eq!(spans, vec![(0, 10), (0, 10), (10, 20), (10, 20), (20, 30), (20, 30), (30, 40), (30, 40)]);
}

#[test]
fn a_raise_takes_effect_at_the_next_step() {
    let mut s = sim();
    s.set_workflow_task_limit(0, 2).unwrap_or_else(|e| panic!("{e}"));
    let mut raised = false;
    let spans = run(s, |sim| {
        if !raised {
            raised = sim.set_job_task_limit(JobId(0), 6).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(sim.job_task_limit(JobId(0)), Some((6, 2)));
        }
    });
    // Two started at 0; the raise comes after that step, and the next step is at 10 s, when the
    // first two end: six start there, within the new limit.
    assert_eq!(spans, vec![(0, 10), (0, 10), (10, 20), (10, 20), (10, 20), (10, 20), (10, 20), (10, 20)]);
}

#[test]
fn a_cut_lets_running_tasks_finish_and_then_holds() {
    let mut s = sim();
    s.set_workflow_task_limit(0, 4).unwrap_or_else(|e| panic!("{e}"));
    let mut cut = false;
    let spans = run(s, |sim| {
        if !cut {
            cut = sim.set_job_task_limit(JobId(0), 1).unwrap_or_else(|e| panic!("{e}"));
        }
    });
    assert_eq!(spans, vec![(0, 10), (0, 10), (0, 10), (0, 10), (10, 20), (20, 30), (30, 40), (40, 50)]);
}

#[test]
fn an_uncapped_job_is_left_alone() {
    let mut s = sim();
    assert!(!s.set_job_task_limit(JobId(0), 1).unwrap_or_else(|e| panic!("{e}")), "no such capped job");
    let spans = run(s, |_| {});
    assert_eq!(spans, vec![(0, 10); 8]);
}
