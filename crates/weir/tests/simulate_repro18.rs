//! Issue 18's repros (`../shared/repro/sim/`, beside the repository) through `weir simulate`:
//! gang replays that run to the end, a replay that stops early saying so, and EASY backfilling
//! that says when it had nothing to plan with.

mod common;

use std::fs;

use common::{text, weir, workspace, Scratch};
use serde_json::Value;

fn repro(name: &str) -> String {
    workspace().join("../shared/repro/sim").join(name).display().to_string()
}

/// `weir simulate` on a repro cluster and SWF file with extra flags: stdout, stderr, summary.
fn simulate(dir: &Scratch, cluster: &str, trace: &str, extra: &[&str]) -> (String, String, Value) {
    let out = dir.0.join("out").display().to_string();
    let trace = format!("swf:{}", repro(trace));
    let cluster = repro(cluster);
    let mut args = vec!["simulate", "--cluster", &cluster, "--trace", &trace, "--out", &out, "--no-report"];
    args.extend_from_slice(extra);
    let o = weir(&args);
    let (stdout, stderr) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{stderr}");
    let s = fs::read_to_string(dir.0.join("out/summary.json")).expect("summary.json");
    (stdout, stderr, serde_json::from_str(&s).expect("json"))
}

#[test]
fn the_livelock_repro_runs_every_gang_and_says_the_replay_is_whole() {
    let dir = Scratch::new("repro18-livelock");
    let (_, stderr, s) = simulate(&dir, "c4.yaml", "livelock.swf", &[]);
    assert_eq!(s["runs_completed"], 9, "{}", s["ending"]);
    assert_eq!(s["ending"]["reason"], "completed");
    assert_eq!(s["ending"]["complete"], true);
    assert!(!stderr.contains("stopped early"), "{stderr}");
}

#[test]
fn the_nasa_excerpt_completes_at_one_and_a_half_times_the_load() {
    let dir = Scratch::new("repro18-nasa");
    for scale in ["1.1", "1.5", "2"] {
        let (_, _, s) = simulate(&dir, "c128.yaml", "nasa-excerpt.swf", &["--time-scale", scale]);
        assert_eq!(s["runs_completed"], 41, "{scale}x: {}", s["ending"]);
        assert_eq!(s["ending"]["complete"], true, "{scale}x");
    }
}

#[test]
fn easy_backfilling_without_walltimes_warns_and_the_walltime_flags_feed_it() {
    let dir = Scratch::new("repro18-easy");
    // The excerpt's requested times (field 9) are all missing: EASY has nothing to plan with.
    let (_, stderr, inert) =
        simulate(&dir, "c128.yaml", "nasa-excerpt.swf", &["--backfill", "easy", "--time-scale", "2"]);
    assert!(
        stderr.contains("warning: --backfill easy did nothing: 41 of 41 gangs had no walltime"),
        "{stderr}"
    );
    let (_, stderr, exact) = simulate(
        &dir,
        "c128.yaml",
        "nasa-excerpt.swf",
        &["--backfill", "easy", "--time-scale", "2", "--walltime-from", "runtime"],
    );
    assert!(!stderr.contains("--backfill easy"), "{stderr}");
    let (_, stderr, over) = simulate(
        &dir,
        "c128.yaml",
        "nasa-excerpt.swf",
        &["--backfill", "easy", "--time-scale", "2", "--walltime-factor", "3", "--backfill-depth", "1"],
    );
    assert!(!stderr.contains("--backfill easy"), "{stderr}");
    let mean = |s: &Value| s["job_figures"]["wait"]["mean"].as_f64().expect("mean wait");
    // With estimates EASY plans reserved starts and lets jobs start ahead of the head: the mean
    // wait changes (falls, with exact ones) against the inert run.
    assert!(mean(&exact) < mean(&inert), "exact {} inert {}", mean(&exact), mean(&inert));
    assert_ne!(mean(&over), mean(&inert));
    let (_, stderr, conservative) = simulate(
        &dir,
        "c128.yaml",
        "nasa-excerpt.swf",
        &["--backfill", "conservative", "--time-scale", "2", "--walltime-from", "runtime"],
    );
    assert!(!stderr.contains("warning"), "{stderr}");
    // On this excerpt both backfilling modes start the same jobs early; both beat waiting.
    assert!(mean(&conservative) < mean(&inert));
    for s in [&inert, &exact, &over, &conservative] {
        assert_eq!(s["runs_completed"], 41);
    }
}

#[test]
fn the_backfill_flags_are_in_the_help_and_checked() {
    let o = weir(&["simulate", "--help"]);
    let help = text(&o.stdout);
    for flag in ["--backfill-depth", "--walltime-from", "--walltime-factor", "bf_max_job_test"] {
        assert!(help.contains(flag), "{flag} missing from --help");
    }
    let dir = Scratch::new("repro18-flags");
    let out = dir.0.join("out").display().to_string();
    let trace = format!("swf:{}", repro("livelock.swf"));
    for (flag, value, says) in [
        ("--walltime-factor", "0.5", "--walltime-factor 0.5: give a factor of at least 1"),
        ("--walltime-from", "guess", "--walltime-from guess: write trace or runtime"),
        ("--backfill-depth", "0", "--backfill-depth 0: give at least 1"),
    ] {
        let o = weir(&[
            "simulate",
            "--cluster",
            &repro("c4.yaml"),
            "--trace",
            &trace,
            flag,
            value,
            "--out",
            &out,
        ]);
        assert!(!o.status.success());
        assert!(text(&o.stderr).contains(says), "{}", text(&o.stderr));
    }
}

#[test]
fn a_swim_sample_replays_with_the_model_printed() {
    let dir = Scratch::new("repro18-swim");
    // Hand-written in the FB-2009 samples' format (no sample ships beside the repository).
    let lines: String = (0..40u64)
        .map(|i| {
            format!(
                "job{i}\t{}\t30\t{}\t{}\t{}\n",
                i * 30,
                (i % 7 + 1) * 200_000_000,
                (i % 3) * 500_000_000,
                1_000_000
            )
        })
        .collect();
    let trace = format!("swim:{}", dir.file("FB-2009_sample.tsv", &lines));
    let out = dir.0.join("out").display().to_string();
    let o = weir(&["simulate", "--trace", &trace, "--swim-split-mib", "64", "--out", &out, "--no-report"]);
    let (stdout, stderr) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{stderr}");
    assert!(
        stderr.contains("SWIM model (docs/importers.md): maps = input ÷ 64 MiB (at least 1), reduces = shuffle ÷ 1024 MiB"),
        "{stderr}"
    );
    assert!(stderr.contains("40 rows read, 0 skipped; 40 jobs imported"), "{stderr}");
    let s: Value =
        serde_json::from_str(&fs::read_to_string(dir.0.join("out/summary.json")).expect("summary"))
            .expect("json");
    assert_eq!(s["runs_completed"], 40, "{stdout}");
    assert_eq!(s["ending"]["complete"], true);
}

/// A real SWIM sample: the first 300 jobs of FB-2009_samples_24_times_1hr_0.tsv (the SWIM
/// project's own file, unchanged; tests/data/swim/NOTICE), with the default model.
#[test]
fn the_real_fb_2009_sample_replays_whole_with_the_model_printed() {
    let dir = Scratch::new("repro18-swim-real");
    let sample = workspace().join("crates/weir/tests/data/swim/FB-2009_samples_24_times_1hr_0.head300.tsv");
    let trace = format!("swim:{}", sample.display());
    let out = dir.0.join("out").display().to_string();
    let o = weir(&["simulate", "--trace", &trace, "--out", &out, "--no-report"]);
    let stderr = text(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(stderr.contains("SWIM model (docs/importers.md): maps = input ÷ 128 MiB"), "{stderr}");
    assert!(stderr.contains("300 rows read, 0 skipped; 300 jobs imported, 0 dropped"), "{stderr}");
    let s: Value =
        serde_json::from_str(&fs::read_to_string(dir.0.join("out/summary.json")).expect("summary"))
            .expect("json");
    assert_eq!(s["runs_completed"], 300);
    assert_eq!(s["ending"]["complete"], true);
    // What the planner reads next carries the GPU column too.
    let usage = fs::read_to_string(dir.0.join("out/usage.csv")).expect("usage.csv");
    assert!(usage.starts_with("start,end,queue,cpu,memory,running_apps,gpu\n"), "{usage}");
}

#[test]
fn the_report_says_when_a_replay_is_not_whole_and_charts_gpus() {
    let dir = Scratch::new("repro18-report");
    let out = dir.0.join("out").display().to_string();
    // A horizon before job 9 (t=100000 s) arrives: the trace is never read to its end.
    let trace = format!("swf:{}", repro("livelock.swf"));
    let o = weir(&[
        "simulate",
        "--cluster",
        &repro("c4.yaml"),
        "--trace",
        &trace,
        "--until",
        "1d",
        "--out",
        &out,
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("warning: the replay stopped early (horizon)"), "{}", text(&o.stderr));
    let html = fs::read_to_string(dir.0.join("out/report.html")).expect("report");
    assert!(html.contains("Not the whole workload"), "the report says so");
    let s: Value =
        serde_json::from_str(&fs::read_to_string(dir.0.join("out/summary.json")).expect("summary"))
            .expect("json");
    assert_eq!(
        (s["ending"]["complete"].clone(), s["ending"]["trace_unread"].clone()),
        (Value::Bool(false), Value::Bool(true))
    );

    // GPU pods: allocation counts fractions, and the report charts it with fragmentation.
    let trace = format!("alibaba-gpu2023:{},{}", repro("pods-frac.csv"), repro("nodes-1gpu.csv"));
    let o = weir(&[
        "simulate",
        "--cluster",
        &repro("c4.yaml"),
        "--trace",
        &trace,
        "--nodes-from-trace",
        "--out",
        &out,
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("gpu 75.0% (of 2 GPUs; fragmented"), "{}", text(&o.stdout));
    let html = fs::read_to_string(dir.0.join("out/report.html")).expect("report");
    assert!(html.contains("GPUs over time") && html.contains("GPU allocation and fragmentation"));
    assert!(!html.contains("Not the whole workload"));
}
