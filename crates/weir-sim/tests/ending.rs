//! How a simulation ends, and what it says about work left unfinished: every run done, the
//! horizon reached, or no progress possible (application masters holding every container, a
//! queue capped at nothing) — and a horizon far past the workload's end cut short with a note.

use weir_model::{
    Arrival, ClusterConfig, Distribution, Duration, JobTemplate, QueuePath, Resources, Stage, Time, Workflow,
    Workload,
};
use weir_sim::{EndReason, NodeFailures, Outcome, SimConfig, Simulation};

/// Two nodes of two cores; `batch` is open, `capped` may hold nothing. No AM share, so
/// application masters can take every core.
const CLUSTER: &str = "
version: 1
scheduler: {queue_max_am_share_default: -1}
nodes:
  - {count: 2, resources: {cpu: 2000, memory: 8g}}
queues:
  - {name: batch}
  - {name: capped, max: {cpu: 0, memory: 0}}
";

fn cluster() -> ClusterConfig {
    ClusterConfig::from_yaml("c.yaml", CLUSTER).unwrap_or_else(|e| panic!("{e}"))
}

/// A one-run workflow at `at` seconds: one job of `tasks` tasks of `cpu` millicores, 10 s each.
fn workflow(name: &str, queue: &str, at: u64, tasks: u32, cpu: u64) -> Workflow {
    Workflow {
        name: name.into(),
        queue: QueuePath::parse(queue).expect("path"),
        tier: 3,
        slo: None,
        priority: None,
        user: name.into(),
        arrival: Arrival::At(vec![Time(at * 1000)]),
        jobs: vec![JobTemplate {
            name: "j".into(),
            after: vec![],
            stages: vec![Stage {
                name: "s".into(),
                after: vec![],
                tasks,
                resources: Resources::new(cpu, 1024, 0),
                duration: Distribution::Fixed(Duration::from_secs(10)),
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

fn run(workflows: Vec<Workflow>, config: SimConfig) -> Outcome {
    let config = SimConfig { check_invariants: true, ..config };
    let sim = Simulation::new(cluster(), Workload { workflows }, config).unwrap_or_else(|e| panic!("{e}"));
    sim.finish().unwrap_or_else(|e| panic!("{e}"))
}

/// Four jobs whose 1-core AMs fill both nodes; each job's task needs two cores.
fn deadlock() -> Vec<Workflow> {
    (0..4).map(|i| workflow(&format!("w{i}"), "root.batch", 0, 1, 2000)).collect()
}

fn am() -> SimConfig {
    SimConfig { am: Some(Resources::new(1000, 1024, 0)), ..SimConfig::default() }
}

#[test]
fn application_masters_holding_every_core_end_the_run_as_no_progress() {
    let out = run(deadlock(), am());
    let e = &out.summary.ending;
    assert_eq!(e.reason, EndReason::NoProgress);
    assert_eq!((e.runs_unfinished, e.jobs_unfinished), (4, 4));
    assert_eq!(out.summary.simulated_seconds, 0.0, "stuck from the start, not run to a horizon");
    assert!(e.note.contains("every running container (4) is an application master"), "{}", e.note);
    assert_eq!(e.unfinished_by_reason.len(), 1, "{:?}", e.unfinished_by_reason);
    let g = &e.unfinished_by_reason[0];
    assert_eq!(g.jobs, 4);
    assert!(g.reason.starts_with("root.batch: pending because no node has room"), "{}", g.reason);
    assert!(e.screen().contains("unfinished work (no progress possible)"), "{}", e.screen());

    // A horizon does not change the verdict: the stuck cluster stops where it got stuck.
    let out = run(deadlock(), SimConfig { until: Some(Time(86_400_000)), ..am() });
    assert_eq!(out.summary.ending.reason, EndReason::NoProgress);
    assert_eq!(out.summary.simulated_seconds, 0.0);

    // Without AMs the same jobs run one after another and the run completes.
    let out = run(deadlock(), SimConfig { am: None, ..SimConfig::default() });
    assert_eq!(out.summary.ending.reason, EndReason::Completed);
    assert_eq!(out.summary.runs_completed, 4);
    assert!(out.summary.ending.screen().is_empty());
}

#[test]
fn node_faults_do_not_hide_a_stuck_cluster() {
    // Faults keep killing and replacing the AMs, so events never run out; the guard still
    // sees that nothing but faults happens and stops.
    let config = SimConfig {
        node_failures: Some(NodeFailures {
            mtbf: Duration::from_secs(3600),
            repair: Duration::from_secs(60),
        }),
        ..am()
    };
    let out = run(deadlock(), config);
    let s = &out.summary;
    assert_eq!(s.ending.reason, EndReason::NoProgress);
    assert!(s.node_failures > 0, "{s:?}");
    assert_eq!(s.runs_unfinished, 4);
    assert!(s.simulated_seconds < 5.0 * 365.0 * 86_400.0, "{}", s.simulated_seconds);
}

#[test]
fn a_queue_capped_at_nothing_leaves_its_jobs_unfinished_with_the_reason() {
    let out = run(
        vec![workflow("ok", "root.batch", 0, 2, 1000), workflow("never", "root.capped", 0, 1, 1000)],
        SimConfig { am: None, ..SimConfig::default() },
    );
    let s = &out.summary;
    assert_eq!(s.ending.reason, EndReason::NoProgress);
    assert_eq!((s.runs_completed, s.runs_unfinished), (1, 1));
    let g = &s.ending.unfinished_by_reason[0];
    assert!(g.reason.starts_with("root.capped: pending because root.capped is at its max"), "{}", g.reason);
    assert_eq!(g.jobs, 1);
    // The other job ended at 10 s; the stuck one had waited that long.
    assert_eq!(s.simulated_seconds, 10.0);
    assert_eq!(s.ending.longest_unfinished_seconds, Some(10.0));
}

#[test]
fn a_horizon_far_past_the_last_run_is_cut_with_a_note_and_a_real_one_is_kept() {
    let w = || vec![workflow("a", "root.batch", 0, 2, 1000), workflow("b", "root.batch", 5, 2, 1000)];
    let out = run(w(), SimConfig { until: Some(Time(10 * 86_400_000)), am: None, ..SimConfig::default() });
    let e = &out.summary.ending;
    assert_eq!(e.reason, EndReason::Completed);
    assert_eq!(out.summary.simulated_seconds, 15.0);
    assert_eq!(e.horizon_cut_seconds, Some(864_000.0));
    assert!(e.note.contains("long before the horizon --until 10d"), "{}", e.note);
    assert!(e.screen().starts_with("note: every run ended by t=15s"), "{}", e.screen());

    // A horizon inside the workload: reached with a run unfinished.
    let out = run(w(), SimConfig { until: Some(Time(8_000)), am: None, ..SimConfig::default() });
    let e = &out.summary.ending;
    assert_eq!((e.reason, out.summary.simulated_seconds), (EndReason::Horizon, 8.0));
    assert_eq!(e.runs_unfinished, 2);
    assert!(e.screen().contains("horizon reached"), "{}", e.screen());

    // A recurring workflow: the horizon is its window, whatever ends before it.
    let mut hourly = workflow("h", "root.batch", 0, 1, 1000);
    hourly.arrival = Arrival::Every { start: Time(0), every: Duration::from_secs(3600) };
    let out = run(vec![hourly], SimConfig { until: Some(Time(7_200_000)), am: None, ..SimConfig::default() });
    let e = &out.summary.ending;
    assert_eq!((e.reason, e.horizon_cut_seconds), (EndReason::Completed, None));
    assert_eq!(out.summary.simulated_seconds, 7200.0);
}

/// Workflows handed over one at a time, as a streamed trace's reader does.
struct Queued(std::collections::VecDeque<Workflow>);

impl weir_sim::WorkflowSource for Queued {
    fn next_workflow(&mut self) -> Result<Option<Workflow>, weir_sim::SimError> {
        Ok(self.0.pop_front())
    }
}

#[test]
fn the_stall_guard_waits_for_the_reader_and_ends_at_the_last_progress() {
    // A gang of 5 cores on 4 (built directly: the importers skip such gangs) times out every 15
    // minutes for ever; a job in the reader arrives 20 days on. Before issue 18, 1,000 timeouts
    // (10.4 days) ended the replay with that job never read; and a replay that stopped ended
    // 1,000 idle steps after its last progress.
    let mut stuck = workflow("stuck", "root.batch", 0, 5, 1000);
    stuck.jobs[0].stages[0].gang = true;
    let late = workflow("late", "root.batch", 20 * 86_400, 1, 1000);
    let source = Queued(vec![stuck, late].into());
    // (The invariant checks would rightly stop this run: a gang holds room with nothing running.)
    let config = SimConfig { am: None, check_invariants: false, ..SimConfig::default() };
    let sim = Simulation::streaming(cluster(), Box::new(source), config).unwrap_or_else(|e| panic!("{e}"));
    let out = sim.finish().unwrap_or_else(|e| panic!("{e}"));
    let s = &out.summary;
    assert_eq!((s.runs, s.runs_completed, s.runs_unfinished), (2, 1, 1), "{}", s.ending.note);
    assert_eq!(s.ending.reason, EndReason::NoProgress);
    assert!(!s.ending.complete && !s.ending.trace_unread);
    assert!(s.ending.note.starts_with("the replay stopped early"), "{}", s.ending.note);
    // The late job ran (once the next timeout freed the placeholders' room): its end is the last
    // progress, where the replay ends.
    let end = out.runs.iter().filter_map(|r| r.end).max().expect("the late run ended");
    assert!(end.as_millis() > 20 * 86_400_000 && end.as_millis() < 20 * 86_400_000 + 16 * 60_000, "{end}");
    assert_eq!(s.simulated_seconds * 1000.0, end.as_millis() as f64);
}
