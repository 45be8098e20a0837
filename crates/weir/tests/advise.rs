//! `weir advise` on the deliberately unbalanced pair of examples/advise/, run as a real process.

mod common;

use common::{text, weir, Scratch};
use serde_json::Value;

const PAIR: [&str; 8] = [
    "--cluster",
    "cpu=examples/advise/cpu-rich.yaml",
    "--workload",
    "cpu=examples/advise/cpu-rich-workload.yaml",
    "--cluster",
    "mem=examples/advise/mem-rich.yaml",
    "--workload",
    "mem=examples/advise/mem-rich-workload.yaml",
];

fn imbalance(states: &Value) -> f64 {
    states.as_array().expect("states").iter().map(|s| s["imbalance"].as_f64().expect("imbalance").abs()).sum()
}

fn tier1(states: &Value) -> f64 {
    let (runs, met) = states.as_array().expect("states").iter().fold((0, 0), |(r, m), s| {
        (r + s["tier1_runs"].as_u64().expect("runs"), m + s["tier1_met"].as_u64().expect("met"))
    });
    met as f64 / runs as f64
}

/// Each cluster runs the other's kind of work: memory fills on the compute cluster while its
/// cores idle, and the other way round. The advisor names both workflows, and the simulated
/// state after the moves is better on balance and on tier-1 SLO success, on both clusters.
#[test]
fn advise_names_the_workflows_to_move_and_the_after_state_is_better() {
    let scratch = Scratch::new("advise-pair");
    let json = scratch.0.join("advice.json").display().to_string();
    let mut args = vec!["advise"];
    args.extend(PAIR);
    args.extend(["--until", "1d", "--price", "cpu=2.4", "--price", "mem=3.1", "--json", &json]);
    let out = weir(&args);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let advice: Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("advice.json")).expect("json");

    // As they run now: memory-bound on cpu, cpu-bound on mem, tier-1 missing its SLOs.
    let before = &advice["before"];
    let cpu = &before[0];
    let mem = &before[1];
    assert_eq!((cpu["cluster"].as_str(), mem["cluster"].as_str()), (Some("cpu"), Some("mem")));
    assert!(cpu["imbalance"].as_f64().unwrap() < -0.05, "memory fuller than cores on cpu: {cpu}");
    assert!(mem["imbalance"].as_f64().unwrap() > 0.05, "cores fuller than memory on mem: {mem}");
    assert!(cpu["cost_per_used_core_hour"].as_f64().is_some(), "priced: {cpu}");

    let advised: Vec<(String, String, String)> = advice["moves"]
        .as_array()
        .expect("moves")
        .iter()
        .filter(|m| m["advised"] == true)
        .map(|m| {
            (
                m["workflow"].as_str().unwrap().to_string(),
                m["from"].as_str().unwrap().to_string(),
                m["to"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(advised.contains(&("sessions-etl".into(), "cpu".into(), "mem".into())), "{advised:?}");
    assert!(advised.contains(&("feature-compute".into(), "mem".into(), "cpu".into())), "{advised:?}");
    // The ad-hoc stream matches its cluster: moving it would not help.
    assert!(!advised.iter().any(|m| m.0 == "adhoc-cpu"), "{advised:?}");

    let after = &advice["after"];
    assert_eq!(advice["together"].as_array().map(Vec::len), Some(2), "{}", advice["together"]);
    assert!(imbalance(after) < imbalance(before) / 2.0, "balance: {before} → {after}");
    assert!(tier1(after) > tier1(before), "tier-1 SLO success: {before} → {after}");
    for s in after.as_array().unwrap() {
        assert!(s["imbalance"].as_f64().unwrap().abs() < 0.1, "each cluster evened out: {s}");
    }
    assert!(stdout.contains("advised     sessions-etl cpu → mem (root.analytics.tier1)"), "{stdout}");
    assert!(stdout.contains("weir routes set workflow:NAME"), "{stdout}");
}

#[test]
fn advise_names_what_is_wrong_with_its_arguments() {
    let out = weir(&[
        "advise",
        "--cluster",
        "cpu=examples/advise/cpu-rich.yaml",
        "--workload",
        "cpu=examples/advise/cpu-rich-workload.yaml",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("give at least two clusters"), "{}", text(&out.stderr));
    let mut args = vec!["advise"];
    args.extend(PAIR);
    args.extend(["--price", "gpu=3"]);
    let out = weir(&args);
    assert!(text(&out.stderr).contains("--price gpu=…: no cluster is named `gpu`"), "{}", text(&out.stderr));
    let out = weir(&[
        "advise",
        "--cluster",
        "cpu=examples/advise/cpu-rich.yaml",
        "--workload",
        "cpu=examples/advise/cpu-rich-workload.yaml",
        "--cluster",
        "mem=examples/advise/mem-rich.yaml",
    ]);
    assert!(
        text(&out.stderr).contains("--cluster mem=examples/advise/mem-rich.yaml: no --workload mem=FILE"),
        "{}",
        text(&out.stderr)
    );
}
