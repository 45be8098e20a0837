//! `spark-standalone` against a real Spark standalone cluster: the test starts a master (with its
//! REST submission gateway, `spark.master.rest.enabled=true`) and one worker from the `pyspark`
//! package's distribution (`spark-class org.apache.spark.deploy.master.Master` / `…worker.Worker`)
//! on loopback ports, in a temporary folder, and stops them by their process groups.
//!
//! What is checked is Spark's protocol as its source defines it (`apache/spark`, core,
//! `org.apache.spark.deploy.rest.StandaloneRestServer`: `/v1/submissions/create`,
//! `/status/ID`, `/kill/ID`; `CreateSubmissionRequest`'s fields; `DriverState`; the worker's
//! `LogPage` served at `/log/`).
//!
//! One test, run in order: two drivers at once on 2 cores can starve each other (each holds a
//! core for its JVM, and the executors wait for the rest).

mod standalone;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use standalone::{driver_python, free_port, python, Cluster};
use tokio::sync::mpsc;
use weir_backend::{Adopted, AttemptId, Backend, Exit, Recovered, TaskExit, TaskLaunch};
use weir_backend_spark::{SparkError, SparkStandaloneBackend, SparkStandaloneConfig};
use weir_model::SparkSpec;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/spark").canonicalize().unwrap()
}

fn tempdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("weir-spark-sa-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn launch(dir: &Path, attempt: &str, args: Vec<String>) -> TaskLaunch {
    let name = attempt.replace('/', "+");
    TaskLaunch {
        attempt: AttemptId::new(attempt).unwrap(),
        command: String::new(),
        env: BTreeMap::new(),
        workdir: dir.join("work-weir"),
        resources: weir_model::Resources { cpu: 1000, memory: 2048, gpu: 0 },
        user: None,
        stdout: dir.join("logs").join(format!("{name}.out")),
        stderr: dir.join("logs").join(format!("{name}.err")),
        spark: Some(SparkSpec {
            main: examples().join("wordcount.py").display().to_string(),
            jar: None,
            args,
            conf: BTreeMap::from([
                ("spark.sql.shuffle.partitions".into(), "2".into()),
                ("spark.executor.memory".into(), "1g".into()),
                ("spark.driver.memory".into(), "1g".into()),
            ]),
            executors: Some(1),
        }),
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64
}

async fn next_exit(rx: &mut mpsc::UnboundedReceiver<TaskExit>) -> TaskExit {
    tokio::time::timeout(Duration::from_secs(300), rx.recv())
        .await
        .expect("no exit within 300 s")
        .expect("exit channel closed")
}

/// Processes whose command line mentions `marker`.
fn processes_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
        let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if text.contains(marker) {
            found.push(format!("{}: {}", entry.file_name().to_string_lossy(), text.trim()));
        }
    }
    found
}

fn config(cluster: &Cluster, dir: &Path) -> SparkStandaloneConfig {
    let mut c = SparkStandaloneConfig::new(&cluster.rest_url, dir.join("state"));
    c.master_ui_url = Some(cluster.ui_url.clone());
    c.python = Some(python());
    c.driver_python = Some(driver_python(dir).display().to_string());
    c.conf.insert("spark.ui.enabled".into(), "false".into());
    c.conf.extend(standalone::test_jvm_conf());
    c.poll_interval = Duration::from_millis(500);
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drivers_run_log_are_readopted_by_submission_id_and_killed_on_a_real_standalone_cluster() {
    let dir = tempdir("run");

    // Bad settings first (no cluster needed): a gateway where nothing listens.
    let (tx, _rx) = mpsc::unbounded_channel();
    let nobody = format!("http://127.0.0.1:{}", free_port());
    match SparkStandaloneBackend::connect(SparkStandaloneConfig::new(&nobody, dir.join("s0")), tx).await {
        Err(e @ SparkError::Master { .. }) => {
            assert!(e.to_string().contains(&nobody), "the error names the gateway: {e}")
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("connected to nothing"),
    }

    let cluster = Cluster::start(&dir);
    cluster.ready();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let backend = SparkStandaloneBackend::connect(config(&cluster, &dir), tx.clone())
        .await
        .expect("the gateway answers");
    let health = backend.health().await;
    assert!(health.healthy, "{health:?}");
    assert!(health.version.starts_with("Spark 4."), "{health:?}");
    assert_eq!(health.nodes, Some(1), "one alive worker: {health:?}");
    // `nodes: from_backend`: the worker as the master's /json/ reports it (`--cores 2 --memory 4g`).
    let nodes = backend.nodes().await.expect("a standalone master reports nodes").expect("read");
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    assert!(
        nodes[0].name.starts_with("worker-") && nodes[0].usable && nodes[0].state == "alive",
        "{nodes:?}"
    );
    assert_eq!(nodes[0].resources, weir_model::Resources { cpu: 2000, memory: 4096, gpu: 0 });

    // 1. The word count, to its end: FINISHED is exit 0 and the driver's stdout, copied from the
    //    worker's log page, is the attempt's stdout.
    let words = examples().join("words.txt").display().to_string();
    let one = launch(&dir, "run-1/wc/count/0/1", vec![words.clone()]);
    let before_one = now_ms();
    let launched = backend.start(&one).await.expect("submitted");
    assert_eq!(launched.backend, "spark-standalone");
    assert!(launched.boot_id.starts_with("driver-"), "the submission id is recorded: {launched:?}");
    // An attempt id starts once only.
    assert!(matches!(backend.start(&one).await, Err(weir_backend::BackendError::AlreadyStarted { .. })));
    let exit = next_exit(&mut rx).await;
    assert_eq!((exit.attempt.as_str(), exit.exit), ("run-1/wc/count/0/1", Exit::Code(0)));
    let out = std::fs::read_to_string(&one.stdout).unwrap();
    assert!(out.contains("weir\t5") && out.contains("total "), "driver stdout: {out:?}");
    let err = std::fs::read_to_string(&one.stderr).unwrap();
    assert!(err.contains("weir:run-1/wc/count/0/1"), "the driver's log names the application: {err:.2000}");
    backend.forget(&launched).await.unwrap();

    // 2. A driver that waits: the backend value is dropped (a server that stopped), a new one
    //    re-adopts it by the stored submission id — through `recover`, which reads the record
    //    written before `start` returned — and kills it: the driver's JVM and its Python process
    //    are gone afterwards, and nothing was submitted twice.
    let marker = dir.join(format!("words-{}.txt", std::process::id()));
    std::fs::copy(&words, &marker).unwrap();
    let two = launch(&dir, "run-2/wc/count/0/1", vec![marker.display().to_string(), "600".into()]);
    let first = backend.start(&two).await.expect("submitted");
    // Running once its Python process shows and its word count is out.
    for _ in 0..600 {
        let out = std::fs::read_to_string(&two.stdout).unwrap_or_default();
        if out.contains("total ") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(std::fs::read_to_string(&two.stdout).unwrap().contains("total "), "the driver ran");
    assert!(!processes_with(&marker.display().to_string()).is_empty(), "its Python driver runs");
    drop(backend);
    let (tx2, mut rx2) = mpsc::unbounded_channel();
    let again = SparkStandaloneBackend::connect(config(&cluster, &dir), tx2).await.unwrap();
    let recovered = match again.recover(&two.attempt).await.unwrap() {
        Recovered::Running(l) => l,
        other => panic!("not re-adopted: {other:?}"),
    };
    assert_eq!(recovered.boot_id, first.boot_id, "the same driver, not a new one");
    assert_eq!(again.adopt(&first).await.unwrap(), Adopted::Running);
    let before = std::fs::metadata(&two.stdout).unwrap().len();
    again.kill(&first, Duration::from_secs(5)).await.unwrap();
    let exit = next_exit(&mut rx2).await;
    assert_eq!(exit.exit, Exit::Killed);
    assert_eq!(
        std::fs::read_to_string(&two.stdout).unwrap().matches("total ").count(),
        1,
        "the output was not copied twice after the re-adoption ({before} bytes before the kill)"
    );
    let mut left = Vec::new();
    for _ in 0..60 {
        left = processes_with(&marker.display().to_string());
        left.extend(processes_with(&first.boot_id));
        if left.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(left.is_empty(), "processes left after the kill: {left:#?}");
    let state = cluster.master_json();
    assert_eq!(state.matches("\"id\" : \"driver-").count(), 2, "two drivers in all, none twice: {state}");

    // 3. An attempt that never started is not found (its task may run again safely).
    assert_eq!(again.recover(&AttemptId::new("run-3/x/y/0/1").unwrap()).await.unwrap(), Recovered::NotFound);

    // 4. A create whose answer never came: the record written before the request has no
    //    submission id. `recover` looks among the master's drivers for one with the same main
    //    class, started since the request, that no record claims. The first word count's record
    //    is gone (`forget` above), so its driver is that one: found, and ended with exit 0; a
    //    record written after every driver started finds none.
    let lost = |attempt: &str, asked_ms: u64| {
        let folder = dir.join("state").join(attempt.replace('/', "+"));
        std::fs::create_dir_all(&folder).unwrap();
        let record = serde_json::json!({
            "attempt": attempt, "submission": null, "asked_ms": asked_ms,
            "stdout": dir.join("logs").join("lost.out"), "stderr": dir.join("logs").join("lost.err"),
            "main_class": "org.apache.spark.deploy.PythonRunner",
        });
        std::fs::write(folder.join("submission.json"), record.to_string()).unwrap();
        AttemptId::new(attempt).unwrap()
    };
    let found = again.recover(&lost("run-4/wc/count/0/1", before_one)).await.unwrap();
    assert_eq!(found, Recovered::Ended(Exit::Code(0)), "the unclaimed driver of the lost answer");
    assert!(std::fs::read_to_string(dir.join("logs/lost.out")).unwrap().contains("total "));
    let none = again.recover(&lost("run-5/wc/count/0/1", now_ms())).await.unwrap();
    assert_eq!(none, Recovered::NotFound, "no driver started after the request");

    // 5. A driver that fails while no backend watches it (a server that is down): a later
    //    `recover` finds it FAILED and takes its exit code from its driver log — the master says
    //    only FAILED; the worker's `DriverWrapper` prints PythonRunner's
    //    `SparkUserAppException: User application exited with 3`.
    let fails = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/fails.py");
    let first_done = dir.join("fails-marker");
    std::fs::write(&first_done, "").unwrap(); // not the first attempt: exits 3
    let mut failing = launch(&dir, "run-6/f/s/0/2", vec![first_done.display().to_string()]);
    failing.spark.as_mut().unwrap().main = fails.display().to_string();
    let submitted = again.start(&failing).await.expect("submitted");
    drop(again);
    let ended = |state: &str| {
        let json: serde_json::Value = serde_json::from_str(&cluster.master_json()).unwrap_or_default();
        json["completeddrivers"]
            .as_array()
            .is_some_and(|d| d.iter().any(|d| d["id"] == submitted.boot_id.as_str() && d["state"] == state))
    };
    for _ in 0..600 {
        if ended("FAILED") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(ended("FAILED"), "the master reports the driver FAILED: {}", cluster.master_json());
    let (tx3, _rx3) = mpsc::unbounded_channel();
    let again = SparkStandaloneBackend::connect(config(&cluster, &dir), tx3).await.unwrap();
    assert_eq!(again.recover(&failing.attempt).await.unwrap(), Recovered::Ended(Exit::Code(3)));
    let err = std::fs::read_to_string(&failing.stderr).unwrap();
    assert!(err.contains("FAILED (exit code 3, from the driver's log)"), "{err}");
    let out = std::fs::read_to_string(&failing.stdout).unwrap();
    assert!(out.contains("a later attempt, exiting 3"), "{out}");

    // 6. The master goes away: the backend turns unhealthy with the gateway's address.
    drop(cluster);
    let health = again.health().await;
    assert!(!health.healthy, "{health:?}");
    assert!(health.error.as_deref().unwrap_or("").contains("REST gateway"), "{health:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The dispatch figure in BENCHMARKS.md (not a check; run it alone with `--ignored
/// --nocapture`): one-task word counts submitted one after another through the gateway; for
/// each, how long `start` took (the create request and the record written twice) and how long
/// the driver took from submission to its end as the poller saw it (the JVM's start, Spark's
/// context, executors, the Python driver).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement for BENCHMARKS.md, not a test"]
async fn dispatch_figure() {
    let runs: usize = std::env::var("WEIR_BENCH_RUNS").ok().and_then(|n| n.parse().ok()).unwrap_or(4);
    let dir = tempdir("bench");
    let cluster = Cluster::start(&dir);
    cluster.ready();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let backend = SparkStandaloneBackend::connect(config(&cluster, &dir), tx).await.unwrap();
    let words = examples().join("words.txt").display().to_string();
    let all = std::time::Instant::now();
    let (mut starts, mut ends) = (Vec::new(), Vec::new());
    for i in 0..runs {
        let l = launch(&dir, &format!("bench-{i}/j/s/0/1"), vec![words.clone()]);
        let t = std::time::Instant::now();
        backend.start(&l).await.unwrap();
        starts.push(t.elapsed());
        let exit = next_exit(&mut rx).await;
        assert_eq!(exit.exit, Exit::Code(0));
        ends.push(t.elapsed());
    }
    let ms = |d: &Duration| d.as_secs_f64() * 1000.0;
    let mean = |v: &[Duration]| v.iter().map(ms).sum::<f64>() / v.len() as f64;
    println!(
        "spark-standalone dispatch: {runs} one-task word counts in {:.1} s ({:.3} apps/s); start (create + records) mean {:.1} ms, max {:.1} ms; submission to end mean {:.1} s (min {:.1}, max {:.1})",
        all.elapsed().as_secs_f64(),
        runs as f64 / all.elapsed().as_secs_f64(),
        mean(&starts),
        starts.iter().map(ms).fold(0.0, f64::max),
        mean(&ends) / 1000.0,
        ends.iter().map(ms).fold(f64::MAX, f64::min) / 1000.0,
        ends.iter().map(ms).fold(0.0, f64::max) / 1000.0,
    );
    drop(cluster);
    let _ = std::fs::remove_dir_all(&dir);
}
