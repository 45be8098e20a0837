//! Absurd and hostile inputs (issue 13): each test feeds the smallest input that showed a
//! problem and checks the answer is a clear error naming the limit, or a bounded result. Speed
//! and memory are measured in BENCHMARKS.md ("Hostile inputs"), never asserted here.

use weir_sim::import::{import, ImportOptions, Imported, TraceKind};

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
