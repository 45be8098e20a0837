//! `weir backends`: each cluster's backend — kind, health, version, node count, last error —
//! as the running server sees it (`GET /v1/clusters`), or, with `--config server.yaml`, asked
//! directly from this machine (before a server runs, or to check a server file).

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use weir_server::BackendSettings;

use super::serve_config;
use crate::emit;

/// Show each cluster's backend: kind, health, version, nodes, last error.
///
/// Without --config: as the server (--server, $WEIR_SERVER) sees them. `standby` means another
/// server process holds the cluster's lease and drives its backend. With --config: each backend
/// of that server file asked directly from here. Exits 1 when one is not healthy.
#[derive(Debug, Args)]
pub struct BackendsArgs {
    /// A server file (`weir serve --config`): ask its backends directly instead of a server.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// With --config, run as root: the user a root `weir serve` runs tasks as (its
    /// --task-user); a spark-local backend is unhealthy when that user cannot reach Spark.
    #[arg(long, value_name = "USER", default_value = "weir-task")]
    task_user: String,
    /// With --config: as `weir serve --single-tenant` (tasks run as this user; no task user
    /// is checked).
    #[arg(long)]
    single_tenant: bool,
    #[command(flatten)]
    conn: super::client::Connection,
}

pub fn run(a: &BackendsArgs) -> Result<bool> {
    let Some(path) = &a.config else { return from_server(a) };
    let config = serve_config::load(path)?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let mut out = String::new();
    let mut all_healthy = true;
    header(&mut out)?;
    for source in &config.clusters {
        let row = match config.backends.get(&source.name) {
            Some(BackendSettings::Slurm { config: slurm, .. }) => rt.block_on(async {
                let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
                match weir_backend_slurm::SlurmBackend::connect((**slurm).clone(), tx).await {
                    Ok(b) => {
                        let h = b.health().await;
                        let state = if h.healthy { "healthy" } else { "unhealthy" };
                        (state, h.version, h.nodes.to_string(), h.last_error.unwrap_or_default())
                    }
                    Err(e) => ("unhealthy", String::new(), "-".into(), e.to_string()),
                }
            }),
            Some(BackendSettings::SparkLocal { config: spark, .. }) => rt.block_on(async {
                let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
                let mut spark = (**spark).clone();
                if spark.state_dir.as_os_str().is_empty() {
                    // Only Spark and Java are looked for here; no attempt is started.
                    spark.state_dir =
                        std::env::temp_dir().join(format!("weir-backends-{}", std::process::id()));
                }
                // As `weir serve` would: a root server runs tasks as the task user, who must
                // reach Spark too.
                if rustix::process::geteuid().is_root() && !a.single_tenant {
                    spark.task_user = match weir_backend::TaskUser::lookup(&a.task_user) {
                        Ok(u) => Some(u),
                        Err(e) => {
                            // `weir serve` would refuse to start without it; say what is not checked.
                            eprintln!("weir backends: --task-user: {e}: what tasks can reach is not checked");
                            None
                        }
                    };
                }
                let state_dir = spark.state_dir.clone();
                let row = match weir_backend_spark::SparkLocalBackend::new(spark, tx).await {
                    Ok(b) => {
                        let h = weir_backend::Backend::health(&b).await;
                        let state = if h.healthy { "healthy" } else { "unhealthy" };
                        (state, h.version, "-".into(), h.error.unwrap_or_default())
                    }
                    Err(e) => ("unhealthy", String::new(), "-".into(), e.to_string()),
                };
                if state_dir.starts_with(std::env::temp_dir()) {
                    let _ = std::fs::remove_dir(&state_dir);
                }
                row
            }),
            Some(BackendSettings::SparkStandalone { config: spark, .. }) => rt.block_on(async {
                let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
                let mut spark = (**spark).clone();
                // Only the master is asked here; no attempt is started, so nothing is written.
                let scratch = std::env::temp_dir().join(format!("weir-backends-{}", std::process::id()));
                if spark.state_dir.as_os_str().is_empty() {
                    spark.state_dir = scratch.clone();
                }
                let row = match weir_backend_spark::SparkStandaloneBackend::connect(spark, tx).await {
                    Ok(b) => {
                        let h = weir_backend::Backend::health(&b).await;
                        let state = if h.healthy { "healthy" } else { "unhealthy" };
                        let nodes = h.nodes.map_or_else(|| "-".into(), |n| n.to_string());
                        (state, h.version, nodes, h.error.unwrap_or_default())
                    }
                    Err(e) => ("unhealthy", String::new(), "-".into(), e.to_string()),
                };
                let _ = std::fs::remove_dir(&scratch);
                row
            }),
            #[cfg(feature = "kubernetes")]
            Some(BackendSettings::Kubernetes { config: kube, .. }) => rt.block_on(async {
                let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
                match weir_backend_kube::KubeBackend::connect((**kube).clone(), tx).await {
                    Ok(b) => {
                        let h = weir_backend::Backend::health(&b).await;
                        let state = if h.healthy { "healthy" } else { "unhealthy" };
                        let nodes = h.nodes.map_or_else(|| "-".into(), |n| n.to_string());
                        (state, h.version, nodes, h.error.unwrap_or_default())
                    }
                    Err(e) => ("unhealthy", String::new(), "-".into(), e.to_string()),
                }
            }),
            _ => {
                let nodes = weir_model::ClusterConfig::from_yaml(&source.file, &source.yaml)
                    .map(|c| c.nodes.iter().map(|g| u64::from(g.count)).sum::<u64>().to_string())
                    .unwrap_or_else(|_| "-".into());
                ("healthy", "this machine".to_string(), nodes, String::new())
            }
        };
        let kind = config.backends.get(&source.name).map_or("local", BackendSettings::kind);
        all_healthy &= row.0 == "healthy";
        writeln!(out, "{:<16} {kind:<16} {:<9} {:<24} {:>5}  {}", source.name, row.0, row.1, row.2, row.3)?;
    }
    emit(&out)?;
    Ok(all_healthy)
}

/// The server's view: `GET /v1/clusters`, whose `backend` field its worker fills.
fn from_server(a: &BackendsArgs) -> Result<bool> {
    let client = a.conn.client()?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let list: weir_api::ClusterList =
        rt.block_on(client.send(client.request(reqwest::Method::GET, "/v1/clusters")))?;
    let mut out = String::new();
    let mut all_healthy = true;
    header(&mut out)?;
    for c in &list.clusters {
        let Some(b) = &c.backend else {
            all_healthy = false;
            writeln!(
                out,
                "{:<16} {:<16} {:<9} {:<24} {:>5}  this server runs no worker",
                c.name, "-", "unknown", "", "-"
            )?;
            continue;
        };
        // A standby server's peer drives the backend; that is not a fault of this one.
        all_healthy &= b.state == "healthy" || b.state == "standby";
        let nodes = b.nodes.map_or_else(|| c.nodes.to_string(), |n| n.to_string());
        let version = if b.version.is_empty() && b.kind == "local" { "this machine" } else { &b.version };
        // A `nodes: from_backend` cluster: the nodes its engine no longer counts.
        let mut last = b.reason.clone().unwrap_or_default();
        if !b.nodes_gone.is_empty() {
            let gone = format!("nodes not counted: {}", b.nodes_gone.join(", "));
            last = if last.is_empty() { gone } else { format!("{last}; {gone}") };
        }
        writeln!(out, "{:<16} {:<16} {:<9} {:<24} {:>5}  {last}", c.name, b.kind, b.state, version, nodes)?;
    }
    emit(&out)?;
    Ok(all_healthy)
}

/// The table's first line, the same for both views.
fn header(out: &mut String) -> std::fmt::Result {
    writeln!(
        out,
        "{:<16} {:<16} {:<9} {:<24} {:>5}  last error",
        "cluster", "kind", "health", "version", "nodes"
    )
}
