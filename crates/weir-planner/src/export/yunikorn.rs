//! Apache YuniKorn partition and queue configuration (`queues.yaml`, YuniKorn ≥ 1.0 units).
//!
//! - `partitions[].preemption.enabled`: weir's `scheduler.preemption.enabled`;
//! - the `root` queue with `submitacl: '*'` (weir has no ACLs, so everyone may submit);
//! - `resources.guaranteed`: the queue's steady fair share (weights, `min` and `max` applied,
//!   computed by weir-engine with exact rounding so children never exceed their parent);
//! - `resources.max`: weir's `max` (capped by the parent's, as YuniKorn requires);
//! - resource units: `vcore` as cores or millicores (`96`, `1500m`), `memory` with a binary
//!   suffix (`384Gi`, `1500Mi`) — YuniKorn reads a bare number as bytes;
//! - `maxapplications`: `max_running_apps`; a child of a limited parent gets at most the parent's
//!   value (YuniKorn rejects a child above its parent, and treats a missing child value under a
//!   limited parent as 0);
//! - `properties`: `application.sort.policy` (`fifo`, or `fair` for weir's fair and drf) and
//!   `priority.offset` (the leaf's priority) and `preemption.delay` (the fair-share
//!   preemption timeout, a Go duration) on leaves; `preemption.policy: disabled` where weir
//!   forbids preemption from a queue.
//!
//! YuniKorn has no weights beyond what `guaranteed` expresses, and no per-queue preemption
//! thresholds or AM-share limits; those are not written.

use std::collections::BTreeMap;

use serde::Serialize;
use weir_model::{ClusterConfig, Policy, QueueIndex, Resources, Rounding};

use super::{k8s_memory, ExportOptions};
use crate::error::PlanError;

#[derive(Serialize)]
struct Config {
    partitions: Vec<Partition>,
}

#[derive(Serialize)]
struct Partition {
    name: String,
    preemption: Enabled,
    queues: Vec<Queue>,
}

#[derive(Serialize)]
struct Enabled {
    enabled: bool,
}

#[derive(Serialize)]
struct Queue {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    submitacl: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    maxapplications: Option<u32>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    properties: BTreeMap<&'static str, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    resources: Option<QueueResources>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    queues: Vec<Queue>,
}

#[derive(Serialize)]
struct QueueResources {
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    guaranteed: BTreeMap<&'static str, String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    max: BTreeMap<&'static str, String>,
}

pub(super) fn export(cfg: &ClusterConfig, options: &ExportOptions) -> Result<String, PlanError> {
    let mut exact = cfg.clone();
    exact.scheduler.rounding = Rounding::Exact;
    let steady: Vec<Resources> = weir_engine::shares_for(&exact, &[]).into_iter().map(|s| s.steady).collect();
    let total = cfg.total_resources();
    let mut ctx = Ctx {
        cfg,
        steady,
        total,
        max: vec![Resources::UNBOUNDED; cfg.queues.len()],
        apps: vec![None; cfg.queues.len()],
    };
    let root_children = cfg.queues[0].children.iter().map(|&c| ctx.queue(c)).collect();
    let root = Queue {
        name: "root".into(),
        submitacl: Some("*".into()),
        maxapplications: None,
        properties: BTreeMap::new(),
        resources: None,
        queues: root_children,
    };
    let config = Config {
        partitions: vec![Partition {
            name: options.partition.clone(),
            preemption: Enabled { enabled: cfg.scheduler.preemption.enabled },
            queues: vec![root],
        }],
    };
    let yaml = serde_saphyr::to_string(&config).map_err(|e| PlanError::Write {
        format: "yunikorn",
        what: "queues.yaml".into(),
        message: e.to_string(),
    })?;
    Ok(format!(
        "# Apache YuniKorn queue configuration (the `queues.yaml` entry of the yunikorn-configs\n\
         # ConfigMap), written by weir. guaranteed = weir's steady fair share of each queue.\n{yaml}"
    ))
}

struct Ctx<'a> {
    cfg: &'a ClusterConfig,
    steady: Vec<Resources>,
    total: Resources,
    /// Effective maximum of each queue (its own, capped by its parent's).
    max: Vec<Resources>,
    /// Effective maxapplications of each queue.
    apps: Vec<Option<u32>>,
}

impl Ctx<'_> {
    fn queue(&mut self, ix: QueueIndex) -> Queue {
        let q = &self.cfg.queues[ix];
        let parent = q.parent.unwrap_or(0);
        let own_max = q.max.resolve(&self.total);
        self.max[ix] = own_max.component_min(&self.max[parent]);
        self.apps[ix] = match (q.max_running_apps, self.apps[parent]) {
            (Some(a), Some(p)) => Some(a.min(p)),
            (a, p) => a.or(p),
        };
        let mut properties = BTreeMap::new();
        if q.is_leaf() {
            let sort = if q.policy == Policy::Fifo { "fifo" } else { "fair" };
            properties.insert("application.sort.policy", sort.to_string());
            if q.priority != 0 {
                properties.insert("priority.offset", q.priority.to_string());
            }
            if let Some(t) = q.fair_share_preemption_timeout {
                properties.insert("preemption.delay", go_duration(t.as_millis()));
            }
        }
        if !q.allow_preemption_from {
            properties.insert("preemption.policy", "disabled".to_string());
        }
        let mut guaranteed = BTreeMap::new();
        let g = self.steady[ix];
        if g.cpu > 0 {
            guaranteed.insert("vcore", vcore(g.cpu));
        }
        if g.memory > 0 {
            guaranteed.insert("memory", k8s_memory(g.memory));
        }
        let mut max = BTreeMap::new();
        // Written where the queue itself is limited; an unlimited queue inherits its parent's.
        if own_max.cpu != u64::MAX {
            max.insert("vcore", vcore(self.max[ix].cpu));
        }
        if own_max.memory != u64::MAX {
            max.insert("memory", k8s_memory(self.max[ix].memory));
        }
        let resources =
            (!guaranteed.is_empty() || !max.is_empty()).then_some(QueueResources { guaranteed, max });
        let children = q.children.clone();
        Queue {
            name: q.name.clone(),
            submitacl: None,
            maxapplications: self.apps[ix],
            properties,
            resources,
            queues: children.into_iter().map(|c| self.queue(c)).collect(),
        }
    }
}

fn vcore(millicores: u64) -> String {
    super::k8s_cpu(millicores)
}

/// A Go `time.ParseDuration` string: Go has no day unit, so the largest unit is hours.
fn go_duration(ms: u64) -> String {
    if ms.is_multiple_of(3_600_000) && ms > 0 {
        format!("{}h", ms / 3_600_000)
    } else if ms.is_multiple_of(60_000) && ms > 0 {
        format!("{}m", ms / 60_000)
    } else if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}
