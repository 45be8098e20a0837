//! The rules of `cluster.yaml`: [`validate`] turns the file as written into a resolved
//! [`ClusterConfig`], collecting every problem (and every warning) with its path in the file.

use std::collections::{BTreeMap, BTreeSet};

use crate::access;
use crate::cluster::{
    builtin_tier, not_a_tier, too_many_nodes, ClusterConfig, Limit, NodeGroup, PreemptionConfig, QueueConfig,
    QueueIndex, SchedulerConfig, TierDefaults, MAX_NODES, TIERS,
};
use crate::cluster_file::{
    ClusterFile, GangPreemption, LimitSpec, Mode, Policy, QueueSpec, Rounding, TierSpec,
};
use crate::error::{ModelError, Problem};
use crate::placement;
use crate::queue_path::QueuePath;
use crate::resources::{PartialResources, ResourceKind, Resources};
use crate::time::Duration;

/// Validate a parsed cluster file, collecting every problem before failing.
pub(crate) fn validate(file: &str, raw: ClusterFile) -> Result<ClusterConfig, ModelError> {
    let mut v = Validator::default();
    let cfg = v.cluster(&raw);
    if v.problems.is_empty() {
        Ok(cfg)
    } else {
        Err(ModelError::Invalid { file: file.to_string(), problems: v.problems })
    }
}

const DEFAULT_THRESHOLD: f64 = 0.5;
/// The largest queue weight: weights are relative, and YARN's 32-bit float shares stop adding
/// up to the pool a little above 10^7.
pub(crate) const MAX_WEIGHT: f64 = 1e6;
/// YARN's `queueMaxAMShareDefault`.
const DEFAULT_AM_SHARE: f64 = 0.5;
/// YARN's `yarn.scheduler.fair.reservable-nodes`.
const DEFAULT_RESERVABLE_NODES: f64 = 0.05;
/// Jobs an EASY pass tries after its reservation: Slurm's backfill scheduler bounds its scan at
/// `bf_max_job_test`, 500 by default (slurm.conf(5), SchedulerParameters; weir's earlier 100
/// was `default_queue_depth`, the bound of the main scheduler's event-triggered passes, not of
/// backfilling). Checked against Slurm 22.05's own slurm.conf(5) as Debian ships it:
/// "Default: 500, Min: 1, Max: 1,000,000".
const DEFAULT_BACKFILL_DEPTH: u32 = 500;
/// YuniKorn's placeholder timeout (`defaultPlaceholderTimeout` in `objects/application.go`).
const DEFAULT_GANG_TIMEOUT: Duration = Duration(15 * 60 * 1000);

/// An AM share as written: -1 (off; YARN compares within 0.0001), or a fraction in (0, 1].
/// `Err` holds the problem.
fn am_share(v: f64) -> Result<Option<f64>, String> {
    if (v + 1.0).abs() < 1e-4 {
        Ok(None)
    } else if v > 0.0 && v <= 1.0 {
        Ok(Some(v))
    } else {
        Err(format!("{v} is not a fraction in (0, 1]; use -1 to turn the AM-share check off"))
    }
}

#[derive(Default)]
struct Validator {
    problems: Vec<Problem>,
    warnings: Vec<Problem>,
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
        if s.root_policy.leaf_only() {
            self.problem(
                "scheduler.root_policy",
                format!("{} applies to leaf queues only; use fair or drf", s.root_policy.name()),
            );
        }
        let am_default = match s.queue_max_am_share_default.map(am_share) {
            None => Some(DEFAULT_AM_SHARE),
            Some(Ok(v)) => v,
            Some(Err(e)) => {
                self.problem("scheduler.queue_max_am_share_default", e);
                None
            }
        };
        let reservable_nodes = s.reservable_nodes.unwrap_or(DEFAULT_RESERVABLE_NODES);
        self.fraction("scheduler.reservable_nodes", reservable_nodes);
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
            kill_wait: p.kill_wait.or(p.max_wait_before_kill).unwrap_or(Duration::from_secs(15)),
            capacity: crate::capacity_validation::capacity_preemption(&p),
        };
        self.fraction("scheduler.preemption.utilization_threshold", preemption.utilization_threshold);
        if let Some(t) = p.fair_share_preemption_threshold {
            self.fraction("scheduler.preemption.fair_share_preemption_threshold", t);
        }
        let backfill_depth = s.backfill_depth.unwrap_or(DEFAULT_BACKFILL_DEPTH);
        if backfill_depth == 0 {
            self.problem("scheduler.backfill_depth", "must be at least 1 (leave it out for 500)");
        }
        // 0s: placeholders are never released (strict first come, first served for gangs).
        let gang_timeout = s.gang_timeout.unwrap_or(DEFAULT_GANG_TIMEOUT);
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
            } else if u64::from(g.count) > MAX_NODES {
                self.problem(format!("{path}.count"), too_many_nodes(u64::from(g.count)));
            }
            for (field, v) in [("label", &g.label), ("gpu_model", &g.gpu_model)] {
                if v.as_deref().is_some_and(|v| v.trim().is_empty() || v.contains(',')) {
                    self.problem(format!("{path}.{field}"), "must be a non-empty name without commas");
                }
            }
            if g.gpu_model.is_some() && r.gpu == 0 {
                self.problem(
                    format!("{path}.gpu_model"),
                    "the nodes have no GPUs (resources.gpu is 0), so they have no GPU model",
                );
            }
            nodes.push(NodeGroup {
                count: g.count,
                resources: r,
                label: g.label.clone(),
                gpu_model: g.gpu_model.clone(),
            });
        }
        let total: u64 = nodes.iter().map(|g| u64::from(g.count)).sum();
        if total > MAX_NODES && nodes.iter().all(|g| u64::from(g.count) <= MAX_NODES) {
            self.problem("nodes", too_many_nodes(total));
        }
        self.cluster_total(&nodes);
        if raw.nodes.is_empty() {
            self.problem(
                "nodes",
                "the cluster has no nodes; add e.g. `- {count: 10, resources: {cpu: 16000, memory: 64g}}` \
                 (a cluster whose nodes come from its backend, `nodes: from_backend` in a server file, \
                 is checked with that file: `weir backends --config server.yaml`)",
            );
        }

        let root_inherit = Inherited {
            priority: 0,
            allow_preemption_from: true,
            gang_preemption: GangPreemption::Whole,
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
            am_share: None,
            policy: s.root_policy,
            job_order: Default::default(),
            tier: None,
            priority: 0,
            allow_preemption_from: true,
            fair_share_preemption_timeout: root_inherit.fair_share_preemption_timeout,
            fair_share_preemption_threshold: root_inherit.fair_share_preemption_threshold,
            min_share_preemption_timeout: root_inherit.min_share_preemption_timeout,
            gang_preemption: GangPreemption::Whole,
            acl: raw.root_acl.clone(),
            dynamic_parent: false,
            reservable: false,
            capacity: None,
        }];
        if let Some(acl) = &raw.root_acl {
            access::check_acl("root_acl", acl, &mut self.problems);
        }
        access::check_users(&raw.users, &mut self.problems);
        access::check_placement_rules(&raw.queue_placement, &mut self.problems);
        for (project, user) in &raw.run_as {
            let path = format!("run_as.{project}");
            if project.is_empty() || project.split('.').any(str::is_empty) {
                self.problem(path.clone(), "a project is dotted names, none of them empty: `ads.ranking`");
            }
            // POSIX's portable user names (useradd's default rule): letters, digits, `.`, `_`,
            // `-`, not starting with `-`, at most 32 bytes.
            let portable = user.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
            if user.is_empty() || user.len() > 32 || user.starts_with('-') || !portable {
                self.problem(
                    path,
                    format!("`{user}` is not a Unix user name (letters, digits, `.`, `_`, `-`)"),
                );
            }
        }
        if raw.queues.is_empty() {
            self.problem("queues", "the tree has no queues; jobs need at least one leaf under root");
        }
        let context = Context { tiers: &tiers, am_default, rounding: s.rounding };
        self.children(&mut queues, 0, "queues", &raw.queues, &root_inherit, &context);
        let total = nodes.iter().fold(Resources::ZERO, |a, g| a + g.resources.times(u64::from(g.count)));
        crate::capacity_validation::apply(raw, &mut queues, total, &mut self.problems);
        if s.mode == Mode::Fair {
            // Capacity mode's guarantees and caps are checked by `capacity_validation`.
            crate::cluster_limits::check(&queues, total, &mut self.problems, &mut self.warnings);
        }
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
                queue_max_am_share_default: am_default,
                minimum_allocation: s.minimum_allocation.map(|m| m.or(0)).unwrap_or(Resources::ZERO),
                reservable_nodes,
                backfill: s.backfill,
                backfill_depth,
                gang_timeout,
            },
            tiers,
            nodes,
            queues,
            placement,
            root_acl: raw.root_acl.clone(),
            users: raw.users.clone(),
            queue_placement: raw.queue_placement.clone(),
            file: raw.clone(),
            warnings: std::mem::take(&mut self.warnings),
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

    /// The cluster's total of each resource must be representable: weir sums usage and demand
    /// exactly, and `u64::MAX` means "unbounded".
    fn cluster_total(&mut self, nodes: &[NodeGroup]) {
        for kind in ResourceKind::ALL {
            let total = nodes.iter().try_fold(0u64, |acc, g| {
                g.resources.get(kind).checked_mul(u64::from(g.count)).and_then(|v| acc.checked_add(v))
            });
            if total.is_none_or(|t| t == u64::MAX) {
                self.problem(
                    "nodes",
                    format!(
                        "the cluster's total {} does not fit in 64 bits (count × resources summed over \
                         the node groups); use smaller units or fewer nodes",
                        kind.name()
                    ),
                );
            }
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
        cx: &Context,
    ) {
        let mut seen = BTreeSet::new();
        for spec in specs {
            let here = format!("{path}.{}", display_name(&spec.name));
            if spec.name.is_empty()
                || spec.name.contains(['.', ',', '"'])
                || spec.name.contains(char::is_whitespace)
                || spec.name.contains(char::is_control)
                || spec.name.starts_with(crate::FORMULA_STARTS)
            {
                self.problem(
                    format!("{here}.name"),
                    format!(
                        "`{}` is not a queue name: use a non-empty name without dots, spaces, commas, quotes \
                         or line breaks (queue names go into CSV files such as usage.csv, which weir plan reads)",
                        spec.name.escape_debug()
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
            let parent_policy = queues[parent].policy;
            let q = self.queue(spec, &here, &queues[parent].path, parent, inherit, cx);
            if q.policy == Policy::Drf && parent_policy == Policy::Fair {
                let message = format!(
                    "drf under a fair parent ({} orders its children by fair): YARN refuses this \
                     layout (FairSharePolicy.isChildPolicyAllowed); make every ancestor drf{}",
                    queues[parent].path,
                    if parent == 0 { " (scheduler.root_policy: drf for root)" } else { "" }
                );
                match cx.rounding {
                    Rounding::Yarn => self.problem(format!("{here}.policy"), message),
                    Rounding::Exact => {
                        self.warnings.push(Problem { path: format!("{here}.policy"), message })
                    }
                }
            }
            let child_inherit = Inherited {
                priority: q.priority,
                allow_preemption_from: q.allow_preemption_from,
                gang_preemption: q.gang_preemption,
                fair_share_preemption_timeout: q.fair_share_preemption_timeout,
                fair_share_preemption_threshold: q.fair_share_preemption_threshold,
                min_share_preemption_timeout: q.min_share_preemption_timeout,
            };
            queues.push(q);
            queues[parent].children.push(idx);
            self.children(queues, idx, &format!("{here}.children"), &spec.children, &child_inherit, cx);
        }
    }

    fn queue(
        &mut self,
        spec: &QueueSpec,
        here: &str,
        parent_path: &QueuePath,
        parent: QueueIndex,
        inherit: &Inherited,
        cx: &Context,
    ) -> QueueConfig {
        let tiers = cx.tiers;
        let leaf = spec.children.is_empty();
        let weight = spec.weight.unwrap_or(1.0);
        if !(weight.is_finite() && weight >= 0.0) {
            self.problem(
                format!("{here}.weight"),
                format!("{weight} is not a weight: use a number ≥ 0 (0 = served last)"),
            );
        } else if weight > MAX_WEIGHT {
            self.problem(
                format!("{here}.weight"),
                format!(
                    "{weight} is above the largest weight weir accepts, {MAX_WEIGHT}: weights only count \
                     relative to their siblings', and YARN computes shares with 32-bit floats, whose 24 \
                     bits of precision make shares overshoot the pool past about 10^7 (a weight of 1e15 \
                     gives one queue 22,737% of the cluster); scale the weights down together"
                ),
            );
        }
        let min = self.limit(&format!("{here}.min"), spec.min.as_ref(), 0);
        let max = self.limit(&format!("{here}.max"), spec.max.as_ref(), u64::MAX);
        // `max_running_apps: 0` is valid, as in YARN: the queue admits nothing.
        let am_share = match spec.max_am_share.map(am_share) {
            None => cx.am_default,
            Some(Ok(v)) => v,
            Some(Err(e)) => {
                self.problem(format!("{here}.max_am_share"), e);
                None
            }
        };
        if let Some(p) = spec.policy.filter(|p| p.leaf_only() && !leaf) {
            self.problem(
                format!("{here}.policy"),
                format!("{} applies to leaf queues only; use fair or drf on a parent", p.name()),
            );
        }
        if let Some(o) = spec.job_order.filter(|&o| o != crate::cluster_file::JobOrder::Submit) {
            if spec.policy != Some(Policy::Fifo) || !leaf {
                self.problem(
                    format!("{here}.job_order"),
                    format!("{} orders jobs inside a fifo leaf: set policy: fifo on a leaf", o.name()),
                );
            }
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
        if spec.allow_preemption_from.is_some() && spec.disable_preemption.is_some() {
            self.problem(
                format!("{here}.disable_preemption"),
                "give allow_preemption_from or disable_preemption, not both (one is the other's opposite)",
            );
        }
        let asked = spec.allow_preemption_from.or(spec.disable_preemption.map(|d| !d));
        let allow = match (asked, inherit.allow_preemption_from) {
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
            am_share: am_share.filter(|_| leaf),
            policy: spec.policy.unwrap_or_default(),
            job_order: spec.job_order.unwrap_or_default(),
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
            gang_preemption: spec.gang_preemption.unwrap_or(inherit.gang_preemption),
            acl: spec.acl.clone(),
            dynamic_parent: spec.dynamic_parent.unwrap_or(false),
            reservable: spec.reservable.unwrap_or(false),
            capacity: None,
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

/// What every queue's validation needs from the scheduler section.
struct Context<'a> {
    tiers: &'a BTreeMap<u8, TierDefaults>,
    am_default: Option<f64>,
    rounding: Rounding,
}

/// What a queue passes down to its children.
struct Inherited {
    priority: i32,
    allow_preemption_from: bool,
    gang_preemption: GangPreemption,
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
