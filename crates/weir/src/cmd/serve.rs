//! `weir serve` (API + worker) and `weir worker` (worker only).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use weir_api::{RunCreated, SubmitRun};
use weir_model::WorkloadFile;
use weir_server::{ClusterSource, Server, ServerConfig, Stop};

use super::serve_config;

const DEFAULT_LISTEN: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 8470);

pub const DEMO_CLUSTER: &str = include_str!("../../../../examples/demo/cluster.yaml");
pub const DEMO_WORKLOAD: &str = include_str!("../../../../examples/demo/workload.yaml");

#[derive(Debug, Args)]
#[command(
    about = "Run the job-submission service: API, worker and live scheduler",
    long_about = "Run weir's job-submission service: the HTTP API on 127.0.0.1:8470, the worker that \
claims submitted runs, the live scheduler (the same engine `weir simulate` runs, in real time) \
and the local-process backend. Everything is kept under --data-dir (./weir-data): the SQLite \
store, task logs, and admin.token, the admin token created on first start (mode 0600) that the \
client commands use by default (the secret is printed only with --demo).\n\n\
With no --cluster, one node the size of this machine with a root.default queue. Ctrl-C stops at \
once and leaves running tasks running: the next start re-adopts them (--drain waits for them).\n\n\
The same address serves the web dashboard at / (log in with a token: runs and their DAGs, task \
logs, the live queue tree with each pending job's explanation, the SLO and usage/capacity \
reports, routes and clusters) and Prometheus metrics at /metrics. The server records queue \
usage and run outcomes: `weir plan --server URL --validate --out plan/` plans from them and \
`weir apply plan/` applies the plan.\n\n\
Examples:\n  weir serve --demo                       # example workflows through tiered queues\n  \
weir serve --cluster examples/cluster.yaml\n  \
weir serve --db postgres://weir@127.0.0.1:5432/weir --listen 127.0.0.1:9000\n  \
weir serve --config examples/serve/server.yaml   # several clusters, each with its backend\n  \
weir serve --listen 0.0.0.0:8470 --tls-cert server.crt --tls-key server.key   # HTTPS\n\n\
A slow or silent client cannot hold the server: a request's head must arrive within \
--header-read-timeout, its body within --body-read-timeout, idle connections close after \
--idle-timeout, and at most --max-connections are open at once. See docs/serve.md, Security."
)]
pub struct ServeArgs {
    #[command(flatten)]
    common: Common,
    /// Where the API listens. Bind other than loopback only with --tls-cert, or behind a
    /// reverse proxy that terminates TLS.
    /// [default: 127.0.0.1:8470]
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,
    /// Load the demo cluster (examples/demo/cluster.yaml) and submit the demo workflows
    /// (examples/demo/workload.yaml: `sleep` commands) once the server is up.
    #[arg(long)]
    demo: bool,
    /// Largest request body accepted, in bytes (larger: 413). [default: 1048576]
    #[arg(long, value_name = "BYTES")]
    body_limit: Option<usize>,
    /// Plan every cluster on a schedule from its recorded history and validate the plan by
    /// replaying the recorded runs: `daily`, `hourly`, or a span such as `6h`. It only proposes:
    /// the proposal and its validation figures appear on the dashboard's Clusters page for an
    /// admin to apply. Give it to one process per store.
    #[arg(long, value_name = "daily|hourly|SPAN")]
    auto_plan: Option<String>,
    /// The history a scheduled plan, and "Plan now" on the dashboard, looks at (the planner's
    /// window).
    #[arg(long, default_value = "30d", value_name = "SPAN", value_parser = crate::cmd::simulate::parse_duration)]
    auto_plan_window: weir_model::Duration,
    /// A plan made from less recorded history than this is refused (`weir apply`, the API,
    /// the dashboard) unless forced: a few minutes of history do not show a day's peaks.
    #[arg(long, default_value = "1d", value_name = "SPAN", value_parser = crate::cmd::simulate::parse_duration)]
    plan_min_history: weir_model::Duration,
    /// Serve HTTPS (API and dashboard) with this certificate, then any intermediates (PEM).
    /// Needs --tls-key. Clients of a private CA trust it with `--ca-cert` or $WEIR_CA_CERT.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM: PKCS#8, RSA or EC).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Mark the dashboard's cookies `Secure` although this server speaks plain HTTP, because a
    /// reverse proxy in front of it terminates TLS (on by itself with --tls-cert).
    #[arg(long)]
    secure_cookies: bool,
    /// Seconds a request's head may take to arrive, from its first byte (a new connection's:
    /// from its opening, TLS handshake included). [default: 10]
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
    header_read_timeout: Option<u64>,
    /// Seconds a request's body may take to arrive after its head (408 past it). [default: 60]
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
    body_read_timeout: Option<u64>,
    /// Seconds a kept-alive connection may wait for its next request, or a response wait for
    /// its client to read it, before the connection is closed. [default: 60]
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
    idle_timeout: Option<u64>,
    /// Most connections open at once; more wait until one closes. [default: 512]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    max_connections: Option<u64>,
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
    /// A server file (YAML, `version: 1`): listen address, data directory, store, lease, body
    /// limit and the clusters, each a cluster file and a backend. Flags given too override it;
    /// --cluster cannot be combined with it. See docs/serve.md and examples/serve/server.yaml.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Data directory: store (SQLite), logs, backend state, admin.token. [default: weir-data]
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// The store: sqlite:///path/weir.db or postgres://user@host:port/db. Default: weir.db in
    /// the data directory.
    #[arg(long, value_name = "URL")]
    db: Option<String>,
    /// A cluster file to load, as FILE (named `default`) or NAME=FILE (repeatable).
    #[arg(long = "cluster", value_name = "[NAME=]FILE", conflicts_with = "config")]
    clusters: Vec<String>,
    /// Seconds a cluster's lease lasts without renewal (takeover time after a crash). [default: 10]
    #[arg(long)]
    lease: Option<u64>,
    /// Seconds between SIGTERM and SIGKILL when a task is killed. [default: 10]
    #[arg(long)]
    kill_grace: Option<u64>,
    /// On Ctrl-C, take no new work and wait for running tasks to end before stopping.
    #[arg(long)]
    drain: bool,
    /// Queue usage is recorded (for `weir plan --server` and the dashboard) with at most one
    /// row per queue per this span: each row holds the average over its span. Default 1m
    /// (10s with --demo).
    #[arg(long, value_name = "SPAN", value_parser = crate::cmd::simulate::parse_duration)]
    usage_resolution: Option<weir_model::Duration>,
    /// The Unix user tasks run as when the server is root and their project has no `run_as`
    /// entry in its cluster file. It must exist and not be root. [default: weir-task]
    #[arg(long, value_name = "USER")]
    task_user: Option<String>,
    /// Run tasks (of projects without `run_as`) as the server's own user, for one trusted
    /// tenant: a task can then read the server's data directory. Implied when the server is not
    /// root; warned about at start either way.
    #[arg(long)]
    single_tenant: bool,
    /// Root of the per-run working folders (WORK_DIR/CLUSTER/run-ID, each owned by its task's
    /// user). Must be outside the data directory. [default: DATA_DIR-work, beside it]
    #[arg(long, value_name = "DIR")]
    work_dir: Option<PathBuf>,
}

fn cluster_sources(args: &Common, demo: bool) -> Result<Vec<ClusterSource>> {
    let mut out = Vec::new();
    for c in &args.clusters {
        let (name, file) = match c.split_once('=') {
            Some((n, f)) => (n.to_string(), f.to_string()),
            None => ("default".to_string(), c.clone()),
        };
        if !serve_config::valid_cluster_name(&name) {
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

/// The server's settings from --config (if given) and the flags (which win), and the store URL.
fn config(common: &Common, listen: Option<SocketAddr>, demo: bool) -> Result<(ServerConfig, String)> {
    let file = match &common.config {
        Some(path) => {
            let mut f = serve_config::load(path)?;
            serve_config::discover_nodes(&mut f)?;
            Some(f)
        }
        None => None,
    };
    let data_dir_arg = common
        .data_dir
        .clone()
        .or_else(|| file.as_ref().and_then(|f| f.data_dir.clone()))
        .unwrap_or_else(|| PathBuf::from("weir-data"));
    // Made absolute, not created: nothing is created before the port is ours (see `run`).
    let data_dir = std::path::absolute(&data_dir_arg)
        .with_context(|| format!("--data-dir: cannot resolve {}", data_dir_arg.display()))?;
    let db = common
        .db
        .clone()
        .or_else(|| file.as_ref().and_then(|f| f.db.clone()))
        .unwrap_or_else(|| format!("sqlite://{}", data_dir.join("weir.db").display()));
    let mut c = ServerConfig::new(data_dir);
    c.listen = listen;
    c.lease = common
        .lease
        .map(Duration::from_secs)
        .or(file.as_ref().and_then(|f| f.lease))
        .unwrap_or(Duration::from_secs(10))
        .max(Duration::from_secs(1));
    c.kill_grace = common
        .kill_grace
        .map(Duration::from_secs)
        .or(file.as_ref().and_then(|f| f.kill_grace))
        .unwrap_or(Duration::from_secs(10));
    match file {
        Some(f) => {
            if let (Some(l), Some(_)) = (f.listen, listen) {
                c.listen = Some(l);
            }
            if let Some(b) = f.body_limit {
                c.body_limit = b;
            }
            c.tls = f.tls;
            c.secure_cookies = f.secure_cookies.unwrap_or(false);
            let h = &mut c.http;
            h.header_read_timeout = f.header_read_timeout.unwrap_or(h.header_read_timeout);
            h.body_read_timeout = f.body_read_timeout.unwrap_or(h.body_read_timeout);
            h.idle_timeout = f.idle_timeout.unwrap_or(h.idle_timeout);
            h.max_connections = f.max_connections.unwrap_or(h.max_connections);
            c.clusters = f.clusters;
            c.backends = f.backends;
            c.routing = f.routing;
            c.advisor = f.advisor;
            if let Some(o) = f.outputs {
                c.outputs = o;
            }
        }
        None => c.clusters = cluster_sources(common, demo)?,
    }
    if let Some(u) = &common.task_user {
        c.tasks.user = u.clone();
    }
    c.tasks.single_tenant = common.single_tenant;
    if demo && !c.tasks.single_tenant && common.task_user.is_none() {
        // A try-out on a fresh machine (often as root, in a container) should run: without the
        // default task user the demo runs its own tasks as the server's user, said loudly at
        // start; a real setup keeps the startup error that says how to create the user.
        if let Err(e) = weir_backend::TaskUser::lookup(&c.tasks.user) {
            eprintln!(
                "weir serve --demo: {e}; the demo runs its tasks as the server's user (single-tenant). \
                 Create the user (`useradd --system --no-create-home --shell /usr/sbin/nologin {}`) to \
                 run them isolated.",
                c.tasks.user
            );
            c.tasks.single_tenant = true;
        }
    }
    if let Some(w) = &common.work_dir {
        let w =
            std::path::absolute(w).with_context(|| format!("--work-dir: cannot resolve {}", w.display()))?;
        if w.starts_with(&c.data_dir) {
            bail!(
                "--work-dir {}: it is inside the data directory {}; tasks must not start next to the \
                 server's files",
                w.display(),
                c.data_dir.display()
            );
        }
        c.tasks.work_dir = Some(w);
    }
    let resolution = common.usage_resolution.map_or(if demo { 10_000 } else { 60_000 }, |d| d.as_millis());
    c.usage_resolution = Duration::from_millis(resolution.max(1000));
    Ok((c, db))
}

/// `--auto-plan`: `daily`, `hourly` or a span.
fn auto_plan(value: &str, window: weir_model::Duration) -> Result<weir_server::AutoPlan> {
    let every = match value {
        "daily" => 86_400_000,
        "hourly" => 3_600_000,
        other => other
            .parse::<weir_model::Duration>()
            .map_err(|e| {
                anyhow::anyhow!("--auto-plan {other}: write daily, hourly or a span such as 6h ({e})")
            })?
            .as_millis(),
    };
    if every < 60_000 {
        bail!("--auto-plan {value}: plan at most once a minute");
    }
    Ok(weir_server::AutoPlan {
        every: Duration::from_millis(every),
        window: Duration::from_millis(window.as_millis()),
    })
}

pub fn serve(args: &ServeArgs) -> Result<()> {
    let (mut c, db) = config(&args.common, Some(args.listen.unwrap_or(DEFAULT_LISTEN)), args.demo)?;
    if let Some(l) = args.listen {
        c.listen = Some(l);
    }
    if let Some(b) = args.body_limit {
        c.body_limit = b;
    }
    if let Some(v) = &args.auto_plan {
        c.auto_plan = Some(auto_plan(v, args.auto_plan_window)?);
    }
    // "Plan now" (dashboard, API) looks at the scheduled planner's window.
    c.planning = weir_server::Planning {
        min_history: Duration::from_millis(args.plan_min_history.as_millis()),
        window: Duration::from_millis(args.auto_plan_window.as_millis()),
    };
    if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
        c.tls = Some(weir_server::TlsFiles {
            cert: absolute(cert, "--tls-cert")?,
            key: absolute(key, "--tls-key")?,
        });
    }
    c.secure_cookies |= args.secure_cookies;
    let secs = |v: Option<u64>, default: Duration| v.map(Duration::from_secs).unwrap_or(default);
    c.http.header_read_timeout = secs(args.header_read_timeout, c.http.header_read_timeout);
    c.http.body_read_timeout = secs(args.body_read_timeout, c.http.body_read_timeout);
    c.http.idle_timeout = secs(args.idle_timeout, c.http.idle_timeout);
    if let Some(n) = args.max_connections {
        c.http.max_connections = usize::try_from(n).unwrap_or(usize::MAX);
    }
    run(c, &db, &args.common, args.demo)
}

fn absolute(path: &Path, flag: &str) -> Result<PathBuf> {
    std::path::absolute(path).with_context(|| format!("{flag}: cannot resolve {}", path.display()))
}

pub fn worker(args: &WorkerArgs) -> Result<()> {
    let (c, db) = config(&args.common, None, false)?;
    run(c, &db, &args.common, false)
}

fn run(mut c: ServerConfig, db: &str, common: &Common, demo: bool) -> Result<()> {
    // Tasks of stages with outputs run `"$WEIR_COMMIT_HELPER" commit-helper put FILE`: this very
    // binary, so they need no `weir` on their PATH (docs/commit.md).
    if c.outputs.commit_helper.is_none() {
        c.outputs.commit_helper = std::env::current_exe().ok();
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    // Everything the server creates is its own alone (the data directory's files 0600).
    weir_server::private_umask();
    rt.block_on(async move {
        let data_dir = c.data_dir.clone();
        // The port first: a server that cannot listen creates nothing (no data directory, no
        // store file, no token).
        let listener = match c.listen {
            Some(addr) => Some(
                tokio::net::TcpListener::bind(addr)
                    .await
                    .with_context(|| format!("--listen {addr}: cannot listen there; nothing was created"))?,
            ),
            None => None,
        };
        if let (Some(files), Some(_)) = (&c.tls, &listener) {
            files.check().context("--tls-cert/--tls-key: nothing was created")?;
        }
        std::fs::create_dir_all(&data_dir)
            .with_context(|| format!("--data-dir: cannot create {}", data_dir.display()))?;
        let fresh = c.clusters.is_empty() && !has_store(db, &data_dir);
        if fresh {
            c.clusters.push(machine_cluster());
        }
        // The binary picks the store implementation; the server knows only `JobStore`.
        let store = weir_store::open(db).await.with_context(|| format!("--db {db}"))?;
        let server =
            Server::start_on(c.clone(), store, listener).await.context("weir serve could not start")?;
        let scheme = if c.tls.is_some() { "https" } else { "http" };
        if let Some(addr) = server.addr {
            eprintln!("weir serve: listening on {scheme}://{addr}, data in {}", data_dir.display());
            let token_file = weir_server::admin_token_path(&data_dir);
            // The secret itself only for the demo: a terminal's scrollback and a service's
            // journal are read by more people than the data directory is.
            match std::fs::read_to_string(&token_file) {
                Ok(token) if demo => eprintln!(
                    "weir serve: dashboard at {scheme}://{addr}/ — log in with the admin token {}",
                    token.trim()
                ),
                Ok(_) => eprintln!(
                    "weir serve: dashboard at {scheme}://{addr}/ — log in with the admin token in {}",
                    token_file.display()
                ),
                Err(_) => eprintln!("weir serve: dashboard at {scheme}://{addr}/ — log in with an API token"),
            }
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
                tokio::spawn(submit_demo(format!("{scheme}://{addr}"), data_dir.clone()));
            }
        }
        let mut stop = StopSignals::new()?;
        let first = stop.next().await;
        let how = if common.drain { Stop::Drain } else { Stop::Now };
        eprintln!(
            "weir serve: {first}: stopping{}",
            if how == Stop::Drain {
                " once running tasks end (Ctrl-C or SIGTERM again to stop now)"
            } else {
                "; running tasks keep running and are re-adopted at the next start"
            }
        );
        tokio::select! {
            _ = server.shutdown(how) => {}
            again = stop.next() => eprintln!("weir serve: {again} again: stopping now"),
        }
        Ok(())
    })
}

/// What stops the server: Ctrl-C (SIGINT) or SIGTERM (what `systemctl stop`, `kill` and
/// container runtimes send). Either runs the same orderly stop: the store closed, the local
/// backend's free cgroup slots removed.
struct StopSignals {
    term: tokio::signal::unix::Signal,
}

impl StopSignals {
    fn new() -> Result<StopSignals> {
        let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .context("cannot wait for SIGTERM")?;
        Ok(StopSignals { term })
    }

    /// The next stop signal's name.
    async fn next(&mut self) -> &'static str {
        tokio::select! {
            r = tokio::signal::ctrl_c() => match r {
                Ok(()) => "Ctrl-C",
                // No SIGINT handler could be set: only SIGTERM stops it.
                Err(_) => {
                    self.term.recv().await;
                    "SIGTERM"
                }
            },
            _ = self.term.recv() => "SIGTERM",
        }
    }
}

fn has_store(url: &str, data_dir: &Path) -> bool {
    !url.starts_with("sqlite:") || data_dir.join("weir.db").exists()
}

/// Submit the demo workload through the API: one run per `at` entry, at that offset, with
/// logical dates `demo-1`, `demo-2`, ….
async fn submit_demo(base: String, data_dir: PathBuf) {
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
    // The demo talks to its own listener, whose address it just bound: with --tls-cert it
    // need not check the certificate (which may be for another name than this address).
    let Ok(http) = reqwest::Client::builder().tls_danger_accept_invalid_certs(true).build() else {
        eprintln!("weir serve --demo: cannot set up an HTTP client");
        return;
    };
    for round in 0u64.. {
        let start = std::time::Instant::now();
        submit_round(&http, &base, token.trim(), &workload, &plan, round).await;
        if round == 0 {
            eprintln!(
                "weir serve --demo: all submitted; open the dashboard, or try `weir runs`, `weir queues`, \
                 `weir status RUN`, `weir logs RUN TASK`; the demo submits again every {} s",
                DEMO_EVERY.as_secs()
            );
        }
        if let Some(wait) = DEMO_EVERY.checked_sub(start.elapsed()) {
            tokio::time::sleep(wait).await;
        }
    }
}

/// The demo submits its workload again this often, so the dashboard keeps moving.
const DEMO_EVERY: Duration = Duration::from_secs(180);

/// One round of the demo: logical dates `demo-1`, `demo-2`, … in the first round, then
/// `demo-rR-1`, ….
async fn submit_round(
    http: &reqwest::Client,
    base: &str,
    token: &str,
    workload: &WorkloadFile,
    plan: &[(u64, usize, usize)],
    round: u64,
) {
    let start = std::time::Instant::now();
    for &(at, w, i) in plan {
        let due = Duration::from_millis(at);
        if let Some(wait) = due.checked_sub(start.elapsed()) {
            tokio::time::sleep(wait).await;
        }
        let wf = &workload.workflows[w];
        let date = if round == 0 { format!("demo-{}", i + 1) } else { format!("demo-r{round}-{}", i + 1) };
        let body = SubmitRun {
            workflow: serde_json::to_value(wf).ok(),
            workflow_name: None,
            project: None,
            logical_date: Some(date),
            params: Default::default(),
            dry_run: false,
            cluster: None,
        };
        let resp = http.post(format!("{base}/v1/runs")).bearer_auth(token).json(&body).send().await;
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
}
