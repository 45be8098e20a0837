//! The service layer's shared state ([`AppState`]) and the reads and checks every handler
//! needs — the caller's principal, a run it may see, the published queue snapshots, the
//! request body — for the API (`api`, `loop_api`, `logs`) and the dashboard alike. A bottom
//! module: it imports none of the modules that serve requests; `lib.rs` assembles their
//! routers on top.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, StatusCode};
use tokio::sync::Notify;
use weir_api::{ClusterConfigApplied, ClusterQueues, Role};
use weir_store::{JobStore, RunRow};

use crate::auth::{Authenticator, Principal};
use crate::clusters::Registry;
use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::snapshot::Snapshot;
use crate::submit::Writer;
use crate::time::now_ms;

#[derive(Clone)]
pub struct AppState {
    pub store: Arc<dyn JobStore>,
    pub registry: Arc<Registry>,
    pub auth: Arc<Authenticator>,
    pub writer: Writer,
    /// Wakes this process's worker when a run is submitted or killed.
    pub notify: Option<Arc<Notify>>,
    pub metrics: Arc<Metrics>,
}

impl AppState {
    pub fn new(
        store: Arc<dyn JobStore>,
        registry: Arc<Registry>,
        notify: Option<Arc<Notify>>,
        metrics: Arc<Metrics>,
    ) -> AppState {
        AppState {
            writer: Writer::start(store.clone(), metrics.clone()),
            store,
            registry,
            auth: Arc::new(Authenticator::default()),
            notify,
            metrics,
        }
    }

    pub(crate) async fn principal(&self, headers: &HeaderMap) -> Result<Principal, ApiError> {
        self.auth.principal(self.store.as_ref(), headers).await
    }

    pub(crate) fn wake(&self) {
        if let Some(n) = &self.notify {
            n.notify_one();
        }
    }
}

/// The body, or the right error: 413 over the size limit, 400 otherwise.
pub(crate) fn body(b: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    b.map_err(|r| {
        if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                "the request body is larger than the server accepts",
            )
        } else {
            ApiError::bad_request(format!("cannot read the request body: {r}"))
        }
    })
}

pub(crate) fn is_yaml(headers: &HeaderMap) -> bool {
    headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("yaml"))
}

/// The run, if the caller may see it (403 otherwise, 404 if there is none).
pub(crate) async fn readable_run(
    s: &AppState,
    headers: &HeaderMap,
    id: i64,
    role: Role,
) -> Result<RunRow, ApiError> {
    let principal = s.principal(headers).await?;
    let run = s.store.run(id).await?.ok_or_else(|| ApiError::not_found(format!("no run {id}")))?;
    principal.require(&run.project, role)?;
    Ok(run)
}

pub(crate) async fn snapshot(s: &AppState, cluster: &str) -> Result<Option<(Snapshot, i64)>, ApiError> {
    let rows = s.store.snapshots().await?;
    Ok(rows
        .into_iter()
        .find(|r| r.cluster == cluster)
        .and_then(|r| serde_json::from_str::<Snapshot>(&r.body).ok().map(|sn| (sn, r.taken_ms))))
}

pub(crate) async fn cluster_queues(
    s: &AppState,
    cluster: Option<&str>,
) -> Result<Vec<ClusterQueues>, ApiError> {
    let rows = s.store.snapshots().await?;
    let mut out = Vec::new();
    for name in s.registry.cluster_names() {
        if cluster.is_some_and(|c| c != name) {
            continue;
        }
        let snap = rows
            .iter()
            .find(|r| r.cluster == name)
            .and_then(|r| serde_json::from_str::<Snapshot>(&r.body).ok());
        let queues = snap.and_then(|sn| sn.queues).unwrap_or_else(|| ClusterQueues {
            cluster: name.clone(),
            as_of_ms: None,
            total: Default::default(),
            used: Default::default(),
            queues: Vec::new(),
        });
        out.push(queues);
    }
    if let Some(c) = cluster {
        if out.is_empty() {
            return Err(ApiError::not_found(format!("no cluster `{c}`")).field("cluster"));
        }
    }
    Ok(out)
}

pub(crate) fn require_admin(p: &Principal) -> Result<(), ApiError> {
    if p.is_global_admin() {
        Ok(())
    } else {
        Err(ApiError::forbidden(format!("token {} is not a global admin", p.token_id)))
    }
}

/// Reload a cluster's queue tree from a cluster file: validated first, a bad file changes
/// nothing.
pub(crate) async fn reload_cluster(
    s: &AppState,
    name: &str,
    text: String,
) -> Result<ClusterConfigApplied, ApiError> {
    if s.registry.cluster(name).is_none() {
        return Err(ApiError::not_found(format!("no cluster `{name}`")));
    }
    let config = weir_model::ClusterConfig::from_yaml("config", &text).map_err(|e| {
        let first = e.problems().into_iter().next();
        let message = e.problems().iter().map(|p| p.to_string()).collect::<Vec<_>>().join("; ");
        ApiError::invalid(message).field(first.map(|p| p.path).unwrap_or_default())
    })?;
    weir_engine::Engine::new(config.clone()).map_err(|e| ApiError::invalid(e.to_string()))?;
    let version = s.store.put_cluster(name, &text, now_ms()).await?;
    let (queues, leaves) = (config.queues.len(), config.leaves().count());
    s.registry.put_cluster(name, config, version);
    s.wake();
    Ok(ClusterConfigApplied { cluster: name.to_string(), queues, leaves })
}
