//! Prometheus metrics (`GET /metrics`, through `prometheus-client`).
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
//! - **Gauges of this process's state**: whether it holds each cluster's lease (and, while it
//!   does, the cluster's nodes by state), whether the store answered the scrape, and the runs
//!   not yet ended by tier and state with the oldest one's age (from the store).
//!
//! Every family a rule or dashboard may use is present from the first scrape, at zero where
//! it counts: each tier's run, SLO and state series, each configured cluster's preemption,
//! task and lease series, and each leaf queue's wait histogram (see `examples/prometheus/`).
//! Queue series carry a `tier` label where the queue has a tier.
//!
//! `/metrics` answers OpenMetrics or the classic text format, by `Accept` ([`exposition`]).

pub mod exposition;

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::{EncodeLabel, EncodeLabelSet, LabelSetEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};
use weir_api::{ClusterQueues, Resources};
use weir_store::RunCount;

pub use exposition::Format;

/// The tiers weir knows (DESIGN: 1, the most critical, to 3).
pub const TIERS: [u8; 3] = [1, 2, 3];
/// Final run states, as `weir_runs_finished_total` counts them.
pub const FINISHED: [&str; 3] = ["succeeded", "failed", "killed"];
/// Run states before the end (`weir_api::RunState`), as the `weir_runs` gauge shows them.
pub const UNFINISHED: [&str; 4] = ["queued", "routed", "waiting", "running"];
/// A node's state as `weir_cluster_nodes` counts it: no container, some, or no cpu or memory
/// left.
pub const NODE_STATES: [&str; 3] = ["idle", "in_use", "full"];
/// Why an engine actor preempted (`weir_engine::Starvation`).
pub const PREEMPTION_REASONS: [&str; 4] = ["fair_share", "min_share", "guarantee", "job_guarantee"];
/// Why a task attempt failed, as the worker counts it.
pub const TASK_FAILURES: [&str; 4] = ["start_error", "exit_code", "signal", "lost"];
/// Why a token was refused at authentication.
pub const AUTH_FAILURES: [&str; 3] = ["missing", "malformed", "unknown"];
/// Why a submission was refused by a limit.
pub const REFUSALS: [&str; 3] = ["rate", "quota", "backend_unhealthy"];

/// A queue, with its tier where it has one (no `tier` label otherwise).
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct QueueLabels {
    pub cluster: String,
    pub queue: String,
    pub tier: Option<u8>,
}

impl EncodeLabelSet for QueueLabels {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        ("cluster", self.cluster.as_str()).encode(encoder.encode_label())?;
        ("queue", self.queue.as_str()).encode(encoder.encode_label())?;
        if let Some(tier) = self.tier {
            ("tier", tier.to_string()).encode(encoder.encode_label())?;
        }
        Ok(())
    }
}

/// A queue's resource, in kube-state-metrics' `resource`/`unit` labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct QueueResource {
    pub queue: QueueLabels,
    pub resource: String,
    pub unit: String,
}

impl EncodeLabelSet for QueueResource {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        self.queue.encode(encoder)?;
        ("resource", self.resource.as_str()).encode(encoder.encode_label())?;
        ("unit", self.unit.as_str()).encode(encoder.encode_label())
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
pub struct ClusterResource {
    pub cluster: String,
    pub resource: String,
    pub unit: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
pub struct ClusterLabels {
    pub cluster: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
pub struct ClusterState {
    pub cluster: String,
    pub state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
pub struct TierLabels {
    pub tier: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
pub struct TierState {
    pub tier: String,
    pub state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
pub struct TierOutcome {
    pub tier: String,
    /// `met` or `missed`.
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
pub struct ClusterReason {
    pub cluster: String,
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
pub struct Reason {
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
pub struct Operation {
    pub operation: String,
}

type FloatGauge = Gauge<f64, AtomicU64>;

fn latency() -> Histogram {
    // 100 µs to ~6.5 s.
    Histogram::new(exponential_buckets(0.0001, 2.0, 17))
}

fn queue_wait() -> Histogram {
    // 1 s to ~4.5 h: a tier-1 run waits seconds, a backfill may wait hours.
    Histogram::new(exponential_buckets(1.0, 2.0, 15))
}

/// What the store said at scrape time: the published queue trees and the runs not yet ended.
#[derive(Clone, Copy, Debug)]
pub struct StoreView<'a> {
    pub clusters: &'a [ClusterQueues],
    pub unfinished: &'a [RunCount],
}

/// Every metric of the process. Cheap to share (`Arc`); updates are atomic.
pub struct Metrics {
    registry: Registry,
    queue_usage: Family<QueueResource, FloatGauge>,
    queue_demand: Family<QueueResource, FloatGauge>,
    queue_steady: Family<QueueResource, FloatGauge>,
    queue_instantaneous: Family<QueueResource, FloatGauge>,
    queue_min: Family<QueueResource, FloatGauge>,
    queue_max: Family<QueueResource, FloatGauge>,
    queue_weight: Family<QueueLabels, FloatGauge>,
    queue_max_running_apps: Family<QueueLabels, Gauge>,
    queue_running_apps: Family<QueueLabels, Gauge>,
    queue_pending_apps: Family<QueueLabels, Gauge>,
    queue_wait: Family<QueueLabels, Histogram, fn() -> Histogram>,
    cluster_capacity: Family<ClusterResource, FloatGauge>,
    snapshot_age: Family<ClusterLabels, FloatGauge>,
    lease_held: Family<ClusterLabels, Gauge>,
    nodes: Family<ClusterState, Gauge>,
    store_up: Gauge,
    runs: Family<TierState, Gauge>,
    runs_oldest: Family<TierState, FloatGauge>,
    pub runs_started: Family<TierLabels, Counter>,
    pub runs_finished: Family<TierState, Counter>,
    pub slo_runs: Family<TierOutcome, Counter>,
    pub preemptions: Family<ClusterReason, Counter>,
    pub task_starts: Family<ClusterLabels, Counter>,
    pub task_failures: Family<ClusterReason, Counter>,
    pub auth_failures: Family<Reason, Counter>,
    /// Requests to the outputs' object store, and the failures its client retried (docs/commit.md).
    pub object_store_requests: Counter,
    pub object_store_failures: Family<Reason, Counter>,
    /// Job commits of stages with outputs, by outcome (committed, refused, aborted).
    pub job_commits: Family<Reason, Counter>,
    /// Multipart uploads the sweeper aborted.
    pub uploads_swept: Counter,
    pub refused: Family<Reason, Counter>,
    /// Runs placed by a route with a policy, by the cluster chosen and the reason.
    pub route_decisions: Family<ClusterReason, Counter>,
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
        let mut r = Registry::default();
        let m = Metrics {
            queue_usage: Family::default(),
            queue_demand: Family::default(),
            queue_steady: Family::default(),
            queue_instantaneous: Family::default(),
            queue_min: Family::default(),
            queue_max: Family::default(),
            queue_weight: Family::default(),
            queue_max_running_apps: Family::default(),
            queue_running_apps: Family::default(),
            queue_pending_apps: Family::default(),
            queue_wait: Family::new_with_constructor(queue_wait),
            cluster_capacity: Family::default(),
            snapshot_age: Family::default(),
            lease_held: Family::default(),
            nodes: Family::default(),
            store_up: Gauge::default(),
            runs: Family::default(),
            runs_oldest: Family::default(),
            runs_started: Family::default(),
            runs_finished: Family::default(),
            slo_runs: Family::default(),
            preemptions: Family::default(),
            task_starts: Family::default(),
            task_failures: Family::default(),
            auth_failures: Family::default(),
            object_store_requests: Counter::default(),
            object_store_failures: Family::default(),
            job_commits: Family::default(),
            uploads_swept: Counter::default(),
            refused: Family::default(),
            route_decisions: Family::default(),
            scheduling_pass: Family::new_with_constructor(latency),
            submission: latency(),
            store: Family::new_with_constructor(latency),
            scrape: tokio::sync::Mutex::new(()),
            registry: Registry::default(),
        };
        r.register(
            "weir_queue_usage",
            "Resources held by the queue's running containers (cpu in cores, memory in bytes)",
            m.queue_usage.clone(),
        );
        r.register(
            "weir_queue_demand",
            "Usage plus what the queue's jobs asked for and have not got",
            m.queue_demand.clone(),
        );
        r.register(
            "weir_queue_steady_fair_share",
            "The queue's share of the cluster over all queues (weights, min, max)",
            m.queue_steady.clone(),
        );
        r.register(
            "weir_queue_instantaneous_fair_share",
            "The queue's share of the cluster over the queues with runnable jobs",
            m.queue_instantaneous.clone(),
        );
        r.register(
            "weir_queue_min_resources",
            "The queue's configured min resources (its guaranteed share)",
            m.queue_min.clone(),
        );
        r.register(
            "weir_queue_max_resources",
            "The queue's configured max resources; an unbounded resource has no series",
            m.queue_max.clone(),
        );
        r.register("weir_queue_weight", "The queue's configured fair-share weight", m.queue_weight.clone());
        r.register(
            "weir_queue_max_running_apps",
            "The queue's configured max_running_apps; a queue without that limit has no series",
            m.queue_max_running_apps.clone(),
        );
        r.register("weir_queue_running_apps", "Jobs running in the queue", m.queue_running_apps.clone());
        r.register(
            "weir_queue_pending_apps",
            "Jobs waiting for a running-app slot in the queue",
            m.queue_pending_apps.clone(),
        );
        r.register_with_unit(
            "weir_queue_wait",
            "Time from a run's submission to its first task's start, by leaf queue (this process's engine actors)",
            Unit::Seconds,
            m.queue_wait.clone(),
        );
        r.register("weir_cluster_capacity", "The cluster's nodes' resources", m.cluster_capacity.clone());
        r.register_with_unit(
            "weir_queue_snapshot_age",
            "How old the cluster's published queue snapshot is",
            Unit::Seconds,
            m.snapshot_age.clone(),
        );
        r.register(
            "weir_cluster_lease_held",
            "1 while this process holds the cluster's lease and drives its backend, 0 otherwise",
            m.lease_held.clone(),
        );
        r.register(
            "weir_cluster_nodes",
            "The cluster's live nodes by state (idle, in_use, full: no cpu or memory left), reported by the process holding its lease",
            m.nodes.clone(),
        );
        r.register(
            "weir_store_up",
            "1 if the store answered this scrape's reads, 0 if it did not",
            m.store_up.clone(),
        );
        r.register("weir_runs", "Runs not yet ended, by tier and state (from the store)", m.runs.clone());
        r.register_with_unit(
            "weir_runs_oldest_age",
            "Age since submission of the oldest run not yet ended, by tier and state (0 with none)",
            Unit::Seconds,
            m.runs_oldest.clone(),
        );
        r.register("weir_runs_started", "Runs whose first task started, by tier", m.runs_started.clone());
        r.register(
            "weir_runs_finished",
            "Runs that reached a final state (succeeded, failed, killed), by tier",
            m.runs_finished.clone(),
        );
        r.register(
            "weir_slo_runs",
            "Runs of workflows with an SLO, counted when they end: met (succeeded within the SLO) or missed",
            m.slo_runs.clone(),
        );
        r.register(
            "weir_preemptions",
            "Containers killed by preemption, by the starvation that caused it (fair_share, min_share)",
            m.preemptions.clone(),
        );
        r.register("weir_task_starts", "Task attempts started on the backend", m.task_starts.clone());
        r.register(
            "weir_task_failures",
            "Task attempts that failed: start_error, exit_code, signal, lost",
            m.task_failures.clone(),
        );
        r.register(
            "weir_object_store_requests",
            "HTTP requests to the outputs' object store (every try, retries included)",
            m.object_store_requests.clone(),
        );
        r.register(
            "weir_object_store_retried_failures",
            "Object store answers the client retried with backoff: slowdown (503), server_error, throttled (429), timeout, connect_error",
            m.object_store_failures.clone(),
        );
        r.register(
            "weir_job_commits",
            "Job commits of stages that declare outputs, by outcome: committed, refused, aborted",
            m.job_commits.clone(),
        );
        r.register(
            "weir_uploads_swept",
            "Multipart uploads the sweeper aborted (older than its limit, owned by no live attempt)",
            m.uploads_swept.clone(),
        );
        r.register(
            "weir_auth_failures",
            "Requests refused at authentication: missing, malformed, unknown (or revoked) token",
            m.auth_failures.clone(),
        );
        r.register(
            "weir_requests_refused",
            "Requests refused by a limit: rate (a token's submission rate), quota (a project's waiting runs), backend_unhealthy",
            m.refused.clone(),
        );
        r.register(
            "weir_route_decisions",
            "Runs placed by a route with several candidates, by the cluster chosen and the reason: first, least_loaded, within_threshold, spilled, all_over_threshold, all_skipped",
            m.route_decisions.clone(),
        );
        r.register_with_unit(
            "weir_scheduling_pass_duration",
            "One engine actor pass: claim, schedule, commit",
            Unit::Seconds,
            m.scheduling_pass.clone(),
        );
        r.register_with_unit(
            "weir_submission_duration",
            "POST /v1/runs from the request to the committed answer",
            Unit::Seconds,
            m.submission.clone(),
        );
        r.register_with_unit(
            "weir_store_operation_duration",
            "Store calls: submit (a group commit), apply (a worker batch), publish, claim, read",
            Unit::Seconds,
            m.store.clone(),
        );
        // Present from the start at 0, so an alert on their rate works before the first event.
        for reason in AUTH_FAILURES {
            drop(m.auth_failures.get_or_create(&Reason { reason: reason.into() }));
        }
        for reason in REFUSALS {
            drop(m.refused.get_or_create(&Reason { reason: reason.into() }));
        }
        for reason in ["slowdown", "server_error", "throttled", "timeout", "connect_error"] {
            drop(m.object_store_failures.get_or_create(&Reason { reason: reason.into() }));
        }
        for reason in ["committed", "refused", "aborted"] {
            drop(m.job_commits.get_or_create(&Reason { reason: reason.into() }));
        }
        for tier in TIERS.map(|t| t.to_string()) {
            drop(m.runs_started.get_or_create(&TierLabels { tier: tier.clone() }));
            for state in FINISHED {
                drop(m.runs_finished.get_or_create(&TierState { tier: tier.clone(), state: state.into() }));
            }
            for outcome in ["met", "missed"] {
                drop(m.slo_runs.get_or_create(&TierOutcome { tier: tier.clone(), outcome: outcome.into() }));
            }
        }
        for operation in ["submit", "apply", "publish", "claim", "read"] {
            drop(m.store.get_or_create(&Operation { operation: operation.into() }));
        }
        Metrics { registry: r, ..m }
    }

    /// Create a configured cluster's series at zero: its lease (not held), preemptions, task
    /// starts and failures, scheduling passes, and each leaf queue's wait histogram.
    pub fn declare_cluster(&self, cluster: &str, config: &weir_model::ClusterConfig) {
        let c = ClusterLabels { cluster: cluster.to_string() };
        drop(self.lease_held.get_or_create(&c));
        drop(self.task_starts.get_or_create(&c));
        drop(self.scheduling_pass.get_or_create(&c));
        for reason in PREEMPTION_REASONS {
            let labels = ClusterReason { cluster: cluster.to_string(), reason: reason.into() };
            drop(self.preemptions.get_or_create(&labels));
        }
        for reason in TASK_FAILURES {
            let labels = ClusterReason { cluster: cluster.to_string(), reason: reason.into() };
            drop(self.task_failures.get_or_create(&labels));
        }
        for q in config.queues.iter().filter(|q| q.is_leaf()) {
            let labels =
                QueueLabels { cluster: cluster.to_string(), queue: q.path.to_string(), tier: q.tier };
            drop(self.queue_wait.get_or_create(&labels));
        }
    }

    /// Whether this process holds `cluster`'s lease (its engine actor runs). Only the holder
    /// reports the cluster's nodes: they appear at zero with the lease and go with it.
    pub fn lease(&self, cluster: &str, held: bool) {
        self.lease_held.get_or_create(&ClusterLabels { cluster: cluster.to_string() }).set(i64::from(held));
        for state in NODE_STATES {
            let labels = ClusterState { cluster: cluster.to_string(), state: state.into() };
            if held {
                drop(self.nodes.get_or_create(&labels));
            } else {
                self.nodes.remove(&labels);
            }
        }
    }

    /// The lease holder's count of `cluster`'s nodes by state (`NODE_STATES`' order).
    pub fn set_nodes(&self, cluster: &str, counts: [i64; 3]) {
        for (state, n) in NODE_STATES.into_iter().zip(counts) {
            self.nodes
                .get_or_create(&ClusterState { cluster: cluster.to_string(), state: state.into() })
                .set(n);
        }
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

    /// A run's first task started, `waited_ms` after its submission, in leaf `queue`.
    pub fn run_started(&self, tier: u8, cluster: &str, queue: &str, queue_tier: Option<u8>, waited_ms: i64) {
        self.runs_started.get_or_create(&TierLabels { tier: tier.to_string() }).inc();
        let labels = QueueLabels { cluster: cluster.to_string(), queue: queue.to_string(), tier: queue_tier };
        self.queue_wait.get_or_create(&labels).observe(waited_ms.max(0) as f64 / 1000.0);
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

    /// A run placed on `cluster` by a route with a policy, for `reason`.
    pub fn routed(&self, cluster: &str, reason: &str) {
        self.route_decisions
            .get_or_create(&ClusterReason { cluster: cluster.to_string(), reason: reason.to_string() })
            .inc();
    }

    pub fn task_failed(&self, cluster: &str, reason: &str) {
        self.task_failures
            .get_or_create(&ClusterReason { cluster: cluster.to_string(), reason: reason.to_string() })
            .inc();
    }

    /// The metrics text in `format`, with the store's gauges set from `store` (what the store
    /// answered now; `None` if it did not answer: `weir_store_up` 0 and those gauges absent).
    pub async fn render(&self, store: Option<StoreView<'_>>, now_ms: i64, format: Format) -> String {
        let _one_at_a_time = self.scrape.lock().await;
        for f in [
            &self.queue_usage,
            &self.queue_demand,
            &self.queue_steady,
            &self.queue_instantaneous,
            &self.queue_min,
            &self.queue_max,
        ] {
            f.clear();
        }
        self.queue_weight.clear();
        self.queue_max_running_apps.clear();
        self.queue_running_apps.clear();
        self.queue_pending_apps.clear();
        self.cluster_capacity.clear();
        self.snapshot_age.clear();
        self.runs.clear();
        self.runs_oldest.clear();
        self.store_up.set(i64::from(store.is_some()));
        if let Some(view) = store {
            self.set_store_gauges(view, now_ms);
        }
        let mut out = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            out = format!("# cannot encode the metrics: {e}\n# EOF\n");
        }
        match format {
            Format::OpenMetrics => out,
            Format::Classic => exposition::to_classic(&out),
        }
    }

    fn set_store_gauges(&self, view: StoreView<'_>, now_ms: i64) {
        for tier in TIERS.map(|t| t.to_string()) {
            for state in UNFINISHED {
                let labels = TierState { tier: tier.clone(), state: state.into() };
                drop(self.runs.get_or_create(&labels));
                drop(self.runs_oldest.get_or_create(&labels));
            }
        }
        for c in view.unfinished.iter().filter(|c| !FINISHED.contains(&c.state.as_str())) {
            let labels = TierState { tier: c.tier.to_string(), state: c.state.clone() };
            self.runs.get_or_create(&labels).inc_by(c.runs);
            let age = (now_ms - c.oldest_submitted_ms).max(0) as f64 / 1000.0;
            let oldest = self.runs_oldest.get_or_create(&labels);
            if age > oldest.get() {
                oldest.set(age);
            }
        }
        for c in view.clusters {
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
                let ql = QueueLabels { cluster: c.cluster.clone(), queue: q.path.clone(), tier: q.tier };
                self.queue_running_apps.get_or_create(&ql).set(i64::from(q.running_apps));
                self.queue_pending_apps.get_or_create(&ql).set(i64::from(q.pending_apps));
                self.queue_weight.get_or_create(&ql).set(q.weight);
                if let Some(limit) = q.max_running_apps {
                    self.queue_max_running_apps.get_or_create(&ql).set(i64::from(limit));
                }
                for (family, r) in [
                    (&self.queue_usage, &q.usage),
                    (&self.queue_demand, &q.demand),
                    (&self.queue_steady, &q.steady_fair_share),
                    (&self.queue_instantaneous, &q.instantaneous_fair_share),
                    (&self.queue_min, &q.min),
                    (&self.queue_max, &q.max),
                ] {
                    for (resource, unit, v) in resources(r) {
                        let labels =
                            QueueResource { queue: ql.clone(), resource: resource.into(), unit: unit.into() };
                        family.get_or_create(&labels).set(v);
                    }
                }
            }
        }
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
mod tests;
