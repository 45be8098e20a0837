//! `capacity-scheduler.xml` from a capacity-mode cluster: the queue settings are the Capacity
//! Scheduler's own, so they are written as the file gives them (a percent, a weight `3w`, or
//! absolute `[memory=…,vcores=…]`), not derived from weights as for a fair-mode cluster.

use weir_model::{CapacitySpec, ClusterConfig, LeafOrdering, QueueState, Resources};

use super::capacity::{acls, property, PREFIX};
use super::num;
use super::xml::XmlOut;
use crate::error::PlanError;

pub(super) fn export(cfg: &ClusterConfig, losses: &mut Vec<String>) -> Result<String, PlanError> {
    let mut x = XmlOut::new();
    x.open("configuration", &[]);
    let root = cfg.queues[0].capacity.as_ref();
    if let Some(r) = root {
        property(&mut x, &format!("{PREFIX}.maximum-applications"), &r.max_applications.to_string(), None);
        property(&mut x, &format!("{PREFIX}.maximum-am-resource-percent"), &num(r.max_am_percent), None);
    }
    if let Some(n) = cfg.scheduler.user_max_running_apps {
        property(&mut x, &format!("{PREFIX}.user.max-parallel-apps"), &n.to_string(), None);
    }
    let p = &cfg.scheduler.preemption;
    if p.enabled {
        // ProportionalCapacityPreemptionPolicy reads these from capacity-scheduler.xml; the
        // monitor itself is switched on in yarn-site.xml.
        let monitor = "yarn.resourcemanager.monitor.capacity.preemption";
        let c = &p.capacity;
        for (name, value, note) in [
            (
                "monitoring_interval",
                c.monitoring_interval.as_millis().to_string(),
                Some("with yarn.resourcemanager.scheduler.monitor.enable=true in yarn-site.xml"),
            ),
            ("max_wait_before_kill", p.kill_wait.as_millis().to_string(), None),
            ("total_preemption_per_round", num(c.total_preemption_per_round), None),
            ("max_ignored_over_capacity", num(c.max_ignored_over_capacity), None),
            ("natural_termination_factor", num(c.natural_termination_factor), None),
        ] {
            property(&mut x, &format!("{monitor}.{name}"), &value, note);
        }
    }
    for (ix, q) in cfg.queues.iter().enumerate() {
        let path = q.path.as_str();
        let Some(c) = &q.capacity else { continue };
        labels(&mut x, cfg, ix);
        if !q.children.is_empty() {
            let names: Vec<&str> = q.children.iter().map(|&k| cfg.queues[k].name.as_str()).collect();
            property(&mut x, &format!("{PREFIX}.{path}.queues"), &names.join(","), None);
            let prioritised = q
                .children
                .iter()
                .any(|&k| cfg.queues[k].capacity.as_ref().is_some_and(|c| c.queue_priority != 0));
            if prioritised {
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
        if let Some(spec) = &c.configured {
            property(&mut x, &format!("{PREFIX}.{path}.capacity"), &value(spec, path, losses), None);
        }
        if let Some(spec) = &c.configured_max {
            property(&mut x, &format!("{PREFIX}.{path}.maximum-capacity"), &value(spec, path, losses), None);
        }
        if let Some(n) = c.max_parallel_apps {
            property(&mut x, &format!("{PREFIX}.{path}.max-parallel-apps"), &n.to_string(), None);
        }
        if c.queue_priority != 0 {
            property(&mut x, &format!("{PREFIX}.{path}.priority"), &c.queue_priority.to_string(), None);
        }
        if c.state == QueueState::Stopped {
            property(&mut x, &format!("{PREFIX}.{path}.state"), "STOPPED", None);
        }
        if q.is_leaf() {
            let p = |x: &mut XmlOut, name: &str, v: String| {
                property(x, &format!("{PREFIX}.{path}.{name}"), &v, None)
            };
            if c.user_limit_factor != 1.0 {
                p(&mut x, "user-limit-factor", num(c.user_limit_factor));
            }
            if c.min_user_percent != 100.0 {
                p(&mut x, "minimum-user-limit-percent", num(c.min_user_percent));
            }
            for (user, w) in &c.user_weights {
                p(&mut x, &format!("user-settings.{user}.weight"), num(*w));
            }
            p(&mut x, "maximum-applications", c.max_applications.to_string());
            if root.is_none_or(|r| r.max_am_percent != c.max_am_percent) {
                p(&mut x, "maximum-am-resource-percent", num(c.max_am_percent));
            }
            match c.ordering {
                LeafOrdering::Fifo => p(&mut x, "ordering-policy", "fifo".to_string()),
                LeafOrdering::Fair => {
                    p(&mut x, "ordering-policy", "fair".to_string());
                    if c.size_based_weight {
                        p(&mut x, "ordering-policy.fair.enable-size-based-weight", "true".to_string());
                    }
                }
            }
        }
        if q.allow_preemption_from != cfg.queues[parent].allow_preemption_from {
            property(
                &mut x,
                &format!("{PREFIX}.{path}.disable_preemption"),
                &(!q.allow_preemption_from).to_string(),
                None,
            );
        }
    }
    x.close("configuration");
    Ok(x.finish())
}

/// A queue's node labels: root may use every label with 100% of each; another queue's are
/// written when they differ from its parent's (different labels, or a capacity or max capacity
/// set), and its `default-node-label-expression` when it differs from its parent's.
fn labels(x: &mut XmlOut, cfg: &ClusterConfig, ix: usize) {
    let q = &cfg.queues[ix];
    let Some(c) = &q.capacity else { return };
    let path = q.path.as_str();
    let parent = q.parent.and_then(|p| cfg.queues[p].capacity.as_ref());
    let Some(parent) = parent else {
        if !c.labels.is_empty() {
            property(x, &format!("{PREFIX}.{path}.accessible-node-labels"), "*", None);
            for l in c.labels.keys() {
                property(x, &format!("{PREFIX}.{path}.accessible-node-labels.{l}.capacity"), "100", None);
            }
        }
        return;
    };
    let inherited = c.labels.keys().eq(parent.labels.keys())
        && c.labels.values().all(|s| s.capacity == 0.0 && s.max_capacity == 100.0);
    if !inherited {
        let list: Vec<&str> = c.labels.keys().map(String::as_str).collect();
        // A blank value is YARN's "no label".
        let value = if list.is_empty() { " ".to_string() } else { list.join(",") };
        property(x, &format!("{PREFIX}.{path}.accessible-node-labels"), &value, None);
        for (l, s) in &c.labels {
            let key = format!("{PREFIX}.{path}.accessible-node-labels.{l}");
            property(x, &format!("{key}.capacity"), &num(s.capacity), None);
            if s.max_capacity != 100.0 {
                property(x, &format!("{key}.maximum-capacity"), &num(s.max_capacity), None);
            }
        }
    }
    if c.default_label != parent.default_label {
        if let Some(d) = &c.default_label {
            property(x, &format!("{PREFIX}.{path}.default-node-label-expression"), d, None);
        }
    }
}

/// A capacity as the Capacity Scheduler writes it.
fn value(spec: &CapacitySpec, path: &str, losses: &mut Vec<String>) -> String {
    match spec {
        CapacitySpec::Percent(p) => num(*p),
        CapacitySpec::Weight(w) => format!("{}w", num(*w)),
        CapacitySpec::Absolute(r) => absolute(&r.or(0), path, losses),
    }
}

/// `[memory=MiB,vcores=N]`; weir's cpu is in millicores, YARN's vcores whole.
fn absolute(r: &Resources, path: &str, losses: &mut Vec<String>) -> String {
    if !r.cpu.is_multiple_of(1000) {
        losses.push(format!(
            "{path}: {} millicores written as {} vcores (YARN counts whole vcores)",
            r.cpu,
            r.cpu / 1000
        ));
    }
    if r.gpu != 0 {
        format!("[memory={},vcores={},yarn.io/gpu={}]", r.memory, r.cpu / 1000, r.gpu)
    } else {
        format!("[memory={},vcores={}]", r.memory, r.cpu / 1000)
    }
}
