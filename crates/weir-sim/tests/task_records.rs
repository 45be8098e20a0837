//! Task records (`tasks.csv`, and `Simulation::take_task_records` for weir-slo): one per task
//! attempt, with when it held its container and how it ended.

use weir_model::{
    Arrival, ClusterConfig, Distribution, Duration, JobTemplate, QueuePath, Resources, Stage, Time, Workflow,
    Workload,
};
use weir_sim::{CsvRecords, SimConfig, Simulation, TaskOutcome, TaskRecord};

/// Two nodes of two cores, one open queue.
const CLUSTER: &str = "
version: 1
nodes:
  - {count: 2, resources: {cpu: 2000, memory: 8g}}
queues:
  - {name: batch}
";

/// One run at 0 of a job with a stage `a` of `tasks` two-core tasks of 10 s, then a stage `b`
/// of one task of 5 s.
fn workload(tasks: u32, failure_probability: f64) -> Workload {
    let stage = |name: &str, after: Vec<usize>, tasks: u32, secs: u64| Stage {
        name: name.into(),
        after,
        tasks,
        resources: Resources::new(2000, 1024, 0),
        duration: Distribution::Fixed(Duration::from_secs(secs)),
        failure_probability,
        gang: false,
        walltime: None,
        placement: Default::default(),
        recorded_failure: false,
    };
    Workload {
        workflows: vec![Workflow {
            name: "wf".into(),
            queue: QueuePath::parse("root.batch").expect("path"),
            tier: 1,
            slo: None,
            priority: None,
            user: "u".into(),
            arrival: Arrival::At(vec![Time::ZERO]),
            jobs: vec![JobTemplate {
                name: "j".into(),
                after: vec![],
                stages: vec![stage("a", vec![], tasks, 10), stage("b", vec![0], 1, 5)],
                gang: false,
            }],
        }],
    }
}

fn simulate(w: Workload, seed: u64) -> (Vec<TaskRecord>, u64, u64) {
    let cluster = ClusterConfig::from_yaml("c.yaml", CLUSTER).unwrap_or_else(|e| panic!("{e}"));
    let config = SimConfig { seed, am: None, check_invariants: true, ..SimConfig::default() };
    let mut sim = Simulation::new(cluster, w, config).unwrap_or_else(|e| panic!("{e}"));
    sim.keep_task_records();
    let mut records = Vec::new();
    while sim.step().unwrap_or_else(|e| panic!("{e}")) {
        records.extend(sim.take_task_records());
    }
    let out = sim.finish().unwrap_or_else(|e| panic!("{e}"));
    (records, out.summary.tasks_completed, out.summary.task_attempts_failed)
}

#[test]
fn every_attempt_is_recorded_with_its_container_time() {
    // Four 2-core tasks on two 2-core nodes run two at a time: 0–10 s, 10–20 s; then b 20–25 s.
    let (records, completed, _) = simulate(workload(4, 0.0), 1);
    let mut spans: Vec<(u32, u64, u64)> =
        records.iter().map(|r| (r.stage, r.start.as_millis(), r.end.as_millis())).collect();
    spans.sort();
    assert_eq!(
        spans,
        vec![(0, 0, 10_000), (0, 0, 10_000), (0, 10_000, 20_000), (0, 10_000, 20_000), (1, 20_000, 25_000)]
    );
    assert!(records.iter().all(|r| r.outcome == TaskOutcome::Done && r.attempt == 0));
    assert_eq!(completed, 5);
}

#[test]
fn failed_attempts_are_recorded_and_counted_like_the_summary() {
    let (records, completed, failed) = simulate(workload(40, 0.2), 7);
    let done = records.iter().filter(|r| r.outcome == TaskOutcome::Done).count() as u64;
    let fails = records.iter().filter(|r| r.outcome == TaskOutcome::Failed).count() as u64;
    assert!(fails > 0, "a 20% failure rate over 41 tasks fails some attempt");
    assert_eq!((done, fails), (completed, failed));
    // A retried task's later attempt says how many failed before it.
    assert!(records.iter().any(|r| r.outcome == TaskOutcome::Done && r.attempt > 0));
}

#[test]
fn tasks_csv_names_workflow_job_and_stage() {
    let cluster = ClusterConfig::from_yaml("c.yaml", CLUSTER).unwrap_or_else(|e| panic!("{e}"));
    let config = SimConfig { am: None, ..SimConfig::default() };
    let mut sim = Simulation::new(cluster, workload(1, 0.0), config).unwrap_or_else(|e| panic!("{e}"));
    let tasks = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    struct Shared(std::rc::Rc<std::cell::RefCell<Vec<u8>>>);
    impl std::io::Write for Shared {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.borrow_mut().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let sink = CsvRecords::new(Shared(Default::default()), Shared(Default::default()))
        .and_then(|c| c.with_tasks(Shared(tasks.clone())))
        .unwrap_or_else(|e| panic!("{e}"));
    sim.set_record_sink(Box::new(sink));
    sim.finish().unwrap_or_else(|e| panic!("{e}"));
    let text = String::from_utf8(tasks.borrow().clone()).expect("utf-8");
    assert_eq!(
        text,
        "job,workflow,job_name,stage,attempt,start,end,duration,outcome\n\
         0,wf,j,a,0,0,10000,10000,done\n\
         0,wf,j,b,0,10000,15000,5000,done\n"
    );
}
