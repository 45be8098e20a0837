//! The plan of the example cluster from the example history: its report as a golden file, and
//! the figures it rests on.
//!
//! Regenerate after an intended change with
//! `INSTA_UPDATE=always cargo test -p weir-planner --test report` and review the diff.

use weir_model::ClusterConfig;
use weir_planner::{plan, report_html, NameKey, PlanInput, PlanSettings, QueueStatus, UsageHistory, Verdict};

fn example_plan() -> weir_planner::Plan {
    let cfg =
        ClusterConfig::from_yaml("examples/cluster.yaml", include_str!("../../../examples/cluster.yaml"))
            .unwrap();
    let settings =
        PlanSettings::from_yaml("examples/plan.yaml", include_str!("../../../examples/plan.yaml"), &cfg)
            .unwrap();
    assert_eq!(settings, PlanSettings::defaults_for(&cfg), "examples/plan.yaml spells out the defaults");
    let csv = include_str!("../../../examples/usage.csv");
    let history = UsageHistory::read_csv(csv.as_bytes(), "examples/usage.csv", NameKey::default()).unwrap();
    plan(&PlanInput {
        cluster: &cfg,
        history: &history,
        history_name: "examples/usage.csv",
        settings: &settings,
        workload: None,
        threads: 2,
    })
    .unwrap()
}

#[test]
fn golden_report_of_the_example_plan() {
    let p = example_plan();
    insta::assert_snapshot!("report.html", report_html(&p, "examples/cluster.yaml", None));
}

#[test]
fn the_example_history_plans_nine_leaves_in_tier_order() {
    let p = example_plan();
    let planned = p.queues.iter().filter(|q| q.status == QueueStatus::Planned).count();
    assert_eq!(planned, 9);
    assert!(p.tier_order.ok, "{:?}", p.tier_order.violations);
    assert_eq!(p.cluster.verdict, Verdict::Keep);
    // Every planned leaf covers at least its percentile of in-use time and never exceeds its peak.
    for q in p.queues.iter().filter(|q| q.status == QueueStatus::Planned) {
        assert!(
            q.instances >= 1 && q.instances <= q.peak_instances,
            "{}: {} of peak {}",
            q.queue,
            q.instances,
            q.peak_instances
        );
    }
    let html = report_html(&p, "examples/cluster.yaml", None);
    assert!(
        html.contains("<svg")
            && !html.contains("<script")
            && !html.contains("http://")
            && !html.contains("https://")
    );
}

#[test]
fn a_validated_report_shows_current_and_planned_side_by_side() {
    let p = example_plan();
    let cmp = weir_planner::Comparison {
        description: "examples/workload.yaml replayed for 7 days (seed 1)".into(),
        rows: vec![["tier 1 SLO success".into(), "99.9%".into(), "99.5%".into()]],
    };
    let html = report_html(&p, "examples/cluster.yaml", Some(&cmp));
    let at = html.find("Current and planned settings, replayed").expect("the comparison section");
    assert!(at < html.find(">Cluster<").expect("the cluster section"), "it opens the page");
    for cell in ["tier 1 SLO success", "99.9%", "99.5%", "examples/workload.yaml replayed for 7 days"] {
        assert!(html.contains(cell), "{cell}");
    }
    assert!(!report_html(&p, "examples/cluster.yaml", None).contains("Current and planned settings"));
}
