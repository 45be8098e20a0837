//! `weir serve` (API + worker) and `weir worker` (worker only).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use weir_api::{RunCreated, SubmitRun};
use weir_model::WorkloadFile;
use weir_server::{ClusterSource, Server, ServerConfig, Stop};

pub const DEMO_CLUSTER: &str = include_str!("../../../../examples/demo/cluster.yaml");
pub const DEMO_WORKLOAD: &str = include_str!("../../../../examples/demo/workload.yaml");

#[derive(Debug, Args)]
#[command(
    about = "Run the job-submission service: API, worker and live scheduler",
    long_about = "Run weir's job-submission service: the HTTP API on 127.0.0.1:8470, the worker that \
claims submitted runs, the live scheduler (the same engine `weir simulate` runs, in real time) \
and the local-process backend. Everything is kept under --data-dir (./weir-data): the SQLite \
store, task logs, and admin.token, the admin token created on first start (mode 0600) that the \
client commands use by default.\n\n\
With no --cluster, one node the size of this machine with a root.default queue. Ctrl-C stops at \
once and leaves running tasks running: the next start re-adopts them (--drain waits for them).\n\n\
Examples:\n  weir serve --demo                       # example workflows through tiered queues\n  \
weir serve --cluster examples/cluster.yaml\n  \
weir serve --db postgres://weir@127.0.0.1:5432/weir --listen 127.0.0.1:9000"
)]
pub struct ServeArgs {
    #[command(flatten)]
    common: Common,
    /// Where the API listens. Bind other than loopback only behind TLS you trust.
    #[arg(long, default_value = "127.0.0.1:8470", value_name = "ADDR")]
    listen: SocketAddr,
    /// Load the demo cluster (examples/demo/cluster.yaml) and submit the demo workflows
    /// (examples/demo/workload.yaml: `sleep` commands) once the server is up.
    #[arg(long)]
    demo: bool,
    /// Largest request body accepted, in bytes (larger: 413).
    #[arg(long, default_value_t = 1 << 20, value_name = "BYTES")]
    body_limit: usize,
}

#[derive(Debug, Args)]
#[command(
    about = "Run only the worker (no API): lease clusters, schedule and run tasks",
    long_about = "Run only the worker: take the lease of every cluster in the store that no other \
worker holds, and run its tasks. Several workers (or `weir serve` processes) share one PostgreSQL \
store: one owner per cluster at a time, and another takes over within --lease seconds of one \
dying.\n\nExample:\n  weir worker --db postgres://weir@127.0.0.1:5432/weir"
)]
pub struct WorkerArgs {
    #[command(flatten)]
    common: Common,
}

#[derive(Debug, Args)]
struct Common {
    /// Data directory: store (SQLite), logs, backend state, admin.token.
    #[arg(long, default_value = "weir-data", value_name = "DIR")]
    data_dir: PathBuf,
    /// The store: sqlite:///path/weir.db or postgres://user@host:port/db. Default: weir.db in
    /// the data directory.
    #[arg(long, value_name = "URL")]
    db: Option<String>,
    /// A cluster file to load, as FILE (named `default`) or NAME=FILE (repeatable).
    #[arg(long = "cluster", value_name = "[NAME=]FILE")]
    clusters: Vec<String>,
    /// Seconds a cluster's lease lasts without renewal (takeover time after a crash).
    #[arg(long, default_value_t = 10)]
    lease: u64,
    /// Seconds between SIGTERM and SIGKILL when a task is killed.
    #[arg(long, default_value_t = 10)]
    kill_grace: u64,
    /// On Ctrl-C, take no new work and wait for running tasks to end before stopping.
    #[arg(long)]
    drain: bool,
}

fn cluster_sources(args: &Common, demo: bool) -> Result<Vec<ClusterSource>> {
    let mut out = Vec::new();
    for c in &args.clusters {
        let (name, file) = match c.split_once('=') {
            Some((n, f)) => (n.to_string(), f.to_string()),
            None => ("default".to_string(), c.clone()),
        };
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            bail!("--cluster {c}: a cluster name is letters, digits, `-` and `_`");
        }
        let yaml =
            std::fs::read_to_string(&file).with_context(|| format!("--cluster: cannot read {file}"))?;
        out.push(ClusterSource { name, yaml, file });
    }
    if demo && out.is_empty() {
        out.push(ClusterSource {
            name: "default".into(),
            yaml: DEMO_CLUSTER.into(),
            file: "built-in examples/demo/cluster.yaml".into(),
        });
    }
    Ok(out)
}

fn machine_cluster() -> ClusterSource {
    let cpus = std::thread::available_parallelism().map(|n| n.get() as u64).unwrap_or(1);
    let mem_mib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| m.lines().find(|l| l.starts_with("MemTotal:")).map(str::to_string))
        .and_then(|l| l.split_whitespace().nth(1).and_then(|kb| kb.parse::<u64>().ok()))
        .map(|kb| kb / 1024)
        .unwrap_or(1024);
    ClusterSource {
        name: "default".into(),
        yaml: weir_server::default_cluster_yaml(cpus * 1000, mem_mib),
        file: "built-in one-node cluster".into(),
    }
}

fn config(common: &Common, listen: Option<SocketAddr>, demo: bool) -> Result<ServerConfig> {
    std::fs::create_dir_all(&common.data_dir)
        .with_context(|| format!("--data-dir: cannot create {}", common.data_dir.display()))?;
    let data_dir = std::fs::canonicalize(&common.data_dir)
        .with_context(|| format!("--data-dir: cannot resolve {}", common.data_dir.display()))?;
    let db = common.db.clone().unwrap_or_else(|| format!("sqlite://{}", data_dir.join("weir.db").display()));
    let mut c = ServerConfig::new(data_dir, db);
    c.listen = listen;
    c.clusters = cluster_sources(common, demo)?;
    c.lease = Duration::from_secs(common.lease.max(1));
    c.kill_grace = Duration::from_secs(common.kill_grace);
    Ok(c)
}

pub fn serve(args: &ServeArgs) -> Result<()> {
    let mut c = config(&args.common, Some(args.listen), args.demo)?;
    c.body_limit = args.body_limit;
    run(c, &args.common, args.demo)
}

pub fn worker(args: &WorkerArgs) -> Result<()> {
    let c = config(&args.common, None, false)?;
    run(c, &args.common, false)
}

fn run(mut c: ServerConfig, common: &Common, demo: bool) -> Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    rt.block_on(async move {
        let data_dir = c.data_dir.clone();
        let fresh = c.clusters.is_empty() && !has_store(&c.db_url, &data_dir);
        if fresh {
            c.clusters.push(machine_cluster());
        }
        let server = Server::start(c.clone()).await.context("weir serve could not start")?;
        if let Some(addr) = server.addr {
            eprintln!("weir serve: listening on http://{addr}, data in {}", data_dir.display());
        } else {
            eprintln!("weir worker: running (owner {}), data in {}", c.owner, data_dir.display());
        }
        if server.created_admin_token.is_some() {
            eprintln!(
                "weir serve: created an admin token in {} (readable only by you); client commands use it",
                weir_server::admin_token_path(&data_dir).display()
            );
        }
        if demo {
            if let Some(addr) = server.addr {
                tokio::spawn(submit_demo(addr, data_dir.clone()));
            }
        }
        tokio::signal::ctrl_c().await.context("cannot wait for Ctrl-C")?;
        let how = if common.drain { Stop::Drain } else { Stop::Now };
        eprintln!(
            "weir serve: stopping{}",
            if how == Stop::Drain {
                " once running tasks end (Ctrl-C again to stop now)"
            } else {
                "; running tasks keep running and are re-adopted at the next start"
            }
        );
        tokio::select! {
            _ = server.shutdown(how) => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        Ok(())
    })
}

fn has_store(url: &str, data_dir: &Path) -> bool {
    !url.starts_with("sqlite:") || data_dir.join("weir.db").exists()
}

/// Submit the demo workload through the API: one run per `at` entry, at that offset, with
/// logical dates `demo-1`, `demo-2`, ….
async fn submit_demo(addr: SocketAddr, data_dir: PathBuf) {
    let Ok(token) = std::fs::read_to_string(weir_server::admin_token_path(&data_dir)) else {
        eprintln!("weir serve --demo: no admin.token to submit with");
        return;
    };
    let Ok(workload) = weir_model::parse_yaml::<WorkloadFile>("demo", DEMO_WORKLOAD) else { return };
    let mut plan: Vec<(u64, usize, usize)> = Vec::new();
    for (w, wf) in workload.workflows.iter().enumerate() {
        for (i, at) in wf.at.clone().unwrap_or_default().iter().enumerate() {
            plan.push((at.as_millis(), w, i));
        }
    }
    plan.sort();
    let http = reqwest::Client::new();
    let start = std::time::Instant::now();
    for (at, w, i) in plan {
        let due = Duration::from_millis(at);
        if let Some(wait) = due.checked_sub(start.elapsed()) {
            tokio::time::sleep(wait).await;
        }
        let wf = &workload.workflows[w];
        let body = SubmitRun {
            workflow: serde_json::to_value(wf).ok(),
            workflow_name: None,
            logical_date: Some(format!("demo-{}", i + 1)),
            params: Default::default(),
        };
        let resp =
            http.post(format!("http://{addr}/v1/runs")).bearer_auth(token.trim()).json(&body).send().await;
        match resp {
            Ok(r) if r.status().is_success() => {
                if let Ok(c) = r.json::<RunCreated>().await {
                    eprintln!(
                        "weir serve --demo: submitted run {} of {} ({}) to {}",
                        c.id, c.workflow, c.logical_date, c.queue
                    );
                }
            }
            Ok(r) => {
                eprintln!("weir serve --demo: {} refused: {}", wf.name, r.text().await.unwrap_or_default())
            }
            Err(e) => eprintln!("weir serve --demo: cannot submit {}: {e}", wf.name),
        }
    }
    eprintln!("weir serve --demo: all submitted; try `weir runs`, `weir queues`, `weir status RUN`, `weir logs RUN TASK`");
}
