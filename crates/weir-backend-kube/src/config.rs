//! The Kubernetes backend's settings (the server file's `backend: {kind: kubernetes, ...}`).

use std::collections::BTreeMap;

use serde::Deserialize;

/// Which scheduler admits the Jobs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scheduler {
    /// The cluster's default scheduler; no queue labels.
    #[default]
    Default,
    /// Kueue: the Job carries `kueue.x-k8s.io/queue-name` and is created suspended.
    Kueue,
    /// Apache YuniKorn: pods carry the queue and application id labels, `schedulerName: yunikorn`.
    Yunikorn,
}

#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KubeConfig {
    /// The namespace every Job is created in. It must exist (health checks it).
    pub namespace: String,
    /// The container image the task's command runs in.
    pub image: String,
    #[serde(default)]
    pub scheduler: Scheduler,
    /// weir leaf queue → Kueue LocalQueue / YuniKorn queue (`root.a.b`).
    #[serde(default)]
    pub queues: BTreeMap<String, String>,
    /// The target queue for a weir queue that `queues` does not name.
    #[serde(default)]
    pub default_queue: Option<String>,
    /// YuniKorn only: reserve each Job's pod as a gang (task-group annotations).
    #[serde(default)]
    pub gang: bool,
    /// Status comes from a watch, not from reading Jobs: this is the longest wait, in
    /// milliseconds, before a list or watch the API server did not answer is tried again (the
    /// wait starts at 50 ms and doubles up to it). The server file's `poll_interval_ms`.
    #[serde(default = "default_poll_ms")]
    pub poll_ms: u64,
    /// The image Spark stages run in as SparkApplications (driver and executors): it must hold
    /// Spark. Without it a Spark stage is refused at its start.
    #[serde(default)]
    pub spark_image: Option<String>,
    /// The SparkApplication's `sparkVersion` (the Spark in `spark_image`).
    #[serde(default = "default_spark_version")]
    pub spark_version: String,
    /// The driver's service account (it creates the executor pods, so it needs the rights to).
    #[serde(default)]
    pub spark_service_account: Option<String>,
}

/// The `sparkVersion` written when the server file gives none.
pub fn default_spark_version() -> String {
    "4.0.0".to_string()
}

fn default_poll_ms() -> u64 {
    2000
}

impl KubeConfig {
    /// The target queue of weir queue `weir_queue`.
    pub fn target_queue(&self, weir_queue: Option<&str>) -> Option<&str> {
        weir_queue.and_then(|q| self.queues.get(q)).or(self.default_queue.as_ref()).map(String::as_str)
    }
}
