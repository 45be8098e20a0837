//! `weir serve` with a `spark-standalone` cluster, through the real binary, against a real Spark
//! standalone master and worker started from the `pyspark` package (master's REST submission
//! gateway on, loopback ports; crates/weir-backend-spark/tests/standalone): `weir backends
//! --config` asks the master; the word count runs from `weir submit` to `weir logs`; the server
//! is killed with SIGKILL while a driver runs and started again: the driver is re-adopted by its
//! stored submission id, not submitted a second time (the master's own list of drivers is
//! counted) and its executors counted again in the engine (the cores the master shows in use),
//! and `weir kill` then ends it with its JVM and Python driver. A command stage routed
//! to the cluster is refused at submission. One test: two drivers on 2 cores starve each other.

mod common;

use common::{client_in_data as client, ok, Serve};

#[path = "../../weir-backend-spark/tests/standalone/mod.rs"]
mod standalone;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn serve(dir: &Path, log: &str) -> Serve {
    let log = std::fs::File::create(dir.join(log)).expect("log");
    Serve(
        Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(["serve", "--config", "server.yaml", "--single-tenant"])
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("weir serve"),
    )
}

fn eventually(dir: &Path, what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        if start.elapsed() > Duration::from_secs(300) {
            let log = std::fs::read_to_string(dir.join("serve.log")).unwrap_or_default();
            let log2 = std::fs::read_to_string(dir.join("serve2.log")).unwrap_or_default();
            panic!("timed out waiting for {what}; the server said:\n{log}\n--- after the restart:\n{log2}");
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn run_of(dir: &Path, port: u16, workflow: &str) -> Option<Value> {
    let out = client(dir, port, &["runs", "--json"]);
    let runs: Value = serde_json::from_slice(&out.stdout).ok()?;
    runs["runs"].as_array()?.iter().find(|r| r["workflow"] == workflow).cloned()
}

fn state_of(dir: &Path, port: u16, workflow: &str) -> String {
    run_of(dir, port, workflow).and_then(|r| r["state"].as_str().map(String::from)).unwrap_or_default()
}

fn processes_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
        let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if text.contains(marker) {
            found.push(format!("{}: {}", entry.file_name().to_string_lossy(), text.trim()));
        }
    }
    found
}

fn workflow(name: &str, main: &str, args: &[&str]) -> String {
    let args = args.iter().map(|a| format!("'{a}'")).collect::<Vec<_>>().join(", ");
    format!(
        "  - name: {name}\n    jobs:\n      - name: j\n        stages:\n          - name: count\n            tasks: 1\n            max_attempts: 1\n            resources: {{cpu: 1000, memory: 2g}}\n            spark: {{main: '{main}', args: [{args}], executors: 1, conf: {{spark.sql.shuffle.partitions: '2', spark.driver.memory: 1g, spark.executor.memory: 1g}}}}\n"
    )
}

/// The id of the master's one worker.
fn standalone_worker(cluster: &standalone::Cluster) -> String {
    let state: Value = serde_json::from_str(&cluster.master_json()).unwrap_or(Value::Null);
    state["workers"][0]["id"].as_str().unwrap_or_default().to_string()
}

/// The id of the master's alive worker (empty when none).
fn standalone_worker_alive(cluster: &standalone::Cluster) -> String {
    let state: Value = serde_json::from_str(&cluster.master_json()).unwrap_or(Value::Null);
    let workers = state["workers"].as_array().cloned().unwrap_or_default();
    let alive = workers.iter().find(|w| w["state"] == "ALIVE");
    alive.and_then(|w| w["id"].as_str()).unwrap_or_default().to_string()
}

/// The drivers the master knows (active and completed), by id.
fn drivers(cluster: &standalone::Cluster) -> Vec<String> {
    let state: Value = serde_json::from_str(&cluster.master_json()).unwrap_or(Value::Null);
    ["activedrivers", "completeddrivers"]
        .iter()
        .flat_map(|k| state[k].as_array().cloned().unwrap_or_default())
        .filter_map(|d| d["id"].as_str().map(String::from))
        .collect()
}

#[test]
fn standalone_drivers_run_from_submit_survive_a_kill_9_of_the_server_and_are_killed() {
    let scratch = common::Scratch::new("serve-spark-standalone");
    let dir = scratch.0.clone();
    let mut cluster = standalone::Cluster::start(&dir);
    let port = common::free_port();
    std::fs::create_dir_all(dir.join("clusters")).expect("mkdir");
    scratch.file("clusters/spark.yaml", "version: 1\nqueues:\n  - {name: default}\n  - {name: other}\n");
    // The cluster's nodes are the master's workers (`nodes: from_backend`, read again every 2 s).
    scratch.file(
        "server.yaml",
        &format!(
            "version: 1\nlisten: 127.0.0.1:{port}\ndata_dir: data\nclusters:\n  - name: sa\n    file: clusters/spark.yaml\n    backend:\n      kind: spark-standalone\n      master_rest_url: {}\n      master_ui_url: {}\n      python: {}\n      driver_python: {}\n      poll_interval_ms: 500\n      nodes: from_backend\n      nodes_refresh_seconds: 2\n      conf: {{spark.ui.enabled: 'false', spark.driver.extraJavaOptions: '{jvm}', spark.executor.extraJavaOptions: '{jvm}'}}\n",
            cluster.rest_url,
            cluster.ui_url,
            standalone::python(),
            standalone::driver_python(&dir).display(),
            jvm = standalone::test_jvm_options(),
        ),
    );
    cluster.ready();
    let health = ok(&Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["backends", "--config", "server.yaml"])
        .current_dir(&dir)
        .output()
        .expect("weir backends"));
    let row: Vec<&str> =
        health.lines().find(|l| l.starts_with("sa ")).unwrap_or_default().split_whitespace().collect();
    assert_eq!(row.get(1..3), Some(&["spark-standalone", "healthy"][..]), "{health}");
    assert!(health.contains("Spark 4.") && health.contains("(standalone)"), "{health}");

    let mut server = serve(&dir, "serve.log");
    let examples = common::workspace().join("examples/spark").canonicalize().expect("examples/spark");
    let script = examples.join("wordcount.py").display().to_string();
    let words = examples.join("words.txt").display().to_string();
    let route = |name: &str| {
        client(
            &dir,
            port,
            &["routes", "set", &format!("workflow:{name}"), "--cluster", "sa", "--queue", "root.default"],
        )
        .status
        .success()
    };
    eventually(&dir, "the server", || route("wordcount"));
    // The engine's one node is the test's worker (2 cores, 4g, `--cores 2 --memory 4g`).
    let worker = standalone_worker(&cluster);
    let said = std::fs::read_to_string(dir.join("serve.log")).unwrap_or_default();
    assert!(said.contains(&format!("nodes from the backend: 1 counted ({worker})")), "{said}");
    eventually(&dir, "the engine's capacity to be the worker's", || {
        let out = client(&dir, port, &["queues", "--json"]);
        let queues: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        queues["clusters"][0]["total"] == serde_json::json!({"cpu": 2000, "memory": 4096, "gpu": 0})
    });

    // A command stage cannot run on a standalone master: refused at submission, naming the field.
    assert!(route("shell"));
    scratch.file(
        "shell.yaml",
        "version: 1\nworkflows:\n  - name: shell\n    jobs:\n      - name: j\n        stages:\n          - {name: s, tasks: 1, resources: {cpu: 100, memory: 64m}, command: 'true'}\n",
    );
    let refused = client(&dir, port, &["submit", "shell.yaml"]);
    let said = common::text(&refused.stderr) + &common::text(&refused.stdout);
    assert!(!refused.status.success(), "{said}");
    assert!(
        said.contains("workflow.jobs.j.stages.s.command") && said.contains("Spark applications only"),
        "{said}"
    );

    // The word count, to its end, with its output and driver log copied from the worker.
    scratch
        .file("wc.yaml", &format!("version: 1\nworkflows:\n{}", workflow("wordcount", &script, &[&words])));
    ok(&client(&dir, port, &["submit", "wc.yaml"]));
    eventually(&dir, "the word count to end", || {
        matches!(state_of(&dir, port, "wordcount").as_str(), "succeeded" | "failed")
    });
    let run = run_of(&dir, port, "wordcount").expect("the run");
    let id = run["id"].to_string();
    let driver = ok(&client(&dir, port, &["logs", &id, "count.0", "--stream", "stderr"]));
    assert_eq!(run["state"], "succeeded", "{driver}");
    let out = ok(&client(&dir, port, &["logs", &id, "count.0"]));
    assert!(out.starts_with("the\t9\nweir\t5\nwork\t3\n") && out.ends_with("total 34\n"), "{out}");
    assert!(driver.contains(&format!("weir:run-{id}/")), "the driver's log names the attempt: {driver}");
    assert_eq!(drivers(&cluster).len(), 1);

    // A driver that waits; the server is killed with SIGKILL while it runs.
    let marker = dir.join("sleeper-words.txt");
    std::fs::copy(&words, &marker).expect("copy");
    let marker = marker.display().to_string();
    assert!(route("sleeper"));
    scratch.file(
        "sleeper.yaml",
        &format!("version: 1\nworkflows:\n{}", workflow("sleeper", &script, &[&marker, "600"])),
    );
    ok(&client(&dir, port, &["submit", "sleeper.yaml"]));
    let logs_of_sleeper = || {
        run_of(&dir, port, "sleeper")
            .map(|r| common::text(&client(&dir, port, &["logs", &r["id"].to_string(), "count.0"]).stdout))
            .unwrap_or_default()
    };
    eventually(&dir, "the sleeper to count", || logs_of_sleeper().contains("total 34"));
    assert!(processes_with(&marker).iter().any(|p| p.contains("python")), "its Python driver runs");

    // Executors as a gang: in weir's engine the sleeper holds its driver's container (1000
    // millicores) and its executor's (`executors: 1`, 1 core each), the worker's 2 cores. A
    // second application — another gang of 2 containers, in another queue — waits for room for
    // its whole gang instead of being handed to the master, where its driver would sit without
    // an executor. It is a driver that fails (crates/weir-backend-spark/tests/data/fails.py:
    // the first attempt raises, Python exits 1; the second exits 3), checked once it runs.
    assert!(client(
        &dir,
        port,
        &["routes", "set", "workflow:fails", "--cluster", "sa", "--queue", "root.other"]
    )
    .status
    .success());
    let fails = common::workspace()
        .join("crates/weir-backend-spark/tests/data/fails.py")
        .canonicalize()
        .expect("fails.py");
    let first_done = dir.join("fails-marker");
    scratch.file(
        "fails.yaml",
        &format!(
            "version: 1\nworkflows:\n{}",
            workflow("fails", &fails.display().to_string(), &[&first_done.display().to_string()])
                .replace("max_attempts: 1", "max_attempts: 2")
        ),
    );
    ok(&client(&dir, port, &["submit", "fails.yaml"]));
    let fails_id = run_of(&dir, port, "fails").expect("the failing run")["id"].to_string();
    let spells = |id: &str| -> Vec<Value> {
        let out = client(&dir, port, &["status", id, "--json"]);
        let run: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        run["jobs"][0]["waits"].as_array().cloned().unwrap_or_default()
    };
    eventually(&dir, "the failing application to wait for its gang", || {
        spells(&fails_id).last().is_some_and(|w| w["reason"] == "gang_waiting_for_room")
    });
    assert_eq!(state_of(&dir, port, "fails"), "waiting");
    server.0.kill().expect("SIGKILL weir serve");
    let _ = server.0.wait();
    drop(server);
    let before = drivers(&cluster);
    assert_eq!(before.len(), 2, "{before:?}");

    let _server = serve(&dir, "serve2.log");
    eventually(&dir, "the restarted server", || client(&dir, port, &["runs"]).status.success());
    // Re-adopted: still running after some polls of the master, and no driver submitted again.
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(state_of(&dir, port, "sleeper"), "running");
    assert_eq!(drivers(&cluster), before, "a driver was submitted again");
    assert_eq!(logs_of_sleeper().matches("total 34").count(), 1, "the log was copied twice");
    // Its executors counted again with its driver: the sleeper's queue holds the cores the
    // master shows in use (the driver's and its one executor's, the worker's 2), not the
    // driver's alone (the failing application's placeholders count in its own queue).
    let master_cores = || -> u64 {
        let state: Value = serde_json::from_str(&cluster.master_json()).unwrap_or(Value::Null);
        state["coresused"].as_u64().unwrap_or(0)
    };
    let default_queue_cpu = || -> u64 {
        let out = client(&dir, port, &["queues", "--json"]);
        let queues: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        let list = queues["clusters"][0]["queues"].as_array().cloned().unwrap_or_default();
        let default = list.iter().find(|q| q["path"] == "root.default").cloned().unwrap_or_default();
        default["usage"]["cpu"].as_u64().unwrap_or(0)
    };
    eventually(&dir, "a queue snapshot of the restarted server", || default_queue_cpu() != 0);
    assert_eq!(master_cores(), 2, "{}", cluster.master_json());
    assert_eq!(default_queue_cpu(), 2000, "the engine counts fewer cores than the master holds");
    assert_eq!(state_of(&dir, port, "fails"), "waiting");

    let sleeper = run_of(&dir, port, "sleeper").expect("the sleeper run");
    ok(&client(&dir, port, &["kill", &sleeper["id"].to_string()]));
    eventually(&dir, "the sleeper run to be killed", || state_of(&dir, port, "sleeper") == "killed");
    let mut left = processes_with(&marker);
    for _ in 0..60 {
        if left.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
        left = processes_with(&marker);
    }
    assert!(left.is_empty(), "processes of the killed driver left: {left:?}");
    assert!(cluster.master_json().contains("\"state\" : \"KILLED\""), "{}", cluster.master_json());

    // The sleeper's gang given back (its driver's and executor's containers): the failing
    // application starts now. The master only says FAILED (`DriverState`: "exited non-zero and
    // was not supervised"); the code is read from the driver's stderr, where the worker's
    // `DriverWrapper` lets `PythonRunner`'s `SparkUserAppException(code)` out ("User application
    // exited with CODE"). max_attempts 2: two drivers, no third; each attempt's output and
    // driver log in `weir logs --attempt N`.
    eventually(&dir, "the failing run to end", || {
        matches!(state_of(&dir, port, "fails").as_str(), "succeeded" | "failed")
    });
    let id = run_of(&dir, port, "fails").expect("the run")["id"].to_string();
    let status: Value =
        serde_json::from_str(&ok(&client(&dir, port, &["status", &id, "--json"]))).expect("json");
    let task = &status["jobs"][0]["tasks"][0];
    assert_eq!(status["state"], "failed", "{status:#}");
    assert_eq!(
        (task["state"].as_str(), task["attempts"].as_u64(), task["exit_code"].as_i64()),
        (Some("failed"), Some(2), Some(3)),
        "two attempts, the last exiting 3: {status:#}"
    );
    // The word count's, the sleeper's, and one per attempt of the failing application.
    assert_eq!(drivers(&cluster).len(), 4, "one driver per attempt, submitted once its gang fit");
    let log = |attempt: &str, stream: &str| {
        ok(&client(&dir, port, &["logs", &id, "count.0", "--attempt", attempt, "--stream", stream]))
    };
    // PythonRunner merges the Python driver's stderr into its stdout.
    let out1 = log("1", "stdout");
    assert!(out1.contains("RuntimeError: weir test: the driver raises"), "attempt 1: {out1}");
    let err1 = log("1", "stderr");
    assert!(
        err1.contains("User application exited with 1")
            && err1.contains("FAILED (exit code 1, from the driver's log)"),
        "attempt 1's driver log: {err1}"
    );
    let err2 = log("2", "stderr");
    assert!(err2.contains("FAILED (exit code 3, from the driver's log)"), "attempt 2's driver log: {err2}");

    // The worker dies: the next refresh of the master's workers (every 2 s) makes it a node
    // failure to the engine; a new worker registers under a new id and joins.
    let log_of_server = || std::fs::read_to_string(dir.join("serve2.log")).unwrap_or_default();
    cluster.kill_worker();
    eventually(&dir, "the dead worker to leave", || {
        // DEAD while the master still lists it (Master.removeWorker), `gone` once it culls it.
        let said = log_of_server();
        said.contains(&format!("node `{worker}` left (dead)"))
            || said.contains(&format!("node `{worker}` left (gone)"))
    });
    cluster.start_worker();
    let mut second = String::new();
    eventually(&dir, "a new worker", || {
        second = standalone_worker_alive(&cluster);
        !second.is_empty() && second != worker
    });
    eventually(&dir, "the new worker to join", || {
        log_of_server().contains(&format!("node `{second}` joined"))
    });
}

/// A master that does not answer (nothing listens at `master_rest_url`): `weir backends --config`
/// says so and exits 1; the running server marks the cluster unhealthy with the reason, and a
/// run routed to it waits in the store instead of failing. No JVM starts.
#[test]
fn an_unreachable_master_is_an_unhealthy_cluster_with_the_reason_and_runs_wait() {
    let scratch = common::Scratch::new("serve-spark-standalone-down");
    let dir = scratch.0.clone();
    let (port, nobody) = (standalone::free_port(), standalone::free_port());
    std::fs::create_dir_all(dir.join("clusters")).expect("mkdir");
    scratch.file(
        "clusters/spark.yaml",
        "version: 1\nnodes:\n  - {count: 1, resources: {cpu: 2000, memory: 4g}}\nqueues:\n  - {name: default}\n",
    );
    scratch.file(
        "server.yaml",
        &format!(
            "version: 1\nlisten: 127.0.0.1:{port}\ndata_dir: data\nclusters:\n  - name: down\n    file: clusters/spark.yaml\n    backend: {{kind: spark-standalone, master_rest_url: 'http://127.0.0.1:{nobody}'}}\n"
        ),
    );
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["backends", "--config", "server.yaml"])
        .current_dir(&dir)
        .output()
        .expect("weir backends");
    let direct = common::text(&out.stdout);
    let gateway = format!("REST gateway at http://127.0.0.1:{nobody}");
    assert!(!out.status.success() && direct.contains("unhealthy") && direct.contains(&gateway), "{direct}");
    let _serve = serve(&dir, "serve.log");
    eventually(&dir, "the server", || {
        client(
            &dir,
            port,
            &["routes", "set", "workflow:wordcount", "--cluster", "down", "--queue", "root.default"],
        )
        .status
        .success()
    });
    scratch.file("wc.yaml", &format!("version: 1\nworkflows:\n{}", workflow("wordcount", "/x/wc.py", &[])));
    ok(&client(&dir, port, &["submit", "wc.yaml"]));
    eventually(&dir, "the cluster to be seen unhealthy", || {
        let view = common::text(&client(&dir, port, &["backends"]).stdout);
        view.lines().any(|l| {
            l.starts_with("down ")
                && l.contains("unhealthy")
                && l.contains("the spark-standalone backend is unavailable")
                && l.contains(&gateway)
        })
    });
    let state = state_of(&dir, port, "wordcount");
    assert!(!state.is_empty() && !matches!(state.as_str(), "succeeded" | "failed" | "killed"), "{state}");
}
