//! The validated, resolved cluster configuration: the queue tree flattened depth-first with
//! every inherited setting (tier defaults, preemption timeouts) already applied.

use std::collections::BTreeMap;

use crate::access::{AclSpec, PlacementRuleSpec, UserSpec};
use crate::cluster_file::{
    name_queue_path, Backfill, ClusterFile, GangPreemption, Mode, Policy, Promotion, Rounding,
};
use crate::error::{parse_yaml_named, ModelError, Problem};
use crate::placement::PlacementRule;
use crate::queue_path::QueuePath;
use crate::resources::Resources;
use crate::time::Duration;

/// Index of a queue in [`ClusterConfig::queues`]; 0 is `root`.
pub type QueueIndex = usize;

/// Tier numbers weir knows: 1 (most critical) to 3.
pub const TIERS: std::ops::RangeInclusive<u8> = 1..=3;

/// The most nodes a cluster may have, all groups together. The engine and the simulator keep a
/// record of a few hundred bytes per node, so 4,294,967,295 nodes in a 119-byte file would
/// otherwise end in an allocation failure; no single batch cluster comes near this.
pub const MAX_NODES: u64 = 200_000;

pub(crate) fn too_many_nodes(n: u64) -> String {
    format!(
        "{n} nodes is more than the {MAX_NODES} weir models in one cluster; describe a larger \
         fleet as several clusters, or larger nodes"
    )
}

/// The problem with a tier number outside [`TIERS`], as every file reports it.
pub(crate) fn not_a_tier(t: u8) -> String {
    format!("{t} is not a tier: tiers are numbered 1 (most critical) to 3")
}

#[derive(Clone, Debug, PartialEq)]
pub struct ClusterConfig {
    pub scheduler: SchedulerConfig,
    /// Tier defaults after merging the file's `tiers:` over the built-in ones.
    pub tiers: BTreeMap<u8, TierDefaults>,
    pub nodes: Vec<NodeGroup>,
    /// Depth-first, parents before children; `queues[0]` is `root`.
    pub queues: Vec<QueueConfig>,
    /// The file's placement rules, in order; every rule's queue is an existing leaf.
    pub placement: Vec<PlacementRule>,
    /// The root's ACLs, per-user limits and the application placement policy (`access.rs`).
    pub root_acl: Option<AclSpec>,
    pub users: BTreeMap<String, UserSpec>,
    pub queue_placement: Vec<PlacementRuleSpec>,
    /// The file as written, for exporters that must keep what the user set and nothing more.
    pub file: ClusterFile,
    /// What is valid for weir but would behave differently elsewhere (a layout YARN refuses
    /// under `rounding: exact`, where weir only warns). Each names its path in the file.
    pub warnings: Vec<Problem>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct SchedulerConfig {
    pub mode: Mode,
    pub rounding: Rounding,
    pub root_policy: Policy,
    /// Requests round up to multiples of this; a zero component means no rounding.
    pub increment: Resources,
    pub promotion: Promotion,
    pub preemption: PreemptionConfig,
    pub user_max_running_apps: Option<u32>,
    /// The AM share of leaves that set none; `None` when -1 turns the check off.
    pub queue_max_am_share_default: Option<f64>,
    /// Requests round up to at least this, then to the increment; a zero component: no minimum.
    pub minimum_allocation: Resources,
    /// The share of the nodes one job may hold reserved; 0 = no reservations.
    pub reservable_nodes: f64,
    /// How a gang that cannot start waits: holding room (`None`) or EASY backfilling.
    pub backfill: Backfill,
    /// Under EASY backfilling, the jobs a pass tries after the reservation is made.
    pub backfill_depth: u32,
    /// How long a gang may hold placeholders without starting (YuniKorn's placeholder timeout);
    /// zero: for ever.
    pub gang_timeout: Duration,
}

impl SchedulerConfig {
    /// A request as the scheduler sees it (YARN's normalization): at least the minimum
    /// allocation, then rounded up to a multiple of the increment.
    pub fn normalize(&self, r: &Resources) -> Resources {
        r.component_max(&self.minimum_allocation).round_up_to(&self.increment)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct PreemptionConfig {
    pub enabled: bool,
    pub utilization_threshold: f64,
    /// Fair mode's `kill_wait`; in capacity mode `max_wait_before_kill`.
    pub kill_wait: Duration,
    /// Capacity mode's proportional policy (defaults in fair mode, where nothing reads it).
    pub capacity: CapacityPreemption,
}

/// The settings of capacity mode's proportional preemption (YARN's
/// `ProportionalCapacityPreemptionPolicy`), each with YARN's default.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CapacityPreemption {
    /// How often a round runs (3 s).
    pub monitoring_interval: Duration,
    /// The dead zone: a queue holding at most guarantee × (1 + this) loses nothing (0.1).
    pub max_ignored_over_capacity: f64,
    /// At most this share of the cluster is chosen per round (0.1).
    pub total_preemption_per_round: f64,
    /// The share of a queue's excess chosen per round (0.2).
    pub natural_termination_factor: f64,
}

impl Default for CapacityPreemption {
    fn default() -> Self {
        CapacityPreemption {
            monitoring_interval: Duration::from_secs(3),
            max_ignored_over_capacity: 0.1,
            total_preemption_per_round: 0.1,
            natural_termination_factor: 0.2,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct TierDefaults {
    pub priority: i32,
    pub allow_preemption_from: bool,
    pub fair_share_preemption_timeout: Option<Duration>,
    pub fair_share_preemption_threshold: Option<f64>,
    pub min_share_preemption_timeout: Option<Duration>,
    /// The planner's percentile (percent of in-use time to cover).
    pub percentile: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct NodeGroup {
    pub count: u32,
    pub resources: Resources,
    pub label: Option<String>,
    /// The model of the nodes' GPUs, when they have GPUs and it is known.
    pub gpu_model: Option<String>,
}

/// A queue's min or max, resolved against the cluster's size when the engine needs it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Limit {
    Absolute(Resources),
    /// Percent of the cluster's total, per resource.
    Percent(f64),
}

impl Limit {
    pub fn resolve(&self, cluster: &Resources) -> Resources {
        match self {
            Limit::Absolute(r) => *r,
            Limit::Percent(p) => cluster.scale(p / 100.0),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct QueueConfig {
    pub path: QueuePath,
    pub name: String,
    pub parent: Option<QueueIndex>,
    pub children: Vec<QueueIndex>,
    pub weight: f64,
    pub min: Limit,
    pub max: Limit,
    pub max_running_apps: Option<u32>,
    /// `max_am_share` as the file sets it on this queue (-1 = off), for exporters.
    pub max_am_share: Option<f64>,
    /// The AM share the scheduler applies: the leaf's `max_am_share`, else the scheduler's
    /// default; `None` on parents and where -1 turns the check off.
    pub am_share: Option<f64>,
    pub policy: Policy,
    /// A `fifo` leaf's job order (`submit` elsewhere).
    pub job_order: crate::cluster_file::JobOrder,
    pub tier: Option<u8>,
    pub priority: i32,
    pub allow_preemption_from: bool,
    pub fair_share_preemption_timeout: Option<Duration>,
    pub fair_share_preemption_threshold: f64,
    pub min_share_preemption_timeout: Option<Duration>,
    /// What preemption may do to a running gang in this queue (inherited from the parent).
    pub gang_preemption: GangPreemption,
    /// Enforced by `weir serve` for submissions (by user) and carried for other schedulers
    /// (see `access.rs`).
    pub acl: Option<AclSpec>,
    pub dynamic_parent: bool,
    pub reservable: bool,
    /// Capacity mode's settings (`None` in fair mode). Its guarantee and cap are also `min`
    /// and `max` (as shares of the cluster, or resources), its capacity share `weight`, its
    /// `max_parallel_apps` `max_running_apps` and its `max_am_percent` `am_share`.
    pub capacity: Option<crate::capacity::CapacityQueue>,
}

impl QueueConfig {
    pub fn is_leaf(&self) -> bool {
        self.children.is_empty()
    }
}

/// Built-in tier defaults; a file's `tiers:` entries override them field by field.
pub fn builtin_tier(tier: u8) -> TierDefaults {
    let (priority, allow, percentile) = match tier {
        1 => (300, false, 95.0),
        2 => (200, true, 85.0),
        _ => (100, true, 70.0),
    };
    TierDefaults {
        priority,
        allow_preemption_from: allow,
        fair_share_preemption_timeout: None,
        fair_share_preemption_threshold: None,
        min_share_preemption_timeout: None,
        percentile,
    }
}

impl ClusterConfig {
    /// Parse and validate a cluster file. `file` names it in errors.
    pub fn from_yaml(file: &str, text: &str) -> Result<ClusterConfig, ModelError> {
        let raw: ClusterFile = parse_yaml_named(file, text, name_queue_path)?;
        ClusterConfig::from_file(file, raw)
    }

    /// Validate a parsed cluster file, collecting every problem before failing.
    pub fn from_file(file: &str, raw: ClusterFile) -> Result<ClusterConfig, ModelError> {
        crate::cluster_validation::validate(file, raw)
    }

    /// Sum of every node's resources.
    pub fn total_resources(&self) -> Resources {
        self.nodes.iter().fold(Resources::ZERO, |acc, g| acc + g.resources.times(g.count as u64))
    }

    pub fn node_count(&self) -> u64 {
        self.nodes.iter().map(|g| g.count as u64).sum()
    }

    pub fn find(&self, path: &QueuePath) -> Option<QueueIndex> {
        self.queues.iter().position(|q| &q.path == path)
    }

    pub fn leaves(&self) -> impl Iterator<Item = &QueueConfig> {
        self.queues.iter().filter(|q| q.is_leaf())
    }
}
