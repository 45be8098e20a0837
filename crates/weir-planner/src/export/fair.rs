//! Hadoop YARN Fair Scheduler allocation file (`fair-scheduler.xml`), written so that YARN's
//! `AllocationFileQueueParser` creates every queue and reads every value as weir means it.
//!
//! Per queue: `weight`, `minResources` (always absolute: YARN gives a percentage
//! `minResources` no min share), `maxResources` (`"X mb, Y vcores"`, `"X%"`, or
//! `"memory-mb=X, vcores=Y"` when a component is unbounded), `maxRunningApps`, `maxAMShare`
//! (leaves), `schedulingPolicy`, the inherited preemption settings where a queue's value differs
//! from what it would inherit, `aclSubmitApps`/`aclAdministerApps`, `<reservation/>` and
//! `type="parent"`. Top level: `userMaxAppsDefault`, `<user>` limits, the root's preemption
//! defaults and ACLs, and `queuePlacementPolicy`.
//!
//! Policies: YARN refuses a `drf` queue under a `fair` parent (`FairSharePolicy.
//! isChildPolicyAllowed`) and skips it with its whole subtree, so every ancestor of a drf queue
//! is written as drf (listed in the losses). GPUs: a resource type YARN does not know makes it
//! refuse the whole file, so GPU limits are written only with a GPU resource name.

use weir_model::{ClusterConfig, Limit, Policy, QueueConfig, QueueIndex, Resources};

use super::xml::XmlOut;
use super::{num, seconds, vcores, ExportOptions};
use crate::error::PlanError;

/// YARN's own default for `fairSharePreemptionThreshold`.
const YARN_DEFAULT_THRESHOLD: f64 = 0.5;

pub(super) fn export(
    cfg: &ClusterConfig,
    options: &ExportOptions,
    losses: &mut Vec<String>,
) -> Result<String, PlanError> {
    let policies = written_policies(cfg, losses);
    common_losses(cfg, losses);
    let mut x = XmlOut::new();
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
    if let Some(d) = cfg.file.scheduler.queue_max_am_share_default {
        x.text("queueMaxAMShareDefault", &num(d));
    }
    for (name, u) in &cfg.users {
        x.open("user", &[("name", name)]);
        if let Some(n) = u.max_running_apps {
            x.text("maxRunningApps", &n.to_string());
        }
        x.close("user");
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
    if policies[0] != Policy::Fair {
        x.text("schedulingPolicy", policies[0].name());
    }
    acl(&mut x, root);
    let mut w = Writer { cfg, options, losses, policies: &policies };
    for &c in &root.children {
        w.queue(&mut x, c);
    }
    x.close("queue");
    placement(&mut x, cfg);
    x.close("allocations");
    Ok(x.finish())
}

/// The policy written for each queue: weir's, raised to drf on every ancestor of a drf queue;
/// weir's `priority` leaves become YARN's fifo (submit time only).
fn written_policies(cfg: &ClusterConfig, losses: &mut Vec<String>) -> Vec<Policy> {
    let mut policies: Vec<Policy> = cfg.queues.iter().map(|q| q.policy).collect();
    let by_priority = policies.iter().filter(|p| **p == Policy::Priority).count();
    if by_priority > 0 {
        losses.push(format!(
            "policy priority ({by_priority} leaves): YARN's fifo orders by submit time only (the Fair Scheduler ignores \
             application priority); written as fifo"
        ));
        for p in policies.iter_mut().filter(|p| **p == Policy::Priority) {
            *p = Policy::Fifo;
        }
    }
    let mut raised = Vec::new();
    for (i, q) in cfg.queues.iter().enumerate() {
        if q.policy != Policy::Drf {
            continue;
        }
        let mut up = q.parent;
        while let Some(p) = up {
            if policies[p] == Policy::Fair {
                policies[p] = Policy::Drf;
                raised.push((p, i));
            }
            up = cfg.queues[p].parent;
        }
    }
    raised.sort();
    raised.dedup_by_key(|r| r.0);
    for (p, because) in raised {
        losses.push(format!(
            "{}: schedulingPolicy drf where weir has fair: YARN refuses a drf queue under a fair parent \
             (FairSharePolicy.isChildPolicyAllowed) and would skip {} with its subtree, so its children are \
             compared by dominant resource rather than by memory",
            cfg.queues[p].path, cfg.queues[because].path
        ));
    }
    policies
}

/// What the allocation file has no place for, whatever the queue.
fn common_losses(cfg: &ClusterConfig, losses: &mut Vec<String>) {
    let tiered = cfg.queues.iter().filter(|q| q.tier.is_some()).count();
    if tiered > 0 {
        losses.push(format!(
            "tiers ({tiered} leaves): YARN has none; each queue's resolved settings are written instead, and \
             the tier appears as a comment"
        ));
    }
    if cfg.queues.iter().any(|q| q.priority != 0) {
        losses.push("queue priorities: the Fair Scheduler orders queues by fair share only".into());
    }
    if cfg.scheduler.promotion == weir_model::Promotion::Priority
        && cfg.queues.iter().any(|q| q.max_running_apps.is_some())
    {
        losses.push(
            "promotion priority: YARN admits apps waiting on maxRunningApps first come, first served".into(),
        );
    }
    if cfg.scheduler.rounding == weir_model::Rounding::Exact {
        losses.push("rounding exact: YARN rounds fair shares its own way (weir's rounding yarn)".into());
    }
    let inc = cfg.scheduler.increment;
    if inc != Resources::ZERO {
        losses.push(format!(
            "increment: belongs in yarn-site.xml (yarn.resource-types.memory-mb.increment-allocation={}, \
             yarn.resource-types.vcores.increment-allocation={})",
            inc.memory,
            vcores(inc.cpu).max(1)
        ));
    }
    if !cfg.placement.is_empty() {
        losses.push(format!(
            "placement ({} rules): weir places workflows by project and tier; YARN places applications by the \
             queue they name, user or group",
            cfg.placement.len()
        ));
    }
    if cfg.queues.iter().any(|q| q.max_am_share.is_some() && !q.is_leaf()) {
        losses.push("max_am_share on parent queues: YARN reads maxAMShare on leaves only".into());
    }
}

struct Writer<'a> {
    cfg: &'a ClusterConfig,
    options: &'a ExportOptions,
    losses: &'a mut Vec<String>,
    policies: &'a [Policy],
}

impl Writer<'_> {
    fn queue(&mut self, x: &mut XmlOut, ix: QueueIndex) {
        let cfg = self.cfg;
        let q = &cfg.queues[ix];
        let parent: &QueueConfig = &cfg.queues[q.parent.unwrap_or(0)];
        if let Some(t) = q.tier {
            x.comment(&format!("tier {t}"));
        }
        let attrs: &[(&str, &str)] =
            if q.dynamic_parent { &[("name", &q.name), ("type", "parent")] } else { &[("name", &q.name)] };
        x.open("queue", attrs);
        x.text("weight", &format!("{:?}", q.weight));
        if let Some(v) = self.min(q) {
            x.text("minResources", &v);
        }
        if let Some(v) = self.max(q) {
            x.text("maxResources", &v);
        }
        if let Some(n) = q.max_running_apps {
            x.text("maxRunningApps", &n.to_string());
        }
        if let (Some(s), true) = (q.max_am_share, q.is_leaf() && !q.dynamic_parent) {
            x.text("maxAMShare", &num(s));
        }
        if self.policies[ix] != Policy::Fair {
            x.text("schedulingPolicy", self.policies[ix].name());
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
        acl(x, q);
        if q.reservable {
            x.empty("reservation");
        }
        for &c in &q.children {
            self.queue(x, c);
        }
        x.close("queue");
    }

    /// Always absolute: YARN gives a percentage minResources no min share.
    fn min(&mut self, q: &QueueConfig) -> Option<String> {
        let r = match q.min {
            Limit::Percent(p) if p <= 0.0 => return None,
            Limit::Percent(p) => {
                let r = q.min.resolve(&self.cfg.total_resources());
                self.losses.push(format!(
                    "{}: min {}% written as {} MiB and {} vcores of today's cluster (YARN reads a percentage \
                     minResources as no minimum); it no longer follows the cluster's size",
                    q.path,
                    num(p),
                    r.memory,
                    vcores(r.cpu)
                ));
                r
            }
            Limit::Absolute(r) => r,
        };
        self.absolute(q, &r, false)
    }

    fn max(&mut self, q: &QueueConfig) -> Option<String> {
        match q.max {
            Limit::Percent(p) if p >= 100.0 => None,
            Limit::Percent(p) => Some(format!("{}%", num(p))),
            Limit::Absolute(r) => self.absolute(q, &r, true),
        }
    }

    fn absolute(&mut self, q: &QueueConfig, r: &Resources, is_max: bool) -> Option<String> {
        let unset = if is_max { u64::MAX } else { 0 };
        let mut gpu = r.gpu;
        if gpu != unset && self.options.gpu_resource.is_none() {
            self.losses.push(format!(
                "{}: {} gpu {gpu} left out: YARN refuses the whole file for a resource type the cluster does not \
                 declare; pass --gpu-resource-name (e.g. yarn.io/gpu) if yours does",
                q.path,
                if is_max { "max" } else { "min" }
            ));
            gpu = unset;
        }
        if !r.cpu.is_multiple_of(1000) && r.cpu != u64::MAX {
            self.losses.push(format!(
                "{}: {} cpu {} millicores rounded up to {} vcores (YARN counts whole vcores)",
                q.path,
                if is_max { "max" } else { "min" },
                r.cpu,
                vcores(r.cpu)
            ));
        }
        if r.cpu == unset && r.memory == unset && gpu == unset {
            return None;
        }
        let bounded = |v: u64| v != u64::MAX;
        if bounded(r.cpu) && bounded(r.memory) && gpu == unset {
            return Some(format!("{} mb, {} vcores", r.memory, vcores(r.cpu)));
        }
        // The new syntax: components left out are 0 for minResources and unbounded for
        // maxResources, which is exactly weir's meaning of a missing component.
        let mut parts = Vec::new();
        if r.memory != unset {
            parts.push(format!("memory-mb={}", r.memory));
        }
        if r.cpu != unset {
            parts.push(format!("vcores={}", vcores(r.cpu)));
        }
        if let (true, Some(name)) = (gpu != unset, &self.options.gpu_resource) {
            parts.push(format!("{name}={gpu}"));
        }
        Some(parts.join(", "))
    }
}

fn acl(x: &mut XmlOut, q: &QueueConfig) {
    if let Some(a) = &q.acl {
        if let Some(s) = &a.submit {
            x.text("aclSubmitApps", s);
        }
        if let Some(s) = &a.administer {
            x.text("aclAdministerApps", s);
        }
    }
}

fn placement(x: &mut XmlOut, cfg: &ClusterConfig) {
    if cfg.queue_placement.is_empty() {
        return;
    }
    x.open("queuePlacementPolicy", &[]);
    for r in &cfg.queue_placement {
        rule(x, r);
    }
    x.close("queuePlacementPolicy");
}

fn rule(x: &mut XmlOut, r: &weir_model::PlacementRuleSpec) {
    let create = r.create.map(|c| c.to_string());
    let queue = r.queue.as_deref().map(|q| q.strip_prefix("root.").unwrap_or(q).to_string());
    let mut attrs: Vec<(&str, &str)> = vec![("name", r.rule.yarn_name())];
    if let Some(c) = &create {
        attrs.push(("create", c));
    }
    if let Some(q) = &queue {
        attrs.push(("queue", q));
    }
    match &r.parent {
        Some(p) => {
            x.open("rule", &attrs);
            rule(x, p);
            x.close("rule");
        }
        None => x.empty_with("rule", &attrs),
    }
}
