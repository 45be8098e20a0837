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
