//! `weir serve --config server.yaml` with two clusters, each with its own local backend, through
//! the real binary: `weir routes set` sends one workflow to each cluster, each run is recorded on
//! its cluster and its task runs under that cluster's backend state folder; `weir routes list`
//! and `delete`; a bad server file is refused with the file and field path.

mod common;

use common::{client_in_data as client, ok, Serve};

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < Duration::from_secs(60), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Entries of a folder (none if it does not exist).
fn entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|r| r.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default()
}

const CLUSTER: &str =
    "version: 1\nnodes:\n  - {count: 1, resources: {cpu: CPU, memory: 8192}}\nqueues:\n  - {name: default}\n";

#[test]
fn two_clusters_from_one_server_file_each_run_their_routed_runs() {
    let scratch = common::Scratch::new("serve-config");
    let dir = scratch.0.clone();
    let port = common::free_port();
    std::fs::create_dir_all(dir.join("clusters")).expect("mkdir");
    scratch.file("clusters/alpha.yaml", &CLUSTER.replace("CPU", "4000"));
    scratch.file("clusters/beta.yaml", &CLUSTER.replace("CPU", "8000"));
    let server = scratch.file(
        "server.yaml",
        &format!(
            "version: 1
listen: 127.0.0.1:{port}
data_dir: data
lease_seconds: 2
clusters:
  - name: alpha
    file: clusters/alpha.yaml
  - name: beta
    file: clusters/beta.yaml
    backend: {{kind: local, state_dir: beta-state, kill_grace_seconds: 1}}
"
        ),
    );
    // Refused before anything starts: the file and the field path are named.
    let bad =
        scratch.file("bad.yaml", "version: 1\nclusters:\n  - {name: alpha, file: clusters/none.yaml}\n");
    let out = client(&dir, port, &["serve", "--config", &bad]);
    let err = common::text(&out.stderr);
    assert!(!out.status.success() && err.contains("bad.yaml: clusters[0].file: cannot read"), "{err}");
    let out = client(&dir, port, &["serve", "--config", &server, "--cluster", "x.yaml"]);
    assert!(!out.status.success() && common::text(&out.stderr).contains("cannot be used with"));

    let log = std::fs::File::create(dir.join("serve.log")).expect("log");
    let _serve = Serve(
        Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(["serve", "--config", "server.yaml"])
            .current_dir(&dir)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("weir serve"),
    );
    // The data folder comes from the server file (relative to it); the token appears there.
    eventually("the server", || {
        client(
            &dir,
            port,
            &["routes", "set", "workflow:to-alpha", "--cluster", "alpha", "--queue", "root.default"],
        )
        .status
        .success()
    });
    ok(&client(
        &dir,
        port,
        &["routes", "set", "workflow:to-beta", "--cluster", "beta", "--queue", "root.default"],
    ));
    let out =
        client(&dir, port, &["routes", "set", "workflow:x", "--cluster", "gamma", "--queue", "root.default"]);
    assert!(!out.status.success() && common::text(&out.stderr).contains("no cluster `gamma`"));
    let list = ok(&client(&dir, port, &["routes", "list"]));
    let rows: Vec<Vec<&str>> = list.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(
        rows,
        [["workflow:to-alpha", "alpha", "root.default"], ["workflow:to-beta", "beta", "root.default"]],
        "{list}"
    );

    let d = dir.display();
    let command = |name: &str| {
        format!("echo $WEIR_ATTEMPT > {d}/{name}.started; while [ ! -e {d}/go ]; do sleep 0.05; done")
    };
    scratch.file(
        "wl.yaml",
        &format!(
            "version: 1\nworkflows:\n{}",
            ["to-alpha", "to-beta"]
                .map(|w| format!(
                    "  - name: {w}\n    jobs:\n      - name: j\n        stages:\n          - {{name: s, tasks: 1, resources: {{cpu: 1000, memory: 64}}, command: '{}'}}\n",
                    command(w)
                ))
                .concat()
        ),
    );
    ok(&client(&dir, port, &["submit", "wl.yaml"]));
    eventually("both tasks to start", || {
        dir.join("to-alpha.started").exists() && dir.join("to-beta.started").exists()
    });
    let runs: Value = serde_json::from_str(&ok(&client(&dir, port, &["runs", "--json"]))).expect("json");
    let run_of =
        |w: &str| runs["runs"].as_array().and_then(|r| r.iter().find(|r| r["workflow"] == w)).cloned();
    let (alpha, beta) = (run_of("to-alpha").expect("alpha run"), run_of("to-beta").expect("beta run"));
    assert_eq!((&alpha["cluster"], &beta["cluster"]), (&Value::from("alpha"), &Value::from("beta")));
    // Each task runs under its own cluster's backend: beta's in the state folder its server
    // file entry names, alpha's in the default one under the data folder (one flat folder per
    // attempt, named by the attempt id `run-ID/job/stage/task/attempt` with `/` as `+`).
    let folder = |run: &Value| vec![format!("run-{}+0+0+0+1", run["id"])];
    assert_eq!(entries(&dir.join("beta-state")), folder(&beta));
    assert_eq!(entries(&dir.join("data/backend/alpha")), folder(&alpha));
    std::fs::write(dir.join("go"), "").expect("go");
    eventually("both runs to succeed", || {
        let out = client(&dir, port, &["runs", "--json", "--state", "succeeded"]);
        out.status.success()
            && serde_json::from_slice::<Value>(&out.stdout)
                .is_ok_and(|v| v["runs"].as_array().is_some_and(|r| r.len() == 2))
    });

    ok(&client(&dir, port, &["routes", "delete", "workflow:to-beta"]));
    let list = ok(&client(&dir, port, &["routes", "list"]));
    assert!(list.contains("workflow:to-alpha") && !list.contains("to-beta"), "{list}");
}
