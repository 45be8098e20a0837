//! The trace importers on the shared samples (`../shared/traces`) and on hand-written edge cases.

use std::path::PathBuf;

use weir_model::{Arrival, Distribution, Duration, QueuePath, Time};
use weir_sim::import::{import, ImportOptions, Imported, TraceKind};

fn shared(path: &str) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces").join(path);
    std::fs::read(&p).unwrap_or_else(|e| {
        panic!("the shared trace samples belong beside the repository: {}: {e}", p.display())
    })
}

fn run(kind: TraceKind, text: &str, options: &ImportOptions) -> Imported {
    import(kind, "t", text.as_bytes(), options).expect("imports")
}

fn skipped(i: &Imported, reason: &str) -> u64 {
    i.skipped.get(reason).map_or(0, |s| s.count)
}

#[test]
fn alibaba_sample_keeps_every_job_and_counts_what_it_skips() {
    let data = shared("alibaba-2018-dag/selected_DAGs.csv");
    let got = import(TraceKind::Alibaba2018, "selected_DAGs.csv", &data[..], &ImportOptions::default())
        .expect("imports");
    assert_eq!(got.rows, 55_874);
    assert_eq!(got.workload.workflows.len(), 2_120);
    // The 192 Waiting rows lack instance_num (and resources); 162 Running rows lack resources.
    assert_eq!(skipped(&got, "missing or bad instance_num"), 192);
    assert_eq!(skipped(&got, "missing or bad plan_cpu or plan_mem"), 162);
    let kept_rows: usize = got.workload.workflows.iter().map(|w| w.jobs[0].stages.len()).sum();
    assert_eq!(kept_rows as u64 + got.skipped_rows(), 55_874);
    let instances: u64 =
        got.workload.workflows.iter().flat_map(|w| &w.jobs[0].stages).map(|s| u64::from(s.tasks)).sum();
    assert!((3_000_000..=3_131_376).contains(&instances), "{instances}");
    // Dependencies point backwards: the DAG came out in topological order.
    for w in &got.workload.workflows {
        for (i, s) in w.jobs[0].stages.iter().enumerate() {
            assert!(s.after.iter().all(|&d| d < i), "{}: stage {} depends forward", w.name, s.name);
        }
    }
    // Arrivals are re-based to the first job and sorted.
    let times: Vec<u64> = got.workload.workflows.iter().map(|w| arrival(w)).collect();
    assert_eq!(times[0], 0);
    assert!(times.windows(2).all(|p| p[0] <= p[1]));
}

fn arrival(w: &weir_model::Workflow) -> u64 {
    match &w.arrival {
        Arrival::At(t) => t[0].as_millis(),
        other => panic!("trace runs arrive once, got {other:?}"),
    }
}

const ALIBABA: &str = "task_name,instance_num,job_name,task_type,status,start_time,end_time,plan_cpu,plan_mem
R3_1_2,4.0,j_7,1,Terminated,130,190,100.0,0.5
M1,10.0,j_7,1,Terminated,100,120,50.0,0.25
M2,2.0,j_7,1,Terminated,100,125,200.0,1.0
M1,1.0,j_8,1,Terminated,200,200,100.0,0.2
";

#[test]
fn alibaba_rows_become_a_stage_dag_with_resources_and_durations() {
    let got = run(
        TraceKind::Alibaba2018,
        ALIBABA,
        &ImportOptions { machine_memory: 100_000, ..Default::default() },
    );
    assert_eq!(got.rows, 4);
    assert!(got.skipped.is_empty(), "{:?}", got.skipped);
    let w = &got.workload.workflows;
    assert_eq!(w.iter().map(|w| w.name.as_str()).collect::<Vec<_>>(), ["j_7", "j_8"]);
    assert_eq!(arrival(&w[1]), 100_000, "j_8 starts 100 s after j_7");
    let stages = &w[0].jobs[0].stages;
    let names: Vec<&str> = stages.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["M1", "M2", "R3_1_2"]);
    assert_eq!(stages[2].after, vec![0, 1]);
    assert_eq!(stages[0].tasks, 10);
    assert_eq!(stages[0].resources.cpu, 500);
    assert_eq!(stages[0].resources.memory, 250, "0.25% of 100,000 MiB");
    assert_eq!(stages[1].duration, Distribution::Fixed(Duration::from_secs(25)));
    // A zero-length task still takes a second.
    assert_eq!(w[1].jobs[0].stages[0].duration, Distribution::Fixed(Duration::from_secs(1)));
    assert_eq!(w[0].queue, QueuePath::parse("root.default").expect("path"));
}

#[test]
fn alibaba_edge_cases_are_counted_not_fatal() {
    for (text, rows) in [
        ("", 0),
        ("task_name,instance_num,job_name,task_type,status,start_time,end_time,plan_cpu,plan_mem\n", 0),
    ] {
        let got = run(TraceKind::Alibaba2018, text, &ImportOptions::default());
        assert_eq!((got.rows, got.workload.workflows.len(), got.skipped_rows()), (rows, 0, 0));
    }
    let text = "M1,1.0,j_1,1,Terminated,10,20,100.0,0.2
R2_9,1.0,j_1,1,Terminated,20,30,100.0,0.2
R3_3,1.0,j_1,1,Terminated,20,30,100.0,0.2
M1,1.0,j_2,1,Terminated,50,40,100.0,0.2
M1,1.0,j_3,1,Terminated,-5,40,100.0,0.2
R1_2,1.0,j_4,1,Terminated,10,20,100.0,0.2
R2_1,1.0,j_4,1,Terminated,10,20,100.0,0.2
Merge,1.0,j_5,1,Terminated,10,20,100.0,0.2
M1,1.0,j_6,1,Terminated,10,20,100.0,0.2
M1,1.0,j_6,1,Terminated,10,20,100.0,0.2
M1,1.0,j_9,1,Term";
    let got = run(TraceKind::Alibaba2018, text, &ImportOptions::default());
    assert_eq!(got.rows, 11);
    assert_eq!(skipped(&got, "end_time before start_time"), 1);
    assert_eq!(skipped(&got, "negative time"), 1);
    assert_eq!(skipped(&got, "row of a job whose dependencies form a cycle"), 2);
    assert_eq!(skipped(&got, "task name encodes no task id"), 1);
    assert_eq!(skipped(&got, "task id listed twice in one job"), 1);
    assert_eq!(skipped(&got, "fewer than 9 fields (truncated line?)"), 1);
    assert_eq!(got.skipped["fewer than 9 fields (truncated line?)"].first_lines, vec![11]);
    assert_eq!(got.adjusted["dependency on an absent task dropped"].count, 1);
    assert_eq!(got.adjusted["dependency on the task itself dropped"].count, 1);
    let names: Vec<&str> = got.workload.workflows.iter().map(|w| w.name.as_str()).collect();
    assert_eq!(names, ["j_1", "j_6"]);
    assert_eq!(got.workload.workflows[0].jobs[0].stages.len(), 3);
}

const SWF: &str = "; Version: 2.2
; Computer: a made-up machine for this test
;
    1      0   5   100   8  -1  -1   8  200  2048  1  3  7  -1  2  1  -1  -1
    2     60  -1    50  -1  -1  -1   4  100    -1  1  4  7  -1 -1 -1  -1  -1
    3     90  -1    -1   4  -1  -1   4  100    -1  5  4  7  -1  1  1  -1  -1
    4     95  -1    30  -1  -1  -1  -1  100    -1  1  4  7  -1  1  1  -1  -1
    5    100  -1    30   2  -1  512   2  100    -1  1  9  8  -1  1  1  -1  -1
    6    100  -1    30   2
    7    abc  -1    30   2  -1  -1   2  100    -1  1  9  8  -1  1  1  -1  -1
";

#[test]
fn swf_lines_become_jobs_with_queue_mapping() {
    let mut options = ImportOptions::default();
    options.queue_map.insert("queue:2".into(), QueuePath::parse("root.batch.tier3").expect("path"));
    options.queue_map.insert("group:7".into(), QueuePath::parse("root.science").expect("path"));
    options.queue_map.insert("user:9".into(), QueuePath::parse("root.ops.tier1").expect("path"));
    let got = run(TraceKind::Swf, SWF, &options);
    assert_eq!(got.rows, 7);
    assert_eq!(skipped(&got, "missing run time"), 1);
    assert_eq!(skipped(&got, "no processor count (fields 5 and 8 missing)"), 1);
    assert_eq!(skipped(&got, "fewer than 18 fields (truncated line?)"), 1);
    assert_eq!(skipped(&got, "a field is not a number"), 1);
    let w = &got.workload.workflows;
    let names: Vec<&str> = w.iter().map(|w| w.name.as_str()).collect();
    assert_eq!(names, ["swf-1", "swf-2", "swf-5"]);
    // Job 1: queue 2 wins over group 7; the leaf name sets tier 3; 8 one-core tasks of 2 MiB.
    assert_eq!(w[0].queue.as_str(), "root.batch.tier3");
    assert_eq!(w[0].tier, 3);
    let s = &w[0].jobs[0].stages[0];
    assert_eq!((s.tasks, s.resources.cpu, s.resources.memory), (8, 1000, 2));
    assert_eq!(s.duration, Distribution::Fixed(Duration::from_secs(100)));
    // Job 2: requested processors stand in for allocated ones; group 7 maps it.
    assert_eq!(w[1].queue.as_str(), "root.science");
    assert_eq!(w[1].jobs[0].stages[0].tasks, 4);
    assert_eq!(w[1].jobs[0].stages[0].resources.memory, 1024, "the default when no memory is recorded");
    assert_eq!(w[1].user, "user4");
    // Job 5: queue 1 and partition 1 are unmapped; group 8 is too; user 9 maps it.
    assert_eq!(w[2].queue.as_str(), "root.ops.tier1");
    assert_eq!(w[2].tier, 1);
    assert_eq!(arrival(&w[2]), 100_000);
}

#[test]
fn the_sls_samples_import_in_both_formats() {
    let options = ImportOptions::default();
    let native = import(TraceKind::Sls, "inputsls.json", &shared("yarn-sls/inputsls.json")[..], &options)
        .expect("imports");
    assert_eq!(native.rows, 2);
    let names: Vec<&str> = native.workload.workflows.iter().map(|w| w.name.as_str()).collect();
    assert_eq!(names, ["job_1", "job_2"]);
    let map = &native.workload.workflows[0].jobs[0].stages[0];
    assert_eq!(
        (map.name.as_str(), map.tasks, map.resources.memory, map.resources.cpu),
        ("map", 3, 1024, 1000)
    );
    assert_eq!(arrival(&native.workload.workflows[1]), 105_204);

    let dag = import(TraceKind::Sls, "sls_dag.json", &shared("yarn-sls/sls_dag.json")[..], &options)
        .expect("imports");
    assert_eq!(dag.workload.workflows.len(), 2);

    let rumen = import(
        TraceKind::Sls,
        "2jobs2min-rumen-jh.json",
        &shared("yarn-sls/2jobs2min-rumen-jh.json")[..],
        &options,
    )
    .expect("imports");
    assert_eq!(rumen.workload.workflows.len(), 2);
    let stage = &rumen.workload.workflows[0].jobs[0].stages[0];
    assert_eq!((stage.name.as_str(), stage.tasks, stage.resources.memory), ("map", 96, 200));
    assert!(matches!(stage.duration, Distribution::Empirical(_)));

    // syn.json describes how to generate jobs, not jobs: it is skipped, and says why.
    let syn =
        import(TraceKind::Sls, "syn.json", &shared("yarn-sls/syn.json")[..], &options).expect("imports");
    assert_eq!(syn.workload.workflows.len(), 0);
    assert_eq!(skipped(&syn, "not an SLS or Rumen job object"), 1);
}

#[test]
fn sls_edge_cases() {
    let options = ImportOptions::default();
    let got = run(TraceKind::Sls, "", &options);
    assert_eq!((got.rows, got.workload.workflows.len()), (0, 0));
    let text = r#"{"job.id": "a", "job.start.ms": 5, "job.queue.name": "q1", "job.tasks": [
        {"container.start.ms": 10, "container.end.ms": 30, "container.type": "reduce"},
        {"container.start.ms": 10, "container.end.ms": 20, "container.type": "map", "container.memory": 2048, "container.vcores": 2}]}
      {"job.id": "b", "job.tasks": []}
      {"job.id": "c", "job.start.ms": 9, "job.tasks": [{"container.start.ms": 50, "container.end.ms": 40}]}
      {"job.id": "d", "job.start.ms": 9, "job.tasks": [{"#;
    let mut options = ImportOptions::default();
    options.queue_map.insert("q1".into(), QueuePath::parse("root.etl.tier2").expect("path"));
    let got = run(TraceKind::Sls, text, &options);
    assert_eq!(got.rows, 4);
    assert_eq!(skipped(&got, "missing or negative job.start.ms"), 1);
    assert_eq!(skipped(&got, "no task with a usable start and end"), 1);
    assert_eq!(skipped(&got, "truncated JSON object (the rest of the file cannot be read)"), 1);
    let w = &got.workload.workflows;
    assert_eq!(w.len(), 1);
    assert_eq!((w[0].queue.as_str(), w[0].tier), ("root.etl.tier2", 2));
    let stages = &w[0].jobs[0].stages;
    assert_eq!(stages.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["map", "reduce"]);
    assert_eq!(stages[1].after, vec![0]);
    assert_eq!((stages[0].resources.cpu, stages[0].resources.memory), (2000, 2048));
}

#[test]
fn options_retime_scale_and_set_slos() {
    let options =
        ImportOptions { time_scale: 10.0, slo_factor: Some(2.0), load_scale: 2.0, ..Default::default() };
    let got = run(TraceKind::Alibaba2018, ALIBABA, &options);
    let w = &got.workload.workflows;
    assert_eq!(w.len(), 4, "two copies of each job");
    assert_eq!(w.iter().map(|w| w.name.as_str()).collect::<Vec<_>>(), ["j_7", "j_7#2", "j_8", "j_8#2"]);
    assert_eq!(arrival(&w[2]), 10_000, "100 s compressed tenfold");
    // j_7's critical path: M2 (25 s) then R3 (60 s) = 85 s; twice that is the SLO.
    assert_eq!(w[0].slo, Some(Duration::from_secs(170)));
    assert!(matches!(w[0].arrival, Arrival::At(ref t) if t == &vec![Time(0)]));

    let half = ImportOptions { load_scale: 0.0, ..Default::default() };
    assert!(run(TraceKind::Alibaba2018, ALIBABA, &half).workload.workflows.is_empty());

    let bad = ImportOptions { time_scale: 0.0, ..Default::default() };
    let err = import(TraceKind::Alibaba2018, "t", ALIBABA.as_bytes(), &bad).expect_err("refused");
    assert_eq!(err.to_string(), "import option time_scale: 0 is not a positive number");
}

#[test]
fn same_options_same_workload() {
    let data = shared("alibaba-2018-dag/selected_DAGs.csv");
    let options = ImportOptions { seed: 42, load_scale: 0.5, ..Default::default() };
    let a = import(TraceKind::Alibaba2018, "x", &data[..], &options).expect("imports");
    let b = import(TraceKind::Alibaba2018, "x", &data[..], &options).expect("imports");
    assert_eq!(a, b);
    let tiers = |i: &Imported| i.workload.workflows.iter().map(|w| w.tier).collect::<Vec<_>>();
    let c = import(TraceKind::Alibaba2018, "x", &data[..], &ImportOptions { seed: 43, ..options })
        .expect("imports");
    assert_ne!(tiers(&a), tiers(&c));
}
#[test]
fn zz_debug() {
    let data = shared("alibaba-2018-dag/selected_DAGs.csv");
    let got = import(TraceKind::Alibaba2018, "x", &data[..], &ImportOptions::default()).expect("imports");
    eprintln!("{:#?} {:#?}", got.skipped, got.adjusted);
}
