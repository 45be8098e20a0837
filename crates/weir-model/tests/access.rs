//! ACLs, per-user limits and the application placement policy: carried through the cluster
//! file (parse → resolve → write → parse), and checked where YARN would refuse them.

use weir_model::{ClusterConfig, PlacementRuleKind};

const NODES: &str = "nodes: [{count: 1, resources: {cpu: 1000, memory: 1g}}]\n";

#[test]
fn acls_users_and_placement_resolve_and_survive_a_write() {
    let yaml = format!(
        "version: 1\n{NODES}root_acl: {{submit: ' ', administer: ' admins'}}\n\
         users: {{alice: {{max_running_apps: 3}}}}\n\
         queue_placement:\n  - {{rule: specified, create: false}}\n  - {{rule: nested_user_queue, parent: {{rule: primary_group, create: false}}}}\n  - {{rule: default, queue: root.a}}\n\
         queues:\n  - {{name: a, acl: {{submit: 'alice,bob etl'}}, reservable: true}}\n  - {{name: b, dynamic_parent: true}}\n"
    );
    let c = ClusterConfig::from_yaml("c.yaml", &yaml).unwrap();
    assert_eq!(c.root_acl.as_ref().and_then(|a| a.submit.as_deref()), Some(" "));
    assert_eq!(c.queues[0].acl, c.root_acl);
    assert_eq!(c.users["alice"].max_running_apps, Some(3));
    assert_eq!(c.queue_placement.len(), 3);
    assert_eq!(c.queue_placement[1].rule, PlacementRuleKind::NestedUserQueue);
    assert_eq!(c.queues[1].acl.as_ref().and_then(|a| a.submit.as_deref()), Some("alice,bob etl"));
    assert!(c.queues[1].reservable && !c.queues[1].dynamic_parent);
    assert!(c.queues[2].dynamic_parent);
    let written = serde_saphyr::to_string(&c.file).unwrap();
    let back = ClusterConfig::from_yaml("back.yaml", &written).unwrap();
    assert_eq!(back.file, c.file);
    assert_eq!(back.queues, c.queues);
}

#[test]
fn rules_yarn_refuses_are_problems_with_their_paths() {
    let yaml = format!(
        "version: 1\n{NODES}users: {{alice: {{max_running_apps: 0}}}}\n\
         queue_placement:\n  - {{rule: user, queue: root.x}}\n  - {{rule: nested_user_queue}}\n  - {{rule: specified}}\n\
         queues:\n  - {{name: p, reservable: true, children: [{{name: c, dynamic_parent: true, reservable: true}}]}}\n"
    );
    let err = ClusterConfig::from_yaml("c.yaml", &yaml).unwrap_err().to_string();
    for want in [
        "users.alice.max_running_apps: must be at least 1",
        "queue_placement[0].queue: only a `default` rule names a queue",
        "queue_placement[1].parent: a nested_user_queue rule needs",
        "queue_placement[2]: the last rule must always place or reject",
        "queues.p.reservable: applies to a queue without children",
        "queues.p.children.c.reservable: a dynamic_parent queue cannot be reservable",
    ] {
        assert!(err.contains(want), "{err}\nmissing: {want}");
    }
}
