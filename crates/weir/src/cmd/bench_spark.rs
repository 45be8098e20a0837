//! `weir bench serve --backend spark-local | spark-standalone`: dispatch of one-task Spark
//! applications through `weir serve`, beside the same applications started by hand.
//!
//! weir: an in-process server (SQLite, worker on, one trusted tenant: the tasks run as the
//! server's user, who can read the `pyspark` pip installed) whose one cluster runs on a Spark
//! backend and holds `--spark-concurrency` applications at once; `--spark-apps` runs, each one
//! task whose stage is the Spark application, are submitted, and the clock stops when every
//! one has succeeded. Direct (`spark-local` only): the same applications through the same
//! `spark-submit --master local[1]`, the same properties and the same variables, `concurrency`
//! at a time, with nothing of weir between; the difference is weir's cost per application. A
//! standalone master is not started here: give its gateway (`--spark-master-rest`).
//!
//! CPU is read from `/proc/self/stat` around each phase: the process's own (in the weir phase:
//! the server, its store, engine and API, and the bench's HTTP client) and its waited-for
//! children's (spark-submit's JVM and Python processes, reaped by the local backend or by the
//! direct phase); a JVM's start is most of an application's cost, and it shows there.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use weir_server::{BackendSettings, ClusterSource, Server, ServerConfig, Stop};

use super::bench_serve::{any_open, count_succeeded, ServeBench};
use crate::emit;

/// The process's CPU so far, in seconds: its own, and its reaped children's.
#[derive(Clone, Copy, Debug, Default)]
struct Cpu {
    own: f64,
    children: f64,
}

impl Cpu {
    /// `/proc/self/stat` fields 14–17 (utime, stime, cutime, cstime), in clock ticks.
    fn now(tick: f64) -> Cpu {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
        // The command name (field 2) may hold spaces: count from its closing parenthesis.
        let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
        let f: Vec<f64> = rest.split_whitespace().map(|w| w.parse().unwrap_or(0.0)).collect();
        let at = |i: usize| f.get(i - 3).copied().unwrap_or(0.0) / tick;
        Cpu { own: at(14) + at(15), children: at(16) + at(17) }
    }

    fn since(self, before: Cpu) -> Cpu {
        Cpu { own: self.own - before.own, children: self.children - before.children }
    }
}

/// Clock ticks per second (`getconf CLK_TCK`; Linux's usual 100 if that fails).
fn clock_tick() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .next()
        .unwrap_or("?")
        .to_string()
}

/// One phase's figures.
struct Phase {
    secs: f64,
    cpu: Cpu,
    load: (String, String),
    /// Through weir: where each application's wall time went, from the store.
    split: Option<Split>,
}

/// Where the time of the weir phase went, from the attempts' records: the application itself
/// (the backend's `start` answered → its end reported, the driver's whole life as the backend
/// sees it) against weir's part between applications (one attempt's end reported → the next
/// one's `start` answered: the record, the engine's pass, the submission).
struct Split {
    /// Mean seconds from `start` answered to the end reported.
    app_s: f64,
    /// With one application at a time: the mean milliseconds from one end to the next start
    /// answered, and the largest.
    gap_ms: Option<(f64, f64)>,
}

/// [`Split`] of runs `1..=n` (the bench's fresh store numbers them so), each one task.
async fn split(store: &dyn weir_store::JobStore, n: u32, at_once: u32) -> Result<Split> {
    let mut spans = Vec::new(); // (start answered, end reported), ms
    for run in 1..=i64::from(n) {
        for a in store.attempts(run, 0, 0, 0).await? {
            let started = a
                .launched
                .as_deref()
                .and_then(|l| serde_json::from_str::<Value>(l).ok())
                .and_then(|l| l["started_at_ms"].as_i64());
            if let (Some(s), Some(e)) = (started, a.ended_ms) {
                spans.push((s, e));
            }
        }
    }
    if spans.is_empty() {
        bail!("the bench's store holds no ended attempt with a start record");
    }
    spans.sort();
    let app_s = spans.iter().map(|(s, e)| (e - s) as f64 / 1000.0).sum::<f64>() / spans.len() as f64;
    let gaps: Vec<f64> = spans.windows(2).map(|w| (w[1].0 - w[0].1) as f64).collect();
    let gap_ms = (at_once == 1 && !gaps.is_empty()).then(|| {
        (gaps.iter().sum::<f64>() / gaps.len() as f64, gaps.iter().copied().fold(f64::MIN, f64::max))
    });
    Ok(Split { app_s, gap_ms })
}

pub fn run(a: &ServeBench, root: &Path) -> Result<()> {
    let standalone = match a.backend.as_str() {
        "spark-local" => false,
        "spark-standalone" => true,
        other => bail!("--backend: `{other}` is not a Spark backend"),
    };
    let n = a.spark_apps.max(1);
    let at_once = a.spark_concurrency.max(1);
    let main = std::path::absolute(&a.spark_main)
        .with_context(|| format!("--spark-main: {}", a.spark_main.display()))?;
    if !main.is_file() {
        bail!(
            "--spark-main: {} is not a file (run from the repository's root, or give the path)",
            main.display()
        );
    }
    let args: Vec<String> = a
        .spark_args
        .iter()
        .map(|s| match std::path::absolute(s) {
            Ok(p) if p.exists() => p.display().to_string(),
            _ => s.clone(),
        })
        .collect();
    let mut conf: BTreeMap<String, String> = BTreeMap::from([("spark.ui.enabled".into(), "false".into())]);
    for kv in &a.spark_conf {
        let (k, v) = kv.split_once('=').with_context(|| format!("--spark-conf: `{kv}` is not KEY=VALUE"))?;
        conf.insert(k.trim().to_string(), v.to_string());
    }
    let tick = clock_tick();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async {
        let mut out = String::new();
        let mut report = serde_json::Map::new();
        let direct = if standalone {
            None
        } else {
            let install = weir_backend_spark::Install::find(a.spark_home.as_deref(), None)
                .context("--backend spark-local: Spark for the direct runs")?;
            let dir = root.join("direct");
            let p = direct(&install, &dir, &main, &args, &conf, n, at_once, tick).await?;
            writeln!(
                out,
                "direct spark-submit --master local[1] ({at_once} at a time): {n} applications in {:.1} s = {:.3} apps/s, {:.1} s wall each at {at_once} at once; CPU per application {:.1} s (load {} -> {})",
                p.secs,
                n as f64 / p.secs,
                p.secs * at_once as f64 / n as f64,
                p.cpu.children / n as f64,
                p.load.0,
                p.load.1
            )?;
            report.insert(
                "direct".into(),
                json!({"apps": n, "at_once": at_once, "seconds": round(p.secs), "apps_per_s": round3(n as f64 / p.secs),
                       "cpu_per_app_s": round(p.cpu.children / n as f64)}),
            );
            Some(p)
        };
        let dir = root.join(format!("weir-{}", a.backend));
        let settings = if standalone {
            let url = a.spark_master_rest.clone().context(
                "--backend spark-standalone needs --spark-master-rest http://HOST:PORT (a running master's REST gateway)",
            )?;
            let mut c = weir_backend_spark::SparkStandaloneConfig::new(url, PathBuf::new());
            c.master_ui_url = a.spark_master_ui.clone();
            c.python = a.spark_python.clone();
            c.driver_python = a.spark_driver_python.clone();
            c.conf = conf.clone();
            c.poll_interval = Duration::from_millis(a.spark_poll_ms.max(50));
            BackendSettings::SparkStandalone { config: Box::new(c), nodes_refresh: None }
        } else {
            let mut c = weir_backend_spark::SparkLocalConfig::new(PathBuf::new());
            c.spark_home = a.spark_home.clone();
            c.conf = conf.clone();
            BackendSettings::SparkLocal { config: Box::new(c), kill_grace: None }
        };
        let p = through_weir(&dir, settings, standalone, &main, &args, n, at_once, tick).await?;
        // A standalone worker, not this process, starts and reaps the drivers: their CPU is
        // not seen here.
        let spark_cpu = if standalone {
            String::new()
        } else {
            format!("CPU per application {:.1} s (Spark's processes), ", p.cpu.children / n as f64)
        };
        writeln!(
            out,
            "weir serve, {} ({at_once} at a time): {n} one-task runs submitted and succeeded in {:.1} s = {:.3} tasks/s, {:.1} s wall each; {spark_cpu}weir's own CPU {:.0} ms per task (load {} -> {})",
            a.backend,
            p.secs,
            n as f64 / p.secs,
            p.secs * at_once as f64 / n as f64,
            p.cpu.own * 1000.0 / n as f64,
            p.load.0,
            p.load.1
        )?;
        let mut weir = json!({"backend": a.backend, "apps": n, "at_once": at_once, "seconds": round(p.secs),
                              "tasks_per_s": round3(n as f64 / p.secs), "weir_cpu_ms_per_task": round(p.cpu.own * 1000.0 / n as f64)});
        if let Some(sp) = &p.split {
            write!(out, "  each application, the backend's start answered -> its end reported: {:.2} s on average", sp.app_s)?;
            weir["app_s"] = json!(round(sp.app_s));
            if let Some((mean, max)) = sp.gap_ms {
                write!(out, "; weir between applications (an end reported -> the next start answered): {mean:.0} ms on average, {max:.0} ms at most")?;
                weir["between_apps_ms"] = json!({"mean": round(mean), "max": round(max)});
            }
            writeln!(out)?;
        }
        if !standalone {
            weir["cpu_per_app_s"] = json!(round(p.cpu.children / n as f64));
        }
        if let Some(d) = direct {
            let per_task = (p.secs - d.secs) / n as f64;
            writeln!(
                out,
                "weir / direct: {:.2} of the direct rate; {:+.2} s of wall time per application through weir",
                d.secs / p.secs,
                per_task
            )?;
            weir["over_direct"] = json!(round(d.secs / p.secs));
            weir["overhead_s_per_task"] = json!(round(per_task));
        }
        report.insert("weir".into(), weir);
        writeln!(out, "{}", Value::Object(report))?;
        emit(&out)
    })
}

fn round(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// `n` applications through spark-submit, `at_once` at a time, as the `spark-local` backend
/// starts them (its command line and variables), each one's output to files.
#[allow(clippy::too_many_arguments)]
async fn direct(
    install: &weir_backend_spark::Install,
    dir: &Path,
    main: &Path,
    args: &[String],
    conf: &BTreeMap<String, String>,
    n: u32,
    at_once: u32,
    tick: f64,
) -> Result<Phase> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let gate = std::sync::Arc::new(tokio::sync::Semaphore::new(at_once as usize));
    let (cpu0, load0, started) = (Cpu::now(tick), load_average(), Instant::now());
    let mut set = tokio::task::JoinSet::new();
    for i in 0..n {
        let mut cmd = std::process::Command::new(install.submit());
        cmd.args(["--master", "local[1]", "--name", &format!("weir-bench-direct-{i}")]);
        for (k, v) in conf {
            cmd.args(["--conf", &format!("{k}={v}")]);
        }
        cmd.arg(main).args(args).current_dir(dir).env("SPARK_HOME", &install.home);
        if let Some(py) = &install.python {
            cmd.env("PYSPARK_PYTHON", py).env("PYSPARK_DRIVER_PYTHON", py);
        }
        cmd.stdin(std::process::Stdio::null())
            .stdout(std::fs::File::create(dir.join(format!("{i}.out")))?)
            .stderr(std::fs::File::create(dir.join(format!("{i}.err")))?);
        let gate = gate.clone();
        set.spawn(async move {
            let _slot = gate.acquire_owned().await?;
            // A blocking wait on a thread of its own: the child is reaped here, so its CPU
            // counts in this process's children's.
            let status = tokio::task::spawn_blocking(move || cmd.status()).await??;
            if !status.success() {
                bail!("direct application {i} ended {status} (its log: direct/{i}.err)");
            }
            Ok(())
        });
    }
    while let Some(r) = set.join_next().await {
        r??;
    }
    let secs = started.elapsed().as_secs_f64();
    Ok(Phase { secs, cpu: Cpu::now(tick).since(cpu0), load: (load0, load_average()), split: None })
}

/// `n` runs of one Spark task through an in-process `weir serve`, all submitted at once; the
/// cluster holds `at_once` of them (a spark-local driver: 1 core; a standalone one: its core
/// and its executor's).
#[allow(clippy::too_many_arguments)]
async fn through_weir(
    dir: &Path,
    backend: BackendSettings,
    standalone: bool,
    main: &Path,
    args: &[String],
    n: u32,
    at_once: u32,
    tick: f64,
) -> Result<Phase> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let per_app_cpu = if standalone { 2000 } else { 1000 };
    let cluster = format!(
        "version: 1\nnodes:\n  - {{count: 1, resources: {{cpu: {}, memory: {}}}}}\nqueues:\n  - {{name: default}}\n",
        per_app_cpu * at_once,
        4096 * at_once
    );
    let mut c = ServerConfig::new(dir.to_path_buf());
    c.backends.insert("default".into(), backend);
    c.listen = Some("127.0.0.1:0".parse()?);
    c.tick = Duration::from_millis(50);
    c.tasks.single_tenant = true;
    c.clusters = vec![ClusterSource { name: "default".into(), yaml: cluster, file: "bench cluster".into() }];
    let store = weir_store::open(&format!("sqlite://{}", dir.join("weir.db").display())).await?;
    let server = Server::start(c, store.clone()).await?;
    let token = std::fs::read_to_string(weir_server::admin_token_path(dir))
        .context("the bench server wrote no admin token")?
        .trim()
        .to_string();
    let base = format!("http://{}", server.addr.context("not listening")?);
    let mut spark = json!({"main": main.display().to_string(), "args": args, "executors": 1});
    if standalone {
        // The driver's and the executor's JVMs as the standalone tests size them.
        spark["conf"] = json!({"spark.driver.memory": "1g", "spark.executor.memory": "1g"});
    }
    let wf = json!({"name": "bench-spark", "queue": "root.default",
        "jobs": [{"name": "j", "stages": [{"name": "s", "tasks": 1, "max_attempts": 1,
            "resources": {"cpu": 1000, "memory": 2048}, "spark": spark}]}]});
    let http = reqwest::Client::new();
    let (cpu0, load0, started) = (Cpu::now(tick), load_average(), Instant::now());
    for i in 0..n {
        let body = json!({"workflow": wf, "logical_date": format!("s-{i}")});
        http.post(format!("{base}/v1/runs"))
            .bearer_auth(&token)
            .json(&body)
            .send()
            .await?
            .error_for_status()?;
    }
    // Each application takes seconds: a poll every 250 ms costs nothing beside them.
    while any_open(&http, &base, &token).await? {
        if started.elapsed() > Duration::from_secs(3600) {
            let done = count_succeeded(&http, &base, &token).await?;
            bail!("only {done} of {n} Spark runs succeeded within an hour");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let secs = started.elapsed().as_secs_f64();
    let cpu = Cpu::now(tick).since(cpu0);
    let load1 = load_average();
    let done = count_succeeded(&http, &base, &token).await?;
    server.shutdown(Stop::Now).await;
    let split = split(store.as_ref(), n, at_once).await.ok();
    if done < n as usize {
        bail!(
            "{done} of {n} Spark runs succeeded; the others failed (their logs: `weir logs` against {}, or the task logs under it)",
            dir.display()
        );
    }
    Ok(Phase { secs, cpu, load: (load0, load1), split })
}
