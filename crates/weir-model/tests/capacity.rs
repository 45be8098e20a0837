//! Capacity mode's queue settings in the cluster file: defaults (the Capacity Scheduler's),
//! shares resolved down the tree, and every rule's error with its path.

use weir_model::{CapacitySpec, ClusterConfig, Duration, LeafOrdering, Limit, Policy, QueuePath, QueueState};

const HEAD: &str = "version: 1\nscheduler: {mode: capacity}\nnodes:\n  - {count: 10, resources: {cpu: 10000, memory: 10240}}\n";

fn cluster(queues: &str) -> ClusterConfig {
    let text = format!("{HEAD}queues:\n{queues}");
    ClusterConfig::from_yaml("c.yaml", &text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn problems(text: &str) -> Vec<(String, String)> {
    match ClusterConfig::from_yaml("c.yaml", text) {
        Ok(_) => panic!("expected problems, but this validated:\n{text}"),
        Err(e) => e.problems().into_iter().map(|p| (p.path, p.message)).collect(),
    }
}

/// The queues fail with exactly one problem, at `path`, whose message contains `message`.
#[track_caller]
fn check(queues: &str, path: &str, message: &str) {
    check_file(&format!("{HEAD}queues:\n{queues}"), path, message);
}

#[track_caller]
fn check_file(text: &str, path: &str, message: &str) {
    let found = problems(text);
    assert_eq!(found.len(), 1, "expected one problem at {path}, got {found:#?}");
    assert_eq!(found[0].0, path, "wrong path: {found:#?}");
    assert!(found[0].1.contains(message), "message {:?} lacks {message:?}", found[0].1);
}

fn q<'a>(c: &'a ClusterConfig, path: &str) -> &'a weir_model::QueueConfig {
    &c.queues[c.find(&QueuePath::parse(path).unwrap()).unwrap_or_else(|| panic!("no {path}"))]
}

#[track_caller]
fn close(a: f64, b: f64) {
    assert!((a - b).abs() < 1e-9, "{a} != {b}");
}

#[test]
fn the_issue_example_resolves_to_absolute_shares_with_yarn_defaults() {
    let c = cluster(
        "  - {name: ads, capacity: 55, max_capacity: 80, children: [{name: tier1, capacity: 70, user_limit_factor: 2}, {name: tier3, capacity: 30}]}\n  - {name: search, capacity: 45}\n",
    );
    let tier1 = q(&c, "root.ads.tier1");
    let cap = tier1.capacity.as_ref().unwrap();
    // CSQueueUtils: absolute capacity = parent's absolute × capacity; absolute max = parent's
    // absolute max × max capacity.
    close(cap.absolute_capacity.unwrap(), 0.55 * 0.70);
    close(cap.absolute_max_capacity.unwrap(), 0.80);
    assert_eq!(tier1.min, Limit::Percent(0.55 * 0.70 * 100.0));
    assert_eq!(tier1.max, Limit::Percent(80.0));
    assert_eq!(cap.user_limit_factor, 2.0);
    let search = q(&c, "root.search").capacity.as_ref().unwrap();
    // The Capacity Scheduler's defaults.
    assert_eq!(search.user_limit_factor, 1.0);
    assert_eq!(search.min_user_percent, 100.0);
    assert_eq!(search.max_am_percent, 0.1);
    assert_eq!(search.max_applications, 4500, "10,000 × 0.45");
    assert_eq!(search.state, QueueState::Running);
    assert_eq!(search.ordering, LeafOrdering::Fifo);
    assert_eq!(search.queue_priority, 0);
    assert_eq!(search.user_weight("anyone"), 1.0);
    close(search.absolute_max_capacity.unwrap(), 1.0);
    assert_eq!(q(&c, "root.search").policy, Policy::Priority, "fifo: job priority, then submit time");
    assert_eq!(q(&c, "root.search").am_share, Some(0.1));
}

#[test]
fn weights_are_normalised_among_siblings() {
    let c = cluster("  - {name: a, capacity: 3w}\n  - {name: b, capacity: 1w, children: [{name: x, capacity: 1w}, {name: y, capacity: 1w}]}\n");
    close(q(&c, "root.a").capacity.as_ref().unwrap().absolute_capacity.unwrap(), 0.75);
    close(q(&c, "root.b.y").capacity.as_ref().unwrap().absolute_capacity.unwrap(), 0.125);
    assert_eq!(q(&c, "root.a").capacity.as_ref().unwrap().configured, Some(CapacitySpec::Weight(3.0)));
}

#[test]
fn absolute_resources_resolve_to_resource_limits() {
    let c = cluster(
        "  - {name: a, capacity: {cpu: 40000, memory: 4096}, max_capacity: {cpu: 80000, memory: 8192}}\n  - {name: b, capacity: {cpu: 60000, memory: 6144}}\n",
    );
    let a = q(&c, "root.a");
    assert_eq!(a.min, Limit::Absolute(weir_model::Resources::new(40000, 4096, 0)));
    assert_eq!(a.max, Limit::Absolute(weir_model::Resources::new(80000, 8192, 0)));
    assert_eq!(
        a.capacity.as_ref().unwrap().max_applications,
        400,
        "10,000 × 4096 / 102,400 (the cluster's memory)"
    );
}

#[test]
fn per_user_weights_and_leaf_settings_are_kept() {
    let c = cluster(
        "  - {name: a, capacity: 100, min_user_percent: 25, user_weights: {alice: 2}, max_parallel_apps: 3, max_am_percent: 0.5, max_applications: 7, priority: 2}\n",
    );
    let a = q(&c, "root.a");
    let cap = a.capacity.as_ref().unwrap();
    assert_eq!(cap.user_weight("alice"), 2.0);
    assert_eq!(cap.min_user_percent, 25.0);
    assert_eq!(cap.max_applications, 7);
    assert_eq!(cap.queue_priority, 2);
    assert_eq!(a.max_running_apps, Some(3));
    assert_eq!(a.am_share, Some(0.5));
}

#[test]
fn a_fair_ordered_leaf_gets_the_fair_job_order() {
    let c = cluster(
        "  - {name: a, capacity: 50, ordering: fair, size_based_weight: true}\n  - {name: b, capacity: 30, ordering: fair}\n  - {name: c, capacity: 20}\n",
    );
    let cap = |p: &str| q(&c, p).capacity.clone().unwrap();
    assert_eq!((cap("root.a").ordering, cap("root.a").size_based_weight), (LeafOrdering::Fair, true));
    assert_eq!((cap("root.b").ordering, cap("root.b").size_based_weight), (LeafOrdering::Fair, false));
    assert_eq!(cap("root.c").ordering, LeafOrdering::Fifo);
    assert_eq!(q(&c, "root.a").policy, weir_model::Policy::Fair);
    assert_eq!(q(&c, "root.c").policy, weir_model::Policy::Priority);
}

#[test]
fn a_level_that_does_not_sum_to_100_is_named_with_its_sum() {
    check(
        "  - {name: ads, capacity: 55, children: [{name: t1, capacity: 60}, {name: t3, capacity: 30}]}\n  - {name: search, capacity: 45}\n",
        "queues.ads.children",
        "the capacities of root.ads's children add up to 90, not 100",
    );
    check(
        "  - {name: a, capacity: 50}\n  - {name: b, capacity: 45}\n",
        "queues",
        "root's children add up to 95, not 100",
    );
}

#[test]
fn every_rule_names_its_field() {
    check("  - {name: a}\n", "queues.a.capacity", "needs a capacity on every queue");
    check("  - {name: a, capacity: 100, max_capacity: 50}\n", "queues.a.max_capacity", "below capacity 100");
    check(
        "  - {name: a, capacity: 100, max_capacity: 150}\n",
        "queues.a.max_capacity",
        "not a percent in (0, 100]",
    );
    check(
        "  - {name: a, capacity: 100, user_limit_factor: 0}\n",
        "queues.a.user_limit_factor",
        "not a factor > 0",
    );
    check(
        "  - {name: a, capacity: 100, min_user_percent: 0}\n",
        "queues.a.min_user_percent",
        "not a percent",
    );
    check("  - {name: a, capacity: 100, max_am_percent: 1.5}\n", "queues.a.max_am_percent", "not a fraction");
    check(
        "  - {name: a, capacity: 100, user_weights: {bob: 0}}\n",
        "queues.a.user_weights.bob",
        "not a weight > 0",
    );
    check(
        "  - {name: a, capacity: 100, size_based_weight: true}\n",
        "queues.a.size_based_weight",
        "applies to ordering: fair only",
    );
    check(
        "  - {name: a, capacity: 100, ordering: fair, children: [{name: x, capacity: 100}]}\n",
        "queues.a.ordering",
        "applies to leaf queues",
    );
    check("  - {name: a, capacity: 50}\n  - {name: b, capacity: 1w}\n", "queues", "mix capacity modes");
    check(
        "  - {name: a, capacity: 100, user_limit_factor: 2, children: [{name: x, capacity: 100}]}\n",
        "queues.a.user_limit_factor",
        "applies to leaf queues",
    );
    check(
        "  - {name: a, capacity: 100, state: stopped, children: [{name: x, capacity: 100, state: running}]}\n",
        "queues.a.children.x.state",
        "the parent is stopped",
    );
    check("  - {name: a, capacity: 100, weight: 2}\n", "queues.a.weight", "in capacity mode use capacity");
    check("  - {name: a, capacity: 100, max: \"50%\"}\n", "queues.a.max", "use max_capacity");
    check(
        "  - {name: a, capacity: 100, max_running_apps: 2}\n",
        "queues.a.max_running_apps",
        "use max_parallel_apps",
    );
}

#[test]
fn capacity_settings_in_fair_mode_and_fair_preemption_settings_in_capacity_mode_are_refused() {
    let fair = "version: 1\nnodes:\n  - {count: 1, resources: {cpu: 1000, memory: 1024}}\nqueues:\n  - {name: a, capacity: 40}\n";
    check_file(fair, "queues.a.capacity", "set scheduler.mode: capacity");
    let file = |mode: &str, preemption: &str, queue: &str| {
        format!(
            "version: 1\nscheduler: {{mode: {mode}, preemption: {{enabled: true{preemption}}}}}\nnodes:\n  - {{count: 1, resources: {{cpu: 1000, memory: 1024}}}}\nqueues:\n  - {{name: a{queue}}}\n"
        )
    };
    let fair_preemption = |p: &str| file("fair", p, "");
    let capacity = |p: &str| file("capacity", p, ", capacity: 100");
    check_file(
        &fair_preemption(", natural_termination_factor: 0.5"),
        "scheduler.preemption.natural_termination_factor",
        "set scheduler.mode: capacity",
    );
    check_file(
        &capacity(", kill_wait: 10s"),
        "scheduler.preemption.kill_wait",
        "in capacity mode use max_wait_before_kill",
    );
    check_file(
        &capacity(", utilization_threshold: 0.5"),
        "scheduler.preemption.utilization_threshold",
        "use max_ignored_over_capacity",
    );
    check_file(
        &capacity(", monitoring_interval: 0s"),
        "scheduler.preemption.monitoring_interval",
        "longer than 0s",
    );
    check_file(
        &capacity(", total_preemption_per_round: 0"),
        "scheduler.preemption.total_preemption_per_round",
        "not a fraction in (0, 1]",
    );
    check_file(
        &capacity(", natural_termination_factor: 1.5"),
        "scheduler.preemption.natural_termination_factor",
        "not a fraction in (0, 1]",
    );
    check_file(
        &capacity(", max_ignored_over_capacity: -1"),
        "scheduler.preemption.max_ignored_over_capacity",
        "not a fraction ≥ 0",
    );
    // YARN's disable_preemption: capacity mode only, and not beside allow_preemption_from.
    check_file(
        &file("fair", "", ", disable_preemption: true"),
        "queues.a.disable_preemption",
        "fair mode writes allow_preemption_from",
    );
    check_file(
        &file("capacity", "", ", capacity: 100, disable_preemption: true, allow_preemption_from: false"),
        "queues.a.disable_preemption",
        "not both",
    );
    let c = ClusterConfig::from_yaml(
        "c.yaml",
        &file(
            "capacity",
            "",
            ", capacity: 100, disable_preemption: true, children: [{name: x, capacity: 100}]",
        ),
    )
    .unwrap();
    assert!(!q(&c, "root.a").allow_preemption_from && !q(&c, "root.a.x").allow_preemption_from, "inherited");
}

/// ProportionalCapacityPreemptionPolicy's defaults (CapacitySchedulerConfiguration):
/// monitoring_interval 3 s, max_wait_before_kill 15 s, total_preemption_per_round 0.1,
/// max_ignored_over_capacity 0.1, natural_termination_factor 0.2; each can be set.
#[test]
fn capacity_preemption_settings_default_as_yarn() {
    let text = "version: 1\nscheduler: {mode: capacity, preemption: {enabled: true}}\nnodes:\n  - {count: 1, resources: {cpu: 1000, memory: 1024}}\nqueues:\n  - {name: a, capacity: 100}\n";
    let c = ClusterConfig::from_yaml("c.yaml", text).unwrap();
    let p = &c.scheduler.preemption;
    assert!(p.enabled);
    assert_eq!(p.kill_wait, Duration::from_secs(15));
    assert_eq!(p.capacity.monitoring_interval, Duration::from_secs(3));
    assert_eq!(p.capacity.total_preemption_per_round, 0.1);
    assert_eq!(p.capacity.max_ignored_over_capacity, 0.1);
    assert_eq!(p.capacity.natural_termination_factor, 0.2);
    let text = text.replace(
        "{enabled: true}",
        "{enabled: true, monitoring_interval: 1s, max_wait_before_kill: 30s, total_preemption_per_round: 0.5, max_ignored_over_capacity: 0, natural_termination_factor: 1}",
    );
    let c = ClusterConfig::from_yaml("c.yaml", &text).unwrap();
    let p = &c.scheduler.preemption;
    assert_eq!(p.kill_wait, Duration::from_secs(30));
    assert_eq!(p.capacity.monitoring_interval, Duration::from_secs(1));
    assert_eq!(p.capacity.total_preemption_per_round, 0.5);
    assert_eq!(p.capacity.max_ignored_over_capacity, 0.0);
    assert_eq!(p.capacity.natural_termination_factor, 1.0);
}

#[test]
fn an_unknown_field_and_a_malformed_capacity_are_syntax_errors_with_their_path() {
    let text = format!("{HEAD}queues:\n  - {{name: a, capacity: 100, user_limit_factr: 2}}\n");
    let found = problems(&text);
    assert!(found[0].0.starts_with("queues.a"), "{found:?}");
    assert!(found[0].1.contains("user_limit_factr"), "{found:?}");
    let text = format!("{HEAD}queues:\n  - {{name: a, capacity: lots}}\n");
    let found = problems(&text);
    assert!(found[0].1.contains("`lots` is not a capacity"), "{found:?}");
}

/// Node labels (YARN's partitions): `accessible_labels` per queue with its capacity and max
/// capacity in each label's partition, resolved down the tree as YARN's absolute capacities
/// per label (`CapacitySchedulerConfiguration.getLabeledQueueCapacity`,
/// `getLabeledQueueMaximumCapacity`), inherited with capacity 0 when absent
/// (`getAccessibleNodeLabels` falls back to the parent's), and `default_label` inherited.
const LABELLED: &str = "version: 1\nscheduler: {mode: capacity, node_labels: {gpu: {exclusive: false}}}\nnodes:\n  - {count: 8, resources: {cpu: 10000, memory: 10240}}\n  - {count: 2, resources: {cpu: 10000, memory: 10240}, label: gpu}\n  - {count: 2, resources: {cpu: 10000, memory: 10240}, label: ssd}\n";

#[test]
fn label_capacities_resolve_down_the_tree() {
    let text = format!(
        "{LABELLED}queues:\n  - {{name: ml, capacity: 50, default_label: gpu, accessible_labels: {{gpu: {{capacity: 80}}}}, children: [{{name: train, capacity: 50, accessible_labels: {{gpu: {{capacity: 75, max_capacity: 90}}}}}}, {{name: serve, capacity: 50, accessible_labels: {{gpu: {{capacity: 25}}}}}}]}}\n  - {{name: etl, capacity: 50, accessible_labels: {{gpu: {{capacity: 20, max_capacity: 40}}, ssd: {{capacity: 100}}}}}}\n"
    );
    let c = ClusterConfig::from_yaml("c.yaml", &text).unwrap_or_else(|e| panic!("{e}"));
    let label = |p: &str, l: &str| q(&c, p).capacity.as_ref().unwrap().labels.get(l).cloned();
    let train = label("root.ml.train", "gpu").unwrap();
    close(train.absolute_capacity, 0.8 * 0.75);
    close(train.absolute_max_capacity, 0.9);
    close(label("root.etl", "gpu").unwrap().absolute_max_capacity, 0.4);
    close(label("root.etl", "ssd").unwrap().absolute_capacity, 1.0);
    assert!(label("root.ml", "ssd").is_none(), "ml lists only gpu");
    assert!(label("root.ml.train", "ssd").is_none(), "nor may its children");
    // default_label is inherited.
    assert_eq!(q(&c, "root.ml.serve").capacity.as_ref().unwrap().default_label.as_deref(), Some("gpu"));
    assert_eq!(q(&c, "root.etl").capacity.as_ref().unwrap().default_label, None);
    // Without accessible_labels: every label of the parent, capacity 0, max 100.
    let plain = cluster_labelled("  - {name: a, capacity: 60}\n  - {name: b, capacity: 40}\n");
    let a = q(&plain, "root.a").capacity.as_ref().unwrap();
    assert_eq!(a.labels.keys().cloned().collect::<Vec<_>>(), ["gpu", "ssd"]);
    close(a.labels["gpu"].absolute_capacity, 0.0);
    close(a.labels["gpu"].absolute_max_capacity, 1.0);
}

fn cluster_labelled(queues: &str) -> ClusterConfig {
    let text = format!("{LABELLED}queues:\n{queues}");
    ClusterConfig::from_yaml("c.yaml", &text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

#[test]
fn every_label_rule_names_its_field() {
    let labelled = |queues: &str, path: &str, message: &str| {
        check_file(&format!("{LABELLED}queues:\n{queues}"), path, message)
    };
    labelled(
        "  - {name: a, capacity: 50, accessible_labels: {gpu: {capacity: 60}}}\n  - {name: b, capacity: 50, accessible_labels: {gpu: {capacity: 30}}}\n",
        "queues",
        "in label gpu's partition add up to 90, not 100",
    );
    labelled(
        "  - {name: a, capacity: 100, accessible_labels: {fpga: {capacity: 100}}}\n",
        "queues.a.accessible_labels.fpga",
        "no node has label `fpga`",
    );
    labelled(
        "  - {name: a, capacity: 100, accessible_labels: {gpu: {capacity: 100}}, children: [{name: x, capacity: 100, accessible_labels: {ssd: {capacity: 0}}}]}\n",
        "queues.a.children.x.accessible_labels.ssd",
        "the parent cannot use label `ssd`",
    );
    labelled(
        "  - {name: a, capacity: 100, accessible_labels: {gpu: {capacity: 100, max_capacity: 50}}}\n",
        "queues.a.accessible_labels.gpu.max_capacity",
        "below capacity 100",
    );
    labelled(
        "  - {name: a, capacity: 100, accessible_labels: {gpu: {capacity: 100}}, default_label: ssd}\n",
        "queues.a.default_label",
        "not one of this queue's accessible_labels",
    );
    labelled(
        "  - {name: a, capacity: 100, accessible_labels: {gpu: {capacity: 0}}, children: [{name: x, capacity: 100, accessible_labels: {gpu: {capacity: 100}}}]}\n",
        "queues.a.children",
        "root.a has no capacity in label gpu's partition",
    );
    check_file(
        "version: 1\nscheduler: {mode: capacity, node_labels: {fpga: {exclusive: true}}}\nnodes: [{count: 1, resources: {cpu: 1000, memory: 1024}}]\nqueues: [{name: a, capacity: 100}]\n",
        "scheduler.node_labels.fpga",
        "no node has label `fpga`",
    );
    check_file(
        "version: 1\nnodes: [{count: 1, resources: {cpu: 1000, memory: 1024}, label: gpu}]\nqueues: [{name: a, default_label: gpu}]\n",
        "queues.a.default_label",
        "set scheduler.mode: capacity",
    );
}
