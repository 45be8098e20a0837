//! The cluster file (`cluster.yaml`) exactly as written: every field optional where the format
//! allows, unknown fields rejected. [`crate::ClusterConfig`] is the validated, resolved form.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::access::{AclSpec, PlacementRuleSpec, UserSpec};
use crate::capacity::{CapacitySpec, LeafOrdering, QueueState};
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
    /// Where workflows placed by project (and tier) go; the first matching rule wins, and
    /// without one a workflow goes to `root.<project>.tier<N>`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub placement: Vec<PlacementSpec>,
    /// The root queue's ACLs (YARN's default for the root: everyone). Carried to other
    /// schedulers, not enforced by weir yet; see `access.rs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_acl: Option<AclSpec>,
    /// Per-user limits by user name (YARN's `<user>` elements). Carried, not enforced yet.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub users: BTreeMap<String, UserSpec>,
    /// How applications submitted by user rather than by workflow project are placed (YARN's
    /// `queuePlacementPolicy`), rules in order. Carried, not enforced yet.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub queue_placement: Vec<PlacementRuleSpec>,
    /// The Unix user each project's tasks run as under `weir serve`'s local backend (as Slurm
    /// runs a job as its submitter), by dotted project; a project not named here uses its
    /// nearest named parent, then the server's task user (`weir-task`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub run_as: BTreeMap<String, String>,
}

/// One placement rule: workflows of `project` (at `tier`, or at any tier when it is left out)
/// go to the leaf `queue`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PlacementSpec {
    /// Dotted, as in the queue tree without `root`: `ads.ranking`.
    pub project: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<u8>,
    pub queue: String,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Hadoop YARN Fair Scheduler semantics.
    #[default]
    Fair,
    /// Hadoop YARN Capacity Scheduler semantics: capacities, user limits, queue priorities
    /// and proportional preemption (see `capacity.rs`; node labels not implemented yet).
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

/// The order of jobs inside a `fifo` leaf.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum JobOrder {
    /// Submit time, then id (first come, first served).
    #[default]
    Submit,
    /// Shortest requested walltime of its next request first (SJF); none counts as longest.
    Shortest,
    /// Largest job first: most cpu asked for (held and pending).
    Largest,
}

impl JobOrder {
    pub fn name(self) -> &'static str {
        match self {
            JobOrder::Submit => "submit",
            JobOrder::Shortest => "shortest",
            JobOrder::Largest => "largest",
        }
    }
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
    /// Submit time only, as YARN's FIFO policy (the Fair Scheduler gives every app priority 1).
    /// Leaves only.
    Fifo,
    /// weir's order: job priority (higher first), then submit time. Leaves only.
    Priority,
}

impl Policy {
    pub fn name(self) -> &'static str {
        match self {
            Policy::Fair => "fair",
            Policy::Drf => "drf",
            Policy::Fifo => "fifo",
            Policy::Priority => "priority",
        }
    }

    /// Whether the policy orders jobs only (fifo, priority), so it cannot be set on a parent.
    pub fn leaf_only(self) -> bool {
        matches!(self, Policy::Fifo | Policy::Priority)
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
    /// `max_am_share` of leaves that set none (YARN's `queueMaxAMShareDefault`): 0.5 when
    /// absent; -1 turns the AM-share check off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_max_am_share_default: Option<f64>,
    /// Requests round up to at least this before the increment (YARN's minimum allocation);
    /// missing components: no minimum.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimum_allocation: Option<PartialResources>,
    /// The share of the cluster's nodes one job may hold reserved while its next container fits
    /// on none of them (YARN's `reservable-nodes`): 0.05 when absent; 0 = no reservations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservable_nodes: Option<f64>,
    /// How a gang that cannot start waits: `none` (it holds room as it frees, placeholders)
    /// or `easy` (EASY backfilling: it gets a reserved start from the walltimes of what runs,
    /// and later jobs may start first only if they do not delay it). Default `none`.
    #[serde(default, skip_serializing_if = "Backfill::is_none")]
    pub backfill: Backfill,
    /// Under EASY backfilling, how many jobs a pass tries after the reservation is made (as
    /// Slurm's backfill scheduler's `bf_max_job_test`, 500 by default, bounds its scan): 500
    /// when absent, at least 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backfill_depth: Option<u32>,
    /// How long a gang may hold placeholders without starting before they are released and
    /// the gang goes to the back of its queue (YuniKorn's placeholder timeout): 15m when absent;
    /// 0s never releases them (a strict first come, first served for gangs, as an HPC queue).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gang_timeout: Option<Duration>,
    /// Capacity mode: jobs (running and waiting) the whole cluster may hold; a leaf's
    /// `max_applications` defaults to this times its absolute capacity (YARN's
    /// `yarn.scheduler.capacity.maximum-applications`, 10,000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_applications: Option<u32>,
    /// Capacity mode: `max_am_percent` of leaves that set none (YARN's
    /// `maximum-am-resource-percent`, 0.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_am_percent: Option<f64>,
    /// Capacity mode: the node labels' partitions, by label: whether each is exclusive (YARN's
    /// `yarn rmadmin -addToClusterNodeLabels "x(exclusive=…)"`). A label on nodes and not
    /// listed here is exclusive, as YARN's default.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_labels: BTreeMap<String, NodeLabelSpec>,
}

/// A node label's partition (capacity mode).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NodeLabelSpec {
    /// Exclusive: only requests for the label run on its nodes. Not exclusive: their idle room
    /// is lent to requests for no label, and taken back by preemption when the label's own
    /// requests need it.
    #[serde(default = "yes")]
    pub exclusive: bool,
}

fn yes() -> bool {
    true
}

/// A queue's share of one node label's partition (capacity mode), in percent of its parent's.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LabelCapacitySpec {
    /// The guarantee in the partition: percent of the parent's (siblings sum to 100, or all 0).
    #[serde(default)]
    pub capacity: f64,
    /// The most it may hold there: percent of the parent's max (100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_capacity: Option<f64>,
}

/// How a gang (an all-or-nothing set of containers) that cannot start now waits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backfill {
    /// The gang holds the room that frees up (placeholders, as YuniKorn) until all of it fits.
    #[default]
    None,
    /// EASY backfilling: the first gang that cannot start gets a reserved start computed from
    /// the requested walltimes of what runs; later work may start first only if it ends by
    /// then or uses room the gang will not need.
    Easy,
    /// Conservative backfilling: every gang that cannot start gets a reservation, planned
    /// around the reservations before it, and no later start may delay any of them.
    Conservative,
}

impl Backfill {
    pub fn is_none(&self) -> bool {
        *self == Backfill::None
    }
}

/// What preemption may do to a running gang.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GangPreemption {
    /// Taking one container of a gang takes the whole gang.
    #[default]
    Whole,
    /// A gang's containers are never taken.
    Protected,
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
    /// Capacity mode: how often the proportional policy looks (YARN's
    /// `monitor.capacity.preemption.monitoring_interval`, 3 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitoring_interval: Option<Duration>,
    /// Capacity mode: a queue is left alone while it holds at most its guarantee × (1 + this)
    /// (`max_ignored_over_capacity`, 0.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_ignored_over_capacity: Option<f64>,
    /// Capacity mode: at most this share of the cluster is taken per round
    /// (`total_preemption_per_round`, 0.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_preemption_per_round: Option<f64>,
    /// Capacity mode: each round takes this share of what a queue is over its ideal
    /// allocation, counting on containers to end by themselves (`natural_termination_factor`, 0.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub natural_termination_factor: Option<f64>,
    /// Capacity mode: a marked container still chosen this long after it was marked is killed
    /// (`max_wait_before_kill`, 15 s). Fair mode calls it `kill_wait`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_wait_before_kill: Option<Duration>,
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
    /// The model of the nodes' GPUs (e.g. A100), which tasks may ask for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_model: Option<String>,
}

fn one() -> u32 {
    1
}

/// A queue's `min` or `max`: a resource map, or a percentage of the cluster such as `"25%"`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum LimitSpec {
    Absolute(PartialResources),
    Percent(String),
}

/// By hand rather than `#[serde(untagged)]`: an untagged enum reports every mistake as "data did
/// not match any variant" and hides which field of the map was wrong.
impl<'de> Deserialize<'de> for LimitSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct LimitVisitor;
        impl<'de> serde::de::Visitor<'de> for LimitVisitor {
            type Value = LimitSpec;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a resource map such as {cpu: 4000, memory: 16g} or a percentage of the cluster such as \"25%\"")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<LimitSpec, E> {
                Ok(LimitSpec::Percent(v.to_string()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<LimitSpec, A::Error> {
                PartialResources::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(LimitSpec::Absolute)
            }
        }
        d.deserialize_any(LimitVisitor)
    }
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct QueueSpec {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<LimitSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<LimitSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_running_apps: Option<u32>,
    /// A leaf's limit on application masters as a fraction of its fair share, or -1 for none;
    /// `scheduler.queue_max_am_share_default` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_am_share: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<Policy>,
    /// A `fifo` leaf's job order: `submit` (the default), `shortest` (shortest job first, by
    /// requested walltime; jobs without one last) or `largest` (most cpu asked for first) — the
    /// orders HPC scheduling studies compare.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_order: Option<JobOrder>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_preemption_from: Option<bool>,
    /// Capacity mode: YARN's `disable_preemption`, the opposite of `allow_preemption_from`
    /// (inherited the same way); give one or the other.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_preemption: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_share_preemption_timeout: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_share_preemption_threshold: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_share_preemption_timeout: Option<Duration>,
    /// What preemption may do to a running gang here: `whole` (taking one container takes the
    /// gang) or `protected` (never taken). Inherited from the parent; `whole` at the top.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gang_preemption: Option<GangPreemption>,
    /// Who may submit to and administer this queue and the queues below it. Carried, not
    /// enforced by weir yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acl: Option<AclSpec>,
    /// A leaf here that YARN treats as a parent whose children are created at run time
    /// (`type="parent"`); weir schedules it as a leaf.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dynamic_parent: Option<bool>,
    /// A leaf whose resources YARN's reservation system may reserve (`<reservation/>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservable: Option<bool>,
    /// Capacity mode: the queue's guarantee — a percent of the parent (siblings sum to 100), a
    /// weight such as `3w`, or resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<CapacitySpec>,
    /// Capacity mode: the most the queue may hold — a percent of the parent (100 when absent)
    /// or resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_capacity: Option<CapacitySpec>,
    /// Capacity mode, leaves: how many times the queue's capacity one user may hold (1);
    /// -1 for no limit but the queue's max.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_limit_factor: Option<f64>,
    /// Capacity mode, leaves: the least percent of the queue each user gets when that many
    /// ask (100: YARN's `minimum-user-limit-percent`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_user_percent: Option<f64>,
    /// Capacity mode, leaves: users' weights in the user limit (1 for users not named).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub user_weights: BTreeMap<String, f64>,
    /// Capacity mode, leaves: above this many jobs, running and waiting, a submission is
    /// rejected (`scheduler.max_applications` × the absolute capacity when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_applications: Option<u32>,
    /// Capacity mode: above this many running jobs under the queue, a job waits (no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_parallel_apps: Option<u32>,
    /// Capacity mode, leaves: the fraction of the queue's capacity application masters may
    /// hold (`scheduler.max_am_percent`, 0.1, when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_am_percent: Option<f64>,
    /// Capacity mode: `running` (the default) or `stopped` (rejects new jobs and drains).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<QueueState>,
    /// Capacity mode, leaves: `fifo` (job priority, then submit time; the default) or `fair`
    /// (the job using the least memory first, then submit time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ordering: Option<LeafOrdering>,
    /// Capacity mode, leaves with `ordering: fair`: a job's usage is divided by log2(1 +
    /// its demand), so that large jobs are not starved by a stream of small ones (false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_based_weight: Option<bool>,
    /// Capacity mode: the node labels whose nodes the queue's jobs may ask for, with its
    /// capacity and max capacity in each label's partition. Absent: the parent's labels, with
    /// capacity 0 and max capacity 100 in each (root: every label, 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accessible_labels: Option<BTreeMap<String, LabelCapacitySpec>>,
    /// Capacity mode: the label a request that names none asks for (YARN's
    /// `default-node-label-expression`); inherited from the parent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_label: Option<String>,
    /// Last, so that a written file shows a queue's own settings before its subtree.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<QueueSpec>,
}

/// Just the queue names of a cluster file, read leniently (other fields ignored, a `queues` or
/// `children` of the wrong shape read as empty) so that a syntax error's path can name queues the
/// way validation errors do, even when the error is in the tree's own shape.
#[derive(Deserialize)]
struct NamesOnly {
    #[serde(default)]
    queues: QueueNames,
}

#[derive(Deserialize)]
struct QueueName {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    children: QueueNames,
}

/// A list of queues, or nothing if the value is not a list. A streaming visitor, not an untagged
/// enum: an untagged enum buffers values through `deserialize_any`, which reads a plain `y` or
/// `on` as a YAML 1.1 boolean, and those are fine queue names.
#[derive(Default)]
struct QueueNames(Vec<QueueName>);

impl<'de> Deserialize<'de> for QueueNames {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ListVisitor;
        impl<'de> serde::de::Visitor<'de> for ListVisitor {
            type Value = QueueNames;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("anything")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<QueueNames, A::Error> {
                let mut list = Vec::new();
                while let Some(q) = seq.next_element()? {
                    list.push(q);
                }
                Ok(QueueNames(list))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<QueueNames, A::Error> {
                while map.next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?.is_some() {}
                Ok(QueueNames::default())
            }
            fn visit_bool<E>(self, _: bool) -> Result<QueueNames, E> {
                Ok(QueueNames::default())
            }
            fn visit_i64<E>(self, _: i64) -> Result<QueueNames, E> {
                Ok(QueueNames::default())
            }
            fn visit_u64<E>(self, _: u64) -> Result<QueueNames, E> {
                Ok(QueueNames::default())
            }
            fn visit_f64<E>(self, _: f64) -> Result<QueueNames, E> {
                Ok(QueueNames::default())
            }
            fn visit_str<E>(self, _: &str) -> Result<QueueNames, E> {
                Ok(QueueNames::default())
            }
            fn visit_unit<E>(self) -> Result<QueueNames, E> {
                Ok(QueueNames::default())
            }
            fn visit_none<E>(self) -> Result<QueueNames, E> {
                Ok(QueueNames::default())
            }
        }
        d.deserialize_any(ListVisitor)
    }
}

/// Rewrite serde's `queues[0].children[2].wieght` as `queues.ads.children.tier3.wieght`, the form
/// validation errors use. Where a name cannot be read (the file is too broken, or the queue has no
/// usable name) the index stays.
pub(crate) fn name_queue_path(text: &str, path: &str) -> String {
    let Ok(names) = serde_saphyr::from_str::<NamesOnly>(text) else {
        return path.to_string();
    };
    let mut out: Vec<String> = Vec::new();
    // The queues one level down from the segment just read, while the path stays in the tree.
    let mut level: Option<&[QueueName]> = None;
    for (i, segment) in path.split('.').enumerate() {
        let indexed = segment
            .split_once('[')
            .and_then(|(field, rest)| Some((field, rest.strip_suffix(']')?.parse::<usize>().ok()?)));
        let list = match (i, indexed) {
            (0, Some(("queues", _))) => Some(names.queues.0.as_slice()),
            (_, Some(("children", _))) => level,
            _ => None,
        };
        let queue = list.zip(indexed).and_then(|(list, (_, index))| list.get(index));
        match (queue, indexed) {
            (Some(QueueName { name: Some(name), children }), Some((field, _))) if usable(name) => {
                out.push(format!("{field}.{name}"));
                level = Some(children.0.as_slice());
            }
            _ => {
                out.push(segment.to_string());
                level = None;
            }
        }
    }
    out.join(".")
}

fn usable(name: &str) -> bool {
    !name.is_empty() && !name.contains(['.', '[', ']', ' '])
}
