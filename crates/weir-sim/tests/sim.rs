//! The simulator on small hand-built clusters and workloads whose outcome can be worked out by
//! hand: timing of stages and jobs, capacity, retries, failures, preemption, node faults,
//! horizons and determinism. Invariant checks run after every step (debug builds).

use weir_model::{
    Arrival, ClusterConfig, Distribution, Duration, JobTemplate, QueuePath, Resources, Stage, Time, Workflow,
    Workload,
};
use weir_sim::{NodeFailures, Outcome, SimConfig, SimError, Simulation, UsageCsv};

const CLUSTER: &str = "
version: 1
scheduler:
  mode: fair
  preemption: {enabled: true, utilization_threshold: 0.8, kill_wait: 5s}
tiers:
  3: {fair_share_preemption_timeout: 60s, fair_share_preemption_threshold: 0.5}
nodes:
  - {count: NODES, resources: {cpu: 4000, memory: 16g}}
queues:
  - {name: gold, tier: 1, weight: 1, fair_share_preemption_timeout: 10s, fair_share_preemption_threshold: 0.9}
  - {name: batch, tier: 3, weight: 1}
";

fn cluster(nodes: u32) -> ClusterConfig {
    ClusterConfig::from_yaml("test.yaml", &CLUSTER.replace("NODES", &nodes.to_string()))
        .unwrap_or_else(|e| panic!("{e}"))
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// A stage of tasks with `cpu` millicores and 4 GiB per core (the nodes' own ratio).
fn stage(name: &str, after: Vec<usize>, tasks: u32, cpu: u64, duration: Distribution) -> Stage {
    Stage {
        name: name.into(),
        after,
        tasks,
        resources: Resources::new(cpu, cpu * 4096 / 1000, 0),
        duration,
        failure_probability: 0.0,
        gang: false,
        walltime: None,
        placement: Default::default(),
        recorded_failure: false,
    }
}

fn job(name: &str, after: Vec<usize>, stages: Vec<Stage>) -> JobTemplate {
    JobTemplate { name: name.into(), after, stages, gang: false }
}

fn workflow(name: &str, queue: &str, tier: u8, at: Vec<u64>, jobs: Vec<JobTemplate>) -> Workflow {
    Workflow {
        name: name.into(),
        queue: QueuePath::parse(queue).expect("path"),
        tier,
        slo: None,
        priority: None,
        user: "u".into(),
        arrival: Arrival::At(at.into_iter().map(|s| Time(s * 1000)).collect()),
        jobs,
    }
}

fn no_am() -> SimConfig {
    SimConfig { am: None, check_invariants: true, ..SimConfig::default() }
}

fn simulate(nodes: u32, workflows: Vec<Workflow>, config: SimConfig) -> Outcome {
    let sim =
        Simulation::new(cluster(nodes), Workload { workflows }, config).unwrap_or_else(|e| panic!("{e}"));
    sim.finish().unwrap_or_else(|e| panic!("{e}"))
}

fn ms(t: Option<Time>) -> Option<u64> {
    t.map(Time::as_millis)
}

#[test]
fn stages_wait_for_their_upstream_stages_and_jobs_for_their_upstream_jobs() {
    let extract = job(
        "extract",
        vec![],
        vec![
            stage("map", vec![], 4, 1000, Distribution::Fixed(secs(10))),
            stage("reduce", vec![0], 1, 1000, Distribution::Fixed(secs(5))),
        ],
    );
    let publish =
        job("publish", vec![0], vec![stage("write", vec![], 1, 1000, Distribution::Fixed(secs(3)))]);
    let mut wf = workflow("daily", "root.gold", 1, vec![100], vec![extract, publish]);
    wf.slo = Some(secs(20));
    let out = simulate(1, vec![wf], no_am());
    // map 100–110 s, reduce 110–115 s, publish 115–118 s.
    assert_eq!(out.runs.len(), 1);
    let r = &out.runs[0];
    assert_eq!((ms(Some(r.submit)), ms(r.start), ms(r.end)), (Some(100_000), Some(100_000), Some(118_000)));
    assert_eq!(r.met, Some(true));
    let s = &out.summary;
    assert_eq!((s.jobs_submitted, s.jobs_completed, s.jobs_failed, s.tasks_completed), (2, 2, 0, 6));
    assert_eq!(s.simulated_seconds, 118.0);
    assert_eq!(s.tiers["1"].slo_met, 1);
    assert_eq!(s.tiers["1"].slo_successful_workflows, 1);
    // One node of 4 cores: 4 busy cores for 10 s, then one for 8 s, over 118 s.
    let expected = (4.0 * 10.0 + 8.0) / (4.0 * 118.0);
    assert!((s.utilization.cpu - expected).abs() < 1e-9, "{}", s.utilization.cpu);
}

#[test]
fn tasks_queue_for_room_and_usage_intervals_follow() {
    // 6 one-core tasks of 10 s on one 4-core node: 4 run at once, 2 wait.
    let wf = workflow(
        "w",
        "root.batch",
        3,
        vec![0],
        vec![job("j", vec![], vec![stage("s", vec![], 6, 1000, Distribution::Fixed(secs(10)))])],
    );
    let out = simulate(1, vec![wf], no_am());
    assert_eq!(ms(out.runs[0].end), Some(20_000));
    let rows: Vec<(u64, u64, u64, u32)> = out
        .usage_rows
        .iter()
        .map(|r| (r.start.as_millis(), r.end.as_millis(), r.usage.cpu, r.running_apps))
        .collect();
    assert_eq!(rows, vec![(0, 10_000, 4000, 1), (10_000, 20_000, 2000, 1)]);
    let mut csv = Vec::new();
    let mut w = UsageCsv::new(&mut csv, &out.cluster).expect("header");
    w.write(&out.usage_rows).expect("rows");
    w.finish().expect("flush");
    assert_eq!(
        String::from_utf8(csv).expect("utf-8"),
        "start,end,queue,cpu,memory,running_apps,gpu\n0,10000,root.batch,4000,16384,1,0\n10000,20000,root.batch,2000,8192,1,0\n"
    );
    let q = out.summary.queues.iter().find(|q| q.queue == "root.batch").expect("batch");
    assert_eq!(q.usage_avg.cpu, 3000.0);
    assert_eq!(q.wait_p50, Some(0.0));
}

#[test]
fn the_application_master_holds_a_container_for_the_whole_job() {
    let wf = workflow(
        "w",
        "root.batch",
        3,
        vec![0],
        vec![job("j", vec![], vec![stage("s", vec![], 4, 1000, Distribution::Fixed(secs(10)))])],
    );
    let config = SimConfig { am: Some(Resources::new(1000, 1024, 0)), ..no_am() };
    let out = simulate(1, vec![wf], config);
    // The AM takes one of the 4 cores: 3 tasks, then 1.
    assert_eq!(ms(out.runs[0].end), Some(20_000));
    assert_eq!(out.usage_rows[0].usage.cpu, 4000);
}

#[test]
fn failed_attempts_are_retried_and_a_task_out_of_attempts_fails_its_run() {
    let mut flaky = stage("s", vec![], 20, 100, Distribution::Fixed(secs(10)));
    flaky.failure_probability = 0.3;
    let wf = workflow("retry", "root.batch", 3, vec![0], vec![job("j", vec![], vec![flaky.clone()])]);
    let out = simulate(1, vec![wf], SimConfig { max_attempts: 100, ..no_am() });
    let s = &out.summary;
    assert_eq!(s.tasks_completed, 20, "every task finishes exactly once");
    assert!(s.task_attempts_failed > 0);
    assert_eq!(s.runs_completed, 1);

    flaky.failure_probability = 0.999;
    let mut wf = workflow("doomed", "root.batch", 3, vec![0], vec![job("j", vec![], vec![flaky])]);
    wf.slo = Some(secs(3600));
    let out = simulate(1, vec![wf], SimConfig { max_attempts: 2, ..no_am() });
    let s = &out.summary;
    assert_eq!((s.jobs_failed, s.runs_failed, s.runs_completed), (1, 1, 0));
    assert!(out.runs[0].failed);
    assert_eq!(out.runs[0].met, Some(false), "a failed run misses its SLO");
}

#[test]
fn a_starved_tier1_job_preempts_batch_work_and_the_batch_work_is_redone() {
    // Batch fills both nodes (8 cores) with 100 s tasks at t=0; gold arrives at t=30 s wanting
    // 4 cores. Gold's fair share is half the cluster; after its 10 s timeout and the 5 s kill
    // wait, batch containers are killed and re-run.
    let batch = workflow(
        "batch",
        "root.batch",
        3,
        vec![0],
        vec![job("b", vec![], vec![stage("s", vec![], 8, 1000, Distribution::Fixed(secs(100)))])],
    );
    let mut gold = workflow(
        "gold",
        "root.gold",
        1,
        vec![30],
        vec![job("g", vec![], vec![stage("s", vec![], 4, 1000, Distribution::Fixed(secs(20)))])],
    );
    gold.slo = Some(secs(60));
    let out = simulate(2, vec![batch, gold], no_am());
    let s = &out.summary;
    assert!(s.preemptions >= 1, "{s:?}");
    assert!(s.wasted_container_seconds > 0.0);
    assert_eq!(s.tasks_completed, 12);
    let gold_run = out.runs.iter().find(|r| r.workflow == 1).expect("gold run");
    assert_eq!(gold_run.met, Some(true), "gold finished at {:?}", gold_run.end);
    let batch_q = s.queues.iter().find(|q| q.queue == "root.batch").expect("batch");
    assert_eq!(batch_q.preempted, s.preemptions);
    let gold_q = s.queues.iter().find(|q| q.queue == "root.gold").expect("gold");
    assert_eq!(gold_q.preempted, 0, "nothing is taken from tier 1");

    // Without preemption gold waits for the batch tasks to end at 100 s and misses its SLO.
    let mut c = cluster(2);
    c.scheduler.preemption.enabled = false;
    let batch = out.workload.workflows[0].clone();
    let gold = out.workload.workflows[1].clone();
    let sim = Simulation::new(c, Workload { workflows: vec![batch, gold] }, no_am()).expect("sim");
    let out = sim.finish().expect("runs");
    let gold_run = out.runs.iter().find(|r| r.workflow == 1).expect("gold run");
    assert_eq!((ms(gold_run.end), gold_run.met), (Some(120_000), Some(false)));
}

#[test]
fn node_failures_lose_containers_but_every_task_still_finishes_once() {
    let wf = workflow(
        "w",
        "root.batch",
        3,
        vec![0, 600, 1200],
        vec![job(
            "j",
            vec![],
            vec![stage("s", vec![], 30, 500, Distribution::Exponential { mean: secs(120) })],
        )],
    );
    let config = SimConfig {
        node_failures: Some(NodeFailures { mtbf: secs(1800), repair: secs(300) }),
        seed: 5,
        ..no_am()
    };
    let out = simulate(4, vec![wf], config);
    let s = &out.summary;
    assert!(s.node_failures > 0, "{s:?}");
    assert!(s.containers_lost_to_node_failures > 0, "{s:?}");
    assert_eq!(s.tasks_completed, 90);
    assert_eq!(s.runs_completed, 3);
}

#[test]
fn recurring_runs_stop_at_the_horizon_and_late_runs_are_judged_by_their_deadline() {
    let mut wf = workflow(
        "hourly",
        "root.gold",
        1,
        vec![],
        vec![job("j", vec![], vec![stage("s", vec![], 1, 1000, Distribution::Fixed(secs(1800)))])],
    );
    wf.arrival = Arrival::Every { start: Time(0), every: secs(3600) };
    wf.slo = Some(secs(2400));
    // Runs at 0 h … 4 h; the one at 4 h is still running at the 4.5 h horizon, before its
    // deadline: unfinished, left out of the SLO figures.
    let out = simulate(1, vec![wf.clone()], SimConfig { until: Some(Time(16_200_000)), ..no_am() });
    let s = &out.summary;
    assert_eq!((s.runs, s.runs_completed, s.runs_unfinished), (5, 4, 1));
    assert_eq!((s.tiers["1"].runs_with_slo, s.tiers["1"].slo_met), (4, 4));
    assert_eq!(s.simulated_seconds, 16_200.0);

    let err =
        Simulation::new(cluster(1), Workload { workflows: vec![wf] }, no_am()).err().expect("unbounded");
    assert!(matches!(err, SimError::Unbounded { .. }), "{err}");
}

#[test]
fn bad_queues_and_oversized_tasks_are_refused_up_front() {
    let wf = workflow(
        "w",
        "root.nope",
        3,
        vec![0],
        vec![job("j", vec![], vec![stage("s", vec![], 1, 1000, Distribution::Fixed(secs(1)))])],
    );
    let err =
        Simulation::new(cluster(1), Workload { workflows: vec![wf.clone()] }, no_am()).err().expect("error");
    assert!(err.to_string().contains("root.nope is not a leaf queue"), "{err}");

    let mut big = wf;
    big.queue = QueuePath::parse("root.batch").expect("path");
    big.jobs[0].stages[0].resources = Resources::new(64_000, 1024, 0);
    let err = Simulation::new(cluster(1), Workload { workflows: vec![big] }, no_am()).err().expect("error");
    assert!(err.to_string().contains("stage s: a task needs"), "{err}");
}

fn random_workload() -> Vec<Workflow> {
    let mut out = Vec::new();
    for (i, q) in ["root.gold", "root.batch", "root.batch"].iter().enumerate() {
        let mut s = stage("m", vec![], 12, 1000, Distribution::LogNormal { mu: 30f64.ln(), sigma: 0.8 });
        s.failure_probability = 0.05;
        let r = stage("r", vec![0], 3, 2000, Distribution::Uniform { min: secs(5), max: secs(50) });
        let mut wf = workflow(
            &format!("w{i}"),
            q,
            if i == 0 { 1 } else { 3 },
            vec![],
            vec![job("j", vec![], vec![s, r])],
        );
        wf.arrival = Arrival::Poisson { start: Time(0), mean_interval: secs(90) };
        wf.slo = Some(secs(300));
        out.push(wf);
    }
    out
}

fn outputs(seed: u64) -> (String, String, Vec<weir_sim::UsageRow>) {
    let config = SimConfig { seed, until: Some(Time(3 * 3_600_000)), ..SimConfig::default() };
    let out = simulate(2, random_workload(), config);
    let mut runs = Vec::new();
    weir_sim::write_runs_csv(&mut runs, &out).expect("runs.csv");
    (out.summary.to_json(), String::from_utf8(runs).expect("utf-8"), out.usage_rows)
}

#[test]
fn the_same_seed_gives_the_same_outputs_and_another_seed_does_not() {
    let a = outputs(11);
    let b = outputs(11);
    assert_eq!(a.0, b.0);
    assert_eq!(a.1, b.1);
    assert_eq!(a.2, b.2);
    let c = outputs(12);
    assert_ne!(a.1, c.1);
    assert!(a.1.lines().count() > 50, "a busy three hours: {}", a.1.lines().count());
}

#[test]
fn stepping_reports_progress_and_usage_rows_can_be_streamed() {
    let config = SimConfig { seed: 3, until: Some(Time(3_600_000)), ..SimConfig::default() };
    let mut sim =
        Simulation::new(cluster(2), Workload { workflows: random_workload() }, config).expect("sim");
    let mut streamed = Vec::new();
    let mut last = Time::ZERO;
    while sim.step().expect("step") {
        let p = sim.progress();
        assert!(p.now >= last, "time never goes back");
        last = p.now;
        streamed.extend(sim.take_usage_rows());
    }
    let out = sim.finish().expect("finish");
    streamed.extend(out.usage_rows.iter().copied());
    assert!(!streamed.is_empty());
    // Rows of one leaf never overlap and are in time order.
    for leaf in ["root.gold", "root.batch"] {
        let ix = out.cluster.find(&QueuePath::parse(leaf).expect("path")).expect("leaf");
        let rows: Vec<_> = streamed.iter().filter(|r| r.queue == ix).collect();
        assert!(rows.windows(2).all(|w| w[0].end <= w[1].start), "{leaf}");
    }
}
