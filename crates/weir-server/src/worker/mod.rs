//! The worker: one supervisor per cluster that takes the cluster's lease when it is free and,
//! while it holds it, runs the cluster's engine actor. Losing the lease (another owner's fence
//! moved on), a configuration reload, or any error ends the actor; the supervisor then starts
//! over from the store — every start is a recovery.

mod actor;
mod attempts;
mod backends;
mod commit;
mod dry_run;
mod live;
mod nodes;
mod progress;
mod recover;
mod slo;
mod usage;
mod waits;
mod warning;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;
use weir_store::JobStore;

use crate::backend_status::{BackendState, BackendStatuses};
use crate::clusters::Registry;
use crate::config::{BackendSettings, ServerConfig, Stop};
use crate::error::ServerError;
use crate::metrics::Metrics;
use crate::time::now_ms;

/// Settings every actor of this process shares.
#[derive(Clone, Debug)]
pub(crate) struct WorkerSettings {
    pub owner: String,
    /// Earlier owners known to be gone: their leases are taken at once.
    pub dead_owners: Vec<String>,
    /// Runs with more tasks fail at claim (`Limits::max_tasks_per_run`).
    pub max_tasks_per_run: u64,
    pub lease_ms: i64,
    pub kill_grace: Duration,
    pub tick: Duration,
    pub data_dir: PathBuf,
    /// Root of the per-run working folders (`WORK_DIR/CLUSTER/run-ID`).
    pub work_dir: PathBuf,
    /// As whom each project's tasks run.
    pub task_users: Arc<crate::isolation::TaskUsers>,
    pub backends: BTreeMap<String, BackendSettings>,
    /// Usage rows are at most one per queue per this many milliseconds.
    pub usage_resolution_ms: u64,
    pub metrics: Arc<Metrics>,
    /// Each cluster's backend as this process sees it (the API and dashboard read it).
    pub statuses: Arc<BackendStatuses>,
    /// How often a running actor asks its backend whether it is healthy.
    pub health_interval: Duration,
    /// Where stages' outputs go (`worker/commit.rs`).
    pub outputs: Arc<crate::outputs::Outputs>,
    /// The snapshots this process's actors publish, for its API to read.
    pub snapshots: Arc<crate::snapshot::SnapshotBoard>,
}

impl WorkerSettings {
    /// The backend kind the server file sets for `cluster` (`local` when it sets none).
    pub fn backend_kind(&self, cluster: &str) -> &'static str {
        self.backends.get(cluster).map_or("local", BackendSettings::kind)
    }

    /// How often `cluster`'s nodes are read from its backend (`nodes: from_backend`), and
    /// whether weir's engine places its tasks (`placement: weir`); `None`: the cluster file's
    /// nodes.
    pub fn nodes_from_backend(&self, cluster: &str) -> Option<(Duration, bool)> {
        match self.backends.get(cluster) {
            Some(BackendSettings::Slurm { nodes_refresh: Some(every), config, .. }) => {
                Some((*every, config.placement == weir_backend_slurm::Placement::Weir))
            }
            // The master places drivers and executors itself: never `placement: weir`.
            Some(BackendSettings::SparkStandalone { nodes_refresh: Some(every), .. }) => {
                Some((*every, false))
            }
            _ => None,
        }
    }
}

pub(crate) struct WorkerHandle {
    /// Wakes every actor of this process (a submission or kill arrived).
    pub notify: Arc<Notify>,
    task: JoinHandle<()>,
}

impl WorkerHandle {
    pub async fn join(self) {
        let _ = self.task.await;
    }
}

/// What the worker publishes to, shared with the API: its metrics, the backends' health, the
/// clusters' queue snapshots.
pub(crate) struct Boards {
    pub metrics: Arc<Metrics>,
    pub statuses: Arc<BackendStatuses>,
    pub snapshots: Arc<crate::snapshot::SnapshotBoard>,
}

pub(crate) fn start(
    config: &ServerConfig,
    Boards { metrics, statuses, snapshots }: Boards,
    store: Arc<dyn JobStore>,
    registry: Arc<Registry>,
    task_users: Arc<crate::isolation::TaskUsers>,
    stop: watch::Receiver<Stop>,
) -> Result<WorkerHandle, ServerError> {
    let settings = WorkerSettings {
        owner: config.owner.clone(),
        dead_owners: config.dead_owners.clone(),
        max_tasks_per_run: config.limits.max_tasks_per_run,
        lease_ms: config.lease.as_millis() as i64,
        kill_grace: config.kill_grace,
        tick: config.tick,
        data_dir: config.data_dir.clone(),
        work_dir: config.work_dir(),
        task_users,
        backends: config.backends.clone(),
        usage_resolution_ms: config.usage_resolution.as_millis().max(1) as u64,
        metrics,
        statuses,
        health_interval: Duration::from_secs(15),
        outputs: crate::outputs::Outputs::open(&config.outputs, &config.data_dir),
        snapshots,
    };
    // The sweeper and the store's counters, once for the process (every actor's uploads).
    let (outputs, sweep_metrics, mut sweep_stop) =
        (settings.outputs.clone(), settings.metrics.clone(), stop.clone());
    tokio::spawn(async move {
        let every = outputs.settings().sweep_every;
        let mut last_sweep = tokio::time::Instant::now();
        loop {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs(2).min(every)) => {}
                _ = sweep_stop.changed() => return,
            }
            outputs.export_counts(&sweep_metrics);
            if last_sweep.elapsed() >= every {
                last_sweep = tokio::time::Instant::now();
                outputs.sweep(&sweep_metrics).await;
            }
        }
    });
    let notify = Arc::new(Notify::new());
    let n = notify.clone();
    let task = tokio::spawn(async move {
        let mut supervisors: Vec<JoinHandle<()>> = Vec::new();
        let mut started = BTreeSet::new();
        let mut stop_rx = stop.clone();
        loop {
            for name in registry.cluster_names() {
                if started.insert(name.clone()) {
                    supervisors.push(tokio::spawn(supervise(
                        name,
                        settings.clone(),
                        store.clone(),
                        registry.clone(),
                        stop.clone(),
                        n.clone(),
                    )));
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                _ = stop_rx.changed() => break,
            }
        }
        for s in supervisors {
            let _ = s.await;
        }
    });
    Ok(WorkerHandle { notify, task })
}

/// Why an actor stopped.
#[derive(Debug)]
pub(crate) enum Ended {
    /// Asked to stop (after draining, if asked to drain).
    Stopped,
    /// The cluster's configuration changed: rebuild.
    Reload,
    /// Another owner holds the lease now.
    LeaseLost,
    /// Something failed; start over after a pause.
    Failed(String),
}

async fn supervise(
    cluster: String,
    settings: WorkerSettings,
    store: Arc<dyn JobStore>,
    registry: Arc<Registry>,
    stop: watch::Receiver<Stop>,
    notify: Arc<Notify>,
) {
    let kind = settings.backend_kind(&cluster);
    let statuses = settings.statuses.clone();
    if let Some(loaded) = registry.cluster(&cluster) {
        settings.metrics.declare_cluster(&cluster, &loaded.config);
    }
    loop {
        if *stop.borrow() != Stop::Running {
            return;
        }
        // A lease still held by a process of this data directory that is gone is taken now.
        let dead = match store.lease(&cluster).await {
            Ok(Some(l)) if settings.dead_owners.contains(&l.owner) => Some(l.owner),
            _ => None,
        };
        match store
            .acquire_lease(&cluster, &settings.owner, dead.as_deref(), now_ms(), settings.lease_ms)
            .await
        {
            Ok(Some(fence)) => {
                statuses.mark(&cluster, kind, BackendState::Starting, None, now_ms());
                settings.metrics.lease(&cluster, true);
                // Its own task: a panic in the actor ends that actor only, and the cluster starts
                // over from the store like after any other failure.
                let actor = {
                    let (cluster, fence, settings) = (cluster.clone(), fence.clone(), settings.clone());
                    let (store, registry, stop, notify) =
                        (store.clone(), registry.clone(), stop.clone(), notify.clone());
                    tokio::spawn(async move {
                        actor::run(&cluster, fence, &settings, &store, &registry, stop, notify).await
                    })
                };
                let ended = match actor.await {
                    Ok(ended) => ended,
                    Err(e) => Ended::Failed(format!("the engine actor stopped unexpectedly: {e}")),
                };
                settings.metrics.lease(&cluster, false);
                match ended {
                    Ended::Stopped => {
                        let _ = store.release_lease(&fence).await;
                        return;
                    }
                    Ended::Reload => {
                        eprintln!("weir worker: cluster `{cluster}`: configuration changed, rebuilding")
                    }
                    Ended::LeaseLost => {
                        eprintln!("weir worker: cluster `{cluster}`: lease lost to another worker")
                    }
                    Ended::Failed(why) => {
                        statuses.mark(&cluster, kind, BackendState::Unhealthy, Some(why.clone()), now_ms());
                        eprintln!("weir worker: cluster `{cluster}`: {why}; starting over");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
            }
            Ok(None) => {
                let holder = match store.lease(&cluster).await {
                    Ok(Some(l)) => {
                        format!("server `{}` holds the cluster's lease and drives its backend", l.owner)
                    }
                    _ => "another server holds the cluster's lease".to_string(),
                };
                statuses.mark(&cluster, kind, BackendState::Standby, Some(holder), now_ms());
                let wait = Duration::from_millis((settings.lease_ms / 4).clamp(100, 2000) as u64);
                let mut s = stop.clone();
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = s.changed() => {}
                }
            }
            Err(e) => {
                eprintln!("weir worker: cluster `{cluster}`: cannot take the lease: {e}");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}
