//! `weir slo` as a user runs it: task records from `weir simulate --tasks`, a profile, a
//! C(p, a) table with its prediction error, and errors that name the file and the field.

mod common;

use std::fs;

use common::{text, weir, Scratch};
use serde_json::Value;

const CLUSTER: &str = "examples/slo/cluster.yaml";
const WORKLOAD: &str = "examples/slo/workload.yaml";

#[test]
fn records_make_a_profile_and_the_profile_a_table() {
    let dir = Scratch::new("slo-profile");
    let runs = dir.0.join("runs").display().to_string();
    let o = weir(&[
        "simulate",
        "--cluster",
        CLUSTER,
        "--workload",
        WORKLOAD,
        "--until",
        "12h",
        "--tasks",
        "--no-report",
        "--out",
        &runs,
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let tasks = fs::read_to_string(dir.0.join("runs/tasks.csv")).expect("tasks.csv");
    assert!(tasks.starts_with("job,workflow,job_name,stage,attempt,start,end,duration,outcome\n"));
    // Four etl runs in 12 h (every 3 h from 5 min): 4 × 132 completed attempts of etl.
    let done = tasks.lines().filter(|l| l.contains(",etl,etl,") && l.ends_with(",done")).count();
    assert_eq!(done, 4 * 132);

    let profile = dir.0.join("etl.profile.json").display().to_string();
    let o = weir(&[
        "slo",
        "profile",
        "--cluster",
        CLUSTER,
        "--workload",
        WORKLOAD,
        "--records",
        &runs,
        "--workflow",
        "etl",
        "--out",
        &profile,
    ]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(out.starts_with("etl.etl: 4 runs"), "{out}");
    let p: Value = serde_json::from_str(&fs::read_to_string(&profile).expect("profile")).expect("JSON");
    assert_eq!(p["version"], 1);
    assert_eq!(p["stages"][0]["name"], "map");
    assert_eq!(p["stages"][1]["after"], serde_json::json!([0]));
    // Map durations are lognormal with a 2-minute median.
    let median = p["stages"][0]["duration_ms"][3].as_u64().expect("median");
    assert!((100_000..=140_000).contains(&median), "{median}");

    let table = dir.0.join("etl.table.json").display().to_string();
    let o = weir(&[
        "slo",
        "table",
        "--profile",
        &profile,
        "--max-allocation",
        "16",
        "--runs",
        "5",
        "--held-back",
        "3",
        "--out",
        &table,
    ]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(out.contains("C(p, a) for a = 1..16, 5 runs each"), "{out}");
    for predictor in ["C(p,a) work", "C(p,a) critical-path", "amdahl"] {
        assert!(out.contains(predictor), "{out}");
    }
    let t: Value = serde_json::from_str(&fs::read_to_string(&table).expect("table")).expect("JSON");
    assert_eq!(t["remaining_ms"].as_array().map(Vec::len), Some(16));
}

#[test]
fn bad_inputs_are_named() {
    let dir = Scratch::new("slo-errors");
    let records = dir.0.join("runs");
    fs::create_dir_all(&records).expect("dir");
    fs::write(records.join("tasks.csv"), "job,workflow,stage\n0,etl,map\n").expect("write");
    let r = records.display().to_string();
    let out = dir.0.join("p.json").display().to_string();
    let o = weir(&[
        "slo",
        "profile",
        "--cluster",
        CLUSTER,
        "--workload",
        WORKLOAD,
        "--records",
        &r,
        "--workflow",
        "etl",
        "--out",
        &out,
    ]);
    assert!(!o.status.success());
    let err = text(&o.stderr);
    assert!(err.contains("tasks.csv: line 1: no column `job_name`"), "{err}");

    let o = weir(&[
        "slo",
        "profile",
        "--cluster",
        CLUSTER,
        "--workload",
        WORKLOAD,
        "--records",
        &r,
        "--workflow",
        "nope",
        "--out",
        &out,
    ]);
    assert!(text(&o.stderr).contains("no workflow `nope`"), "{}", text(&o.stderr));

    let bad = dir.file("bad.profile.json", "{\"version\": 9}");
    let o = weir(&["slo", "table", "--profile", &bad, "--out", &out]);
    let err = text(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("bad.profile.json: line 1 column"), "{err}");

    let o = weir(&[
        "slo",
        "evaluate",
        "--cluster",
        CLUSTER,
        "--workload",
        WORKLOAD,
        "--policies",
        "jockey,greedy",
        "--out",
        &out,
    ]);
    assert!(
        text(&o.stderr).contains("`greedy` is not a policy: jockey, static, max, fair or amdahl"),
        "{}",
        text(&o.stderr)
    );
}
