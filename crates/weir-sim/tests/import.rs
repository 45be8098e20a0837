//! The trace importers on the shared samples (`../shared/traces`, beside the repository) and on
//! hand-written edge cases, plus property tests: no input makes an importer panic, and every
//! row read is either kept or counted as skipped.

use std::path::PathBuf;
use std::sync::OnceLock;

use proptest::prelude::*;
use weir_model::{Arrival, Distribution, Duration, QueuePath, Time, Workflow};
use weir_sim::import::{import, ImportOptions, Imported, TraceKind};

fn shared(path: &str) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces").join(path);
    std::fs::read(&p).unwrap_or_else(|e| {
        panic!("the shared trace samples belong beside the repository: {}: {e}", p.display())
    })
}

fn run(kind: TraceKind, text: &str, options: &ImportOptions) -> Imported {
    run_bytes(kind, text.as_bytes(), options)
}

fn run_bytes(kind: TraceKind, bytes: &[u8], options: &ImportOptions) -> Imported {
    // An in-memory reader cannot fail, so no input may turn into an error.
    import(kind, "t", bytes, options).expect("imports")
}

fn skipped(i: &Imported, reason: &str) -> u64 {
    i.skipped.get(reason).map_or(0, |s| s.count)
}

fn adjusted(i: &Imported, reason: &str) -> u64 {
    i.adjusted.get(reason).map_or(0, |s| s.count)
}

fn dropped(i: &Imported, reason: &str) -> u64 {
    i.dropped_jobs.get(reason).map_or(0, |s| s.count)
}

fn names(i: &Imported) -> Vec<&str> {
    i.workload.workflows.iter().map(|w| w.name.as_str()).collect()
}

fn arrival(w: &Workflow) -> u64 {
    match &w.arrival {
        Arrival::At(t) => t[0].as_millis(),
        other => panic!("trace runs arrive once, got {other:?}"),
    }
}

fn stage_count(i: &Imported) -> u64 {
    i.workload.workflows.iter().map(|w| w.jobs[0].stages.len() as u64).sum()
}

/// What every import must give, whatever its input: dependencies point backwards, every stage
/// has tasks, every task a duration of at least a second, and arrivals are sorted from 0.
fn assert_well_formed(i: &Imported) {
    for w in &i.workload.workflows {
        assert_eq!(w.jobs.len(), 1);
        for (n, s) in w.jobs[0].stages.iter().enumerate() {
            assert!(s.after.iter().all(|&d| d < n), "{}: stage {} depends forward", w.name, s.name);
            assert!(s.tasks >= 1, "{}: stage {} has no tasks", w.name, s.name);
            let shortest = match &s.duration {
                Distribution::Fixed(d) => *d,
                Distribution::Empirical(v) => v.iter().copied().min().expect("never empty"),
                other => panic!("importers give fixed or empirical durations, got {other:?}"),
            };
            assert!(shortest >= Duration::from_secs(1), "{}: {shortest:?}", w.name);
        }
    }
    let times: Vec<u64> = i.workload.workflows.iter().map(arrival).collect();
    assert!(times.first().is_none_or(|&t| t == 0), "{times:?}");
    assert!(times.windows(2).all(|p| p[0] <= p[1]));
    let mut seen = std::collections::BTreeSet::new();
    assert!(i.workload.workflows.iter().all(|w| seen.insert(&w.name)), "workflow names are unique");
}

// ---------------------------------------------------------------------------------------------
// Alibaba cluster-trace-v2018

#[test]
fn alibaba_sample_keeps_every_job_with_a_usable_task_and_accounts_for_every_row() {
    let data = shared("alibaba-2018-dag/selected_DAGs.csv");
    let got = import(TraceKind::Alibaba2018, "selected_DAGs.csv", &data[..], &ImportOptions::default())
        .expect("imports");
    assert_well_formed(&got);
    assert_eq!(got.rows, 55_874);
    // 2,120 jobs: one of them (j_1388242) has only Waiting rows and Running rows without an end.
    assert_eq!((got.jobs, got.workload.workflows.len()), (2_119, 2_119));
    assert_eq!(dropped(&got, "no usable row (every row of the job was skipped)"), 1);
    assert!(!names(&got).contains(&"j_1388242"));
    assert_eq!(skipped(&got, "Waiting task (never started)"), 192);
    assert_eq!(skipped(&got, "Running task without an end time"), 56);
    assert_eq!(skipped(&got, "missing or bad plan_cpu or plan_mem"), 157);
    assert_eq!(got.skipped_rows(), 405);
    assert_eq!(stage_count(&got) + got.skipped_rows(), got.rows);
    // Failed and Running rows with a span are kept, and said to be.
    assert_eq!(adjusted(&got, "Failed task replayed as if it had succeeded"), 36);
    assert_eq!(adjusted(&got, "Running task: the span recorded so far replayed as its duration"), 439);
    assert_eq!(adjusted(&got, "zero-length task lengthened to 1 s"), 650);
    // 330 names are cut at 50 characters (two of them on skipped rows). Read naively, their
    // partial last ids close cycles in 13 jobs; read as cut, the sample has no cycle at all.
    assert_eq!(adjusted(&got, "task name cut at 50 characters: dependencies past the cut lost"), 328);
    assert_eq!(adjusted(&got, "dependency that closes a cycle dropped"), 0);
    // Only dependencies on skipped rows are missing.
    assert_eq!(adjusted(&got, "dependency on an absent task dropped"), 39);
    let instances: u64 =
        got.workload.workflows.iter().flat_map(|w| &w.jobs[0].stages).map(|s| u64::from(s.tasks)).sum();
    assert_eq!(instances, 3_130_187);
    // j_1053726 was one of the 13: `M5_…_100_1` is really `M5_…_100_10x`, not "after task 1".
    let j = got.workload.workflows.iter().find(|w| w.name == "j_1053726").expect("kept");
    let stages = &j.jobs[0].stages;
    let m5 = stages.iter().find(|s| s.name.starts_with("M5_")).expect("M5");
    let after: Vec<&str> = m5.after.iter().map(|&i| stages[i].name.as_str()).collect();
    assert_eq!(after.len(), 15, "{after:?}");
    assert!(after.iter().all(|n| !n.starts_with("J7_")), "task 1 is J7's dependency, not M5's");
    // 86,207 s is the first kept start and 690,803 s the last job's.
    assert_eq!(got.workload.workflows.iter().map(arrival).max(), Some((690_803 - 86_207) * 1000));
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
    assert_eq!(names(&got), ["j_7", "j_8"]);
    assert_eq!(arrival(&w[1]), 100_000, "j_8 starts 100 s after j_7");
    let stages = &w[0].jobs[0].stages;
    let names: Vec<&str> = stages.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["M1", "M2", "R3_1_2"]);
    assert_eq!(stages[2].after, vec![0, 1]);
    assert_eq!(stages[0].tasks, 10);
    assert_eq!(stages[0].resources.cpu, 500);
    assert_eq!(stages[0].resources.memory, 250, "0.25% of 100,000 MiB");
    assert_eq!(stages[1].duration, Distribution::Fixed(Duration::from_secs(25)));
    // A zero-length task still takes a second, and the report says so.
    assert_eq!(w[1].jobs[0].stages[0].duration, Distribution::Fixed(Duration::from_secs(1)));
    assert_eq!(got.adjusted["zero-length task lengthened to 1 s"].first_lines, vec![5]);
    assert_eq!(w[0].queue, QueuePath::parse("root.default").expect("path"));
    assert_eq!(w[0].user, "alibaba");
}

/// One data row alone: the reason it is skipped (`None`: kept).
fn alibaba_row(row: &str) -> Option<String> {
    let got = run(TraceKind::Alibaba2018, row, &ImportOptions::default());
    assert_eq!(got.rows, 1, "{row}");
    match got.skipped.keys().next() {
        Some(reason) => Some(reason.clone()),
        None => {
            assert_eq!(got.workload.workflows.len(), 1);
            None
        }
    }
}

#[test]
fn alibaba_single_rows_are_kept_or_skipped_for_a_stated_reason() {
    let ok = "M1,1.0,j_1,1,Terminated,10,20,100.0,0.2";
    for (row, reason) in [
        (ok, None),
        ("M1,1.0,j_1,1,Failed,10,20,100.0,0.2", None),
        ("M1,1.0,j_1,1,Running,10,20,100.0,0.2", None),
        ("task_LTg0MTUwNTA5Mjg4MzU1NjcyNQ==,3.0,j_1,1,Terminated,10,20,100.0,0.2", None),
        ("\"M1\",\"1\",\"j_1\",1,Terminated,10.0,20.0,100,0.2\r", None),
        ("M1,1.0,j_1,1,Term", Some("fewer than 9 fields (truncated line?)")),
        ("M1,1.0,j_1,1,Terminated,10,20,100.0,0.2,extra", Some("more than 9 fields")),
        ("M1,1.0,,1,Terminated,10,20,100.0,0.2", Some("missing job_name")),
        ("R2_1,,j_1,1,Waiting,0,0,,", Some("Waiting task (never started)")),
        ("M1,4.0,j_1,1,Running,89600,0,100.0,0.3", Some("Running task without an end time")),
        ("Merge,1.0,j_1,1,Terminated,10,20,100.0,0.2", Some("task name encodes no task id")),
        ("task_,1.0,j_1,1,Terminated,10,20,100.0,0.2", Some("task name encodes no task id")),
        ("M1_,1.0,j_1,1,Terminated,10,20,100.0,0.2", Some("task name encodes no task id")),
        ("M1,0.0,j_1,1,Terminated,10,20,100.0,0.2", Some("missing or bad instance_num")),
        ("M1,1.5,j_1,1,Terminated,10,20,100.0,0.2", Some("missing or bad instance_num")),
        ("M1,1e12,j_1,1,Terminated,10,20,100.0,0.2", Some("missing or bad instance_num")),
        ("M1,1.0,j_1,1,Terminated,ten,20,100.0,0.2", Some("missing or bad start_time or end_time")),
        ("M1,1.0,j_1,1,Terminated,-5,40,100.0,0.2", Some("negative time")),
        ("M1,1.0,j_1,1,Terminated,10,99999999999,100.0,0.2", Some("time beyond 200 years (absurd)")),
        ("M1,1.0,j_1,1,Terminated,50,40,100.0,0.2", Some("end_time before start_time")),
        ("M1,1.0,j_1,1,Terminated,0,40000000,100.0,0.2", Some("task longer than a year (absurd)")),
        ("M1,1.0,j_1,1,Terminated,10,20,,", Some("missing or bad plan_cpu or plan_mem")),
        ("M1,1.0,j_1,1,Terminated,10,20,NaN,0.2", Some("missing or bad plan_cpu or plan_mem")),
        ("M1,1.0,j_1,1,Terminated,10,20,100.0,250", Some("plan_cpu or plan_mem out of range")),
    ] {
        assert_eq!(alibaba_row(row).as_deref(), reason, "{row}");
    }
    assert_eq!(alibaba_row(&format!("{ok}\n")), None);
}

#[test]
fn alibaba_edge_cases_are_counted_not_fatal() {
    for text in [
        "",
        "\n\n",
        "task_name,instance_num,job_name,task_type,status,start_time,end_time,plan_cpu,plan_mem\n",
    ] {
        let got = run(TraceKind::Alibaba2018, text, &ImportOptions::default());
        assert_eq!((got.rows, got.workload.workflows.len(), got.skipped_rows()), (0, 0, 0), "{text:?}");
    }
    let text = "M1,1.0,j_1,1,Terminated,10,20,100.0,0.2
R2_9,1.0,j_1,1,Terminated,20,30,100.0,0.2
R3_3,1.0,j_1,1,Terminated,20,30,100.0,0.2
M1,1.0,j_2,1,Terminated,50,40,100.0,0.2
M1,1.0,j_3,1,Terminated,-5,40,100.0,0.2
R1_2,1.0,j_4,1,Terminated,10,20,100.0,0.2
R2_1,1.0,j_4,1,Terminated,12,20,100.0,0.2
Merge,1.0,j_5,1,Terminated,10,20,100.0,0.2
M1,1.0,j_6,1,Terminated,10,20,100.0,0.2
M1,1.0,j_6,1,Terminated,10,20,100.0,0.2
M1,1.0,j_9,1,Term";
    let got = run(TraceKind::Alibaba2018, text, &ImportOptions::default());
    assert_well_formed(&got);
    assert_eq!(got.rows, 11);
    assert_eq!(skipped(&got, "end_time before start_time"), 1);
    assert_eq!(skipped(&got, "negative time"), 1);
    assert_eq!(skipped(&got, "task name encodes no task id"), 1);
    assert_eq!(skipped(&got, "task id listed twice in one job"), 1);
    assert_eq!(got.skipped["task id listed twice in one job"].first_lines, vec![10]);
    assert_eq!(skipped(&got, "fewer than 9 fields (truncated line?)"), 1);
    assert_eq!(got.skipped["fewer than 9 fields (truncated line?)"].first_lines, vec![11]);
    assert_eq!(got.adjusted["dependency on an absent task dropped"].count, 1);
    assert_eq!(got.adjusted["dependency on the task itself dropped"].count, 1);
    // j_2, j_3, j_5 and j_9 had no usable row: each is dropped, and said to be.
    let no_row = &got.dropped_jobs["no usable row (every row of the job was skipped)"];
    assert_eq!((no_row.count, no_row.first_lines.clone()), (4, vec![4, 5, 8, 11]));
    // The cycle 1 ↔ 2 in j_4 loses the edge of the task that started first (task 1, at 10 s):
    // the job is kept and task 2 runs after task 1.
    assert_eq!(got.adjusted["dependency that closes a cycle dropped"].first_lines, vec![6]);
    assert_eq!(names(&got), ["j_1", "j_4", "j_6"]);
    let j4 = &got.workload.workflows[1].jobs[0].stages;
    assert_eq!(
        j4.iter().map(|s| (s.name.as_str(), s.after.clone())).collect::<Vec<_>>(),
        [("R1_2", vec![]), ("R2_1", vec![0])]
    );
    assert_eq!(got.workload.workflows[0].jobs[0].stages.len(), 3);
    assert_eq!(stage_count(&got) + got.skipped_rows(), got.rows);
}

#[test]
fn alibaba_bad_bytes_and_repeated_headers_are_survived() {
    let header = "task_name,instance_num,job_name,task_type,status,start_time,end_time,plan_cpu,plan_mem\n";
    let mut bytes = header.as_bytes().to_vec();
    bytes.extend_from_slice(b"M1,1.0,j_1,1,Terminated,10,20,100.0,0.2\n");
    bytes.extend_from_slice(b"M2,1.0,j_\xff,1,Terminated,10,20,100.0,0.2\n");
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(b"M1,1.0,j_2,1,Terminated,10,20,100.0,0.2");
    let got = run_bytes(TraceKind::Alibaba2018, &bytes, &ImportOptions::default());
    assert_eq!((got.rows, got.workload.workflows.len()), (3, 2));
    assert_eq!(got.skipped["not valid UTF-8"].first_lines, vec![3]);
}

#[test]
fn the_report_lists_every_reason_with_counts_and_lines() {
    let text =
        "M1,1.0,j_1,1,Terminated,10,10,100.0,0.2\nR2_1,,j_1,1,Waiting,0,0,,\nM1,1.0,j_2,1,Waiting,0,0,,\n";
    let got = run(TraceKind::Alibaba2018, text, &ImportOptions::default());
    assert_eq!(
        got.to_string(),
        "3 rows read, 2 skipped; 1 jobs imported, 1 dropped; 1 workflows
skipped rows:
         2  Waiting task (never started) (lines 2, 3)
dropped jobs:
         1  no usable row (every row of the job was skipped) (lines 3)
kept with changes:
         1  zero-length task lengthened to 1 s (lines 1)
"
    );
}

// ---------------------------------------------------------------------------------------------
// Standard Workload Format

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
    assert_well_formed(&got);
    assert_eq!(got.rows, 7);
    assert_eq!(skipped(&got, "cancelled before it ran (no run time)"), 1);
    assert_eq!(skipped(&got, "no processor count (fields 5 and 8 missing)"), 1);
    assert_eq!(skipped(&got, "fewer than 18 fields (truncated line?)"), 1);
    assert_eq!(skipped(&got, "a field is not a number"), 1);
    assert_eq!(got.workload.workflows.len() as u64 + got.skipped_rows(), got.rows);
    let w = &got.workload.workflows;
    assert_eq!(names(&got), ["swf-1", "swf-2", "swf-5"]);
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
    // Job 5: queue 1 and partition 1 are unmapped; group 8 is too; user 9 maps it. Its used
    // memory (512 KB per processor) rounds up to a MiB.
    assert_eq!(w[2].queue.as_str(), "root.ops.tier1");
    assert_eq!(w[2].tier, 1);
    assert_eq!(w[2].jobs[0].stages[0].resources.memory, 1);
    assert_eq!(arrival(&w[2]), 100_000);
}

#[test]
fn swf_statuses_and_edge_cases() {
    for text in ["", "; only a header\n;\n", "\n   \n"] {
        let got = run(TraceKind::Swf, text, &ImportOptions::default());
        assert_eq!((got.rows, got.workload.workflows.len(), got.skipped_rows()), (0, 0, 0));
    }
    let text = "; status 1 completed, 0 failed, 5 cancelled, 2/3/4 partial executions
 1   0  0  10  2  -1  -1  2  -1  -1  0  1  1  -1  1  -1  -1  -1
 2   5  0  10  2  -1  -1  2  -1  -1  5  1  1  -1  1  -1  -1  -1
 3   5  0   0  2  -1  -1  2  -1  -1  1  1  1  -1  1  -1  -1  -1
 4   6  0  4.5 1  -1  -1  1  -1  -1  1  1  1  -1  1  -1  -1  -1
 5   7  0  10  2  -1  -1  2  -1  -1  1  1  1  -1  1  -1  -1  -1
 5   7  0   4  2  -1  -1  2  -1  -1  2  1  1  -1  1  -1  -1  -1
 5   7  0   6  2  -1  -1  2  -1  -1  3  1  1  -1  1  -1  -1  -1
 6  -3  0  10  2  -1  -1  2  -1  -1  1  1  1  -1  1  -1  -1  -1
 7   8  0 1e12 2  -1  -1  2  -1  -1  1  1  1  -1  1  -1  -1  -1
 8   9  0  10  2  -1  -1  2  -1  -1  1  1  1  -1  1  -1  -1  -1  19
 9   9  0  10  2  -1  -1  2  -1  -1  1  1  1  -1  1  -1  -1  -1
 9   9  0  10  2  -1  -1  2  -1  -1  1  1  1  -1  1  -1  -1  -1
";
    let got = run(TraceKind::Swf, text, &ImportOptions::default());
    assert_well_formed(&got);
    assert_eq!(got.rows, 12);
    assert_eq!(adjusted(&got, "failed job replayed with its recorded run time"), 1);
    assert_eq!(adjusted(&got, "cancelled job replayed with its recorded run time"), 1);
    assert_eq!(got.adjusted["run time under 1 s lengthened to 1 s"].first_lines, vec![4]);
    assert_eq!(skipped(&got, "partial execution of a checkpointed job (its summary line is used)"), 2);
    assert_eq!(skipped(&got, "missing or negative submit time"), 1);
    assert_eq!(skipped(&got, "run time longer than a year (absurd)"), 1);
    assert_eq!(skipped(&got, "more than 18 fields"), 1);
    // Job 9 is listed twice: both run, the second under a new name.
    assert_eq!(names(&got), ["swf-1", "swf-2", "swf-3", "swf-4", "swf-5", "swf-9", "swf-9~2"]);
    assert_eq!(got.adjusted["job name used before: renamed"].first_lines, vec![13]);
    let four = &got.workload.workflows[3].jobs[0].stages[0];
    assert_eq!(
        four.duration,
        Distribution::Fixed(Duration::from_millis(4500)),
        "fractions of a second are kept"
    );
}

// ---------------------------------------------------------------------------------------------
// YARN SLS and Rumen

#[test]
fn the_sls_samples_import_in_both_formats() {
    let options = ImportOptions::default();
    let native = import(TraceKind::Sls, "inputsls.json", &shared("yarn-sls/inputsls.json")[..], &options)
        .expect("imports");
    assert_well_formed(&native);
    assert_eq!((native.rows, native.skipped_rows()), (2, 0));
    assert_eq!(names(&native), ["job_1", "job_2"]);
    let map = &native.workload.workflows[0].jobs[0].stages[0];
    assert_eq!(
        (map.name.as_str(), map.tasks, map.resources.memory, map.resources.cpu),
        ("map", 3, 1024, 1000)
    );
    let ms = Duration::from_millis;
    assert_eq!(map.duration, Distribution::Empirical(vec![ms(14_928), ms(17_043), ms(17_843)].into()));
    assert_eq!(arrival(&native.workload.workflows[1]), 105_204);

    let dag = import(TraceKind::Sls, "sls_dag.json", &shared("yarn-sls/sls_dag.json")[..], &options)
        .expect("imports");
    assert_eq!(dag.workload, native.workload, "request delays are not modelled");

    let rumen = import(
        TraceKind::Sls,
        "2jobs2min-rumen-jh.json",
        &shared("yarn-sls/2jobs2min-rumen-jh.json")[..],
        &options,
    )
    .expect("imports");
    assert_well_formed(&rumen);
    assert_eq!((rumen.rows, rumen.skipped_rows()), (2, 0));
    assert!(rumen.adjusted.is_empty(), "{:?}", rumen.adjusted);
    assert_eq!(names(&rumen), ["job_1369942127770_1205", "job_1369942127770_1206"]);
    let w = &rumen.workload.workflows[1];
    assert_eq!((w.user.as_str(), arrival(w)), ("jenkins", 1_371_222_159_703 - 1_371_222_054_499));
    let stage = &rumen.workload.workflows[0].jobs[0].stages[0];
    assert_eq!((stage.name.as_str(), stage.tasks, stage.resources.memory), ("map", 96, 200));
    assert!(matches!(&stage.duration, Distribution::Empirical(v) if v.len() == 96));

    // syn.json describes how to generate jobs, not jobs: it is skipped, and says why.
    let syn =
        import(TraceKind::Sls, "syn.json", &shared("yarn-sls/syn.json")[..], &options).expect("imports");
    assert_eq!(syn.workload.workflows.len(), 0);
    assert_eq!(skipped(&syn, "SLS synthetic-load spec (SYNTH), not a trace"), 1);
}

#[test]
fn sls_edge_cases() {
    let options = ImportOptions::default();
    for text in ["", "  \n", "[]"] {
        let got = run(TraceKind::Sls, text, &options);
        assert_eq!((got.rows, got.workload.workflows.len(), got.skipped_rows()), (0, 0, 0), "{text:?}");
    }
    let text = r#"{"num.nodes": 3, "num.racks": 1}
{"job.id": "a", "job.start.ms": 5, "job.queue.name": "q1", "job.tasks": [
    {"container.start.ms": 10, "container.end.ms": 3000, "container.type": "reduce"},
    {"container.start.ms": 10, "container.end.ms": 2000, "container.type": "map", "container.memory-mb": 2048, "container.vcores": 2}]}
{"job.id": "b", "job.tasks": []}
{"job.id": "c", "job.start.ms": 9, "job.tasks": [{"container.start.ms": 50, "container.end.ms": 40}]}
{"job.id": "d", "job.start.ms": 9, "job.tasks": [{"duration.ms": 1500, "count": 4},
    {"container.duration.ms": 500, "count": 2, "container.memory": 512}]}
{"job.id": "e", "job.start.ms": 9, "job.tasks": [ }
{"job.id": "f", "job.start.ms": 1009, "job.count": 2, "job.user": "ann", "job.tasks": [{"duration.ms": 5000}]}
17
{"job.id": "g", "job.start.ms": 9, "job.tasks": [{"#;
    let mut options = ImportOptions::default();
    options.queue_map.insert("q1".into(), QueuePath::parse("root.etl.tier2").expect("path"));
    options.queue_map.insert("user:ann".into(), QueuePath::parse("root.ann").expect("path"));
    let got = run(TraceKind::Sls, text, &options);
    assert_well_formed(&got);
    assert_eq!(got.rows, 8, "the cluster description is not a row");
    assert_eq!(skipped(&got, "missing or negative submit time"), 1);
    assert_eq!(skipped(&got, "no task with a usable duration"), 1);
    assert_eq!(got.adjusted["task without a usable duration dropped"].first_lines, vec![6]);
    // The broken record `e` is skipped and reading resumes with `f`.
    assert_eq!(
        got.skipped["malformed JSON record (skipped to the next line starting with `{`)"].first_lines,
        vec![9]
    );
    assert_eq!(got.skipped["not a JSON object"].first_lines, vec![11]);
    assert_eq!(got.skipped["truncated JSON record"].first_lines, vec![12]);
    assert_eq!(names(&got), ["a", "d", "f.1", "f.2"]);
    let w = &got.workload.workflows;
    assert_eq!((w[0].queue.as_str(), w[0].tier), ("root.etl.tier2", 2));
    assert_eq!(w[2].queue.as_str(), "root.ann", "the user's mapping applies when the queue has none");
    let stages = &w[0].jobs[0].stages;
    assert_eq!(stages.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["map", "reduce"]);
    assert_eq!(stages[1].after, vec![0]);
    assert_eq!((stages[0].resources.cpu, stages[0].resources.memory), (2000, 2048));
    // `d`: two sizes of map task make two stages; counts make tasks; 500 ms becomes 1 s.
    let d = &w[1].jobs[0].stages;
    let got_d: Vec<(&str, u32, Distribution)> =
        d.iter().map(|s| (s.name.as_str(), s.tasks, s.duration.clone())).collect();
    assert_eq!(
        got_d,
        [
            ("map@1000m/512Mi", 2, Distribution::Fixed(Duration::from_secs(1))),
            ("map@1000m/1024Mi", 4, Distribution::Fixed(Duration::from_millis(1500))),
        ]
    );
    assert_eq!(adjusted(&got, "task shorter than 1 s lengthened to 1 s"), 2);
}

#[test]
fn rumen_tasks_without_a_successful_attempt_use_their_own_span() {
    let text = r#"{"jobID": "job_1", "submitTime": 1000, "queue": "default", "user": "bo", "jobMapMB": 1536,
 "mapTasks": [
   {"startTime": 1000, "finishTime": 9000, "attempts": [
     {"result": "FAILED", "startTime": 1000, "finishTime": 2000},
     {"result": "SUCCESS", "startTime": 3000, "finishTime": 9000}]},
   {"startTime": 1000, "finishTime": 4000, "attempts": [{"result": "KILLED"}]},
   {"startTime": 1000}],
 "reduceTasks": [{"startTime": 9000, "finishTime": 19000, "attempts": []}]}
[{"jobID": "job_2", "submitTime": 2000, "mapTasks": []}, "nonsense"]
"#;
    let got = run(TraceKind::Sls, text, &ImportOptions::default());
    assert_well_formed(&got);
    assert_eq!(got.rows, 3, "an array's items are records");
    assert_eq!(skipped(&got, "no task with a usable start and finish time"), 1);
    assert_eq!(skipped(&got, "not a JSON object"), 1);
    assert_eq!(adjusted(&got, "task without a successful attempt: its own span used"), 2);
    assert_eq!(adjusted(&got, "task without a usable start and finish dropped"), 1);
    let stages = &got.workload.workflows[0].jobs[0].stages;
    let s = Duration::from_secs;
    assert_eq!(stages[0].duration, Distribution::Empirical(vec![s(3), s(6)].into()));
    assert_eq!((stages[0].resources.memory, stages[1].resources.memory), (1536, 1024));
    assert_eq!((stages[1].name.as_str(), stages[1].after.clone()), ("reduce", vec![0]));
}

// ---------------------------------------------------------------------------------------------
// Options and determinism

#[test]
fn options_retime_scale_and_set_slos() {
    let options =
        ImportOptions { time_scale: 10.0, slo_factor: Some(2.0), load_scale: 2.0, ..Default::default() };
    let got = run(TraceKind::Alibaba2018, ALIBABA, &options);
    let w = &got.workload.workflows;
    assert_eq!(got.jobs, 2);
    assert_eq!(names(&got), ["j_7", "j_7#2", "j_8", "j_8#2"], "two copies of each job");
    assert_eq!(arrival(&w[2]), 10_000, "100 s compressed tenfold");
    // j_7's critical path: M2 (25 s) then R3 (60 s) = 85 s; twice that is the SLO.
    assert_eq!(w[0].slo, Some(Duration::from_secs(170)));
    assert!(matches!(w[0].arrival, Arrival::At(ref t) if t == &vec![Time(0)]));

    let none = ImportOptions { load_scale: 0.0, ..Default::default() };
    assert!(run(TraceKind::Alibaba2018, ALIBABA, &none).workload.workflows.is_empty());

    let mut by_job = ImportOptions::default();
    by_job.queue_map.insert("job:j_8".into(), QueuePath::parse("root.ads.tier1").expect("path"));
    let got = run(TraceKind::Alibaba2018, ALIBABA, &by_job);
    assert_eq!(
        (got.workload.workflows[1].queue.as_str(), got.workload.workflows[1].tier),
        ("root.ads.tier1", 1)
    );

    let bad = ImportOptions { time_scale: 0.0, ..Default::default() };
    let err = import(TraceKind::Alibaba2018, "t", ALIBABA.as_bytes(), &bad).expect_err("refused");
    assert_eq!(err.to_string(), "import option time_scale: 0 is not a positive number");
}

#[test]
fn the_default_tier_mix_is_roughly_10_25_65_and_seeded() {
    let data = shared("alibaba-2018-dag/selected_DAGs.csv");
    let options = ImportOptions { seed: 42, ..Default::default() };
    let a = import(TraceKind::Alibaba2018, "x", &data[..], &options).expect("imports");
    let b = import(TraceKind::Alibaba2018, "x", &data[..], &options).expect("imports");
    assert_eq!(a, b);
    let tiers = |i: &Imported| i.workload.workflows.iter().map(|w| w.tier).collect::<Vec<_>>();
    let mut counts = [0usize; 3];
    for t in tiers(&a) {
        counts[usize::from(t) - 1] += 1;
    }
    // 2,119 jobs: expect about 212 / 530 / 1,377.
    assert!((160..270).contains(&counts[0]) && (450..610).contains(&counts[1]), "{counts:?}");
    let c = import(TraceKind::Alibaba2018, "x", &data[..], &ImportOptions { seed: 43, ..options })
        .expect("imports");
    assert_ne!(tiers(&a), tiers(&c));
    let half = ImportOptions { seed: 7, load_scale: 0.5, ..Default::default() };
    let h1 = import(TraceKind::Alibaba2018, "x", &data[..], &half).expect("imports");
    let h2 = import(TraceKind::Alibaba2018, "x", &data[..], &half).expect("imports");
    assert_eq!(h1, h2);
    assert!((900..1220).contains(&h1.workload.workflows.len()), "{}", h1.workload.workflows.len());
}

// ---------------------------------------------------------------------------------------------
// Property tests: no input panics an importer, and rows are accounted for.

const SWF_SAMPLE: &str = " 1   0  0  10  2  -1  -1  2  -1  -1  1  1  1  -1  1  -1  -1  -1
 2   5  0  10  2  -1  -1  2  -1  -1  0  1  1  -1  1  -1  -1  -1
 3   6  0   0  4  -1  -1  2  -1  2048  1  2  1  -1  1  -1  -1  -1
";

fn sls_sample() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| String::from_utf8_lossy(&shared("yarn-sls/inputsls.json")).into_owned())
}

fn alibaba_sample() -> &'static str {
    // Pieces of the real sample: the header and many small jobs (lines 1–30), Running and
    // Failed rows (640–660), and names cut at 50 characters (3549–3553).
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| {
        let all = shared("alibaba-2018-dag/selected_DAGs.csv");
        let text = String::from_utf8_lossy(&all);
        let lines: Vec<&str> = text.lines().collect();
        [&lines[..30], &lines[639..660], &lines[3548..3553]].concat().join("\n")
    })
}

/// One edit of a text's lines.
#[derive(Clone, Debug)]
enum Mutation {
    Delete(usize),
    Duplicate(usize),
    Swap(usize, usize),
    Truncate(usize, usize),
    Replace(usize, usize, char),
    Insert(usize, Vec<u8>),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let any_char = prop_oneof![
        Just(','),
        Just('_'),
        Just('-'),
        Just('"'),
        Just('{'),
        Just('}'),
        Just('\n'),
        Just(';'),
        any::<char>()
    ];
    prop_oneof![
        any::<usize>().prop_map(Mutation::Delete),
        any::<usize>().prop_map(Mutation::Duplicate),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::Swap(a, b)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::Truncate(a, b)),
        (any::<usize>(), any::<usize>(), any_char).prop_map(|(a, b, c)| Mutation::Replace(a, b, c)),
        (any::<usize>(), proptest::collection::vec(any::<u8>(), 0..40))
            .prop_map(|(a, b)| Mutation::Insert(a, b)),
    ]
}

fn mutate(text: &str, edits: &[Mutation]) -> Vec<u8> {
    let mut lines: Vec<Vec<u8>> = text.lines().map(|l| l.as_bytes().to_vec()).collect();
    for edit in edits {
        if lines.is_empty() {
            lines.push(Vec::new());
        }
        let n = lines.len();
        match edit {
            Mutation::Delete(i) => {
                lines.remove(i % n);
            }
            Mutation::Duplicate(i) => {
                let l = lines[i % n].clone();
                lines.insert(i % n, l);
            }
            Mutation::Swap(a, b) => lines.swap(a % n, b % n),
            Mutation::Truncate(i, at) => {
                let l = &mut lines[i % n];
                let keep = at % (l.len() + 1);
                l.truncate(keep);
            }
            Mutation::Replace(i, at, c) => {
                let l = &mut lines[i % n];
                if !l.is_empty() {
                    let at = at % l.len();
                    let mut buf = [0u8; 4];
                    l.splice(at..=at, c.encode_utf8(&mut buf).bytes());
                }
            }
            Mutation::Insert(i, bytes) => lines.insert(i % (n + 1), bytes.clone()),
        }
    }
    lines.join(&b"\n"[..])
}

/// Whatever the input: no panic, no error, a well-formed workload, and the row accounting of
/// each format holds.
fn check_any(kind: TraceKind, bytes: &[u8]) {
    let got = run_bytes(kind, bytes, &ImportOptions::default());
    assert_well_formed(&got);
    assert_eq!(got.workload.workflows.len() as u64, got.jobs);
    assert!(got.skipped_rows() <= got.rows);
    match kind {
        TraceKind::Alibaba2018 => assert_eq!(stage_count(&got) + got.skipped_rows(), got.rows),
        TraceKind::Swf | TraceKind::AlibabaGpu2023 | TraceKind::Swim => {
            assert_eq!(got.jobs + got.skipped_rows(), got.rows)
        }
        // A kept record is at least one job, at most 10,000 (`job.count`).
        TraceKind::Sls => {
            let kept = got.rows - got.skipped_rows();
            assert!(kept <= got.jobs && got.jobs <= kept * 10_000, "{kept} records, {} jobs", got.jobs);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic_any_importer(bytes in proptest::collection::vec(any::<u8>(), 0..2000)) {
        for kind in TraceKind::ALL {
            check_any(kind, &bytes);
        }
    }

    #[test]
    fn mutated_alibaba_lines_are_counted_not_fatal(edits in proptest::collection::vec(mutation(), 1..8)) {
        check_any(TraceKind::Alibaba2018, &mutate(alibaba_sample(), &edits));
    }

    #[test]
    fn mutated_swf_lines_are_counted_not_fatal(edits in proptest::collection::vec(mutation(), 1..8)) {
        check_any(TraceKind::Swf, &mutate(SWF_SAMPLE, &edits));
    }

    #[test]
    fn mutated_sls_lines_are_counted_not_fatal(edits in proptest::collection::vec(mutation(), 1..8)) {
        check_any(TraceKind::Sls, &mutate(sls_sample(), &edits));
    }
}
