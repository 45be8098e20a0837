//! Capacity discovery and health: the nodes Slurm reports with their resources in weir's units,
//! and whether slurmrestd and slurmctld answer.

use serde_json::Value;

use crate::rest::{Rest, RestError};
use crate::SlurmError;

/// One node as Slurm reports it, in weir's units.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlurmNode {
    pub name: String,
    /// CPUs × 1000.
    pub cpu_millicores: u64,
    pub memory_mib: u64,
    pub gpus: u64,
    /// Slurm's state (`idle`, `mixed`, `allocated`, `down`, `drained`, …).
    pub state: String,
    pub partitions: Vec<String>,
}

impl SlurmNode {
    /// Whether Slurm would start work on it.
    pub fn is_usable(&self) -> bool {
        let s = self.state.to_ascii_lowercase();
        !(s.contains("down") || s.contains("drain") || s.contains("fail") || s.contains("future"))
    }
}

/// What `weir backends` and the Clusters page show for a Slurm cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Health {
    pub healthy: bool,
    /// Slurm's release (`22.05.8`) and the REST API version in use.
    pub version: String,
    pub nodes: usize,
    pub last_error: Option<String>,
}

pub(crate) async fn nodes(rest: &Rest, url: &str) -> Result<Vec<SlurmNode>, SlurmError> {
    let v = rest.get("/nodes").await.map_err(|e| match e {
        RestError::Unreachable(m) => SlurmError::Unreachable { url: url.into(), message: m },
        RestError::Credentials(e) => e,
        other => SlurmError::Refused { url: url.into(), message: other.message() },
    })?;
    Ok(v.get("nodes")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(node).collect())
        .unwrap_or_default())
}

fn node(v: &Value) -> Option<SlurmNode> {
    let name = v.get("name")?.as_str()?.to_string();
    let cpus = v.get("cpus").and_then(Value::as_u64).unwrap_or(0);
    let memory = v.get("real_memory").and_then(Value::as_u64).unwrap_or(0);
    let gpus =
        v.get("gres").and_then(Value::as_str).map(|g| g.split(',').filter_map(gpu_count).sum()).unwrap_or(0);
    let state = match v.get("state") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join("+"),
        _ => String::new(),
    };
    let partitions = v
        .get("partitions")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(String::from).collect())
        .unwrap_or_default();
    Some(SlurmNode { name, cpu_millicores: cpus * 1000, memory_mib: memory, gpus, state, partitions })
}

/// `gpu:4`, `gpu:a100:4`, `gpu:a100:4(S:0-1)` → 4.
fn gpu_count(gres: &str) -> Option<u64> {
    let g = gres.split('(').next()?;
    if !g.starts_with("gpu") {
        return None;
    }
    g.rsplit(':').next()?.parse().ok()
}

pub(crate) async fn health(rest: &Rest, last_error: Option<String>) -> Health {
    let release = match rest.get("/ping").await {
        Ok(v) => {
            let release = v.pointer("/meta/Slurm/release").and_then(Value::as_str).unwrap_or("?").to_string();
            let up = v
                .get("pings")
                .and_then(Value::as_array)
                .is_some_and(|p| p.iter().any(|x| x.get("ping").and_then(Value::as_str) == Some("UP")));
            if !up {
                return Health {
                    healthy: false,
                    version: release,
                    nodes: 0,
                    last_error: Some("slurmctld does not answer slurmrestd's ping".into()),
                };
            }
            release
        }
        Err(e) => {
            return Health { healthy: false, version: String::new(), nodes: 0, last_error: Some(e.message()) }
        }
    };
    let count = match rest.get("/nodes").await {
        Ok(v) => v.get("nodes").and_then(Value::as_array).map(Vec::len).unwrap_or(0),
        Err(e) => {
            return Health {
                healthy: false,
                version: format!("{release} ({})", rest.version),
                nodes: 0,
                last_error: Some(e.message()),
            }
        }
    };
    Health {
        healthy: last_error.is_none(),
        version: format!("{release} ({})", rest.version),
        nodes: count,
        last_error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_counts_are_read_from_gres() {
        assert_eq!(gpu_count("gpu:4"), Some(4));
        assert_eq!(gpu_count("gpu:a100:2(S:0-1)"), Some(2));
        assert_eq!(gpu_count("license:3"), None);
    }
}
