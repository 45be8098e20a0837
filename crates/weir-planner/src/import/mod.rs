//! Import a Hadoop YARN Fair Scheduler allocation file (`fair-scheduler.xml`) as a weir cluster
//! file, so a YARN user can bring their queue layout — reading it the way YARN's
//! `AllocationFileParser` and `AllocationFileQueueParser` do, and saying what YARN itself
//! would do differently from what the file seems to say.
//!
//! Per queue (`<queue>` or the legacy `<pool>`): `weight`, `minResources`, `maxResources`,
//! `maxRunningApps`, `maxAMShare` (leaves only: YARN refuses it on a parent), `schedulingPolicy`
//! (or its alias `schedulingMode`), `allowPreemptionFrom`, `fairSharePreemptionTimeout`,
//! `fairSharePreemptionThreshold`, `minSharePreemptionTimeout`, `aclSubmitApps`,
//! `aclAdministerApps`, `reservation`, and `type="parent"`. Top level: `userMaxAppsDefault`,
//! `<user>` limits, `defaultFairSharePreemptionTimeout` (or the legacy
//! `fairSharePreemptionTimeout`), `defaultMinSharePreemptionTimeout`,
//! `defaultFairSharePreemptionThreshold`, `defaultQueueSchedulingPolicy` (or
//! `defaultQueueSchedulingMode`), `queueMaxAppsDefault`, `queueMaxAMShareDefault`,
//! `queueMaxResourcesDefault` and `queuePlacementPolicy`. What weir cannot carry (reservation
//! ACLs and agents, `maxChildResources`, `maxContainerAllocation`) is listed in the notes.
//!
//! Resources: a percentage `minResources` is no minimum in YARN (its `ConfigurableResource` has
//! no absolute value for the queue's min share), and is imported as none. Under
//! [`ResourceCalculator::Default`] (memory only) the vcores of limits are left out.
//!
//! The allocation file has no nodes: the caller supplies them.

mod capacity;
mod dom;
mod values;

pub use capacity::import_yarn_capacity;

use std::collections::BTreeMap;

use weir_model::cluster_file::{LimitSpec, NodeGroupSpec, PreemptionSpec};
use weir_model::{
    AclSpec, ClusterConfig, ClusterFile, Duration, PartialResources, PlacementRuleKind, PlacementRuleSpec,
    Policy, Problem, QueuePath, QueueSpec, UserSpec,
};

use crate::error::PlanError;
use dom::Elem;
pub use values::parse_resources;

/// Queues may nest at most this deep below root: weir's cluster file (YAML, nesting depth 64)
/// holds 31 levels of queues, so a deeper import would write a file `weir validate` refuses.
pub const MAX_QUEUE_DEPTH: usize = 31;

/// How the resources of limits count, as YARN's resource calculators do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ResourceCalculator {
    /// `DefaultResourceCalculator`: memory only. The vcores of `minResources` and
    /// `maxResources` are left out (and listed in the notes).
    #[default]
    Default,
    /// `DominantResourceCalculator`: memory and vcores.
    Dominant,
}

/// What the allocation file cannot say.
#[derive(Clone, Debug, PartialEq)]
pub struct ImportOptions {
    /// The cluster's nodes (an allocation file has none).
    pub nodes: Vec<NodeGroupSpec>,
    /// Give leaves named `tier1`, `tier2`, `tier3` that tier, writing their preemption settings
    /// explicitly so the tier defaults change nothing but priority and planning percentile.
    pub tiers_from_names: bool,
    /// Whether preemption is on (`yarn.scheduler.fair.preemption` in yarn-site.xml).
    pub preemption: bool,
    pub resource_calculator: ResourceCalculator,
}

impl Default for ImportOptions {
    fn default() -> ImportOptions {
        ImportOptions {
            nodes: Vec::new(),
            tiers_from_names: false,
            preemption: false,
            resource_calculator: ResourceCalculator::Default,
        }
    }
}

/// The imported cluster file and what was left out or means something else in YARN.
#[derive(Clone, Debug, PartialEq)]
pub struct Imported {
    pub file: ClusterFile,
    /// One sentence per element that was left out, and per setting YARN treats differently
    /// from how it reads (each names the queue path).
    pub notes: Vec<String>,
}

/// Parse `text` (named `file` in errors) as an allocation file.
pub fn import_yarn_fair(file: &str, text: &str, options: &ImportOptions) -> Result<Imported, PlanError> {
    let root = dom::parse(file, text)?;
    let mut cx = Cx { problems: Vec::new(), notes: Vec::new(), defaults: Defaults::default(), options };
    if root.name != "allocations" {
        cx.problem(
            "",
            format!("the document element is <{}>; an allocation file has <allocations>", root.name),
        );
    }
    let mut out = ClusterFile { version: 1, nodes: options.nodes.clone(), ..Default::default() };
    // YARN admits apps waiting on a running-app limit in submission order.
    out.scheduler.promotion = weir_model::Promotion::Fifo;
    let mut pre = PreemptionSpec { enabled: Some(options.preemption), ..Default::default() };
    let mut legacy_fair_timeout = None;
    let mut top_queues = Vec::new();
    for e in &root.children {
        let at = "allocations";
        match e.name.as_str() {
            "queue" | "pool" => top_queues.push(e),
            "userMaxAppsDefault" => out.scheduler.user_max_running_apps = cx.count(at, e),
            "user" => cx.user(e, &mut out.users),
            "defaultFairSharePreemptionTimeout" => pre.fair_share_preemption_timeout = cx.secs(at, e),
            // The legacy name, read only when the new one is absent (AllocationFileParser).
            "fairSharePreemptionTimeout" => legacy_fair_timeout = Some(cx.secs(at, e)),
            "defaultMinSharePreemptionTimeout" => pre.min_share_preemption_timeout = cx.secs(at, e),
            "defaultFairSharePreemptionThreshold" => pre.fair_share_preemption_threshold = cx.float(at, e),
            "defaultQueueSchedulingPolicy" | "defaultQueueSchedulingMode" => {
                cx.defaults.policy = cx.policy(at, e);
                if cx.defaults.policy == Some(Policy::Fifo) {
                    cx.problem(
                        at,
                        format!(
                            "{}: fifo cannot be the default policy (YARN refuses it: parents cannot be fifo)",
                            e.name
                        ),
                    );
                }
            }
            "queueMaxAppsDefault" => cx.defaults.max_running_apps = cx.count(at, e),
            "queueMaxAMShareDefault" => out.scheduler.queue_max_am_share_default = cx.am_share(at, e),
            "queueMaxResourcesDefault" => cx.defaults.max = cx.limit(at, e, true),
            "queuePlacementPolicy" => out.queue_placement = cx.placement(e),
            "reservation-agent" | "reservation-policy" | "reservation-planner" => {
                cx.notes.push(format!("<{}> is left out: weir has no reservation system", e.name))
            }
            other => cx
                .notes
                .push(format!("<{other}> is left out: YARN ignores it too (not an allocation-file element)")),
        }
    }
    if pre.fair_share_preemption_timeout.is_none() {
        pre.fair_share_preemption_timeout = legacy_fair_timeout.flatten();
    }
    // A single top-level <queue name="root"> is the root itself.
    let mut root_allows = true;
    let root_policy;
    let children: Vec<&Elem> = match top_queues.as_slice() {
        [only] if only.attr("name").map(str::trim).is_some_and(|n| n.eq_ignore_ascii_case("root")) => {
            let root_q = cx.queue("root", only, true, true);
            root_allows = root_q.allow_preemption_from.unwrap_or(true);
            root_policy = root_q.policy.or(cx.defaults.policy).unwrap_or_default();
            out.root_acl = root_q.acl;
            pre.fair_share_preemption_timeout =
                root_q.fair_share_preemption_timeout.or(pre.fair_share_preemption_timeout);
            pre.min_share_preemption_timeout =
                root_q.min_share_preemption_timeout.or(pre.min_share_preemption_timeout);
            pre.fair_share_preemption_threshold =
                root_q.fair_share_preemption_threshold.or(pre.fair_share_preemption_threshold);
            only.children.iter().filter(|c| c.is_queue()).collect()
        }
        _ => {
            root_policy = cx.defaults.policy.unwrap_or_default();
            top_queues
        }
    };
    out.scheduler.root_policy = root_policy;
    out.queues = children
        .iter()
        .filter_map(|c| {
            let mut q = cx.tree("root", c, root_allows, root_policy, 1)?;
            // weir's root always allows preemption; a root that forbids it forbids it below.
            if !root_allows {
                q.allow_preemption_from = Some(false);
            }
            Some(q)
        })
        .collect();
    out.scheduler.preemption = Some(pre);
    if options.nodes.is_empty() {
        out.nodes = vec![NodeGroupSpec {
            count: 1,
            resources: PartialResources { cpu: Some(16_000), memory: Some(65_536), gpu: None },
            label: None,
            gpu_model: None,
        }];
        cx.notes.push(
            "an allocation file has no nodes: one 16-core, 64 GiB node was written; edit `nodes`".into(),
        );
    }
    if !cx.problems.is_empty() {
        return Err(PlanError::Import { file: file.to_string(), problems: cx.problems });
    }
    if options.tiers_from_names {
        tiers_from_names(file, &mut out)?;
    }
    ClusterConfig::from_file(file, out.clone())
        .map_err(|e| PlanError::Import { file: file.to_string(), problems: e.problems() })?;
    Ok(Imported { file: out, notes: cx.notes })
}

/// Set `tier: N` on leaves named `tierN` (N = 1..3), keeping every resolved setting but priority.
fn tiers_from_names(file: &str, out: &mut ClusterFile) -> Result<(), PlanError> {
    let before = ClusterConfig::from_file(file, out.clone())
        .map_err(|e| PlanError::Import { file: file.to_string(), problems: e.problems() })?;
    // Depth-first with an explicit stack: the tree is at most MAX_QUEUE_DEPTH deep anyway.
    let mut stack: Vec<(&mut QueueSpec, QueuePath)> = out
        .queues
        .iter_mut()
        .map(|s| {
            let p = QueuePath::root().child(&s.name);
            (s, p)
        })
        .collect();
    while let Some((s, path)) = stack.pop() {
        if s.children.is_empty() {
            let tier = s.name.to_ascii_lowercase().strip_prefix("tier").and_then(|n| n.parse::<u8>().ok());
            if let (Some(t @ 1..=3), Some(ix)) = (tier, before.find(&path)) {
                let q = &before.queues[ix];
                s.tier = Some(t);
                if q.allow_preemption_from != weir_model::cluster::builtin_tier(t).allow_preemption_from {
                    s.allow_preemption_from = Some(q.allow_preemption_from);
                }
            }
        } else {
            for c in s.children.iter_mut() {
                let p = path.child(&c.name);
                stack.push((c, p));
            }
        }
    }
    Ok(())
}

#[derive(Default)]
struct Defaults {
    policy: Option<Policy>,
    max_running_apps: Option<u32>,
    max: Option<LimitSpec>,
}

struct Cx<'a> {
    problems: Vec<Problem>,
    notes: Vec<String>,
    defaults: Defaults,
    options: &'a ImportOptions,
}

impl Cx<'_> {
    fn problem(&mut self, path: &str, message: String) {
        self.problems.push(Problem { path: path.to_string(), message });
    }

    /// The queue `e` under `parent` (a dotted path) and its subtree; `depth` counts from 1
    /// for root's children. `None` when YARN would not create the queue (drf under fair).
    fn tree(
        &mut self,
        parent: &str,
        e: &Elem,
        parent_allows: bool,
        parent_policy: Policy,
        depth: usize,
    ) -> Option<QueueSpec> {
        let Some(name) = e.attr("name").map(|n| n.trim().to_string()) else {
            self.problem(parent, format!("a <{}> at byte {} has no name attribute", e.name, e.pos));
            return Some(QueueSpec::default());
        };
        let path = format!("{parent}.{name}");
        if depth > MAX_QUEUE_DEPTH {
            self.problem(
                &path,
                format!("queues nest {depth} deep below root; a weir cluster file holds at most {MAX_QUEUE_DEPTH} levels"),
            );
            return Some(QueueSpec { name, ..QueueSpec::default() });
        }
        let has_children = e.children.iter().any(Elem::is_queue);
        let declared_parent = e.attr("type") == Some("parent");
        let mut q = self.queue(&path, e, parent_allows, has_children || declared_parent);
        q.name = name;
        if q.policy.is_none() {
            q.policy = self.defaults.policy.filter(|&p| !has_children || p != Policy::Fifo);
        }
        let policy = q.policy.unwrap_or_default();
        let allows = q.allow_preemption_from.unwrap_or(parent_allows);
        let mut dropped = false;
        q.children = Vec::new();
        for c in e.children.iter().filter(|c| c.is_queue()) {
            match self.tree(&path, c, allows, policy, depth + 1) {
                Some(child) => q.children.push(child),
                None => dropped = true,
            }
        }
        if parent_policy == Policy::Fair && policy == Policy::Drf {
            self.notes.push(format!(
                "{path}: left out with everything below it, as YARN does: a drf queue under the fair parent {parent} \
                 is refused (FairSharePolicy.isChildPolicyAllowed); make {parent} drf (and its ancestors) to keep it"
            ));
            return None;
        }
        // A parent whose children YARN refuses stays a parent in YARN.
        let declared_parent = declared_parent || (dropped && q.children.is_empty());
        if declared_parent && q.children.is_empty() {
            q.dynamic_parent = Some(true);
        }
        if q.max_running_apps.is_none() {
            q.max_running_apps = self.defaults.max_running_apps;
        }
        if q.max.is_none() {
            q.max = self.defaults.max.clone();
        }
        self.check_runnable(&path, &q);
        Some(q)
    }

    /// Warn when a queue's maximum leaves no room for a container.
    fn check_runnable(&mut self, path: &str, q: &QueueSpec) {
        if let Some(LimitSpec::Absolute(r)) = &q.max {
            let zero = [("memory", r.memory), ("vcores", r.cpu)]
                .into_iter()
                .filter(|(_, v)| *v == Some(0))
                .map(|(n, _)| n)
                .collect::<Vec<_>>();
            if !zero.is_empty() {
                self.notes.push(format!(
                    "{path}: maxResources allows 0 {}: no container fits, so no job can run in this queue",
                    zero.join(" and ")
                ));
            }
        }
    }

    /// The settings of one queue element (not its children). `parent` says whether YARN
    /// treats it as a parent (it has queues, or `type="parent"`).
    fn queue(&mut self, path: &str, e: &Elem, parent_allows: bool, parent: bool) -> QueueSpec {
        let mut q = QueueSpec::default();
        let mut acl = AclSpec::default();
        for c in &e.children {
            match c.name.as_str() {
                "queue" | "pool" => {}
                "weight" => q.weight = self.float(path, c),
                "minResources" => q.min = self.limit(path, c, false),
                "maxResources" => q.max = self.limit(path, c, true),
                "maxRunningApps" => q.max_running_apps = self.count(path, c),
                "maxAMShare" if parent => self.problem(
                    path,
                    "maxAMShare on a parent queue (or type=\"parent\"): YARN refuses the whole file (AllocationFileQueueParser); move it to the leaves".into(),
                ),
                "maxAMShare" => q.max_am_share = self.am_share(path, c),
                "schedulingPolicy" | "schedulingMode" => q.policy = self.policy(path, c),
                "allowPreemptionFrom" => match c.text.trim() {
                    "true" if !parent_allows => self.notes.push(format!(
                        "{path}: allowPreemptionFrom true is overridden by an ancestor's false (as in YARN)"
                    )),
                    "true" => q.allow_preemption_from = Some(true),
                    "false" => q.allow_preemption_from = Some(false),
                    other => self
                        .problem(path, format!("allowPreemptionFrom: `{other}` is neither true nor false")),
                },
                "fairSharePreemptionTimeout" => q.fair_share_preemption_timeout = self.secs(path, c),
                "fairSharePreemptionThreshold" => q.fair_share_preemption_threshold = self.float(path, c),
                "minSharePreemptionTimeout" => q.min_share_preemption_timeout = self.secs(path, c),
                // ACL text is used untrimmed, as YARN does: a leading space means "groups only".
                "aclSubmitApps" => acl.submit = Some(c.text.clone()),
                "aclAdministerApps" => acl.administer = Some(c.text.clone()),
                "reservation" if parent => self.problem(
                    path,
                    "<reservation> on a parent queue (or type=\"parent\"): YARN refuses the whole file (AllocationFileQueueParser)".into(),
                ),
                "reservation" => q.reservable = Some(true),
                "aclAdministerReservations" | "aclListReservations" | "aclSubmitReservations" => self
                    .notes
                    .push(format!("{path}: <{}> is left out: weir has no reservation system", c.name)),
                other => self.notes.push(format!("{path}: <{other}> is left out: weir has no equivalent")),
            }
        }
        if acl != AclSpec::default() {
            q.acl = Some(acl);
        }
        q
    }

    fn user(&mut self, e: &Elem, users: &mut BTreeMap<String, UserSpec>) {
        let Some(name) = e.attr("name").map(str::to_string).filter(|n| !n.trim().is_empty()) else {
            self.problem("allocations", format!("a <user> at byte {} has no name attribute", e.pos));
            return;
        };
        let at = format!("user {name}");
        let mut spec = UserSpec::default();
        for c in &e.children {
            match c.name.as_str() {
                "maxRunningApps" => spec.max_running_apps = self.count(&at, c),
                other => {
                    self.notes.push(format!("{at}: <{other}> is left out: YARN reads only maxRunningApps"))
                }
            }
        }
        users.insert(name, spec);
    }

    fn placement(&mut self, e: &Elem) -> Vec<PlacementRuleSpec> {
        e.children
            .iter()
            .filter(|c| c.name == "rule")
            .enumerate()
            .filter_map(|(i, r)| self.rule(&format!("queuePlacementPolicy rule {}", i + 1), r))
            .collect()
    }

    fn rule(&mut self, at: &str, r: &Elem) -> Option<PlacementRuleSpec> {
        let name = r.attr("name").unwrap_or("");
        let Some(kind) = PlacementRuleKind::from_yarn(name) else {
            self.problem(at, format!("`{name}` is not a placement rule YARN knows (specified, user, primaryGroup, secondaryGroupExistingQueue, nestedUserQueue, default, reject)"));
            return None;
        };
        let create = match r.attr("create").map(str::trim) {
            None => None,
            Some(v) if v.eq_ignore_ascii_case("false") => Some(false),
            Some(_) => Some(true),
        };
        let queue = r.attr("queue").map(|q| {
            let q = q.trim();
            if q.starts_with("root.") || q == "root" {
                q.to_string()
            } else {
                format!("root.{q}")
            }
        });
        let parent = if kind == PlacementRuleKind::NestedUserQueue {
            r.children
                .iter()
                .find(|c| c.name == "rule")
                .and_then(|p| self.rule(&format!("{at} (nested)"), p))
                .map(Box::new)
        } else {
            None
        };
        Some(PlacementRuleSpec {
            rule: kind,
            create,
            queue: queue.filter(|_| kind == PlacementRuleKind::Default),
            parent,
        })
    }

    fn float(&mut self, path: &str, e: &Elem) -> Option<f64> {
        match e.text.trim().trim_end_matches(['f', 'F']).parse::<f64>() {
            Ok(v) if v.is_finite() => Some(v),
            _ => {
                self.problem(path, format!("{}: `{}` is not a number", e.name, e.text.trim()));
                None
            }
        }
    }

    fn count(&mut self, path: &str, e: &Elem) -> Option<u32> {
        match e.text.trim().parse::<u32>() {
            Ok(v) => Some(v),
            Err(_) => {
                self.problem(path, format!("{}: `{}` is not a whole number", e.name, e.text.trim()));
                None
            }
        }
    }

    fn secs(&mut self, path: &str, e: &Elem) -> Option<Duration> {
        match e.text.trim().parse::<u64>() {
            // YARN's "never" default is Long.MAX_VALUE seconds: no timeout.
            Ok(v) if v >= i64::MAX as u64 / 1000 => None,
            Ok(v) => Some(Duration::from_secs(v)),
            Err(_) => {
                self.problem(
                    path,
                    format!("{}: `{}` is not a whole number of seconds", e.name, e.text.trim()),
                );
                None
            }
        }
    }

    /// A negative value turns YARN's AM-share check off, as -1 does in weir; above 1 is 1
    /// (AllocationFileQueueParser caps it).
    fn am_share(&mut self, path: &str, e: &Elem) -> Option<f64> {
        let v = self.float(path, e)?;
        Some(if v < 0.0 { -1.0 } else { v.min(1.0) })
    }

    fn policy(&mut self, path: &str, e: &Elem) -> Option<Policy> {
        match e.text.trim().to_ascii_lowercase().as_str() {
            "fair" => Some(Policy::Fair),
            "drf" => Some(Policy::Drf),
            "fifo" => Some(Policy::Fifo),
            other => {
                self.problem(
                    path,
                    format!("{}: `{other}` is not fair, drf or fifo; weir has no custom policies", e.name),
                );
                None
            }
        }
    }

    /// A resource limit as YARN reads it: a percentage minimum is no minimum, and under the
    /// default (memory-only) calculator vcores are left out.
    fn limit(&mut self, path: &str, e: &Elem, is_max: bool) -> Option<LimitSpec> {
        let parsed = match parse_resources(&e.text) {
            Ok(l) => l,
            Err(m) => {
                self.problem(path, format!("{}: {m}", e.name));
                return None;
            }
        };
        match parsed {
            LimitSpec::Percent(p) if !is_max => {
                self.notes.push(format!(
                    "{path}: {} {p} is imported as no minimum: YARN takes percentages only for maximums and gives this \
                     queue no min share (the percentage has no absolute value for minResources)",
                    e.name
                ));
                None
            }
            LimitSpec::Absolute(mut r) if self.options.resource_calculator == ResourceCalculator::Default => {
                if let Some(vcores) = r.cpu.take() {
                    let zero_max = if is_max && vcores == 0 {
                        " (the Fair Scheduler itself checks vcores against maxResources, FSQueue.fitsInMaxShare, \
                         so in YARN 0 vcores lets no container start; --resource-calculator dominant imports it as written)"
                    } else {
                        ""
                    };
                    self.notes.push(format!(
                        "{path}: {} {} vcores left out: --resource-calculator default counts memory only{zero_max}",
                        e.name,
                        vcores / 1000
                    ));
                }
                (r != PartialResources::default()).then_some(LimitSpec::Absolute(r))
            }
            other => Some(other),
        }
    }
}

#[cfg(test)]
mod tests;
