//! The validated, resolved cluster configuration: the queue tree flattened depth-first with
//! every inherited setting (tier defaults, preemption timeouts) already applied.

use std::collections::{BTreeMap, BTreeSet};

use crate::access::{self, AclSpec, PlacementRuleSpec, UserSpec};
use crate::cluster_file::{
    name_queue_path, ClusterFile, LimitSpec, Mode, Policy, Promotion, QueueSpec, Rounding, TierSpec,
};
use crate::error::{parse_yaml, ModelError, Problem};
use crate::placement::{self, PlacementRule};
use crate::queue_path::QueuePath;
use crate::resources::{PartialResources, Resources};
use crate::time::Duration;

/// Index of a queue in [`ClusterConfig::queues`]; 0 is `root`.
pub type QueueIndex = usize;

/// Tier numbers weir knows: 1 (most critical) to 3.
pub const TIERS: std::ops::RangeInclusive<u8> = 1..=3;

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
}

#[derive(Clone, Debug, PartialEq)]
pub struct PreemptionConfig {
    pub enabled: bool,
    pub utilization_threshold: f64,
    pub kill_wait: Duration,
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
    pub max_am_share: Option<f64>,
    pub policy: Policy,
    pub tier: Option<u8>,
    pub priority: i32,
    pub allow_preemption_from: bool,
    pub fair_share_preemption_timeout: Option<Duration>,
    pub fair_share_preemption_threshold: f64,
    pub min_share_preemption_timeout: Option<Duration>,
    /// Carried for other schedulers, not enforced (see `access.rs`).
    pub acl: Option<AclSpec>,
    pub dynamic_parent: bool,
    pub reservable: bool,
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

const DEFAULT_THRESHOLD: f64 = 0.5;

impl ClusterConfig {
    /// Parse and validate a cluster file. `file` names it in errors.
    pub fn from_yaml(file: &str, text: &str) -> Result<ClusterConfig, ModelError> {
        let raw: ClusterFile = parse_yaml(file, text).map_err(|e| match e {
            ModelError::Syntax { file, path, message } => {
                ModelError::Syntax { file, path: name_queue_path(text, &path), message }
            }
            other => other,
        })?;
        ClusterConfig::from_file(file, raw)
    }

    /// Validate a parsed cluster file, collecting every problem before failing.
    pub fn from_file(file: &str, raw: ClusterFile) -> Result<ClusterConfig, ModelError> {
        let mut v = Validator::default();
        let cfg = v.cluster(&raw);
        if v.problems.is_empty() {
            Ok(cfg)
        } else {
            Err(ModelError::Invalid { file: file.to_string(), problems: v.problems })
        }
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

#[derive(Default)]
struct Validator {
    problems: Vec<Problem>,
}

impl Validator {
    fn problem(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.problems.push(Problem { path: path.into(), message: message.into() });
    }

    fn cluster(&mut self, raw: &ClusterFile) -> ClusterConfig {
        if raw.version != 1 {
            self.problem(
                "version",
                format!("unsupported version {}; this weir reads version 1", raw.version),
            );
        }
        let s = &raw.scheduler;
        if s.mode == Mode::Capacity {
            self.problem("scheduler.mode", "capacity mode is not available yet; use `fair`");
        }
        if s.root_policy == Policy::Fifo {
            self.problem("scheduler.root_policy", "fifo applies to leaf queues only; use fair or drf");
        }
        let increment = s.increment.map(|i| i.or(0)).unwrap_or(Resources::ZERO);
        if let Some(i) = &s.increment {
            for (name, v) in [("cpu", i.cpu), ("memory", i.memory), ("gpu", i.gpu)] {
                if v == Some(0) {
                    self.problem(
                        format!("scheduler.increment.{name}"),
                        "must be positive (leave it out for no rounding)",
                    );
                }
            }
        }
        let p = s.preemption.clone().unwrap_or_default();
        let preemption = PreemptionConfig {
            enabled: p.enabled.unwrap_or(false),
            utilization_threshold: p.utilization_threshold.unwrap_or(0.8),
            kill_wait: p.kill_wait.unwrap_or(Duration::from_secs(15)),
        };
        self.fraction("scheduler.preemption.utilization_threshold", preemption.utilization_threshold);
        if let Some(t) = p.fair_share_preemption_threshold {
            self.fraction("scheduler.preemption.fair_share_preemption_threshold", t);
        }
        if s.user_max_running_apps == Some(0) {
            self.problem("scheduler.user_max_running_apps", "must be at least 1");
        }

        let mut tiers = BTreeMap::new();
        for t in TIERS {
            tiers.insert(t, builtin_tier(t));
        }
        for (t, spec) in &raw.tiers {
            if !TIERS.contains(t) {
                self.problem(format!("tiers.{t}"), "tiers are numbered 1 (most critical) to 3");
                continue;
            }
            let d = tiers.get_mut(t).expect("tiers 1..=3 were inserted above");
            self.merge_tier(&format!("tiers.{t}"), d, spec);
        }

        let mut nodes = Vec::new();
        for (i, g) in raw.nodes.iter().enumerate() {
            let path = format!("nodes[{i}]");
            let r = g.resources.or(0);
            if r.memory == 0 && r.cpu == 0 && r.gpu == 0 {
                self.problem(format!("{path}.resources"), "a node needs some cpu or memory");
            }
            if g.count == 0 {
                self.problem(format!("{path}.count"), "must be at least 1");
            }
            nodes.push(NodeGroup { count: g.count, resources: r, label: g.label.clone() });
        }
        if raw.nodes.is_empty() {
            self.problem(
                "nodes",
                "the cluster has no nodes; add e.g. `- {count: 10, resources: {cpu: 16000, memory: 64g}}`",
            );
        }

        let root_inherit = Inherited {
            priority: 0,
            allow_preemption_from: true,
            fair_share_preemption_timeout: p.fair_share_preemption_timeout,
            fair_share_preemption_threshold: p.fair_share_preemption_threshold.unwrap_or(DEFAULT_THRESHOLD),
            min_share_preemption_timeout: p.min_share_preemption_timeout,
        };
        let mut queues = vec![QueueConfig {
            path: QueuePath::root(),
            name: "root".to_string(),
            parent: None,
            children: Vec::new(),
            weight: 1.0,
            min: Limit::Absolute(Resources::ZERO),
            max: Limit::Absolute(Resources::UNBOUNDED),
            max_running_apps: None,
            max_am_share: None,
            policy: s.root_policy,
            tier: None,
            priority: 0,
            allow_preemption_from: true,
            fair_share_preemption_timeout: root_inherit.fair_share_preemption_timeout,
            fair_share_preemption_threshold: root_inherit.fair_share_preemption_threshold,
            min_share_preemption_timeout: root_inherit.min_share_preemption_timeout,
            acl: raw.root_acl.clone(),
            dynamic_parent: false,
            reservable: false,
        }];
        if let Some(acl) = &raw.root_acl {
            access::check_acl("root_acl", acl, &mut self.problems);
        }
        access::check_users(&raw.users, &mut self.problems);
        access::check_placement_rules(&raw.queue_placement, &mut self.problems);
        if raw.queues.is_empty() {
            self.problem("queues", "the tree has no queues; jobs need at least one leaf under root");
        }
        self.children(&mut queues, 0, "queues", &raw.queues, &root_inherit, &tiers);
        let placement = placement::rules(&raw.placement, &queues, &mut self.problems);

        ClusterConfig {
            scheduler: SchedulerConfig {
                mode: s.mode,
                rounding: s.rounding,
                root_policy: s.root_policy,
                increment,
                promotion: s.promotion,
                preemption,
                user_max_running_apps: s.user_max_running_apps,
            },
            tiers,
            nodes,
            queues,
            placement,
            root_acl: raw.root_acl.clone(),
            users: raw.users.clone(),
            queue_placement: raw.queue_placement.clone(),
            file: raw.clone(),
        }
    }

    fn merge_tier(&mut self, path: &str, d: &mut TierDefaults, spec: &TierSpec) {
        if let Some(v) = spec.priority {
            d.priority = v;
        }
        if let Some(v) = spec.allow_preemption_from {
            d.allow_preemption_from = v;
        }
        if spec.fair_share_preemption_timeout.is_some() {
            d.fair_share_preemption_timeout = spec.fair_share_preemption_timeout;
        }
        if let Some(t) = spec.fair_share_preemption_threshold {
            self.fraction(&format!("{path}.fair_share_preemption_threshold"), t);
            d.fair_share_preemption_threshold = Some(t);
        }
        if spec.min_share_preemption_timeout.is_some() {
            d.min_share_preemption_timeout = spec.min_share_preemption_timeout;
        }
        if let Some(p) = spec.percentile {
            if !(p > 0.0 && p <= 100.0) {
                self.problem(format!("{path}.percentile"), format!("{p} is not a percentage in (0, 100]"));
            }
            d.percentile = p;
        }
    }

    fn fraction(&mut self, path: &str, v: f64) {
        if !(0.0..=1.0).contains(&v) {
            self.problem(path, format!("{v} is not a fraction between 0 and 1"));
        }
    }

    fn children(
        &mut self,
        queues: &mut Vec<QueueConfig>,
        parent: QueueIndex,
        path: &str,
        specs: &[QueueSpec],
        inherit: &Inherited,
        tiers: &BTreeMap<u8, TierDefaults>,
    ) {
        let mut seen = BTreeSet::new();
        for spec in specs {
            let here = format!("{path}.{}", display_name(&spec.name));
            if spec.name.is_empty() || spec.name.contains(['.', ' ', '\t']) {
                self.problem(
                    format!("{here}.name"),
                    format!(
                        "`{}` is not a queue name: use a non-empty name without dots or spaces",
                        spec.name
                    ),
                );
            } else if spec.name == "root" {
                self.problem(
                    format!("{here}.name"),
                    "`root` is the implicit top of the tree; give this queue another name",
                );
            }
            if !seen.insert(spec.name.clone()) {
                self.problem(
                    format!("{here}.name"),
                    format!(
                        "a sibling is also named `{}`; names must be unique within their parent",
                        spec.name
                    ),
                );
            }
            let idx = queues.len();
            let q = self.queue(spec, &here, &queues[parent].path, parent, inherit, tiers);
            let child_inherit = Inherited {
                priority: q.priority,
                allow_preemption_from: q.allow_preemption_from,
                fair_share_preemption_timeout: q.fair_share_preemption_timeout,
                fair_share_preemption_threshold: q.fair_share_preemption_threshold,
                min_share_preemption_timeout: q.min_share_preemption_timeout,
            };
            queues.push(q);
            queues[parent].children.push(idx);
            self.children(queues, idx, &format!("{here}.children"), &spec.children, &child_inherit, tiers);
        }
    }

    fn queue(
        &mut self,
        spec: &QueueSpec,
        here: &str,
        parent_path: &QueuePath,
        parent: QueueIndex,
        inherit: &Inherited,
        tiers: &BTreeMap<u8, TierDefaults>,
    ) -> QueueConfig {
        let leaf = spec.children.is_empty();
        let weight = spec.weight.unwrap_or(1.0);
        if !(weight.is_finite() && weight >= 0.0) {
            self.problem(
                format!("{here}.weight"),
                format!("{weight} is not a weight: use a number ≥ 0 (0 = served last)"),
            );
        }
        let min = self.limit(&format!("{here}.min"), spec.min.as_ref(), 0);
        let max = self.limit(&format!("{here}.max"), spec.max.as_ref(), u64::MAX);
        if spec.max_running_apps == Some(0) {
            self.problem(
                format!("{here}.max_running_apps"),
                "must be at least 1 (leave it out for no limit)",
            );
        }
        if let Some(s) = spec.max_am_share {
            if !(s > 0.0 && s <= 1.0) {
                self.problem(format!("{here}.max_am_share"), format!("{s} is not a fraction in (0, 1]"));
            }
        }
        if spec.policy == Some(Policy::Fifo) && !leaf {
            self.problem(
                format!("{here}.policy"),
                "fifo applies to leaf queues only; use fair or drf on a parent",
            );
        }
        if let Some(acl) = &spec.acl {
            access::check_acl(&format!("{here}.acl"), acl, &mut self.problems);
        }
        for (field, set) in [("dynamic_parent", spec.dynamic_parent), ("reservable", spec.reservable)] {
            if set == Some(true) && !leaf {
                self.problem(
                    format!("{here}.{field}"),
                    "applies to a queue without children here (YARN rejects it on a parent)",
                );
            }
        }
        if spec.dynamic_parent == Some(true) && spec.reservable == Some(true) {
            self.problem(
                format!("{here}.reservable"),
                "a dynamic_parent queue cannot be reservable (YARN's AllocationFileQueueParser rejects the pair)",
            );
        }
        let tier = match spec.tier {
            Some(t) if !TIERS.contains(&t) => {
                self.problem(format!("{here}.tier"), not_a_tier(t));
                None
            }
            Some(_) if !leaf => {
                self.problem(
                    format!("{here}.tier"),
                    "tiers are set on leaf queues; move `tier` to this queue's leaves",
                );
                None
            }
            t => t,
        };
        let td = tier.and_then(|t| tiers.get(&t));
        if let Some(t) = spec.fair_share_preemption_threshold {
            self.fraction(&format!("{here}.fair_share_preemption_threshold"), t);
        }
        let allow = match (spec.allow_preemption_from, inherit.allow_preemption_from) {
            (Some(true), false) => {
                self.problem(
                    format!("{here}.allow_preemption_from"),
                    "a parent queue does not allow preemption, and that applies to all queues under it",
                );
                false
            }
            (Some(v), _) => v,
            (None, false) => false,
            (None, true) => td.map(|t| t.allow_preemption_from).unwrap_or(true),
        };
        QueueConfig {
            path: parent_path.child(&spec.name),
            name: spec.name.clone(),
            parent: Some(parent),
            children: Vec::new(),
            weight,
            min,
            max,
            max_running_apps: spec.max_running_apps,
            max_am_share: spec.max_am_share,
            policy: spec.policy.unwrap_or_default(),
            tier,
            priority: spec.priority.or(td.map(|t| t.priority)).unwrap_or(inherit.priority),
            allow_preemption_from: allow,
            fair_share_preemption_timeout: spec
                .fair_share_preemption_timeout
                .or(td.and_then(|t| t.fair_share_preemption_timeout))
                .or(inherit.fair_share_preemption_timeout),
            fair_share_preemption_threshold: spec
                .fair_share_preemption_threshold
                .or(td.and_then(|t| t.fair_share_preemption_threshold))
                .unwrap_or(inherit.fair_share_preemption_threshold),
            min_share_preemption_timeout: spec
                .min_share_preemption_timeout
                .or(td.and_then(|t| t.min_share_preemption_timeout))
                .or(inherit.min_share_preemption_timeout),
            acl: spec.acl.clone(),
            dynamic_parent: spec.dynamic_parent.unwrap_or(false),
            reservable: spec.reservable.unwrap_or(false),
        }
    }

    fn limit(&mut self, path: &str, spec: Option<&LimitSpec>, missing: u64) -> Limit {
        match spec {
            None => Limit::Absolute(PartialResources::default().or(missing)),
            Some(LimitSpec::Absolute(r)) => Limit::Absolute(r.or(missing)),
            Some(LimitSpec::Percent(s)) => {
                match s.trim().strip_suffix('%').map(|n| n.trim().parse::<f64>()) {
                    Some(Ok(p)) if (0.0..=100.0).contains(&p) => Limit::Percent(p),
                    _ => {
                        self.problem(path, format!("`{s}` is neither a resource map nor a percentage of the cluster such as \"25%\""));
                        Limit::Absolute(PartialResources::default().or(missing))
                    }
                }
            }
        }
    }
}

/// What a queue passes down to its children.
struct Inherited {
    priority: i32,
    allow_preemption_from: bool,
    fair_share_preemption_timeout: Option<Duration>,
    fair_share_preemption_threshold: f64,
    min_share_preemption_timeout: Option<Duration>,
}

fn display_name(name: &str) -> &str {
    if name.is_empty() {
        "<unnamed>"
    } else {
        name
    }
}
