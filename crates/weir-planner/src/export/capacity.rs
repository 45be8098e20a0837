//! Hadoop YARN Capacity Scheduler configuration (`capacity-scheduler.xml`).
//!
//! Properties, with `<queue-path>` the full dotted path (`root.ads.ranking`):
//! - `yarn.scheduler.capacity.<queue-path>.queues`: the children, comma-separated;
//! - `.capacity`: percent of the parent, from the weights by largest remainder in tenths of a
//!   percent, so siblings sum to exactly 100.0;
//! - `.maximum-capacity`: weir's `max` as percent of the parent's maximum (percentages of the
//!   cluster and absolute limits convert through the cluster's size; for an absolute limit the
//!   binding resource counts), written when below 100 and never below the queue's capacity;
//! - `.max-parallel-apps`: `max_running_apps` (applications beyond it wait, as in weir);
//! - `.maximum-am-resource-percent`: `max_am_share` (leaves);
//! - `.ordering-policy`: `fifo` or `fair` (leaves; `drf` has no per-queue equivalent — the
//!   Capacity Scheduler sets dominant-resource comparison cluster-wide with
//!   `yarn.scheduler.capacity.resource-calculator`);
//! - `.priority`: the queue's priority (tier defaults applied);
//! - `.disable_preemption`: `true` where weir forbids preemption from a queue (inherited);
//! - `yarn.scheduler.capacity.user.max-parallel-apps`: `user_max_running_apps`.
//!
//! `min` has no Capacity Scheduler equivalent beyond the capacity itself; fair-share preemption
//! timeouts and thresholds belong to the Fair Scheduler and are not written.

use weir_model::{ClusterConfig, Policy, QueueIndex};

use super::xml::XmlOut;
use super::{fraction_of, largest_remainder, num};

const PREFIX: &str = "yarn.scheduler.capacity";

pub(super) fn export(cfg: &ClusterConfig) -> String {
    let mut x = XmlOut::new();
    x.comment("Hadoop YARN Capacity Scheduler configuration, written by weir from a weir cluster file.");
    x.comment("Capacities are the weights as percentages of the parent; siblings sum to exactly 100.");
    x.open("configuration", &[]);
    if let Some(n) = cfg.scheduler.user_max_running_apps {
        property(&mut x, &format!("{PREFIX}.user.max-parallel-apps"), &n.to_string(), None);
    }
    let total = cfg.total_resources();
    let n = cfg.queues.len();
    // Per queue, top-down: capacity in tenths of a percent of the parent, and the absolute
    // capacity and maximum capacity as fractions of the cluster.
    let mut tenths = vec![1000u64; n];
    let mut abs_cap = vec![1.0f64; n];
    let mut abs_max = vec![1.0f64; n];
    for (ix, q) in cfg.queues.iter().enumerate() {
        let weights: Vec<f64> = q.children.iter().map(|&c| cfg.queues[c].weight).collect();
        for (&c, t) in q.children.iter().zip(largest_remainder(&weights, 1000)) {
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
        }
        let Some(parent) = q.parent else { continue };
        let capacity = tenths[ix] as f64 / 10.0;
        property(&mut x, &format!("{PREFIX}.{path}.capacity"), &format!("{capacity:.1}"), None);
        // maximum-capacity is relative to the parent's maximum; the scheduler requires the
        // absolute maximum to be at least the absolute capacity.
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
        queue_properties(&mut x, cfg, ix);
    }
    x.close("configuration");
    x.finish()
}

fn queue_properties(x: &mut XmlOut, cfg: &ClusterConfig, ix: QueueIndex) {
    let q = &cfg.queues[ix];
    let parent = &cfg.queues[q.parent.unwrap_or(0)];
    let path = q.path.as_str();
    if let Some(n) = q.max_running_apps {
        property(x, &format!("{PREFIX}.{path}.max-parallel-apps"), &n.to_string(), None);
    }
    if q.is_leaf() {
        if let Some(s) = q.max_am_share {
            property(x, &format!("{PREFIX}.{path}.maximum-am-resource-percent"), &num(s), None);
        }
        let (policy, note) = match q.policy {
            Policy::Fifo | Policy::Priority => ("fifo", None),
            Policy::Fair => ("fair", None),
            Policy::Drf => {
                ("fair", Some("weir policy drf: set the resource-calculator to DominantResourceCalculator"))
            }
        };
        property(x, &format!("{PREFIX}.{path}.ordering-policy"), policy, note);
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

fn property(x: &mut XmlOut, name: &str, value: &str, description: Option<&str>) {
    x.open("property", &[]);
    x.text("name", name);
    x.text("value", value);
    if let Some(d) = description {
        x.text("description", d);
    }
    x.close("property");
}
