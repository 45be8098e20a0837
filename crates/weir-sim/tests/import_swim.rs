//! The SWIM importer (Facebook MapReduce samples, FB-2009/FB-2010) on lines written by hand in
//! the samples' format — job id, submit (s), inter-arrival gap (s), map input, shuffle and
//! output bytes, tab-separated — and the model that turns bytes into tasks and durations.

use weir_model::{Distribution, Duration};
use weir_sim::import::{import, ImportOptions, SwimModel, TraceKind};

const MIB: u64 = 1 << 20;

fn sample() -> String {
    [
        // 1 GiB in, 3 GiB shuffled, 100 MB out: 8 maps, 3 reduces.
        format!("job0\t0\t0\t{}\t{}\t100000000", 1024 * MIB, 3 * 1024 * MIB),
        // Map-only: 10 MB in, nothing shuffled, 40 MB out.
        "job1\t30\t30\t10000000\t0\t40000000".to_string(),
        // Empty input: one map of the shortest duration.
        "job2\t45\t15\t0\t0\t0".to_string(),
        "job3\t50\t5\tlots\t0\t0".to_string(),
        "job4\t60\t10\t100".to_string(),
        "job5\t70\t10\t-5\t0\t0".to_string(),
    ]
    .join("\n")
        + "\n"
}

fn fixed(d: &Distribution) -> Duration {
    match d {
        Distribution::Fixed(d) => *d,
        other => panic!("a fixed duration, not {other:?}"),
    }
}

#[test]
fn bytes_become_maps_and_reduces_by_the_stated_model() {
    let got =
        import(TraceKind::Swim, "fb.tsv", sample().as_bytes(), &ImportOptions::default()).expect("imports");
    assert_eq!((got.rows, got.jobs), (6, 3));
    let skipped: Vec<&str> = got.skipped.keys().map(String::as_str).collect();
    assert_eq!(
        skipped,
        ["a field is not a number", "a negative time or byte count", "fewer than 6 tab-separated fields"]
    );
    let wf = &got.workload.workflows;
    let job0 = &wf[0].jobs[0];
    assert_eq!(job0.stages.len(), 2);
    let (map, reduce) = (&job0.stages[0], &job0.stages[1]);
    assert_eq!((map.tasks, reduce.tasks), (8, 3));
    assert_eq!(reduce.after, vec![0], "reduces wait for every map");
    // 128 MiB at 50 MB/s; (3 GiB + 100 MB) / 3 at 20 MB/s.
    assert_eq!(fixed(&map.duration), Duration::from_millis(2684), "134,217,728 B at 50 MB/s");
    let reduce_ms = ((3 * 1024 * MIB + 100_000_000) as f64 / 3.0 / 20_000_000.0 * 1000.0).round() as u64;
    assert_eq!(fixed(&reduce.duration), Duration::from_millis(reduce_ms));
    assert_eq!(map.resources, weir_model::Resources::new(1000, 1024, 0));
    // Map-only: one map that also writes the output (50 MB at 50 MB/s).
    let job1 = &wf[1].jobs[0];
    assert_eq!(job1.stages.len(), 1);
    assert_eq!((job1.stages[0].tasks, fixed(&job1.stages[0].duration)), (1, Duration::from_secs(1)));
    // No input: one map, lengthened to the shortest task (counted).
    assert_eq!(wf[2].jobs[0].stages[0].tasks, 1);
    assert!(got.adjusted.keys().any(|k| k == "task under 1 s lengthened to 1 s"), "{:?}", got.adjusted);
    assert!(TraceKind::Swim.has_application_masters(), "a MapReduce job has an AM");
}

#[test]
fn the_model_is_settable() {
    let options = ImportOptions {
        swim: SwimModel { split_bytes: 64 * MIB, reduce_bytes: 512 * MIB, ..SwimModel::default() },
        ..ImportOptions::default()
    };
    let got = import(TraceKind::Swim, "fb.tsv", sample().as_bytes(), &options).expect("imports");
    let job0 = &got.workload.workflows[0].jobs[0];
    assert_eq!((job0.stages[0].tasks, job0.stages[1].tasks), (16, 6));
    let said = SwimModel::default().to_string();
    assert!(said.starts_with("maps = input ÷ 128 MiB (at least 1), reduces = shuffle ÷ 1024 MiB"), "{said}");
}
