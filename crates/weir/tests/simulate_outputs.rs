//! `weir simulate`'s outputs as a careful user needs them: a failed run never leaves truncated
//! files beside an earlier run's, compressed traces are read directly, and names that would
//! break a CSV are refused.

mod common;

use std::fs;

use common::{text, weir, Scratch};

fn swf_line(id: u64, submit: u64, runtime: u64, procs: u64) -> String {
    format!("{id} {submit} -1 {runtime} {procs} -1 -1 {procs} -1 -1 1 1 1 -1 -1 -1 -1 -1\n")
}

#[test]
fn a_run_that_fails_leaves_the_previous_outputs_whole() {
    let dir = Scratch::new("outputs-atomic");
    let out = dir.0.join("out");
    let out_s = out.display().to_string();
    let keep = dir.0.join("out/notes.txt");
    fs::create_dir_all(&out).expect("mkdir");
    fs::write(&keep, "mine").expect("write");
    let ok: String = (0..50).map(|i| swf_line(i + 1, i * 10, 100, 4)).collect();
    let ok = format!("swf:{}", dir.file("ok.swf", &ok));
    let o = weir(&["simulate", "--trace", &ok, "--out", &out_s]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let before: Vec<(String, Vec<u8>)> =
        ["summary.json", "runs.csv", "jobs.csv", "usage.csv", "pending.csv", "report.html"]
            .iter()
            .map(|f| (f.to_string(), fs::read(out.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"))))
            .collect();
    // A trace whose second job comes 190 years after the first fails mid-run, after usage rows
    // have been written.
    let bad = format!("{}{}", swf_line(1, 0, 100, 4), swf_line(2, 6_000_000_000, 100, 4));
    let bad = format!("swf:{}", dir.file("bad.swf", &bad));
    let o = weir(&["simulate", "--trace", &bad, "--out", &out_s]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("past the 36500 days"), "{}", text(&o.stderr));
    for (f, bytes) in &before {
        assert!(fs::read(out.join(f)).expect("still there") == *bytes, "{f} changed by the failed run");
    }
    assert_eq!(fs::read_to_string(&keep).expect("kept"), "mine", "other files are left alone");
    let leftovers: Vec<_> = fs::read_dir(&dir.0)
        .expect("ls")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("weir-"))
        .collect();
    assert!(leftovers.is_empty(), "staging folders left behind: {leftovers:?}");

    // A successful run with --no-report replaces the files and removes the old report.
    let o = weir(&["simulate", "--trace", &ok, "--out", &out_s, "--seed", "2", "--no-report"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(!out.join("report.html").exists(), "an old report would describe another run");
    assert!(out.join("usage.csv").exists());
    assert_eq!(fs::read_to_string(&keep).expect("kept"), "mine");
}

#[test]
fn a_compressed_trace_is_read_as_it_is() {
    use std::io::Write;
    let dir = Scratch::new("outputs-gz");
    let plain: String = (0..200).map(|i| swf_line(i + 1, i * 7, 60 + i % 50, 1 + i % 8)).collect();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    // Two gzip members, as `cat a.gz b.gz` makes: one stream to the reader.
    let half = plain.len() / 2;
    let cut = plain[..half].rfind('\n').map_or(0, |i| i + 1);
    gz.write_all(&plain.as_bytes()[..cut]).expect("gzip");
    let mut bytes = gz.finish().expect("gzip");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&plain.as_bytes()[cut..]).expect("gzip");
    bytes.extend(gz.finish().expect("gzip"));
    fs::write(dir.0.join("t.swf.gz"), &bytes).expect("write");
    let run = |trace: &str, out: &str| {
        let out = dir.0.join(out).display().to_string();
        let o = weir(&["simulate", "--trace", trace, "--out", &out, "--no-report"]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        (text(&o.stderr), fs::read_to_string(dir.0.join(&out).join("runs.csv")).expect("runs.csv"))
    };
    let (plain_note, plain_runs) = run(&format!("swf:{}", dir.file("t.swf", &plain)), "plain");
    let (gz_note, gz_runs) = run(&format!("swf:{}", dir.0.join("t.swf.gz").display()), "gz");
    assert!(gz_note.contains("200 rows read, 0 skipped"), "{gz_note}");
    assert_eq!(plain_note.replace("t.swf:", "t.swf.gz:").lines().next(), gz_note.lines().next());
    assert_eq!(plain_runs, gz_runs);
    assert_eq!(gz_runs.lines().count(), 201);
}

/// Split one CSV record (RFC 4180: fields with commas, quotes or line breaks are quoted, quotes
/// doubled).
fn fields(record: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut quoted = false;
    let mut chars = record.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                out.last_mut().expect("field").push('"');
            }
            ('"', _) => quoted = !quoted,
            (',', false) => out.push(String::new()),
            (c, _) => out.last_mut().expect("field").push(c),
        }
    }
    out
}

#[test]
fn names_that_would_break_a_csv_are_refused_or_quoted() {
    let dir = Scratch::new("outputs-csv");
    let bad = dir.file(
        "bad.yaml",
        "version: 1\nnodes:\n  - {count: 1, resources: {cpu: 4000, memory: 16g}}\nqueues:\n  - {name: \"a,b\"}\n  - {name: \"say\\\"hi\"}\n",
    );
    let o = weir(&["validate", &bad]);
    let e = text(&o.stderr);
    assert!(!o.status.success());
    assert!(e.contains("`a,b` is not a queue name") && e.contains("usage.csv"), "{e}");
    assert!(e.contains(r#"`say\"hi` is not a queue name"#), "{e}");

    // Workflow and job names may hold commas and quotes: every CSV quotes them, so each row
    // reads back with its header's number of fields, and weir plan reads usage.csv back.
    let cluster = dir.file(
        "c.yaml",
        "version: 1\nnodes:\n  - {count: 2, resources: {cpu: 4000, memory: 16g}}\nqueues:\n  - {name: prod, tier: 1}\n",
    );
    let workload = dir.file(
        "w.yaml",
        "version: 1\nworkflows:\n  - name: 'load,\"nightly\"'\n    queue: root.prod\n    slo: 1h\n    every: 1h\n    jobs:\n      - name: 'x,y'\n        stages:\n          - {name: s, tasks: 3, resources: {cpu: 1000, memory: 1g}, duration: {fixed: 20m}}\n",
    );
    let out = dir.0.join("out").display().to_string();
    let o = weir(&[
        "simulate",
        "--cluster",
        &cluster,
        "--workload",
        &workload,
        "--until",
        "3h10m",
        "--out",
        &out,
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    for f in ["runs.csv", "jobs.csv", "pending.csv", "usage.csv"] {
        let csv = fs::read_to_string(dir.0.join("out").join(f)).expect("csv");
        let mut lines = csv.lines();
        let width = fields(lines.next().expect("header")).len();
        let rows: Vec<Vec<String>> = lines.map(fields).collect();
        assert!(!rows.is_empty(), "{f} has rows");
        for r in &rows {
            assert_eq!(r.len(), width, "{f}: {r:?}");
        }
        if f != "usage.csv" {
            assert_eq!(rows[0][if f == "runs.csv" { 0 } else { 1 }], "load,\"nightly\"", "{f}");
        }
    }
    let plan = dir.0.join("plan").display().to_string();
    let history = dir.0.join("out/usage.csv").display().to_string();
    let o = weir(&["plan", "--cluster", &cluster, "--history", &history, "--out", &plan]);
    assert!(o.status.success(), "weir plan reads weir's usage.csv: {}", text(&o.stderr));
}

/// Σ cpu × (end − start) and the rows of a usage.csv.
fn container_time(csv: &str) -> (u128, usize) {
    let mut sum = 0u128;
    let mut rows = 0;
    for line in csv.lines().skip(1) {
        let f: Vec<u64> = line.split(',').filter_map(|x| x.parse().ok()).collect();
        sum += u128::from(f[3]) * u128::from(f[1] - f[0]);
        rows += 1;
    }
    (sum, rows)
}

#[test]
fn usage_can_be_coarsened_and_progress_shows_in_a_log() {
    let dir = Scratch::new("outputs-resolution");
    let run = |out: &str, extra: &[&str]| {
        let out = dir.0.join(out).display().to_string();
        let mut args = vec!["simulate", "--until", "6h", "--no-report", "--out", &out];
        args.extend_from_slice(extra);
        let o = weir(&args);
        assert!(o.status.success(), "{}", text(&o.stderr));
        (text(&o.stderr), fs::read_to_string(dir.0.join(&out).join("usage.csv")).expect("usage.csv"))
    };
    let (_, exact) = run("exact", &[]);
    let (stderr, coarse) = run("coarse", &["--usage-resolution", "1m", "--progress-every", "0s"]);
    let ((exact_time, exact_rows), (coarse_time, coarse_rows)) =
        (container_time(&exact), container_time(&coarse));
    assert!(coarse_rows * 2 < exact_rows, "{coarse_rows} rows at 1m, {exact_rows} exact");
    // Container time is kept up to rounding (half a millicore per row-millisecond at most).
    let diff = exact_time.abs_diff(coarse_time);
    assert!(diff * 10_000 < exact_time, "exact {exact_time}, coarse {coarse_time}");
    for line in coarse.lines().skip(1) {
        let f: Vec<u64> = line.split(',').filter_map(|x| x.parse().ok()).collect();
        let (start, end) = (f[0], f[1]);
        // Inside one minute, or whole minutes of constant use.
        assert!(
            end - 1 < (start / 60_000 + 1) * 60_000 || (start % 60_000 == 0 && end % 60_000 == 0),
            "{line}"
        );
    }
    // Not on a terminal: progress comes as lines.
    assert!(stderr.contains("simulating: t=") && stderr.contains("of 6h ("), "{stderr}");
    let e = weir(&["simulate", "--usage-resolution", "0s", "--out", &dir.0.join("z").display().to_string()]);
    assert!(text(&e.stderr).contains("--usage-resolution must be positive"), "{}", text(&e.stderr));
}

/// A run of a few steps still shows progress in a log: the clock is read from the first step,
/// not only every 64 steps (a stage of 10^8 tasks replays in ~50 steps of seconds each).
#[test]
fn progress_shows_in_a_log_when_a_run_has_few_steps() {
    let dir = Scratch::new("outputs-few-steps");
    let cluster = dir.0.join("c.yaml");
    let workload = dir.0.join("w.yaml");
    fs::write(
        &cluster,
        "version: 1\nnodes: [{count: 1, resources: {cpu: 4000, memory: 4096}}]\nqueues: [{name: default}]\n",
    )
    .expect("write");
    fs::write(
        &workload,
        "version: 1\nworkflows:\n  - name: w\n    queue: root.default\n    jobs:\n      - name: j\n        \
         stages:\n          - {name: s, tasks: 12, resources: {cpu: 1000, memory: 1g}, duration: {fixed: 1m}}\n",
    )
    .expect("write");
    let out = dir.0.join("out").display().to_string();
    let (c, w) = (cluster.display().to_string(), workload.display().to_string());
    let o = weir(&[
        "simulate",
        "--cluster",
        &c,
        "--workload",
        &w,
        "--am",
        "none",
        "--no-report",
        "--progress-every",
        "0s",
        "--out",
        &out,
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let stderr = text(&o.stderr);
    let lines = stderr.lines().filter(|l| l.starts_with("simulating: t=")).count();
    // Three waves of four tasks: a handful of steps, fewer than 64 (before: no line at all).
    assert!(lines >= 1, "a progress line in a run of a handful of steps: {stderr}");
}
