//! `weir bench engine` at a tiny size: it runs, fills the cluster and reports its figures.
//! (Speed itself is measured in release builds and recorded in BENCHMARKS.md, never asserted.)

mod common;

use common::{text, weir};
use serde_json::Value;

#[test]
fn a_tiny_engine_bench_places_containers_and_ends_with_a_json_line() {
    let out = weir(&[
        "bench",
        "engine",
        "--nodes",
        "20",
        "--leaves",
        "12",
        "--jobs",
        "300",
        "--rounds",
        "5",
        "--share-queues",
        "200",
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert!(stdout.contains("fill empty cluster"), "{stdout}");
    let last = stdout.lines().last().expect("output");
    let json: Value = serde_json::from_str(last).expect("last line is JSON");
    assert!(json["placements_per_sec"].as_f64().expect("placements_per_sec") > 0.0);
    assert!(json["fair_share_recompute_ms"].as_f64().expect("fair_share_recompute_ms") >= 0.0);
    assert_eq!(json["nodes"], 20);
    assert!(json["queues"].as_u64().expect("queues") >= 200);
}

#[test]
fn a_bench_of_nothing_is_refused() {
    let out = weir(&["bench", "engine", "--jobs", "0"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("must be positive"), "{}", text(&out.stderr));
}

fn tiny_engine_bench(seed: &str, extra: &[&str]) -> (String, Value) {
    let mut args = vec![
        "bench",
        "engine",
        "--nodes",
        "20",
        "--leaves",
        "12",
        "--jobs",
        "300",
        "--rounds",
        "5",
        "--share-queues",
        "200",
        "--seed",
        seed,
    ];
    args.extend_from_slice(extra);
    let out = weir(&args);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let json: Value =
        serde_json::from_str(stdout.lines().last().expect("output")).expect("last line is JSON");
    (stdout, json)
}

#[test]
fn the_engine_bench_digests_its_decision_log_the_same_way_every_run() {
    let dir = tempfile_dir("digest");
    let (digest_file, log_file) = (dir.join("digest"), dir.join("decisions.log"));
    let (stdout, first) = tiny_engine_bench(
        "7",
        &["--digest-out", digest_file.to_str().unwrap(), "--decision-log", log_file.to_str().unwrap()],
    );
    let digest = first["decision_digest"].as_str().expect("decision_digest").to_string();
    assert_eq!(digest.len(), 64, "{digest}");
    assert!(stdout.contains(&format!("decision digest: sha256 {digest}")), "{stdout}");
    assert_eq!(std::fs::read_to_string(&digest_file).unwrap(), format!("{digest}\n"));

    // The digest is the SHA-256 of the log it writes, which has every placement in it.
    use sha2::{Digest, Sha256};
    let log = std::fs::read(&log_file).unwrap();
    let hex: String = Sha256::digest(&log).iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(hex, digest);
    let log = String::from_utf8(log).unwrap();
    let starts = log.lines().filter(|l| l.starts_with("start ")).count() as u64;
    assert_eq!(Some(starts), first["placements"].as_u64());
    assert!(starts > 0);
    assert_eq!(log.lines().filter(|l| l.starts_with("pass ")).count(), 6, "the fill and 5 rounds");
    assert_eq!(Some(log.lines().count() as u64 - 6), first["decisions"].as_u64());

    // The same run decides the same; another workload does not.
    let (_, again) = tiny_engine_bench("7", &[]);
    assert_eq!(again["decision_digest"], first["decision_digest"]);
    let (_, other) = tiny_engine_bench("8", &[]);
    assert_ne!(other["decision_digest"], first["decision_digest"]);
    std::fs::remove_dir_all(&dir).ok();
}

/// `--mode capacity`: the same synthetic tree under the Capacity Scheduler's policy places
/// containers, decides otherwise than fair mode, the same way every run, and times a round of
/// the proportional preemption policy that marks containers (half the leaves fill the
/// cluster, the other half then ask for their guarantees).
#[test]
fn the_engine_bench_runs_in_capacity_mode_and_times_a_preemption_round() {
    let (stdout, capacity) = tiny_engine_bench("7", &["--mode", "capacity"]);
    assert_eq!(capacity["mode"], "capacity");
    assert!(capacity["placements"].as_u64().unwrap() > 0, "{stdout}");
    assert!(capacity["preemption_round_ms"].as_f64().unwrap() > 0.0, "{stdout}");
    let marked: u64 = stdout
        .lines()
        .find(|l| l.starts_with("proportional preemption round"))
        .and_then(|l| l.split('(').nth(1))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no round line in {stdout}"));
    assert!(marked > 0, "{stdout}");
    let (_, again) = tiny_engine_bench("7", &["--mode", "capacity"]);
    assert_eq!(again["decision_digest"], capacity["decision_digest"]);
    let (_, fair) = tiny_engine_bench("7", &[]);
    assert_eq!(fair["mode"], "fair");
    assert!(fair["preemption_round_ms"].is_null());
    assert_ne!(fair["decision_digest"], capacity["decision_digest"]);
}

fn tempfile_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("weir-bench-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `weir bench sim --backlog --user-limit` (issue 22 §1): one user at `user_max_running_apps: 1`,
/// a 20 s job a second. The user's one slot passes from job to job, so an hour completes
/// 3,600 / 20 = 180 jobs but the last, which ends at the horizon itself; the rest wait.
#[test]
fn the_user_limit_backlog_runs_one_job_at_a_time_and_piles_up_the_rest() {
    for hours in [1u64, 2] {
        let out = weir(&["bench", "sim", "--backlog", "--user-limit", "--hours", &hours.to_string()]);
        let stdout = text(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
        let completed = hours * 3600 / 20 - 1;
        assert!(stdout.contains(&format!("simulated {hours}.0 h: {completed} runs completed")), "{stdout}");
        let waiting: u64 = stdout
            .split("at most ")
            .nth(1)
            .and_then(|t| t.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .expect("at most N jobs waiting");
        // Sampled every 256 steps: close to the arrivals not yet run at the end.
        assert!(waiting > hours * 3600 * 9 / 10 && waiting < hours * 3600, "{stdout}");
        let json: Value = serde_json::from_str(stdout.lines().last().expect("output")).expect("JSON");
        assert!(json["events_per_sec"].as_f64().expect("events_per_sec") > 0.0);
    }
}

/// Golden digests: the decisions of a small bench in each mode, as main made them before the
/// capacity user table (`capacity_users.rs`) replaced the walk over a leaf's jobs (both
/// recorded in BENCHMARKS.md, issue 21). A change that moves any decision — intended or not —
/// fails here; an intended one updates the digest here and says so in BENCHMARKS.md.
#[test]
fn the_engine_bench_decides_as_recorded_in_both_modes() {
    let flags = [
        "bench",
        "engine",
        "--nodes",
        "200",
        "--leaves",
        "60",
        "--jobs",
        "3000",
        "--rounds",
        "20",
        "--share-queues",
        "200",
    ];
    for (mode, digest) in [
        ("fair", "edf5ed09f94855b99125f5e1996141a002563095baf0536994866650cfc17a20"),
        ("capacity", "44c174f3b97b24810c42d0aacf1bdef65a731d570c66de0613d4123ea88d8162"),
    ] {
        let mut args = flags.to_vec();
        args.extend_from_slice(&["--mode", mode]);
        let out = weir(&args);
        let stdout = text(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
        assert!(stdout.contains(&format!("decision digest: sha256 {digest}")), "{mode}: {stdout}");
    }
}
