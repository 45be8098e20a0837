//! Capacity mode's queue settings (the YARN Capacity Scheduler's `yarn.scheduler.capacity.*`
//! properties), as written in the cluster file and as resolved for the engine.
//!
//! A queue's `capacity` is a percent of its parent (siblings sum to 100), a weight (`3w`,
//! normalised among its siblings) or absolute resources; `max_capacity` is a percent of the
//! parent or absolute resources, 100 when absent. Both resolve to a share of the whole cluster
//! down the tree (YARN's absolute capacity and absolute maximum capacity), which the engine
//! holds as the queue's guarantee and cap. The other settings keep the Capacity Scheduler's
//! defaults: `user_limit_factor` 1, `min_user_percent` 100, user weight 1, queue priority 0,
//! `max_am_percent` 0.1, `max_applications` 10,000 × the queue's absolute capacity.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::resources::{PartialResources, Resources};

/// A queue's `capacity` or `max_capacity` as written.
#[derive(Clone, Debug, PartialEq)]
pub enum CapacitySpec {
    /// Percent of the parent: a bare number such as `55`.
    Percent(f64),
    /// A weight such as `3w`: the share is the weight over the sum of the siblings' weights.
    Weight(f64),
    /// Absolute resources such as `{cpu: 40000, memory: 163840}`.
    Absolute(PartialResources),
}

impl CapacitySpec {
    /// The mode's name, for errors that compare siblings.
    pub fn kind(&self) -> &'static str {
        match self {
            CapacitySpec::Percent(_) => "a percent",
            CapacitySpec::Weight(_) => "a weight",
            CapacitySpec::Absolute(_) => "absolute resources",
        }
    }
}

impl Serialize for CapacitySpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            CapacitySpec::Percent(p) => s.serialize_f64(*p),
            CapacitySpec::Weight(w) => s.serialize_str(&format!("{w}w")),
            CapacitySpec::Absolute(r) => r.serialize(s),
        }
    }
}

/// By hand, as `LimitSpec`: an untagged enum would hide which part of a map was wrong.
impl<'de> Deserialize<'de> for CapacitySpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct CapacityVisitor;
        impl<'de> serde::de::Visitor<'de> for CapacityVisitor {
            type Value = CapacitySpec;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(
                    "a percent of the parent such as 40, a weight such as \"3w\", or resources such as \
                     {cpu: 40000, memory: 160g}",
                )
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<CapacitySpec, E> {
                Ok(CapacitySpec::Percent(v as f64))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<CapacitySpec, E> {
                Ok(CapacitySpec::Percent(v as f64))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<CapacitySpec, E> {
                Ok(CapacitySpec::Percent(v))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<CapacitySpec, E> {
                let t = v.trim();
                let number = |s: &str| s.trim().parse::<f64>().ok().filter(|n| n.is_finite());
                if let Some(w) = t.strip_suffix('w').and_then(number) {
                    Ok(CapacitySpec::Weight(w))
                } else if let Some(p) = t.strip_suffix('%').and_then(number).or_else(|| number(t)) {
                    Ok(CapacitySpec::Percent(p))
                } else {
                    Err(E::custom(format!(
                        "`{v}` is not a capacity: write a percent of the parent such as 40, a weight \
                         such as 3w, or resources such as {{cpu: 40000, memory: 160g}}"
                    )))
                }
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<CapacitySpec, A::Error> {
                PartialResources::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(CapacitySpec::Absolute)
            }
        }
        d.deserialize_any(CapacityVisitor)
    }
}

/// Whether a queue takes new jobs (YARN's queue `state`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum QueueState {
    #[default]
    Running,
    /// Rejects new jobs; what it holds runs to the end (it drains).
    Stopped,
}

/// The order of jobs inside a capacity-mode leaf (YARN's leaf `ordering-policy`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LeafOrdering {
    /// Job priority (higher first), then submit time (`FifoOrderingPolicy` with
    /// `FifoComparator`: priority, then application id).
    #[default]
    Fifo,
    /// The job using the least memory first, then submit time (`FairOrderingPolicy`:
    /// `FairComparator`, then `FifoComparator`); with `size_based_weight`, usage over
    /// log2(1 + demand).
    Fair,
}

/// YARN's `yarn.scheduler.capacity.maximum-applications`.
pub const DEFAULT_MAX_APPLICATIONS: u32 = 10_000;
/// YARN's `yarn.scheduler.capacity.maximum-am-resource-percent`.
pub const DEFAULT_MAX_AM_PERCENT: f64 = 0.1;

/// A capacity-mode queue's settings, resolved (defaults applied, shares made absolute).
#[derive(Clone, Debug, PartialEq)]
pub struct CapacityQueue {
    /// `capacity` as written (`None` on root).
    pub configured: Option<CapacitySpec>,
    /// `max_capacity` as written.
    pub configured_max: Option<CapacitySpec>,
    /// The queue's guarantee as a fraction of the cluster (YARN's absolute capacity) when the
    /// tree is in percent or weight mode; `None` under absolute resources.
    pub absolute_capacity: Option<f64>,
    /// The queue's cap as a fraction of the cluster (YARN's absolute maximum capacity) when
    /// it is a percent; `None` when absolute resources.
    pub absolute_max_capacity: Option<f64>,
    /// Capacity of its guarantee one user may hold: 1 = the whole guarantee; -1 = no user
    /// limit beyond the queue's max.
    pub user_limit_factor: f64,
    /// The least share (percent) of the queue a user gets when that many users ask (YARN's
    /// `minimum-user-limit-percent`).
    pub min_user_percent: f64,
    /// Per-user weights in the user limit (YARN's `user-settings.<user>.weight`); 1 otherwise.
    pub user_weights: BTreeMap<String, f64>,
    /// Among siblings on the same side of their guarantee, higher goes first.
    pub queue_priority: i32,
    /// Above this many jobs (running and waiting) a submission is rejected (leaves).
    pub max_applications: u32,
    /// Above this many running jobs a job waits (leaves; `None`: no limit).
    pub max_parallel_apps: Option<u32>,
    /// Application masters may hold this fraction of the queue's capacity (leaves).
    pub max_am_percent: f64,
    pub state: QueueState,
    pub ordering: LeafOrdering,
    /// `ordering: fair` only: divide a job's usage by log2(1 + its demand) (YARN's
    /// `ordering-policy.fair.enable-size-based-weight`).
    pub size_based_weight: bool,
    /// Node labels whose partitions the queue may use, with its share of each.
    pub labels: BTreeMap<String, LabelShare>,
    /// The label of requests that name none (`default-node-label-expression`).
    pub default_label: Option<String>,
}

/// A queue's share of one node label's partition, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct LabelShare {
    /// Percent of the parent's share of the partition, as written (0 when not written).
    pub capacity: f64,
    /// Percent of the parent's max in the partition (100 when not written).
    pub max_capacity: f64,
    /// The guarantee as a fraction of the partition.
    pub absolute_capacity: f64,
    /// The cap as a fraction of the partition.
    pub absolute_max_capacity: f64,
}

impl CapacityQueue {
    /// A user's weight in this queue's user limit.
    pub fn user_weight(&self, user: &str) -> f64 {
        self.user_weights.get(user).copied().unwrap_or(1.0)
    }
}

/// `capacity` of siblings in percent or weight mode, turned into fractions of their parent.
/// `None` when they mix modes or use absolute resources (the caller reports it).
pub(crate) fn sibling_fractions(specs: &[Option<&CapacitySpec>]) -> Option<Vec<f64>> {
    if specs.iter().all(|s| matches!(s, Some(CapacitySpec::Percent(_)))) {
        Some(
            specs
                .iter()
                .map(|s| if let Some(CapacitySpec::Percent(p)) = s { p / 100.0 } else { 0.0 })
                .collect(),
        )
    } else if specs.iter().all(|s| matches!(s, Some(CapacitySpec::Weight(_)))) {
        let w: Vec<f64> =
            specs.iter().map(|s| if let Some(CapacitySpec::Weight(w)) = s { *w } else { 0.0 }).collect();
        let sum: f64 = w.iter().sum();
        Some(w.iter().map(|x| if sum > 0.0 { x / sum } else { 0.0 }).collect())
    } else {
        None
    }
}

/// Absolute resources of an absolute-mode capacity, missing components 0.
pub(crate) fn absolute(spec: &PartialResources) -> Resources {
    spec.or(0)
}
