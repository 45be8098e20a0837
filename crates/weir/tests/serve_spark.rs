//! `weir serve` with a `spark-local` cluster, through the real binary and a real Spark (the
//! `pyspark` package; `.ci/run` installs it): a workflow whose stage is a PySpark word count
//! over a file of the repository (examples/spark) runs from `weir submit` to its end, its
//! output and driver log in `weir logs`; `weir kill` ends a running application with every
//! process of it (the JVM, the Python driver and its Python workers). Each application starts a
//! JVM (about 20 s on a loaded 2-core machine), so this is one test, and its three applications
//! run at once.
//!
//! The server runs `--single-tenant`: tasks run as the server's user, who can read the pyspark
//! that pip put in root's Python (a server that switches users needs Spark and Python readable
//! by the task user; docs/backends.md).

mod common;

use common::{client_in_data as client, ok, Serve};

#[path = "../../weir-backend-spark/tests/standalone/mod.rs"]
mod standalone;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn eventually(dir: &Path, what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        if start.elapsed() > Duration::from_secs(300) {
            let log = std::fs::read_to_string(dir.join("serve.log")).unwrap_or_default();
            panic!("timed out waiting for {what}; the server said:\n{log}");
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// `weir serve --config server.yaml ARGS` in `dir`, its stderr in `serve.log`.
fn serve(dir: &Path, args: &[&str]) -> Serve {
    let log = std::fs::File::create(dir.join("serve.log")).expect("log");
    Serve(
        Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(["serve", "--config", "server.yaml"])
            .args(args)
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("weir serve"),
    )
}

/// `weir backends --config server.yaml ARGS` in `dir`: the backends asked directly.
fn backends_direct(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["backends", "--config", "server.yaml"])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("weir backends")
}

fn run_of(dir: &Path, port: u16, workflow: &str) -> Option<Value> {
    let out = client(dir, port, &["runs", "--json"]);
    let runs: Value = serde_json::from_slice(&out.stdout).ok()?;
    runs["runs"].as_array()?.iter().find(|r| r["workflow"] == workflow).cloned()
}

fn state_of(dir: &Path, port: u16, workflow: &str) -> String {
    run_of(dir, port, workflow).and_then(|r| r["state"].as_str().map(String::from)).unwrap_or_default()
}

/// Processes whose command line mentions `marker`.
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
        "  - name: {name}\n    jobs:\n      - name: j\n        stages:\n          - name: count\n            tasks: 1\n            max_attempts: 1\n            resources: {{cpu: 1000, memory: 3g}}\n            spark: {{main: '{main}', args: [{args}], executors: 1, conf: {{spark.sql.shuffle.partitions: '2'}}}}\n"
    )
}

#[test]
fn a_pyspark_word_count_runs_from_submit_to_logs_and_kill_leaves_no_driver() {
    let scratch = common::Scratch::new("serve-spark");
    let dir = scratch.0.clone();
    let port = common::free_port();
    std::fs::create_dir_all(dir.join("clusters")).expect("mkdir");
    scratch.file(
        "clusters/spark.yaml",
        "version: 1\nnodes:\n  - {count: 1, resources: {cpu: 4000, memory: 12g}}\nqueues:\n  - {name: default}\n",
    );
    scratch.file(
        "server.yaml",
        &format!(
            "version: 1\nlisten: 127.0.0.1:{port}\ndata_dir: data\nclusters:\n  - name: spark\n    file: clusters/spark.yaml\n    backend:\n      kind: spark-local\n      kill_grace_seconds: 2\n      conf: {{spark.ui.enabled: 'false', spark.driver.extraJavaOptions: '{}'}}\n",
            standalone::test_jvm_options()
        ),
    );
    // Before a server runs: the backend is asked directly.
    let health = ok(&backends_direct(&dir, &["--single-tenant"]));
    // Read by word: the kind column's width follows the longest kind's name.
    let row: Vec<&str> =
        health.lines().find(|l| l.starts_with("spark ")).unwrap_or_default().split_whitespace().collect();
    assert!(
        row.get(1..3) == Some(&["spark-local", "healthy"][..]) && health.contains("Spark 4."),
        "{health}"
    );

    let _serve = serve(&dir, &["--single-tenant"]);
    let examples = common::workspace().join("examples/spark").canonicalize().expect("examples/spark");
    let script = examples.join("wordcount.py").display().to_string();
    let words = examples.join("words.txt").display().to_string();
    let route = |name: &str| {
        client(
            &dir,
            port,
            &["routes", "set", &format!("workflow:{name}"), "--cluster", "spark", "--queue", "root.default"],
        )
        .status
        .success()
    };
    eventually(&dir, "the server", || route("wordcount"));
    assert!(route("sleeper") && route("fails"));

    // Three applications at once (the cluster holds four 1-core drivers; each JVM is a process
    // tree of its own, so they only share the machine's CPU): the word count, to its end; a
    // second one that waits after counting, to be killed; a driver that fails.
    scratch
        .file("wc.yaml", &format!("version: 1\nworkflows:\n{}", workflow("wordcount", &script, &[&words])));
    // The sleeper: a copy of the script at a path of its own, so that every process of it can
    // be found by that path.
    let marker = dir.join("sleeper.py");
    std::fs::copy(&script, &marker).expect("copy the script");
    let marker = marker.display().to_string();
    scratch.file(
        "sleeper.yaml",
        &format!("version: 1\nworkflows:\n{}", workflow("sleeper", &marker, &[&words, "600"])),
    );
    // The failing driver (crates/weir-backend-spark/tests/data/fails.py): the first attempt
    // raises (Python exits 1), the second exits 3. spark-submit exits with the Python driver's
    // status (`PythonRunner` throws `SparkUserAppException(code)`, `SparkSubmit.doSubmit` exits
    // with its `exitCode`), so each attempt fails with its own code; max_attempts 2 runs it twice
    // and no more; each attempt's output is in `weir logs --attempt N`.
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
    for file in ["wc.yaml", "sleeper.yaml", "fails.yaml"] {
        ok(&client(&dir, port, &["submit", file]));
    }

    eventually(&dir, "the word count to end", || {
        matches!(state_of(&dir, port, "wordcount").as_str(), "succeeded" | "failed")
    });
    let run = run_of(&dir, port, "wordcount").expect("the run");
    let id = run["id"].to_string();
    let driver = ok(&client(&dir, port, &["logs", &id, "count.0", "--stream", "stderr"]));
    assert_eq!(run["state"], "succeeded", "{driver}");
    // Counted by hand from examples/spark/words.txt.
    let out = ok(&client(&dir, port, &["logs", &id, "count.0"]));
    assert!(out.starts_with("the\t9\nweir\t5\nwork\t3\n") && out.ends_with("total 34\n"), "{out}");
    // The driver's own log: Spark's, for the application named after the attempt, in local mode.
    assert!(driver.contains(&format!("Submitted application: weir:run-{id}/")), "{driver}");

    // Kill the sleeper once it has counted: every process of it goes.
    eventually(&dir, "the sleeper to count", || {
        run_of(&dir, port, "sleeper").is_some_and(|r| {
            let out = client(&dir, port, &["logs", &r["id"].to_string(), "count.0"]);
            common::text(&out.stdout).contains("total 34")
        })
    });
    let running = processes_with(&marker);
    assert!(running.iter().any(|p| p.contains("python")), "no Python driver: {running:?}");
    assert!(running.iter().any(|p| p.contains("java")), "no JVM: {running:?}");
    let sleeper = run_of(&dir, port, "sleeper").expect("the sleeper run");
    ok(&client(&dir, port, &["kill", &sleeper["id"].to_string()]));
    eventually(&dir, "the sleeper run to be killed", || state_of(&dir, port, "sleeper") == "killed");
    let left = processes_with(&marker);
    assert!(left.is_empty(), "processes of the killed application left: {left:?}");

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
    // PythonRunner merges the Python driver's stderr into its stdout.
    let first = ok(&client(&dir, port, &["logs", &id, "count.0", "--attempt", "1"]));
    assert!(first.contains("RuntimeError: weir test: the driver raises"), "attempt 1: {first}");
    let second = ok(&client(&dir, port, &["logs", &id, "count.0", "--attempt", "2"]));
    assert!(second.contains("a later attempt, exiting 3"), "attempt 2: {second}");
}

/// No Spark where the server file says: `weir backends --config` says so and exits 1; the
/// running server marks the cluster unhealthy with the reason, and a run routed to it waits in
/// the store instead of failing. No JVM starts.
#[test]
fn a_spark_home_without_spark_is_an_unhealthy_cluster_with_the_reason_and_runs_wait() {
    let scratch = common::Scratch::new("serve-spark-missing");
    let dir = scratch.0.clone();
    let port = common::free_port();
    std::fs::create_dir_all(dir.join("clusters")).expect("mkdir");
    scratch.file(
        "clusters/spark.yaml",
        "version: 1\nnodes:\n  - {count: 1, resources: {cpu: 4000, memory: 8g}}\nqueues:\n  - {name: default}\n",
    );
    scratch.file(
        "server.yaml",
        &format!(
            "version: 1\nlisten: 127.0.0.1:{port}\ndata_dir: data\nclusters:\n  - name: nospark\n    file: clusters/spark.yaml\n    backend: {{kind: spark-local, spark_home: no-spark-here}}\n"
        ),
    );
    let out = backends_direct(&dir, &[]);
    let direct = common::text(&out.stdout);
    // The path as the file gives it, from the file's folder (here the working folder).
    let missing = "no-spark-here/bin/spark-submit";
    assert!(
        !out.status.success()
            && direct.contains("unhealthy")
            && direct.contains("no Spark found")
            && direct.contains(missing),
        "{direct}"
    );
    let _serve = serve(&dir, &["--single-tenant"]);
    eventually(&dir, "the server", || {
        client(
            &dir,
            port,
            &["routes", "set", "workflow:wordcount", "--cluster", "nospark", "--queue", "root.default"],
        )
        .status
        .success()
    });
    scratch.file("wc.yaml", &format!("version: 1\nworkflows:\n{}", workflow("wordcount", "/x/wc.py", &[])));
    ok(&client(&dir, port, &["submit", "wc.yaml"]));
    eventually(&dir, "the cluster to be seen unhealthy", || {
        let view = common::text(&client(&dir, port, &["backends"]).stdout);
        view.lines().any(|l| {
            l.starts_with("nospark ")
                && l.contains("unhealthy")
                && l.contains("the spark-local backend is unavailable: no Spark found")
        })
    });
    let state = state_of(&dir, port, "wordcount");
    assert!(!state.is_empty() && !matches!(state.as_str(), "succeeded" | "failed" | "killed"), "{state}");
}

/// A root server runs tasks as `weir-task`; a Spark it found in a folder that user cannot search
/// (pip's `pyspark` in root's own Python, under a 0700 `/root`) would fail every attempt at
/// `exec` with 126 and an empty log. Instead `weir backends --config` and the running server
/// show the cluster unhealthy, naming the user and the folder with its mode; the submitted run
/// waits; once the folder is opened, the backend is set up and the run taken up (its stand-in
/// `spark-submit` exits 1, so it fails — as `weir-task`, with the exit code recorded).
#[test]
fn a_spark_the_task_user_cannot_reach_is_an_unhealthy_cluster_naming_the_folder() {
    if !rustix::process::geteuid().is_root() {
        if std::env::var("WEIR_SKIP_ROOT_TESTS").as_deref() == Ok("1") {
            eprintln!("\n*** SKIPPED: a root server's task user (not root, WEIR_SKIP_ROOT_TESTS=1) ***\n");
            return;
        }
        panic!("this test runs `weir serve` as root (tasks as weir-task): run it as root, as CI does, or set WEIR_SKIP_ROOT_TESTS=1");
    }
    use std::os::unix::fs::PermissionsExt;
    let scratch = common::Scratch::new("serve-spark-private");
    let dir = scratch.0.clone();
    let port = common::free_port();
    std::fs::create_dir_all(dir.join("clusters")).expect("mkdir");
    let private = dir.join("private");
    std::fs::create_dir_all(private.join("spark/bin")).expect("mkdir");
    std::fs::create_dir_all(private.join("spark/jars")).expect("mkdir");
    let submit = private.join("spark/bin/spark-submit");
    std::fs::write(&submit, "#!/bin/sh\necho stand-in >&2\nexit 1\n").expect("write");
    std::fs::set_permissions(&submit, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    // The scratch folder and everything above it searchable by all; `private` is not.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    scratch.file(
        "clusters/spark.yaml",
        "version: 1\nnodes:\n  - {count: 1, resources: {cpu: 4000, memory: 8g}}\nqueues:\n  - {name: default}\n  - {name: ads}\nrun_as: {ads: weir-test-ads}\n",
    );
    scratch.file(
        "server.yaml",
        &format!(
            "version: 1\nlisten: 127.0.0.1:{port}\ndata_dir: data\nclusters:\n  - name: sp\n    file: clusters/spark.yaml\n    backend: {{kind: spark-local, spark_home: private/spark, python: /usr/bin/python3}}\n"
        ),
    );
    let out = backends_direct(&dir, &[]);
    let direct = common::text(&out.stdout);
    let why = format!("may not search the folder {} (mode 0700", private.display());
    assert!(
        !out.status.success()
            && direct.contains("unhealthy")
            && direct.contains("the tasks' user `weir-task`")
            && direct.contains(&why),
        "{direct}"
    );
    let _serve = serve(&dir, &[]);
    eventually(&dir, "the server", || {
        client(&dir, port, &["routes", "set", "workflow:wc", "--cluster", "sp", "--queue", "root.default"])
            .status
            .success()
    });
    scratch.file("wc.yaml", &format!("version: 1\nworkflows:\n{}", workflow("wc", "/x/wc.py", &[])));
    ok(&client(&dir, port, &["submit", "wc.yaml"]));
    eventually(&dir, "the cluster to be seen unhealthy, naming the folder", || {
        let view = common::text(&client(&dir, port, &["backends"]).stdout);
        view.lines().any(|l| l.starts_with("sp ") && l.contains("unhealthy") && l.contains(&why))
    });
    assert_eq!(state_of(&dir, port, "wc"), "queued");
    // Opened: the supervisor sets the backend up again and the run is taken up.
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    eventually(&dir, "the run to be taken up and end", || state_of(&dir, port, "wc") == "failed");
    let id = run_of(&dir, port, "wc").and_then(|r| r["id"].as_i64()).expect("run id").to_string();
    let status = ok(&client(&dir, port, &["status", &id]));
    assert!(status.lines().any(|l| l.contains("j.count.0") && l.trim_end().ends_with("exit 1")), "{status}");
    let stderr = ok(&client(&dir, port, &["logs", &id, "j.count.0", "--stream", "stderr"]));
    assert!(stderr.contains("stand-in"), "{stderr}");

    // Spark private to `weir-task` now: the default user reaches it, project `ads`'s run_as user
    // does not. A Spark stage of `ads` fails at its start, and its stderr log says why (not an
    // exec failure with an empty log).
    let weir_task = std::fs::read_to_string("/etc/passwd")
        .expect("passwd")
        .lines()
        .find_map(|l| l.strip_prefix("weir-task:")?.split(':').nth(1)?.parse::<u32>().ok())
        .expect("the weir-task user");
    std::os::unix::fs::chown(&private, Some(weir_task), None).expect("chown");
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    ok(&client(&dir, port, &["routes", "set", "workflow:ads-wc", "--cluster", "sp", "--queue", "root.ads"]));
    scratch.file("ads.yaml", &format!("version: 1\nworkflows:\n{}", workflow("ads-wc", "/x/wc.py", &[])));
    ok(&client(&dir, port, &["submit", "ads.yaml"]));
    eventually(&dir, "the ads run to fail", || state_of(&dir, port, "ads-wc") == "failed");
    let id = run_of(&dir, port, "ads-wc").and_then(|r| r["id"].as_i64()).expect("run id").to_string();
    let stderr = ok(&client(&dir, port, &["logs", &id, "j.count.0", "--stream", "stderr"]));
    assert!(
        stderr.starts_with("weir: this attempt could not start: ")
            && stderr.contains("the tasks' user `weir-test-ads`")
            && stderr.contains(&why),
        "{stderr}"
    );
    // The cluster stays healthy: its default user still reaches Spark.
    let view = common::text(&client(&dir, port, &["backends"]).stdout);
    assert!(view.lines().any(|l| l.starts_with("sp ") && l.contains(" healthy")), "{view}");
}

/// A backend that turns unhealthy while a job waits shows as the job's wait reason: a Spark
/// home whose `bin/spark-submit` is a stand-in (the runs here are plain commands; the backend's
/// health check only looks for the file and Java, every 15 s). A run holds root.default's only
/// running-app slot; a second waits on `max_running_apps`; once `spark-submit` goes, the next
/// health check marks the cluster unhealthy and the waiting job's spell changes to
/// `backend_unhealthy` with the backend's own words (worker/waits.rs puts the backend's health
/// before the engine's reason), in the API and in `weir status`.
#[test]
fn a_backend_turning_unhealthy_is_the_reason_a_waiting_job_waits() {
    let scratch = common::Scratch::new("serve-spark-unhealthy");
    let dir = scratch.0.clone();
    let port = common::free_port();
    std::fs::create_dir_all(dir.join("clusters")).expect("mkdir");
    std::fs::create_dir_all(dir.join("spark/bin")).expect("mkdir");
    let submit = dir.join("spark/bin/spark-submit");
    std::fs::write(&submit, "#!/bin/sh\nexit 1\n").expect("write");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&submit, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    scratch.file(
        "clusters/spark.yaml",
        "version: 1\nnodes:\n  - {count: 1, resources: {cpu: 4000, memory: 8g}}\nqueues:\n  - {name: default, max_running_apps: 1}\n",
    );
    scratch.file(
        "server.yaml",
        &format!(
            "version: 1\nlisten: 127.0.0.1:{port}\ndata_dir: data\nclusters:\n  - name: sp\n    file: clusters/spark.yaml\n    backend: {{kind: spark-local, spark_home: spark}}\n"
        ),
    );
    let _serve = serve(&dir, &["--single-tenant"]);
    let release = dir.join("release");
    let plain = |name: &str, command: &str| {
        format!(
            "  - name: {name}\n    queue: root.default\n    jobs:\n      - name: j\n        stages:\n          - {{name: s, tasks: 1, resources: {{cpu: 1000, memory: 1g}}, command: \"{command}\"}}\n"
        )
    };
    let hold = format!("while [ ! -e {} ]; do sleep 0.2; done", release.display());
    scratch.file("holder.yaml", &format!("version: 1\nworkflows:\n{}", plain("holder", &hold)));
    scratch.file("second.yaml", &format!("version: 1\nworkflows:\n{}", plain("second", "true")));
    eventually(&dir, "the server", || client(&dir, port, &["runs"]).status.success());
    ok(&client(&dir, port, &["submit", "holder.yaml"]));
    eventually(&dir, "the holder to run", || state_of(&dir, port, "holder") == "running");
    ok(&client(&dir, port, &["submit", "second.yaml"]));
    let id = run_of(&dir, port, "second").and_then(|r| r["id"].as_i64()).expect("run id").to_string();
    let spells = |dir: &Path| -> Vec<Value> {
        let out = client(dir, port, &["status", &id, "--json"]);
        let run: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        run["jobs"][0]["waits"].as_array().cloned().unwrap_or_default()
    };
    eventually(&dir, "the second run to wait on max_running_apps", || {
        spells(&dir).first().is_some_and(|w| w["reason"] == "queue_max_running_apps")
    });
    // Spark goes away: the next health check (within 15 s) marks the backend unhealthy.
    std::fs::remove_file(&submit).expect("remove spark-submit");
    let mut last = Value::Null;
    eventually(&dir, "a spell on the unhealthy backend", || {
        last = spells(&dir).last().cloned().unwrap_or_default();
        last["reason"] == "backend_unhealthy"
    });
    let detail = last["detail"].as_str().unwrap_or_default();
    assert!(
        detail.starts_with("the spark-local backend is unhealthy: ") && detail.contains("spark-submit"),
        "{last}"
    );
    assert!(last.get("to_ms").is_none(), "still open: {last}");
    let all = spells(&dir);
    assert_eq!(all[0]["reason"], "queue_max_running_apps", "{all:?}");
    assert!(all[0]["to_ms"].as_i64().is_some(), "the first spell closed when the reason changed: {all:?}");
    let said = ok(&client(&dir, port, &["status", &id]));
    assert!(said.contains("the cluster's backend, unhealthy"), "{said}");
    std::fs::write(&release, "").expect("release");
}

/// A backend that cannot be set up at all keeps its cluster's runs queued — no engine actor runs
/// to take them up, so nothing records why they wait while they do. Once it can be set up, the
/// run is taken up and its wait until then becomes a closed `backend_unhealthy` spell from its
/// submission to that moment, with the backend's own words (worker/waits.rs `taken_up`, from
/// the status's `last_unhealthy`), before any spell of the engine's.
#[test]
fn a_run_queued_while_its_backend_cannot_be_set_up_records_that_wait() {
    let scratch = common::Scratch::new("serve-spark-setup-fails");
    let dir = scratch.0.clone();
    let port = common::free_port();
    std::fs::create_dir_all(dir.join("clusters")).expect("mkdir");
    // A Spark home without `bin/spark-submit`: the spark-local backend cannot be set up.
    std::fs::create_dir_all(dir.join("spark/bin")).expect("mkdir");
    scratch.file(
        "clusters/spark.yaml",
        "version: 1\nnodes:\n  - {count: 1, resources: {cpu: 4000, memory: 8g}}\nqueues:\n  - {name: default}\n",
    );
    scratch.file(
        "server.yaml",
        &format!(
            "version: 1\nlisten: 127.0.0.1:{port}\ndata_dir: data\nclusters:\n  - name: sp\n    file: clusters/spark.yaml\n    backend: {{kind: spark-local, spark_home: spark}}\n"
        ),
    );
    let _serve = serve(&dir, &["--single-tenant"]);
    scratch.file(
        "plain.yaml",
        "version: 1\nworkflows:\n  - name: plain\n    queue: root.default\n    jobs:\n      - name: j\n        stages:\n          - {name: s, tasks: 1, resources: {cpu: 1000, memory: 1g}, command: \"true\"}\n",
    );
    eventually(&dir, "the cluster to be seen unhealthy", || {
        let view = common::text(&client(&dir, port, &["backends"]).stdout);
        view.lines().any(|l| l.starts_with("sp ") && l.contains("unhealthy"))
    });
    ok(&client(&dir, port, &["submit", "plain.yaml"]));
    let run = run_of(&dir, port, "plain").expect("the run");
    assert_eq!(run["state"], "queued", "{run}");
    let submitted = run["submitted_ms"].as_i64().expect("submitted_ms");
    // Long enough queued to be a wait worth recording (a healthy worker takes a run up at once).
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(state_of(&dir, port, "plain"), "queued", "no worker can take it up yet");
    let submit = dir.join("spark/bin/spark-submit");
    std::fs::write(&submit, "#!/bin/sh\nexit 1\n").expect("write");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&submit, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    eventually(&dir, "the run to succeed once the backend is set up", || {
        state_of(&dir, port, "plain") == "succeeded"
    });
    let id = run["id"].as_i64().expect("id").to_string();
    let out = client(&dir, port, &["status", &id, "--json"]);
    let status: Value = serde_json::from_slice(&out.stdout).expect("status json");
    let waits = status["jobs"][0]["waits"].as_array().cloned().unwrap_or_default();
    let first = waits.first().cloned().unwrap_or_default();
    assert_eq!(first["reason"], "backend_unhealthy", "{waits:?}");
    assert_eq!(first["from_ms"].as_i64(), Some(submitted), "{first}");
    let to = first["to_ms"].as_i64().expect("closed");
    assert!(to - submitted >= 2500, "it waited at least as long as spark-submit was missing: {first}");
    let detail = first["detail"].as_str().unwrap_or_default();
    assert!(
        detail.starts_with(
            "queued until the cluster's worker took it up: the spark-local backend was unhealthy: "
        ) && detail.contains("spark-submit"),
        "{first}"
    );
    let said = ok(&client(&dir, port, &["status", &id]));
    assert!(said.contains("the cluster's backend, unhealthy"), "{said}");
}
