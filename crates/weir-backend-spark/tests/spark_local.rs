//! `spark-local` against a real Spark (the `pyspark` package; `.ci/run` installs it): a PySpark
//! word count runs to its end with its output in the attempt's log; a running application is
//! re-adopted by a new backend value (a restarted server) and killed with its whole process
//! group — JVM, Python driver and Python workers — leaving nothing behind. Each spark-submit
//! starts a JVM (about 20 s on a loaded 2-core machine), so the tests are few and the two
//! applications run at once.

#[path = "standalone/mod.rs"]
mod standalone;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::sync::mpsc;
use weir_backend::{Adopted, AttemptId, Backend, Exit, TaskExit, TaskLaunch};
use weir_backend_spark::{SparkError, SparkLocalBackend, SparkLocalConfig};
use weir_model::SparkSpec;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/spark").canonicalize().unwrap()
}

fn config(dir: &Path) -> SparkLocalConfig {
    let mut c = SparkLocalConfig::new(dir.join("state"));
    // Nothing listens on a port: the tests may run beside other drivers.
    c.conf.insert("spark.ui.enabled".into(), "false".into());
    c.conf.extend(standalone::test_jvm_conf());
    c
}

fn launch(dir: &Path, attempt: &str, app: SparkSpec) -> TaskLaunch {
    let name = attempt.replace('/', "+");
    TaskLaunch {
        attempt: AttemptId::new(attempt).unwrap(),
        command: String::new(),
        env: BTreeMap::new(),
        workdir: dir.join("work"),
        resources: weir_model::Resources { cpu: 1000, memory: 2048, gpu: 0 },
        user: None,
        stdout: dir.join("logs").join(format!("{name}.out")),
        stderr: dir.join("logs").join(format!("{name}.err")),
        spark: Some(app),
    }
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

fn tempdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("weir-spark-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pyspark_word_count_runs_and_a_readopted_application_is_killed_with_its_whole_group() {
    let dir = tempdir("run");
    let (tx, mut rx) = mpsc::unbounded_channel();
    let backend =
        SparkLocalBackend::new(config(&dir), tx.clone()).await.expect("Spark is installed (.ci/run)");
    let words = examples().join("words.txt").display().to_string();
    let app = SparkSpec {
        main: examples().join("wordcount.py").display().to_string(),
        jar: None,
        args: vec![words.clone()],
        conf: BTreeMap::from([("spark.sql.shuffle.partitions".into(), "2".into())]),
        executors: Some(2),
    };
    let task = launch(&dir, "run-1/0/0/0/1", app.clone());
    // A second application that waits after counting, started beside the first (each is a
    // process group of its own; on 2 cores they only share the CPU): a copy of the script at a
    // path of its own, so that every process of it can be found by that path.
    let marker = dir.join("sleeper.py");
    std::fs::copy(examples().join("wordcount.py"), &marker).unwrap();
    let marker = marker.display().to_string();
    let sleeper = SparkSpec { main: marker.clone(), args: vec![words, "600".into()], ..app };
    let sleeping = launch(&dir, "run-1/0/0/0/2", sleeper);
    let launched = backend.start(&task).await.unwrap();
    assert_eq!(launched.backend, "spark-local");
    let launched_sleeper = backend.start(&sleeping).await.unwrap();

    let end = next_exit(&mut rx).await;
    let stderr = std::fs::read_to_string(&task.stderr).unwrap_or_default();
    assert_eq!((end.attempt.as_str(), end.exit), ("run-1/0/0/0/1", Exit::Code(0)), "{stderr}");
    let out = std::fs::read_to_string(&task.stdout).unwrap();
    // Counted by hand from examples/spark/words.txt.
    assert!(out.starts_with("the\t9\nweir\t5\nwork\t3\n"), "{out}");
    assert!(out.ends_with("total 34\n"), "{out}");
    // The driver log is Spark's own, from the master the backend chose.
    assert!(
        stderr.contains("Submitted application: weir:run-1/0/0/0/1"),
        "the application's name is the attempt id: {stderr}"
    );

    let (task, launched) = (sleeping, launched_sleeper);
    // Counted: the Python driver (and the JVM, and its Python workers) run.
    for _ in 0..600 {
        if std::fs::read_to_string(&task.stdout).is_ok_and(|o| o.contains("total 34")) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let running = processes_with(&marker);
    assert!(running.iter().any(|p| p.contains("python")), "no Python driver: {running:?}");
    assert!(running.iter().any(|p| p.contains("java")), "no JVM: {running:?}");

    // A restarted server: a new backend value re-adopts the application by its record.
    drop(backend);
    let (tx2, mut rx2) = mpsc::unbounded_channel();
    let backend = SparkLocalBackend::new(config(&dir), tx2).await.unwrap();
    assert_eq!(backend.adopt(&launched).await.unwrap(), Adopted::Running);
    backend.kill(&launched, Duration::from_secs(5)).await.unwrap();
    assert_eq!(next_exit(&mut rx2).await.exit, Exit::Killed);
    let left = processes_with(&marker);
    assert!(left.is_empty(), "processes left after the kill: {left:?}");
    drop(tx);
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test]
async fn a_spark_home_without_spark_submit_is_a_clear_error() {
    let dir = tempdir("bad");
    let mut c = config(&dir);
    c.spark_home = Some(dir.join("no-spark"));
    let (tx, _rx) = mpsc::unbounded_channel();
    let err = SparkLocalBackend::new(c, tx).await.err().expect("no Spark there");
    assert!(matches!(err, SparkError::NoSpark { .. }), "{err}");
    let text = err.to_string();
    assert!(text.contains(&dir.join("no-spark/bin/spark-submit").display().to_string()), "{text}");
    // A Python without pyspark, and no spark_home: the error says what to install. (A stand-in
    // interpreter that answers the backend's question as a Python without pyspark does.)
    let python = dir.join("python-without-pyspark");
    std::fs::write(&python, "#!/bin/sh\necho /usr/bin/python3\necho\n").unwrap();
    std::fs::set_permissions(&python, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut c = config(&dir);
    c.python = Some(python);
    let (tx, _rx) = mpsc::unbounded_channel();
    let err = SparkLocalBackend::new(c, tx).await.err().expect("no pyspark there");
    assert!(err.to_string().contains("has no `pyspark` package (pip install pyspark"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}
