//! What a server is started with: [`ServerConfig`], each cluster's [`BackendSettings`], the
//! listener's [`HttpSettings`], and how to [`Stop`]. A bottom module: it knows no other part of
//! the server but the types of what it names.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::autoplan::AutoPlan;
use crate::clusters::ClusterSource;
use crate::tls::TlsFiles;

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
    /// This process's name in leases (unique: pid and a random part).
    pub owner: String,
    /// Earlier owners known to have stopped (processes of this data directory that are gone):
    /// their leases are taken at once. Set by `Server::start` from the data directory.
    pub dead_owners: Vec<String>,
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
    /// A plan made from less recorded history than this is refused unless forced, and "Plan
    /// now" looks at `auto_plan`'s window (or 30 days).
    pub planning: Planning,
    /// What one request and one tenant may ask of the service.
    pub limits: Limits,
    /// Serve HTTPS with this certificate and key (`None`: plain HTTP).
    pub tls: Option<TlsFiles>,
    /// Timeouts and the connection cap of the listener.
    pub http: HttpSettings,
    /// Mark the dashboard's cookies `Secure` although this server speaks plain HTTP: it sits
    /// behind a reverse proxy that terminates TLS. Always on with [`ServerConfig::tls`].
    pub secure_cookies: bool,
    /// How long a dashboard login lasts.
    pub session_lifetime: Duration,
    /// As whom, and where, the local backend runs tasks.
    pub tasks: TaskSettings,
    /// Where stages' declared outputs go (docs/commit.md).
    pub outputs: crate::outputs::OutputSettings,
    /// The server file's routes with a policy, and its drained clusters (docs/serve.md,
    /// Load-aware routing).
    pub routing: crate::routing::RoutingSettings,
    /// The balancing advisor: its schedule (none: only when asked), window and prices.
    pub advisor: crate::advice::AdvisorSettings,
}

/// The guards of the plan → apply loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Planning {
    /// The least recorded history a plan may come from without `force`.
    pub min_history: Duration,
    /// The history "Plan now" looks at.
    pub window: Duration,
}

impl Default for Planning {
    fn default() -> Planning {
        Planning { min_history: Duration::from_secs(86_400), window: Duration::from_secs(30 * 86_400) }
    }
}

/// How long the listener waits for a client, and how many clients it serves at once. A slow
/// or silent client is disconnected; none can hold the server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpSettings {
    /// A request's head (request line and headers) must arrive whole within this time of its
    /// first byte — of the connection's opening for its first request, TLS handshake included.
    pub header_read_timeout: Duration,
    /// A request's body must arrive whole within this time of its head (408 otherwise).
    pub body_read_timeout: Duration,
    /// A kept-alive connection with no request is closed after this time; so is one whose
    /// client has not read a response for this long.
    pub idle_timeout: Duration,
    /// Most connections open at once; further clients wait in the listen backlog.
    pub max_connections: usize,
}

impl Default for HttpSettings {
    fn default() -> HttpSettings {
        HttpSettings {
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(60),
            max_connections: 512,
        }
    }
}

/// As whom and where tasks run (docs/serve.md, Security, Tasks).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskSettings {
    /// The Unix user tasks of projects without a `run_as` entry run as, when the server is root.
    pub user: String,
    /// Run tasks (of projects without `run_as`) as the server's own user: one trusted tenant.
    /// Implied when the server is not root; said loudly at start either way.
    pub single_tenant: bool,
    /// Root of the per-run working folders (`WORK_DIR/CLUSTER/run-ID`), outside the data
    /// directory. `None`: `DATA_DIR-work`, beside the data directory.
    pub work_dir: Option<PathBuf>,
}

impl Default for TaskSettings {
    fn default() -> TaskSettings {
        TaskSettings { user: "weir-task".to_string(), single_tenant: false, work_dir: None }
    }
}

impl ServerConfig {
    /// The root of the per-run working folders: [`TaskSettings::work_dir`], else the data
    /// directory's sibling `NAME-work`.
    pub fn work_dir(&self) -> PathBuf {
        if let Some(w) = &self.tasks.work_dir {
            return w.clone();
        }
        let dir = std::path::absolute(&self.data_dir).unwrap_or_else(|_| self.data_dir.clone());
        match dir.file_name() {
            Some(name) => dir.with_file_name(format!("{}-work", name.to_string_lossy())),
            None => dir.join("..").join("weir-work"),
        }
    }
}

/// Bounds on the work one request or one tenant can cause. Above them a request is refused
/// with a 4xx that names the limit; none of them is ever reached by silently dropping work.
#[derive(Clone, Debug, PartialEq)]
pub struct Limits {
    /// Most tasks in one stage of a submitted workflow (400 above).
    pub max_tasks_per_stage: u64,
    /// Most tasks in one run, all jobs and stages together (400 above).
    pub max_tasks_per_run: u64,
    /// Submissions per second one token may keep up (a token bucket); 0: no limit (429 above).
    /// Global admins' tokens are not limited (nor by the quota below).
    pub submissions_per_second: f64,
    /// How many submissions a token may send at once before the rate applies.
    pub submission_burst: u32,
    /// Most runs of one project that may wait to start (queued, routed or waiting); 0: no
    /// limit (429 above).
    pub max_waiting_runs_per_project: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_tasks_per_stage: 100_000,
            max_tasks_per_run: 200_000,
            submissions_per_second: 100.0,
            submission_burst: 1000,
            max_waiting_runs_per_project: 10_000,
        }
    }
}

impl ServerConfig {
    pub fn new(data_dir: PathBuf) -> ServerConfig {
        ServerConfig {
            data_dir,
            listen: Some(SocketAddr::from(([127, 0, 0, 1], 8470))),
            clusters: Vec::new(),
            worker: true,
            owner: new_owner_name(),
            dead_owners: Vec::new(),
            lease: Duration::from_secs(10),
            kill_grace: Duration::from_secs(10),
            backends: BTreeMap::new(),
            body_limit: 1 << 20,
            tick: Duration::from_millis(500),
            usage_resolution: Duration::from_secs(60),
            auto_plan: None,
            planning: Planning::default(),
            limits: Limits::default(),
            tls: None,
            http: HttpSettings::default(),
            secure_cookies: false,
            session_lifetime: Duration::from_secs(12 * 3600),
            tasks: TaskSettings::default(),
            outputs: crate::outputs::OutputSettings::default(),
            routing: crate::routing::RoutingSettings::default(),
            advisor: crate::advice::AdvisorSettings::default(),
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
    /// Batch jobs on a Slurm cluster through slurmrestd (`weir_backend_slurm::SlurmBackend`).
    Slurm {
        config: Box<weir_backend_slurm::SlurmConfig>,
        /// Grace between SIGTERM and Slurm's own kill. `None`: [`ServerConfig::kill_grace`].
        kill_grace: Option<Duration>,
        /// A folder the server and every compute node see at the same path: tasks' logs, working
        /// folder and preemption notices go there. `None`: the data directory (which then must
        /// be shared, or Slurm runs on the server's machine).
        shared_dir: Option<PathBuf>,
        /// Refuse submissions routed to this cluster (503) while its backend is unhealthy,
        /// instead of keeping them waiting in the store (`when_unhealthy: refuse`).
        refuse_when_unhealthy: bool,
        /// `nodes: from_backend`: the engine's nodes are Slurm's usable nodes, read when the
        /// cluster's actor starts and again every this often; a node gone, down or drained is a
        /// node failure to the engine. `None`: the cluster file's nodes, never refreshed.
        nodes_refresh: Option<Duration>,
    },
    /// Spark applications through `spark-submit --master local[N]` on this machine
    /// (`weir_backend_spark::SparkLocalBackend`); stages with a `command` run as on `Local`.
    SparkLocal {
        /// Where Spark is, its properties, the state folder (`None` in `state_dir` there is
        /// filled with `DATA_DIR/backend/NAME` by the worker).
        config: Box<weir_backend_spark::SparkLocalConfig>,
        /// Grace between SIGTERM and SIGKILL. `None`: [`ServerConfig::kill_grace`].
        kill_grace: Option<Duration>,
    },
    /// Spark applications as drivers on a Spark standalone cluster, through its master's REST
    /// submission gateway (`weir_backend_spark::SparkStandaloneBackend`); Spark stages only.
    SparkStandalone {
        /// The gateway, the workers' Python, the properties, the state folder (`state_dir`
        /// empty there: `DATA_DIR/backend/NAME`, filled by the worker).
        config: Box<weir_backend_spark::SparkStandaloneConfig>,
        /// `nodes: from_backend`: the engine's nodes are the master's alive workers, read when
        /// the cluster's actor starts and again every this often. `None`: the cluster file's.
        nodes_refresh: Option<Duration>,
    },
    /// `batch/v1` Jobs on a Kubernetes cluster (`weir_backend_kube::KubeBackend`), admitted by
    /// Kueue, YuniKorn or the default scheduler. Only with the `kubernetes` cargo feature.
    #[cfg(feature = "kubernetes")]
    Kubernetes {
        config: Box<weir_backend_kube::KubeConfig>,
        /// The delete's `gracePeriodSeconds`. `None`: [`ServerConfig::kill_grace`].
        kill_grace: Option<Duration>,
        /// A folder the server reads tasks' files from; `None`: the data directory.
        shared_dir: Option<PathBuf>,
    },
}

impl BackendSettings {
    /// The kind's name, as the server file spells it.
    pub fn kind(&self) -> &'static str {
        match self {
            BackendSettings::Local { .. } => "local",
            BackendSettings::Slurm { .. } => "slurm",
            BackendSettings::SparkLocal { .. } => "spark-local",
            BackendSettings::SparkStandalone { .. } => "spark-standalone",
            #[cfg(feature = "kubernetes")]
            BackendSettings::Kubernetes { .. } => "kubernetes",
        }
    }

    /// Whether the kind runs Spark applications (`spark:` stages): the Spark backends, and
    /// Kubernetes (as SparkApplications, with `spark_image` set).
    pub fn runs_spark(&self) -> bool {
        match self {
            BackendSettings::SparkLocal { .. } | BackendSettings::SparkStandalone { .. } => true,
            #[cfg(feature = "kubernetes")]
            BackendSettings::Kubernetes { config, .. } => config.spark_image.is_some(),
            _ => false,
        }
    }
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

/// `weir-PID-RANDOM`: the pid alone repeats across machines sharing one store.
fn new_owner_name() -> String {
    let mut b = [0u8; 4];
    let _ = getrandom::fill(&mut b);
    format!("weir-{}-{}", std::process::id(), b.iter().map(|x| format!("{x:02x}")).collect::<String>())
}
