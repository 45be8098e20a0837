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
    // v0.0.38 gives the base state (`idle`) and its flags (`state_flags: ["DRAIN"]`) apart;
    // v0.0.40 and later one list (`state: ["IDLE", "DRAIN"]`). Both read `idle+drain`.
    let mut words: Vec<String> = Vec::new();
    for field in ["state", "state_flags"] {
        match v.get(field) {
            Some(Value::String(s)) => words.push(s.to_ascii_lowercase()),
            Some(Value::Array(a)) => {
                words.extend(a.iter().filter_map(Value::as_str).map(str::to_ascii_lowercase))
            }
            _ => {}
        }
    }
    let state = words.join("+");
    let partitions = v
        .get("partitions")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(String::from).collect())
        .unwrap_or_default();
    Some(SlurmNode { name, cpu_millicores: cpus * 1000, memory_mib: memory, gpus, state, partitions })
}

/// Slurm's release from an answer's `meta`: `meta.Slurm.release` in v0.0.38,
/// `meta.slurm.release` from v0.0.40 on.
fn release_of(v: &Value) -> String {
    ["/meta/Slurm/release", "/meta/slurm/release"]
        .iter()
        .find_map(|p| v.pointer(p).and_then(Value::as_str))
        .unwrap_or("?")
        .to_string()
}

/// Whether one `pings` entry says slurmctld answered: `ping: "UP"` (v0.0.38), `pinged: "UP"`
/// (v0.0.40+) or `responding: true` (v0.0.43+, where `pinged` is deprecated).
fn pinged(p: &Value) -> bool {
    p.get("responding").and_then(Value::as_bool) == Some(true)
        || ["ping", "pinged"].iter().any(|k| p.get(*k).and_then(Value::as_str) == Some("UP"))
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
            let release = release_of(&v);
            let up = v.get("pings").and_then(Value::as_array).is_some_and(|p| p.iter().any(pinged));
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
    fn a_drained_node_is_not_usable_in_either_shape() {
        // v0.0.38 (Slurm 22.05, as the local slurmrestd answers for `scontrol update
        // state=drain`): base state and flags apart.
        let old = serde_json::json!({"name": "n1", "cpus": 8, "real_memory": 4096,
            "state": "idle", "state_flags": ["DRAIN"]});
        let n = node(&old).unwrap();
        assert_eq!(n.state, "idle+drain");
        assert!(!n.is_usable());
        // v0.0.40+: one list of flags (SchedMD's v0.0.40 `node.state`, an array of strings).
        let new = serde_json::json!({"name": "n2", "cpus": 4, "real_memory": 1024,
            "state": ["DOWN", "NOT_RESPONDING"]});
        assert!(!node(&new).unwrap().is_usable());
        let idle = serde_json::json!({"name": "n3", "cpus": 4, "state": ["IDLE"]});
        assert!(node(&idle).unwrap().is_usable());
    }

    #[test]
    fn ping_answers_of_every_spoken_version_are_read() {
        // v0.0.38 as the local slurmrestd (Slurm 22.05) answers it.
        let old = serde_json::json!({"meta": {"Slurm": {"release": "22.05.8"}},
            "pings": [{"hostname": "h", "ping": "UP", "status": 0, "mode": "primary"}]});
        assert_eq!(
            (release_of(&old), old["pings"].as_array().unwrap().iter().any(pinged)),
            ("22.05.8".into(), true)
        );
        // v0.0.41's `controller_ping` (`pinged`), v0.0.43's (`responding`, `pinged`
        // deprecated), `meta.slurm.release`: the OpenAPI documents of those releases.
        let v41 = serde_json::json!({"meta": {"slurm": {"release": "24.05.1"}},
            "pings": [{"hostname": "h", "pinged": "UP", "latency": 120, "mode": "primary"}]});
        assert_eq!(release_of(&v41), "24.05.1");
        assert!(pinged(&v41["pings"][0]));
        assert!(pinged(&serde_json::json!({"hostname": "h", "responding": true})));
        assert!(!pinged(&serde_json::json!({"hostname": "h", "responding": false, "pinged": "DOWN"})));
    }

    #[test]
    fn gpu_counts_are_read_from_gres() {
        assert_eq!(gpu_count("gpu:4"), Some(4));
        assert_eq!(gpu_count("gpu:a100:2(S:0-1)"), Some(2));
        assert_eq!(gpu_count("license:3"), None);
    }
}
