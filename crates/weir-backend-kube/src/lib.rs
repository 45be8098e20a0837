//! weir-backend-kube: task attempts as Kubernetes `batch/v1` Jobs, for clusters whose queues
//! are Kueue LocalQueues or YuniKorn queues, and Spark stages as the spark-operator's
//! `SparkApplication`s (YuniKorn queues through its batch-scheduler integration).
//!
//! [`KubeBackend`] implements weir-backend's [`Backend`] trait: `start` creates one Job per
//! attempt in the configured namespace, named after the attempt and labelled with it
//! ([`manifest::ATTEMPT_LABEL`]) so that a restarted server lists its own Jobs and re-adopts
//! them; one list-then-watch loop per kind of object ([`watch`]) follows every labelled Job (or
//! SparkApplication) of the namespace and reports each attempt's end exactly once on the exit
//! channel; `kill` marks the object `weir.io/killed` (a merge patch under the object's
//! `resourceVersion`, retried on `409 Conflict`) and deletes the Job with the grace as `gracePeriodSeconds` and
//! `propagationPolicy: Background`, so its pods go too. Capacity discovery
//! ([`KubeBackend::nodes`]) reads the node list's `allocatable`; [`KubeBackend::health`] checks
//! that the API answers and the namespace exists.
//!
//! It has never run against a live Kubernetes API server: no API server can run on the machine
//! it was written on. Its tests answer its requests as the API server documents it would.
//!
//! The [`Launched`] record of a Kubernetes attempt keeps `pid` 0, `start_ticks` 0, `boot_id` the
//! Job's uid (a Job re-created under the same name is another Job) and `dir` the folder of its
//! output files.

pub mod config;
pub mod manifest;
mod watch;

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, ObjectMeta, Patch,
    PatchParams, PostParams, Preconditions, PropagationPolicy,
};
use kube::Client;
use serde_json::Value;
use weir_backend::{
    Adopted, AttemptId, Backend, BackendError, BoxFuture, Exit, ExitSender, Launched, Recovered, TaskLaunch,
};

pub use config::{KubeConfig, Scheduler};

const KIND: &str = "kubernetes";

/// Why the backend could not be set up or is unhealthy.
#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    /// The API server did not answer. Retrying later may help.
    #[error("the Kubernetes API server cannot be reached: {0}")]
    Unreachable(String),
    /// The configured namespace does not exist. Retrying helps once it is created.
    #[error("namespace {0:?} does not exist (backend.namespace)")]
    NoNamespace(String),
    /// The API server refused (permissions, …).
    #[error("the Kubernetes API server refused: {0}")]
    Refused(String),
}

/// One node as capacity discovery reports it: `allocatable` in weir's units.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KubeNode {
    pub name: String,
    pub resources: weir_model::Resources,
}

/// What an attempt runs as: a `batch/v1` Job (a command stage) or a SparkApplication (a Spark
/// stage). The record tells them apart: a SparkApplication's `boot_id` is
/// [`APP_PREFIX`] and its uid, a Job's its uid alone (as before Spark stages were run).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Kind {
    Job,
    App,
}

/// Prefix of a SparkApplication attempt's `boot_id`.
const APP_PREFIX: &str = "SparkApplication/";

impl Kind {
    fn of(task: &Launched) -> Kind {
        if task.boot_id.starts_with(APP_PREFIX) {
            Kind::App
        } else {
            Kind::Job
        }
    }

    fn index(self) -> usize {
        match self {
            Kind::Job => 0,
            Kind::App => 1,
        }
    }

    /// The object's uid in a record's `boot_id`.
    fn uid_of(task: &Launched) -> &str {
        task.boot_id.strip_prefix(APP_PREFIX).unwrap_or(&task.boot_id)
    }

    fn boot_id(self, uid: &str) -> String {
        match self {
            Kind::Job => uid.to_string(),
            Kind::App => format!("{APP_PREFIX}{uid}"),
        }
    }
}

/// One read of an attempt's object: its uid, its end once it has ended (`Some(true)`:
/// succeeded), and a SparkApplication's driver pod.
struct Read {
    uid: String,
    end: Option<bool>,
    driver_pod: Option<String>,
}

/// The APIs the backend reads and writes, in the configured namespace.
#[derive(Clone)]
struct Apis {
    jobs: Api<Job>,
    apps: Api<DynamicObject>,
    pods: Api<Pod>,
}

impl Apis {
    async fn read(&self, kind: Kind, name: &str) -> Result<Option<Read>, kube::Error> {
        Ok(match kind {
            Kind::Job => self.jobs.get_opt(name).await?.map(|j| Read {
                uid: j.metadata.uid.clone().unwrap_or_default(),
                end: job_end(&j),
                driver_pod: None,
            }),
            Kind::App => self.apps.get_opt(name).await?.map(|a| read_app(&a)),
        })
    }

    /// How an ended, failed attempt ended: the exit code of its (driver) pod's container.
    async fn failed_exit(&self, kind: Kind, name: &str, read: &Read) -> Exit {
        match kind {
            Kind::Job => pod_exit(&self.pods, name).await,
            // The operator failed it before a driver ran (SUBMISSION_FAILED), or the driver's
            // code is gone with its pod: a failure without a code of its own.
            Kind::App => match &read.driver_pod {
                Some(pod) => match self.pods.get_opt(pod).await {
                    Ok(Some(p)) => terminated_code(&p).map_or(Exit::Code(1), Exit::Code),
                    _ => Exit::Code(1),
                },
                None => Exit::Code(1),
            },
        }
    }

    async fn meta(&self, kind: Kind, name: &str) -> Result<Option<ObjectMeta>, kube::Error> {
        Ok(match kind {
            Kind::Job => self.jobs.get_opt(name).await?.map(|j| j.metadata),
            Kind::App => self.apps.get_opt(name).await?.map(|a| a.metadata),
        })
    }

    async fn patch(&self, kind: Kind, name: &str, body: &serde_json::Value) -> Result<(), kube::Error> {
        let patch = Patch::Merge(body);
        match kind {
            Kind::Job => self.jobs.patch(name, &PatchParams::default(), &patch).await.map(|_| ()),
            Kind::App => self.apps.patch(name, &PatchParams::default(), &patch).await.map(|_| ()),
        }
    }

    async fn delete(&self, kind: Kind, name: &str, params: &DeleteParams) -> Result<(), kube::Error> {
        match kind {
            Kind::Job => self.jobs.delete(name, params).await.map(|_| ()),
            Kind::App => self.apps.delete(name, params).await.map(|_| ()),
        }
    }
}

/// A SparkApplication's state as the operator writes it (`status.applicationState.state`:
/// `COMPLETED`, `FAILED`, `SUBMISSION_FAILED` end it; the others — new, `SUBMITTED`,
/// `RUNNING`, `PENDING_RERUN`, `SUCCEEDING`, `FAILING`, `UNKNOWN`… — do not yet).
fn read_app(app: &DynamicObject) -> Read {
    let status = &app.data["status"];
    let end = match status["applicationState"]["state"].as_str() {
        Some("COMPLETED") => Some(true),
        Some("FAILED") | Some("SUBMISSION_FAILED") => Some(false),
        _ => None,
    };
    Read {
        uid: app.metadata.uid.clone().unwrap_or_default(),
        end,
        driver_pod: status["driverInfo"]["podName"].as_str().map(str::to_string),
    }
}

struct Inner {
    config: KubeConfig,
    client: Client,
    apis: Apis,
    shared: Arc<watch::Shared>,
    /// The watch loops, per kind ([`Kind::index`]), started with the first attempt of the kind.
    watchers: Mutex<[Option<tokio::task::JoinHandle<()>>; 2]>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Watching stops; the Jobs run on and a new backend value re-adopts them.
        for w in self.watchers.lock().unwrap_or_else(|e| e.into_inner()).iter_mut() {
            if let Some(task) = w.take() {
                task.abort();
            }
        }
    }
}

/// The annotation a kill leaves on the object before deleting it: a kill cut short by a
/// restart is finished when the attempt is adopted.
pub const KILLED_ANNOTATION: &str = "weir.io/killed";

/// Runs attempts as Kubernetes Jobs. See the crate documentation.
pub struct KubeBackend {
    inner: Arc<Inner>,
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

pub(crate) fn status_of(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

fn remote(attempt: &str, e: kube::Error) -> BackendError {
    match e {
        kube::Error::Api(s) => BackendError::Refused {
            attempt: attempt.to_string(),
            backend: KIND,
            message: format!("{} ({} {})", s.message, s.code, s.reason),
        },
        other => BackendError::Unreachable {
            attempt: attempt.to_string(),
            backend: KIND,
            message: other.to_string(),
        },
    }
}

/// How a Job ended, from its status and its pod's container status; `None` while it runs.
fn job_end(job: &Job) -> Option<bool> {
    let status = job.status.as_ref()?;
    for c in status.conditions.iter().flatten() {
        if c.status == "True" && (c.type_ == "Complete" || c.type_ == "SuccessCriteriaMet") {
            return Some(true);
        }
        if c.status == "True" && (c.type_ == "Failed" || c.type_ == "FailureTarget") {
            return Some(false);
        }
    }
    None
}

impl KubeBackend {
    /// A backend on `client` (built by the caller from a kubeconfig or the in-cluster
    /// environment, or a test's mock service). Checks nothing: see [`KubeBackend::health`].
    pub fn new(config: KubeConfig, client: Client, exits: ExitSender) -> KubeBackend {
        let jobs = Api::namespaced(client.clone(), &config.namespace);
        let pods = Api::namespaced(client.clone(), &config.namespace);
        let gvk = GroupVersionKind::gvk(manifest::SPARK_GROUP, manifest::SPARK_VERSION, manifest::SPARK_KIND);
        let apps = Api::namespaced_with(client.clone(), &config.namespace, &ApiResource::from_gvk(&gvk));
        let apis = Apis { jobs, apps, pods };
        let shared = Arc::new(watch::Shared {
            table: Mutex::new(watch::Table::default()),
            apis: apis.clone(),
            exits,
            retry: Duration::from_millis(config.poll_ms.max(1)),
        });
        KubeBackend {
            inner: Arc::new(Inner { config, client, apis, shared, watchers: Mutex::new([None, None]) }),
        }
    }

    /// Connects with the usual client configuration (kubeconfig, or the in-cluster service
    /// account) and checks health; a missing namespace or an API that does not answer is an error.
    pub async fn connect(config: KubeConfig, exits: ExitSender) -> Result<KubeBackend, KubeError> {
        let client = Client::try_default().await.map_err(|e| KubeError::Unreachable(e.to_string()))?;
        let backend = KubeBackend::new(config, client, exits);
        backend.health().await?;
        Ok(backend)
    }

    /// The API answers and the namespace exists; the API server's version.
    pub async fn health(&self) -> Result<String, KubeError> {
        let version = self.inner.client.apiserver_version().await.map_err(|e| match e {
            kube::Error::Api(s) => KubeError::Refused(s.message),
            other => KubeError::Unreachable(other.to_string()),
        })?;
        let namespaces: Api<Namespace> = Api::all(self.inner.client.clone());
        match namespaces.get_opt(&self.inner.config.namespace).await {
            Ok(Some(_)) => Ok(version.git_version),
            Ok(None) => Err(KubeError::NoNamespace(self.inner.config.namespace.clone())),
            Err(kube::Error::Api(s)) => Err(KubeError::Refused(s.message)),
            Err(e) => Err(KubeError::Unreachable(e.to_string())),
        }
    }

    /// The cluster's nodes and their allocatable resources (cpu in millicores, memory in MiB,
    /// `nvidia.com/gpu`), for `nodes: from_backend`. Unschedulable nodes are left out.
    pub async fn nodes(&self) -> Result<Vec<KubeNode>, KubeError> {
        let api: Api<Node> = Api::all(self.inner.client.clone());
        let list = api.list(&ListParams::default()).await.map_err(|e| match e {
            kube::Error::Api(s) => KubeError::Refused(s.message),
            other => KubeError::Unreachable(other.to_string()),
        })?;
        let mut out = Vec::new();
        for node in list.items {
            if node.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false) {
                continue;
            }
            let alloc = node.status.as_ref().and_then(|s| s.allocatable.clone()).unwrap_or_default();
            let get = |k: &str| alloc.get(k).map(|q| q.0.clone());
            out.push(KubeNode {
                name: node.metadata.name.unwrap_or_default(),
                resources: weir_model::Resources {
                    cpu: get("cpu").and_then(|q| quantity::millicores(&q)).unwrap_or(0),
                    memory: get("memory").and_then(|q| quantity::mebibytes(&q)).unwrap_or(0),
                    gpu: get("nvidia.com/gpu").and_then(|q| q.parse().ok()).unwrap_or(0),
                },
            });
        }
        Ok(out)
    }

    /// Reads the pod's log (the Job's one pod, or a SparkApplication's driver), for `weir logs`.
    pub async fn logs(&self, attempt: &AttemptId) -> Result<String, BackendError> {
        let name = self.name(attempt)?;
        let apis = &self.inner.apis;
        if let Some(read) = apis.apps.get_opt(&name).await.ok().flatten().map(|a| read_app(&a)) {
            let Some(pod) = read.driver_pod else { return Ok(String::new()) };
            return apis.pods.logs(&pod, &Default::default()).await.map_err(|e| remote(attempt.as_str(), e));
        }
        let pods = self
            .inner
            .apis
            .pods
            .list(&ListParams::default().labels(&format!("batch.kubernetes.io/job-name={name}")))
            .await
            .map_err(|e| remote(attempt.as_str(), e))?;
        let Some(pod) = pods.items.first().and_then(|p| p.metadata.name.clone()) else {
            return Ok(String::new());
        };
        self.inner.apis.pods.logs(&pod, &Default::default()).await.map_err(|e| remote(attempt.as_str(), e))
    }

    fn name(&self, attempt: &AttemptId) -> Result<String, BackendError> {
        manifest::job_name(attempt.as_str()).ok_or_else(|| BackendError::BadLaunch {
            attempt: attempt.to_string(),
            field: "attempt",
            reason: "cannot be made into a Kubernetes name (lowercase, digits, '-', at most 58 characters)"
                .into(),
        })
    }

    /// Starts the watch loop of `kind` unless it runs.
    fn ensure_watcher(&self, kind: Kind) {
        let mut watchers = self.inner.watchers.lock().unwrap_or_else(|e| e.into_inner());
        if watchers[kind.index()].is_some() {
            return;
        }
        let shared = self.inner.shared.clone();
        let apis = &self.inner.apis;
        let task = match kind {
            Kind::Job => tokio::spawn(watch::run(shared, apis.jobs.clone(), kind, |j: &Job| Read {
                uid: j.metadata.uid.clone().unwrap_or_default(),
                end: job_end(j),
                driver_pod: None,
            })),
            Kind::App => tokio::spawn(watch::run(shared, apis.apps.clone(), kind, read_app)),
        };
        watchers[kind.index()] = Some(task);
    }

    /// Watches an attempt whose object exists (adopt, recover, kill) unless it is watched
    /// already, and reads the object once (an end before now shows no event). Its kill flag.
    fn watch_existing(
        &self,
        attempt: &AttemptId,
        kind: Kind,
        name: &str,
        uid: Option<String>,
    ) -> Arc<std::sync::atomic::AtomicBool> {
        match watch::register(&self.inner.shared, kind, name, attempt, uid, false) {
            Ok(killed) => {
                self.ensure_watcher(kind);
                self.inner.shared.confirm(kind, name.to_string());
                killed
            }
            Err(killed) => killed,
        }
    }

    /// Creates the attempt's object, watched from before the create (so that no event of it
    /// can pass unseen); a 409 `AlreadyExists` is `AlreadyStarted`.
    async fn create(
        &self,
        attempt: &AttemptId,
        kind: Kind,
        name: &str,
        body: Value,
    ) -> Result<String, BackendError> {
        let a = attempt.as_str();
        let shared = &self.inner.shared;
        let fresh = watch::register(shared, kind, name, attempt, None, true).is_ok();
        self.ensure_watcher(kind);
        let created = match kind {
            Kind::Job => {
                let job: Job = serde_json::from_value(body).map_err(|e| bad(a, "job", e.to_string()))?;
                self.inner.apis.jobs.create(&PostParams::default(), &job).await.map(|j| j.metadata)
            }
            Kind::App => {
                let app: DynamicObject =
                    serde_json::from_value(body).map_err(|e| bad(a, "spark", e.to_string()))?;
                self.inner.apis.apps.create(&PostParams::default(), &app).await.map(|a| a.metadata)
            }
        };
        match created {
            Ok(meta) => {
                let uid = meta.uid.unwrap_or_default();
                watch::created(shared, kind, name, uid.clone());
                Ok(uid)
            }
            Err(e) => {
                if fresh {
                    watch::unregister(shared, kind, name);
                }
                if status_of(&e) == Some(409) {
                    return Err(BackendError::AlreadyStarted { attempt: a.to_string() });
                }
                Err(remote(a, e))
            }
        }
    }

    /// Marks the object `weir.io/killed`: read it, check its uid, merge-patch the annotation
    /// under the read `resourceVersion` (a precondition: the API answers `409 Conflict` if the
    /// object changed since — Kueue unsuspending it, the Job controller writing its status, or
    /// the name deleted and created again — and the read and the write are done again). `false`
    /// when the object is gone or is another (nothing of ours to delete).
    async fn mark_killed(
        &self,
        attempt: &str,
        kind: Kind,
        name: &str,
        uid: &str,
    ) -> Result<bool, BackendError> {
        let apis = &self.inner.apis;
        for _ in 0..MARK_TRIES {
            let Some(meta) = apis.meta(kind, name).await.map_err(|e| remote(attempt, e))? else {
                return Ok(false);
            };
            if !uid.is_empty() && meta.uid.as_deref() != Some(uid) {
                return Ok(false);
            }
            if meta.annotations.as_ref().is_some_and(|a| a.contains_key(KILLED_ANNOTATION)) {
                return Ok(true);
            }
            let body = serde_json::json!({"metadata": {
                "resourceVersion": meta.resource_version,
                "annotations": {KILLED_ANNOTATION: now_ms().to_string()},
            }});
            match apis.patch(kind, name, &body).await {
                Ok(()) => return Ok(true),
                Err(e) if status_of(&e) == Some(409) => continue, // changed meanwhile: again
                Err(e) if status_of(&e) == Some(404) => return Ok(false),
                Err(e) => return Err(remote(attempt, e)),
            }
        }
        // Changed under every try: delete it all the same (the delete's uid precondition
        // still keeps another object of the name safe).
        Ok(true)
    }

    /// Deletes the object with the kill's grace, only if it is still the one of `uid`.
    async fn delete_ours(
        &self,
        attempt: &str,
        kind: Kind,
        name: &str,
        uid: &str,
        grace: Option<Duration>,
    ) -> Result<(), BackendError> {
        let params = DeleteParams {
            grace_period_seconds: grace.map(|g| g.as_secs().min(u32::MAX as u64) as u32),
            propagation_policy: Some(PropagationPolicy::Background),
            preconditions: (!uid.is_empty())
                .then(|| Preconditions { uid: Some(uid.to_string()), resource_version: None }),
            ..DeleteParams::default()
        };
        match self.inner.apis.delete(kind, name, &params).await {
            Ok(()) => Ok(()),
            Err(e) if status_of(&e) == Some(404) => Ok(()), // already gone: idempotent
            Err(e) if status_of(&e) == Some(409) => Ok(()), // the name holds another object now
            Err(e) => Err(remote(attempt, e)),
        }
    }

    fn launched(
        &self,
        attempt: &AttemptId,
        kind: Kind,
        uid: &str,
        launch_dir: std::path::PathBuf,
    ) -> Launched {
        Launched {
            attempt: attempt.clone(),
            backend: KIND.to_string(),
            pid: 0,
            start_ticks: 0,
            boot_id: kind.boot_id(uid),
            started_at_ms: now_ms(),
            dir: launch_dir,
            cgroups: Vec::new(),
            uid: None,
        }
    }

    /// Starts `launch` in weir queue `weir_queue` (mapped through `queues`).
    pub async fn start_in(
        &self,
        launch: &TaskLaunch,
        weir_queue: Option<&str>,
    ) -> Result<Launched, BackendError> {
        let attempt = launch.attempt.as_str();
        let name = self.name(&launch.attempt)?;
        let queue = self.inner.config.target_queue(weir_queue);
        let dir = launch.stdout.parent().map(|p| p.to_path_buf()).unwrap_or_default();
        if let Some(spark) = &launch.spark {
            let body = manifest::spark_application(&self.inner.config, launch, spark, &name, queue)
                .map_err(|why| bad(attempt, "spark", why))?;
            let uid = self.create(&launch.attempt, Kind::App, &name, body).await?;
            return Ok(self.launched(&launch.attempt, Kind::App, &uid, dir));
        }
        let body = manifest::job(&self.inner.config, launch, &name, queue);
        let uid = self.create(&launch.attempt, Kind::Job, &name, body).await?;
        Ok(self.launched(&launch.attempt, Kind::Job, &uid, dir))
    }
}

/// How many times a kill reads and patches an object that keeps changing under it.
const MARK_TRIES: usize = 5;

fn bad(attempt: &str, field: &'static str, reason: String) -> BackendError {
    BackendError::BadLaunch { attempt: attempt.to_string(), field, reason }
}

/// The exit code its container left in a terminated pod.
fn terminated_code(pod: &Pod) -> Option<i32> {
    let statuses = pod.status.as_ref()?.container_statuses.as_ref()?;
    statuses.iter().find_map(|cs| cs.state.as_ref()?.terminated.as_ref().map(|t| t.exit_code))
}

/// The exit status of a failed Job's pod (its container's `terminated.exitCode`), or `Lost`
/// when no pod is left to say.
async fn pod_exit(pods: &Api<Pod>, name: &str) -> Exit {
    let Ok(list) =
        pods.list(&ListParams::default().labels(&format!("batch.kubernetes.io/job-name={name}"))).await
    else {
        return Exit::Lost;
    };
    for pod in list.items {
        for cs in pod.status.and_then(|s| s.container_statuses).unwrap_or_default() {
            if let Some(t) = cs.state.and_then(|s| s.terminated) {
                return Exit::Code(t.exit_code);
            }
        }
    }
    Exit::Lost
}

mod quantity {
    //! Kubernetes quantities (`"3920m"`, `"4"`, `"16318040Ki"`, `"8Gi"`) in weir's units.

    fn split(q: &str) -> (&str, &str) {
        let i = q.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(q.len());
        (&q[..i], &q[i..])
    }

    pub fn millicores(q: &str) -> Option<u64> {
        let (n, unit) = split(q);
        let n: f64 = n.parse().ok()?;
        match unit {
            "m" => Some(n as u64),
            "" => Some((n * 1000.0) as u64),
            _ => None,
        }
    }

    pub fn mebibytes(q: &str) -> Option<u64> {
        let (n, unit) = split(q);
        let n: f64 = n.parse().ok()?;
        let bytes = match unit {
            "" => n,
            "Ki" => n * 1024.0,
            "Mi" => n * 1024.0 * 1024.0,
            "Gi" => n * 1024.0 * 1024.0 * 1024.0,
            "Ti" => n * 1024f64.powi(4),
            "k" => n * 1e3,
            "M" => n * 1e6,
            "G" => n * 1e9,
            "T" => n * 1e12,
            _ => return None,
        };
        Some((bytes / (1024.0 * 1024.0)) as u64)
    }
}

impl Backend for KubeBackend {
    fn kind(&self) -> &str {
        KIND
    }

    fn health(&self) -> BoxFuture<'_, weir_backend::BackendHealth> {
        Box::pin(async {
            match KubeBackend::health(self).await {
                Ok(version) => {
                    // The node count is extra: a service account that may not list nodes is
                    // still a healthy backend.
                    let nodes = self.nodes().await.ok().map(|n| n.len() as u64);
                    weir_backend::BackendHealth { healthy: true, version, nodes, error: None }
                }
                Err(e) => weir_backend::BackendHealth {
                    healthy: false,
                    version: String::new(),
                    nodes: None,
                    error: Some(e.to_string()),
                },
            }
        })
    }

    fn start<'a>(&'a self, launch: &'a TaskLaunch) -> BoxFuture<'a, Result<Launched, BackendError>> {
        // The worker passes the task's weir queue in its environment (as to every backend).
        Box::pin(self.start_in(launch, launch.env.get("WEIR_QUEUE").map(String::as_str)))
    }

    fn kill<'a>(&'a self, task: &'a Launched, grace: Duration) -> BoxFuture<'a, Result<(), BackendError>> {
        Box::pin(async move {
            let attempt = task.attempt.as_str();
            let name = self.name(&task.attempt)?;
            let kind = Kind::of(task);
            let uid = Kind::uid_of(task);
            // Watch it first (after a restart), so that its end is reported as killed.
            let killed = self.watch_existing(&task.attempt, kind, &name, Some(uid.to_string()));
            killed.store(true, std::sync::atomic::Ordering::SeqCst);
            if !self.mark_killed(attempt, kind, &name, uid).await? {
                return Ok(()); // gone, or the name holds another object: nothing of ours to delete
            }
            self.delete_ours(attempt, kind, &name, uid, Some(grace)).await
        })
    }

    fn adopt<'a>(&'a self, task: &'a Launched) -> BoxFuture<'a, Result<Adopted, BackendError>> {
        Box::pin(async move {
            if task.backend != KIND {
                return Err(BackendError::WrongBackend {
                    attempt: task.attempt.to_string(),
                    expected: KIND.into(),
                    found: task.backend.clone(),
                });
            }
            let name = self.name(&task.attempt)?;
            let kind = Kind::of(task);
            let apis = &self.inner.apis;
            let attempt = task.attempt.as_str();
            let Some(meta) = apis.meta(kind, &name).await.map_err(|e| remote(attempt, e))? else {
                return Ok(Adopted::Ended(Exit::Lost));
            };
            // An object of that name with another uid is not the one we started.
            let uid = Kind::uid_of(task);
            if meta.uid.as_deref() != Some(uid) {
                return Ok(Adopted::Ended(Exit::Lost));
            }
            let Some(read) = apis.read(kind, &name).await.map_err(|e| remote(attempt, e))? else {
                return Ok(Adopted::Ended(Exit::Lost));
            };
            let killing = meta.annotations.as_ref().is_some_and(|a| a.contains_key(KILLED_ANNOTATION));
            match read.end {
                None => {
                    let killed = self.watch_existing(&task.attempt, kind, &name, Some(uid.to_string()));
                    if killing {
                        // A kill cut short by a restart (marked, not deleted): finish it.
                        killed.store(true, std::sync::atomic::Ordering::SeqCst);
                        self.delete_ours(attempt, kind, &name, uid, None).await?;
                    }
                    Ok(Adopted::Running)
                }
                Some(true) => Ok(Adopted::Ended(Exit::Code(0))),
                Some(false) if killing => Ok(Adopted::Ended(Exit::Killed)),
                Some(false) => Ok(Adopted::Ended(apis.failed_exit(kind, &name, &read).await)),
            }
        })
    }

    fn recover<'a>(&'a self, attempt: &'a AttemptId) -> BoxFuture<'a, Result<Recovered, BackendError>> {
        Box::pin(async move {
            let name = self.name(attempt)?;
            let selector = format!("{}={name}", manifest::ATTEMPT_LABEL);
            let params = ListParams::default().labels(&selector);
            let apis = &self.inner.apis;
            // The label holds the object's name; the annotation the exact attempt id (two ids
            // may map to one name: `a/b` and `a-b`).
            let mine = |m: &kube::api::ObjectMeta| {
                m.annotations.as_ref().and_then(|a| a.get(manifest::ATTEMPT_ANNOTATION))
                    == Some(&attempt.to_string())
            };
            let jobs = apis.jobs.list(&params).await.map_err(|e| remote(attempt.as_str(), e))?;
            let found = match jobs.items.into_iter().find(|j| mine(&j.metadata)) {
                Some(job) => Some((
                    Kind::Job,
                    Read {
                        uid: job.metadata.uid.clone().unwrap_or_default(),
                        end: job_end(&job),
                        driver_pod: None,
                    },
                )),
                // A cluster without the operator has no SparkApplications to list (404): none.
                None => match apis.apps.list(&params).await {
                    Ok(apps) => {
                        apps.items.into_iter().find(|a| mine(&a.metadata)).map(|a| (Kind::App, read_app(&a)))
                    }
                    Err(e) if status_of(&e) == Some(404) => None,
                    Err(e) => return Err(remote(attempt.as_str(), e)),
                },
            };
            let Some((kind, read)) = found else { return Ok(Recovered::NotFound) };
            match read.end {
                None => {
                    self.watch_existing(attempt, kind, &name, Some(read.uid.clone()));
                    Ok(Recovered::Running(self.launched(attempt, kind, &read.uid, Default::default())))
                }
                Some(true) => Ok(Recovered::Ended(Exit::Code(0))),
                Some(false) => Ok(Recovered::Ended(apis.failed_exit(kind, &name, &read).await)),
            }
        })
    }

    fn forget<'a>(&'a self, task: &'a Launched) -> BoxFuture<'a, Result<(), BackendError>> {
        Box::pin(async move {
            let name = self.name(&task.attempt)?;
            let kind = Kind::of(task);
            if watch::watched(&self.inner.shared, kind, &name) {
                return Ok(()); // still running: forgetting it is a no-op
            }
            // The ended object and its pods go (only the one of the record's uid); the
            // attempt's log was the caller's to keep.
            self.delete_ours(task.attempt.as_str(), kind, &name, Kind::uid_of(task), None).await
        })
    }
}
