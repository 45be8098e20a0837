//! Hadoop YARN Fair Scheduler allocation file (`fair-scheduler.xml`).
//!
//! Per queue: `weight`, `minResources`/`maxResources` (`"X mb, Y vcores"`, or `"X%"` for a
//! share of the cluster, or `"memory-mb=X, vcores=Y"` when a component is left unbounded or a
//! GPU count is set), `maxRunningApps`, `maxAMShare` (leaves), `schedulingPolicy`
//! (`fair`/`drf`/`fifo`), and the inherited preemption settings `allowPreemptionFrom`,
//! `fairSharePreemptionTimeout`, `fairSharePreemptionThreshold`, `minSharePreemptionTimeout`
//! (timeouts in seconds) wherever a queue's value differs from what it would inherit. The
//! root's preemption settings become `defaultFairSharePreemptionTimeout` and friends;
//! `scheduler.user_max_running_apps` becomes `userMaxAppsDefault`.
//!
//! Not expressible in the allocation file: tiers, queue priority, planning percentiles (YARN has
//! none); preemption on/off, its utilization threshold and kill wait live in `yarn-site.xml` and
//! are written in a comment. Millicores round up to whole vcores, milliseconds up to seconds.

use weir_model::{ClusterConfig, Limit, Policy, QueueConfig, QueueIndex, Resources};

use super::xml::XmlOut;
use super::{num, seconds, vcores};

pub(super) fn export(cfg: &ClusterConfig) -> String {
    let mut x = XmlOut::new();
    x.comment("Hadoop YARN Fair Scheduler allocation file, written by weir from a weir cluster file.");
    let p = &cfg.scheduler.preemption;
    x.comment(&format!(
        "yarn-site.xml: yarn.scheduler.fair.preemption={}, \
         yarn.scheduler.fair.preemption.cluster-utilization-threshold={}, \
         yarn.scheduler.fair.waitTimeBeforeKill={} (ms)",
        p.enabled,
        num(p.utilization_threshold),
        p.kill_wait.as_millis()
    ));
    x.open("allocations", &[]);
    if let Some(n) = cfg.scheduler.user_max_running_apps {
        x.text("userMaxAppsDefault", &n.to_string());
    }
    let root = &cfg.queues[0];
    if let Some(t) = root.fair_share_preemption_timeout {
        x.text("defaultFairSharePreemptionTimeout", &seconds(t).to_string());
    }
    if let Some(t) = root.min_share_preemption_timeout {
        x.text("defaultMinSharePreemptionTimeout", &seconds(t).to_string());
    }
    if root.fair_share_preemption_threshold != YARN_DEFAULT_THRESHOLD {
        x.text("defaultFairSharePreemptionThreshold", &num(root.fair_share_preemption_threshold));
    }
    x.open("queue", &[("name", "root")]);
    if cfg.scheduler.root_policy != Policy::Fair {
        x.text("schedulingPolicy", cfg.scheduler.root_policy.name());
    }
    for &c in &root.children {
        queue(&mut x, cfg, c);
    }
    x.close("queue");
    x.close("allocations");
    x.finish()
}

/// YARN's own default for `fairSharePreemptionThreshold`.
const YARN_DEFAULT_THRESHOLD: f64 = 0.5;

fn queue(x: &mut XmlOut, cfg: &ClusterConfig, ix: QueueIndex) {
    let q = &cfg.queues[ix];
    let parent: &QueueConfig = &cfg.queues[q.parent.unwrap_or(0)];
    if let Some(t) = q.tier {
        x.comment(&format!("tier {t}"));
    }
    x.open("queue", &[("name", &q.name)]);
    x.text("weight", &format!("{:?}", q.weight));
    if let Some(v) = resources(&q.min, false) {
        x.text("minResources", &v);
    }
    if let Some(v) = resources(&q.max, true) {
        x.text("maxResources", &v);
    }
    if let Some(n) = q.max_running_apps {
        x.text("maxRunningApps", &n.to_string());
    }
    if let (Some(s), true) = (q.max_am_share, q.is_leaf()) {
        x.text("maxAMShare", &num(s));
    }
    if q.policy != Policy::Fair {
        x.text("schedulingPolicy", q.policy.name());
    }
    if q.allow_preemption_from != parent.allow_preemption_from {
        x.text("allowPreemptionFrom", &q.allow_preemption_from.to_string());
    }
    if q.fair_share_preemption_timeout != parent.fair_share_preemption_timeout {
        if let Some(t) = q.fair_share_preemption_timeout {
            x.text("fairSharePreemptionTimeout", &seconds(t).to_string());
        }
    }
    if q.fair_share_preemption_threshold != parent.fair_share_preemption_threshold {
        x.text("fairSharePreemptionThreshold", &num(q.fair_share_preemption_threshold));
    }
    if q.min_share_preemption_timeout != parent.min_share_preemption_timeout {
        if let Some(t) = q.min_share_preemption_timeout {
            x.text("minSharePreemptionTimeout", &seconds(t).to_string());
        }
    }
    for &c in &q.children {
        queue(x, cfg, c);
    }
    x.close("queue");
}

/// A limit in the allocation file's syntax, or `None` when it is the default (no minimum,
/// unbounded maximum).
pub(crate) fn resources(limit: &Limit, is_max: bool) -> Option<String> {
    match *limit {
        Limit::Percent(p) if (is_max && p >= 100.0) || (!is_max && p <= 0.0) => None,
        Limit::Percent(p) => Some(format!("{}%", num(p))),
        Limit::Absolute(r) => absolute(&r, is_max),
    }
}

fn absolute(r: &Resources, is_max: bool) -> Option<String> {
    let unset = if is_max { u64::MAX } else { 0 };
    if r.cpu == unset && r.memory == unset && r.gpu == unset {
        return None;
    }
    let bounded = |v: u64| v != u64::MAX;
    if bounded(r.cpu) && bounded(r.memory) && r.gpu == unset {
        return Some(format!("{} mb, {} vcores", r.memory, vcores(r.cpu)));
    }
    // The "new" format: components left out are 0 for minResources and unbounded for
    // maxResources, which is exactly weir's meaning of a missing component.
    let mut parts = Vec::new();
    if r.memory != unset {
        parts.push(format!("memory-mb={}", r.memory));
    }
    if r.cpu != unset {
        parts.push(format!("vcores={}", vcores(r.cpu)));
    }
    if r.gpu != unset {
        parts.push(format!("yarn.io/gpu={}", r.gpu));
    }
    Some(parts.join(", "))
}
