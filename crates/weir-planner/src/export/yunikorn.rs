//! Apache YuniKorn partition and queue configuration (`queues.yaml`), field names as
//! yunikorn-core's `configs.QueueConfig` reads them (strictly: unknown fields are errors) and
//! values that pass its `configvalidator.go`.
//!
//! - `partitions[].preemption.enabled`: weir's `scheduler.preemption.enabled`;
//! - the `root` queue (no resources: YuniKorn refuses them there) with `submitacl`/`adminacl`
//!   from the root ACLs (everyone when unset, as in YARN), and `limits`: one per user of
//!   `users:`, then `*` for `scheduler.user_max_running_apps`;
//! - `resources.guaranteed`: the queue's steady fair share, made consistent down the tree (see
//!   `guarantee.rs`: children never add up to more than their parent);
//! - `resources.max`: weir's `max`, capped by the parent's;
//! - units: `vcore` in cores or millicores (`96`, `1500m`), `memory` with a binary suffix
//!   (`384Gi`; a bare number would be bytes), GPUs under the GPU resource name;
//! - `maxapplications`: `max_running_apps`, capped by the parent's and repeated under a limited
//!   parent (YuniKorn treats a missing child value there as an error);
//! - `properties`: `application.sort.policy`, `priority.offset`, `preemption.delay` (the
//!   fair-share preemption timeout) on leaves, `preemption.policy: disabled` where weir never
//!   preempts; `parent: true` for a dynamic parent;
//! - `placementrules` from the application placement policy where YuniKorn has the rule.
//!
//! Queue names outside `^[a-zA-Z0-9_:#/@-]{1,64}$` are rewritten (other characters become `_`)
//! and listed.

use std::collections::BTreeMap;

use serde::Serialize;
use weir_model::{ClusterConfig, PlacementRuleKind, PlacementRuleSpec, Policy, QueueIndex, Resources};

use super::guarantee::guarantees;
use super::{fnv32, k8s_memory, num, ExportOptions};
use crate::error::PlanError;

#[derive(Serialize)]
struct Config {
    partitions: Vec<Partition>,
}

#[derive(Serialize)]
struct Partition {
    name: String,
    preemption: Enabled,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    placementrules: Vec<Rule>,
    queues: Vec<Queue>,
}

#[derive(Serialize)]
struct Enabled {
    enabled: bool,
}

#[derive(Serialize)]
struct Rule {
    name: &'static str,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    create: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    parent: Option<Box<Rule>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<String>,
}

#[derive(Serialize)]
struct Limit {
    limit: String,
    users: Vec<String>,
    maxapplications: u32,
}

#[derive(Serialize)]
struct Queue {
    name: String,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    parent: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    submitacl: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    adminacl: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    maxapplications: Option<u32>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    properties: BTreeMap<&'static str, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    resources: Option<QueueResources>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    limits: Vec<Limit>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    queues: Vec<Queue>,
}

#[derive(Serialize)]
struct QueueResources {
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    guaranteed: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    max: BTreeMap<String, String>,
}

/// YuniKorn's `QueueNameRegExp`: letters, digits, `_ : # / @ -`, 1 to 64 characters.
pub(crate) fn yunikorn_name(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || "_:#/@-".contains(c) { c } else { '_' })
        .collect();
    if out.len() > 64 {
        out.truncate(55);
        out = format!("{out}_{:08x}", fnv32(name));
    }
    out
}

/// YuniKorn's `UserRegExp` for user names in limits.
fn valid_user(name: &str) -> bool {
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c == '_' || c.is_ascii_alphabetic());
    let body = name.trim_end_matches('$');
    first_ok && body.chars().all(|c| c.is_ascii_alphanumeric() || ":#/_.@-".contains(c))
}

pub(super) fn export(
    cfg: &ClusterConfig,
    options: &ExportOptions,
    losses: &mut Vec<String>,
) -> Result<String, PlanError> {
    let g = guarantees(cfg);
    losses.extend(g.losses.iter().cloned());
    let gpu = options.gpu_resource.clone().unwrap_or_else(|| "nvidia.com/gpu".into());
    let mut ctx = Ctx {
        cfg,
        guaranteed: g.per_queue,
        total: cfg.total_resources(),
        gpu,
        max: vec![Resources::UNBOUNDED; cfg.queues.len()],
        apps: vec![None; cfg.queues.len()],
        names: vec![String::new(); cfg.queues.len()],
        losses,
    };
    ctx.names[0] = "root".into();
    let mut children = Vec::new();
    for &c in &cfg.queues[0].children.clone() {
        children.push(ctx.queue(c)?);
    }
    let root_acl = cfg.root_acl.clone().unwrap_or_default();
    let root = Queue {
        name: "root".into(),
        parent: false,
        submitacl: Some(root_acl.submit.unwrap_or_else(|| "*".into())),
        adminacl: root_acl.administer,
        maxapplications: None,
        properties: BTreeMap::new(),
        resources: None,
        limits: ctx.limits(),
        queues: children,
    };
    let placementrules = ctx.placement();
    ctx.other_losses();
    let config = Config {
        partitions: vec![Partition {
            name: options.partition.clone(),
            preemption: Enabled { enabled: cfg.scheduler.preemption.enabled },
            placementrules,
            queues: vec![root],
        }],
    };
    let yaml = serde_saphyr::to_string(&config).map_err(|e| PlanError::Write {
        format: "yunikorn",
        what: "queues.yaml".into(),
        message: e.to_string(),
    })?;
    Ok(format!(
        "# The `queues.yaml` entry of the yunikorn-configs ConfigMap. guaranteed = weir's steady fair share of\n\
         # each queue, fitted inside its parent's.\n{yaml}"
    ))
}

struct Ctx<'a> {
    cfg: &'a ClusterConfig,
    guaranteed: Vec<Resources>,
    total: Resources,
    gpu: String,
    /// Effective maximum of each queue (its own, capped by its parent's).
    max: Vec<Resources>,
    /// Effective maxapplications of each queue.
    apps: Vec<Option<u32>>,
    /// The name written for each queue.
    names: Vec<String>,
    losses: &'a mut Vec<String>,
}

impl Ctx<'_> {
    fn queue(&mut self, ix: QueueIndex) -> Result<Queue, PlanError> {
        let cfg = self.cfg;
        let q = &cfg.queues[ix];
        let parent = q.parent.unwrap_or(0);
        let name = yunikorn_name(&q.name);
        if name != q.name {
            self.losses.push(format!(
                "{}: written as `{name}`: YuniKorn queue names are letters, digits and _:#/@- (at most 64)",
                q.path
            ));
        }
        // Sibling names are compared without case by YuniKorn.
        for &s in &cfg.queues[parent].children {
            if s != ix && !self.names[s].is_empty() && self.names[s].eq_ignore_ascii_case(&name) {
                return Err(PlanError::NameClash {
                    format: "yunikorn",
                    name,
                    first: cfg.queues[s].path.to_string(),
                    second: q.path.to_string(),
                });
            }
        }
        self.names[ix] = name.clone();
        let own_max = q.max.resolve(&self.total);
        self.max[ix] = own_max.component_min(&self.max[parent]);
        self.apps[ix] = match (q.max_running_apps, self.apps[parent]) {
            (Some(a), Some(p)) => Some(a.min(p)),
            (a, p) => a.or(p),
        };
        let mut properties = BTreeMap::new();
        if q.is_leaf() {
            let sort = if matches!(q.policy, Policy::Fifo | Policy::Priority) { "fifo" } else { "fair" };
            properties.insert("application.sort.policy", sort.to_string());
            if q.priority != 0 {
                properties.insert("priority.offset", q.priority.to_string());
            }
            if let Some(t) = q.fair_share_preemption_timeout.filter(|t| t.as_millis() > 0) {
                properties.insert("preemption.delay", go_duration(t.as_millis()));
            }
        }
        if !q.allow_preemption_from {
            properties.insert("preemption.policy", "disabled".to_string());
        }
        let g = self.guaranteed[ix];
        let m = self.max[ix];
        let guaranteed = self.resource_map(&g, |v| v > 0);
        // Written where the queue itself is limited; an unlimited queue inherits its parent's.
        let mut max = BTreeMap::new();
        if own_max.cpu != u64::MAX {
            max.insert("vcore".to_string(), vcore(m.cpu));
        }
        if own_max.memory != u64::MAX {
            max.insert("memory".to_string(), k8s_memory(m.memory));
        }
        if own_max.gpu != u64::MAX && self.total.gpu > 0 {
            max.insert(self.gpu.clone(), m.gpu.to_string());
        }
        let resources =
            (!guaranteed.is_empty() || !max.is_empty()).then_some(QueueResources { guaranteed, max });
        let acl = q.acl.clone().unwrap_or_default();
        let mut queues = Vec::new();
        for &c in &q.children {
            queues.push(self.queue(c)?);
        }
        Ok(Queue {
            name,
            parent: q.dynamic_parent,
            submitacl: acl.submit,
            adminacl: acl.administer,
            maxapplications: self.apps[ix],
            properties,
            resources,
            limits: Vec::new(),
            queues,
        })
    }

    fn resource_map(&self, r: &Resources, keep: impl Fn(u64) -> bool) -> BTreeMap<String, String> {
        let mut m = BTreeMap::new();
        if keep(r.cpu) {
            m.insert("vcore".to_string(), vcore(r.cpu));
        }
        if keep(r.memory) {
            m.insert("memory".to_string(), k8s_memory(r.memory));
        }
        if keep(r.gpu) {
            m.insert(self.gpu.clone(), r.gpu.to_string());
        }
        m
    }

    /// Per-user limits, named users first (YuniKorn refuses a named user after the wildcard).
    fn limits(&mut self) -> Vec<Limit> {
        let mut out = Vec::new();
        for (name, u) in &self.cfg.users {
            let Some(n) = u.max_running_apps else { continue };
            if !valid_user(name) {
                self.losses
                    .push(format!("users.{name}: not a user name YuniKorn accepts; its limit is left out"));
                continue;
            }
            out.push(Limit { limit: format!("user {name}"), users: vec![name.clone()], maxapplications: n });
        }
        if let Some(n) = self.cfg.scheduler.user_max_running_apps {
            out.push(Limit { limit: "every other user".into(), users: vec!["*".into()], maxapplications: n });
        }
        out
    }

    fn placement(&mut self) -> Vec<Rule> {
        let mut rules = Vec::new();
        for (i, r) in self.cfg.queue_placement.iter().enumerate() {
            if r.rule == PlacementRuleKind::Reject {
                // YuniKorn rejects an application no rule places: stopping here is the same.
                break;
            }
            match self.rule(r) {
                Some(rule) => rules.push(rule),
                None => self.losses.push(format!(
                    "queue_placement[{i}] ({}): YuniKorn has no equivalent rule (no group rules; a fixed queue must \
                     be an existing leaf, or a parent for nested user queues); left out",
                    r.rule.yarn_name()
                )),
            }
        }
        rules
    }

    fn rule(&self, r: &PlacementRuleSpec) -> Option<Rule> {
        let create = r.create.unwrap_or(true);
        match r.rule {
            PlacementRuleKind::Specified => {
                Some(Rule { name: "provided", create, parent: None, value: None })
            }
            PlacementRuleKind::User => Some(Rule { name: "user", create, parent: None, value: None }),
            PlacementRuleKind::Default => {
                let path = r.queue.clone().unwrap_or_else(|| "root.default".into());
                let value = self.mapped_path(&path, false)?;
                Some(Rule { name: "fixed", create: false, parent: None, value: Some(value) })
            }
            PlacementRuleKind::NestedUserQueue => {
                let p = r.parent.as_deref()?;
                let parent = match p.rule {
                    PlacementRuleKind::Default => {
                        let path = p.queue.clone().unwrap_or_else(|| "root.default".into());
                        Rule {
                            name: "fixed",
                            create: false,
                            parent: None,
                            value: Some(self.mapped_path(&path, true)?),
                        }
                    }
                    PlacementRuleKind::Specified => {
                        Rule { name: "provided", create: false, parent: None, value: None }
                    }
                    _ => return None,
                };
                Some(Rule { name: "user", create, parent: Some(Box::new(parent)), value: None })
            }
            _ => None,
        }
    }

    /// The written path of an existing queue: a leaf, or (when `parent`) a queue YuniKorn
    /// treats as a parent.
    fn mapped_path(&self, path: &str, parent: bool) -> Option<String> {
        let ix = self.cfg.find(&weir_model::QueuePath::parse(path)?)?;
        let q = &self.cfg.queues[ix];
        let fits = if parent { !q.is_leaf() || q.dynamic_parent } else { q.is_leaf() && !q.dynamic_parent };
        if !fits {
            return None;
        }
        let mut parts = Vec::new();
        let mut at = Some(ix);
        while let Some(i) = at {
            parts.push(self.names[i].clone());
            at = self.cfg.queues[i].parent;
        }
        parts.reverse();
        Some(parts.join("."))
    }

    fn other_losses(&mut self) {
        let cfg = self.cfg;
        if cfg.queues.iter().any(|q| q.weight != 1.0) {
            self.losses.push(
                "weights: YuniKorn shares by guaranteed resources; the weights are folded into `guaranteed`"
                    .into(),
            );
        }
        if cfg.queues.iter().any(|q| q.max_am_share.is_some()) {
            self.losses.push("max_am_share: YuniKorn has no per-queue application-master limit".into());
        }
        if cfg
            .queues
            .iter()
            .any(|q| q.fair_share_preemption_threshold != 0.5 || q.min_share_preemption_timeout.is_some())
        {
            self.losses.push(
                "fair-share preemption thresholds and min-share timeouts: YuniKorn preempts to guaranteed resources \
                 after preemption.delay only"
                    .into(),
            );
        }
        if cfg.scheduler.preemption.enabled {
            self.losses.push(format!(
                "preemption utilization threshold {} and kill wait: no YuniKorn equivalent",
                num(cfg.scheduler.preemption.utilization_threshold)
            ));
        }
        if cfg.queues.iter().any(|q| q.policy == Policy::Drf) {
            self.losses.push("policy drf: YuniKorn's fair queue sorting is its own; written as fair".into());
        }
        for q in cfg.queues.iter().filter(|q| q.reservable) {
            self.losses.push(format!("{}: reservable: YuniKorn has no reservation system", q.path));
        }
        if !cfg.placement.is_empty() {
            self.losses.push(format!(
                "placement ({} rules): weir places workflows by project and tier",
                cfg.placement.len()
            ));
        }
        if cfg.scheduler.promotion == weir_model::Promotion::Priority {
            self.losses.push(
                "promotion priority: YuniKorn starts waiting applications by its own sort policy".into(),
            );
        }
    }
}

fn vcore(millicores: u64) -> String {
    super::k8s_cpu(millicores)
}

/// A Go `time.ParseDuration` string: Go has no day unit, so the largest unit is hours.
fn go_duration(ms: u64) -> String {
    if ms.is_multiple_of(3_600_000) && ms > 0 {
        format!("{}h", ms / 3_600_000)
    } else if ms.is_multiple_of(60_000) && ms > 0 {
        format!("{}m", ms / 60_000)
    } else if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}
