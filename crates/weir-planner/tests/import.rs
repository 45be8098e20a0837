//! `weir import --format yarn-fair` on real allocation files: the example of Hadoop's
//! FairScheduler.md and Hadoop's own test resources (re-typed as facts in `tests/fixtures/yarn/`),
//! read the way YARN's AllocationFileParser / AllocationFileQueueParser read them.

use weir_model::cluster_file::LimitSpec;
use weir_model::{ClusterConfig, Duration, Limit, PartialResources, PlacementRuleKind, QueuePath, Resources};
use weir_planner::{export, import_yarn_fair, ExportOptions, Format, ImportOptions, ResourceCalculator};

fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/yarn/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn resolve(file: weir_model::ClusterFile) -> ClusterConfig {
    ClusterConfig::from_file("imported", file).expect("an import validates")
}

fn q<'a>(c: &'a ClusterConfig, path: &str) -> &'a weir_model::QueueConfig {
    &c.queues[c.find(&QueuePath::parse(path).unwrap()).unwrap_or_else(|| panic!("no {path}"))]
}

/// The documentation's example sets maxAMShare on sample_queue, which has child queues: the
/// current AllocationFileQueueParser refuses such a file ("A queue element that contains child
/// queue elements … cannot also include a maxAMShare element"), and so does weir.
#[test]
fn the_documentation_example_is_refused_as_yarn_refuses_it() {
    let err = import_yarn_fair("docs-example.xml", &fixture("docs-example.xml"), &ImportOptions::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("docs-example.xml: root.sample_queue: maxAMShare on a parent queue"), "{err}");
}

/// The example without that one line.
fn docs_example() -> String {
    let text = fixture("docs-example.xml");
    let fixed = text.replace("    <maxAMShare>0.1</maxAMShare>\n", "");
    assert_ne!(fixed, text);
    fixed
}

#[test]
fn the_documentation_example_imports_what_yarn_enforces() {
    let imported = import_yarn_fair("docs-example.xml", &docs_example(), &ImportOptions::default()).unwrap();
    let c = resolve(imported.file.clone());
    let sample = q(&c, "root.sample_queue");
    assert_eq!(sample.weight, 2.0);
    // Memory only (DefaultResourceCalculator): "90000 mb,0vcores" limits memory, not cpu, so
    // the queue can run jobs in weir.
    assert_eq!(sample.max, Limit::Absolute(Resources::new(u64::MAX, 90_000, u64::MAX)));
    assert_eq!(sample.min, Limit::Absolute(Resources::new(0, 10_000, 0)));
    assert_eq!(sample.max_am_share, None, "a parent's AM share is not a thing in YARN");
    // queueMaxResourcesDefault applies where a queue sets no maximum (memory only as well).
    assert_eq!(
        q(&c, "root.sample_queue.sample_sub_queue").max,
        Limit::Absolute(Resources::new(u64::MAX, 40_000, u64::MAX))
    );
    assert_eq!(q(&c, "root.sample_queue.sample_sub_queue").am_share, Some(0.5), "queueMaxAMShareDefault");
    assert_eq!(c.scheduler.queue_max_am_share_default, Some(0.5));
    // ACLs, reservation, type="parent", users and placement are carried.
    assert_eq!(
        q(&c, "root.sample_queue.sample_sub_queue").acl.as_ref().and_then(|a| a.submit.as_deref()),
        Some("charlie")
    );
    assert!(q(&c, "root.sample_queue.sample_reservable_queue").reservable);
    assert!(q(&c, "root.secondary_group_queue").dynamic_parent);
    assert_eq!(c.users["sample_user"].max_running_apps, Some(30));
    assert_eq!(c.scheduler.user_max_running_apps, Some(5));
    let rules: Vec<PlacementRuleKind> = c.queue_placement.iter().map(|r| r.rule).collect();
    assert_eq!(
        rules,
        [
            PlacementRuleKind::Specified,
            PlacementRuleKind::PrimaryGroup,
            PlacementRuleKind::NestedUserQueue,
            PlacementRuleKind::Default
        ]
    );
    assert_eq!(c.queue_placement[3].queue.as_deref(), Some("root.sample_queue"));
    assert_eq!(
        c.queue_placement[2].parent.as_ref().map(|p| p.rule),
        Some(PlacementRuleKind::SecondaryGroupExistingQueue)
    );
    let notes = imported.notes.join("\n");
    for want in [
        "root.sample_queue: maxResources 0 vcores left out: --resource-calculator default counts memory only (the Fair Scheduler itself checks vcores",
        "root.secondary_group_queue: <maxChildResources> is left out",
        "no nodes",
    ] {
        assert!(notes.contains(want), "notes lack {want}:\n{notes}");
    }

    // With the dominant calculator the vcores are kept, and the queue that can start no
    // container is named.
    let options =
        ImportOptions { resource_calculator: ResourceCalculator::Dominant, ..ImportOptions::default() };
    let imported = import_yarn_fair("docs-example.xml", &docs_example(), &options).unwrap();
    let c = resolve(imported.file);
    assert_eq!(q(&c, "root.sample_queue").max, Limit::Absolute(Resources::new(0, 90_000, u64::MAX)));
    let notes = imported.notes.join("\n");
    assert!(notes.contains("root.sample_queue: maxResources allows 0 vcores: no container fits"), "{notes}");
}

#[test]
fn hadoops_conversion_test_file_keeps_acls_users_and_placement_through_export_and_back() {
    let options =
        ImportOptions { resource_calculator: ResourceCalculator::Dominant, ..ImportOptions::default() };
    let imported = import_yarn_fair("conv.xml", &fixture("hadoop-conversion-test.xml"), &options).unwrap();
    let c = resolve(imported.file.clone());
    assert_eq!(c.scheduler.root_policy, weir_model::Policy::Drf);
    assert_eq!(
        c.root_acl.as_ref().and_then(|a| a.submit.as_deref()),
        Some("alice,bob,joe,john hadoop_users")
    );
    // The ACL keeps its trailing space (YARN splits users from groups on it).
    assert_eq!(q(&c, "root.users.joe").acl.as_ref().and_then(|a| a.submit.as_deref()), Some("joe "));
    assert_eq!(q(&c, "root.users.joe").max, Limit::Percent(50.0));
    assert_eq!(q(&c, "root.users.joe").min, Limit::Absolute(Resources::new(1000, 4096, 0)));
    assert!(q(&c, "root.admins.alice").reservable);
    // maxAMShare -1 turns the AM limit off, and stays off.
    assert_eq!(q(&c, "root.admins.bob").max_am_share, Some(-1.0));
    assert_eq!(q(&c, "root.admins.bob").am_share, None);
    assert_eq!(c.scheduler.promotion, weir_model::Promotion::Fifo, "YARN admits in submission order");
    assert_eq!(q(&c, "root.misc.a").weight, 0.0);
    assert_eq!(c.users["alice"].max_running_apps, Some(30));
    let p = c.file.scheduler.preemption.clone().unwrap();
    assert_eq!(p.fair_share_preemption_timeout, Some(Duration::from_secs(23)));
    assert_eq!(p.min_share_preemption_timeout, Some(Duration::from_secs(24)));
    assert_eq!(p.fair_share_preemption_threshold, Some(0.12));
    assert_eq!(c.queue_placement.len(), 5);

    // Export to YARN and import again: every setting weir models, ACLs and placement included.
    let xml = export(&c, Format::YarnFair, &ExportOptions::default()).unwrap().text;
    let again = resolve(import_yarn_fair("again.xml", &xml, &options).unwrap().file);
    assert_eq!(again.queues, c.queues);
    assert_eq!(again.root_acl, c.root_acl);
    assert_eq!(again.users, c.users);
    assert_eq!(again.queue_placement, c.queue_placement);
    assert_eq!(again.scheduler, c.scheduler);
}

#[test]
fn aliases_legacy_names_and_what_yarn_reads_differently() {
    let xml = r#"<?xml version="1.0"?>
<allocations>
  <defaultQueueSchedulingMode>drf</defaultQueueSchedulingMode>
  <fairSharePreemptionTimeout>40</fairSharePreemptionTimeout>
  <queue name="a">
    <schedulingMode>fifo</schedulingMode>
    <minResources>25%</minResources>
  </queue>
  <queue name="b"><schedulingPolicy>fair</schedulingPolicy>
    <queue name="c"><schedulingPolicy>drf</schedulingPolicy></queue>
  </queue>
</allocations>"#;
    let imported = import_yarn_fair("fs.xml", xml, &ImportOptions::default()).unwrap();
    let c = resolve(imported.file.clone());
    assert_eq!(q(&c, "root.a").policy, weir_model::Policy::Fifo);
    assert_eq!(c.scheduler.root_policy, weir_model::Policy::Drf);
    assert_eq!(q(&c, "root.a").min, Limit::Absolute(Resources::ZERO));
    assert_eq!(
        c.file.scheduler.preemption.as_ref().and_then(|p| p.fair_share_preemption_timeout),
        Some(Duration::from_secs(40))
    );
    let notes = imported.notes.join("\n");
    assert!(notes.contains("root.a: minResources 25% is imported as no minimum"), "{notes}");
    assert!(notes.contains("root.b.c: left out with everything below it, as YARN does"), "{notes}");
    assert!(c.find(&QueuePath::parse("root.b.c").unwrap()).is_none());
    assert!(q(&c, "root.b").dynamic_parent, "b stays a parent in YARN");
    // A percentage in the new syntax parses to the same.
    assert_eq!(
        weir_planner::import::parse_resources("vcores=50%, memory-mb=50%"),
        Ok(LimitSpec::Percent("50%".into()))
    );
    let _ = PartialResources::default();
}

#[test]
fn what_yarn_refuses_is_refused() {
    let cases = [
        (
            "<allocations><queue name=\"p\"><maxAMShare>0.2</maxAMShare><queue name=\"c\"/></queue></allocations>",
            "root.p: maxAMShare on a parent queue",
        ),
        (
            "<allocations><queue name=\"p\" type=\"parent\"><reservation/></queue></allocations>",
            "root.p: <reservation> on a parent queue",
        ),
        ("<allocations><defaultQueueSchedulingPolicy>fifo</defaultQueueSchedulingPolicy></allocations>", "fifo cannot be the default policy"),
        (
            "<allocations><queuePlacementPolicy><rule name=\"byMoon\"/></queuePlacementPolicy></allocations>",
            "`byMoon` is not a placement rule YARN knows",
        ),
    ];
    for (xml, want) in cases {
        let err = import_yarn_fair("fs.xml", xml, &ImportOptions::default()).unwrap_err().to_string();
        assert!(err.contains(want), "{xml}\n{err}");
    }
}

#[test]
fn import_errors_name_the_queue_and_the_element() {
    let xml = "<allocations><queue name=\"a\"><weight>heavy</weight><queue name=\"b\">\
               <schedulingPolicy>com.example.Mine</schedulingPolicy><maxResources>5 gb</maxResources></queue></queue></allocations>";
    let err = import_yarn_fair("fs.xml", xml, &ImportOptions::default()).unwrap_err().to_string();
    assert!(err.starts_with("fs.xml: 3 problems:"), "{err}");
    assert!(err.contains("fs.xml: root.a: weight: `heavy` is not a number"), "{err}");
    assert!(
        err.contains("fs.xml: root.a.b: schedulingPolicy: `com.example.mine` is not fair, drf or fifo"),
        "{err}"
    );
    assert!(err.contains("fs.xml: root.a.b: maxResources: `5 gb`"), "{err}");
}
