//! Checking a plan against the live cluster before it is applied, and what it changes.
//!
//! A plan (`weir plan`'s `cluster.yaml`, or a proposal of the scheduled planner) may change
//! queue settings and the routes to the cluster. It is refused — and nothing changes — when:
//! - the file does not validate, or the engine refuses it;
//! - it names a queue the cluster does not have, or leaves one out (a plan changes settings,
//!   not the tree; reload the tree with `PUT /v1/clusters/{name}/config`);
//! - it changes the nodes (a plan does not resize a cluster; its verdict says whether to);
//! - its capacities do not fit: a queue's `min` above its `max` (YARN's
//!   `AllocationFileLoaderService` only warns and `FSQueue.getMaxShare` lifts the max to the
//!   min; weir refuses), or above the cluster, or children's `min`s adding up to more than
//!   their parent's (YuniKorn's config validator refuses children whose guarantees exceed the
//!   parent's);
//! - a route's key is malformed, names another cluster, or a queue that is not a leaf.

use std::collections::BTreeMap;

use weir_api::{PlanDiff, Route, RouteChange, SettingChange};
use weir_model::{ClusterConfig, QueueConfig, Resources};
use weir_store::RouteRow;

/// A plan that passed every check, ready to store.
pub struct CheckedPlan {
    pub config: ClusterConfig,
    /// The routes to the cluster after the plan, or `None` to leave them.
    pub routes: Option<Vec<RouteRow>>,
    pub diff: PlanDiff,
}

/// One reason a plan is refused: the path it concerns and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub path: String,
    pub message: String,
}

fn refuse(path: impl Into<String>, message: impl Into<String>) -> Refusal {
    Refusal { path: path.into(), message: message.into() }
}

/// Whether a route key is `workflow:NAME` or `project:PROJECT:TIER`.
pub fn route_key_ok(key: &str) -> bool {
    key.strip_prefix("workflow:").is_some_and(|w| !w.is_empty())
        || key
            .strip_prefix("project:")
            .and_then(|r| r.rsplit_once(':'))
            .is_some_and(|(p, t)| !p.is_empty() && matches!(t, "1" | "2" | "3"))
}

/// Check `text` (a cluster file) and `routes` as a plan for `cluster`, whose configuration is
/// `current` at `version` with `current_routes` (every route of the server).
pub fn check(
    cluster: &str,
    current: &ClusterConfig,
    version: i64,
    text: &str,
    routes: Option<&[Route]>,
    current_routes: &[RouteRow],
) -> Result<CheckedPlan, Vec<Refusal>> {
    let planned = ClusterConfig::from_yaml("config", text)
        .map_err(|e| e.problems().into_iter().map(|p| refuse(p.path, p.message)).collect::<Vec<_>>())?;
    if let Err(e) = weir_engine::Engine::new(planned.clone()) {
        return Err(vec![refuse("config", format!("the scheduler refuses it: {e}"))]);
    }
    let mut problems = Vec::new();
    let now: BTreeMap<String, &QueueConfig> =
        current.queues.iter().map(|q| (q.path.to_string(), q)).collect();
    let next: BTreeMap<String, &QueueConfig> =
        planned.queues.iter().map(|q| (q.path.to_string(), q)).collect();
    for path in next.keys().filter(|p| !now.contains_key(*p)) {
        problems.push(refuse(
            format!("config.queues.{path}"),
            format!("unknown queue: cluster `{cluster}` has no queue {path} (a plan changes queue settings, not the tree)"),
        ));
    }
    for path in now.keys().filter(|p| !next.contains_key(*p)) {
        problems.push(refuse(
            format!("config.queues.{path}"),
            format!("the plan leaves out queue {path} of cluster `{cluster}` (a plan changes queue settings, not the tree)"),
        ));
    }
    for (path, q) in &next {
        if let Some(c) = now.get(path) {
            if c.is_leaf() != q.is_leaf() {
                problems.push(refuse(
                    format!("config.queues.{path}"),
                    format!("{path} is a leaf on one side only"),
                ));
            }
        }
    }
    if planned.nodes != current.nodes {
        problems.push(refuse(
            "config.nodes",
            format!(
                "the plan's nodes ({} nodes, {}) are not the cluster's ({} nodes, {}): a plan does not resize a cluster",
                planned.node_count(),
                planned.total_resources(),
                current.node_count(),
                current.total_resources()
            ),
        ));
    }
    problems.extend(capacities(&planned));
    let new_routes = match routes {
        Some(list) => {
            let mut rows = Vec::new();
            for (i, r) in list.iter().enumerate() {
                let at = format!("routes.{i}");
                if !route_key_ok(&r.key) {
                    problems.push(refuse(
                        format!("{at}.key"),
                        format!(
                            "`{}` is not a route key: write workflow:NAME or project:PROJECT:TIER",
                            r.key
                        ),
                    ));
                }
                if r.cluster != cluster {
                    problems.push(refuse(
                        format!("{at}.cluster"),
                        format!(
                            "route {} names cluster `{}`; a plan for `{cluster}` routes only to it",
                            r.key, r.cluster
                        ),
                    ));
                }
                let leaf = weir_model::QueuePath::parse(&r.queue)
                    .and_then(|q| planned.find(&q))
                    .is_some_and(|i| planned.queues[i].is_leaf());
                if !leaf {
                    problems.push(refuse(
                        format!("{at}.queue"),
                        format!(
                            "unknown queue: route {} names {}, which is not a leaf of cluster `{cluster}`",
                            r.key, r.queue
                        ),
                    ));
                }
                rows.push(RouteRow {
                    key: r.key.clone(),
                    cluster: r.cluster.clone(),
                    queue: r.queue.clone(),
                });
            }
            Some(rows)
        }
        None => None,
    };
    if !problems.is_empty() {
        return Err(problems);
    }
    let diff = PlanDiff {
        cluster: cluster.to_string(),
        base_version: version,
        version: None,
        applied: false,
        queues: setting_changes(current, &planned),
        routes: new_routes.as_deref().map(|r| route_changes(cluster, current_routes, r)).unwrap_or_default(),
        history_ms: None,
        warnings: Vec::new(),
    };
    Ok(CheckedPlan { config: planned, routes: new_routes, diff })
}

/// `planned` with the comments of `original` (the file in force) carried over where they can
/// be: a plan written by `weir plan` has none, and an operator's notes in the cluster file
/// should survive applying it. Each comment line (and blank line) of `original` goes before
/// the planned line with the same key — a queue's `name: X`, or a setting's key — matched in
/// order; a comment at the end of a line goes to the end of the matching line. Comments with
/// no matching line are dropped; `planned`'s own opening comment (`weir plan`'s "written by
/// weir" line) gives way to the original's. The result must read as the same configuration as
/// `planned`, else `planned` is kept as it is; so is a `planned` with comments in its body.
pub fn keep_comments(original: &str, planned: &str) -> String {
    let is_comment = |l: &str| l.trim_start().starts_with('#');
    let block_scalar =
        |t: &str| t.lines().any(|l| l.trim_end().ends_with('|') || l.trim_end().ends_with('>'));
    let lines: Vec<&str> = planned.lines().skip_while(|l| l.trim().is_empty() || is_comment(l)).collect();
    if lines.iter().any(|l| is_comment(l))
        || !original.lines().any(is_comment)
        || block_scalar(planned)
        || block_scalar(original)
    {
        return planned.to_string();
    }
    let mut before: Vec<Vec<String>> = vec![Vec::new(); lines.len() + 1];
    let mut trailing: Vec<Option<String>> = vec![None; lines.len()];
    let mut pending: Vec<String> = Vec::new();
    let mut cursor = 0;
    let mut seen_key = false;
    for line in original.lines() {
        let t = line.trim();
        if t.starts_with('#') {
            pending.push(line.trim_end().to_string());
            continue;
        }
        if t.is_empty() {
            pending.push(String::new());
            continue;
        }
        let key = comment_anchor(line);
        match (cursor..lines.len()).find(|&i| comment_anchor(lines[i]) == key) {
            Some(i) => {
                before[i].append(&mut pending);
                if let (Some(c), None) = (trailing_comment(line), trailing_comment(lines[i])) {
                    if !lines[i].contains(['"', '\'', '#']) {
                        trailing[i] = Some(c);
                    }
                }
                cursor = i + 1;
            }
            // The file's opening comments stay at the top.
            None if !seen_key => before[0].append(&mut pending),
            None => pending.clear(),
        }
        seen_key = true;
    }
    let end = lines.len();
    before[end].append(&mut pending);
    let mut out = String::new();
    for (i, l) in lines.iter().enumerate() {
        for c in &before[i] {
            out.push_str(c);
            out.push('\n');
        }
        out.push_str(l);
        if let Some(c) = &trailing[i] {
            out.push_str("  ");
            out.push_str(c);
        }
        out.push('\n');
    }
    for c in before[end].iter().skip_while(|c| c.is_empty()) {
        out.push_str(c);
        out.push('\n');
    }
    let same = match (ClusterConfig::from_yaml("config", &out), ClusterConfig::from_yaml("config", planned)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if same {
        out
    } else {
        planned.to_string()
    }
}

/// What a line of a cluster file is about: `name=X` for a queue (block or flow style), else
/// its key.
fn comment_anchor(line: &str) -> String {
    let t = line.trim().trim_start_matches("- ").trim_start_matches('{').trim();
    if let Some(rest) = t.strip_prefix("name:") {
        let v = rest.split([',', '}', '#']).next().unwrap_or("").trim().trim_matches(['"', '\'']);
        return format!("name={v}");
    }
    t.split(':').next().unwrap_or("").trim().to_string()
}

/// ` # note` at the end of a line without quotes.
fn trailing_comment(line: &str) -> Option<String> {
    if line.trim_start().starts_with('#') || line.contains(['"', '\'']) {
        return None;
    }
    line.find(" #").map(|i| line[i..].trim().to_string())
}

/// Capacities that cannot hold: a min above the cluster, children's mins above the parent's.
fn capacities(c: &ClusterConfig) -> Vec<Refusal> {
    let total = c.total_resources();
    let fits = |a: &Resources, b: &Resources| a.cpu <= b.cpu && a.memory <= b.memory && a.gpu <= b.gpu;
    let mut out = Vec::new();
    for q in &c.queues {
        // A min above its own max never reaches here: the file's validation refuses it.
        let min = q.min.resolve(&total);
        let path = q.path.to_string();
        if !fits(&min, &total) {
            out.push(refuse(
                format!("config.queues.{path}.min"),
                format!("capacities do not fit: {path}'s min {min} is more than the cluster's {total}"),
            ));
        }
        if !q.children.is_empty() {
            let sum =
                q.children.iter().fold(Resources::ZERO, |acc, &i| acc + c.queues[i].min.resolve(&total));
            let bound = if q.parent.is_none() || min == Resources::ZERO { total } else { min };
            if !fits(&sum, &bound) {
                out.push(refuse(
                    format!("config.queues.{path}.children"),
                    format!(
                        "capacities do not fit: the mins of {path}'s children add up to {sum}, more than {} {bound}",
                        if bound == total { "the cluster's" } else { "its own min" }
                    ),
                ));
            }
        }
    }
    out
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_string(), |v| v.to_string())
}

/// Field-by-field differences of every queue present in both, in tree order, then the
/// cluster-wide sections.
pub fn setting_changes(current: &ClusterConfig, planned: &ClusterConfig) -> Vec<SettingChange> {
    let (ta, tb) = (current.total_resources(), planned.total_resources());
    let mut out = Vec::new();
    for q in &planned.queues {
        let Some(c) = current.find(&q.path).map(|i| &current.queues[i]) else { continue };
        let fields: [(&str, String, String); 12] = [
            ("weight", format!("{}", c.weight), format!("{}", q.weight)),
            ("min", c.min.resolve(&ta).to_string(), q.min.resolve(&tb).to_string()),
            ("max", c.max.resolve(&ta).to_string(), q.max.resolve(&tb).to_string()),
            ("max_running_apps", opt(c.max_running_apps), opt(q.max_running_apps)),
            ("max_am_share", opt(c.am_share), opt(q.am_share)),
            ("policy", format!("{:?}", c.policy), format!("{:?}", q.policy)),
            ("tier", opt(c.tier), opt(q.tier)),
            ("priority", c.priority.to_string(), q.priority.to_string()),
            (
                "allow_preemption_from",
                c.allow_preemption_from.to_string(),
                q.allow_preemption_from.to_string(),
            ),
            (
                "fair_share_preemption_timeout",
                opt(c.fair_share_preemption_timeout.map(|d| d.human())),
                opt(q.fair_share_preemption_timeout.map(|d| d.human())),
            ),
            (
                "fair_share_preemption_threshold",
                c.fair_share_preemption_threshold.to_string(),
                q.fair_share_preemption_threshold.to_string(),
            ),
            (
                "min_share_preemption_timeout",
                opt(c.min_share_preemption_timeout.map(|d| d.human())),
                opt(q.min_share_preemption_timeout.map(|d| d.human())),
            ),
        ];
        for (field, from, to) in fields {
            if from != to {
                out.push(SettingChange { queue: q.path.to_string(), field: field.to_string(), from, to });
            }
        }
    }
    for (section, a, b) in [
        ("scheduler", format!("{:?}", current.scheduler), format!("{:?}", planned.scheduler)),
        ("tiers", format!("{:?}", current.tiers), format!("{:?}", planned.tiers)),
        ("placement", format!("{:?}", current.placement), format!("{:?}", planned.placement)),
    ] {
        if a != b {
            out.push(SettingChange {
                queue: section.into(),
                field: "(section)".into(),
                from: "as it is".into(),
                to: "changed".into(),
            });
        }
    }
    out
}

/// How the routes to `cluster` change when they become exactly `next`.
pub fn route_changes(cluster: &str, current: &[RouteRow], next: &[RouteRow]) -> Vec<RouteChange> {
    let target = |r: &RouteRow| format!("{}:{}", r.cluster, r.queue);
    let before: BTreeMap<&str, &RouteRow> = current.iter().map(|r| (r.key.as_str(), r)).collect();
    let after: BTreeMap<&str, &RouteRow> = next.iter().map(|r| (r.key.as_str(), r)).collect();
    let mut out = Vec::new();
    for (key, r) in &after {
        let from = before.get(key).map(|b| target(b));
        let to = Some(target(r));
        if from != to {
            out.push(RouteChange { key: key.to_string(), from, to });
        }
    }
    for (key, r) in &before {
        if r.cluster == cluster && !after.contains_key(key) {
            out.push(RouteChange { key: key.to_string(), from: Some(target(r)), to: None });
        }
    }
    out.sort_by(|a, b| a.key.cmp(&b.key));
    out
}

#[cfg(test)]
#[path = "plans_tests.rs"]
mod tests;
