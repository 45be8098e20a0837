//! Prometheus metrics (`GET /metrics`, OpenMetrics text through `prometheus-client`).
//!
//! Two kinds, following Prometheus' naming conventions (base units in names, `_total`
//! counters, labels for dimensions):
//! - **Gauges of the live queue tree**, set at scrape time from the queue snapshots the engine
//!   actors publish to the store — the figures `GET /v1/queues` shows, whichever process owns
//!   the cluster. Resources follow kube-state-metrics' `resource`/`unit` labels: cpu in cores,
//!   memory in bytes, gpus as an integer.
//! - **Counters and histograms of this process**: runs started and finished, SLO outcomes,
//!   preemptions, task starts and failures (incremented by this process's engine actors, or its
//!   API for runs killed while queued), and latencies of scheduling passes, submissions and
//!   store calls. They start at zero with the process, as Prometheus expects of counters.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};
use std::sync::atomic::AtomicU64;
use weir_api::{ClusterQueues, Resources};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueResource {
    pub cluster: String,
    pub queue: String,
    pub resource: String,
    pub unit: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueLabels {
    pub cluster: String,
    pub queue: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClusterResource {
    pub cluster: String,
    pub resource: String,
    pub unit: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClusterLabels {
    pub cluster: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TierLabels {
    pub tier: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TierState {
    pub tier: String,
    pub state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TierOutcome {
    pub tier: String,
    /// `met` or `missed`.
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClusterReason {
    pub cluster: String,
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Reason {
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Operation {
    pub operation: String,
}

type FloatGauge = Gauge<f64, AtomicU64>;

fn latency() -> Histogram {
    // 100 µs to ~6.5 s.
    Histogram::new(exponential_buckets(0.0001, 2.0, 17))
}

/// Every metric of the process. Cheap to share (`Arc`); updates are atomic.
pub struct Metrics {
    registry: Registry,
    queue_usage: Family<QueueResource, FloatGauge>,
    queue_demand: Family<QueueResource, FloatGauge>,
    queue_steady: Family<QueueResource, FloatGauge>,
    queue_instantaneous: Family<QueueResource, FloatGauge>,
    queue_running_apps: Family<QueueLabels, Gauge>,
    queue_pending_apps: Family<QueueLabels, Gauge>,
    cluster_capacity: Family<ClusterResource, FloatGauge>,
    snapshot_age: Family<ClusterLabels, FloatGauge>,
    pub runs_started: Family<TierLabels, Counter>,
    pub runs_finished: Family<TierState, Counter>,
    pub slo_runs: Family<TierOutcome, Counter>,
    pub preemptions: Family<ClusterReason, Counter>,
    pub task_starts: Family<ClusterLabels, Counter>,
    pub task_failures: Family<ClusterReason, Counter>,
    pub auth_failures: Family<Reason, Counter>,
    pub refused: Family<Reason, Counter>,
    scheduling_pass: Family<ClusterLabels, Histogram, fn() -> Histogram>,
    submission: Histogram,
    store: Family<Operation, Histogram, fn() -> Histogram>,
    /// Serializes scrapes: the queue gauges are cleared and set for each one.
    scrape: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let m = Metrics {
            queue_usage: Family::default(),
            queue_demand: Family::default(),
            queue_steady: Family::default(),
            queue_instantaneous: Family::default(),
            queue_running_apps: Family::default(),
            queue_pending_apps: Family::default(),
            cluster_capacity: Family::default(),
            snapshot_age: Family::default(),
            runs_started: Family::default(),
            runs_finished: Family::default(),
            slo_runs: Family::default(),
            preemptions: Family::default(),
            task_starts: Family::default(),
            task_failures: Family::default(),
            auth_failures: Family::default(),
            refused: Family::default(),
            scheduling_pass: Family::new_with_constructor(latency),
            submission: latency(),
            store: Family::new_with_constructor(latency),
            scrape: tokio::sync::Mutex::new(()),
            registry: Registry::default(),
        };
        registry.register(
            "weir_queue_usage",
            "Resources held by the queue's running containers (cpu in cores, memory in bytes)",
            m.queue_usage.clone(),
        );
        registry.register(
            "weir_queue_demand",
            "Usage plus what the queue's jobs asked for and have not got",
            m.queue_demand.clone(),
        );
        registry.register(
            "weir_queue_steady_fair_share",
            "The queue's share of the cluster over all queues (weights, min, max)",
            m.queue_steady.clone(),
        );
        registry.register(
            "weir_queue_instantaneous_fair_share",
            "The queue's share of the cluster over the queues with runnable jobs",
            m.queue_instantaneous.clone(),
        );
        registry.register(
            "weir_queue_running_apps",
            "Jobs running in the queue",
            m.queue_running_apps.clone(),
        );
        registry.register(
            "weir_queue_pending_apps",
            "Jobs waiting for a running-app slot in the queue",
            m.queue_pending_apps.clone(),
        );
        registry.register(
            "weir_cluster_capacity",
            "The cluster's nodes' resources",
            m.cluster_capacity.clone(),
        );
        registry.register_with_unit(
            "weir_queue_snapshot_age",
            "How old the cluster's published queue snapshot is",
            Unit::Seconds,
            m.snapshot_age.clone(),
        );
        registry.register(
            "weir_runs_started",
            "Runs whose first task started, by tier",
            m.runs_started.clone(),
        );
        registry.register(
            "weir_runs_finished",
            "Runs that reached a final state (succeeded, failed, killed), by tier",
            m.runs_finished.clone(),
        );
        registry.register(
            "weir_slo_runs",
            "Runs of workflows with an SLO, counted when they end: met (succeeded within the SLO) or missed",
            m.slo_runs.clone(),
        );
        registry.register(
            "weir_preemptions",
            "Containers killed by preemption, by the starvation that caused it (fair_share, min_share)",
            m.preemptions.clone(),
        );
        registry.register("weir_task_starts", "Task attempts started on the backend", m.task_starts.clone());
        registry.register(
            "weir_task_failures",
            "Task attempts that failed: start_error, exit_code, signal, lost",
            m.task_failures.clone(),
        );
        registry.register(
            "weir_auth_failures",
            "Requests refused at authentication: missing, malformed, unknown (or revoked) token",
            m.auth_failures.clone(),
        );
        registry.register(
            "weir_requests_refused",
            "Requests refused by a limit: rate (a token's submission rate), quota (a project's waiting runs)",
            m.refused.clone(),
        );
        registry.register_with_unit(
            "weir_scheduling_pass_duration",
            "One engine actor pass: claim, schedule, commit",
            Unit::Seconds,
            m.scheduling_pass.clone(),
        );
        registry.register_with_unit(
            "weir_submission_duration",
            "POST /v1/runs from the request to the committed answer",
            Unit::Seconds,
            m.submission.clone(),
        );
        registry.register_with_unit(
            "weir_store_operation_duration",
            "Store calls: submit (a group commit), apply (a worker batch), publish, claim, read",
            Unit::Seconds,
            m.store.clone(),
        );
        // Present from the start at 0, so an alert on their rate works before the first failure.
        for reason in ["missing", "malformed", "unknown"] {
            drop(m.auth_failures.get_or_create(&Reason { reason: reason.into() }));
        }
        for reason in ["rate", "quota"] {
            drop(m.refused.get_or_create(&Reason { reason: reason.into() }));
        }
        Metrics { registry, ..m }
    }

    pub fn observe_pass(&self, cluster: &str, took: Duration) {
        self.scheduling_pass
            .get_or_create(&ClusterLabels { cluster: cluster.to_string() })
            .observe(took.as_secs_f64());
    }

    pub fn observe_submission(&self, took: Duration) {
        self.submission.observe(took.as_secs_f64());
    }

    pub fn observe_store(&self, operation: &str, took: Duration) {
        self.store.get_or_create(&Operation { operation: operation.to_string() }).observe(took.as_secs_f64());
    }

    pub fn run_started(&self, tier: u8) {
        self.runs_started.get_or_create(&TierLabels { tier: tier.to_string() }).inc();
    }

    /// A run reached `state`; with an SLO, `met` says whether it met it (a killed run has none).
    pub fn run_finished(&self, tier: u8, state: &str, met: Option<bool>) {
        let tier = tier.to_string();
        self.runs_finished.get_or_create(&TierState { tier: tier.clone(), state: state.to_string() }).inc();
        if let Some(met) = met {
            let outcome = if met { "met" } else { "missed" }.to_string();
            self.slo_runs.get_or_create(&TierOutcome { tier, outcome }).inc();
        }
    }

    pub fn preempted(&self, cluster: &str, reason: &str) {
        self.preemptions
            .get_or_create(&ClusterReason { cluster: cluster.to_string(), reason: reason.to_string() })
            .inc();
    }

    pub fn task_started(&self, cluster: &str) {
        self.task_starts.get_or_create(&ClusterLabels { cluster: cluster.to_string() }).inc();
    }

    pub fn auth_failed(&self, reason: &str) {
        self.auth_failures.get_or_create(&Reason { reason: reason.to_string() }).inc();
    }

    pub fn refused(&self, reason: &str) {
        self.refused.get_or_create(&Reason { reason: reason.to_string() }).inc();
    }

    pub fn task_failed(&self, cluster: &str, reason: &str) {
        self.task_failures
            .get_or_create(&ClusterReason { cluster: cluster.to_string(), reason: reason.to_string() })
            .inc();
    }

    /// The OpenMetrics text, with the queue gauges set from `clusters` (snapshots as of now).
    pub async fn render(&self, clusters: &[ClusterQueues], now_ms: i64) -> String {
        let _one_at_a_time = self.scrape.lock().await;
        for f in [&self.queue_usage, &self.queue_demand, &self.queue_steady, &self.queue_instantaneous] {
            f.clear();
        }
        self.queue_running_apps.clear();
        self.queue_pending_apps.clear();
        self.cluster_capacity.clear();
        self.snapshot_age.clear();
        for c in clusters {
            let Some(as_of) = c.as_of_ms else { continue };
            self.snapshot_age
                .get_or_create(&ClusterLabels { cluster: c.cluster.clone() })
                .set((now_ms - as_of).max(0) as f64 / 1000.0);
            for (resource, unit, v) in resources(&c.total) {
                let labels = ClusterResource {
                    cluster: c.cluster.clone(),
                    resource: resource.into(),
                    unit: unit.into(),
                };
                self.cluster_capacity.get_or_create(&labels).set(v);
            }
            for q in &c.queues {
                let ql = QueueLabels { cluster: c.cluster.clone(), queue: q.path.clone() };
                self.queue_running_apps.get_or_create(&ql).set(i64::from(q.running_apps));
                self.queue_pending_apps.get_or_create(&ql).set(i64::from(q.pending_apps));
                for (family, r) in [
                    (&self.queue_usage, &q.usage),
                    (&self.queue_demand, &q.demand),
                    (&self.queue_steady, &q.steady_fair_share),
                    (&self.queue_instantaneous, &q.instantaneous_fair_share),
                ] {
                    for (resource, unit, v) in resources(r) {
                        let labels = QueueResource {
                            cluster: c.cluster.clone(),
                            queue: q.path.clone(),
                            resource: resource.into(),
                            unit: unit.into(),
                        };
                        family.get_or_create(&labels).set(v);
                    }
                }
            }
        }
        let mut out = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            out = format!("# cannot encode the metrics: {e}\n# EOF\n");
        }
        out
    }
}

/// Resources in base units, with kube-state-metrics' resource and unit labels. Unbounded
/// (`u64::MAX`) components are left out.
fn resources(r: &Resources) -> Vec<(&'static str, &'static str, f64)> {
    let mut out = Vec::with_capacity(3);
    if r.cpu != u64::MAX {
        out.push(("cpu", "core", r.cpu as f64 / 1000.0));
    }
    if r.memory != u64::MAX {
        out.push(("memory", "byte", r.memory as f64 * 1_048_576.0));
    }
    if r.gpu != u64::MAX {
        out.push(("gpu", "integer", r.gpu as f64));
    }
    out
}

/// Shared handle.
pub type SharedMetrics = Arc<Metrics>;

#[cfg(test)]
mod tests {
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
            weight: 1.0,
            min: res(0, 0),
            max: Resources { cpu: u64::MAX, memory: u64::MAX, gpu: u64::MAX },
            max_running_apps: None,
            usage: res(1500, 2048),
            demand: res(3000, 4096),
            steady_fair_share: res(4000, 8192),
            instantaneous_fair_share: res(8000, 16384),
            running_apps: 2,
            pending_apps: 1,
        };
        let c = ClusterQueues {
            cluster: "default".into(),
            as_of_ms: Some(1_000),
            total: res(8000, 16384),
            used: res(1500, 2048),
            queues: vec![q],
        };
        let text = m.render(&[c], 3_500).await;
        for line in [
            "weir_queue_usage{cluster=\"default\",queue=\"root.ads.tier1\",resource=\"cpu\",unit=\"core\"} 1.5",
            "weir_queue_usage{cluster=\"default\",queue=\"root.ads.tier1\",resource=\"memory\",unit=\"byte\"} 2147483648.0",
            "weir_queue_running_apps{cluster=\"default\",queue=\"root.ads.tier1\"} 2",
            "weir_queue_snapshot_age_seconds{cluster=\"default\"} 2.5",
            "weir_slo_runs_total{tier=\"1\",outcome=\"met\"} 1",
            "weir_slo_runs_total{tier=\"1\",outcome=\"missed\"} 1",
            "weir_runs_finished_total{tier=\"1\",state=\"failed\"} 1",
            "weir_preemptions_total{cluster=\"default\",reason=\"fair_share\"} 1",
        ] {
            assert!(text.contains(line), "missing `{line}` in:\n{text}");
        }
        assert!(text.trim_end().ends_with("# EOF"));
        // A later scrape without the cluster drops its gauges rather than keeping stale ones.
        let text = m.render(&[], 4_000).await;
        assert!(!text.contains("weir_queue_usage{"), "{text}");
    }
}
