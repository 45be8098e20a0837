//! `weir serve` with a capacity-mode cluster file (`scheduler.mode: capacity`, proportional
//! preemption on): the live engine is the same as `weir simulate`'s, so the demo workflows run
//! to the end through it, and `weir queues` shows the capacity-mode tree.

mod common;

use common::{client_of as client, Serve};

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

#[test]
fn serve_runs_the_demo_workflows_on_a_capacity_mode_cluster() {
    let scratch = common::Scratch::new("serve-capacity");
    let dir = scratch.0.clone();
    let root = common::workspace();
    let cluster = root.join("examples/demo/cluster-capacity.yaml");
    let workload = root.join("examples/demo/workload.yaml");
    let port = common::free_port();
    let log = std::fs::File::create(dir.join("serve.log")).expect("log");
    let _serve = Serve(
        Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--kill-grace", "1", "--cluster"])
            .arg(&cluster)
            .current_dir(&dir)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("weir serve"),
    );
    let start = Instant::now();
    loop {
        let out = client(&dir, port, &["submit", workload.to_str().expect("path")]);
        if out.status.success() {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "submit failed: {out:?}");
        std::thread::sleep(Duration::from_millis(300));
    }
    let all = loop {
        let out = client(&dir, port, &["runs", "--json"]);
        if out.status.success() {
            let v: Value = serde_json::from_slice(&out.stdout).expect("json");
            let runs = v["runs"].as_array().map(Vec::len).unwrap_or(0);
            let done = v["runs"].as_array().is_some_and(|r| r.iter().all(|r| r["state"] == "succeeded"));
            if runs > 0 && done {
                break v;
            }
        }
        let serve_log = std::fs::read_to_string(dir.join("serve.log")).unwrap_or_default();
        assert!(start.elapsed() < Duration::from_secs(180), "the demo did not finish: {out:?}\n{serve_log}");
        std::thread::sleep(Duration::from_millis(500));
    };
    // One run of each workflow of the file, each through its capacity-mode leaf.
    let runs = all["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 2, "{all}");
    for leaf in ["root.analytics.tier1", "root.analytics.tier3"] {
        assert!(runs.iter().any(|r| r["queue"] == leaf), "{leaf}: {all}");
    }
    let out = client(&dir, port, &["queues"]);
    let queues = common::text(&out.stdout);
    assert!(out.status.success(), "{queues}\n{}", common::text(&out.stderr));
    assert!(queues.contains("root.analytics.tier1"), "{queues}");
}
