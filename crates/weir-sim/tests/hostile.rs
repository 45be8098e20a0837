//! Absurd and hostile inputs (issue 13): each test feeds the smallest input that showed a
//! problem and checks the answer is a clear error naming the limit, or a bounded result. Speed
//! and memory are measured in BENCHMARKS.md ("Hostile inputs"), never asserted here.

use std::sync::Arc;

use weir_model::{ClusterConfig, Distribution, Duration, QueuePath, Time, Workload};
use weir_sim::import::{import, ImportError, ImportOptions, Imported, TraceKind};
use weir_sim::{Outcome, SimConfig, SimError, Simulation, MAX_SAMPLES};

fn run(kind: TraceKind, text: &str, options: &ImportOptions) -> Imported {
    import(kind, "t", text.as_bytes(), options).expect("imports")
}

fn names(i: &Imported) -> Vec<&str> {
    i.workload.workflows.iter().map(|w| w.name.as_str()).collect()
}

fn renamed(i: &Imported) -> u64 {
    i.adjusted.get("job name used before: renamed").map_or(0, |s| s.count)
}

/// 20,000 SWF lines with one job number took 37 s when each rename counted up from `~2`.
#[test]
fn many_swf_jobs_with_one_number_are_renamed_in_order() {
    let n = 20_000;
    let text = "7 0 -1 10 1 -1 -1 -1 -1 -1 1 1 1 -1 1 1 -1 -1\n".repeat(n);
    let got = run(TraceKind::Swf, &text, &ImportOptions::default());
    assert_eq!(got.workload.workflows.len(), n);
    assert_eq!(renamed(&got), n as u64 - 1);
    let want: Vec<String> =
        std::iter::once("swf-7".to_string()).chain((2..=n).map(|k| format!("swf-7~{k}"))).collect();
    assert_eq!(names(&got), want);
}

#[test]
fn repeated_sls_and_rumen_job_ids_are_renamed() {
    let sls = r#"{"job.id": "x", "job.start.ms": 0, "job.tasks": [{"duration.ms": 1000}]}
{"job.id": "x", "job.start.ms": 0, "job.tasks": [{"duration.ms": 1000}]}
{"job.id": "x~2", "job.start.ms": 0, "job.tasks": [{"duration.ms": 1000}]}
{"jobID": "x", "submitTime": 0, "mapTasks": [{"startTime": 0, "finishTime": 2000}]}
{"jobID": "x", "submitTime": 0, "mapTasks": [{"startTime": 0, "finishTime": 2000}]}
"#;
    let got = run(TraceKind::Sls, sls, &ImportOptions::default());
    // Same submit time: name order, then file order, so the four `x` come first and the job
    // really named `x~2` finds its name taken by a rename.
    assert_eq!(names(&got), ["x", "x~2", "x~3", "x~4", "x~2~2"]);
    assert_eq!(renamed(&got), 4);
}

// ---------------------------------------------------------------------------------------------
// Simulated time and recurrence (items 1 and 8)

const CLUSTER: &str = "
version: 1
nodes:
  - {count: 2, resources: {cpu: 4000, memory: 16g}}
queues:
  - {name: default}
";

fn cluster() -> ClusterConfig {
    ClusterConfig::from_yaml("c.yaml", CLUSTER).unwrap_or_else(|e| panic!("{e}"))
}

fn workload(text: &str) -> Workload {
    let text = format!("version: 1\nworkflows:\n{text}");
    Workload::from_yaml("w.yaml", &text, &cluster()).unwrap_or_else(|e| panic!("{e}"))
}

/// One workflow in `root.default` with one task of `duration`, arriving as `when` says.
fn one_task(when: &str, duration: &str) -> Workload {
    workload(&format!(
        "  - name: w\n    queue: root.default\n    {when}\n    jobs:\n      - name: j\n        stages:\n\
         \x20         - {{name: s, tasks: 1, resources: {{cpu: 1000, memory: 1g}}, duration: {{fixed: {duration}}}}}\n"
    ))
}

fn config(until: Option<Duration>) -> SimConfig {
    SimConfig { am: None, until: until.map(|d| Time(d.as_millis())), ..SimConfig::default() }
}

fn days(d: u64) -> Duration {
    Duration::from_secs(d * 86_400)
}

fn simulate(workload: Workload, config: SimConfig) -> Result<Outcome, SimError> {
    Simulation::new(cluster(), workload, config)?.finish()
}

/// `duration: {fixed: 100000d}` passes `weir validate`, and once meant one sample a minute for
/// 274 years (a 10 GB allocation failure). Now the task's end is an error naming it.
#[test]
fn a_task_ending_past_a_century_is_an_error_naming_it() {
    let err = simulate(one_task("at: [0s]", "100000d"), config(None)).map(|_| ()).expect_err("refused");
    let text = err.to_string();
    assert!(matches!(err, SimError::Horizon { at_days: 100_000, limit_days: 36_500, .. }), "{text}");
    assert!(text.contains("the end of a task of workflow w, job j, stage s"), "{text}");
    assert!(text.contains("past the 36500 days (100 years)"), "{text}");
}

/// The 99-byte SWF file of the issue: a second job 190 years after the first.
#[test]
fn a_trace_spanning_190_years_is_an_error_naming_the_job() {
    let swf = "1 0 -1 10 1 -1 -1 -1 -1 -1 1 1 1 -1 1 1 -1 -1\n2 5996160000 -1 10 1 -1 -1 -1 -1 -1 1 1 1 -1 1 1 -1 -1\n";
    let options =
        ImportOptions { queue: QueuePath::parse("root.default").expect("path"), ..Default::default() };
    let imported = run(TraceKind::Swf, swf, &options);
    assert_eq!(imported.workload.workflows.len(), 2);
    let err = simulate(imported.workload, config(None)).map(|_| ()).expect_err("refused");
    assert!(
        matches!(&err, SimError::Horizon { what, at_days: 69_400, .. } if what == "a run of workflow swf-2"),
        "{err}"
    );
}

#[test]
fn a_horizon_past_a_century_is_refused_up_front() {
    let err = Simulation::new(cluster(), one_task("every: 1d", "1s"), config(Some(days(36_501))))
        .map(|_| ())
        .expect_err("refused");
    assert!(matches!(err, SimError::Horizon { at_days: 36_501, .. }), "{err}");
    assert!(err.to_string().starts_with("the horizon (--until) falls at 36501 days"), "{err}");
}

/// Memory no longer grows with simulated time: 90 years with one run at each end keeps at most
/// `MAX_SAMPLES` points, and averages stay exact.
#[test]
fn ninety_years_keep_a_bounded_series_with_exact_averages() {
    let at_end = (90u64 * 365 * 86_400).to_string();
    let out = simulate(one_task(&format!("at: [0s, {at_end}s]"), "1h"), config(None)).expect("simulates");
    assert_eq!(out.summary.runs_completed, 2);
    assert!(out.samples.len() <= MAX_SAMPLES && out.samples.len() > MAX_SAMPLES / 4, "{}", out.samples.len());
    let span = out.summary.simulated_seconds;
    assert_eq!(span, (90.0 * 365.0 * 86_400.0) + 3_600.0);
    // Two hours of one core over the whole span, against 8 cores.
    let want = 2.0 * 3_600.0 / span / 8.0;
    assert!((out.summary.utilization.cpu - want).abs() < 1e-15, "{} vs {want}", out.summary.utilization.cpu);
    // The points are in time order, from the start to the end.
    assert!(out.samples.windows(2).all(|w| w[0].at < w[1].at));
    assert_eq!(out.samples[0].at, Time::ZERO);
    // The sampled fair share of the only leaf is the whole cluster while its runs wait or run,
    // and nothing in between: its average is well below the cluster.
    let share = out.summary.queues[0].fair_share_avg.cpu;
    assert!(share > 0.0 && share < 1.0, "{share}");
}

/// `every: 1s` is allowed, but over a long horizon it is millions of runs: the limit names the
/// workflow and how to raise it, and raising it lets the workload through.
#[test]
fn too_many_runs_are_refused_before_the_first_step() {
    let w = one_task("every: 1s", "1s");
    let err = Simulation::new(cluster(), w.clone(), config(Some(days(30)))).map(|_| ()).expect_err("refused");
    assert!(
        matches!(&err, SimError::TooManyRuns { runs: 2_592_000, limit: 1_000_000, workflow, workflow_runs: 2_592_000 } if workflow == "w"),
        "{err}"
    );
    assert!(err.to_string().contains("or raise the limit (--max-runs)"), "{err}");
    let raised = SimConfig { max_runs: 3_000_000, ..config(Some(days(30))) };
    assert!(Simulation::new(cluster(), w, raised).is_ok());
    // A Poisson stream counts by its mean.
    let p = workload(
        "  - name: p\n    queue: root.default\n    arrivals: {poisson: {mean_interval: 1s}}\n    jobs:\n      - name: j\n        stages:\n\
         \x20         - {name: s, tasks: 1, resources: {cpu: 1000, memory: 1g}, duration: {fixed: 1s}}\n",
    );
    let err = Simulation::new(cluster(), p, config(Some(days(12)))).map(|_| ()).expect_err("refused");
    assert!(matches!(err, SimError::TooManyRuns { runs: 1_036_800, .. }), "{err}");
}

// ---------------------------------------------------------------------------------------------
// Amplification by SLS `job.count` and `--load-scale` (item 5)

/// One SLS record of 85 bytes asking for 10,000 copies of a one-task job.
fn amplifier(i: usize) -> String {
    format!("{{\"job.start.ms\":0,\"job.count\":10000,\"job.tasks\":[{{\"duration.ms\":1000}}],\"job.id\":\"j{i}\"}}\n")
}

#[test]
fn sls_copies_past_the_job_limit_are_an_error_naming_the_limit_and_the_line() {
    let text: String = (0..10).map(amplifier).collect();
    let options = ImportOptions { max_jobs: 25_000, ..ImportOptions::default() };
    let err = import(TraceKind::Sls, "amp.json", text.as_bytes(), &options).map(|_| ()).expect_err("refused");
    assert_eq!(
        err.to_string(),
        "amp.json: the trace asks for more than 25000 jobs (by line 3, counting SLS job.count and \
         --load-scale copies): raise the limit with --max-jobs if that many is meant"
    );
    // Within the limit, every copy is there.
    let three: String = (0..3).map(amplifier).collect();
    let options = ImportOptions { max_jobs: 30_000, ..ImportOptions::default() };
    assert_eq!(run(TraceKind::Sls, &three, &options).workload.workflows.len(), 30_000);
}

#[test]
fn load_scale_copies_count_against_the_job_limit() {
    let text =
        "1 0 -1 10 1 -1 -1 -1 -1 -1 1 1 1 -1 1 1 -1 -1\n2 5 -1 10 1 -1 -1 -1 -1 -1 1 1 1 -1 1 1 -1 -1\n";
    let options = ImportOptions { load_scale: 100.0, max_jobs: 150, ..ImportOptions::default() };
    let err = import(TraceKind::Swf, "x.swf", text.as_bytes(), &options).map(|_| ()).expect_err("refused");
    assert!(matches!(err, ImportError::TooMany { what: "jobs", limit: 150, line: 2, .. }), "{err}");
    let options = ImportOptions { max_jobs: 0, ..ImportOptions::default() };
    assert!(matches!(
        import(TraceKind::Swf, "x.swf", text.as_bytes(), &options),
        Err(ImportError::Option { option: "max_jobs", .. })
    ));
}

/// Copies of a job with many stages count each stage.
#[test]
fn stages_of_copies_count_against_the_stage_limit() {
    // 40 sizes of map task make 40 stages; 100 copies make 4,000.
    let tasks: Vec<String> =
        (1..=40).map(|k| format!("{{\"duration.ms\":1000,\"container.memory\":{k}}}")).collect();
    let text = format!(
        "{{\"job.id\":\"a\",\"job.start.ms\":0,\"job.count\":100,\"job.tasks\":[{}]}}\n",
        tasks.join(",")
    );
    let options = ImportOptions { max_stages: 3_999, ..ImportOptions::default() };
    let err = import(TraceKind::Sls, "s.json", text.as_bytes(), &options).map(|_| ()).expect_err("refused");
    assert_eq!(
        err.to_string(),
        "s.json: the trace asks for more than 3999 stages (by line 1, counting SLS job.count and \
         --load-scale copies): raise the limit with --max-stages if that many is meant"
    );
    let options = ImportOptions { max_stages: 4_000, ..ImportOptions::default() };
    assert_eq!(run(TraceKind::Sls, &text, &options).workload.workflows.len(), 100);
}

/// The copies of a job share its duration samples instead of each holding its own.
#[test]
fn copies_share_their_duration_samples() {
    let tasks: Vec<String> = (1..=500).map(|k| format!("{{\"duration.ms\":{}}}", 1000 + k)).collect();
    let text = format!(
        "{{\"job.id\":\"a\",\"job.start.ms\":0,\"job.count\":3,\"job.tasks\":[{}]}}\n",
        tasks.join(",")
    );
    let options = ImportOptions { load_scale: 2.0, ..ImportOptions::default() };
    let got = run(TraceKind::Sls, &text, &options);
    assert_eq!(got.workload.workflows.len(), 6);
    let samples: Vec<&Arc<[Duration]>> = got
        .workload
        .workflows
        .iter()
        .map(|w| match &w.jobs[0].stages[0].duration {
            Distribution::Empirical(v) => v,
            other => panic!("500 distinct durations are empirical, got {other:?}"),
        })
        .collect();
    assert_eq!(samples[0].len(), 500);
    assert!(samples.iter().all(|s| Arc::ptr_eq(s, samples[0])), "one copy of the samples for all six");
}
