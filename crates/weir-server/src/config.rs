//! What a server is started with: [`ServerConfig`], each cluster's [`BackendSettings`], and
//! how to [`Stop`]. A bottom module: it knows no other part of the server.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::autoplan::AutoPlan;
use crate::clusters::ClusterSource;

/// Everything `weir serve` (or `weir worker`) is started with.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Logs, the local backend's state and the admin token file.
    pub data_dir: PathBuf,
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
    /// Grace between SIGTERM and SIGKILL when killing a task (a cluster's backend may set its own).
    pub kill_grace: Duration,
    /// How each cluster runs its tasks, by cluster name. A cluster not named here runs on the
    /// local backend under `DATA_DIR/backend/NAME` with [`ServerConfig::kill_grace`].
    pub backends: BTreeMap<String, BackendSettings>,
    /// Largest accepted request body.
    pub body_limit: usize,
    /// The engine actor's periodic tick (scheduling even when nothing happens).
    pub tick: Duration,
    /// Queue usage history is recorded with at most one row per queue per this span.
    pub usage_resolution: Duration,
    /// Plan every cluster on this schedule and store the plans as proposals (`--auto-plan`).
    pub auto_plan: Option<AutoPlan>,
}

impl ServerConfig {
    pub fn new(data_dir: PathBuf) -> ServerConfig {
        ServerConfig {
            data_dir,
            listen: Some(SocketAddr::from(([127, 0, 0, 1], 8470))),
            clusters: Vec::new(),
            worker: true,
            owner: format!("weir-{}", std::process::id()),
            lease: Duration::from_secs(10),
            kill_grace: Duration::from_secs(10),
            backends: BTreeMap::new(),
            body_limit: 1 << 20,
            tick: Duration::from_millis(500),
            usage_resolution: Duration::from_secs(60),
            auto_plan: None,
        }
    }
}

/// How one cluster's tasks are run: the backend kind and its options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BackendSettings {
    /// Process groups on this machine (`weir_backend::LocalBackend`).
    Local {
        /// The backend's state folder (one folder per attempt). `None`: `DATA_DIR/backend/NAME`.
        state_dir: Option<PathBuf>,
        /// Grace between SIGTERM and SIGKILL. `None`: [`ServerConfig::kill_grace`].
        kill_grace: Option<Duration>,
    },
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
