//! Hadoop YARN Capacity Scheduler configuration (`capacity-scheduler.xml`), property names as
//! `CapacitySchedulerConfiguration` reads them.
//!
//! Per queue (`yarn.scheduler.capacity.<queue-path>.…`): `queues`; `capacity`, percent of the
//! parent in tenths, siblings summing to exactly 100.0, from the weights but never below what
//! covers the queue's `min` (weir's guarantee); `maximum-capacity` from `max`;
//! `max-parallel-apps` (Hadoop 3.3+); `maximum-am-resource-percent` and `ordering-policy`
//! (`fifo`/`fair`) on leaves; `priority`, with `ordering-policy=priority-utilization` on the
//! parent (the default `utilization` ordering ignores priorities); `disable_preemption`;
//! `acl_submit_applications`, `acl_administer_queue`; `reservable`. Cluster-wide:
//! `user.max-parallel-apps`, `user.<name>.max-parallel-apps`, and the preemption monitor's
//! `max_wait_before_kill` (which the Capacity Scheduler reads from this file).
//!
//! Hadoop before 3.3 requires leaf names unique across the tree (YARN-9879 lifted it) and has no
//! `max-parallel-apps` (YARN-9930): for such targets (`hadoop_version`), repeated leaf names are
//! an error and running-app limits are listed as lost.

use std::collections::BTreeMap;

use weir_model::{ClusterConfig, Policy, QueueIndex};

use super::xml::XmlOut;
use super::{fraction_of, largest_remainder, num, ExportOptions, Version};
use crate::error::PlanError;

pub(super) const PREFIX: &str = "yarn.scheduler.capacity";

pub(super) fn export(
    cfg: &ClusterConfig,
    options: &ExportOptions,
    losses: &mut Vec<String>,
) -> Result<String, PlanError> {
    let modern = options.hadoop_version >= Version(3, 3);
    if !modern {
        unique_leaf_names(cfg, options.hadoop_version)?;
    }
    let mut x = XmlOut::new();
    let p = &cfg.scheduler.preemption;
    x.comment(&format!(
        "yarn-site.xml: yarn.resourcemanager.scheduler.monitor.enable={} (with the \
         ProportionalCapacityPreemptionPolicy monitor) for preemption{}",
        p.enabled,
        if cfg.queues.iter().any(|q| q.policy == Policy::Drf) {
            "; yarn.scheduler.capacity.resource-calculator=org.apache.hadoop.yarn.util.resource.DominantResourceCalculator for weir's drf"
        } else {
            ""
        }
    ));
    x.open("configuration", &[]);
    losses_for(cfg, modern, losses);
    if modern {
        if let Some(n) = cfg.scheduler.user_max_running_apps {
            property(&mut x, &format!("{PREFIX}.user.max-parallel-apps"), &n.to_string(), None);
        }
        for (name, u) in &cfg.users {
            if let Some(n) = u.max_running_apps {
                property(&mut x, &format!("{PREFIX}.user.{name}.max-parallel-apps"), &n.to_string(), None);
            }
        }
    }
    if p.enabled {
        property(
            &mut x,
            "yarn.resourcemanager.monitor.capacity.preemption.max_wait_before_kill",
            &p.kill_wait.as_millis().to_string(),
            Some("weir's kill_wait, in milliseconds"),
        );
    }
    let total = cfg.total_resources();
    let n = cfg.queues.len();
    let mut tenths = vec![1000u64; n];
    let mut abs_cap = vec![1.0f64; n];
    let mut abs_max = vec![1.0f64; n];
    for (ix, q) in cfg.queues.iter().enumerate() {
        if q.children.is_empty() {
            continue;
        }
        let parts = capacities(cfg, ix, abs_cap[ix], losses);
        for (&c, t) in q.children.iter().zip(parts) {
            tenths[c] = t;
            abs_cap[c] = abs_cap[ix] * t as f64 / 1000.0;
            abs_max[c] = fraction_of(&cfg.queues[c].max, &total).min(abs_max[ix]);
        }
    }
    for (ix, q) in cfg.queues.iter().enumerate() {
        let path = q.path.as_str();
        if !q.children.is_empty() {
            let names: Vec<&str> = q.children.iter().map(|&c| cfg.queues[c].name.as_str()).collect();
            property(&mut x, &format!("{PREFIX}.{path}.queues"), &names.join(","), None);
            if q.children.iter().any(|&c| cfg.queues[c].priority != 0) {
                property(
                    &mut x,
                    &format!("{PREFIX}.{path}.ordering-policy"),
                    "priority-utilization",
                    Some("the children's priorities count only under this ordering"),
                );
            }
        }
        acls(&mut x, cfg, ix);
        let Some(parent) = q.parent else { continue };
        let capacity = tenths[ix] as f64 / 10.0;
        property(&mut x, &format!("{PREFIX}.{path}.capacity"), &format!("{capacity:.1}"), None);
        // maximum-capacity is relative to the parent's maximum, and must not be below the
        // queue's own capacity.
        let mut max_abs = abs_max[ix];
        let mut note = None;
        if max_abs < abs_cap[ix] {
            note = Some(format!(
                "weir's max ({:.1}% of the cluster) is below this queue's capacity ({:.1}% of the cluster); raised to it",
                max_abs * 100.0,
                abs_cap[ix] * 100.0
            ));
            max_abs = abs_cap[ix];
        }
        let rel = if abs_max[parent] > 0.0 { (max_abs / abs_max[parent] * 100.0).min(100.0) } else { 100.0 };
        let rel = (rel * 10.0).ceil() / 10.0;
        if rel < 100.0 {
            property(
                &mut x,
                &format!("{PREFIX}.{path}.maximum-capacity"),
                &format!("{rel:.1}"),
                note.as_deref(),
            );
        }
        queue_properties(&mut x, cfg, ix, modern);
    }
    x.close("configuration");
    Ok(x.finish())
}

/// Capacities of `parent`'s children in tenths of a percent: by weight, raised where a child's
/// `min` needs more of the parent's absolute capacity `abs`, summing to exactly 1000.
fn capacities(cfg: &ClusterConfig, parent: QueueIndex, abs: f64, losses: &mut Vec<String>) -> Vec<u64> {
    let total = cfg.total_resources();
    let kids = &cfg.queues[parent].children;
    let weights: Vec<f64> = kids.iter().map(|&c| cfg.queues[c].weight.max(0.0)).collect();
    // The share of the parent each child's min needs (the binding resource decides).
    let need: Vec<f64> = kids
        .iter()
        .map(|&c| {
            let min = cfg.queues[c].min.resolve(&total);
            [(min.cpu, total.cpu), (min.memory, total.memory)]
                .iter()
                .filter(|(_, t)| *t > 0)
                .map(|&(m, t)| if abs > 0.0 { m as f64 / (t as f64 * abs) } else { 0.0 })
                .fold(0.0, f64::max)
        })
        .collect();
    let floors: Vec<u64> = need.iter().map(|n| (n * 1000.0 - 1e-9).ceil().max(0.0) as u64).collect();
    let fixed: u64 = floors.iter().sum();
    if fixed > 1000 {
        losses.push(format!(
            "{}: the children's min need {:.1}% of it; capacities follow the mins in proportion and cannot cover them",
            cfg.queues[parent].path,
            fixed as f64 / 10.0
        ));
        return largest_remainder(&need, 1000);
    }
    // Water-fill: children whose weighted share is below their floor get the floor; the rest
    // split what is left by weight.
    let mut pinned = vec![false; kids.len()];
    loop {
        let left = 1000 - floors.iter().zip(&pinned).filter(|(_, &p)| p).map(|(f, _)| f).sum::<u64>();
        let free: Vec<usize> = (0..kids.len()).filter(|&i| !pinned[i]).collect();
        let w: Vec<f64> = free.iter().map(|&i| weights[i]).collect();
        let parts = largest_remainder(&w, left);
        let mut changed = false;
        for (&i, &p) in free.iter().zip(&parts) {
            if p < floors[i] {
                pinned[i] = true;
                changed = true;
            }
        }
        if !changed {
            // Pinned children keep their floors; the free ones take their weighted parts.
            let mut out: Vec<u64> = floors.clone();
            for (&i, &p) in free.iter().zip(&parts) {
                out[i] = p;
            }
            return out;
        }
    }
}

fn losses_for(cfg: &ClusterConfig, modern: bool, losses: &mut Vec<String>) {
    if cfg.queues.iter().any(|q| q.max_am_share.is_some_and(|s| s < 0.0))
        || cfg.scheduler.queue_max_am_share_default.is_none()
    {
        losses.push(
            "max_am_share -1 (no AM limit): the Capacity Scheduler always limits application masters".into(),
        );
    }
    if cfg
        .queues
        .iter()
        .any(|q| q.fair_share_preemption_timeout.is_some() || q.min_share_preemption_timeout.is_some())
    {
        losses.push(
            "fair-share and min-share preemption timeouts and thresholds: the Capacity Scheduler preempts back to \
             guaranteed capacities on its own schedule (ProportionalCapacityPreemptionPolicy)"
                .into(),
        );
    }
    if cfg.scheduler.preemption.enabled {
        losses.push(format!(
            "preemption utilization threshold {}: no Capacity Scheduler equivalent",
            num(cfg.scheduler.preemption.utilization_threshold)
        ));
    }
    if cfg.queues.iter().any(|q| q.policy == Policy::Drf) {
        losses.push(
            "policy drf: the Capacity Scheduler compares by dominant resource cluster-wide or not at all \
             (resource-calculator, see the comment above); leaves are written with ordering-policy fair"
                .into(),
        );
    }
    if cfg.scheduler.promotion == weir_model::Promotion::Priority {
        losses.push("promotion priority: waiting applications start in submission order".into());
    }
    let tiered = cfg.queues.iter().filter(|q| q.tier.is_some()).count();
    if tiered > 0 {
        losses.push(format!(
            "tiers ({tiered} leaves): written as each queue's resolved priority and preemption setting"
        ));
    }
    let limits = cfg.queues.iter().any(|q| q.max_running_apps.is_some())
        || cfg.scheduler.user_max_running_apps.is_some()
        || !cfg.users.is_empty();
    if !modern && limits {
        losses.push(
            "max_running_apps (queues and users): Hadoop before 3.3 has no max-parallel-apps \
             (maximum-applications would reject applications instead of queueing them)"
                .into(),
        );
    }
    if !cfg.queue_placement.is_empty() {
        losses.push(format!(
            "queue placement policy ({} rules): the Capacity Scheduler's queue-mappings are not written",
            cfg.queue_placement.len()
        ));
    }
    if !cfg.placement.is_empty() {
        losses.push(format!(
            "placement ({} rules): weir places workflows by project and tier",
            cfg.placement.len()
        ));
    }
    for q in cfg.queues.iter().filter(|q| q.dynamic_parent) {
        losses.push(format!("{}: dynamic_parent (children created at run time) is not written", q.path));
    }
}

fn unique_leaf_names(cfg: &ClusterConfig, version: Version) -> Result<(), PlanError> {
    let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
    for q in cfg.leaves() {
        if let Some(first) = seen.insert(q.name.as_str(), q.path.as_str()) {
            return Err(PlanError::Unsupported {
                format: "yarn-capacity",
                message: format!(
                    "Hadoop {version} requires leaf queue names unique across the tree, but {first} and {} are both \
                     named `{}` (allowed from Hadoop 3.3, YARN-9879); rename one, or export for --hadoop-version 3.3 or later",
                    q.path, q.name
                ),
            });
        }
    }
    Ok(())
}

pub(super) fn acls(x: &mut XmlOut, cfg: &ClusterConfig, ix: QueueIndex) {
    let q = &cfg.queues[ix];
    if let Some(a) = &q.acl {
        if let Some(s) = &a.submit {
            property(x, &format!("{PREFIX}.{}.acl_submit_applications", q.path), s, None);
        }
        if let Some(s) = &a.administer {
            property(x, &format!("{PREFIX}.{}.acl_administer_queue", q.path), s, None);
        }
    }
}

fn queue_properties(x: &mut XmlOut, cfg: &ClusterConfig, ix: QueueIndex, modern: bool) {
    let q = &cfg.queues[ix];
    let parent = &cfg.queues[q.parent.unwrap_or(0)];
    let path = q.path.as_str();
    if let (Some(n), true) = (q.max_running_apps, modern) {
        property(x, &format!("{PREFIX}.{path}.max-parallel-apps"), &n.to_string(), None);
    }
    if q.is_leaf() {
        if let Some(s) = q.max_am_share.filter(|s| *s >= 0.0) {
            property(x, &format!("{PREFIX}.{path}.maximum-am-resource-percent"), &num(s), None);
        }
        let policy = if matches!(q.policy, Policy::Fifo | Policy::Priority) { "fifo" } else { "fair" };
        property(x, &format!("{PREFIX}.{path}.ordering-policy"), policy, None);
        if q.reservable {
            property(x, &format!("{PREFIX}.{path}.reservable"), "true", None);
        }
    }
    if q.priority != 0 {
        property(x, &format!("{PREFIX}.{path}.priority"), &q.priority.to_string(), None);
    }
    if q.allow_preemption_from != parent.allow_preemption_from {
        property(
            x,
            &format!("{PREFIX}.{path}.disable_preemption"),
            &(!q.allow_preemption_from).to_string(),
            None,
        );
    }
}

pub(super) fn property(x: &mut XmlOut, name: &str, value: &str, description: Option<&str>) {
    x.open("property", &[]);
    x.text("name", name);
    x.text("value", value);
    if let Some(d) = description {
        x.text("description", d);
    }
    x.close("property");
}
