//! weir-server: `weir serve` — the HTTP API (service layer), the worker, and the engine actor
//! that drives the live scheduler, in the two layers Pinterest's Archer has.
//!
//! - The **service layer** (`api`, `submit`, `auth`, `logs`) validates (the same `weir-model`
//!   validation as `weir validate`), authenticates, authorizes, writes to the store and reads
//!   from it. It never calls a backend and never waits on an engine: submissions are committed
//!   by a group-commit writer and picked up by whichever worker owns the cluster.
//! - The **worker** (`worker`) holds one lease per cluster (expiry + fencing number) and, while
//!   it holds it, runs that cluster's **engine actor**: the only owner of a live
//!   `weir_engine::Engine`. The actor claims queued runs, feeds the engine inputs stamped with
//!   the real clock (Unix ms), calls `schedule(now)` after inputs, at `next_wakeup()` and on a
//!   periodic tick, carries the decisions out on the [`weir_backend::Backend`], moves jobs
//!   through their DAGs, retries failed tasks and records every change in fenced store
//!   batches. Every start is a recovery: the actor rebuilds the engine from the store and
//!   re-adopts running attempts through the backend (crash-only).
//!
//! The listener (`http`, `tls`) is the server's own rather than `axum::serve`: HTTP/1.1 over
//! TCP or TLS (rustls on ring), with header-read, body-read and idle timeouts and a cap on open
//! connections, so that no client can hold it.
//!
//! It knows the store only as the [`weir_store::JobStore`] trait: the binary opens the
//! implementation (SQLite or PostgreSQL) and hands it to [`Server::start`].
//!
//! What it never does: SQL (that is weir-store's), scheduling policy (weir-engine's), block the
//! async runtime, or start an attempt whose intent is not committed first.

mod acl;
mod advice;
mod api;
mod auth;
mod autoplan;
mod backend_status;
mod clusters;
mod config;
mod isolation;
mod jockey;
pub use isolation::private_umask;
mod dashboard;
pub mod dry_run;
#[doc(hidden)]
pub mod engine_load;
pub use dry_run::{record_dry_run_verdict, record_dry_run_verdict_each, DeclaredOutput, DryRunError};
mod error;
mod http;
mod limits;
mod logs;
mod loop_api;
pub mod metrics;
mod nodes;
mod outputs;
mod owner;
mod plans;
mod replay;
mod reports;
mod routing;
mod slo_watch;
mod snapshot;
mod state;
mod submit;
mod time;
mod tls;
mod usage_by;
mod wait_report;
mod words;
mod worker;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use weir_store::JobStore;

pub use advice::{AdvisorSettings, Schedule as AdviceSchedule};
pub use auth::{admin_token_path, hash_token, new_token};
pub use autoplan::AutoPlan;
pub use clusters::{default_cluster_yaml, ClusterSource};
pub use config::{BackendSettings, HttpSettings, Limits, Planning, ServerConfig, Stop, TaskSettings};
pub use error::ServerError;
pub use outputs::{OutputSettings, OutputStore};
pub use routing::{Candidate, Policy, PolicyRoute, RoutingSettings};
pub use time::{format_utc, now_ms};
pub use tls::{install_crypto_provider, TlsFiles};
pub use wait_report::{read_waits_csv, QueueWait};
pub use words::span as words_span;

/// A running server. Dropping it does not stop it; call [`Server::shutdown`].
pub struct Server {
    /// The address the API listens on (after binding port 0, the real port).
    pub addr: Option<SocketAddr>,
    /// The admin token, when this start created it.
    pub created_admin_token: Option<String>,
    store: Arc<dyn JobStore>,
    stop: watch::Sender<Stop>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    worker: Option<worker::WorkerHandle>,
    /// The data directory is this process's while it is held.
    _lock: owner::DataDirLock,
}

impl Server {
    /// Load clusters into `store`, create the first admin token if there is none, and start
    /// the API and the worker. The caller opens the store (the binary picks the
    /// implementation; `weir_store::open` gives SQLite or PostgreSQL).
    pub async fn start(config: ServerConfig, store: Arc<dyn JobStore>) -> Result<Server, ServerError> {
        let listener = match config.listen {
            Some(listen) => Some(
                tokio::net::TcpListener::bind(listen)
                    .await
                    .map_err(|source| ServerError::Bind { addr: listen, source })?,
            ),
            None => None,
        };
        Server::start_on(config, store, listener).await
    }

    /// [`Server::start`] on a listener the caller bound already (`config.listen` is then only
    /// informative): the binary binds first, so that a port it cannot have leaves nothing
    /// created behind (no data directory, no store file, no token).
    pub async fn start_on(
        mut config: ServerConfig,
        store: Arc<dyn JobStore>,
        listener: Option<tokio::net::TcpListener>,
    ) -> Result<Server, ServerError> {
        tls::install_crypto_provider();
        // The certificate and key before anything is created: a bad file leaves nothing behind.
        let tls = match (&config.tls, &listener) {
            (Some(files), Some(_)) => Some(tokio_rustls::TlsAcceptor::from(tls::server_config(files)?)),
            _ => None,
        };
        std::fs::create_dir_all(&config.data_dir).map_err(|source| ServerError::Io {
            action: "create the data directory",
            path: config.data_dir.clone(),
            source,
        })?;
        for fixed in isolation::protect_data_dir(&config.data_dir)? {
            eprintln!("weir serve: warning: {fixed} (the data directory is the server's alone)");
        }
        let (task_users, single_tenant) = isolation::TaskUsers::resolve(&config.tasks)?;
        let task_users = Arc::new(task_users);
        if let Some(warning) = single_tenant {
            eprintln!("weir serve: warning: {warning}");
        }
        if let Some(warning) = config.outputs.start_warning() {
            eprintln!("weir serve: warning: {warning}");
        }
        let lock = owner::claim(&config.data_dir, &config.owner)?;
        config.dead_owners = lock.dead_owners.clone();
        let now = now_ms();
        for c in &config.clusters {
            clusters::validate_source(c, &task_users)?;
        }
        for c in &config.clusters {
            let before = store.cluster(&c.name).await?.map(|r| r.config);
            let routes: Vec<weir_api::Route> = store
                .routes()
                .await?
                .into_iter()
                .filter(|r| r.cluster == c.name)
                .map(|r| weir_api::Route { key: r.key, cluster: r.cluster, queue: r.queue })
                .collect();
            let change = weir_store::ConfigChange {
                actor: "weir".into(),
                source: format!("loaded at start from {}", c.file),
                diff: loop_api::edit_diff(before.as_deref(), &c.yaml),
                routes: serde_json::to_string(&routes).ok(),
            };
            store.put_cluster(&c.name, &c.yaml, &change, now).await?;
        }
        let created_admin_token = auth::ensure_admin_token(store.as_ref(), &config.data_dir).await?;
        let registry = Arc::new(clusters::Registry::load(store.as_ref()).await?);
        // Clusters already in the store are held to the same rule as those given now.
        for name in registry.cluster_names() {
            let Some(loaded) = registry.cluster(&name) else { continue };
            let problems = task_users.check(&loaded.config);
            if !problems.is_empty() {
                return Err(ServerError::Model(weir_model::ModelError::Invalid {
                    file: format!("cluster `{name}` (stored)"),
                    problems: problems
                        .into_iter()
                        .map(|(path, message)| weir_model::Problem { path, message })
                        .collect(),
                }));
            }
        }
        let metrics = Arc::new(metrics::Metrics::new());
        let (stop, stop_rx) = watch::channel(Stop::Running);
        let mut tasks = Vec::new();
        tasks.push(tokio::spawn(clusters::refresh_loop(store.clone(), registry.clone(), stop_rx.clone())));
        if let Some(cfg) = config.auto_plan {
            tasks.push(tokio::spawn(autoplan::run(store.clone(), registry.clone(), cfg, stop_rx.clone())));
        }
        let advisor = Arc::new(config.advisor.clone());
        if advisor.schedule.is_some() {
            tasks.push(tokio::spawn(advice::run(
                store.clone(),
                registry.clone(),
                advisor.clone(),
                stop_rx.clone(),
            )));
        }
        let refusing = config
            .backends
            .iter()
            .filter(|(_, b)| matches!(b, BackendSettings::Slurm { refuse_when_unhealthy: true, .. }))
            .map(|(name, _)| name.clone())
            .collect();
        let kinds =
            config.backends.iter().map(|(name, b)| (name.clone(), (b.kind(), b.runs_spark()))).collect();
        let backends = Arc::new(backend_status::BackendStatuses::new(refusing, kinds));
        let snapshots = Arc::new(snapshot::SnapshotBoard::default());
        let worker = if config.worker {
            Some(worker::start(
                &config,
                worker::Boards {
                    metrics: metrics.clone(),
                    statuses: backends.clone(),
                    snapshots: snapshots.clone(),
                },
                store.clone(),
                registry.clone(),
                task_users.clone(),
                stop_rx.clone(),
            )?)
        } else {
            None
        };
        let mut addr = None;
        if let Some(listener) = listener {
            addr = listener.local_addr().ok();
            let notify = worker.as_ref().map(|w| w.notify.clone());
            let mut state = state::Shared::new(
                store.clone(),
                registry.clone(),
                notify,
                metrics.clone(),
                config.limits.clone(),
                task_users.clone(),
            );
            state.backends = backends.clone();
            state.snapshots = snapshots.clone();
            state.planning = config.planning;
            state.router = Arc::new(routing::Router::new(config.routing.clone()));
            state.advisor = advisor.clone();
            state.output_bucket = config.outputs.served_bucket();
            state.sessions = state::Sessions {
                secure: tls.is_some() || config.secure_cookies,
                lifetime: config.session_lifetime,
            };
            let app = app(state.into(), config.body_limit);
            tasks.push(tokio::spawn(http::serve(listener, tls, config.http.clone(), app, stop_rx.clone())));
        }
        Ok(Server { addr, created_admin_token, store, stop, tasks, worker, _lock: lock })
    }

    /// The server's store.
    pub fn store(&self) -> &Arc<dyn JobStore> {
        &self.store
    }

    /// Stop: `Stop::Now` leaves tasks running for the next start to re-adopt; `Stop::Drain`
    /// waits for them first.
    pub async fn shutdown(self, how: Stop) {
        let _ = self.stop.send(how);
        if let Some(w) = self.worker {
            w.join().await;
        }
        for t in self.tasks {
            let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
        }
    }
}

/// Every route of the service: the API, the planning loop's endpoints, and the dashboard,
/// with the dashboard's cookie accepted for reads and the body limit.
fn app(state: state::AppState, body_limit: usize) -> axum::Router {
    axum::Router::new()
        .merge(api::router())
        .merge(loop_api::router())
        .merge(advice::router())
        .merge(dashboard::router())
        .fallback(|| async { error::ApiError::not_found("no such endpoint; see /v1/openapi.json") })
        .layer(axum::middleware::from_fn_with_state(state.clone(), dashboard::cookie_for_reads))
        .layer(axum::middleware::from_fn(error::uniform_responses))
        .layer(axum::extract::DefaultBodyLimit::max(body_limit))
        .with_state(state)
}
