//! Tests of the metrics registry and its rendering.

use super::*;
use weir_api::QueueInfo;

#[tokio::test]
async fn queue_gauges_come_from_the_snapshot_in_base_units() {
    let m = Metrics::new();
    m.run_finished(1, "succeeded", Some(true));
    m.run_finished(1, "failed", Some(false));
    m.preempted("default", "fair_share");
    let res = |cpu, memory| Resources { cpu, memory, gpu: 0 };
    let q = QueueInfo {
        path: "root.ads.tier1".into(),
        leaf: true,
        tier: Some(1),
        weight: 3.0,
        min: res(2000, 1024),
        max: Resources { cpu: 6000, memory: u64::MAX, gpu: u64::MAX },
        max_running_apps: Some(4),
        usage: res(1500, 2048),
        demand: res(3000, 4096),
        steady_fair_share: res(4000, 8192),
        instantaneous_fair_share: res(8000, 16384),
        running_apps: 2,
        pending_apps: 1,
    };
    let parent =
        QueueInfo { path: "root.ads".into(), leaf: false, tier: None, max_running_apps: None, ..q.clone() };
    let c = ClusterQueues {
        cluster: "default".into(),
        as_of_ms: Some(1_000),
        total: res(8000, 16384),
        used: res(1500, 2048),
        queues: vec![parent, q],
    };
    let runs = [
        RunCount {
            project: "ads".into(),
            tier: 2,
            state: "waiting".into(),
            runs: 3,
            oldest_submitted_ms: 500,
        },
        RunCount {
            project: "web".into(),
            tier: 2,
            state: "waiting".into(),
            runs: 1,
            oldest_submitted_ms: 2_000,
        },
    ];
    let view = StoreView { clusters: std::slice::from_ref(&c), unfinished: &runs };
    let text = m.render(Some(view), 3_500, Format::OpenMetrics).await;
    for line in [
        "weir_queue_usage{cluster=\"default\",queue=\"root.ads.tier1\",tier=\"1\",resource=\"cpu\",unit=\"core\"} 1.5",
        "weir_queue_usage{cluster=\"default\",queue=\"root.ads.tier1\",tier=\"1\",resource=\"memory\",unit=\"byte\"} 2147483648.0",
        "weir_queue_min_resources{cluster=\"default\",queue=\"root.ads.tier1\",tier=\"1\",resource=\"cpu\",unit=\"core\"} 2.0",
        "weir_queue_max_resources{cluster=\"default\",queue=\"root.ads.tier1\",tier=\"1\",resource=\"cpu\",unit=\"core\"} 6.0",
        "weir_queue_weight{cluster=\"default\",queue=\"root.ads.tier1\",tier=\"1\"} 3.0",
        "weir_queue_max_running_apps{cluster=\"default\",queue=\"root.ads.tier1\",tier=\"1\"} 4",
        // A queue without a tier has no tier label; one without a limit has no limit series.
        "weir_queue_weight{cluster=\"default\",queue=\"root.ads\"} 3.0",
        "weir_queue_running_apps{cluster=\"default\",queue=\"root.ads.tier1\",tier=\"1\"} 2",
        "weir_queue_snapshot_age_seconds{cluster=\"default\"} 2.5",
        "weir_slo_runs_total{tier=\"1\",outcome=\"met\"} 1",
        "weir_slo_runs_total{tier=\"1\",outcome=\"missed\"} 1",
        "weir_runs_finished_total{tier=\"1\",state=\"failed\"} 1",
        "weir_preemptions_total{cluster=\"default\",reason=\"fair_share\"} 1",
        "weir_runs{tier=\"2\",state=\"waiting\"} 4",
        // The oldest of both projects' waiting tier-2 runs: submitted at 0.5 s, now 3.5 s.
        "weir_runs_oldest_age_seconds{tier=\"2\",state=\"waiting\"} 3.0",
        "weir_runs_oldest_age_seconds{tier=\"1\",state=\"waiting\"} 0.0",
        "weir_runs{tier=\"1\",state=\"running\"} 0",
        "weir_store_up 1",
    ] {
        assert!(text.contains(line), "missing `{line}` in:\n{text}");
    }
    assert!(!text.contains("weir_queue_max_running_apps{cluster=\"default\",queue=\"root.ads\""), "{text}");
    assert!(!text.contains("resource=\"memory\",unit=\"byte\"} 1.8"), "unbounded max left out: {text}");
    assert!(text.trim_end().ends_with("# EOF"));
    // A scrape the store did not answer drops the store's gauges rather than keeping stale
    // ones, and says so.
    let text = m.render(None, 4_000, Format::OpenMetrics).await;
    assert!(!text.contains("weir_queue_usage{"), "{text}");
    assert!(!text.contains("weir_runs{"), "{text}");
    assert!(text.contains("weir_store_up 0"), "{text}");
}

#[tokio::test]
async fn every_alerting_series_is_there_at_zero_before_any_event() {
    let m = Metrics::new();
    let config = weir_model::ClusterConfig::from_yaml(
        "examples/cluster-small.yaml",
        include_str!("../../../../examples/cluster-small.yaml"),
    );
    let Ok(config) = config else { panic!("cluster file: {config:?}") };
    m.declare_cluster("default", &config);
    let text = m.render(Some(StoreView { clusters: &[], unfinished: &[] }), 0, Format::Classic).await;
    for line in [
        "weir_preemptions_total{cluster=\"default\",reason=\"fair_share\"} 0",
        "weir_preemptions_total{cluster=\"default\",reason=\"min_share\"} 0",
        "weir_slo_runs_total{tier=\"1\",outcome=\"missed\"} 0",
        "weir_slo_runs_total{tier=\"3\",outcome=\"met\"} 0",
        "weir_runs_finished_total{tier=\"2\",state=\"killed\"} 0",
        "weir_runs_started_total{tier=\"1\"} 0",
        "weir_task_failures_total{cluster=\"default\",reason=\"lost\"} 0",
        "weir_auth_failures_total{reason=\"unknown\"} 0",
        "weir_requests_refused_total{reason=\"backend_unhealthy\"} 0",
        "weir_cluster_lease_held{cluster=\"default\"} 0",
        "weir_queue_wait_seconds_count{cluster=\"default\",queue=\"root.a\",tier=\"1\"} 0",
        "weir_queue_wait_seconds_count{cluster=\"default\",queue=\"root.default\",tier=\"3\"} 0",
        "weir_runs{tier=\"1\",state=\"queued\"} 0",
        "# HELP weir_runs_finished_total Runs that reached a final state",
        "# TYPE weir_runs_finished_total counter",
    ] {
        assert!(text.contains(line), "missing `{line}` in:\n{text}");
    }
    // Only leaves wait.
    assert!(!text.contains("queue=\"root\",tier"), "{text}");
    assert!(!text.contains("# EOF") && !text.contains("# UNIT"), "{text}");
    assert!(!text.contains("weir_cluster_nodes{"), "only a lease holder reports nodes: {text}");
    m.lease("default", true);
    let text = m.render(None, 0, Format::Classic).await;
    assert!(text.contains("weir_cluster_lease_held{cluster=\"default\"} 1"), "{text}");
    assert!(text.contains("weir_cluster_nodes{cluster=\"default\",state=\"full\"} 0"), "{text}");
    m.set_nodes("default", [1, 2, 3]);
    let text = m.render(None, 0, Format::Classic).await;
    assert!(text.contains("weir_cluster_nodes{cluster=\"default\",state=\"in_use\"} 2"), "{text}");
    m.lease("default", false);
    let text = m.render(None, 0, Format::Classic).await;
    assert!(text.contains("weir_cluster_lease_held{cluster=\"default\"} 0"), "{text}");
    assert!(!text.contains("weir_cluster_nodes{"), "gone with the lease: {text}");
}

/// The classic format's HELP lines escape only backslash and newline (Prometheus'
/// "Exposition formats", "Comments, help text, and type information"); `to_classic` passes
/// them through, so none may appear.
#[tokio::test]
async fn help_texts_need_no_escaping() {
    let text = Metrics::new().render(None, 0, Format::Classic).await;
    for line in text.lines().filter(|l| l.starts_with("# HELP ")) {
        assert!(!line.contains('\\'), "{line}");
    }
}
