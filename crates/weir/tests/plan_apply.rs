//! The loop through the real binary: `weir serve` records usage and runs, `weir plan --server
//! --validate` plans from them and replays the recorded runs on the current and the planned
//! settings, `weir apply` shows the changes and applies them, and the live queues take the new
//! settings. Bad plans — an unknown queue, capacities that do not fit, a worse tier 1, a plan
//! made from an older configuration — change nothing and say why.

mod common;

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

const CLUSTER: &str = "version: 1
nodes:
  - {count: 1, resources: {cpu: 8000, memory: 16g}}
queues:
  - name: ads
    children: [{name: tier1, tier: 1, weight: 4}, {name: tier3, tier: 3}]
  - {name: default, tier: 3}
";

const WORKLOAD: &str = "version: 1
workflows:
  - name: report
    queue: root.ads.tier1
    slo: 1m
    jobs:
      - name: j
        stages:
          - {name: s, tasks: 2, resources: {cpu: 2000, memory: 1g}, command: 'sleep 1'}
  - name: backfill
    queue: root.ads.tier3
    jobs:
      - name: j
        stages:
          - {name: s, tasks: 1, resources: {cpu: 1000, memory: 1g}, command: 'sleep 1'}
";

fn weir(dir: &Path, port: u16, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .current_dir(dir)
        .env("WEIR_SERVER", format!("http://127.0.0.1:{port}"))
        .env_remove("WEIR_TOKEN")
        .stdin(Stdio::null())
        .output()
        .expect("run weir")
}

fn ok(out: &Output) -> String {
    assert!(out.status.success(), "failed: {}\n{}", common::text(&out.stdout), common::text(&out.stderr));
    common::text(&out.stdout)
}

fn fails(out: &Output, why: &str) {
    let err = common::text(&out.stderr);
    assert!(!out.status.success() && err.contains(why), "expected a failure saying `{why}`:\n{err}");
}

fn weights(dir: &Path, port: u16) -> Vec<(String, f64)> {
    let v: Value = serde_json::from_str(&ok(&weir(dir, port, &["queues", "--json"]))).expect("json");
    v["clusters"][0]["queues"]
        .as_array()
        .expect("queues")
        .iter()
        .map(|q| (q["path"].as_str().unwrap_or("").to_string(), q["weight"].as_f64().unwrap_or(-1.0)))
        .collect()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("dir");
    for e in std::fs::read_dir(from).expect("read dir") {
        let e = e.expect("entry");
        std::fs::copy(e.path(), to.join(e.file_name())).expect("copy");
    }
}

fn edit(path: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).expect("read");
    assert!(text.contains(from), "`{from}` not in {}:\n{text}", path.display());
    std::fs::write(path, text.replacen(from, to, 1)).expect("write");
}

#[test]
fn plan_from_the_server_then_apply_and_bad_plans_change_nothing() {
    let scratch = common::Scratch::new("plan-apply");
    let dir = scratch.0.clone();
    scratch.file("cluster.yaml", CLUSTER);
    scratch.file("workload.yaml", WORKLOAD);
    let port = common::free_port();
    let log = std::fs::File::create(dir.join("serve.log")).expect("log");
    let _serve = Serve(
        Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(["serve", "--cluster", "cluster.yaml", "--listen", &format!("127.0.0.1:{port}")])
            .args(["--usage-resolution", "1s"])
            .current_dir(&dir)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("weir serve"),
    );
    let start = Instant::now();
    while !weir(&dir, port, &["runs"]).status.success() {
        assert!(start.elapsed() < Duration::from_secs(30), "the server did not start");
        std::thread::sleep(Duration::from_millis(200));
    }
    // Nothing has run yet: planning says so in words, not with the CSV reader's message.
    let server = format!("http://127.0.0.1:{port}");
    fails(
        &weir(&dir, port, &["plan", "--server", &server, "--window", "1h", "--out", "empty"]),
        "the server has recorded no queue usage for cluster `default`",
    );
    for date in ["d1", "d2"] {
        ok(&weir(&dir, port, &["submit", "workload.yaml", "--logical-date", date, "--wait"]));
    }
    // Let the last usage window close.
    std::thread::sleep(Duration::from_millis(1500));

    let out = ok(&weir(
        &dir,
        port,
        &[
            "plan",
            "--server",
            &format!("http://127.0.0.1:{port}"),
            "--validate",
            "--window",
            "1h",
            "--out",
            "plan",
        ],
    ));
    assert!(out.contains("validation:") && out.contains("tier 1 SLO success"), "{out}");
    for f in [
        "cluster.yaml",
        "validate.json",
        "usage.csv",
        "runs.csv",
        "workload.yaml",
        "routes.yaml",
        "source.json",
        "current.yaml",
        "waits.csv",
    ] {
        assert!(dir.join("plan").join(f).exists(), "plan/{f} is missing");
    }
    // What jobs waited for is read with the usage and told per leaf beside the plan's weight.
    let waits = std::fs::read_to_string(dir.join("plan/waits.csv")).expect("waits.csv");
    assert!(waits.starts_with("leaf,tier,reason,queue,limit,spells,runs,waited_ms\n"), "{waits}");
    let leaves: Vec<&str> = waits.lines().skip(1).filter_map(|l| l.split(',').next()).collect();
    if leaves.is_empty() {
        assert!(out.contains("waiting: no job waited in the window (waits.csv)"), "{out}");
    }
    for leaf in leaves {
        assert!(out.contains(&format!("  {leaf} (tier ")), "{leaf} not in {out}");
    }
    let runs = std::fs::read_to_string(dir.join("plan/runs.csv")).expect("runs.csv");
    assert_eq!(runs.lines().filter(|l| l.starts_with("report,1,")).count(), 2, "{runs}");
    // Keep copies to break before the good plan is applied.
    for bad in ["unknown", "capacity", "worse"] {
        copy_dir(&dir.join("plan"), &dir.join(bad));
    }
    edit(&dir.join("unknown/cluster.yaml"), "name: default", "name: nowhere");
    edit(&dir.join("capacity/cluster.yaml"), "name: tier3", "name: tier3\n    min: {cpu: 9000, memory: 1g}");
    let validate = dir.join("worse/validate.json");
    let mut v: Value =
        serde_json::from_str(&std::fs::read_to_string(&validate).expect("validate.json")).expect("json");
    v["planned"]["tiers"]["1"]["slo_success_ratio"] = Value::from(0.5);
    std::fs::write(&validate, v.to_string()).expect("write");

    let before = weights(&dir, port);
    fails(&weir(&dir, port, &["apply", "unknown", "--yes"]), "unknown queue");
    fails(&weir(&dir, port, &["apply", "capacity", "--yes"]), "capacities do not fit");
    fails(&weir(&dir, port, &["apply", "worse", "--yes"]), "worse for tier 1");
    // The server has recorded a few seconds, less than its day's minimum: refused unless forced.
    fails(&weir(&dir, port, &["apply", "plan", "--yes"]), "of recorded history");
    // Without --yes and without a terminal to ask on, nothing is applied either.
    let shown = weir(&dir, port, &["apply", "plan", "--force"]);
    fails(&shown, "pass --yes");
    let shown = common::text(&shown.stdout);
    assert!(shown.contains("weight"), "the changes are shown first: {shown}");
    assert!(shown.contains("warning: forced: the plan was made from"), "{shown}");
    assert_eq!(weights(&dir, port), before, "bad plans changed nothing");

    let out = ok(&weir(&dir, port, &["apply", "plan", "--yes", "--force"]));
    assert!(out.contains("applied: cluster `default` is at configuration version 2"), "{out}");
    let planned: weir_model::ClusterConfig = weir_model::ClusterConfig::from_yaml(
        "plan",
        &std::fs::read_to_string(dir.join("plan/cluster.yaml")).expect("read"),
    )
    .expect("planned cluster");
    let want: Vec<(String, f64)> = planned.queues.iter().map(|q| (q.path.to_string(), q.weight)).collect();
    let start = Instant::now();
    while weights(&dir, port) != want {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the live queues never took the plan: {:?} vs {want:?}",
            weights(&dir, port)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_ne!(want, before, "the plan changed something");
    // `weir queues` prints the settings as columns: the planned weight of the tier-1 leaf.
    let table = ok(&weir(&dir, port, &["queues"]));
    let header = table.lines().find(|l| l.starts_with("queue")).expect("header");
    for col in ["tier", "weight", "min cpu", "max cpu", "max apps"] {
        assert!(header.contains(col), "no `{col}` column: {header}");
    }
    let tier1 = table.lines().find(|l| l.starts_with("root.ads.tier1 ")).expect("tier-1 row");
    let weight = want.iter().find(|(p, _)| p == "root.ads.tier1").expect("planned").1;
    assert_eq!(tier1.split_whitespace().nth(2), Some(weight.to_string().as_str()), "{table}");
    // The same plan again was made from version 1: plan again.
    fails(&weir(&dir, port, &["apply", "plan", "--yes", "--force"]), "plan again");

    // The history lists both versions; rolling back to 1 brings the live queues back.
    let listed = ok(&weir(&dir, port, &["rollback"]));
    assert!(listed.starts_with("cluster `default`: configuration version 2 in force"), "{listed}");
    assert!(
        listed.contains("   2  ") && listed.contains("  plan\n") && listed.contains("loaded at start"),
        "{listed}"
    );
    let back = ok(&weir(&dir, port, &["rollback", "1", "--yes"]));
    assert!(back.contains("rolled back: cluster `default` is at configuration version 3"), "{back}");
    let start = Instant::now();
    while weights(&dir, port) != before {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the live queues never went back: {:?}",
            weights(&dir, port)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
