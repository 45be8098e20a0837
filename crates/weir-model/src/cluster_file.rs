//! The cluster file (`cluster.yaml`) exactly as written: every field optional where the format
//! allows, unknown fields rejected. [`crate::ClusterConfig`] is the validated, resolved form.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::resources::PartialResources;
use crate::time::Duration;

/// The whole cluster file.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterFile {
    pub version: u32,
    #[serde(default)]
    pub scheduler: SchedulerSpec,
    /// Per-tier defaults, keyed by tier number (1 = most critical).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tiers: BTreeMap<u8, TierSpec>,
    #[serde(default)]
    pub nodes: Vec<NodeGroupSpec>,
    /// The children of the implicit `root` queue.
    #[serde(default)]
    pub queues: Vec<QueueSpec>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Hadoop YARN Fair Scheduler semantics.
    #[default]
    Fair,
    /// Hadoop YARN Capacity Scheduler semantics (not implemented yet).
    Capacity,
}

/// How fair shares are rounded to integers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Rounding {
    /// YARN's: bisection for 25 steps, truncate, take the upper bound (may sum above the pool).
    #[default]
    Yarn,
    /// Shares sum to the pool exactly (largest remainder), within the min/max clamps.
    Exact,
}

/// How a queue orders its children (or a leaf its jobs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    /// Max-min fairness on memory.
    #[default]
    Fair,
    /// Dominant-resource fairness over every resource.
    Drf,
    /// Priority, then submit time. Leaves only.
    Fifo,
}

impl Policy {
    pub fn name(self) -> &'static str {
        match self {
            Policy::Fair => "fair",
            Policy::Drf => "drf",
            Policy::Fifo => "fifo",
        }
    }
}

/// The order in which waiting jobs become runnable when a running-app limit frees up.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Promotion {
    /// Tier/job priority first, then submit time: low-tier jobs that came first cannot hold back tier 1.
    #[default]
    Priority,
    /// Submit time only, as YARN does.
    Fifo,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SchedulerSpec {
    #[serde(default)]
    pub mode: Mode,
    #[serde(default)]
    pub rounding: Rounding,
    #[serde(default)]
    pub root_policy: Policy,
    /// Requests round up to multiples of these (missing components: no rounding).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub increment: Option<PartialResources>,
    #[serde(default)]
    pub promotion: Promotion,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemption: Option<PreemptionSpec>,
    /// Running jobs allowed per user (YARN's `userMaxAppsDefault`); no limit when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_max_running_apps: Option<u32>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PreemptionSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Preempt only while cluster utilization (the most used resource) is at least this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utilization_threshold: Option<f64>,
    /// Time between marking a victim and killing it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kill_wait: Option<Duration>,
    /// Defaults for queues that set neither the field nor a tier that sets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_share_preemption_timeout: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_share_preemption_threshold: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_share_preemption_timeout: Option<Duration>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TierSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_preemption_from: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_share_preemption_timeout: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_share_preemption_threshold: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_share_preemption_timeout: Option<Duration>,
    /// The planner's percentile for this tier (percent of in-use time to cover).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percentile: Option<f64>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NodeGroupSpec {
    #[serde(default = "one")]
    pub count: u32,
    pub resources: PartialResources,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

fn one() -> u32 {
    1
}

/// A queue's `min` or `max`: a resource map, or a percentage of the cluster such as `"25%"`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum LimitSpec {
    Absolute(PartialResources),
    Percent(String),
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct QueueSpec {
    pub name: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<QueueSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<LimitSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<LimitSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_running_apps: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_am_share: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<Policy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_preemption_from: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_share_preemption_timeout: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_share_preemption_threshold: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_share_preemption_timeout: Option<Duration>,
}
