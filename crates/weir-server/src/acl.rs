//! YARN-style queue ACLs (`acl: {submit, administer}` in the cluster file), enforced by the
//! service for submissions, by user: the submission's scheduler user (the token's user, or one
//! it may act as) must be allowed to submit to the leaf.
//!
//! The rule is the Fair Scheduler's (`AllocationConfiguration#hasAccess`, used by
//! `FairScheduler#addApplication` through `FSQueue#hasAccess`): a user may submit to a queue if
//! the queue's submit or administer list names it, or that of any queue above it; a list that
//! is not set allows nobody, except the root's, which allows everyone — so ACLs restrict only
//! once the root's are narrowed (`acl: {submit: " "}` on the root). `*` is everyone, `" "`
//! nobody.
//!
//! Groups (the part after the space, `"alice admins"`) are not known to weir — a token carries
//! a user, not a directory's groups — so a cluster file whose ACLs name groups is refused by
//! `weir serve` with the path of each (it would otherwise be parsed and silently ignored).
//! Token grants (`project:role`) stay the first check: an ACL narrows, never widens.

use weir_model::{AclSpec, ClusterConfig};

/// One ACL string, YARN's syntax: `users groups`, `*` or ` `.
struct Acl<'a> {
    everyone: bool,
    users: Vec<&'a str>,
    groups: Vec<&'a str>,
}

fn parse(text: &str) -> Acl<'_> {
    if text.trim() == "*" {
        return Acl { everyone: true, users: Vec::new(), groups: Vec::new() };
    }
    let (users, groups) = text.split_once(' ').unwrap_or((text, ""));
    Acl {
        everyone: false,
        users: users.split(',').map(str::trim).filter(|x| !x.is_empty()).collect(),
        groups: groups.split(',').map(str::trim).filter(|x| !x.is_empty()).collect(),
    }
}

fn allows(acl: &str, user: &str) -> bool {
    let a = parse(acl);
    a.everyone || a.users.contains(&user)
}

/// The ACL problems `weir serve` cannot enforce: lists that name groups. Each is
/// `(path in the cluster file, message)`.
pub fn unenforceable(config: &ClusterConfig) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut check = |path: String, acl: &AclSpec| {
        for (field, value) in [("submit", &acl.submit), ("administer", &acl.administer)] {
            let Some(v) = value else { continue };
            let groups = parse(v).groups;
            if !groups.is_empty() {
                out.push((
                    format!("{path}.acl.{field}"),
                    format!(
                        "names groups ({}); weir serve enforces queue ACLs by user (a token's user) and knows \
                         no groups: list the users, or give the group's members tokens with a grant on the project",
                        groups.join(", ")
                    ),
                ));
            }
        }
    };
    if let Some(acl) = &config.root_acl {
        check("root_acl".to_string(), acl);
    }
    for q in &config.queues {
        if let Some(acl) = &q.acl {
            let path = q.path.to_string();
            check(format!("queues.{}", path.trim_start_matches("root.").replace('.', ".children.")), acl);
        }
    }
    out
}

/// Whether `user` may submit to the queue at `index` (YARN's hierarchical check).
pub fn may_submit(config: &ClusterConfig, index: usize, user: &str) -> bool {
    let mut at = Some(index);
    while let Some(i) = at {
        let (submit, administer) = if i == 0 {
            // The root's lists default to everyone.
            let acl = config.root_acl.as_ref();
            (
                acl.and_then(|a| a.submit.as_deref()).unwrap_or("*"),
                acl.and_then(|a| a.administer.as_deref()).unwrap_or("*"),
            )
        } else {
            // Any other queue's default to nobody.
            let acl = config.queues[i].acl.as_ref();
            (
                acl.and_then(|a| a.submit.as_deref()).unwrap_or(" "),
                acl.and_then(|a| a.administer.as_deref()).unwrap_or(" "),
            )
        };
        if allows(submit, user) || allows(administer, user) {
            return true;
        }
        at = config.queues[i].parent;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(acls: &str) -> ClusterConfig {
        let text =
            format!("version: 1\nnodes: [{{count: 1, resources: {{cpu: 1000, memory: 1024}}}}]\n{acls}");
        ClusterConfig::from_yaml("c", &text).expect("cluster")
    }

    fn leaf(c: &ClusterConfig, path: &str) -> usize {
        weir_model::QueuePath::parse(path).and_then(|p| c.find(&p)).expect("leaf")
    }

    #[test]
    fn without_acls_everyone_may_submit_as_in_yarn() {
        let c = cluster("queues:\n  - {name: ads}\n");
        assert!(may_submit(&c, leaf(&c, "root.ads"), "anyone"));
    }

    #[test]
    fn a_queue_acl_restricts_only_once_the_roots_is_narrowed() {
        // YARN: root's lists default to `*`, and access is inherited downwards.
        let open_root = cluster("queues:\n  - {name: ads, acl: {submit: alice}}\n");
        assert!(may_submit(&open_root, leaf(&open_root, "root.ads"), "bob"));
        let c = cluster(
            "root_acl: {submit: ' ', administer: ' '}\nqueues:\n  - name: ads\n    acl: {submit: 'alice,carol'}\n    children: [{name: tier1, acl: {administer: dave}}]\n  - {name: search}\n",
        );
        assert!(may_submit(&c, leaf(&c, "root.ads.tier1"), "alice"), "inherited from the parent");
        assert!(may_submit(&c, leaf(&c, "root.ads.tier1"), "dave"), "administer implies submit");
        assert!(!may_submit(&c, leaf(&c, "root.ads.tier1"), "bob"));
        assert!(!may_submit(&c, leaf(&c, "root.search"), "alice"), "no list: nobody below a closed root");
        assert!(unenforceable(&c).is_empty());
    }

    #[test]
    fn acls_that_name_groups_are_refused_with_their_path() {
        let c = cluster("queues:\n  - {name: ads, acl: {submit: 'alice admins'}}\n");
        let problems = unenforceable(&c);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].0, "queues.ads.acl.submit");
        assert!(problems[0].1.contains("admins"));
    }
}
