//! `weir serve` with node labels in capacity mode: a stage's `node_labels` reaches the live
//! engine as its tasks' node selector, so its tasks run only on the label's nodes (an exclusive
//! partition, YARN's default: `RegularContainerAllocator` serves a labelled node only to
//! requests for its label under `SchedulingMode.RESPECT_PARTITION_EXCLUSIVITY`), and a stage
//! without labels runs in the default partition. Checked through the API: each task's node
//! (`weir status --json`) and each node's label (`GET /v1/nodes`).

mod common;

use common::{client_of as client, Serve};

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// `GET path` on the server with the admin token the server wrote in its data directory (as
/// the CLI reads it), the body as JSON.
fn get(dir: &Path, port: u16, path: &str) -> Value {
    let token = std::fs::read_to_string(dir.join("weir-data/admin.token")).expect("admin token");
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\nConnection: close\r\n\r\n",
        token.trim()
    )
    .expect("request");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("response");
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    let body = out.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or_default();
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

const CLUSTER: &str = "version: 1
scheduler: {mode: capacity}
nodes:
  - {count: 1, resources: {cpu: 4000, memory: 4g}}
  - {count: 1, resources: {cpu: 4000, memory: 4g}, label: gpu}
queues:
  - {name: ml, capacity: 50, user_limit_factor: -1, accessible_labels: {gpu: {capacity: 100}}}
  - {name: etl, capacity: 50, user_limit_factor: -1}
";

const WORKLOAD: &str = "version: 1
workflows:
  - name: train
    queue: root.ml
    at: [0s]
    jobs:
      - name: model
        stages:
          - {name: fit, tasks: 3, resources: {cpu: 1000, memory: 1g}, node_labels: [gpu],
             duration: {fixed: 1s}, command: \"echo fitting $WEIR_TASK_INDEX; sleep 1\"}
          - {name: report, after: [fit], tasks: 1, resources: {cpu: 1000, memory: 1g},
             duration: {fixed: 1s}, command: \"echo report\"}
";

#[test]
fn a_stage_asking_for_a_label_runs_on_the_labels_nodes() {
    let scratch = common::Scratch::new("serve-capacity-labels");
    let dir = scratch.0.clone();
    let cluster = scratch.file("cluster.yaml", CLUSTER);
    let workload = scratch.file("workload.yaml", WORKLOAD);
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
        let out = client(&dir, port, &["submit", &workload]);
        if out.status.success() {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "submit failed: {out:?}");
        std::thread::sleep(Duration::from_millis(300));
    }
    let run = loop {
        let out = client(&dir, port, &["runs", "--json"]);
        if out.status.success() {
            let v: Value = serde_json::from_slice(&out.stdout).expect("json");
            let runs = v["runs"].as_array().cloned().unwrap_or_default();
            if let [run] = runs.as_slice() {
                let state = run["state"].as_str().unwrap_or_default();
                assert!(state != "failed" && state != "killed", "{run}");
                if state == "succeeded" {
                    break run.clone();
                }
            }
        }
        let serve_log = std::fs::read_to_string(dir.join("serve.log")).unwrap_or_default();
        assert!(start.elapsed() < Duration::from_secs(120), "the run did not finish: {out:?}\n{serve_log}");
        std::thread::sleep(Duration::from_millis(300));
    };
    assert_eq!(run["queue"], "root.ml", "{run}");

    // Each node's label, as the server's engine has it.
    let nodes = get(&dir, port, "/v1/nodes");
    let labels: BTreeMap<String, Option<String>> = nodes["clusters"][0]["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .map(|n| (n["id"].as_str().unwrap().to_string(), n["label"].as_str().map(String::from)))
        .collect();
    assert_eq!(labels.len(), 2, "{nodes}");

    let id = run["id"].as_i64().expect("run id").to_string();
    let out = client(&dir, port, &["status", &id, "--json"]);
    assert!(out.status.success(), "{}", common::text(&out.stderr));
    let detail: Value = serde_json::from_slice(&out.stdout).expect("json");
    let tasks = detail["jobs"][0]["tasks"].as_array().expect("tasks").clone();
    let label_of = |stage: &str| -> Vec<Option<String>> {
        tasks
            .iter()
            .filter(|t| t["stage"] == stage)
            .map(|t| {
                let node = t["node"].as_str().unwrap_or_else(|| panic!("no node: {t}"));
                labels.get(node).unwrap_or_else(|| panic!("unknown node {node}: {nodes}")).clone()
            })
            .collect()
    };
    assert_eq!(label_of("fit"), vec![Some("gpu".to_string()); 3], "{detail}");
    assert_eq!(label_of("report"), vec![None], "{detail}");
}
