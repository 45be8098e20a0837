//! The live queue tree and the pending jobs' explanations, as the engine actor publishes them to
//! the store (about once a second) for the service layer to read without touching the engine.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use weir_api::{ClusterQueues, NodeInfo, QueueInfo, Resources as WireResources};
use weir_engine::Engine;
use weir_model::Resources;

/// What a worker publishes for one cluster.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub queues: Option<ClusterQueues>,
    /// `run/job` → the engine's explanation, for jobs in the engine without all they want.
    pub explanations: BTreeMap<String, String>,
    /// Every live node and its allocation (absent in snapshots from before nodes were
    /// published).
    #[serde(default)]
    pub nodes: Vec<NodeInfo>,
}

pub fn wire(r: Resources) -> WireResources {
    WireResources { cpu: r.cpu, memory: r.memory, gpu: r.gpu }
}

/// Every live node as the engine sees it now, in the order they were added.
pub fn nodes(engine: &Engine) -> Vec<NodeInfo> {
    engine
        .nodes()
        .into_iter()
        .map(|n| {
            let free = n.capacity.saturating_sub(&n.used);
            let state = if n.marked != Resources::ZERO {
                "preempting"
            } else if free.cpu == 0 || free.memory == 0 {
                "full"
            } else {
                "running"
            };
            NodeInfo {
                id: n.id.to_string(),
                label: n.label,
                state: state.to_string(),
                capacity: wire(n.capacity),
                used: wire(n.used),
                free: wire(free),
                containers: n.containers,
                marked: wire(n.marked),
                gpu_model: n.gpu_model,
            }
        })
        .collect()
}

/// The queue tree as the engine sees it now.
pub fn queues(cluster: &str, engine: &Engine, now_ms: i64) -> ClusterQueues {
    let config = engine.config();
    let queues = engine
        .queues()
        .into_iter()
        .map(|q| {
            let tier = config.find(&q.queue).and_then(|i| config.queues[i].tier);
            QueueInfo {
                path: q.queue.to_string(),
                leaf: q.leaf,
                tier,
                weight: q.weight,
                min: wire(q.min),
                max: wire(q.max),
                max_running_apps: q.max_running_apps,
                usage: wire(q.usage),
                demand: wire(q.demand),
                steady_fair_share: wire(q.steady),
                instantaneous_fair_share: wire(q.instantaneous),
                running_apps: q.running_apps,
                pending_apps: q.waiting_apps,
            }
        })
        .collect();
    ClusterQueues {
        cluster: cluster.to_string(),
        as_of_ms: Some(now_ms),
        total: wire(engine.cluster_total()),
        used: wire(engine.cluster_used()),
        queues,
    }
}
