//! Kueue objects: one ResourceFlavor, a Cohort per parent queue (hierarchical cohorts), a
//! ClusterQueue and a LocalQueue per leaf, in the API version and field names of the Kueue
//! release asked for (the CRDs under `config/components/crd/bases` of each release):
//!
//! | Kueue | Cohort | ClusterQueue, LocalQueue, ResourceFlavor | cohort fields |
//! |---|---|---|---|
//! | 0.9–0.12 | `v1alpha1` | `v1beta1` | Cohort `spec.parent`, ClusterQueue `spec.cohort` |
//! | 0.13–0.14 | `v1beta1` | `v1beta1` | Cohort `spec.parentName`, ClusterQueue `spec.cohort` |
//! | 0.15 and later (default) | `v1beta2` | `v1beta2` | Cohort `spec.parentName`, ClusterQueue `spec.cohortName` |
//!
//! Names are DNS labels made from the queue path without `root.` (`root.ads.ranking.tier1` →
//! `ads-ranking-tier1`, see `k8s_name`); the root cohort is `root`.
//!
//! - `nominalQuota`: the queue's steady fair share fitted inside its parent's (`guarantee.rs`),
//!   so the quotas add up to at most the cluster;
//! - `borrowingLimit` on a ClusterQueue: `max` − nominal quota where weir caps the leaf; on a
//!   Cohort with a parent: `max` − the subtree's quotas where weir caps the parent queue (a
//!   Cohort's resources carry nominal quota 0: the leaves hold the quotas);
//! - `fairSharing.weight`: the queue's weight (only used when Fair Sharing is on in Kueue's
//!   Configuration);
//! - `queueingStrategy`: `StrictFIFO` for fifo leaves, else `BestEffortFIFO`;
//! - `preemption.reclaimWithinCohort: Any` when weir's preemption is enabled.

use std::collections::BTreeMap;

use serde::Serialize;
use weir_model::{ClusterConfig, Policy, Resources};

use super::guarantee::guarantees;
use super::{k8s_cpu, k8s_memory, k8s_name, num, ExportOptions, Version};
use crate::error::PlanError;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Object<S: Serialize> {
    api_version: String,
    kind: &'static str,
    metadata: Metadata,
    #[serde(skip_serializing_if = "Option::is_none")]
    spec: Option<S>,
}

#[derive(Serialize)]
struct Metadata {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<String>,
}

#[derive(Serialize)]
struct Empty {}

#[derive(Serialize)]
struct FairSharing {
    weight: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CohortSpec {
    /// `parent` before Kueue 0.13.
    #[serde(skip_serializing_if = "Option::is_none")]
    parent: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parent_name: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    resource_groups: Vec<ResourceGroup>,
    fair_sharing: FairSharing,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ClusterQueueSpec {
    /// `cohort` before the v1beta2 API.
    #[serde(skip_serializing_if = "Option::is_none")]
    cohort: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cohort_name: Option<String>,
    namespace_selector: Empty,
    queueing_strategy: &'static str,
    fair_sharing: FairSharing,
    #[serde(skip_serializing_if = "Option::is_none")]
    preemption: Option<Preemption>,
    resource_groups: Vec<ResourceGroup>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Preemption {
    reclaim_within_cohort: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ResourceGroup {
    covered_resources: Vec<String>,
    flavors: Vec<Flavor>,
}

#[derive(Serialize)]
struct Flavor {
    name: String,
    resources: Vec<Quota>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Quota {
    name: String,
    nominal_quota: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    borrowing_limit: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LocalQueueSpec {
    cluster_queue: String,
}

/// API versions and field names for a Kueue release.
struct Api {
    cohort: &'static str,
    queues: &'static str,
    /// Cohort `spec.parentName` (else `spec.parent`).
    parent_name: bool,
    /// ClusterQueue `spec.cohortName` (else `spec.cohort`).
    cohort_name: bool,
}

fn api(v: Version) -> Result<Api, PlanError> {
    if v < Version(0, 9) {
        return Err(PlanError::Unsupported {
            format: "kueue",
            message: format!(
                "Kueue {v} has no Cohort objects (hierarchical cohorts came with 0.9); export for --kueue-version 0.9 or later"
            ),
        });
    }
    Ok(if v < Version(0, 13) {
        Api {
            cohort: "kueue.x-k8s.io/v1alpha1",
            queues: "kueue.x-k8s.io/v1beta1",
            parent_name: false,
            cohort_name: false,
        }
    } else if v < Version(0, 15) {
        Api {
            cohort: "kueue.x-k8s.io/v1beta1",
            queues: "kueue.x-k8s.io/v1beta1",
            parent_name: true,
            cohort_name: false,
        }
    } else {
        Api {
            cohort: "kueue.x-k8s.io/v1beta2",
            queues: "kueue.x-k8s.io/v1beta2",
            parent_name: true,
            cohort_name: true,
        }
    })
}

pub(super) fn export(
    cfg: &ClusterConfig,
    options: &ExportOptions,
    losses: &mut Vec<String>,
) -> Result<String, PlanError> {
    let api = api(options.kueue_version)?;
    let g = guarantees(cfg);
    losses.extend(g.losses.iter().cloned());
    let total = cfg.total_resources();
    let gpu = options.gpu_resource.clone().unwrap_or_else(|| "nvidia.com/gpu".into());
    let with_gpu = total.gpu > 0;
    // Quotas of each subtree (Σ over its leaves), for the cohorts' borrowing limits.
    let n = cfg.queues.len();
    let mut subtree = vec![Resources::ZERO; n];
    for i in (0..n).rev() {
        if cfg.queues[i].is_leaf() {
            subtree[i] = g.per_queue[i];
        }
        if let Some(p) = cfg.queues[i].parent {
            subtree[p] = subtree[p] + subtree[i];
        }
    }
    let mut names: BTreeMap<(bool, String), String> = BTreeMap::new();
    let mut docs: Vec<String> = vec![doc(
        "",
        &Object::<Empty> {
            api_version: api.queues.to_string(),
            kind: "ResourceFlavor",
            metadata: Metadata { name: options.flavor.clone(), namespace: None },
            spec: None,
        },
    )?];
    let cohort_of =
        |ix: usize| if ix == 0 { "root".to_string() } else { k8s_name(cfg.queues[ix].path.as_str()) };
    let quotas = |nominal: &Resources, max: &Resources, keep_borrow: bool| -> (Vec<String>, Vec<Quota>) {
        let mut covered = vec!["cpu".to_string(), "memory".to_string()];
        let q = |name: String, nominal: u64, max: u64, fmt: &dyn Fn(u64) -> String| Quota {
            name,
            nominal_quota: fmt(nominal),
            borrowing_limit: (keep_borrow && max != u64::MAX).then(|| fmt(max.saturating_sub(nominal))),
        };
        let mut res = vec![
            q("cpu".into(), nominal.cpu, max.cpu, &k8s_cpu),
            q("memory".into(), nominal.memory, max.memory, &k8s_memory),
        ];
        if with_gpu {
            covered.push(gpu.clone());
            res.push(q(gpu.clone(), nominal.gpu, max.gpu, &|v: u64| v.to_string()));
        }
        (covered, res)
    };
    for (ix, q) in cfg.queues.iter().enumerate() {
        let name = cohort_of(ix);
        if let Some(first) = names.insert((q.is_leaf(), name.clone()), q.path.to_string()) {
            return Err(PlanError::NameClash { format: "kueue", name, first, second: q.path.to_string() });
        }
        if name != q.path.as_str().trim_start_matches("root.").replace('.', "-") && ix != 0 {
            losses.push(format!("{}: named `{name}` (Kubernetes names are lower-case DNS labels)", q.path));
        }
        let parent = q.parent.map(cohort_of);
        let weight = FairSharing { weight: num(q.weight) };
        if !q.is_leaf() {
            let max = q.max.resolve(&total);
            let limited = parent.is_some() && (max.cpu != u64::MAX || max.memory != u64::MAX);
            let resource_groups = if limited {
                // Nominal 0 on the cohort: the subtree may use its leaves' quotas plus this much more.
                let borrow = Resources::new(
                    if max.cpu == u64::MAX { u64::MAX } else { max.cpu.saturating_sub(subtree[ix].cpu) },
                    if max.memory == u64::MAX {
                        u64::MAX
                    } else {
                        max.memory.saturating_sub(subtree[ix].memory)
                    },
                    if max.gpu == u64::MAX { u64::MAX } else { max.gpu.saturating_sub(subtree[ix].gpu) },
                );
                let (covered, resources) = quotas(&Resources::ZERO, &borrow, true);
                vec![ResourceGroup {
                    covered_resources: covered,
                    flavors: vec![Flavor { name: options.flavor.clone(), resources }],
                }]
            } else {
                Vec::new()
            };
            let spec = CohortSpec {
                parent: parent.clone().filter(|_| !api.parent_name),
                parent_name: parent.filter(|_| api.parent_name),
                resource_groups,
                fair_sharing: weight,
            };
            let cohort = Object {
                api_version: api.cohort.to_string(),
                kind: "Cohort",
                metadata: Metadata { name, namespace: None },
                spec: Some(spec),
            };
            docs.push(doc("", &cohort)?);
            continue;
        }
        let cohort = parent.unwrap_or_else(|| "root".into());
        let (covered, resources) = quotas(&g.per_queue[ix], &q.max.resolve(&total), true);
        let spec = ClusterQueueSpec {
            cohort: Some(cohort.clone()).filter(|_| !api.cohort_name),
            cohort_name: Some(cohort).filter(|_| api.cohort_name),
            namespace_selector: Empty {},
            queueing_strategy: if matches!(q.policy, Policy::Fifo | Policy::Priority) {
                "StrictFIFO"
            } else {
                "BestEffortFIFO"
            },
            fair_sharing: weight,
            preemption: cfg
                .scheduler
                .preemption
                .enabled
                .then_some(Preemption { reclaim_within_cohort: "Any" }),
            resource_groups: vec![ResourceGroup {
                covered_resources: covered,
                flavors: vec![Flavor { name: options.flavor.clone(), resources }],
            }],
        };
        let mut notes = format!("# {}", q.path);
        if let Some(t) = q.tier {
            notes.push_str(&format!(" (tier {t})"));
        }
        notes.push('\n');
        let cq = Object {
            api_version: api.queues.to_string(),
            kind: "ClusterQueue",
            metadata: Metadata { name: name.clone(), namespace: None },
            spec: Some(spec),
        };
        docs.push(doc(&notes, &cq)?);
        let lq = Object {
            api_version: api.queues.to_string(),
            kind: "LocalQueue",
            metadata: Metadata { name: name.clone(), namespace: Some(options.namespace.clone()) },
            spec: Some(LocalQueueSpec { cluster_queue: name }),
        };
        docs.push(doc("", &lq)?);
    }
    other_losses(cfg, losses);
    Ok(format!(
        "# Kueue {}: a Cohort per parent queue, a ClusterQueue and a LocalQueue per leaf.\n\
         # nominalQuota = weir's steady fair share of each leaf, fitted inside its parent's.\n{}",
        options.kueue_version,
        docs.join("---\n")
    ))
}

fn other_losses(cfg: &ClusterConfig, losses: &mut Vec<String>) {
    losses.push(
        "weights: fairSharing.weight counts only when Fair Sharing is on in Kueue's Configuration \
         (`fairSharing: {enable: true}` in config.kueue.x-k8s.io/v1beta1, a `fairSharing:` section in v1beta2)"
            .into(),
    );
    let limited: Vec<String> =
        cfg.queues.iter().filter(|q| q.max_running_apps.is_some()).map(|q| q.path.to_string()).collect();
    if !limited.is_empty() {
        losses.push(format!(
            "max_running_apps ({} queues): Kueue has no running-workload limit per queue",
            limited.len()
        ));
    }
    if cfg.scheduler.user_max_running_apps.is_some() || !cfg.users.is_empty() {
        losses.push("per-user running-app limits: Kueue has none".into());
    }
    let protected = cfg.leaves().filter(|q| !q.allow_preemption_from).count();
    if protected > 0 {
        losses.push(format!(
            "allow_preemption_from false ({protected} leaves): Kueue may still reclaim quota those queues borrow"
        ));
    }
    if cfg.queues.iter().any(|q| q.max_am_share.is_some()) {
        losses.push("max_am_share: Kueue admits whole workloads and has no application-master limit".into());
    }
    if cfg
        .queues
        .iter()
        .any(|q| q.fair_share_preemption_timeout.is_some() || q.min_share_preemption_timeout.is_some())
    {
        losses.push(
            "preemption timeouts and thresholds: Kueue preempts at admission, without starvation timers"
                .into(),
        );
    }
    if cfg.queues.iter().any(|q| q.priority != 0) {
        losses.push(
            "queue priorities: Kueue orders by WorkloadPriorityClass of each workload, not per queue".into(),
        );
    }
    if cfg.queues.iter().any(|q| q.acl.is_some()) || cfg.root_acl.is_some() {
        losses.push(
            "ACLs: in Kueue, who may submit is the LocalQueue's namespace (RBAC), not written here".into(),
        );
    }
    if !cfg.queue_placement.is_empty() || !cfg.placement.is_empty() {
        losses.push(
            "placement rules: a Kueue workload names its LocalQueue (kueue.x-k8s.io/queue-name label)".into(),
        );
    }
    if cfg.queues.iter().any(|q| q.policy == Policy::Drf) {
        losses.push("policy drf: Kueue's fair sharing always compares dominant resource shares".into());
    }
}

fn doc<T: Serialize>(comment: &str, value: &T) -> Result<String, PlanError> {
    let yaml = serde_saphyr::to_string(value).map_err(|e| PlanError::Write {
        format: "kueue",
        what: "a Kueue object".into(),
        message: e.to_string(),
    })?;
    Ok(format!("{comment}{yaml}"))
}
