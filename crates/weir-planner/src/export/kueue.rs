//! Kueue objects: one ResourceFlavor, a Cohort per parent queue (hierarchical cohorts), a
//! ClusterQueue and a LocalQueue per leaf.
//!
//! API versions as Kueue documents them for hierarchical cohorts: `kueue.x-k8s.io/v1beta1` for
//! ResourceFlavor, ClusterQueue (`spec.cohort`) and LocalQueue (`spec.clusterQueue`), and
//! `kueue.x-k8s.io/v1alpha1` for Cohort (`spec.parent`). Names: the queue path without `root.`,
//! with `.` and `_` turned into `-` (`root.ads.ranking.tier1` → `ads-ranking-tier1`); the root
//! cohort is `root`.
//!
//! - `nominalQuota` (cpu in cores or millicores, memory in Gi/Mi): the queue's steady fair share,
//!   so the leaves' quotas add up to the cluster;
//! - `borrowingLimit`: `max` − nominal quota where weir caps the queue;
//! - `fairSharing.weight`: the queue's weight (Cohorts and ClusterQueues);
//! - `queueingStrategy`: `StrictFIFO` for fifo leaves, else `BestEffortFIFO`;
//! - `preemption.reclaimWithinCohort: Any` when weir's preemption is enabled, so a queue below
//!   its quota takes it back from borrowers.
//!
//! Kueue has no running-application limit and no "never preempt from this queue"; both are
//! noted in comments on the ClusterQueues they concern.

use std::collections::BTreeMap;

use serde::Serialize;
use weir_model::{ClusterConfig, Policy, Resources, Rounding};

use super::{k8s_cpu, k8s_memory, k8s_name, num, ExportOptions};
use crate::error::PlanError;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Object<S: Serialize> {
    api_version: &'static str,
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
    parent: String,
    fair_sharing: FairSharing,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ClusterQueueSpec {
    cohort: String,
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
    covered_resources: Vec<&'static str>,
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
    name: &'static str,
    nominal_quota: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    borrowing_limit: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LocalQueueSpec {
    cluster_queue: String,
}

pub(super) fn export(cfg: &ClusterConfig, options: &ExportOptions) -> Result<String, PlanError> {
    let mut exact = cfg.clone();
    exact.scheduler.rounding = Rounding::Exact;
    let steady: Vec<Resources> = weir_engine::shares_for(&exact, &[]).into_iter().map(|s| s.steady).collect();
    let total = cfg.total_resources();
    let mut names: BTreeMap<(bool, String), String> = BTreeMap::new();
    let mut docs: Vec<String> = vec![doc(
        "",
        &Object::<Empty> {
            api_version: "kueue.x-k8s.io/v1beta1",
            kind: "ResourceFlavor",
            metadata: Metadata { name: options.flavor.clone(), namespace: None },
            spec: None,
        },
    )?];
    let cohort_of =
        |ix: usize| if ix == 0 { "root".to_string() } else { k8s_name(cfg.queues[ix].path.as_str()) };
    for (ix, q) in cfg.queues.iter().enumerate() {
        let name = cohort_of(ix);
        if let Some(first) = names.insert((q.is_leaf(), name.clone()), q.path.to_string()) {
            return Err(PlanError::NameClash { format: "kueue", name, first, second: q.path.to_string() });
        }
        let parent = q.parent.map(cohort_of);
        let weight = FairSharing { weight: num(q.weight) };
        if !q.is_leaf() {
            let spec = parent.map(|parent| CohortSpec { parent, fair_sharing: weight });
            let cohort = Object {
                api_version: "kueue.x-k8s.io/v1alpha1",
                kind: "Cohort",
                metadata: Metadata { name, namespace: None },
                spec,
            };
            docs.push(doc("", &cohort)?);
            continue;
        }
        let g = steady[ix];
        let max = q.max.resolve(&total);
        let quota = |name: &'static str, nominal: u64, max: u64, fmt: fn(u64) -> String| Quota {
            name,
            nominal_quota: fmt(nominal),
            borrowing_limit: (max != u64::MAX).then(|| fmt(max.saturating_sub(nominal))),
        };
        let mut covered = vec!["cpu", "memory"];
        let mut resources =
            vec![quota("cpu", g.cpu, max.cpu, k8s_cpu), quota("memory", g.memory, max.memory, k8s_memory)];
        if total.gpu > 0 {
            covered.push("nvidia.com/gpu");
            resources.push(quota("nvidia.com/gpu", g.gpu, max.gpu, |v| v.to_string()));
        }
        let spec = ClusterQueueSpec {
            cohort: parent.unwrap_or_else(|| "root".into()),
            namespace_selector: Empty {},
            queueing_strategy: if q.policy == Policy::Fifo { "StrictFIFO" } else { "BestEffortFIFO" },
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
        if let Some(n) = q.max_running_apps {
            notes.push_str(&format!(
                "# weir max_running_apps {n}: Kueue has no running-workload limit per queue\n"
            ));
        }
        if !q.allow_preemption_from {
            notes.push_str("# weir never preempts from this queue; Kueue may reclaim quota it borrows\n");
        }
        let cq = Object {
            api_version: "kueue.x-k8s.io/v1beta1",
            kind: "ClusterQueue",
            metadata: Metadata { name: name.clone(), namespace: None },
            spec: Some(spec),
        };
        docs.push(doc(&notes, &cq)?);
        let lq = Object {
            api_version: "kueue.x-k8s.io/v1beta1",
            kind: "LocalQueue",
            metadata: Metadata { name: name.clone(), namespace: Some(options.namespace.clone()) },
            spec: Some(LocalQueueSpec { cluster_queue: name }),
        };
        docs.push(doc("", &lq)?);
    }
    Ok(format!(
        "# Kueue configuration written by weir: a Cohort per parent queue, a ClusterQueue and a\n\
         # LocalQueue per leaf. nominalQuota = weir's steady fair share of each leaf.\n{}",
        docs.join("---\n")
    ))
}

fn doc<T: Serialize>(comment: &str, value: &T) -> Result<String, PlanError> {
    let yaml = serde_saphyr::to_string(value).map_err(|e| PlanError::Write {
        format: "kueue",
        what: "a Kueue object".into(),
        message: e.to_string(),
    })?;
    Ok(format!("{comment}{yaml}"))
}
