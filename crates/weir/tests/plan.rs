//! `weir plan`, `weir export`, `weir import` and `weir bench plan`, run as real processes.

mod common;

use std::fs;

use common::{text, weir, Scratch};
use serde_json::Value;

#[test]
fn plan_writes_the_json_the_report_and_every_export() {
    let scratch = Scratch::new("plan-example");
    let dir = scratch.0.join("out");
    let dir_s = dir.display().to_string();
    let out = weir(&[
        "plan",
        "--cluster",
        "examples/cluster.yaml",
        "--history",
        "examples/usage.csv",
        "--out",
        &dir_s,
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert!(stdout.contains("tier order: ok"), "{stdout}");
    assert!(stdout.contains("verdict: keep"), "{stdout}");
    assert!(stdout.contains("24 leaves have no history and keep their share of the cluster"), "{stdout}");
    assert!(stdout.contains("tier 1 usage added up:"), "{stdout}");

    let json: Value = serde_json::from_str(&fs::read_to_string(dir.join("plan.json")).unwrap()).unwrap();
    let queues = json["queues"].as_array().unwrap();
    assert_eq!(queues.len(), 48);
    let t1 = queues.iter().find(|q| q["queue"] == "root.ads.ranking.tier1").unwrap();
    for key in ["queue", "tier", "instances", "weight", "max_running_apps", "usage_capacity"] {
        assert!(!t1[key].is_null(), "{key} missing in {t1}");
    }
    for key in ["instances", "cpu", "memory"] {
        assert!(t1["usage_capacity"][key].as_f64().is_some(), "usage_capacity.{key}");
    }
    assert_eq!(t1["tier"], 1);
    assert_eq!(t1["weight"].as_f64(), t1["instances"].as_f64());
    for tier in ["1", "2", "3"] {
        assert!(json["tiers"][tier]["usage_capacity"]["instances"].as_f64().is_some(), "tier {tier}");
    }
    assert_eq!(json["cluster"]["verdict"], "keep");
    // A parent's weight is the sum of its children's.
    let weight = |q: &str| queues.iter().find(|x| x["queue"] == q).unwrap()["weight"].as_f64().unwrap();
    let ranking: f64 =
        ["tier1", "tier2", "tier3"].iter().map(|t| weight(&format!("root.ads.ranking.{t}"))).sum();
    assert_eq!(weight("root.ads.ranking"), ranking);

    for file in [
        "cluster.yaml",
        "fair-scheduler.xml",
        "capacity-scheduler.xml",
        "queues.yaml",
        "kueue.yaml",
        "report.html",
    ] {
        assert!(dir.join(file).is_file(), "{file} not written");
    }
    // The planned cluster is a valid weir cluster file with the planned weights.
    let planned = dir.join("cluster.yaml").display().to_string();
    let out = weir(&["validate", &planned]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = weir(&["shares", "--cluster", &planned, "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let xml = fs::read_to_string(dir.join("fair-scheduler.xml")).unwrap();
    assert!(xml.contains(&format!("<weight>{:?}</weight>", weight("root.ads.ranking.tier1"))), "{xml}");
}

#[test]
fn plan_errors_name_the_file_line_and_field_or_the_flag() {
    let scratch = Scratch::new("plan-errors");
    let dir = scratch.0.join("out").display().to_string();
    let bad =
        scratch.file("usage.csv", "start,end,queue,cpu,memory,running_apps\n0,60000,root.default,1000,x,1\n");
    let out = weir(&["plan", "--cluster", "examples/cluster.yaml", "--history", &bad, "--out", &dir]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stderr), format!("weir: {bad}: line 2: memory: `x` is not a whole number of MiB\n"));

    let overlap = scratch.file("overlap.csv", "0,100,root.default,1000,1,1\n50,150,root.default,1000,1,1\n");
    let out = weir(&["plan", "--cluster", "examples/cluster.yaml", "--history", &overlap, "--out", &dir]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr)
        .contains("queue root.default: the interval 0..100 ms (line 1) overlaps 50..150 ms (line 2)"));

    let out = weir(&["plan", "--cluster", "examples/cluster.yaml", "--history", "nope.csv", "--out", &dir]);
    assert!(text(&out.stderr).contains("--history: cannot read nope.csv"), "{}", text(&out.stderr));

    let settings = scratch.file("plan.yaml", "version: 1\npercentile: {1: 120}\n");
    let out = weir(&[
        "plan",
        "--cluster",
        "examples/cluster.yaml",
        "--history",
        "examples/usage.csv",
        "--settings",
        &settings,
        "--out",
        &dir,
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains(&format!("{settings}: percentile.1: 120 is not a percentage in (0, 100]"))
    );
}

#[test]
fn plan_help_teaches_the_format_and_gives_examples() {
    let out = weir(&["plan", "--help"]);
    let help = text(&out.stdout);
    for want in [
        "start,end,queue,cpu,memory,running_apps",
        "milliseconds",
        "percentile: {1: 95, 2: 85, 3: 70}",
        "Examples:",
    ] {
        assert!(help.contains(want), "help lacks {want}");
    }
}

#[test]
fn export_writes_each_format_and_refuses_unknown_ones() {
    let out = weir(&["export", "--format", "yarn-capacity", "--cluster", "examples/cluster-small.yaml"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let xml = text(&out.stdout);
    // Weights 3:1:1 of the small example: 60/20/20.
    for want in [
        "<name>yarn.scheduler.capacity.root.queues</name>\n    <value>a,b,default</value>",
        "<name>yarn.scheduler.capacity.root.a.capacity</name>\n    <value>60.0</value>",
        "<name>yarn.scheduler.capacity.root.default.max-parallel-apps</name>\n    <value>5</value>",
    ] {
        assert!(xml.contains(want), "{xml}\nlacks {want}");
    }
    let out = weir(&["export", "--format", "yarn", "--cluster", "examples/cluster-small.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("`yarn` is not a format"), "{}", text(&out.stderr));
}

#[test]
fn import_then_export_gives_the_same_fair_scheduler_file() {
    let scratch = Scratch::new("import-roundtrip");
    let xml = scratch.0.join("fair-scheduler.xml").display().to_string();
    let out = weir(&["export", "--format", "yarn-fair", "--cluster", "examples/cluster.yaml", "--out", &xml]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let cluster = scratch.0.join("imported.yaml").display().to_string();
    let out = weir(&[
        "import",
        "--format",
        "yarn-fair",
        &xml,
        "--nodes",
        "40",
        "--node-memory",
        "64g",
        "--preemption",
        "--resource-calculator",
        "dominant",
        "--out",
        &cluster,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let again = weir(&["export", "--format", "yarn-fair", "--cluster", &cluster]);
    assert_eq!(again.status.code(), Some(0), "{}", text(&again.stderr));
    // Tiers are weir's own and appear only as comments in the YARN file (and the list of what
    // YARN cannot express shrinks once they are gone): compare the settings, not the comments.
    let settings = |s: &str| {
        let mut in_comment = false;
        let mut out = Vec::new();
        for l in s.lines() {
            let t = l.trim_start();
            if t.starts_with("<!--") {
                in_comment = !t.ends_with("-->");
                continue;
            }
            if in_comment {
                in_comment = !t.ends_with("-->");
                continue;
            }
            out.push(l.to_string());
        }
        out
    };
    assert_eq!(settings(&text(&again.stdout)), settings(&fs::read_to_string(&xml).unwrap()));

    let bad = scratch.file(
        "bad.xml",
        "<allocations><queue name=\"a\"><maxRunningApps>many</maxRunningApps></queue></allocations>",
    );
    let out = weir(&["import", "--format", "yarn-fair", &bad]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains(&format!("{bad}: root.a: maxRunningApps: `many` is not a whole number"))
    );
}

#[test]
fn a_tiny_plan_bench_ends_with_a_json_line() {
    let out =
        weir(&["bench", "plan", "--leaves", "6", "--days", "1", "--resolution-secs", "600", "--csv-mb", "1"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let json: Value = serde_json::from_str(stdout.lines().last().unwrap()).expect("last line is JSON");
    assert_eq!(json["intervals"], 6 * 144);
    assert!(json["intervals_per_sec"].as_f64().unwrap() > 0.0);
    assert!(json["csv_mb_per_sec"].as_f64().unwrap() > 0.0);
    assert!(json["csv_rows"].as_u64().unwrap() > 1000);
}

#[test]
fn the_loop_simulate_then_plan_with_validation() {
    let dir = Scratch::new("loop");
    let sim = dir.0.join("sim");
    let plan = dir.0.join("plan");
    let o = weir(&["simulate", "--until", "12h", "--out", sim.to_str().expect("path")]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let history = sim.join("usage.csv");
    let o = weir(&[
        "plan",
        "--cluster",
        "examples/cluster.yaml",
        "--history",
        history.to_str().expect("path"),
        "--workload",
        "examples/workload.yaml",
        "--validate",
        "--until",
        "12h",
        "--out",
        plan.to_str().expect("path"),
    ]);
    let stdout = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(stdout.contains("tier 1 SLO success"), "{stdout}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(plan.join("validate.json")).expect("validate.json"))
            .expect("JSON");
    for side in ["current", "planned"] {
        assert_eq!(v[side]["simulated_seconds"], 43_200.0, "{side}");
        assert!(v[side]["jobs_completed"].as_u64().expect("count") > 0, "{side}");
    }
    // The workload gives SLO floors: the plan records them for the tier-1 leaves.
    let p: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(plan.join("plan.json")).expect("plan.json"))
            .expect("JSON");
    let floors =
        p["queues"].as_array().expect("queues").iter().filter(|q| q["slo_floor"].is_number()).count();
    assert!(floors >= 4, "{floors} queues with an SLO floor");

    let o = weir(&[
        "plan",
        "--cluster",
        "examples/cluster.yaml",
        "--history",
        "x.csv",
        "--validate",
        "--out",
        "o",
    ]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("--workload"), "{}", text(&o.stderr));
}

/// A capacity-mode cluster plans and validates: the planned cluster.yaml is in capacity mode
/// with `capacity` percents summing to 100 among siblings and `max_parallel_apps` for the
/// running-app limits (the fair-mode weights would be refused there), and the replay runs both.
#[test]
fn a_capacity_mode_cluster_plans_and_validates() {
    let dir = Scratch::new("plan-capacity");
    let plan = dir.0.join("plan");
    let o = weir(&[
        "plan",
        "--cluster",
        "examples/cluster-capacity.yaml",
        "--history",
        "examples/usage.csv",
        "--workload",
        "examples/workload.yaml",
        "--validate",
        "--until",
        "6h",
        "--out",
        plan.to_str().expect("path"),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("tier 1 SLO success"), "{}", text(&o.stdout));
    let planned = plan.join("cluster.yaml");
    let c = weir_model::ClusterConfig::from_yaml(
        "cluster.yaml",
        &std::fs::read_to_string(&planned).expect("planned cluster.yaml"),
    )
    .expect("the planned cluster is valid");
    assert_eq!(c.scheduler.mode, weir_model::Mode::Capacity);
    for q in c.queues.iter().filter(|q| !q.children.is_empty()) {
        let sum: f64 = q
            .children
            .iter()
            .map(|&k| match c.queues[k].capacity.as_ref().and_then(|x| x.configured.clone()) {
                Some(weir_model::CapacitySpec::Percent(p)) => p,
                other => panic!("{}: {other:?}", c.queues[k].path),
            })
            .sum();
        assert!((sum - 100.0).abs() < 1e-6, "{}: children sum to {sum}", q.path);
    }
    assert!(c.queues.iter().any(|q| q.capacity.as_ref().is_some_and(|x| x.max_parallel_apps.is_some())));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(plan.join("validate.json")).expect("validate.json"))
            .expect("JSON");
    for side in ["current", "planned"] {
        assert_eq!(v[side]["simulated_seconds"], 21_600.0, "{side}");
    }
}

#[test]
fn export_lists_what_the_target_cannot_express_and_honours_versions() {
    let out = weir(&["export", "--format", "yarn-fair", "--cluster", "examples/cluster.yaml"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("yarn-fair cannot express"), "{stderr}");
    assert!(stderr.contains("promotion priority"), "{stderr}");
    // The same list opens the file.
    let stdout = text(&out.stdout);
    assert!(
        stdout.starts_with("<?xml") && stdout.contains("What the YARN Fair Scheduler cannot express"),
        "{stdout}"
    );
    let out = weir(&[
        "export",
        "--format",
        "kueue",
        "--cluster",
        "examples/cluster.yaml",
        "--kueue-version",
        "0.12",
    ]);
    assert!(text(&out.stdout).contains("apiVersion: kueue.x-k8s.io/v1alpha1"), "{}", text(&out.stderr));
    let out = weir(&[
        "export",
        "--format",
        "yarn-capacity",
        "--cluster",
        "examples/cluster.yaml",
        "--hadoop-version",
        "3.2",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("requires leaf queue names unique"), "{}", text(&out.stderr));
    let out = weir(&[
        "export",
        "--format",
        "yarn-capacity",
        "--cluster",
        "examples/cluster-small.yaml",
        "--hadoop-version",
        "3.2",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(!text(&out.stdout).contains("max-parallel-apps</name>"));
}
