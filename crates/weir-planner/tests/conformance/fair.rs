//! The YARN Fair Scheduler's rules for an allocation file, as its parser enforces them
//! (Hadoop trunk, `scheduler/fair/allocation/AllocationFileParser` and
//! `AllocationFileQueueParser`, `FairSchedulerConfiguration.parseResourceConfigValue`,
//! `FairSharePolicy`/`FifoPolicy.isChildPolicyAllowed`). Each violation is a sentence; an empty
//! list means YARN loads the file and creates every queue.

use super::xml::{parse, El};

/// AllocationFileParser.VALID_TAG_NAMES.
const TOP: &[&str] = &[
    "queueMaxResourcesDefault",
    "userMaxAppsDefault",
    "defaultFairSharePreemptionTimeout",
    "fairSharePreemptionTimeout",
    "defaultMinSharePreemptionTimeout",
    "queueMaxAppsDefault",
    "defaultFairSharePreemptionThreshold",
    "queueMaxAMShareDefault",
    "reservation-planner",
    "reservation-agent",
    "reservation-policy",
    "queuePlacementPolicy",
    "queue",
    "pool",
    "user",
    "defaultQueueSchedulingPolicy",
    "defaultQueueSchedulingMode",
];

/// The elements AllocationFileQueueParser.loadQueue reads.
const QUEUE: &[&str] = &[
    "minResources",
    "maxResources",
    "maxChildResources",
    "maxContainerAllocation",
    "maxRunningApps",
    "maxAMShare",
    "weight",
    "minSharePreemptionTimeout",
    "fairSharePreemptionTimeout",
    "fairSharePreemptionThreshold",
    "schedulingPolicy",
    "schedulingMode",
    "aclSubmitApps",
    "aclAdministerApps",
    "aclAdministerReservations",
    "aclListReservations",
    "aclSubmitReservations",
    "reservation",
    "allowPreemptionFrom",
    "queue",
    "pool",
];

const RULES: &[&str] = &[
    "specified",
    "user",
    "primaryGroup",
    "secondaryGroupExistingQueue",
    "nestedUserQueue",
    "default",
    "reject",
];

/// `declared`: resource types besides memory-mb and vcores the cluster declares
/// (resource-types.xml); any other name makes YARN refuse the file.
pub fn check(text: &str, declared: &[&str]) -> Vec<String> {
    let mut v = Vec::new();
    let root = match parse(text) {
        Ok(r) => r,
        Err(e) => return vec![format!("not well-formed XML: {e}")],
    };
    if root.name != "allocations" {
        v.push(format!("the document element is <{}>, not <allocations>", root.name));
    }
    let mut default_policy = "fair".to_string();
    for e in &root.children {
        if !TOP.contains(&e.name.as_str()) {
            v.push(format!("<{}> is not an allocation-file element", e.name));
        }
        match e.name.as_str() {
            "defaultQueueSchedulingPolicy" | "defaultQueueSchedulingMode" => {
                default_policy = e.text.trim().to_ascii_lowercase();
                if default_policy == "fifo" {
                    v.push("defaultQueueSchedulingPolicy fifo is refused".into());
                }
            }
            "queueMaxResourcesDefault" => {
                resource(&e.text, false, declared, "queueMaxResourcesDefault", &mut v)
            }
            "userMaxAppsDefault" | "queueMaxAppsDefault" => int(&e.text, &e.name, &mut v),
            "queuePlacementPolicy" => {
                for r in &e.children {
                    if !RULES.contains(&r.attr("name").unwrap_or("")) {
                        v.push(format!("placement rule `{}` is not known", r.attr("name").unwrap_or("")));
                    }
                }
            }
            _ => {}
        }
    }
    let queues: Vec<&El> = root.children.iter().filter(|c| c.name == "queue" || c.name == "pool").collect();
    let has_root =
        queues.iter().any(|q| q.attr("name").is_some_and(|n| n.trim().eq_ignore_ascii_case("root")));
    if has_root && queues.len() > 1 {
        v.push("a root queue element must be the only top-level queue".into());
    }
    for q in queues {
        let is_root = q.attr("name").is_some_and(|n| n.trim().eq_ignore_ascii_case("root"));
        let (path, parent_policy) =
            if is_root { (String::new(), None) } else { ("root".to_string(), Some("fair".to_string())) };
        queue(q, &path, parent_policy.as_deref(), &default_policy, declared, &mut v);
    }
    v
}

fn queue(
    q: &El,
    parent: &str,
    parent_policy: Option<&str>,
    default: &str,
    declared: &[&str],
    v: &mut Vec<String>,
) {
    let name = q.attr("name").unwrap_or("").trim();
    if name.is_empty() || name.contains('.') {
        v.push(format!("{parent}: queue name `{name}` is empty or has a period"));
    }
    let path = if parent.is_empty() { name.to_string() } else { format!("{parent}.{name}") };
    let kids: Vec<&El> = q.children.iter().filter(|c| c.name == "queue" || c.name == "pool").collect();
    let is_parent = !kids.is_empty() || q.attr("type") == Some("parent");
    let policy = q
        .child("schedulingPolicy")
        .or(q.child("schedulingMode"))
        .map(|p| p.text.trim().to_ascii_lowercase())
        .unwrap_or_else(|| default.to_string());
    if !["fair", "drf", "fifo"].contains(&policy.as_str()) {
        v.push(format!("{path}: schedulingPolicy `{policy}` is not fair, drf or fifo"));
    }
    match parent_policy {
        Some("fair") if policy == "drf" => v.push(format!(
            "{path}: drf under a fair parent: YARN does not create this queue or its subtree (FairSharePolicy.isChildPolicyAllowed)"
        )),
        Some("fifo") => v.push(format!("{path}: a fifo parent allows no children (FifoPolicy.isChildPolicyAllowed)")),
        _ => {}
    }
    for c in &q.children {
        if !QUEUE.contains(&c.name.as_str()) {
            v.push(format!("{path}: <{}> is not a queue element", c.name));
        }
        let at = format!("{path}.{}", c.name);
        match c.name.as_str() {
            "minResources" => resource(&c.text, true, declared, &at, v),
            "maxResources" | "maxChildResources" | "maxContainerAllocation" => {
                resource(&c.text, false, declared, &at, v)
            }
            "maxRunningApps" | "minSharePreemptionTimeout" | "fairSharePreemptionTimeout" => {
                int(&c.text, &at, v)
            }
            "weight" | "fairSharePreemptionThreshold" | "maxAMShare" => float(&c.text, &at, v),
            "allowPreemptionFrom" if !["true", "false"].contains(&c.text.trim()) => {
                v.push(format!("{at}: not true or false"))
            }
            _ => {}
        }
        if is_parent && (c.name == "maxAMShare" || c.name == "reservation") {
            v.push(format!("{path}: <{}> on a parent queue: YARN refuses the file", c.name));
        }
    }
    for k in kids {
        queue(k, &path, Some(&policy), default, declared, v);
    }
}

fn int(text: &str, at: &str, v: &mut Vec<String>) {
    if text.trim().parse::<i64>().is_err() {
        v.push(format!("{at}: `{}` is not an integer", text.trim()));
    }
}

fn float(text: &str, at: &str, v: &mut Vec<String>) {
    if text.trim().trim_end_matches(['f', 'F']).parse::<f64>().is_err() {
        v.push(format!("{at}: `{}` is not a number", text.trim()));
    }
}

/// parseResourceConfigValue: new style `name=value` (every value a whole number, or every value a
/// percentage), old style percentages, or old style needing both `N mb` and `N vcores`.
/// minResources as a percentage is read as no minimum (`ConfigurableResource.getResource()` is
/// null for percentages).
fn resource(text: &str, is_min: bool, declared: &[&str], at: &str, v: &mut Vec<String>) {
    let t = text.trim().to_ascii_lowercase();
    if t.is_empty() {
        v.push(format!("{at}: empty"));
        return;
    }
    if t.contains('%') && is_min {
        v.push(format!("{at}: `{t}` is a percentage, which YARN reads as no minimum"));
    }
    if t.contains('=') {
        let parts: Vec<(&str, &str)> =
            t.split(',').filter_map(|p| p.split_once('=')).map(|(a, b)| (a.trim(), b.trim())).collect();
        if parts.len() != t.split(',').count() {
            v.push(format!("{at}: `{t}`: every resource must be name=value"));
        }
        let pct = t.contains('%');
        for (name, value) in parts {
            if !["memory-mb", "vcores"].contains(&name) && !declared.contains(&name) {
                v.push(format!("{at}: resource `{name}` is not declared: YARN refuses the whole file"));
            }
            let ok = if pct {
                value.strip_suffix('%').is_some_and(|n| n.trim().parse::<f64>().is_ok_and(|x| x >= 0.0))
            } else {
                value.parse::<u64>().is_ok()
            };
            if !ok {
                v.push(format!(
                    "{at}: `{value}` is not {}",
                    if pct { "a percentage" } else { "a whole number" }
                ));
            }
        }
    } else if t.contains('%') {
        let pieces: Vec<&str> = t.split(',').collect();
        if pieces.len() > 1 && !(t.contains("memory") && t.contains("cpu")) {
            v.push(format!("{at}: `{t}`: a list of percentages needs both memory and cpu"));
        }
    } else {
        let has = |unit: &str| {
            t.split(',').any(|p| {
                let p = p.trim();
                p.ends_with(unit) && p.trim_end_matches(unit).trim().parse::<f64>().is_ok()
            })
        };
        if !has("mb") || !has("vcores") {
            v.push(format!("{at}: `{t}`: the old style needs both `N mb` and `N vcores`"));
        }
    }
}
