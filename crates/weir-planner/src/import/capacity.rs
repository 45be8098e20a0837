//! Import a Hadoop YARN Capacity Scheduler configuration (`capacity-scheduler.xml`) as a
//! capacity-mode weir cluster file, reading the `yarn.scheduler.capacity.*` properties as
//! `CapacitySchedulerConfiguration` names them.
//!
//! Per queue (`yarn.scheduler.capacity.<queue-path>.…`, the tree from `root.queues`):
//! `capacity` (a percent, a weight `3w`, or `[memory=…,vcores=…]`), `maximum-capacity` (-1 is
//! 100), `user-limit-factor`, `minimum-user-limit-percent`, `user-settings.<user>.weight`,
//! `maximum-applications`, `max-parallel-apps`, `maximum-am-resource-percent`, `state`,
//! `ordering-policy` (`fifo`, `fair`) and `ordering-policy.fair.enable-size-based-weight`, `priority`, `disable_preemption`, `acl_submit_applications`,
//! `acl_administer_queue`, `accessible-node-labels` (with `.<label>.capacity`,
//! `.<label>.maximum-capacity`) and `default-node-label-expression`. Cluster-wide: `maximum-applications`,
//! `maximum-am-resource-percent`, `user.max-parallel-apps`. Every other property is listed in
//! the notes as ignored, never dropped silently; a value weir cannot read is an error naming the
//! property.
//!
//! The file has no nodes: the caller supplies them.

use std::collections::{BTreeMap, BTreeSet};

use weir_model::cluster_file::{LabelCapacitySpec, NodeGroupSpec};
use weir_model::{
    AclSpec, CapacitySpec, ClusterConfig, ClusterFile, LeafOrdering, Mode, PartialResources, Problem,
    QueueSpec, QueueState,
};

use super::{dom, ImportOptions, Imported, MAX_QUEUE_DEPTH};
use crate::error::PlanError;

const PREFIX: &str = "yarn.scheduler.capacity.";

struct Cx {
    props: BTreeMap<String, String>,
    used: BTreeSet<String>,
    problems: Vec<Problem>,
    notes: Vec<String>,
}

impl Cx {
    fn get(&mut self, key: &str) -> Option<String> {
        let v = self.props.get(key)?.trim().to_string();
        self.used.insert(key.to_string());
        Some(v)
    }

    fn problem(&mut self, key: &str, message: String) {
        self.problems.push(Problem { path: key.to_string(), message });
    }

    fn number<T: std::str::FromStr>(&mut self, key: &str, what: &str) -> Option<T> {
        let v = self.get(key)?;
        match v.parse::<T>() {
            Ok(n) => Some(n),
            Err(_) => {
                self.problem(key, format!("`{v}` is not {what}"));
                None
            }
        }
    }

    fn capacity(&mut self, key: &str) -> Option<CapacitySpec> {
        let v = self.get(key)?;
        match parse_capacity(&v) {
            Ok(c) => Some(c),
            Err(e) => {
                self.problem(key, e);
                None
            }
        }
    }
}

/// A capacity as the Capacity Scheduler writes it: `40`, `40.5`, `3w` or
/// `[memory=10240,vcores=12]`.
fn parse_capacity(v: &str) -> Result<CapacitySpec, String> {
    let bad = || {
        format!("`{v}` is not a capacity: write a percent (40), a weight (3w) or [memory=10240,vcores=12]")
    };
    if let Some(inner) = v.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
        let mut r = PartialResources::default();
        for part in inner.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, n) = part.split_once('=').ok_or_else(bad)?;
            let n: u64 = n.trim().parse().map_err(|_| bad())?;
            match k.trim() {
                "memory" | "memory-mb" => r.memory = Some(n),
                "vcores" => r.cpu = Some(n.saturating_mul(1000)),
                "yarn.io/gpu" => r.gpu = Some(n),
                other => {
                    return Err(format!(
                        "`{other}` in `{v}` is a resource weir does not model (memory, vcores, yarn.io/gpu)"
                    ))
                }
            }
        }
        return Ok(CapacitySpec::Absolute(r));
    }
    if let Some(w) = v.strip_suffix('w') {
        return w.trim().parse::<f64>().map(CapacitySpec::Weight).map_err(|_| bad());
    }
    v.parse::<f64>().map(CapacitySpec::Percent).map_err(|_| bad())
}

/// Parse `text` (named `file` in errors) as a `capacity-scheduler.xml`.
pub fn import_yarn_capacity(file: &str, text: &str, options: &ImportOptions) -> Result<Imported, PlanError> {
    let root = dom::parse(file, text)?;
    let mut cx =
        Cx { props: BTreeMap::new(), used: BTreeSet::new(), problems: Vec::new(), notes: Vec::new() };
    if root.name != "configuration" {
        cx.problem(
            "",
            format!("the document element is <{}>; a capacity-scheduler.xml has <configuration>", root.name),
        );
    }
    for p in root.children.iter().filter(|e| e.name == "property") {
        let field = |n: &str| p.children.iter().find(|c| c.name == n).map(|c| c.text.trim().to_string());
        let Some(name) = field("name") else {
            cx.problem("configuration.property", "a <property> without a <name>".into());
            continue;
        };
        if cx.props.insert(name.clone(), field("value").unwrap_or_default()).is_some() {
            cx.notes.push(format!(
                "{name} is set more than once: the last value is used, as Hadoop's Configuration does"
            ));
        }
    }
    if options.tiers_from_names {
        cx.notes.push("--tiers-from-names is not applied to a capacity-scheduler.xml yet".into());
    }
    let mut out = ClusterFile { version: 1, nodes: options.nodes.clone(), ..Default::default() };
    out.scheduler.mode = Mode::Capacity;
    // YARN admits apps waiting on max-parallel-apps in submission order.
    out.scheduler.promotion = weir_model::Promotion::Fifo;
    out.scheduler.max_applications = cx.number(&format!("{PREFIX}maximum-applications"), "a whole number");
    out.scheduler.max_am_percent = cx.number(&format!("{PREFIX}maximum-am-resource-percent"), "a fraction");
    out.scheduler.user_max_running_apps =
        cx.number(&format!("{PREFIX}user.max-parallel-apps"), "a whole number");
    let all_labels = root_labels(&mut cx);
    out.queues = children(&mut cx, "root", 0, false, &all_labels);
    out.scheduler.preemption = preemption(&mut cx, options.preemption);
    if let Some(calc) = cx.get(&format!("{PREFIX}resource-calculator")) {
        cx.notes.push(format!(
            "{PREFIX}resource-calculator {calc}: weir's capacity mode compares memory, as the DefaultResourceCalculator"
        ));
    }
    if out.nodes.is_empty() {
        out.nodes = vec![NodeGroupSpec {
            count: 1,
            resources: PartialResources { cpu: Some(16_000), memory: Some(65_536), gpu: None },
            label: None,
            gpu_model: None,
        }];
        cx.notes.push(
            "capacity-scheduler.xml has no nodes: one 16-core, 64 GiB node was written; edit `nodes`".into(),
        );
    }
    label_nodes(&mut cx, &mut out, &all_labels);
    let ignored: Vec<String> = cx.props.keys().filter(|k| !cx.used.contains(*k)).cloned().collect();
    for k in ignored {
        cx.notes.push(format!("{k} = {}: ignored (weir has no equivalent yet)", cx.props[&k]));
    }
    if !cx.problems.is_empty() {
        return Err(PlanError::Import { file: file.to_string(), problems: cx.problems });
    }
    ClusterConfig::from_file(file, out.clone())
        .map_err(|e| PlanError::Import { file: file.to_string(), problems: e.problems() })?;
    Ok(Imported { file: out, notes: cx.notes })
}

/// The children of queue `path` (from `<path>.queues`), each read with its subtree.
fn children(
    cx: &mut Cx,
    path: &str,
    depth: usize,
    parent_disabled: bool,
    parent_labels: &BTreeSet<String>,
) -> Vec<QueueSpec> {
    let key = format!("{PREFIX}{path}.queues");
    let Some(list) = cx.get(&key) else { return Vec::new() };
    if depth >= MAX_QUEUE_DEPTH {
        cx.problem(
            &key,
            format!("queues nest deeper than the {MAX_QUEUE_DEPTH} levels weir's cluster file holds"),
        );
        return Vec::new();
    }
    let names: Vec<String> =
        list.split(',').map(str::trim).filter(|n| !n.is_empty()).map(String::from).collect();
    // Queue priorities only count under priority-utilization (the default `utilization`
    // ordering ignores them: PriorityUtilizationQueueOrderingPolicy(respectPriority = false)).
    let ordering = cx.get(&format!("{PREFIX}{path}.ordering-policy"));
    let respect_priority = ordering.as_deref() == Some("priority-utilization");
    let mut out = Vec::new();
    for name in names {
        let here = format!("{path}.{name}");
        let q = |s: &str| format!("{PREFIX}{here}.{s}");
        let mut spec = QueueSpec { name: name.clone(), ..Default::default() };
        spec.capacity = cx.capacity(&q("capacity"));
        spec.max_capacity = match cx.get(&q("maximum-capacity")) {
            Some(v) if v == "-1" => None,
            Some(_) => cx.capacity(&q("maximum-capacity")),
            None => None,
        };
        spec.max_parallel_apps = cx.number(&q("max-parallel-apps"), "a whole number");
        match cx.number::<i32>(&q("priority"), "a whole number") {
            Some(p) if p != 0 && !respect_priority => cx.notes.push(format!(
                "{here}: priority {p} is ignored by YARN under {path}'s ordering-policy {} (only priority-utilization respects it); not imported",
                ordering.as_deref().unwrap_or("utilization (the default)")
            )),
            p => spec.priority = p,
        }
        spec.state = match cx.get(&q("state")).as_deref() {
            None => None,
            Some("RUNNING") => Some(QueueState::Running),
            Some("STOPPED") => Some(QueueState::Stopped),
            Some(other) => {
                cx.problem(&q("state"), format!("`{other}` is not a queue state: RUNNING or STOPPED"));
                None
            }
        };
        let disabled = match cx.get(&q("disable_preemption")).as_deref() {
            Some("true") => true,
            Some("false") => false,
            Some(other) => {
                cx.problem(&q("disable_preemption"), format!("`{other}` is not true or false"));
                parent_disabled
            }
            None => parent_disabled,
        };
        if disabled && !parent_disabled {
            spec.allow_preemption_from = Some(false);
        } else if !disabled && parent_disabled {
            cx.notes.push(format!(
                "{here}: disable_preemption false under a parent that disables it; weir keeps the parent's (nothing under it is preempted)"
            ));
        }
        let submit = cx.get(&q("acl_submit_applications"));
        let administer = cx.get(&q("acl_administer_queue"));
        if submit.is_some() || administer.is_some() {
            spec.acl = Some(AclSpec { submit, administer });
        }
        let labels = queue_labels(cx, &here, &mut spec, parent_labels);
        spec.children = children(cx, &here, depth + 1, disabled, &labels);
        if spec.children.is_empty() {
            leaf(cx, &here, &mut spec);
        }
        out.push(spec);
    }
    out
}

/// Every node label the file names: in `accessible-node-labels` lists, in the per-label
/// properties' names and in `default-node-label-expression`s. Root may use them all; its own
/// label properties are read here (weir's root holds 100% of every partition).
fn root_labels(cx: &mut Cx) -> BTreeSet<String> {
    let mut labels = BTreeSet::new();
    let keys: Vec<(String, String)> = cx.props.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    for (k, v) in &keys {
        let Some(rest) = k.strip_prefix(PREFIX) else { continue };
        if rest.ends_with(".accessible-node-labels") {
            labels
                .extend(v.split(',').map(str::trim).filter(|l| !l.is_empty() && *l != "*").map(String::from));
        } else if rest.ends_with(".default-node-label-expression") {
            labels.extend(Some(v.trim()).filter(|l| !l.is_empty()).map(String::from));
        } else if let Some((_, tail)) = rest.split_once(".accessible-node-labels.") {
            if let Some((label, _)) = tail.rsplit_once('.') {
                labels.insert(label.to_string());
            }
        }
    }
    let root = |s: &str| format!("{PREFIX}root.{s}");
    if let Some(v) = cx.get(&root("accessible-node-labels")) {
        if v.trim() != "*" {
            cx.notes.push(format!(
                "{} = {v}: weir's root may use every label (`*`); its queues' accessible_labels are imported as written",
                root("accessible-node-labels")
            ));
        }
    }
    for l in &labels {
        for what in ["capacity", "maximum-capacity"] {
            let key = root(&format!("accessible-node-labels.{l}.{what}"));
            if let Some(v) = cx.number::<f64>(&key, "a percent") {
                if v != 100.0 && v != -1.0 {
                    cx.notes.push(format!("{key} = {v}: weir's root holds 100% of every label's partition"));
                }
            }
        }
    }
    labels
}

/// A queue's `accessible-node-labels` (a list, `*` for its parent's, a blank for none; its
/// parent's when absent, as `getAccessibleNodeLabels` inherits), the capacity and maximum
/// capacity per label, and `default-node-label-expression`. Returns the labels it may use.
fn queue_labels(
    cx: &mut Cx,
    here: &str,
    spec: &mut QueueSpec,
    parent: &BTreeSet<String>,
) -> BTreeSet<String> {
    let q = |s: &str| format!("{PREFIX}{here}.{s}");
    let listed = cx.get(&q("accessible-node-labels"));
    let labels: BTreeSet<String> = match listed.as_deref().map(str::trim) {
        None | Some("*") => parent.clone(),
        Some(v) => v.split(',').map(str::trim).filter(|l| !l.is_empty()).map(String::from).collect(),
    };
    let mut map = BTreeMap::new();
    let mut any = false;
    for l in &labels {
        let capacity = cx.number::<f64>(&q(&format!("accessible-node-labels.{l}.capacity")), "a percent");
        let max = cx.number::<f64>(&q(&format!("accessible-node-labels.{l}.maximum-capacity")), "a percent");
        any |= capacity.is_some() || max.is_some();
        let max = max.filter(|m| *m != 100.0 && *m != -1.0);
        map.insert(l.clone(), LabelCapacitySpec { capacity: capacity.unwrap_or(0.0), max_capacity: max });
    }
    let inherited = matches!(listed.as_deref().map(str::trim), None | Some("*"));
    spec.accessible_labels = (!inherited || any).then_some(map);
    spec.default_label = cx.get(&q("default-node-label-expression")).filter(|l| !l.trim().is_empty());
    labels
}

/// Node groups for the labels the file names that no given node has (capacity-scheduler.xml
/// has no nodes), and a note on exclusivity, which lives in YARN's node-label store.
fn label_nodes(cx: &mut Cx, out: &mut ClusterFile, labels: &BTreeSet<String>) {
    if labels.is_empty() {
        return;
    }
    for l in labels {
        if out.nodes.iter().any(|g| g.label.as_deref() == Some(l)) {
            continue;
        }
        out.nodes.push(NodeGroupSpec {
            count: 1,
            resources: PartialResources { cpu: Some(16_000), memory: Some(65_536), gpu: None },
            label: Some(l.clone()),
            gpu_model: None,
        });
        cx.notes.push(format!(
            "node label {l}: no given node has it; one 16-core, 64 GiB node labelled {l} was written; edit `nodes`"
        ));
    }
    cx.notes.push(format!(
        "node labels {}: imported as exclusive (YARN's default; exclusivity is set with `yarn rmadmin \
         -addToClusterNodeLabels`, not in capacity-scheduler.xml): set scheduler.node_labels.<label>.exclusive: \
         false for a label that lends its room",
        labels.iter().cloned().collect::<Vec<_>>().join(", ")
    ));
}

/// The settings the Capacity Scheduler reads on leaves.
fn leaf(cx: &mut Cx, here: &str, spec: &mut QueueSpec) {
    let q = |s: &str| format!("{PREFIX}{here}.{s}");
    spec.user_limit_factor = cx.number(&q("user-limit-factor"), "a number");
    spec.min_user_percent = cx.number(&q("minimum-user-limit-percent"), "a percent");
    spec.max_applications = cx.number(&q("maximum-applications"), "a whole number");
    spec.max_am_percent = cx.number(&q("maximum-am-resource-percent"), "a fraction");
    spec.ordering = match cx.get(&q("ordering-policy")).as_deref() {
        None | Some("fifo") => None,
        Some("fair") => Some(LeafOrdering::Fair),
        Some(other) => {
            cx.notes.push(format!("{here}: ordering-policy {other} is not one weir knows; imported as fifo"));
            None
        }
    };
    // FairOrderingPolicy.configure reads it with Boolean.parseBoolean (anything but "true",
    // any case, is false); weir refuses what is neither, so that a typo is not read as false.
    let sbw = q("ordering-policy.fair.enable-size-based-weight");
    match cx.get(&sbw).map(|v| v.to_ascii_lowercase()).as_deref() {
        None => {}
        Some(v @ ("true" | "false")) if spec.ordering == Some(LeafOrdering::Fair) => {
            spec.size_based_weight = (v == "true").then_some(true);
        }
        Some("true" | "false") => cx.notes.push(format!(
            "{here}: ordering-policy.fair.enable-size-based-weight is ignored: the leaf's ordering-policy is not fair"
        )),
        Some(other) => cx.problem(&sbw, format!("`{other}` is not true or false")),
    }
    let prefix = format!("{PREFIX}{here}.user-settings.");
    let users: Vec<(String, String)> = cx
        .props
        .keys()
        .filter_map(|k| {
            let user = k.strip_prefix(&prefix)?.strip_suffix(".weight")?;
            Some((user.to_string(), k.clone()))
        })
        .collect();
    for (user, key) in users {
        if let Some(w) = cx.number::<f64>(&key, "a weight") {
            spec.user_weights.insert(user, w);
        }
    }
}

/// The proportional preemption policy's settings (`CapacitySchedulerConfiguration`'s
/// `yarn.resourcemanager.monitor.capacity.preemption.*`, read from this file by
/// `ProportionalCapacityPreemptionPolicy`); `enabled` from `--preemption` (the monitor is
/// switched on in yarn-site.xml, which this file does not hold).
fn preemption(cx: &mut Cx, enabled: bool) -> Option<weir_model::cluster_file::PreemptionSpec> {
    const MONITOR: &str = "yarn.resourcemanager.monitor.capacity.preemption";
    let millis = |cx: &mut Cx, name: &str| {
        cx.number::<u64>(&format!("{MONITOR}.{name}"), "a whole number of milliseconds")
            .map(weir_model::Duration)
    };
    let spec = weir_model::cluster_file::PreemptionSpec {
        enabled: enabled.then_some(true),
        monitoring_interval: millis(cx, "monitoring_interval"),
        max_wait_before_kill: millis(cx, "max_wait_before_kill"),
        total_preemption_per_round: cx.number(&format!("{MONITOR}.total_preemption_per_round"), "a fraction"),
        max_ignored_over_capacity: cx.number(&format!("{MONITOR}.max_ignored_over_capacity"), "a fraction"),
        natural_termination_factor: cx.number(&format!("{MONITOR}.natural_termination_factor"), "a fraction"),
        ..Default::default()
    };
    (spec != Default::default()).then_some(spec)
}
