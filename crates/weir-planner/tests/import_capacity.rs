//! `capacity-scheduler.xml` import: the Hadoop distribution's default file and the queue tree
//! of the Capacity Scheduler documentation's example (with settings on it), every property
//! read or listed as ignored, refusals naming the property, and the round trip through
//! `weir export --format yarn-capacity`.

use weir_model::{CapacitySpec, ClusterConfig, LeafOrdering, Mode, QueuePath, QueueState};
use weir_planner::{export, import_yarn_capacity, ExportOptions, Format, ImportOptions};

fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/yarn/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn q<'a>(c: &'a ClusterConfig, path: &str) -> &'a weir_model::QueueConfig {
    &c.queues[c.find(&QueuePath::parse(path).unwrap()).unwrap_or_else(|| panic!("no {path}"))]
}

#[test]
fn hadoops_default_file_imports_with_every_other_property_listed_as_ignored() {
    let imported = import_yarn_capacity(
        "capacity-scheduler.xml",
        &fixture("capacity-scheduler-default.xml"),
        &ImportOptions::default(),
    )
    .unwrap();
    let c = ClusterConfig::from_file("imported", imported.file).unwrap();
    assert_eq!(c.scheduler.mode, Mode::Capacity);
    let d = q(&c, "root.default").capacity.as_ref().unwrap();
    assert_eq!(d.configured, Some(CapacitySpec::Percent(100.0)));
    assert_eq!(d.max_applications, 10_000);
    assert_eq!(d.max_am_percent, 0.1);
    assert_eq!(q(&c, "root.default").acl.as_ref().unwrap().submit.as_deref(), Some("*"));
    let notes = imported.notes.join("\n");
    for ignored in [
        "node-locality-delay",
        "rack-locality-additional-delay",
        "queue-mappings = ",
        "root.default.acl_application_max_priority",
        "root.default.maximum-application-lifetime",
        "per-node-heartbeat.maximum-offswitch-assignments",
    ] {
        assert!(notes.contains(ignored), "{ignored} not listed in:\n{notes}");
    }
    assert!(notes.contains("resource-calculator"), "{notes}");
}

#[test]
fn the_documentation_tree_imports_each_setting_and_round_trips() {
    let imported =
        import_yarn_capacity("docs.xml", &fixture("capacity-scheduler-docs.xml"), &ImportOptions::default())
            .unwrap();
    let c = ClusterConfig::from_file("imported", imported.file.clone()).unwrap();
    let cap = |p: &str| q(&c, p).capacity.clone().unwrap();
    assert_eq!(cap("root.a").configured_max, Some(CapacitySpec::Percent(60.0)));
    assert_eq!(cap("root.a").queue_priority, 2);
    assert_eq!(cap("root.b").configured_max, None, "-1 is 100");
    assert!(!q(&c, "root.b.b2").allow_preemption_from, "disable_preemption is inherited");
    assert_eq!(cap("root.c").state, QueueState::Stopped);
    assert!((cap("root.a.a1").absolute_capacity.unwrap() - 0.4 * 0.75).abs() < 1e-12);
    assert_eq!(cap("root.a.a1").user_limit_factor, 2.0);
    assert_eq!(cap("root.a.a1").min_user_percent, 25.0);
    assert_eq!(cap("root.a.a1").user_weight("alice"), 1.5);
    assert_eq!(cap("root.a.a2").max_parallel_apps, Some(5));
    assert_eq!(cap("root.b.b1").max_am_percent, 0.3);
    assert_eq!(cap("root.b.b2").max_applications, 50);
    // ordering-policy fair (FairOrderingPolicy), with and without its size-based weight.
    assert_eq!(cap("root.b.b3").ordering, LeafOrdering::Fair);
    assert!(cap("root.b.b3").size_based_weight);
    assert_eq!(cap("root.b.b2").ordering, LeafOrdering::Fair);
    assert!(!cap("root.b.b2").size_based_weight);
    assert_eq!(cap("root.b.b1").ordering, LeafOrdering::Fifo);
    let notes = imported.notes.join("\n");
    assert!(!notes.contains("ordering-policy"), "{notes}");

    // Export and import again: the same cluster.
    let xml = export(&c, Format::YarnCapacity, &ExportOptions::default()).unwrap().text;
    let again = import_yarn_capacity("again.xml", &xml, &ImportOptions::default()).unwrap();
    let c2 = ClusterConfig::from_file("again", again.file).unwrap();
    assert_eq!(c2.queues, c.queues);
}

#[test]
fn a_priority_yarn_ignores_is_not_imported_and_says_why() {
    let text = fixture("capacity-scheduler-docs.xml").replace(
        "<property><name>yarn.scheduler.capacity.root.ordering-policy</name><value>priority-utilization</value></property>",
        "",
    );
    let imported = import_yarn_capacity("docs.xml", &text, &ImportOptions::default()).unwrap();
    let c = ClusterConfig::from_file("imported", imported.file).unwrap();
    assert_eq!(q(&c, "root.a").capacity.as_ref().unwrap().queue_priority, 0);
    assert!(
        imported.notes.iter().any(|n| n.contains("root.a: priority 2 is ignored by YARN")),
        "{:?}",
        imported.notes
    );
}

#[test]
fn what_cannot_be_read_is_refused_naming_the_property() {
    let bad = |from: &str, to: &str| {
        let text = fixture("capacity-scheduler-docs.xml").replace(from, to);
        match import_yarn_capacity("docs.xml", &text, &ImportOptions::default()) {
            Ok(_) => panic!("imported with {to}"),
            Err(e) => e.to_string(),
        }
    };
    let e = bad("<value>40</value>", "<value>forty</value>");
    assert!(
        e.contains("yarn.scheduler.capacity.root.a.capacity") && e.contains("`forty` is not a capacity"),
        "{e}"
    );
    let e = bad("<value>STOPPED</value>", "<value>PAUSED</value>");
    assert!(e.contains("root.c.state") && e.contains("RUNNING or STOPPED"), "{e}");
    // A level that does not sum to 100 is refused by the cluster file's rules, naming the level.
    let e = bad("<value>50</value>", "<value>45</value>");
    assert!(e.contains("add up to 95, not 100"), "{e}");
}

/// The proportional policy's settings (`CapacitySchedulerConfiguration`'s
/// `yarn.resourcemanager.monitor.capacity.preemption.*`, which
/// `ProportionalCapacityPreemptionPolicy.init` reads from capacity-scheduler.xml) go out with a
/// preempting capacity-mode cluster and come back with `--preemption`.
#[test]
fn preemption_settings_round_trip() {
    let text = include_str!("../../../examples/cluster-capacity.yaml")
        .replace("natural_termination_factor: 0.2", "natural_termination_factor: 0.5")
        .replace("monitoring_interval: 3s", "monitoring_interval: 5s");
    let c = ClusterConfig::from_yaml("cluster-capacity.yaml", &text).unwrap();
    let xml = export(&c, Format::YarnCapacity, &ExportOptions::default()).unwrap().text;
    assert!(
        xml.contains("yarn.resourcemanager.monitor.capacity.preemption.monitoring_interval</name>"),
        "{xml}"
    );
    let options = ImportOptions { preemption: true, ..ImportOptions::default() };
    let back = import_yarn_capacity("again.xml", &xml, &options).unwrap();
    let notes = back.notes.join("\n");
    assert!(!notes.contains("monitor.capacity.preemption"), "read, not ignored: {notes}");
    let c2 = ClusterConfig::from_file("again", back.file).unwrap();
    assert_eq!(c2.scheduler.preemption, c.scheduler.preemption);
    assert_eq!(c2.scheduler.preemption.capacity.natural_termination_factor, 0.5);
    assert_eq!(c2.scheduler.preemption.capacity.monitoring_interval, weir_model::Duration::from_secs(5));
}

/// Node labels (CapacitySchedulerConfiguration's `accessible-node-labels`,
/// `accessible-node-labels.<label>.capacity`/`.maximum-capacity`,
/// `default-node-label-expression`; a blank list is no label) from the Hadoop documentation's
/// example, then exported and imported again.
#[test]
fn node_labels_import_and_round_trip() {
    let imported = import_yarn_capacity(
        "labels.xml",
        &fixture("capacity-scheduler-labels.xml"),
        &ImportOptions::default(),
    )
    .unwrap();
    let c = ClusterConfig::from_file("imported", imported.file.clone()).unwrap();
    let cap = |p: &str| q(&c, p).capacity.clone().unwrap();
    let eng = cap("root.engineering");
    assert!((eng.labels["GPU"].absolute_capacity - 0.5).abs() < 1e-12);
    assert_eq!(eng.default_label.as_deref(), Some("GPU"));
    let mkt = cap("root.marketing");
    assert!((mkt.labels["GPU"].absolute_max_capacity - 0.8).abs() < 1e-12);
    assert_eq!(mkt.default_label, None);
    assert!(cap("root.sales").labels.is_empty(), "a blank list: no label");
    // The file has no nodes: an unlabelled one and one per label are written, and said.
    assert!(c.nodes.iter().any(|g| g.label.as_deref() == Some("GPU")));
    assert!(c.nodes.iter().any(|g| g.label.is_none()));
    let notes = imported.notes.join("\n");
    assert!(notes.contains("node label GPU: no given node has it"), "{notes}");
    assert!(notes.contains("imported as exclusive"), "{notes}");
    assert!(!notes.contains("accessible-node-labels"), "every label property is read:\n{notes}");

    let xml = export(&c, Format::YarnCapacity, &ExportOptions::default()).unwrap().text;
    assert!(xml.contains("<name>yarn.scheduler.capacity.root.sales.accessible-node-labels</name>"), "{xml}");
    let again = import_yarn_capacity("again.xml", &xml, &ImportOptions::default()).unwrap();
    let c2 = ClusterConfig::from_file("again", again.file).unwrap();
    assert_eq!(c2.queues, c.queues);
}

/// A label capacity weir cannot read is refused naming the property; per-label sums are
/// checked as ParentQueue checks them (the error names the label and the sum).
#[test]
fn a_bad_label_capacity_is_refused() {
    let xml = fixture("capacity-scheduler-labels.xml").replace(
        "<name>yarn.scheduler.capacity.root.marketing.accessible-node-labels.GPU.capacity</name><value>50</value>",
        "<name>yarn.scheduler.capacity.root.marketing.accessible-node-labels.GPU.capacity</name><value>40</value>",
    );
    let err = import_yarn_capacity("labels.xml", &xml, &ImportOptions::default()).unwrap_err().to_string();
    assert!(err.contains("in label GPU's partition add up to 90, not 100"), "{err}");
    let xml = fixture("capacity-scheduler-labels.xml").replace(">50<", ">half<");
    let err = import_yarn_capacity("labels.xml", &xml, &ImportOptions::default()).unwrap_err().to_string();
    assert!(err.contains("root.engineering.accessible-node-labels.GPU.capacity"), "{err}");
}
