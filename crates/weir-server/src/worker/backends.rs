//! Each cluster's execution backend, built from its [`BackendSettings`]: the only place in the
//! worker that names a backend implementation; everything else knows the `Backend` trait.

use std::sync::Arc;
use std::time::Duration;

use weir_backend::{Backend, ExitSender, LocalBackend, LocalConfig};

use super::WorkerSettings;
use crate::config::BackendSettings;

/// The backend that runs `cluster`'s tasks, and the grace between SIGTERM and SIGKILL when one
/// is killed.
pub(super) fn build(
    cluster: &str,
    settings: &WorkerSettings,
    exits: ExitSender,
) -> Result<(Arc<dyn Backend>, Duration), String> {
    let default_dir = || settings.data_dir.join("backend").join(cluster);
    let (state_dir, kill_grace) = match settings.backends.get(cluster) {
        Some(BackendSettings::Local { state_dir, kill_grace }) => {
            (state_dir.clone().unwrap_or_else(default_dir), kill_grace.unwrap_or(settings.kill_grace))
        }
        None => (default_dir(), settings.kill_grace),
    };
    let backend = LocalBackend::new(LocalConfig::new(state_dir), exits)
        .map_err(|e| format!("cannot set up the local backend: {e}"))?;
    // What contains tasks on this machine, said once per process (every cluster's backend
    // finds the same).
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| eprintln!("weir worker: {}", backend.isolation()));
    Ok((Arc::new(backend), kill_grace))
}
