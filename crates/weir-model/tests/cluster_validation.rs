//! Validation of cluster files: every rule, every problem reported at once, and errors that name
//! the file and the dotted path inside it.

use proptest::prelude::*;
use weir_model::{ClusterConfig, ModelError};

const NODES: &str = "nodes:\n  - {count: 4, resources: {cpu: 8000, memory: 32g}}\n";

/// A valid cluster file around the given `queues:` items (YAML flow or block list items).
fn with_queues(queues: &str) -> String {
    format!("version: 1\n{NODES}queues:\n{queues}")
}

/// A valid cluster file with extra top-level sections (scheduler, tiers) and one leaf.
fn with_sections(sections: &str) -> String {
    format!("version: 1\n{sections}\n{NODES}queues:\n  - {{name: a}}\n")
}

fn problems(yaml: &str) -> Vec<(String, String)> {
    match ClusterConfig::from_yaml("c.yaml", yaml) {
        Ok(_) => panic!("expected problems, but this validated:\n{yaml}"),
        Err(e) => e.problems().into_iter().map(|p| (p.path, p.message)).collect(),
    }
}

/// `yaml` fails with exactly one problem, at `path`, whose message contains `message`.
#[track_caller]
fn check(yaml: &str, path: &str, message: &str) {
    let found = problems(yaml);
    assert_eq!(found.len(), 1, "expected one problem at {path}, got {found:#?}\nin:\n{yaml}");
    assert_eq!(found[0].0, path, "wrong path for {found:#?}\nin:\n{yaml}");
    assert!(found[0].1.contains(message), "message {:?} lacks {message:?}", found[0].1);
}

fn check_invalid(yaml: &str, path: &str, message: &str) {
    assert!(matches!(ClusterConfig::from_yaml("c.yaml", yaml), Err(ModelError::Invalid { .. })), "{yaml}");
    check(yaml, path, message);
}

fn check_syntax(yaml: &str, path: &str, message: &str) {
    assert!(matches!(ClusterConfig::from_yaml("c.yaml", yaml), Err(ModelError::Syntax { .. })), "{yaml}");
    check(yaml, path, message);
}

#[test]
fn the_base_documents_are_valid() {
    ClusterConfig::from_yaml("c.yaml", &with_queues("  - {name: a}\n")).unwrap();
    ClusterConfig::from_yaml("c.yaml", &with_sections("")).unwrap();
}

#[test]
fn file_level_rules() {
    check_invalid(&with_sections("").replace("version: 1", "version: 2"), "version", "unsupported version 2");
    check_invalid(&format!("version: 1\n{NODES}queues: []\n"), "queues", "no queues");
    check_invalid(&format!("version: 1\n{NODES}"), "queues", "no queues");
    check_invalid("version: 1\nqueues:\n  - {name: a}\n", "nodes", "no nodes");
    check_invalid("version: 1\nnodes: []\nqueues:\n  - {name: a}\n", "nodes", "no nodes");
    check_syntax("queues:\n  - {name: a}\n", "", "missing field `version`");
}

#[test]
fn node_rules() {
    let node = |n: &str| format!("version: 1\nnodes:\n  - {n}\nqueues:\n  - {{name: a}}\n");
    check_invalid(&node("{count: 0, resources: {cpu: 1000}}"), "nodes[0].count", "at least 1");
    check_invalid(&node("{count: 2, resources: {}}"), "nodes[0].resources", "needs some cpu or memory");
    check_invalid(&node("{count: 2, resources: {cpu: 0, memory: 0}}"), "nodes[0].resources", "cpu or memory");
    // The cluster's totals must be countable: usage and demand are summed exactly.
    check_invalid(
        &node("{count: 3, resources: {memory: 9223372036854775807}}"),
        "nodes",
        "the cluster's total memory does not fit in 64 bits",
    );
    check_invalid(
        "version: 1\nnodes:\n  - {count: 1, resources: {cpu: 18446744073709551000}}\n  - {count: 1, resources: {cpu: 1000}}\nqueues:\n  - {name: a}\n",
        "nodes",
        "total cpu",
    );
    // `count` defaults to one node.
    let c = ClusterConfig::from_yaml("c.yaml", &node("{resources: {cpu: 1000}}")).unwrap();
    assert_eq!(c.node_count(), 1);
}

/// Issue 13: `count: 4294967295` in a 119-byte file was accepted, and `weir simulate` then
/// allocated a record per node until the process aborted.
#[test]
fn the_node_count_is_limited() {
    let limit = weir_model::MAX_NODES;
    let node = |n: &str| format!("version: 1\nnodes:\n  - {n}\nqueues:\n  - {{name: a}}\n");
    check_invalid(
        &node("{count: 4294967295, resources: {cpu: 8000, memory: 32g}}"),
        "nodes[0].count",
        &format!("4294967295 nodes is more than the {limit} weir models in one cluster"),
    );
    // Groups within the limit that add up past it are refused as a whole.
    let half = limit / 2 + 1;
    let two = format!(
        "version: 1\nnodes:\n  - {{count: {half}, resources: {{cpu: 1000}}}}\n  - {{count: {half}, resources: {{cpu: 2000}}}}\nqueues:\n  - {{name: a}}\n"
    );
    check_invalid(&two, "nodes", &format!("{} nodes is more than the {limit}", 2 * half));
    let at_limit = node(&format!("{{count: {limit}, resources: {{cpu: 1000}}}}"));
    assert_eq!(ClusterConfig::from_yaml("c.yaml", &at_limit).unwrap().node_count(), limit);
}

#[test]
fn scheduler_rules() {
    check_invalid(
        &with_sections("scheduler: {mode: capacity}"),
        "queues.a.capacity",
        "capacity mode needs a capacity",
    );
    check_invalid(
        &with_sections("scheduler: {root_policy: fifo}"),
        "scheduler.root_policy",
        "leaf queues only",
    );
    check_invalid(
        &with_sections("scheduler: {increment: {cpu: 0, memory: 512}}"),
        "scheduler.increment.cpu",
        "must be positive",
    );
    check_invalid(
        &with_sections("scheduler: {user_max_running_apps: 0}"),
        "scheduler.user_max_running_apps",
        "at least 1",
    );
    for bad in ["1.5", "-0.1", ".nan"] {
        check_invalid(
            &with_sections(&format!("scheduler: {{preemption: {{utilization_threshold: {bad}}}}}")),
            "scheduler.preemption.utilization_threshold",
            "not a fraction",
        );
        check_invalid(
            &with_sections(&format!("scheduler: {{preemption: {{fair_share_preemption_threshold: {bad}}}}}")),
            "scheduler.preemption.fair_share_preemption_threshold",
            "not a fraction",
        );
    }
    check_invalid(
        &with_sections("scheduler: {root_policy: priority}"),
        "scheduler.root_policy",
        "priority applies to leaf queues only",
    );
    for bad in ["0", "1.5", "-0.5"] {
        check_invalid(
            &with_sections(&format!("scheduler: {{queue_max_am_share_default: {bad}}}")),
            "scheduler.queue_max_am_share_default",
            "not a fraction in (0, 1]",
        );
    }
    check_invalid(
        &with_sections("scheduler: {reservable_nodes: 2}"),
        "scheduler.reservable_nodes",
        "fraction",
    );
    check_syntax(&with_sections("scheduler: {mode: wild}"), "scheduler.mode", "unknown variant `wild`");
    check_syntax(
        &with_sections("scheduler: {rounding: round}"),
        "scheduler.rounding",
        "expected one of yarn, exact",
    );
}

#[test]
fn tier_table_rules() {
    check_invalid(&with_sections("tiers: {4: {priority: 1}}"), "tiers.4", "numbered 1 (most critical) to 3");
    check_invalid(&with_sections("tiers: {0: {priority: 1}}"), "tiers.0", "numbered 1");
    check_invalid(
        &with_sections("tiers: {2: {fair_share_preemption_threshold: 2}}"),
        "tiers.2.fair_share_preemption_threshold",
        "not a fraction",
    );
    for bad in ["0", "101", "-5"] {
        check_invalid(
            &with_sections(&format!("tiers: {{1: {{percentile: {bad}}}}}")),
            "tiers.1.percentile",
            "percentage",
        );
    }
}

#[test]
fn queue_rules() {
    let cases: &[(&str, &str, &str)] = &[
        ("- {name: a, weight: -1}", "queues.a.weight", "-1 is not a weight"),
        ("- {name: a, weight: .nan}", "queues.a.weight", "NaN is not a weight"),
        ("- {name: a, weight: .inf}", "queues.a.weight", "inf is not a weight"),
        ("- {name: a, max_am_share: 0}", "queues.a.max_am_share", "not a fraction in (0, 1]"),
        ("- {name: a, max_am_share: 1.5}", "queues.a.max_am_share", "not a fraction in (0, 1]"),
        ("- {name: a, max_am_share: -0.5}", "queues.a.max_am_share", "use -1 to turn the AM-share check off"),
        ("- {name: a, tier: 0}", "queues.a.tier", "0 is not a tier"),
        ("- {name: a, tier: 4}", "queues.a.tier", "4 is not a tier"),
        (
            "- {name: a, fair_share_preemption_threshold: 1.1}",
            "queues.a.fair_share_preemption_threshold",
            "fraction",
        ),
        (
            "- {name: a, fair_share_preemption_threshold: -1}",
            "queues.a.fair_share_preemption_threshold",
            "fraction",
        ),
        ("- {name: a.b}", "queues.a.b.name", "`a.b` is not a queue name"),
        ("- {name: 'a b'}", "queues.a b.name", "without dots, spaces, commas, quotes or line breaks"),
        ("- {name: ''}", "queues.<unnamed>.name", "non-empty"),
        ("- {name: root}", "queues.root.name", "`root` is the implicit top"),
        ("- {name: a}\n  - {name: a}", "queues.a.name", "a sibling is also named `a`"),
        (
            "- {name: a, policy: fifo, children: [{name: x}]}",
            "queues.a.policy",
            "fifo applies to leaf queues only",
        ),
        (
            "- {name: a, policy: priority, children: [{name: x}]}",
            "queues.a.policy",
            "priority applies to leaf queues only",
        ),
        // YARN's FairSharePolicy.isChildPolicyAllowed refuses a drf child of a fair parent
        // (root is fair unless scheduler.root_policy says otherwise).
        ("- {name: a, policy: drf}", "queues.a.policy", "drf under a fair parent"),
        (
            "- {name: a, policy: drf, children: [{name: x, policy: drf}]}",
            "queues.a.policy",
            "make every ancestor drf (scheduler.root_policy: drf for root)",
        ),
        ("- {name: a, tier: 1, children: [{name: x}]}", "queues.a.tier", "tiers are set on leaf queues"),
        (
            "- {name: a, allow_preemption_from: false, children: [{name: x, allow_preemption_from: true}]}",
            "queues.a.children.x.allow_preemption_from",
            "a parent queue does not allow preemption",
        ),
    ];
    for (queues, path, message) in cases {
        check_invalid(&with_queues(&format!("  {queues}\n")), path, message);
    }
}

#[test]
fn a_drf_queue_under_a_fair_parent_is_only_a_warning_under_exact_rounding() {
    let yaml = format!(
        "version: 1\nscheduler: {{rounding: exact}}\n{NODES}queues:\n  - {{name: a, policy: drf}}\n  - {{name: b}}\n"
    );
    let c = ClusterConfig::from_yaml("c.yaml", &yaml).expect("valid under exact rounding");
    assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
    assert_eq!(c.warnings[0].path, "queues.a.policy");
    assert!(c.warnings[0].message.contains("YARN refuses this layout"), "{}", c.warnings[0].message);
    // A drf root makes the same tree one YARN accepts: no warning.
    let drf_root = yaml.replace("rounding: exact", "rounding: exact, root_policy: drf");
    assert!(ClusterConfig::from_yaml("c.yaml", &drf_root).unwrap().warnings.is_empty());
}

#[test]
fn zero_running_apps_and_am_share_off_are_valid() {
    let c = ClusterConfig::from_yaml(
        "c.yaml",
        &with_queues("  - {name: closed, max_running_apps: 0}\n  - {name: open, max_am_share: -1}\n"),
    )
    .expect("valid");
    assert_eq!(c.queues[1].max_running_apps, Some(0));
    assert_eq!((c.queues[2].max_am_share, c.queues[2].am_share), (Some(-1.0), None));
}

#[test]
fn fifo_and_duplicates_are_fine_where_allowed() {
    // fifo on a leaf; the same name under different parents.
    let yaml = with_queues(
        "  - {name: a, children: [{name: x, policy: fifo}]}\n  - {name: b, children: [{name: x}]}\n",
    );
    let c = ClusterConfig::from_yaml("c.yaml", &yaml).unwrap();
    assert_eq!(c.queues.len(), 5);
}

#[test]
fn a_forbidden_true_is_caught_at_any_depth() {
    let yaml = with_queues(
        "  - name: a\n    allow_preemption_from: false\n    children:\n      - name: p\n        children:\n          - {name: t, allow_preemption_from: true}\n",
    );
    check_invalid(&yaml, "queues.a.children.p.children.t.allow_preemption_from", "does not allow preemption");
}

#[test]
fn percent_limits() {
    for bad in ["'25'", "abc%", "'150%'", "'-5%'", "''"] {
        check_invalid(
            &with_queues(&format!("  - {{name: a, min: {bad}}}\n")),
            "queues.a.min",
            "percentage of the cluster",
        );
        check_invalid(
            &with_queues(&format!("  - {{name: a, max: {bad}}}\n")),
            "queues.a.max",
            "percentage of the cluster",
        );
    }
    for good in ["'0%'", "25%", "'12.5%'", "'100%'", "' 30 % '"] {
        ClusterConfig::from_yaml("c.yaml", &with_queues(&format!("  - {{name: a, max: {good}}}\n"))).unwrap();
    }
}

#[test]
fn every_problem_is_reported_at_once_in_file_order() {
    let yaml = "version: 3
scheduler: {preemption: {utilization_threshold: 2}}
tiers: {7: {priority: 1}}
nodes:
  - {count: 0, resources: {cpu: 1000}}
queues:
  - name: ads
    policy: fifo
    children:
      - name: ranking
        children:
          - {name: tier1, tier: 1, weight: -2, max_am_share: 3}
          - {name: tier1, tier: 9, max: 'lots%'}
  - {name: root, max_running_apps: 0}
";
    // (`max_running_apps: 0` is valid: the queue admits nothing, as in YARN.)
    let found: Vec<String> = problems(yaml).into_iter().map(|(p, _)| p).collect();
    assert_eq!(
        found,
        [
            "version",
            "scheduler.preemption.utilization_threshold",
            "tiers.7",
            "nodes[0].count",
            "queues.ads.policy",
            "queues.ads.children.ranking.children.tier1.weight",
            "queues.ads.children.ranking.children.tier1.max_am_share",
            "queues.ads.children.ranking.children.tier1.name",
            "queues.ads.children.ranking.children.tier1.max",
            "queues.ads.children.ranking.children.tier1.tier",
            "queues.root.name",
        ]
    );
}

#[test]
fn errors_name_the_file_and_the_path() {
    let yaml = with_queues(
        "  - name: ads\n    children:\n      - name: ranking\n        children:\n          - {name: tier1, weight: -1}\n",
    );
    let err = ClusterConfig::from_yaml("conf/prod.yaml", &yaml).unwrap_err();
    assert_eq!(err.file(), "conf/prod.yaml");
    let text = err.to_string();
    assert!(
        text.contains(
            "conf/prod.yaml: queues.ads.children.ranking.children.tier1.weight: -1 is not a weight"
        ),
        "{text}"
    );
    assert!(text.starts_with("conf/prod.yaml: 1 problem:\n"), "{text}");
}

#[test]
fn unknown_fields_are_rejected_with_their_path() {
    let cases: &[(&str, &str)] = &[
        ("version: 1\ncolour: blue\n", "colour"),
        ("version: 1\nscheduler: {mod: fair}\n", "scheduler.mod"),
        ("version: 1\nscheduler: {preemption: {enable: true}}\n", "scheduler.preemption.enable"),
        ("version: 1\ntiers: {1: {prio: 3}}\n", "tiers.1.prio"),
        ("version: 1\nnodes:\n  - {cont: 3, resources: {cpu: 1}}\n", "nodes[0].cont"),
        ("version: 1\nnodes:\n  - {resources: {cpus: 1}}\n", "nodes[0].resources.cpus"),
    ];
    for (yaml, path) in cases {
        let field = path.rsplit('.').next().unwrap().rsplit(']').next().unwrap().trim_start_matches('.');
        check_syntax(yaml, path, &format!("unknown field `{field}`"));
    }
    // Inside the queue tree the path names the queues, as validation errors do.
    let deep = with_queues(
        "  - name: ads\n    children:\n      - name: ranking\n        children:\n          - {name: tier1, wieght: 2}\n",
    );
    check_syntax(
        &deep,
        "queues.ads.children.ranking.children.tier1.wieght",
        "unknown field `wieght`, expected one of",
    );
    check_syntax(
        &with_queues("  - {name: a, min: {cpu: 1, mem: 2}}\n"),
        "queues.a.min.mem",
        "unknown field `mem`, expected one of cpu, memory, gpu",
    );
}

#[test]
fn syntax_errors_are_one_line_with_the_location() {
    let yaml = with_queues("  - name: a\n    weight: heavy\n");
    let err = ClusterConfig::from_yaml("c.yaml", &yaml).unwrap_err();
    let text = err.to_string();
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.starts_with("c.yaml: queues.a.weight: "), "{text}");
    assert!(text.ends_with("at line 6, column 13"), "{text}");
    assert!(!text.contains("<input>"), "{text}");
}

#[test]
fn wrong_types_say_what_was_expected() {
    check_syntax(
        &with_queues("  - {name: a, children: ~}\n"),
        "queues.a.children",
        "expected sequence start",
    );
    check_syntax(&with_queues("  - {name: a, max: 3}\n"), "queues.a.max", "expected a resource map such as");
    check_syntax(
        &with_queues("  - {name: a, max_running_apps: many}\n"),
        "queues.a.max_running_apps",
        "line 5",
    );
    check_syntax(
        &with_queues("  - {name: a, policy: lifo}\n"),
        "queues.a.policy",
        "expected one of fair, drf, fifo",
    );
    check_syntax(&with_queues("  - {name: a, children: 3}\n"), "queues.a.children", "line 5");
}

#[test]
fn a_queue_without_a_usable_name_keeps_its_index() {
    check_syntax(&with_queues("  - {name: a}\n  - {weight: 2}\n"), "queues[1]", "missing field `name`");
    // Both items' errors are reported (one per list item), each under its own index.
    let yaml = with_queues("  - {name: a, children: [{name: x}, {name: y, weigth: 1}]}\n  - {wat: 1}\n");
    let err = ClusterConfig::from_yaml("c.yaml", &yaml).expect_err("invalid");
    let found: Vec<(String, String)> = err.problems().into_iter().map(|p| (p.path, p.message)).collect();
    assert_eq!(found.len(), 2, "{found:#?}");
    assert_eq!(found[0].0, "queues.a.children.y.weigth");
    assert!(found[0].1.contains("unknown field `weigth`"), "{found:#?}");
    assert_eq!(found[1].0, "queues[1].wat");
    assert!(found[1].1.contains("unknown field `wat`"), "{found:#?}");
}

#[test]
fn queue_names_that_yaml_could_read_as_booleans_still_name_the_path() {
    check_syntax(
        &with_queues("  - {name: on, children: [{name: y, children: [{name: no, weigth: 1}]}]}\n"),
        "queues.on.children.y.children.no.weigth",
        "unknown field `weigth`",
    );
}

#[test]
fn an_empty_file_says_so() {
    for text in ["", "\n\n", "# only a comment\n"] {
        check_syntax(text, "", "the file is empty");
    }
}

#[test]
fn memory_accepts_units() {
    let node = |m: &str| {
        format!("version: 1\nnodes:\n  - {{resources: {{memory: {m}}}}}\nqueues:\n  - {{name: a}}\n")
    };
    for (m, mib) in
        [("512m", 512), ("8g", 8192), ("64g", 65536), ("1t", 1 << 20), ("300", 300), ("'2Gi'", 2048)]
    {
        let c = ClusterConfig::from_yaml("c.yaml", &node(m)).unwrap_or_else(|e| panic!("{m}: {e}"));
        assert_eq!(c.total_resources().memory, mib, "{m}");
    }
    check_syntax(&node("8.5g"), "nodes[0].resources.memory", "`8.5g` is not a memory amount");
    check_syntax(&node("-3"), "nodes[0].resources.memory", "expected a memory amount");
    check_syntax(&node("lots"), "nodes[0].resources.memory", "`lots` is not a memory amount");
}

#[test]
fn durations_need_units() {
    let q = |d: &str| with_queues(&format!("  - {{name: a, fair_share_preemption_timeout: {d}}}\n"));
    for (d, ms) in [("15s", 15_000), ("500ms", 500), ("2m", 120_000), ("1h", 3_600_000), ("1d", 86_400_000)] {
        let c = ClusterConfig::from_yaml("c.yaml", &q(d)).unwrap();
        assert_eq!(c.queues[1].fair_share_preemption_timeout.map(|t| t.as_millis()), Some(ms), "{d}");
    }
    check_syntax(&q("15"), "queues.a.fair_share_preemption_timeout", "`15` is not a duration");
    check_syntax(&q("1.5h"), "queues.a.fair_share_preemption_timeout", "not a duration");
    check_syntax(
        &with_sections("scheduler: {preemption: {kill_wait: soon}}"),
        "scheduler.preemption.kill_wait",
        "`soon` is not a duration",
    );
}

proptest! {
    /// However many weights are wrong, and wherever they are in the tree, each one is reported
    /// at its own path, in file order, and nothing else is.
    #[test]
    fn every_bad_weight_is_reported(weights in prop::collection::vec(prop::collection::vec(-2i32..4, 1..4), 1..5)) {
        let mut queues = String::new();
        let mut expected = Vec::new();
        for (o, projects) in weights.iter().enumerate() {
            queues += &format!("  - name: org{o}\n    children:\n");
            for (p, w) in projects.iter().enumerate() {
                queues += &format!("      - {{name: p{p}, weight: {w}}}\n");
                if *w < 0 {
                    expected.push(format!("queues.org{o}.children.p{p}.weight"));
                }
            }
        }
        let yaml = with_queues(&queues);
        match ClusterConfig::from_yaml("c.yaml", &yaml) {
            Ok(_) => prop_assert!(expected.is_empty()),
            Err(e) => {
                let found: Vec<String> = e.problems().into_iter().map(|p| p.path).collect();
                prop_assert_eq!(found, expected);
            }
        }
    }
}

/// A cluster with an `ads.ranking` project of three tier leaves, an `ml` project with one untiered
/// leaf, and the given `placement:` items.
fn with_placement(rules: &str) -> String {
    format!(
        "version: 1\n{NODES}queues:\n  - {{name: ads, children: [{{name: ranking, children: [{{name: tier1, tier: 1}}, {{name: tier2, tier: 2}}, {{name: tier3, tier: 3}}]}}]}}\n  - {{name: ml, children: [{{name: shared}}]}}\nplacement:\n{rules}"
    )
}

#[test]
fn placement_rules() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "- {project: ml, queue: root.ml}",
            "placement[0].queue",
            "root.ml is not a leaf queue; work goes to leaves: root.ml.shared",
        ),
        (
            "- {project: ml, queue: root.ml.gpu}",
            "placement[0].queue",
            "no queue root.ml.gpu in the cluster; the leaves under root.ml are root.ml.shared",
        ),
        (
            "- {project: ml, queue: root.nowhere}",
            "placement[0].queue",
            "no queue root.nowhere in the cluster",
        ),
        (
            "- {project: ml, queue: 'root..x'}",
            "placement[0].queue",
            "`root..x` is not a queue path: write it like root.ads.ranking.tier1",
        ),
        (
            "- {project: ml, tier: 4, queue: root.ml.shared}",
            "placement[0].tier",
            "4 is not a tier: tiers are numbered 1 (most critical) to 3",
        ),
        (
            "- {project: 'ads ranking', queue: root.ml.shared}",
            "placement[0].project",
            "`ads ranking` is not a project: write its queue path without `root`, e.g. ads.ranking",
        ),
        (
            "- {project: '', queue: root.ml.shared}",
            "placement[0].project",
            "`` is not a project: write its queue path without `root`, e.g. ads.ranking",
        ),
        (
            "- {project: ads.ranking, tier: 1, queue: root.ads.ranking.tier2}",
            "placement[0].queue",
            "the rule sends tier-1 work to root.ads.ranking.tier2, a tier-2 queue",
        ),
    ];
    for (rules, path, message) in cases {
        let found = problems(&with_placement(&format!("  {rules}\n")));
        assert_eq!(found, [(path.to_string(), message.to_string())], "{rules}");
    }
    check_syntax(
        &with_placement("  - {project: ml, queue: root.ml.shared, prio: 1}\n"),
        "placement[0].prio",
        "unknown field `prio`",
    );
    check_syntax(&with_placement("  - {project: ml}\n"), "placement[0]", "missing field `queue`");
}

#[test]
fn placement_takes_the_first_matching_rule_else_the_default_rule() {
    let c = ClusterConfig::from_yaml(
        "c.yaml",
        &with_placement(
            "  - {project: ads.ranking, tier: 1, queue: root.ml.shared}\n  - {project: root.ml, queue: root.ads.ranking.tier3}\n  - {project: ml, queue: root.ml.shared}\n",
        ),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.placement.len(), 3);
    assert_eq!(c.placement[1].project, "ml", "`root.` is dropped from projects");
    let place = |project: &str, tier: u8| {
        let p = c.place(project, tier);
        (p.queue.to_string(), p.rule)
    };
    // A tiered rule matches its tier only; the default rule covers the others.
    assert_eq!(place("ads.ranking", 1), ("root.ml.shared".to_string(), Some(0)));
    assert_eq!(place("ads.ranking", 2), ("root.ads.ranking.tier2".to_string(), None));
    // A rule without a tier matches every tier; the first match wins over the later rule.
    assert_eq!(place("ml", 2), ("root.ads.ranking.tier3".to_string(), Some(1)));
    assert_eq!(place("root.ml", 1), ("root.ads.ranking.tier3".to_string(), Some(1)));
    // The default rule's queue need not exist: callers check.
    assert_eq!(place("search", 3), ("root.search.tier3".to_string(), None));
}
