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
    run_bench(&args)
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

/// Runs `weir ARGS`, which must succeed: its stdout, and its last line read as JSON.
fn run_bench(args: &[&str]) -> (String, Value) {
    let out = weir(args);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let json: Value =
        serde_json::from_str(stdout.lines().last().expect("output")).expect("last line is JSON");
    (stdout, json)
}

fn sim_bench(extra: &[&str]) -> (String, Value) {
    let mut args = vec!["bench", "sim", "--backlog"];
    args.extend_from_slice(extra);
    run_bench(&args)
}

/// `weir bench sim --digest` (issue 22): the simulator's decision log — every pass of the
/// engine with its virtual time — as one SHA-256, written the way `weir bench engine` writes
/// its own, and a digest of the summary beside it.
#[test]
fn the_sim_bench_digests_its_decision_log_and_summary() {
    let dir = tempfile_dir("sim-digest");
    let (digest_file, log_file) = (dir.join("digest"), dir.join("decisions.log"));
    let (stdout, first) = sim_bench(&[
        "--jobs",
        "200",
        "--digest-out",
        digest_file.to_str().unwrap(),
        "--decision-log",
        log_file.to_str().unwrap(),
    ]);
    let digest = first["decision_digest"].as_str().expect("decision_digest").to_string();
    assert_eq!(digest.len(), 64, "{digest}");
    assert!(stdout.contains(&format!("decision digest: sha256 {digest}")), "{stdout}");
    assert_eq!(std::fs::read_to_string(&digest_file).unwrap(), format!("{digest}\n"));
    use sha2::{Digest, Sha256};
    let log = std::fs::read(&log_file).unwrap();
    let hex: String = Sha256::digest(&log).iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(hex, digest);
    let log = String::from_utf8(log).unwrap();
    let passes = log.lines().filter(|l| l.starts_with("pass ")).count() as u64;
    assert_eq!(Some(passes), first["passes"].as_u64());
    assert_eq!(Some(log.lines().count() as u64 - passes), first["decisions"].as_u64());
    // Every pass names its virtual time, which never goes back.
    let times: Vec<u64> = log
        .lines()
        .filter_map(|l| l.strip_prefix("pass "))
        .map(|l| l.split(" at ").nth(1).expect("pass N at MS").parse().expect("milliseconds"))
        .collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "times go back");
    // 200 jobs of one task each (no AMs in the backlog bench): at least 200 starts.
    assert!(log.lines().filter(|l| l.starts_with("start ")).count() >= 200);
    let summary = first["summary_digest"].as_str().expect("summary_digest");
    assert!(stdout.contains(&format!("summary digest: sha256 {summary}")), "{stdout}");

    // The same run decides the same; another seed does not; without --digest, no digest.
    let (_, again) = sim_bench(&["--jobs", "200", "--digest"]);
    assert_eq!(again["decision_digest"], first["decision_digest"]);
    assert_eq!(again["summary_digest"], first["summary_digest"]);
    let (_, other) = sim_bench(&["--jobs", "200", "--digest", "--seed", "2"]);
    assert_ne!(other["decision_digest"], first["decision_digest"]);
    assert_ne!(other["summary_digest"], first["summary_digest"]);
    let (plain, none) = sim_bench(&["--jobs", "200"]);
    assert!(none["decision_digest"].is_null() && !plain.contains("digest"), "{plain}");
    std::fs::remove_dir_all(&dir).ok();
}

/// Golden digests of small `weir bench sim` runs, as main decided and measured them when the
/// digest was added (BENCHMARKS.md, issue 22, branch `sim22f`): the synthetic SWF backlog
/// with gangs held by placeholders and by EASY backfilling, and the user-limit backlog. A
/// change meant only to make the simulator or the engine faster must leave them as they are;
/// an intended change of decisions or measures updates them here and says so in BENCHMARKS.md.
#[test]
fn the_sim_bench_decides_and_measures_as_recorded() {
    for (flags, decisions, summary) in [
        (
            &["--jobs", "400", "--backfill", "none"][..],
            "c25bae7dc0cd301199d22ec438e9267e19311d52d812d018d1f0bea39aab22fa",
            "c1104661f8ed8566dd5058ad4f6b20f73df942c25d1eb7154d2fd40baca4f4cf",
        ),
        (
            &["--jobs", "400", "--backfill", "easy"][..],
            "36f5df958ed3b54d9bf9218929dbf94308ac2a098e8549f740d9420e107b1835",
            "45efc6a7fc91917bd06575522142f6bf1f87db2255b8a4ed02efa787a802b59d",
        ),
        (
            &["--user-limit", "--hours", "1"][..],
            "f1feb7360dcfe236846bd35dd01fd3f5b230b0c32997ed22e4d9c590d45c9d2c",
            "50e5c19e72e0c563b1c41b9c348d08fd8555ece0ed64c92706051fb1007f18a1",
        ),
    ] {
        let mut args = flags.to_vec();
        args.push("--digest");
        let (stdout, json) = sim_bench(&args);
        assert_eq!(json["decision_digest"], decisions, "{flags:?}: {stdout}");
        assert_eq!(json["summary_digest"], summary, "{flags:?}: {stdout}");
    }
}

/// `weir bench engine --live` (issue 22 §3): the engine bench's cluster and jobs inside a
/// real server's engine actor. Its fill pass places exactly what the in-process bench's fill
/// places for the same seed (the same jobs into the same engine), the churn passes follow,
/// and the API calls made meanwhile are answered and timed.
#[test]
fn the_live_engine_bench_fills_the_actor_like_the_bench_and_times_the_api() {
    let tiny = ["--nodes", "20", "--leaves", "12", "--jobs", "300", "--rounds", "3", "--seed", "5"];
    let (_, engine) = tiny_like(&tiny, &["--share-queues", "200"]);
    let (stdout, live) = tiny_like(&tiny, &["--live"]);
    assert!(live["fill_placed"].as_u64().expect("fill_placed") > 0, "{stdout}");
    assert_eq!(live["fill_placed"], engine["fill_placements"], "{stdout}");
    assert!(live["churn_passes"].as_u64().expect("churn_passes") >= 3, "{stdout}");
    assert!(live["fill_pass_ms"].as_f64().expect("fill_pass_ms") >= live["submit_ms"].as_f64().unwrap());
    // The liveness probe and a store read answered every time once the fill was over.
    for call in ["GET /healthz", "GET /v1/runs?limit=1"] {
        let idle = &live["api"][format!("{call} / actor idle")];
        assert!(idle["calls"].as_u64().unwrap_or(0) > 0, "{call}: {stdout}");
        assert_eq!(idle["failed"], 0, "{call}: {stdout}");
    }
    assert!(stdout.contains("queue snapshot published"), "{stdout}");
}

fn tiny_like(flags: &[&str], extra: &[&str]) -> (String, Value) {
    let mut args = vec!["bench", "engine"];
    args.extend_from_slice(flags);
    args.extend_from_slice(extra);
    run_bench(&args)
}
