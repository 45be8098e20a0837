//! The honest figures of a simulation, worked out by hand on tiny clusters: a job's wait (to its
//! first container), its delay (until it held every container of its first request), its
//! response time and its bounded slowdown, per job (`jobs.csv`) and per run (`runs.csv`), and
//! their summaries.

use weir_model::{
    Arrival, ClusterConfig, Distribution, Duration, JobTemplate, QueuePath, Resources, Stage, Time, Workflow,
    Workload,
};
use weir_sim::{bounded_slowdown, JobStatus, Outcome, SimConfig, Simulation};

/// One 4-core node, one leaf; no AM share, so a job's first container is never held back as
/// its application master (YARN's rule, which the engine follows even when jobs run none).
const CLUSTER: &str = "
version: 1
scheduler: {queue_max_am_share_default: -1}
nodes:
  - {count: 1, resources: {cpu: 4000, memory: 16g}}
queues:
  - {name: batch}
";

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// A stage of `tasks` one-core tasks of `duration` seconds.
fn stage(tasks: u32, duration: u64) -> Stage {
    Stage {
        name: "s".into(),
        after: vec![],
        tasks,
        resources: Resources::new(1000, 1024, 0),
        duration: Distribution::Fixed(secs(duration)),
        failure_probability: 0.0,
        gang: false,
        walltime: None,
        placement: Default::default(),
        recorded_failure: false,
    }
}

fn job(name: &str, after: Vec<usize>, stage: Stage) -> JobTemplate {
    JobTemplate { name: name.into(), after, stages: vec![stage], gang: false }
}

fn workflow(name: &str, at: u64, jobs: Vec<JobTemplate>) -> Workflow {
    Workflow {
        name: name.into(),
        queue: QueuePath::parse("root.batch").expect("path"),
        tier: 3,
        slo: None,
        priority: None,
        user: name.into(),
        arrival: Arrival::At(vec![Time(at * 1000)]),
        jobs,
    }
}

fn simulate(workflows: Vec<Workflow>) -> Outcome {
    let cluster = ClusterConfig::from_yaml("c.yaml", CLUSTER).unwrap_or_else(|e| panic!("{e}"));
    let config = SimConfig { am: None, check_invariants: true, ..SimConfig::default() };
    let sim = Simulation::new(cluster, Workload { workflows }, config).unwrap_or_else(|e| panic!("{e}"));
    sim.finish().unwrap_or_else(|e| panic!("{e}"))
}

fn csv(write: fn(&mut Vec<u8>, &Outcome) -> std::io::Result<()>, o: &Outcome) -> String {
    let mut out = Vec::new();
    write(&mut out, o).expect("csv");
    String::from_utf8(out).expect("utf-8")
}

fn runs_csv(o: &Outcome) -> String {
    csv(|w, o| weir_sim::write_runs_csv(w, o), o)
}

fn jobs_csv(o: &Outcome) -> String {
    csv(|w, o| weir_sim::write_jobs_csv(w, o), o)
}

#[test]
fn a_job_that_starts_piecemeal_waits_until_its_last_task_starts() {
    // Six one-core tasks of 10 s on one 4-core node: four start at 0, two at 10 s. The first
    // container came at once (wait 0), but the job held all it asked for only at 10 s.
    let out = simulate(vec![workflow("w", 0, vec![job("j", vec![], stage(6, 10))])]);
    let j = &out.job_records[0];
    assert_eq!(j.status, JobStatus::Completed);
    assert_eq!(
        (j.first_start, j.all_started, j.end),
        (Some(Time(0)), Some(Time(10_000)), Some(Time(20_000)))
    );
    // Response 20 s, of which 10 s delay: slowdown 20 / 10 = 2.
    assert_eq!(
        jobs_csv(&out),
        "job,workflow,job_name,tier,queue,submit,first_container,all_granted,end,wait,delay,response,bounded_slowdown,status,containers,cpu,memory,gpu\n\
         0,w,j,3,root.batch,0,0,10000,20000,0,10000,20000,2.0000,completed,6,6000,6144,0\n"
    );
    // The explicit makespan (the last run's end), and nobody left unplaced.
    assert_eq!((out.summary.makespan, out.summary.jobs_never_placed), (Some(20.0), 0));
    let r = &out.runs[0];
    assert_eq!(r.delay, Some(secs(10)));
    assert_eq!(r.bounded_slowdown(), Some(2.0));
    assert_eq!(
        runs_csv(&out).lines().nth(1),
        Some("w,3,root.batch,0,0,20000,,,completed,0,10000,20000,2.0000")
    );
    let f = &out.summary.job_figures;
    assert_eq!(
        (f.completed, f.wait.p50, f.delay.p50, f.response.p50),
        (1, Some(0.0), Some(10.0), Some(20.0))
    );
    assert_eq!(f.bounded_slowdown.mean, Some(2.0));
    let q = out.summary.queues.iter().find(|q| q.queue == "root.batch").expect("batch");
    assert_eq!((q.wait_p99, q.delay_p99, q.response_p99), (Some(0.0), Some(10.0), Some(20.0)));
    let t = &out.summary.tiers["3"];
    assert_eq!((t.wait_p50, t.delay_p50, t.bounded_slowdown_mean), (Some(0.0), Some(10.0), Some(2.0)));
}

#[test]
fn the_slowdown_of_a_short_job_is_bounded_at_ten_seconds() {
    // A blocker holds every core from 0 to 10 s; a 1 s job submitted at 1 s waits 9 s. Its
    // plain slowdown would be 10; bounded by 10 s of run time, it is 1.
    let out = simulate(vec![
        workflow("blocker", 0, vec![job("b", vec![], stage(4, 10))]),
        workflow("short", 1, vec![job("s", vec![], stage(1, 1))]),
    ]);
    let short = out.runs.iter().find(|r| r.workflow == 1).expect("short run");
    assert_eq!((short.delay, short.response()), (Some(secs(9)), Some(secs(10))));
    assert_eq!(short.bounded_slowdown(), Some(1.0));
    // A job that ran its 100 s after waiting 300 s: (300 + 100) / 100.
    assert_eq!(bounded_slowdown(400_000, 300_000), 4.0);
    // Under the bound: (9 + 1) / 10.
    assert_eq!(bounded_slowdown(10_000, 9_000), 1.0);
    assert_eq!(bounded_slowdown(50_000, 45_000), 5.0);
}

#[test]
fn a_runs_delay_counts_the_time_any_of_its_jobs_waited_once() {
    // A blocker fills the node from 0 to 30 s. Run `par` (at 1 s) has two independent jobs of
    // two tasks: both wait until 30 s, together — the run's delay is 29 s, not 58. Run `seq`
    // (at 1 s) has a chain: `x` waits behind the blocker and `par`, `y` follows later.
    let out = simulate(vec![
        workflow("blocker", 0, vec![job("b", vec![], stage(4, 30))]),
        workflow("par", 1, vec![job("x", vec![], stage(2, 10)), job("y", vec![], stage(2, 10))]),
    ]);
    let par = out.runs.iter().find(|r| r.workflow == 1).expect("par");
    let jobs: Vec<_> = out.job_records.iter().filter(|j| j.workflow == 1).collect();
    assert_eq!(jobs.len(), 2);
    for j in &jobs {
        assert_eq!(j.all_started.map(|t| t.since(j.submit)), Some(secs(29)), "{j:?}");
    }
    assert_eq!(par.delay, Some(secs(29)));

    // A chain: `x` waits 29 s behind the blocker, runs 30–40 s; `y` is submitted at 40 s and
    // starts at once. The run's delay is the sum along the chain: 29 s.
    let out = simulate(vec![
        workflow("blocker", 0, vec![job("b", vec![], stage(4, 30))]),
        workflow("seq", 1, vec![job("x", vec![], stage(1, 10)), job("y", vec![0], stage(4, 5))]),
    ]);
    let seq = out.runs.iter().find(|r| r.workflow == 1).expect("seq");
    assert_eq!((seq.start, seq.end, seq.delay), (Some(Time(30_000)), Some(Time(45_000)), Some(secs(29))));
    let y = out.job_records.iter().find(|j| j.workflow == 1 && j.template == 1).expect("y");
    assert_eq!((y.submit, y.all_started), (Time(40_000), Some(Time(40_000))));
    // 44 s response, 29 s of delay: 44 / 15.
    let expected = 44.0 / 15.0;
    assert!((seq.bounded_slowdown().expect("completed") - expected).abs() < 1e-12);
}

#[test]
fn an_application_master_is_part_of_the_first_request() {
    // With a 1-core AM, the 4-core node runs the AM and 3 tasks; the job holds all it asked
    // for (AM + 4 tasks) when the fourth task starts at 10 s.
    let cluster = ClusterConfig::from_yaml("c.yaml", CLUSTER).unwrap_or_else(|e| panic!("{e}"));
    let config =
        SimConfig { am: Some(Resources::new(1000, 1024, 0)), check_invariants: true, ..SimConfig::default() };
    let wf = workflow("w", 0, vec![job("j", vec![], stage(4, 10))]);
    let sim = Simulation::new(cluster, Workload { workflows: vec![wf] }, config).expect("sim");
    let out = sim.finish().expect("finish");
    let j = &out.job_records[0];
    assert_eq!(
        (j.first_start, j.all_started, j.end),
        (Some(Time(0)), Some(Time(10_000)), Some(Time(20_000)))
    );
}

#[test]
fn a_gang_waits_until_it_starts_whole_and_its_delay_says_so() {
    // Two 4-core nodes; a blocker holds four cores from 0 to 30 s. Six one-core tasks of 10 s
    // asked for at 1 s: as a plain stage, four start at once (wait 0) and the other two when
    // those end at 11 s (delay 10 s); as a gang, all six start together at 30 s (wait and
    // delay 29 s).
    let two_nodes = CLUSTER.replace("count: 1", "count: 2");
    let run = |gang: bool| {
        let cluster = ClusterConfig::from_yaml("c.yaml", &two_nodes).unwrap_or_else(|e| panic!("{e}"));
        let mut six = stage(6, 10);
        six.gang = gang;
        let workflows = vec![
            workflow("blocker", 0, vec![job("b", vec![], stage(4, 30))]),
            workflow("six", 1, vec![job("g", vec![], six)]),
        ];
        let config = SimConfig { am: None, check_invariants: true, ..SimConfig::default() };
        let sim = Simulation::new(cluster, Workload { workflows }, config).unwrap_or_else(|e| panic!("{e}"));
        let out = sim.finish().unwrap_or_else(|e| panic!("{e}"));
        let j = out.job_records.iter().find(|j| j.workflow == 1).cloned().expect("job");
        let since = |t: Option<Time>| t.map(|t| t.since(j.submit).as_millis());
        (since(j.first_start), since(j.all_started))
    };
    assert_eq!(run(false), (Some(0), Some(10_000)), "piecemeal: the first container flatters");
    assert_eq!(run(true), (Some(29_000), Some(29_000)), "a gang: wait and delay agree");
}
