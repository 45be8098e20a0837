//! Each cluster's execution backend, built from its [`BackendSettings`]: the only place in the
//! worker that names a backend implementation; everything else knows the `Backend` trait.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use weir_backend::{Backend, ExitSender, LocalBackend, LocalConfig};
use weir_backend_slurm::SlurmBackend;
use weir_backend_spark::{SparkLocalBackend, SparkStandaloneBackend};

use super::WorkerSettings;
use crate::backend_status::{BackendState, BackendStatus, BackendStatuses};
use crate::config::BackendSettings;
use crate::time::now_ms;

/// A cluster's backend and how the actor uses it.
pub(super) struct Built {
    pub backend: Arc<dyn Backend>,
    /// Grace between SIGTERM and SIGKILL when a task is killed.
    pub kill_grace: Duration,
    /// Where tasks' logs, working folder and notices go when not under the data directory (a
    /// folder the compute nodes share).
    pub shared_dir: Option<PathBuf>,
}

/// The backend that runs `cluster`'s tasks. A backend that cannot be set up (a Slurm that is
/// down, a wrong key) fails the actor with the reason; the supervisor tries again, and the
/// cluster's runs wait in the store meanwhile.
pub(super) async fn build(
    cluster: &str,
    settings: &WorkerSettings,
    exits: ExitSender,
) -> Result<Built, String> {
    let default_dir = || settings.data_dir.join("backend").join(cluster);
    let (state_dir, kill_grace) = match settings.backends.get(cluster) {
        Some(BackendSettings::Local { state_dir, kill_grace }) => {
            (state_dir.clone().unwrap_or_else(default_dir), kill_grace.unwrap_or(settings.kill_grace))
        }
        Some(BackendSettings::Slurm { config, kill_grace, shared_dir, .. }) => {
            let backend = SlurmBackend::connect((**config).clone(), exits)
                .await
                .map_err(|e| format!("the Slurm backend is unavailable: {e}"))?;
            return Ok(Built {
                backend: Arc::new(backend),
                kill_grace: kill_grace.unwrap_or(settings.kill_grace),
                shared_dir: shared_dir.clone(),
            });
        }
        Some(BackendSettings::SparkLocal { config, kill_grace }) => {
            let mut config = (**config).clone();
            if config.state_dir.as_os_str().is_empty() {
                config.state_dir = default_dir();
            }
            config.task_user = settings.task_users.default_user().cloned();
            let backend = SparkLocalBackend::new(config, exits)
                .await
                .map_err(|e| format!("the spark-local backend is unavailable: {e}"))?;
            return Ok(Built {
                backend: Arc::new(backend),
                kill_grace: kill_grace.unwrap_or(settings.kill_grace),
                shared_dir: None,
            });
        }
        Some(BackendSettings::SparkStandalone { config, .. }) => {
            let mut config = (**config).clone();
            if config.state_dir.as_os_str().is_empty() {
                config.state_dir = default_dir();
            }
            let backend = SparkStandaloneBackend::connect(config, exits)
                .await
                .map_err(|e| format!("the spark-standalone backend is unavailable: {e}"))?;
            // Spark's kill has no grace (the master stops the driver at once).
            return Ok(Built {
                backend: Arc::new(backend),
                kill_grace: settings.kill_grace,
                shared_dir: None,
            });
        }
        #[cfg(feature = "kubernetes")]
        Some(BackendSettings::Kubernetes { config, kill_grace, shared_dir }) => {
            let backend = weir_backend_kube::KubeBackend::connect((**config).clone(), exits)
                .await
                .map_err(|e| format!("the Kubernetes backend is unavailable: {e}"))?;
            return Ok(Built {
                backend: Arc::new(backend),
                kill_grace: kill_grace.unwrap_or(settings.kill_grace),
                shared_dir: shared_dir.clone(),
            });
        }
        None => (default_dir(), settings.kill_grace),
    };
    let backend = LocalBackend::new(LocalConfig::new(state_dir), exits)
        .map_err(|e| format!("cannot set up the local backend: {e}"))?;
    // What contains tasks on this machine, said once per process (every cluster's backend
    // finds the same).
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| eprintln!("weir worker: {}", backend.isolation()));
    Ok(Built { backend: Arc::new(backend), kill_grace, shared_dir: None })
}

/// While the actor runs: asks the backend whether it is healthy, at once and then every
/// `every`, and publishes the answer for the API and the dashboard.
pub(super) async fn watch_health(
    cluster: String,
    kind: &'static str,
    backend: Arc<dyn Backend>,
    statuses: Arc<BackendStatuses>,
    every: Duration,
) {
    loop {
        let h = backend.health().await;
        statuses.set(
            &cluster,
            BackendStatus {
                kind: kind.to_string(),
                state: if h.healthy { BackendState::Healthy } else { BackendState::Unhealthy },
                reason: h.error,
                version: h.version,
                nodes: h.nodes,
                checked_ms: now_ms(),
                counted: Vec::new(),
                gone: Vec::new(),
                last_unhealthy: None,
            },
        );
        tokio::time::sleep(every).await;
    }
}
