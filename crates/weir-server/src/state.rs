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
use weir_api::{ClusterConfigApplied, ClusterQueues, QueueInfo, Role};
use weir_store::{AuditEntry, JobStore, RunRow};

use crate::auth::{Authenticator, Principal};
use crate::clusters::Registry;
use crate::config::Limits;
use crate::error::ApiError;
use crate::limits::SubmissionRate;
use crate::metrics::Metrics;
use crate::snapshot::{Published, Snapshot};
use crate::submit::{project_of_queue, Writer};
use crate::time::now_ms;

/// What every handler shares, behind one [`Arc`]: axum clones the state for each extractor
/// and middleware of every request, and a clone is then one reference count, not one per
/// field (it was ~15 atomic increments and decrements and a `String` per clone).
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

impl From<Shared> for AppState {
    fn from(shared: Shared) -> AppState {
        AppState(Arc::new(shared))
    }
}

/// The fields of [`AppState`]; set up before the server starts, then shared read-only.
pub struct Shared {
    pub store: Arc<dyn JobStore>,
    pub registry: Arc<Registry>,
    pub auth: Arc<Authenticator>,
    pub writer: Writer,
    /// Wakes this process's worker when a run is submitted or killed.
    pub notify: Option<Arc<Notify>>,
    pub metrics: Arc<Metrics>,
    pub limits: Arc<Limits>,
    pub rate: Arc<SubmissionRate>,
    /// As whom tasks run: a cluster file's `run_as` is checked against it.
    pub task_users: Arc<crate::isolation::TaskUsers>,
    /// How the dashboard's sessions are kept.
    pub sessions: Sessions,
    /// Each cluster's backend as this process's worker last saw it.
    pub backends: Arc<crate::backend_status::BackendStatuses>,
    /// The plan → apply loop's guards.
    pub planning: crate::config::Planning,
    /// Load-aware routes and what this process routed by them lately.
    pub router: Arc<crate::routing::Router>,
    /// The one bucket outputs and inputs may name (an S3 object store); `None`: any (the
    /// local store keeps one folder per bucket).
    pub output_bucket: Option<String>,
    /// The balancing advisor's settings ("Advise now" uses its window).
    pub advisor: Arc<crate::advice::AdvisorSettings>,
    /// The queue snapshots this process's engine actors published (read before the store's).
    pub snapshots: Arc<crate::snapshot::SnapshotBoard>,
}

/// The dashboard's session cookies: `Secure` when the browser reaches the server over TLS
/// (served here, or by a reverse proxy in front), and how long a login lasts.
#[derive(Clone, Copy, Debug)]
pub struct Sessions {
    pub secure: bool,
    pub lifetime: std::time::Duration,
}

impl Default for Sessions {
    fn default() -> Sessions {
        Sessions { secure: false, lifetime: std::time::Duration::from_secs(12 * 3600) }
    }
}

impl Shared {
    pub fn new(
        store: Arc<dyn JobStore>,
        registry: Arc<Registry>,
        notify: Option<Arc<Notify>>,
        metrics: Arc<Metrics>,
        limits: Limits,
        task_users: Arc<crate::isolation::TaskUsers>,
    ) -> Shared {
        Shared {
            task_users,
            writer: Writer::start(store.clone(), metrics.clone()),
            store,
            registry,
            auth: Arc::new(Authenticator::new(metrics.clone())),
            notify,
            metrics,
            limits: Arc::new(limits),
            rate: Arc::new(SubmissionRate::default()),
            sessions: Sessions::default(),
            backends: Arc::default(),
            planning: crate::config::Planning::default(),
            router: Arc::default(),
            output_bucket: None,
            advisor: Arc::new(crate::advice::AdvisorSettings::default()),
            snapshots: Arc::default(),
        }
    }

    pub(crate) async fn principal(&self, headers: &HeaderMap) -> Result<Principal, ApiError> {
        self.auth.principal(self.store.as_ref(), headers).await
    }

    /// Records an action in the audit log. An audit write that fails is logged, not fatal:
    /// the action itself has already happened.
    pub(crate) async fn audit(&self, who: &str, action: &str, target: String, outcome: &str, ctx: Audit) {
        let entry = AuditEntry {
            at_ms: now_ms(),
            token_id: who.to_string(),
            action: action.to_string(),
            target,
            project: ctx.project,
            client: ctx.client,
            outcome: outcome.to_string(),
            detail: ctx.detail,
        };
        if let Err(e) = self.store.append_audit(&entry).await {
            eprintln!("weir serve: cannot write the audit log ({action} {}): {e}", entry.target);
        }
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
        if crate::http::is_body_timeout(&r) {
            ApiError::new(StatusCode::REQUEST_TIMEOUT, "request_timeout", r.body_text())
        } else if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
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
    Ok(readable_run_by(s, headers, id, role).await?.1)
}

/// The run and the caller, if the caller may see it. Another project's run is answered like
/// a missing one (404), so that ids do not tell a tenant what other tenants run; a run the
/// caller may see but not act on is 403.
pub(crate) async fn readable_run_by(
    s: &AppState,
    headers: &HeaderMap,
    id: i64,
    role: Role,
) -> Result<(Principal, RunRow), ApiError> {
    let principal = s.principal(headers).await?;
    let missing = || ApiError::not_found(format!("no run {id}"));
    let run = s.store.run(id).await?.ok_or_else(missing)?;
    if !principal.can(&run.project, Role::Viewer) {
        return Err(missing());
    }
    principal.require(&run.project, role)?;
    Ok((principal, run))
}

/// The cluster's last published snapshot: this process's actor's (shared, nothing parsed) when
/// it runs the cluster, else the store's (parsed).
pub(crate) async fn snapshot(s: &AppState, cluster: &str) -> Result<Option<Arc<Published>>, ApiError> {
    if let Some(p) = s.snapshots.get(cluster) {
        return Ok(Some(p));
    }
    let rows = s.store.snapshots().await?;
    Ok(rows.into_iter().find(|r| r.cluster == cluster).and_then(|r| parse_snapshot(&r.body, r.taken_ms)))
}

fn parse_snapshot(body: &str, taken_ms: i64) -> Option<Arc<Published>> {
    serde_json::from_str::<Snapshot>(body).ok().map(|sn| Arc::new(Published::from_snapshot(sn, taken_ms)))
}

/// Each served cluster (or only `cluster`) with its last published snapshot, if any (as
/// [`snapshot`] finds it; the store is read only if some cluster is not on this process's
/// board).
pub(crate) async fn served_snapshots(
    s: &AppState,
    cluster: Option<&str>,
) -> Result<Vec<(String, Option<Arc<Published>>)>, ApiError> {
    let names: Vec<String> =
        s.registry.cluster_names().into_iter().filter(|name| cluster.is_none_or(|c| c == name)).collect();
    let local: Vec<Option<Arc<Published>>> = names.iter().map(|n| s.snapshots.get(n)).collect();
    let rows = if local.iter().any(Option::is_none) { s.store.snapshots().await? } else { Vec::new() };
    Ok(names
        .into_iter()
        .zip(local)
        .map(|(name, local)| {
            let snap = local.or_else(|| {
                rows.iter().find(|r| r.cluster == name).and_then(|r| parse_snapshot(&r.body, r.taken_ms))
            });
            (name, snap)
        })
        .collect())
}

/// One queue of a served cluster (or of the first served cluster that has it), as `p` may see
/// it: looked up by path in the published tree, nothing else copied.
pub(crate) async fn one_queue(
    s: &AppState,
    p: &Principal,
    cluster: Option<&str>,
    path: &str,
) -> Result<Option<QueueInfo>, ApiError> {
    let clusters = served_snapshots(s, cluster).await?;
    if let Some(c) = cluster {
        if clusters.is_empty() {
            return Err(ApiError::not_found(format!("no cluster `{c}`")).field("cluster"));
        }
    }
    let mut starting = None;
    for (name, snap) in clusters {
        let Some(tree) = snap.as_ref().and_then(|sn| Option::as_ref(&*sn.queues.value)) else {
            // Nothing published yet (its engine is still starting): the queue may be there.
            starting = starting.or_else(|| configured_queue(s, p, &name, path).then_some(name));
            continue;
        };
        let Some(q) = tree.get(path) else { continue };
        if !p.can_all(Role::Viewer) {
            let paths: Vec<String> = tree.tree.queues.iter().map(|q| q.path.clone()).collect();
            if !queue_visible(p, path, &paths) {
                continue;
            }
        }
        return Ok(Some(q.clone()));
    }
    match starting {
        // A queue of the cluster file, asked for before its engine's first publication (a
        // large cluster's first pass takes seconds): not a 404, which would say it does not
        // exist.
        Some(name) => Err(ApiError::not_ready(format!(
            "cluster `{name}` has not published its queues yet (its engine is starting): try again \
             shortly"
        ))),
        None => Ok(None),
    }
}

/// Whether cluster `name`'s loaded file has queue `path` and `p` may see it.
fn configured_queue(s: &AppState, p: &Principal, name: &str, path: &str) -> bool {
    let Some(c) = s.registry.cluster(name) else { return false };
    let paths: Vec<String> = c.config.queues.iter().map(|q| q.path.to_string()).collect();
    paths.iter().any(|q| q == path) && queue_visible(p, path, &paths)
}

pub(crate) async fn cluster_queues(
    s: &AppState,
    cluster: Option<&str>,
) -> Result<Vec<ClusterQueues>, ApiError> {
    let mut out = Vec::new();
    for (name, snap) in served_snapshots(s, cluster).await? {
        let queues = snap.and_then(|sn| sn.cluster_queues()).unwrap_or_else(|| ClusterQueues {
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
    actor: &str,
) -> Result<ClusterConfigApplied, ApiError> {
    if s.registry.cluster(name).is_none() {
        return Err(ApiError::not_found(format!("no cluster `{name}`")));
    }
    let config = weir_model::ClusterConfig::from_yaml("config", &text).map_err(|e| {
        let first = e.problems().into_iter().next();
        let message = e.problems().iter().map(|p| p.to_string()).collect::<Vec<_>>().join("; ");
        ApiError::invalid(message).field(first.map(|p| p.path).unwrap_or_default())
    })?;
    if let Some((path, message)) = crate::acl::unenforceable(&config).into_iter().next() {
        return Err(ApiError::invalid(format!("{path}: {message}")).field(path));
    }
    if let Some((path, message)) = s.task_users.check(&config).into_iter().next() {
        return Err(ApiError::invalid(format!("{path}: {message}")).field(path));
    }
    weir_engine::Engine::new(config.clone()).map_err(|e| ApiError::invalid(e.to_string()))?;
    let before = s.store.cluster(name).await?.map(|c| c.config);
    let routes: Vec<weir_api::Route> = s
        .store
        .routes()
        .await?
        .into_iter()
        .filter(|r| r.cluster == name)
        .map(|r| weir_api::Route { key: r.key, cluster: r.cluster, queue: r.queue })
        .collect();
    let change = weir_store::ConfigChange {
        actor: actor.to_string(),
        source: "edit".into(),
        diff: crate::loop_api::edit_diff(before.as_deref(), &text),
        routes: serde_json::to_string(&routes).ok(),
    };
    let version = s.store.put_cluster(name, &text, &change, now_ms()).await?;
    let (queues, leaves) = (config.queues.len(), config.leaves().count());
    s.registry.put_cluster(name, config, version);
    s.wake();
    Ok(ClusterConfigApplied { cluster: name.to_string(), queues, leaves })
}

/// The rest of an audit entry: the project, the peer address and free text.
#[derive(Clone, Debug, Default)]
pub(crate) struct Audit {
    pub project: Option<String>,
    pub client: Option<String>,
    pub detail: Option<String>,
}

impl Audit {
    pub fn from(peer: &Peer) -> Audit {
        Audit { client: peer.0.clone(), ..Audit::default() }
    }

    pub fn project(mut self, p: impl Into<String>) -> Audit {
        self.project = Some(p.into());
        self
    }

    pub fn detail(mut self, d: impl Into<String>) -> Audit {
        self.detail = Some(d.into());
        self
    }
}

/// The peer address of a request, when the listener recorded it (axum's `ConnectInfo`).
#[derive(Clone, Debug, Default)]
pub(crate) struct Peer(pub Option<String>);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Peer {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> Result<Peer, Self::Rejection> {
        Ok(Peer(
            parts
                .extensions
                .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
                .map(|c| c.0.ip().to_string()),
        ))
    }
}

/// Whether a caller sees a queue: every queue for a viewer of all projects; else the queues
/// of its projects and their ancestors (the path down to them, with aggregated figures).
/// Cluster totals are shown to everyone.
pub(crate) fn queue_visible(p: &Principal, path: &str, all: &[String]) -> bool {
    p.can_all(Role::Viewer)
        || p.can(&project_of_queue(path), Role::Viewer)
        || all.iter().any(|q| q.starts_with(&format!("{path}.")) && p.can(&project_of_queue(q), Role::Viewer))
}

/// `clusters` with only the queues `p` may see.
pub(crate) fn visible_queues(p: &Principal, mut clusters: Vec<ClusterQueues>) -> Vec<ClusterQueues> {
    if p.can_all(Role::Viewer) {
        return clusters;
    }
    for c in &mut clusters {
        let paths: Vec<String> = c.queues.iter().map(|q| q.path.clone()).collect();
        c.queues.retain(|q| queue_visible(p, &q.path, &paths));
    }
    clusters
}
