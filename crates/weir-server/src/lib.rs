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
//! What it never does: SQL (that is weir-store's), scheduling policy (weir-engine's), block the
//! async runtime, or start an attempt whose intent is not committed first.

mod api;
mod auth;
mod clusters;
mod error;
mod logs;
mod snapshot;
mod submit;
mod time;
mod worker;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use weir_store::Store;

pub use auth::{admin_token_path, hash_token, new_token};
pub use clusters::{default_cluster_yaml, ClusterSource};
pub use error::ServerError;
pub use time::{format_utc, now_ms};

/// Everything `weir serve` (or `weir worker`) is started with.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Logs, the local backend's state, the admin token file, and the SQLite file by default.
    pub data_dir: PathBuf,
    /// `sqlite:///…` or `postgres://…`.
    pub db_url: String,
    /// Where the API listens; `None` runs a worker only (`weir worker`).
    pub listen: Option<SocketAddr>,
    /// Clusters to (re)load into the store at start. Empty: keep what the store has.
    pub clusters: Vec<ClusterSource>,
    /// Run the worker (lease clusters, drive engines, run tasks).
    pub worker: bool,
    /// This process's name in leases.
    pub owner: String,
    /// How long a lease lasts without renewal; another worker takes over after it.
    pub lease: Duration,
    /// Grace between SIGTERM and SIGKILL when killing a task.
    pub kill_grace: Duration,
    /// Largest accepted request body.
    pub body_limit: usize,
    /// The engine actor's periodic tick (scheduling even when nothing happens).
    pub tick: Duration,
}

impl ServerConfig {
    pub fn new(data_dir: PathBuf, db_url: String) -> ServerConfig {
        ServerConfig {
            data_dir,
            db_url,
            listen: Some(SocketAddr::from(([127, 0, 0, 1], 8470))),
            clusters: Vec::new(),
            worker: true,
            owner: format!("weir-{}", std::process::id()),
            lease: Duration::from_secs(10),
            kill_grace: Duration::from_secs(10),
            body_limit: 1 << 20,
            tick: Duration::from_millis(500),
        }
    }
}

/// A running server. Dropping it does not stop it; call [`Server::shutdown`].
pub struct Server {
    /// The address the API listens on (after binding port 0, the real port).
    pub addr: Option<SocketAddr>,
    /// The admin token, when this start created it.
    pub created_admin_token: Option<String>,
    store: Store,
    stop: watch::Sender<Stop>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    worker: Option<worker::WorkerHandle>,
}

/// How to stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    Running,
    /// Stop now; running tasks keep running and are re-adopted by the next start.
    Now,
    /// Take no new work, wait for running tasks to end, then stop.
    Drain,
}

impl Server {
    /// Open the store, load clusters, create the first admin token if there is none, and start
    /// the API and the worker.
    pub async fn start(config: ServerConfig) -> Result<Server, ServerError> {
        std::fs::create_dir_all(&config.data_dir).map_err(|source| ServerError::Io {
            action: "create the data directory",
            path: config.data_dir.clone(),
            source,
        })?;
        let store = Store::open(&config.db_url).await?;
        let now = now_ms();
        for c in &config.clusters {
            clusters::validate_source(c)?;
            store.put_cluster(&c.name, &c.yaml, now).await?;
        }
        let created_admin_token = auth::ensure_admin_token(&store, &config.data_dir).await?;
        let registry = Arc::new(clusters::Registry::load(&store).await?);
        let (stop, stop_rx) = watch::channel(Stop::Running);
        let mut tasks = Vec::new();
        tasks.push(tokio::spawn(clusters::refresh_loop(store.clone(), registry.clone(), stop_rx.clone())));
        let worker = if config.worker {
            Some(worker::start(&config, store.clone(), registry.clone(), stop_rx.clone())?)
        } else {
            None
        };
        let mut addr = None;
        if let Some(listen) = config.listen {
            let listener = tokio::net::TcpListener::bind(listen)
                .await
                .map_err(|source| ServerError::Bind { addr: listen, source })?;
            addr = listener.local_addr().ok();
            let notify = worker.as_ref().map(|w| w.notify.clone());
            let state = api::AppState::new(store.clone(), registry.clone(), notify);
            let app = api::router(state, config.body_limit);
            let mut rx = stop_rx.clone();
            tasks.push(tokio::spawn(async move {
                let shutdown = async move {
                    while *rx.borrow() == Stop::Running {
                        if rx.changed().await.is_err() {
                            break;
                        }
                    }
                };
                if let Err(e) = axum::serve(listener, app).with_graceful_shutdown(shutdown).await {
                    eprintln!("weir serve: the API stopped: {e}");
                }
            }));
        }
        Ok(Server { addr, created_admin_token, store, stop, tasks, worker })
    }

    /// The server's store (tests use it to make the store unavailable).
    pub fn store(&self) -> &Store {
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
