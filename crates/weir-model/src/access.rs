//! Who may use a queue and how applications that name no workflow project are placed: queue
//! ACLs, per-user running-app limits, and the application placement policy of YARN's Fair
//! Scheduler (`queuePlacementPolicy`).
//!
//! weir carries these through import and export so that a layout brought from YARN keeps its
//! access rules on the way to YARN, YuniKorn or Kueue. The engine does not look at ACLs; `weir
//! serve` enforces them for submissions, by user (and refuses ACLs that name groups, which it
//! cannot resolve). The placement policy is carried, not applied (workflows are placed by
//! project and tier, see `placement.rs`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::Problem;

/// A queue's access control lists in YARN's syntax: users, a space, groups
/// (`"alice,bob admins,etl"`, `" admins"` for groups only); `"*"` is everyone and `" "`
/// nobody. In YARN a user allowed on a queue is allowed on every queue below it, and the root's
/// lists default to everyone.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AclSpec {
    /// Who may submit applications (YARN `aclSubmitApps`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submit: Option<String>,
    /// Who may administer the queue, i.e. kill its applications (YARN `aclAdministerApps`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub administer: Option<String>,
}

/// Limits for one user (YARN's `<user>` element).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct UserSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_running_apps: Option<u32>,
}

/// The kinds of YARN Fair Scheduler placement rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PlacementRuleKind {
    /// The queue the application asked for.
    Specified,
    /// A queue named after the user.
    User,
    /// A queue named after the user's primary group.
    PrimaryGroup,
    /// The first queue named after one of the user's secondary groups that exists.
    SecondaryGroupExistingQueue,
    /// A user queue under the queue its `parent` rule gives.
    NestedUserQueue,
    /// A fixed queue (`queue`, default `root.default`).
    Default,
    /// Reject the application.
    Reject,
}

impl PlacementRuleKind {
    /// The rule's name in a YARN allocation file.
    pub fn yarn_name(self) -> &'static str {
        match self {
            PlacementRuleKind::Specified => "specified",
            PlacementRuleKind::User => "user",
            PlacementRuleKind::PrimaryGroup => "primaryGroup",
            PlacementRuleKind::SecondaryGroupExistingQueue => "secondaryGroupExistingQueue",
            PlacementRuleKind::NestedUserQueue => "nestedUserQueue",
            PlacementRuleKind::Default => "default",
            PlacementRuleKind::Reject => "reject",
        }
    }

    /// The kind named `name` in a YARN allocation file.
    pub fn from_yarn(name: &str) -> Option<PlacementRuleKind> {
        [
            PlacementRuleKind::Specified,
            PlacementRuleKind::User,
            PlacementRuleKind::PrimaryGroup,
            PlacementRuleKind::SecondaryGroupExistingQueue,
            PlacementRuleKind::NestedUserQueue,
            PlacementRuleKind::Default,
            PlacementRuleKind::Reject,
        ]
        .into_iter()
        .find(|k| k.yarn_name() == name)
    }
}

/// One rule of the application placement policy; rules are tried in order.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PlacementRuleSpec {
    pub rule: PlacementRuleKind,
    /// Whether the rule may create a queue that does not exist (YARN's default: true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create: Option<bool>,
    /// `default` only: the queue (a path such as `root.default`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// `nested_user_queue` only: the rule that gives the parent queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<Box<PlacementRuleSpec>>,
}

/// Problems with an ACL string at `path`.
pub(crate) fn check_acl(path: &str, acl: &AclSpec, problems: &mut Vec<Problem>) {
    for (field, value) in [("submit", &acl.submit), ("administer", &acl.administer)] {
        if let Some(v) = value {
            if v.contains(['\n', '\r', '\t']) {
                problems.push(Problem {
                    path: format!("{path}.{field}"),
                    message: format!(
                        "`{}` is not an ACL: write users, a space, groups (\"alice,bob admins\"), \"*\" for everyone or \" \" for nobody",
                        v.escape_debug()
                    ),
                });
            }
        }
    }
}

/// Problems with the `users:` table.
pub(crate) fn check_users(users: &BTreeMap<String, UserSpec>, problems: &mut Vec<Problem>) {
    for (name, u) in users {
        if name.trim().is_empty() || name.contains(char::is_whitespace) {
            problems.push(Problem {
                path: format!("users.{name}"),
                message: "a user name is one word without spaces".to_string(),
            });
        }
        if u.max_running_apps == Some(0) {
            problems.push(Problem {
                path: format!("users.{name}.max_running_apps"),
                message: "must be at least 1 (leave it out for no limit)".to_string(),
            });
        }
    }
}

/// Problems with the placement policy: arguments only where their rule takes them.
pub(crate) fn check_placement_rules(rules: &[PlacementRuleSpec], problems: &mut Vec<Problem>) {
    for (i, r) in rules.iter().enumerate() {
        check_rule(&format!("queue_placement[{i}]"), r, 0, problems);
    }
    if let Some(last) = rules.last() {
        let ends = matches!(last.rule, PlacementRuleKind::Default | PlacementRuleKind::Reject)
            || (last.rule == PlacementRuleKind::User && last.create != Some(false));
        if !ends {
            problems.push(Problem {
                path: format!("queue_placement[{}]", rules.len() - 1),
                message: "the last rule must always place or reject (default, reject, or user that may create its queue), as YARN requires".to_string(),
            });
        }
    }
}

fn check_rule(path: &str, r: &PlacementRuleSpec, depth: usize, problems: &mut Vec<Problem>) {
    let problem = |path: String, message: &str| Problem { path, message: message.to_string() };
    if r.queue.is_some() && r.rule != PlacementRuleKind::Default {
        problems.push(problem(format!("{path}.queue"), "only a `default` rule names a queue"));
    }
    match (&r.parent, r.rule) {
        (None, PlacementRuleKind::NestedUserQueue) => problems.push(problem(
            format!("{path}.parent"),
            "a nested_user_queue rule needs the `parent` rule that gives its parent queue",
        )),
        (Some(_), k) if k != PlacementRuleKind::NestedUserQueue => problems
            .push(problem(format!("{path}.parent"), "only a nested_user_queue rule has a `parent` rule")),
        (Some(_), _) if depth >= 1 => {
            problems.push(problem(format!("{path}.parent"), "nested_user_queue rules do not nest"))
        }
        (Some(p), _) => check_rule(&format!("{path}.parent"), p, depth + 1, problems),
        _ => {}
    }
}
