//! `weir backends --config server.yaml`: each cluster's backend as it answers now — kind,
//! health, version, node count, last error — asked directly (the server's own view of its
//! backends is not served by the API yet).

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use weir_server::BackendSettings;

use super::serve_config;
use crate::emit;

/// Show each cluster's backend: kind, health, version, nodes, last error.
#[derive(Debug, Args)]
pub struct BackendsArgs {
    /// The server file (`weir serve --config`).
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
}

pub fn run(a: &BackendsArgs) -> Result<bool> {
    let config = serve_config::load(&a.config)?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let mut out = String::new();
    let mut all_healthy = true;
    writeln!(
        out,
        "{:<16} {:<6} {:<9} {:<24} {:>5}  last error",
        "cluster", "kind", "health", "version", "nodes"
    )?;
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
            _ => {
                let nodes = weir_model::ClusterConfig::from_yaml(&source.file, &source.yaml)
                    .map(|c| c.nodes.iter().map(|g| u64::from(g.count)).sum::<u64>().to_string())
                    .unwrap_or_else(|_| "-".into());
                ("healthy", "this machine".to_string(), nodes, String::new())
            }
        };
        let kind = match config.backends.get(&source.name) {
            Some(BackendSettings::Slurm { .. }) => "slurm",
            _ => "local",
        };
        all_healthy &= row.0 == "healthy";
        writeln!(out, "{:<16} {kind:<6} {:<9} {:<24} {:>5}  {}", source.name, row.0, row.1, row.2, row.3)?;
    }
    emit(&out)?;
    Ok(all_healthy)
}
