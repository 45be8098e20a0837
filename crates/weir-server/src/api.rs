//! The service layer's HTTP API (`/v1`). Handlers authenticate, authorize, validate, and read
//! or write the store; they never call a backend and never wait on an engine.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde::Deserialize;
use tokio::sync::Notify;
use weir_api::{
    ClusterConfigApplied, ClusterQueues, CreateToken, Grant, Health, Job, JobExplanation, QueuesResponse,
    Role, Route, RouteList, RouteTarget, Run, RunCreated, RunExplanation, RunList, RunState, RunSummary,
    Task, TokenCreated, TokenInfo, TokenList,
};
use weir_store::{KillOutcome, NewRun, RouteRow, RunFilter, RunRow, Store, Submitted, TokenRow};

use crate::auth::{hash_token, new_token, Authenticator, Principal};
use crate::clusters::Registry;
use crate::error::ApiError;
use crate::snapshot::Snapshot;
use crate::submit::{self, Writer};
use crate::time::{format_utc, now_ms};

/// Idempotency records replay for this long.
const IDEMPOTENCY_MS: i64 = 24 * 3600 * 1000;

#[derive(Clone)]
pub struct AppState {
    pub store: Store,
    pub registry: Arc<Registry>,
    pub auth: Arc<Authenticator>,
    pub writer: Writer,
    /// Wakes this process's worker when a run is submitted or killed.
    pub notify: Option<Arc<Notify>>,
}

impl AppState {
    pub fn new(store: Store, registry: Arc<Registry>, notify: Option<Arc<Notify>>) -> AppState {
        AppState {
            writer: Writer::start(store.clone()),
            store,
            registry,
            auth: Arc::new(Authenticator::default()),
            notify,
        }
    }

    async fn principal(&self, headers: &HeaderMap) -> Result<Principal, ApiError> {
        self.auth.principal(&self.store, headers).await
    }

    fn wake(&self) {
        if let Some(n) = &self.notify {
            n.notify_one();
        }
    }
}

pub fn router(state: AppState, body_limit: usize) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/v1/openapi.json", get(openapi))
        .route("/v1/runs", post(submit_run).get(list_runs))
        .route("/v1/runs/{id}", get(get_run))
        .route("/v1/runs/{id}/kill", post(kill_run))
        .route("/v1/runs/{id}/explain", get(explain_run))
        .route("/v1/runs/{id}/tasks/{task}/logs", get(crate::logs::task_logs))
        .route("/v1/queues", get(queues))
        .route("/v1/queues/{path}", get(queue))
        .route("/v1/routes", get(list_routes))
        .route("/v1/routes/{key}", put(put_route).delete(delete_route))
        .route("/v1/workflows/{name}", put(put_workflow))
        .route("/v1/clusters/{name}/config", put(put_cluster_config))
        .route("/v1/tokens", post(create_token).get(list_tokens))
        .route("/v1/tokens/{id}", axum::routing::delete(revoke_token))
        .fallback(|| async { ApiError::not_found("no such endpoint; see /v1/openapi.json") })
        .layer(DefaultBodyLimit::max(body_limit))
        .with_state(state)
}

/// The body, or the right error: 413 over the size limit, 400 otherwise.
fn body(b: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
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

fn is_yaml(headers: &HeaderMap) -> bool {
    headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("yaml"))
}

async fn healthz() -> Json<Health> {
    Json(Health { status: "ok".into() })
}

async fn readyz(State(s): State<AppState>) -> Result<Json<Health>, ApiError> {
    s.store.ping().await?;
    Ok(Json(Health { status: "ready".into() }))
}

async fn openapi() -> Response {
    ([(axum::http::header::CONTENT_TYPE, "application/json")], weir_api::openapi_json()).into_response()
}

fn run_state(s: &str) -> RunState {
    RunState::parse(s).unwrap_or(RunState::Failed)
}

fn summary(r: &RunRow) -> RunSummary {
    RunSummary {
        id: r.id,
        workflow: r.workflow.clone(),
        project: r.project.clone(),
        tier: r.tier,
        logical_date: r.logical_date.clone(),
        state: run_state(&r.state),
        cluster: r.cluster.clone(),
        queue: r.queue.clone(),
        submitted_ms: r.submitted_ms,
        finished_ms: r.finished_ms,
    }
}

fn created(r: &RunRow) -> RunCreated {
    RunCreated {
        id: r.id,
        workflow: r.workflow.clone(),
        logical_date: r.logical_date.clone(),
        cluster: r.cluster.clone(),
        queue: r.queue.clone(),
        state: RunState::Queued,
    }
}

async fn submit_run(
    State(s): State<AppState>,
    headers: HeaderMap,
    b: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let principal = s.principal(&headers).await?;
    let b = body(b)?;
    let req = submit::parse_body(&b, is_yaml(&headers))?;
    submit::check_params(&req.params)?;
    let spec_value = match (&req.workflow, &req.workflow_name) {
        (Some(w), None) => w.clone(),
        (None, Some(name)) => {
            let text = s.store.workflow(name).await?.ok_or_else(|| {
                ApiError::invalid(format!("no registered workflow `{name}`")).field("workflow_name")
            })?;
            serde_json::from_str(&text)
                .map_err(|e| ApiError::internal(format!("stored workflow `{name}`: {e}")))?
        }
        _ => {
            return Err(
                ApiError::invalid("give exactly one of `workflow` and `workflow_name`").field("workflow")
            )
        }
    };
    let spec = submit::workflow_spec(&spec_value)?;
    let accepted = submit::accept(&s.registry, spec)?;
    principal.require(&accepted.project, Role::Submitter)?;
    let now = now_ms();
    let idempotency_key = headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(|k| format!("{}:{k}", principal.token_id));
    let run = NewRun {
        workflow: accepted.spec.name.clone(),
        project: accepted.project,
        tier: accepted.tier,
        logical_date: req.logical_date.clone().unwrap_or_else(|| format_utc(now)),
        cluster: accepted.cluster,
        queue: accepted.queue,
        spec: serde_json::to_string(&accepted.spec).map_err(|e| ApiError::internal(e.to_string()))?,
        params: serde_json::to_string(&req.params).map_err(|e| ApiError::internal(e.to_string()))?,
        submitted_by: principal.token_id.clone(),
        submitted_ms: now,
        idempotency_key,
        idempotency_after_ms: now - IDEMPOTENCY_MS,
    };
    let outcome = s.writer.submit(run.clone()).await?;
    let conflict = |existing: i64| {
        ApiError::conflict(
            format!(
                "run {existing} of workflow `{}` for logical date `{}` is still active",
                run.workflow, run.logical_date
            ),
            existing,
        )
    };
    match outcome {
        Submitted::Created { id } => {
            s.wake();
            let body = RunCreated {
                id,
                workflow: run.workflow,
                logical_date: run.logical_date,
                cluster: run.cluster,
                queue: run.queue,
                state: RunState::Queued,
            };
            Ok((StatusCode::CREATED, Json(body)).into_response())
        }
        Submitted::Conflict { existing } => Err(conflict(existing)),
        Submitted::Replay { status: 201, run: id } => {
            let row = s
                .store
                .run(id)
                .await?
                .ok_or_else(|| ApiError::internal(format!("replayed run {id} is gone")))?;
            Ok((StatusCode::CREATED, Json(created(&row))).into_response())
        }
        Submitted::Replay { run: existing, .. } => Err(conflict(existing)),
    }
}

#[derive(Deserialize)]
struct ListQuery {
    project: Option<String>,
    workflow: Option<String>,
    state: Option<String>,
    since: Option<i64>,
    cursor: Option<String>,
    limit: Option<u32>,
}

async fn list_runs(
    State(s): State<AppState>,
    headers: HeaderMap,
    q: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<RunList>, ApiError> {
    let principal = s.principal(&headers).await?;
    let Query(q) = q.map_err(|e| ApiError::bad_request(e.body_text()))?;
    if let Some(st) = &q.state {
        if RunState::parse(st).is_none() {
            return Err(ApiError::bad_request(format!("`{st}` is not a run state")).field("state"));
        }
    }
    let before = match &q.cursor {
        Some(c) => Some(c.parse::<i64>().map_err(|_| ApiError::bad_request("bad cursor").field("cursor"))?),
        None => None,
    };
    let limit = q.limit.unwrap_or(100).clamp(1, 1000);
    let filter = RunFilter {
        project: q.project,
        projects_in: principal.readable(),
        workflow: q.workflow,
        state: q.state,
        since_ms: q.since,
        before,
        limit,
    };
    let rows = s.store.list_runs(&filter).await?;
    let next_cursor = (rows.len() == limit as usize).then(|| rows.last().map(|r| r.id.to_string())).flatten();
    Ok(Json(RunList { runs: rows.iter().map(summary).collect(), next_cursor }))
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

async fn snapshot(s: &AppState, cluster: &str) -> Result<Option<(Snapshot, i64)>, ApiError> {
    let rows = s.store.snapshots().await?;
    Ok(rows
        .into_iter()
        .find(|r| r.cluster == cluster)
        .and_then(|r| serde_json::from_str::<Snapshot>(&r.body).ok().map(|sn| (sn, r.taken_ms))))
}

async fn get_run(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<i64>,
) -> Result<Json<Run>, ApiError> {
    let run = readable_run(&s, &headers, id, Role::Viewer).await?;
    let jobs = s.store.jobs(id).await?;
    let tasks = s.store.tasks(id).await?;
    let explanations = if RunState::parse(&run.state).is_some_and(|st| !st.is_terminal()) {
        snapshot(&s, &run.cluster).await?.map(|(sn, _)| sn.explanations).unwrap_or_default()
    } else {
        BTreeMap::new()
    };
    let wire_jobs = jobs
        .iter()
        .map(|j| Job {
            name: j.name.clone(),
            state: j.state.clone(),
            started_ms: j.started_ms,
            finished_ms: j.finished_ms,
            explanation: explanations.get(&format!("{id}/{}", j.idx)).cloned(),
            tasks: tasks
                .iter()
                .filter(|t| t.job_idx == j.idx)
                .map(|t| Task {
                    name: format!("{}.{}.{}", j.name, t.stage, t.task_idx),
                    stage: t.stage.clone(),
                    index: t.task_idx,
                    state: t.state.clone(),
                    attempts: t.attempts,
                    node: t.node.clone(),
                    started_ms: t.started_ms,
                    finished_ms: t.finished_ms,
                    exit_code: t.exit_code,
                })
                .collect(),
        })
        .collect();
    Ok(Json(Run {
        id,
        workflow: run.workflow,
        project: run.project,
        tier: run.tier,
        logical_date: run.logical_date,
        state: run_state(&run.state),
        cluster: run.cluster,
        queue: run.queue,
        submitted_ms: run.submitted_ms,
        started_ms: run.started_ms,
        finished_ms: run.finished_ms,
        reason: run.reason,
        kill_requested: run.kill_requested,
        params: serde_json::from_str(&run.params).unwrap_or_default(),
        jobs: wire_jobs,
    }))
}

async fn kill_run(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<i64>,
) -> Result<Response, ApiError> {
    readable_run(&s, &headers, id, Role::Submitter).await?;
    let outcome = s.store.request_kill(id, now_ms()).await?;
    if outcome == KillOutcome::NotFound {
        return Err(ApiError::not_found(format!("no run {id}")));
    }
    s.wake();
    let run = s.store.run(id).await?.ok_or_else(|| ApiError::not_found(format!("no run {id}")))?;
    Ok((StatusCode::ACCEPTED, Json(summary(&run))).into_response())
}

async fn explain_run(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<i64>,
) -> Result<Json<RunExplanation>, ApiError> {
    let run = readable_run(&s, &headers, id, Role::Viewer).await?;
    let jobs = s.store.jobs(id).await?;
    let snap = snapshot(&s, &run.cluster).await?;
    let state = run_state(&run.state);
    let out = jobs
        .iter()
        .filter(|j| !matches!(j.state.as_str(), "succeeded" | "failed" | "killed"))
        .map(|j| {
            let text =
                snap.as_ref().and_then(|(sn, _)| sn.explanations.get(&format!("{id}/{}", j.idx)).cloned());
            let explanation = match (j.state.as_str(), text) {
                (_, Some(t)) => t,
                ("pending", None) => "waits for the jobs it comes after".to_string(),
                (_, None) if state == RunState::Queued => {
                    "the run waits for a worker to claim it".to_string()
                }
                (_, None) => "has every container it asked for, or no snapshot was published yet".to_string(),
            };
            JobExplanation { job: j.name.clone(), state: j.state.clone(), explanation }
        })
        .collect();
    Ok(Json(RunExplanation { id, state, jobs: out }))
}

#[derive(Deserialize)]
struct ClusterQuery {
    cluster: Option<String>,
}

async fn cluster_queues(s: &AppState, cluster: Option<&str>) -> Result<Vec<ClusterQueues>, ApiError> {
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

async fn queues(
    State(s): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<ClusterQuery>,
) -> Result<Json<QueuesResponse>, ApiError> {
    s.principal(&headers).await?;
    Ok(Json(QueuesResponse { clusters: cluster_queues(&s, q.cluster.as_deref()).await? }))
}

async fn queue(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(path): Path<String>,
    Query(q): Query<ClusterQuery>,
) -> Result<Json<weir_api::QueueInfo>, ApiError> {
    s.principal(&headers).await?;
    let want = if path.starts_with("root") { path.clone() } else { format!("root.{path}") };
    cluster_queues(&s, q.cluster.as_deref())
        .await?
        .into_iter()
        .flat_map(|c| c.queues)
        .find(|q| q.path == want)
        .map(Json)
        .ok_or_else(|| ApiError::not_found(format!("no queue {want}")))
}

async fn list_routes(State(s): State<AppState>, headers: HeaderMap) -> Result<Json<RouteList>, ApiError> {
    s.principal(&headers).await?;
    let routes = s.store.routes().await?;
    Ok(Json(RouteList {
        routes: routes
            .into_iter()
            .map(|r| Route { key: r.key, cluster: r.cluster, queue: r.queue })
            .collect(),
    }))
}

fn require_admin(p: &Principal) -> Result<(), ApiError> {
    if p.is_global_admin() {
        Ok(())
    } else {
        Err(ApiError::forbidden(format!("token {} is not a global admin", p.token_id)))
    }
}

async fn put_route(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(key): Path<String>,
    b: Result<Bytes, BytesRejection>,
) -> Result<Json<Route>, ApiError> {
    require_admin(&s.principal(&headers).await?)?;
    let b = body(b)?;
    let target: RouteTarget =
        serde_json::from_slice(&b).map_err(|e| ApiError::bad_request(format!("malformed JSON: {e}")))?;
    let ok_key = key.strip_prefix("workflow:").is_some_and(|w| !w.is_empty())
        || key
            .strip_prefix("project:")
            .and_then(|r| r.rsplit_once(':'))
            .is_some_and(|(p, t)| !p.is_empty() && matches!(t, "1" | "2" | "3"));
    if !ok_key {
        return Err(ApiError::invalid(
            "a route key is `workflow:NAME` or `project:PROJECT:TIER` (tier 1 to 3)",
        )
        .field("key"));
    }
    let cluster = s
        .registry
        .cluster(&target.cluster)
        .ok_or_else(|| ApiError::invalid(format!("no cluster `{}`", target.cluster)).field("cluster"))?;
    let leaf = weir_model::QueuePath::parse(&target.queue)
        .and_then(|q| cluster.config.find(&q))
        .filter(|&i| cluster.config.queues[i].is_leaf());
    if leaf.is_none() {
        return Err(ApiError::invalid(format!(
            "{} is not a leaf queue of cluster `{}`",
            target.queue, target.cluster
        ))
        .field("queue"));
    }
    let row = RouteRow { key: key.clone(), cluster: target.cluster.clone(), queue: target.queue.clone() };
    s.store.put_route(&row, now_ms()).await?;
    s.registry.put_route(row);
    Ok(Json(Route { key, cluster: target.cluster, queue: target.queue }))
}

async fn delete_route(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(key): Path<String>,
) -> Result<StatusCode, ApiError> {
    require_admin(&s.principal(&headers).await?)?;
    if !s.store.delete_route(&key).await? {
        return Err(ApiError::not_found(format!("no route `{key}`")));
    }
    s.registry.delete_route(&key);
    Ok(StatusCode::NO_CONTENT)
}

async fn put_workflow(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(name): Path<String>,
    b: Result<Bytes, BytesRejection>,
) -> Result<StatusCode, ApiError> {
    let principal = s.principal(&headers).await?;
    let b = body(b)?;
    let value: serde_json::Value = if is_yaml(&headers) {
        let text = std::str::from_utf8(&b).map_err(|_| ApiError::bad_request("the body is not UTF-8"))?;
        weir_model::parse_yaml("request", text)
            .map_err(|e| ApiError::bad_request(format!("malformed YAML: {e}")))?
    } else {
        serde_json::from_slice(&b).map_err(|e| ApiError::bad_request(format!("malformed JSON: {e}")))?
    };
    let spec = submit::workflow_spec(&value)?;
    if spec.name != name {
        return Err(ApiError::invalid(format!("the workflow is named `{}`, not `{name}`", spec.name))
            .field("workflow.name"));
    }
    let accepted = submit::accept(&s.registry, spec)?;
    principal.require(&accepted.project, Role::Submitter)?;
    let text = serde_json::to_string(&accepted.spec).map_err(|e| ApiError::internal(e.to_string()))?;
    s.store.put_workflow(&name, &text, now_ms()).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn put_cluster_config(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(name): Path<String>,
    b: Result<Bytes, BytesRejection>,
) -> Result<Json<ClusterConfigApplied>, ApiError> {
    require_admin(&s.principal(&headers).await?)?;
    let b = body(b)?;
    if s.registry.cluster(&name).is_none() {
        return Err(ApiError::not_found(format!("no cluster `{name}`")));
    }
    let text = String::from_utf8(b.to_vec()).map_err(|_| ApiError::bad_request("the body is not UTF-8"))?;
    let config = weir_model::ClusterConfig::from_yaml("config", &text).map_err(|e| {
        let first = e.problems().into_iter().next();
        let message = e.problems().iter().map(|p| p.to_string()).collect::<Vec<_>>().join("; ");
        ApiError::invalid(message).field(first.map(|p| p.path).unwrap_or_default())
    })?;
    weir_engine::Engine::new(config.clone()).map_err(|e| ApiError::invalid(e.to_string()))?;
    let version = s.store.put_cluster(&name, &text, now_ms()).await?;
    let (queues, leaves) = (config.queues.len(), config.leaves().count());
    s.registry.put_cluster(&name, config, version);
    s.wake();
    Ok(Json(ClusterConfigApplied { cluster: name, queues, leaves }))
}

async fn create_token(
    State(s): State<AppState>,
    headers: HeaderMap,
    b: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    require_admin(&s.principal(&headers).await?)?;
    let b = body(b)?;
    let de = &mut serde_json::Deserializer::from_slice(&b);
    let req: CreateToken = serde_path_to_error::deserialize(de).map_err(|e| {
        ApiError::bad_request(format!("malformed JSON: {}", e.inner())).field(e.path().to_string())
    })?;
    if req.name.trim().is_empty() {
        return Err(ApiError::invalid("a token needs a name").field("name"));
    }
    let secret = new_token().map_err(|e| ApiError::internal(format!("no randomness: {e}")))?;
    let id = format!("t{}", &hash_token(&secret)[..12]);
    let row = TokenRow {
        id: id.clone(),
        name: req.name.clone(),
        hash: hash_token(&secret),
        grants: serde_json::to_string(&req.grants).map_err(|e| ApiError::internal(e.to_string()))?,
        created_ms: now_ms(),
        revoked_ms: None,
    };
    s.store.create_token(&row).await?;
    Ok((StatusCode::CREATED, Json(TokenCreated { id, name: req.name, token: secret })).into_response())
}

async fn list_tokens(State(s): State<AppState>, headers: HeaderMap) -> Result<Json<TokenList>, ApiError> {
    require_admin(&s.principal(&headers).await?)?;
    let tokens = s
        .store
        .tokens()
        .await?
        .into_iter()
        .map(|t| TokenInfo {
            id: t.id,
            name: t.name,
            grants: serde_json::from_str::<Vec<Grant>>(&t.grants).unwrap_or_default(),
            created_ms: t.created_ms,
            revoked_ms: t.revoked_ms,
        })
        .collect();
    Ok(Json(TokenList { tokens }))
}

async fn revoke_token(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    require_admin(&s.principal(&headers).await?)?;
    if !s.store.revoke_token(&id, now_ms()).await? {
        return Err(ApiError::not_found(format!("no live token `{id}`")));
    }
    Ok(StatusCode::NO_CONTENT)
}
