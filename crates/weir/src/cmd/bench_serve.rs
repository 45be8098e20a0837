//! `weir bench serve`: the job-submission service over loopback HTTP.
//!
//! Submissions: an in-process server with its worker off (so the measure is the API and the
//! store, not task execution), 1 and then 32 concurrent clients each submitting one-task runs
//! as fast as their answers come; every 201 means the run was committed (group commit,
//! `synchronous=FULL` on SQLite). Dispatch: a server with its worker on and the local backend;
//! runs of one `true` task are submitted, and the clock stops when every one has succeeded.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use serde_json::{json, Value};
use weir_server::{ClusterSource, Server, ServerConfig, Stop};

use crate::emit;

#[derive(Debug, Args)]
pub struct ServeBench {
    /// Submissions per client at 1 client.
    #[arg(long, default_value_t = 1000)]
    single: u32,
    /// Submissions per client at 32 clients.
    #[arg(long, default_value_t = 250)]
    per_client: u32,
    /// Runs of one `true` task for the dispatch measurement.
    #[arg(long, default_value_t = 2000)]
    dispatch: u32,
    /// Concurrent clients submitting the dispatch runs.
    #[arg(long, default_value_t = 32)]
    dispatch_clients: u32,
    /// Also measure on this PostgreSQL (each measurement in a new database). Default:
    /// $WEIR_TEST_POSTGRES_URL if set.
    #[arg(long, value_name = "URL")]
    postgres: Option<String>,
    /// Scratch directory (data dirs and SQLite files). Default: a new one under the system temp dir.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// The dispatch measurement's backend: `local` processes, or `slurm` (a real Slurm through
    /// slurmrestd; then only the dispatch is measured, into Slurm), or `spark-local` /
    /// `spark-standalone` (one-task Spark applications; spark-local also runs the same
    /// applications with spark-submit alone, for the cost of weir per application).
    #[arg(long, value_name = "KIND", default_value = "local")]
    pub(super) backend: String,
    /// slurmrestd's URL (`--backend slurm`).
    #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:6820")]
    slurm_url: String,
    /// The Slurm cluster's JWT key, to mint tokens (`--backend slurm`).
    #[arg(long, value_name = "FILE", default_value = "/var/lib/slurm/slurmctld/jwt_hs256.key")]
    slurm_jwt_key: PathBuf,
    /// The Slurm user jobs run as (`--backend slurm`).
    #[arg(long, value_name = "USER", default_value = "root")]
    slurm_user: String,
    /// The Slurm backend's poll interval in milliseconds (`--backend slurm`).
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    slurm_poll_ms: u64,
    /// Find the Slurm jobs' ends by listing every job each poll interval, without the end
    /// markers the job scripts leave (how weir polled before; for comparison).
    #[arg(long)]
    slurm_listing_only: bool,
    /// One-task Spark applications to run (`--backend spark-*`); each starts a JVM (seconds of
    /// CPU), so keep it small.
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub(super) spark_apps: u32,
    /// Spark applications at once (`--backend spark-*`): the bench cluster holds this many
    /// drivers (a spark-local one takes 1 core; a standalone one, 1 core and its executor's),
    /// and the direct runs go this many at a time.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub(super) spark_concurrency: u32,
    /// The application (`--backend spark-*`): a PySpark file.
    #[arg(long, value_name = "FILE", default_value = "examples/spark/wordcount.py")]
    pub(super) spark_main: PathBuf,
    /// Its arguments (repeat the flag; one that names an existing file is made absolute).
    #[arg(long, value_name = "ARG", default_values_t = ["examples/spark/words.txt".to_string()])]
    pub(super) spark_args: Vec<String>,
    /// A Spark property for every application, KEY=VALUE (repeat the flag);
    /// `spark.ui.enabled=false` is always set.
    #[arg(long, value_name = "KEY=VALUE")]
    pub(super) spark_conf: Vec<String>,
    /// A Spark distribution (`--backend spark-local`); default: the `pyspark` package's.
    #[arg(long, value_name = "DIR")]
    pub(super) spark_home: Option<PathBuf>,
    /// The standalone master's REST gateway, `http://HOST:PORT` (`--backend spark-standalone`;
    /// the master runs already, with `spark.master.rest.enabled=true`).
    #[arg(long, value_name = "URL")]
    pub(super) spark_master_rest: Option<String>,
    /// The standalone master's web UI (`--backend spark-standalone`); default: the gateway's
    /// host, port 8080.
    #[arg(long, value_name = "URL")]
    pub(super) spark_master_ui: Option<String>,
    /// The Python the workers run PySpark drivers with (`--backend spark-standalone`).
    #[arg(long, value_name = "PATH")]
    pub(super) spark_python: Option<String>,
    /// The program the workers start a PySpark driver with, when not `--spark-python`
    /// (`--backend spark-standalone`).
    #[arg(long, value_name = "PATH")]
    pub(super) spark_driver_python: Option<String>,
    /// The standalone backend's poll interval in milliseconds (`--backend spark-standalone`).
    #[arg(long, value_name = "MS", default_value_t = 500)]
    pub(super) spark_poll_ms: u64,
}

const CLUSTER: &str = "version: 1
nodes:
  - {count: 1, resources: {cpu: 1000000, memory: 1000000}}
queues:
  - {name: default}
";

struct Measure {
    per_s: f64,
    p50_ms: f64,
    p99_ms: f64,
    n: usize,
}

pub fn run(a: &ServeBench) -> Result<()> {
    if cfg!(debug_assertions) {
        eprintln!("warning: this is a debug build; measure with `cargo run --release -- bench serve`");
    }
    let root = match &a.dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("weir-bench-serve-{}", std::process::id())),
    };
    std::fs::create_dir_all(&root).with_context(|| format!("--dir: cannot create {}", root.display()))?;
    let pg = a.postgres.clone().or_else(|| std::env::var("WEIR_TEST_POSTGRES_URL").ok());
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    if a.backend.starts_with("spark-") {
        return super::bench_spark::run(a, &root);
    }
    let slurm = match a.backend.as_str() {
        "local" => None,
        "slurm" => {
            let auth = weir_backend_slurm::Auth::JwtKey {
                key_file: a.slurm_jwt_key.clone(),
                lifespan: Duration::from_secs(3600),
            };
            let mut c = weir_backend_slurm::SlurmConfig::new(a.slurm_url.clone(), a.slurm_user.clone(), auth);
            c.tag = format!("weirbench{}", std::process::id());
            c.poll_interval = Duration::from_millis(a.slurm_poll_ms.max(50));
            c.end_markers = !a.slurm_listing_only;
            Some(c)
        }
        other => bail!("--backend: `{other}` is none of local, slurm, spark-local, spark-standalone"),
    };
    if let Some(config) = slurm {
        return rt.block_on(async {
            let dir = root.join("dispatch-slurm");
            let url = format!("sqlite://{}", dir.join("weir.db").display());
            let (tasks_per_s, secs) =
                dispatch(&dir, &url, a.dispatch, a.dispatch_clients.max(1), Some(config)).await?;
            let mut out = String::new();
            writeln!(
                out,
                "dispatch (sqlite, slurm backend, {} clients): {} runs of `true` submitted and completed in {secs:.2} s = {tasks_per_s:.1} tasks/s",
                a.dispatch_clients, a.dispatch
            )?;
            let report = json!({"dispatch_slurm": {"runs": a.dispatch, "clients": a.dispatch_clients, "seconds": round(secs), "tasks_per_s": round(tasks_per_s)}});
            writeln!(out, "{report}")?;
            emit(&out)
        });
    }
    rt.block_on(async {
        let mut out = String::new();
        let mut report = serde_json::Map::new();
        let mut backends: Vec<(&str, Option<String>)> = vec![("sqlite", None)];
        match &pg {
            Some(url) => backends.push(("postgres", Some(url.clone()))),
            None => eprintln!("no --postgres (or WEIR_TEST_POSTGRES_URL): PostgreSQL is not measured"),
        }
        let mut seq = 0;
        for (name, admin) in &backends {
            for clients in [1u32, 32] {
                seq += 1;
                let dir = root.join(format!("{name}-{clients}"));
                let url = store_url(name, admin.as_deref(), &dir, seq).await?;
                let n = if clients == 1 { a.single } else { a.per_client };
                let m = submissions(&dir, &url, clients, n).await?;
                writeln!(
                    out,
                    "{name:<9} {clients:>2} client(s): {:>8.0} submissions/s, ack p50 {:.2} ms, p99 {:.2} ms ({} runs)",
                    m.per_s, m.p50_ms, m.p99_ms, m.n
                )?;
                report.insert(
                    format!("{name}_{clients}"),
                    json!({"submissions_per_s": round(m.per_s), "p50_ms": round(m.p50_ms), "p99_ms": round(m.p99_ms), "runs": m.n}),
                );
            }
        }
        let dir = root.join("dispatch");
        let url = format!("sqlite://{}", dir.join("weir.db").display());
        let (tasks_per_s, secs) = dispatch(&dir, &url, a.dispatch, a.dispatch_clients.max(1), None).await?;
        writeln!(
            out,
            "dispatch (sqlite, local backend, {} clients): {} runs of `true` submitted and completed in {secs:.2} s = {tasks_per_s:.0} tasks/s",
            a.dispatch_clients, a.dispatch
        )?;
        report.insert(
            "dispatch".into(),
            json!({"runs": a.dispatch, "clients": a.dispatch_clients, "seconds": round(secs), "tasks_per_s": round(tasks_per_s)}),
        );
        writeln!(out, "{}", Value::Object(report))?;
        emit(&out)
    })
}

fn round(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

async fn store_url(name: &str, admin: Option<&str>, dir: &Path, seq: u32) -> Result<String> {
    std::fs::create_dir_all(dir)?;
    match (name, admin) {
        ("postgres", Some(admin)) => {
            let db = format!("weir_bench_{}_{seq}", std::process::id());
            Ok(weir_store::create_postgres_database(admin, &db).await?)
        }
        _ => {
            let _ = std::fs::remove_file(dir.join("weir.db"));
            Ok(format!("sqlite://{}", dir.join("weir.db").display()))
        }
    }
}

async fn start(
    dir: &Path,
    url: &str,
    worker: bool,
    slurm: Option<weir_backend_slurm::SlurmConfig>,
) -> Result<(Server, String, String)> {
    let mut c = ServerConfig::new(dir.to_path_buf());
    if let Some(config) = slurm {
        c.backends.insert(
            "default".into(),
            weir_server::BackendSettings::Slurm {
                config: Box::new(config),
                kill_grace: None,
                shared_dir: None,
                refuse_when_unhealthy: false,
                nodes_refresh: None,
            },
        );
    }
    c.listen = Some("127.0.0.1:0".parse()?);
    c.worker = worker;
    c.tick = Duration::from_millis(50);
    c.clusters =
        vec![ClusterSource { name: "default".into(), yaml: CLUSTER.into(), file: "bench cluster".into() }];
    let store = weir_store::open(url).await?;
    let server = Server::start(c, store).await?;
    let token = std::fs::read_to_string(weir_server::admin_token_path(dir))
        .context("the bench server wrote no admin token")?
        .trim()
        .to_string();
    let base = format!("http://{}", server.addr.context("not listening")?);
    Ok((server, base, token))
}

fn workflow() -> Value {
    json!({"name": "bench", "queue": "root.default",
           "jobs": [{"name": "j", "stages": [{"name": "s", "tasks": 1, "resources": {"cpu": 100, "memory": 64}, "command": "true"}]}]})
}

async fn submissions(dir: &Path, url: &str, clients: u32, per_client: u32) -> Result<Measure> {
    let (server, base, token) = start(dir, url, false, None).await?;
    let http = reqwest::Client::new();
    let wf = workflow();
    let started = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for c in 0..clients {
        let (http, wf, base, token) = (http.clone(), wf.clone(), base.clone(), token.clone());
        set.spawn(async move {
            let mut lat = Vec::with_capacity(per_client as usize);
            for i in 0..per_client {
                let body = json!({"workflow": wf, "logical_date": format!("{c}-{i}")});
                let t = Instant::now();
                let r = http.post(format!("{base}/v1/runs")).bearer_auth(&token).json(&body).send().await?;
                if r.status().as_u16() != 201 {
                    bail!("submission answered {}: {}", r.status(), r.text().await.unwrap_or_default());
                }
                let _ = r.bytes().await?;
                lat.push(t.elapsed().as_secs_f64() * 1000.0);
            }
            Ok(lat)
        });
    }
    let mut lat = Vec::new();
    while let Some(r) = set.join_next().await {
        lat.extend(r??);
    }
    let wall = started.elapsed().as_secs_f64();
    server.shutdown(Stop::Now).await;
    lat.sort_by(f64::total_cmp);
    let q = |p: f64| lat[((lat.len() as f64 - 1.0) * p).round() as usize];
    Ok(Measure { per_s: lat.len() as f64 / wall, p50_ms: q(0.5), p99_ms: q(0.99), n: lat.len() })
}

async fn dispatch(
    dir: &Path,
    url: &str,
    runs: u32,
    clients: u32,
    slurm: Option<weir_backend_slurm::SlurmConfig>,
) -> Result<(f64, f64)> {
    std::fs::create_dir_all(dir)?;
    let _ = std::fs::remove_file(dir.join("weir.db"));
    let on_slurm = slurm.is_some();
    let (server, base, token) = start(dir, url, true, slurm).await?;
    let http = reqwest::Client::new();
    let mut wf = workflow();
    if on_slurm {
        // The shape of Slurm's own figure: one CPU, 16 MiB.
        wf["jobs"][0]["stages"][0]["resources"]["memory"] = json!(16);
    }
    let started = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for c in 0..clients {
        let (http, wf, base, token) = (http.clone(), wf.clone(), base.clone(), token.clone());
        let mine: Vec<u32> = (0..runs).filter(|i| i % clients == c).collect();
        set.spawn(async move {
            for i in mine {
                let body = json!({"workflow": wf, "logical_date": format!("d-{i}")});
                http.post(format!("{base}/v1/runs"))
                    .bearer_auth(&token)
                    .json(&body)
                    .send()
                    .await?
                    .error_for_status()?;
            }
            Ok::<(), anyhow::Error>(())
        });
    }
    while let Some(r) = set.join_next().await {
        r??;
    }
    // Wait until no run is open, polling with one-row reads: listing every succeeded run each
    // time would cost the server work that grows with the runs done, and slow what it measures.
    while any_open(&http, &base, &token).await? {
        if started.elapsed() > Duration::from_secs(600) {
            let done = count_succeeded(&http, &base, &token).await?;
            bail!("dispatch: only {done} of {runs} runs succeeded within 600 s");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let secs = started.elapsed().as_secs_f64();
    let done = count_succeeded(&http, &base, &token).await?;
    if done < runs as usize {
        bail!("dispatch: {done} of {runs} runs succeeded; the others ended otherwise");
    }
    server.shutdown(Stop::Now).await;
    Ok((runs as f64 / secs, secs))
}

/// Whether any run is still queued, waiting or running (one one-row page per state).
pub(super) async fn any_open(http: &reqwest::Client, base: &str, token: &str) -> Result<bool> {
    for state in ["queued", "routed", "waiting", "running"] {
        let url = format!("{base}/v1/runs?state={state}&limit=1");
        let v: Value = http.get(url).bearer_auth(token).send().await?.error_for_status()?.json().await?;
        if v["runs"].as_array().is_some_and(|r| !r.is_empty()) {
            return Ok(true);
        }
    }
    Ok(false)
}

pub(super) async fn count_succeeded(http: &reqwest::Client, base: &str, token: &str) -> Result<usize> {
    let mut n = 0;
    let mut cursor: Option<String> = None;
    loop {
        let mut url = format!("{base}/v1/runs?state=succeeded&limit=1000");
        if let Some(c) = &cursor {
            url += &format!("&cursor={c}");
        }
        let v: Value = http.get(url).bearer_auth(token).send().await?.json().await?;
        n += v["runs"].as_array().map(Vec::len).unwrap_or(0);
        match v["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return Ok(n),
        }
    }
}
