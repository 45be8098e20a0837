//! weir-backend-spark: task attempts as Spark applications, through `spark-submit`.
//!
//! [`SparkLocalBackend`] (kind `spark-local`) runs a stage whose tasks are Spark applications
//! (`spark: {main, args, conf, executors}` in the workflow) with `spark-submit --master
//! local[N]` on the server's machine: the driver and its executor threads in one JVM, plus the
//! Python driver for a PySpark application. It is the local backend underneath: each attempt is
//! one process group (and its cgroups) that weir's [`LocalBackend`] starts, watches, kills and
//! re-adopts by attempt id after a restart; this crate adds what is Spark's — finding Spark
//! (`spark_home`, or the `pyspark` package's copy found through Python), the command line, the
//! variables a driver needs, the health check. Killing the whole group matters: SIGTERM to the
//! JVM alone leaves a PySpark driver's Python process behind.
//!
//! A stage with a `command` instead of `spark:` runs as on the local backend.
//!
//! [`SparkStandaloneBackend`] (kind `spark-standalone`) submits each attempt as a driver to a
//! Spark standalone cluster through its master's REST submission gateway (`standalone`).
//!
//! What it never does: hold scheduling policy, retry a task, or pass the server's own
//! environment to a driver (only the local backend's pass-through list, `JAVA_HOME`, and the
//! Spark variables it sets).
//!
//! The [`Launched`] record of a `spark-local` attempt is the local backend's with `backend:
//! "spark-local"`.

mod install;
mod rest;
mod standalone;
mod submit;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use weir_backend::{
    Adopted, AttemptId, Backend, BackendError, BackendHealth, BoxFuture, ExitSender, Launched, LocalBackend,
    LocalConfig, Recovered, TaskLaunch, TaskUser,
};

pub use install::{java, Install};
pub use standalone::{executor_gang, SparkStandaloneBackend, SparkStandaloneConfig, STANDALONE_KIND};
pub use submit::quote;

/// The kind stored in each attempt's record.
pub const LOCAL_KIND: &str = "spark-local";

/// What the local backend's records say.
const INNER_KIND: &str = "local";

/// Why a Spark backend could not be set up. Each variant says whether retrying can help.
#[derive(Debug, thiserror::Error)]
pub enum SparkError {
    /// No usable `spark-submit` (`reason` says where weir looked). Retrying helps once Spark is
    /// installed or `spark_home` is fixed.
    #[error("no Spark found: {reason}")]
    NoSpark { reason: String },
    /// spark-submit needs Java and none was found. Retrying helps once it is installed.
    #[error("no Java found: spark-submit needs `java` on the server's PATH or JAVA_HOME (Java 17 or 21 for Spark 4)")]
    NoJava,
    /// The local backend underneath could not be set up (its state folder). Retrying helps
    /// only if the cause (permissions, disk) goes away.
    #[error(transparent)]
    Local(#[from] BackendError),
    /// The user tasks run as cannot reach Spark (`reason` names the file or folder, its mode
    /// and owner). Retrying helps once Spark is installed where that user can read it.
    #[error("{reason}")]
    TaskUser { reason: String },
    /// A standalone master's REST gateway did not answer (`url`; `message` says how). Retrying
    /// helps once the master is up with `spark.master.rest.enabled=true`.
    #[error("the Spark master's REST gateway at {url}: {message}")]
    Master { url: String, message: String },
}

/// Settings of [`SparkLocalBackend`] (the server file's `backend: {kind: spark-local, …}`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SparkLocalConfig {
    /// The local backend's state folder (one folder per attempt).
    pub state_dir: PathBuf,
    /// A Spark distribution (holding `bin/spark-submit`); `None`: the `pyspark` package's.
    pub spark_home: Option<PathBuf>,
    /// The Python interpreter that finds `pyspark` and runs PySpark drivers; `None`: `python3`
    /// on the server's `PATH`.
    pub python: Option<PathBuf>,
    /// Spark properties for every application (`--conf`), before the stage's own (which win).
    pub conf: BTreeMap<String, String>,
    /// Put each attempt in its own cgroups where the machine allows it (as the local backend).
    pub cgroups: bool,
    /// The user tasks run as by default (a root server's `weir-task`; `None`: the server's own
    /// user). The backend refuses to start, and its health check turns unhealthy, when that
    /// user cannot run the Spark found (pip's `pyspark` in root's own home, mode 0700).
    pub task_user: Option<TaskUser>,
}

impl SparkLocalConfig {
    pub fn new(state_dir: impl Into<PathBuf>) -> SparkLocalConfig {
        SparkLocalConfig {
            state_dir: state_dir.into(),
            spark_home: None,
            python: None,
            conf: BTreeMap::new(),
            cgroups: true,
            task_user: None,
        }
    }
}

/// Runs Spark applications with `spark-submit --master local[N]`, one process group per
/// attempt. Cheap to share as `Arc<dyn Backend>`; dropping it stops the watching, never the
/// drivers.
pub struct SparkLocalBackend {
    local: LocalBackend,
    install: Install,
    conf: BTreeMap<String, String>,
    task_user: Option<TaskUser>,
}

impl SparkLocalBackend {
    /// Finds Spark and Java and sets up the local backend underneath; an error says what is
    /// missing. Call it inside a tokio runtime with I/O and time enabled.
    pub async fn new(config: SparkLocalConfig, exits: ExitSender) -> Result<SparkLocalBackend, SparkError> {
        let (home, python) = (config.spark_home.clone(), config.python.clone());
        let user = config.task_user.clone();
        let install = tokio::task::spawn_blocking(move || {
            let install = Install::find(home.as_deref(), python.as_deref())?;
            match user.and_then(|u| install.unreachable_for(&u)) {
                Some(reason) => Err(SparkError::TaskUser { reason }),
                None => Ok(install),
            }
        })
        .await
        .map_err(|e| SparkError::NoSpark { reason: format!("the look-up did not finish: {e}") })??;
        let mut local_config = LocalConfig::new(&config.state_dir);
        local_config.inherit_env.push("JAVA_HOME".into());
        local_config.cgroups = config.cgroups;
        let local = LocalBackend::new(local_config, exits)?;
        Ok(SparkLocalBackend { local, install, conf: config.conf, task_user: config.task_user })
    }

    /// The Spark found.
    pub fn install(&self) -> &Install {
        &self.install
    }

    /// What isolates attempts on this machine (the local backend's cgroups).
    pub fn isolation(&self) -> &str {
        self.local.isolation()
    }

    /// The local backend's form of a launch: a Spark stage becomes its spark-submit command.
    fn local_launch(&self, launch: &TaskLaunch) -> TaskLaunch {
        let Some(app) = &launch.spark else { return launch.clone() };
        let master = submit::local_master(launch, app);
        TaskLaunch {
            command: submit::command(&self.install, &master, &self.conf, launch, app),
            env: submit::env(&self.install, launch),
            spark: None,
            ..launch.clone()
        }
    }
}

/// A `spark-local` record as the local backend wrote it.
fn inner(task: &Launched) -> Result<Launched, BackendError> {
    if task.backend != LOCAL_KIND {
        return Err(BackendError::WrongBackend {
            attempt: task.attempt.to_string(),
            expected: LOCAL_KIND.to_string(),
            found: task.backend.clone(),
        });
    }
    Ok(Launched { backend: INNER_KIND.to_string(), ..task.clone() })
}

fn outer(mut task: Launched) -> Launched {
    task.backend = LOCAL_KIND.to_string();
    task
}

impl Backend for SparkLocalBackend {
    fn kind(&self) -> &str {
        LOCAL_KIND
    }

    fn start<'a>(&'a self, launch: &'a TaskLaunch) -> BoxFuture<'a, Result<Launched, BackendError>> {
        Box::pin(async move {
            // A Spark stage run as a user who cannot reach Spark would fail at `exec` with 126
            // and an empty log: refuse it with the reason (a project's `run_as` user may differ
            // from the default one the health check looks at).
            if let (Some(_), Some(user)) = (&launch.spark, &launch.user) {
                let install = self.install.clone();
                let user = user.clone();
                let why =
                    tokio::task::spawn_blocking(move || install.unreachable_for(&user)).await.ok().flatten();
                if let Some(reason) = why {
                    return Err(BackendError::BadLaunch {
                        attempt: launch.attempt.to_string(),
                        field: "user",
                        reason,
                    });
                }
            }
            let local = self.local_launch(launch);
            self.local.start(&local).await.map(outer)
        })
    }

    fn kill<'a>(&'a self, task: &'a Launched, grace: Duration) -> BoxFuture<'a, Result<(), BackendError>> {
        Box::pin(async move { self.local.kill(&inner(task)?, grace).await })
    }

    fn adopt<'a>(&'a self, task: &'a Launched) -> BoxFuture<'a, Result<Adopted, BackendError>> {
        Box::pin(async move { self.local.adopt(&inner(task)?).await })
    }

    fn recover<'a>(&'a self, attempt: &'a AttemptId) -> BoxFuture<'a, Result<Recovered, BackendError>> {
        Box::pin(async move {
            Ok(match self.local.recover(attempt).await? {
                Recovered::Running(l) => Recovered::Running(outer(l)),
                other => other,
            })
        })
    }

    fn forget<'a>(&'a self, task: &'a Launched) -> BoxFuture<'a, Result<(), BackendError>> {
        Box::pin(async move { self.local.forget(&inner(task)?).await })
    }

    /// Healthy while `spark-submit` is still there, Java is found and the default task user
    /// can reach Spark (no JVM is started: a check every 15 s must stay cheap).
    fn health(&self) -> BoxFuture<'_, BackendHealth> {
        Box::pin(async move {
            let install = self.install.clone();
            let user = self.task_user.clone();
            let problem = tokio::task::spawn_blocking(move || {
                install.check().err().or_else(|| java().is_none().then_some(SparkError::NoJava)).or_else(
                    || {
                        let reason = install.unreachable_for(user.as_ref()?)?;
                        Some(SparkError::TaskUser { reason })
                    },
                )
            })
            .await
            .unwrap_or(None);
            let version = if self.install.version.is_empty() {
                "Spark (local mode)".to_string()
            } else {
                format!("Spark {} (local mode)", self.install.version)
            };
            BackendHealth {
                healthy: problem.is_none(),
                version,
                nodes: None,
                error: problem.map(|e| e.to_string()),
            }
        })
    }
}
