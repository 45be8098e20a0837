//! `/v1/runs`: submit, list, read, kill, retry, explain.

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use weir_api::{
    Job, JobExplanation, PreemptionWarning, Role, Run, RunCreated, RunExplanation, RunList, RunState,
    RunSummary, Task,
};
use weir_store::{KillOutcome, NewRun, RunFilter, RunRow, Submitted};

use crate::auth::Principal;
use crate::error::ApiError;
use crate::state::{body, is_yaml, readable_run, readable_run_by, snapshot, AppState, Audit, Peer};
use crate::submit;
use crate::time::{format_utc, now_ms};

/// Idempotency records replay for this long.
const IDEMPOTENCY_MS: i64 = 24 * 3600 * 1000;

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
        dry_run: r.dry_run,
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
        dry_run: r.dry_run,
        route: r.route.as_ref().map(route_decision),
    }
}

/// A stored routing decision as the API shows it.
pub(crate) fn route_decision(r: &weir_store::RunRoute) -> weir_api::RouteDecision {
    weir_api::RouteDecision {
        key: r.key.clone(),
        policy: r.policy.clone(),
        reason: r.reason.clone(),
        detail: r.detail.clone(),
    }
}

pub(super) async fn submit_run(
    State(s): State<AppState>,
    peer: Peer,
    headers: HeaderMap,
    b: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let started = std::time::Instant::now();
    let principal = s.principal(&headers).await?;
    rate_check(&s, &principal)?;
    let b = body(b)?;
    let req = submit::parse_body(&b, is_yaml(&headers))?;
    let idempotency_key = headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(|k| format!("{}:{k}", principal.token_id));
    // The request's hash is what a reused key is checked against; without a key nothing reads
    // it (the store keeps it only in the key's idempotency record), so it is not computed.
    let request_hash = match idempotency_key {
        Some(_) => request_hash(is_yaml(&headers), &b),
        None => String::new(),
    };
    let (status, created) = submit_parsed(&s, &peer, &principal, req, request_hash, idempotency_key).await?;
    s.metrics.observe_submission(started.elapsed());
    Ok((status, Json(created)).into_response())
}

/// The hash an idempotency record keeps of its request: the body and whether it was YAML.
fn request_hash(yaml: bool, body: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(if yaml { b"true:".as_slice() } else { b"false:".as_slice() });
    h.update(String::from_utf8_lossy(body).as_bytes());
    crate::auth::hex(&h.finalize())
}

/// Refuse a submission over the token's rate. Global admins (the operator's own tools) are not
/// rate-limited; tenants' tokens are.
fn rate_check(s: &AppState, principal: &Principal) -> Result<(), ApiError> {
    let limited = !principal.is_global_admin();
    let rate = if limited { s.rate.take(&s.limits, &principal.token_id, now_ms()) } else { Ok(()) };
    if let Err(wait) = rate {
        s.metrics.refused("rate");
        return Err(ApiError::rate_limited(
            format!(
                "token {} is over its submission rate ({} per second, bursts of {})",
                principal.token_id, s.limits.submissions_per_second, s.limits.submission_burst
            ),
            wait,
        ));
    }
    Ok(())
}

/// Check, route and store a parsed submission for `principal`: what `POST /v1/runs` and a
/// retry share.
async fn submit_parsed(
    s: &AppState,
    peer: &Peer,
    principal: &Principal,
    req: weir_api::SubmitRun,
    request_hash: String,
    idempotency_key: Option<String>,
) -> Result<(StatusCode, RunCreated), ApiError> {
    let limited = !principal.is_global_admin();
    submit::check_params(&req.params)?;
    let mut req = req;
    let spec_value = match (req.workflow.take(), &req.workflow_name) {
        (Some(w), None) => w,
        (None, Some(name)) => registered(s, principal, name, req.project.as_deref()).await?,
        _ => {
            return Err(
                ApiError::invalid("give exactly one of `workflow` and `workflow_name`").field("workflow")
            )
        }
    };
    let spec = submit::workflow_spec(&spec_value)?;
    if req.cluster.is_some() && !req.dry_run {
        return Err(ApiError::invalid(
            "`cluster` is for dry-runs (`dry_run: true`); a production run follows the workflow's route",
        )
        .field("cluster"));
    }
    let tier = spec.tier.unwrap_or(3);
    let policy_route = match req.cluster {
        None => s.router.route_for(&spec.name, spec.project.as_deref(), tier).cloned(),
        Some(_) => None,
    };
    let (mut accepted, decision) = match policy_route {
        Some(route) => {
            let (a, d) = s.router.route(s, &route, spec, &s.limits).await?;
            (a, Some(d))
        }
        None => (submit::accept_on(&s.registry, spec, &s.limits, req.cluster.as_deref())?, None),
    };
    if let Err(e) = principal.require(&accepted.owner, Role::Submitter) {
        let ctx = Audit::from(peer)
            .project(accepted.owner.clone())
            .detail(format!("workflow {} to {}/{}", accepted.spec.name, accepted.cluster, accepted.queue));
        s.audit(&principal.token_id, "submit", String::new(), "denied", ctx).await;
        return Err(e);
    }
    if let Some((field, why)) = s.backends.cannot_run(&accepted.cluster, &accepted.spec) {
        return Err(ApiError::invalid(why).field(field));
    }
    if let Some(why) = s.backends.refusal(&accepted.cluster) {
        s.metrics.refused("backend_unhealthy");
        return Err(ApiError::backend_unhealthy(why));
    }
    let user = principal.user_for(accepted.spec.user.as_deref())?;
    if let Some(loaded) = s.registry.cluster(&accepted.cluster) {
        let leaf = weir_model::QueuePath::parse(&accepted.queue).and_then(|q| loaded.config.find(&q));
        if leaf.is_some_and(|i| !crate::acl::may_submit(&loaded.config, i, &user)) {
            let ctx =
                Audit::from(peer).project(accepted.owner.clone()).detail(format!("queue ACL, user {user}"));
            s.audit(&principal.token_id, "submit", String::new(), "denied", ctx).await;
            return Err(ApiError::forbidden(format!(
                "user `{user}` may not submit to {} (the queue's ACL in the cluster file)",
                accepted.queue
            )));
        }
    }
    // The engine counts per-user limits by the spec's `user`, which is now the caller's.
    accepted.spec.user = Some(user.clone());
    let now = now_ms();
    let logical_date = req.logical_date.clone().unwrap_or_else(|| format_utc(now));
    submit::check_reachable(&accepted.spec, &logical_date, &req.params)?;
    crate::outputs::check_buckets(&accepted.spec, &logical_date, &req.params, s.output_bucket.as_deref())?;
    let quota = s.limits.max_waiting_runs_per_project;
    if limited && quota > 0 && s.store.waiting_runs(&accepted.project).await? >= quota {
        s.metrics.refused("quota");
        return Err(ApiError::rate_limited(
            format!(
                "project `{}` has {quota} runs waiting to start (the server's max_waiting_runs_per_project)",
                accepted.project
            ),
            30,
        ));
    }
    let run = NewRun {
        workflow: accepted.spec.name.clone(),
        project: accepted.project,
        tier: accepted.tier,
        logical_date,
        cluster: accepted.cluster,
        queue: accepted.queue,
        spec: serde_json::to_string(&accepted.spec).map_err(|e| ApiError::internal(e.to_string()))?,
        params: serde_json::to_string(&req.params).map_err(|e| ApiError::internal(e.to_string()))?,
        submitted_by: principal.token_id.clone(),
        user,
        client: peer.0.clone(),
        submitted_ms: now,
        slo_ms: accepted.slo_ms,
        idempotency_key,
        request_hash,
        idempotency_after_ms: now - IDEMPOTENCY_MS,
        dry_run: req.dry_run,
        route: decision.as_ref().map(|d| weir_store::RunRoute {
            key: d.key.clone(),
            policy: d.policy.to_string(),
            reason: d.reason.as_str().to_string(),
            detail: d.detail.clone(),
        }),
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
            if let (Some(r), Some(d)) = (&run.route, &decision) {
                s.metrics.routed(&run.cluster, &r.reason);
                s.router.routed(&run.cluster, &run.queue, d.own);
            }
            let body = RunCreated {
                id,
                workflow: run.workflow,
                logical_date: run.logical_date,
                cluster: run.cluster,
                queue: run.queue,
                state: RunState::Queued,
                dry_run: run.dry_run,
                route: run.route.as_ref().map(route_decision),
            };
            Ok((StatusCode::CREATED, body))
        }
        Submitted::Conflict { existing } => Err(conflict(existing)),
        Submitted::Replay { status: 201, run: id } => {
            let row = s
                .store
                .run(id)
                .await?
                .ok_or_else(|| ApiError::internal(format!("replayed run {id} is gone")))?;
            Ok((StatusCode::CREATED, created(&row)))
        }
        Submitted::Replay { run: existing, .. } => Err(conflict(existing)),
        Submitted::KeyReused => Err(ApiError::unprocessable(
            "idempotency_key_reused",
            "this Idempotency-Key was first used with a different request; use a new key for a new request",
        )),
    }
}

/// The registered workflow `name` the caller means: of `project` if given, else of the one
/// project among those the caller may submit to that registered it.
async fn registered(
    s: &AppState,
    principal: &Principal,
    name: &str,
    project: Option<&str>,
) -> Result<serde_json::Value, ApiError> {
    let rows = s.store.workflows_named(name).await?;
    let mine: Vec<&(String, String)> = rows
        .iter()
        .filter(|(p, _)| match project {
            Some(want) => p == want,
            None => !p.is_empty() && principal.can(p, Role::Submitter),
        })
        .collect();
    // Registered before workflows were kept per project: still usable (the run is authorized
    // against the queue it routes to, like any other).
    let legacy = rows.iter().find(|(p, _)| p.is_empty());
    let (p, text) = match (mine.as_slice(), legacy) {
        ([one], _) => (*one).clone(),
        ([], Some(l)) if project.is_none() => l.clone(),
        ([], _) => {
            return Err(ApiError::invalid(format!(
                "no registered workflow `{name}`{}",
                project.map(|p| format!(" in project `{p}`")).unwrap_or_default()
            ))
            .field("workflow_name"))
        }
        (several, _) => {
            let names: Vec<&str> = several.iter().map(|(p, _)| p.as_str()).collect();
            return Err(ApiError::invalid(format!(
                "projects {} each registered `{name}`: say which with `project`",
                names.join(", ")
            ))
            .field("project"));
        }
    };
    serde_json::from_str(&text).map_err(|e| ApiError::internal(format!("stored workflow `{p}/{name}`: {e}")))
}

#[derive(Deserialize)]
pub(super) struct ListQuery {
    project: Option<String>,
    workflow: Option<String>,
    state: Option<String>,
    since: Option<i64>,
    cursor: Option<String>,
    limit: Option<u32>,
}

pub(super) async fn list_runs(
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

/// `GET /v1/runs/{id}` paging: `tasks_after` (the cursor `next_tasks_after` gave) and
/// `tasks_limit`.
#[derive(Deserialize)]
pub(super) struct RunQuery {
    tasks_after: Option<String>,
    tasks_limit: Option<u32>,
}

/// Tasks per page of `GET /v1/runs/{id}` unless asked otherwise, and at most.
const TASKS_PAGE: u32 = 1000;
const TASKS_PAGE_MAX: u32 = 10_000;

fn task_cursor(c: &str) -> Option<(u32, u32, u32)> {
    let mut it = c.split('.').map(|p| p.parse::<u32>().ok());
    match (it.next(), it.next(), it.next(), it.next()) {
        (Some(Some(j)), Some(Some(s)), Some(Some(t)), None) => Some((j, s, t)),
        _ => None,
    }
}

pub(super) async fn get_run(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<i64>,
    q: Result<Query<RunQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Run>, ApiError> {
    let Query(q) = q.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let after = match &q.tasks_after {
        Some(c) => Some(task_cursor(c).ok_or_else(|| {
            ApiError::bad_request(format!("`{c}` is not a task cursor (use next_tasks_after)"))
                .field("tasks_after")
        })?),
        None => None,
    };
    let limit = q.tasks_limit.unwrap_or(TASKS_PAGE).clamp(1, TASKS_PAGE_MAX);
    let run = readable_run(&s, &headers, id, Role::Viewer).await?;
    let jobs = s.store.jobs(id).await?;
    let counts = s.store.task_counts(id).await?;
    let tasks = s.store.tasks_page(id, after, limit).await?;
    let waits = s.store.waits(id).await?;
    let decisions = s.store.slo_decisions(id).await?;
    let explanations = if RunState::parse(&run.state).is_some_and(|st| !st.is_terminal()) {
        snapshot(&s, &run.cluster).await?.map(|sn| (*sn.explanations.value).clone()).unwrap_or_default()
    } else {
        BTreeMap::new()
    };
    let mut warnings = BTreeMap::new();
    for t in tasks.iter().filter(|t| t.state == "preempting") {
        let attempts = s.store.attempts(id, t.job_idx, t.stage_idx, t.task_idx).await?;
        if let Some(a) = attempts.iter().rev().find(|a| a.state == "preempting") {
            if let (Some(reason), Some(kill_at_ms)) = (a.reason.clone(), a.kill_at_ms) {
                warnings
                    .insert((t.job_idx, t.stage_idx, t.task_idx), PreemptionWarning { reason, kill_at_ms });
            }
        }
    }
    // Up to 10,000 tasks: built off the async executor.
    let built = tokio::task::spawn_blocking(move || {
        let total: u64 = counts.iter().map(|c| c.count).sum();
        let next = (tasks.len() == limit as usize)
            .then(|| tasks.last().map(|t| format!("{}.{}.{}", t.job_idx, t.stage_idx, t.task_idx)))
            .flatten();
        let wire_jobs = jobs
            .iter()
            .map(|j| {
                let mut task_counts = BTreeMap::new();
                for c in counts.iter().filter(|c| c.job_idx == j.idx) {
                    *task_counts.entry(c.state.clone()).or_insert(0) += c.count;
                }
                Job {
                    name: j.name.clone(),
                    state: j.state.clone(),
                    started_ms: j.started_ms,
                    finished_ms: j.finished_ms,
                    explanation: explanations.get(&format!("{id}/{}", j.idx)).cloned(),
                    waits: waits.iter().filter(|w| w.job_idx == j.idx).map(wire_wait).collect(),
                    guarantee: decisions
                        .iter()
                        .filter(|d| d.job_idx == j.idx)
                        .map(crate::jockey::wire_decision)
                        .collect(),
                    task_counts,
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
                            preemption: warnings.get(&(t.job_idx, t.stage_idx, t.task_idx)).cloned(),
                        })
                        .collect(),
                }
            })
            .collect();
        Run {
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
            dry_run: run.dry_run,
            route: run.route.as_ref().map(route_decision),
            params: serde_json::from_str(&run.params).unwrap_or_default(),
            user: run.user,
            tasks_total: total,
            next_tasks_after: next,
            jobs: wire_jobs,
        }
    })
    .await
    .map_err(|e| ApiError::internal(format!("building run {id}: {e}")))?;
    Ok(Json(built))
}

pub(super) async fn kill_run(
    State(s): State<AppState>,
    peer: Peer,
    headers: HeaderMap,
    Path(id): Path<i64>,
) -> Result<Response, ApiError> {
    let (principal, row) = readable_run_by(&s, &headers, id, Role::Submitter).await?;
    let (run, _) = kill(&s, &principal, &peer, row).await?;
    Ok((StatusCode::ACCEPTED, Json(summary(&run))).into_response())
}

/// Kill `row` for `principal` (who holds submitter on its project): the API's and the
/// dashboard's kill. Returns the run as it is now and what happened, in words.
pub(crate) async fn kill(
    s: &AppState,
    principal: &Principal,
    peer: &Peer,
    row: RunRow,
) -> Result<(RunRow, &'static str), ApiError> {
    let id = row.id;
    let outcome = s.store.request_kill(id, now_ms()).await?;
    let (result, detail) = match outcome {
        KillOutcome::Killed => ("ok", "killed while queued"),
        KillOutcome::Requested => ("ok", "its tasks are being stopped"),
        KillOutcome::AlreadyEnded => ("no_change", "it had already ended"),
        KillOutcome::NotFound => ("not_found", "no such run"),
    };
    let ctx = Audit::from(peer).project(row.project).detail(detail);
    s.audit(&principal.token_id, "kill", format!("run {id}"), result, ctx).await;
    if outcome == KillOutcome::NotFound {
        return Err(ApiError::not_found(format!("no run {id}")));
    }
    if outcome == KillOutcome::Killed {
        // Killed while queued: no worker will see it end.
        if let Ok(Some(run)) = s.store.run(id).await {
            s.metrics.run_finished(run.tier, "killed", None);
        }
    }
    s.wake();
    let run = s.store.run(id).await?.ok_or_else(|| ApiError::not_found(format!("no run {id}")))?;
    Ok((run, detail))
}

/// `POST /v1/runs/{id}/retry`: submit the run again — its stored workflow, parameters and
/// logical date — as a new run (submitter on its project). Refused with 409 while the run (or
/// another run of the same workflow and date) is still active.
pub(super) async fn retry_run(
    State(s): State<AppState>,
    peer: Peer,
    headers: HeaderMap,
    Path(id): Path<i64>,
) -> Result<Response, ApiError> {
    let (principal, row) = readable_run_by(&s, &headers, id, Role::Submitter).await?;
    let created = retry(&s, &principal, &peer, row).await?;
    Ok((StatusCode::CREATED, Json(created)).into_response())
}

/// Submit `row` again for `principal` (who holds submitter on its project): the API's and the
/// dashboard's retry. The new run goes through every check a submission does (routing, the
/// queue's ACL, rate and quota, the backend's health) and runs as the same scheduler user,
/// which `principal` must be allowed to act as.
pub(crate) async fn retry(
    s: &AppState,
    principal: &Principal,
    peer: &Peer,
    row: RunRow,
) -> Result<RunCreated, ApiError> {
    rate_check(s, principal)?;
    let workflow: serde_json::Value = serde_json::from_str(&row.spec)
        .map_err(|e| ApiError::internal(format!("run {}'s stored workflow cannot be read: {e}", row.id)))?;
    let params: BTreeMap<String, String> = serde_json::from_str(&row.params)
        .map_err(|e| ApiError::internal(format!("run {}'s stored parameters cannot be read: {e}", row.id)))?;
    let req = weir_api::SubmitRun {
        workflow: Some(workflow),
        workflow_name: None,
        project: None,
        logical_date: Some(row.logical_date.clone()),
        params,
        // A dry-run's retry is a dry-run again, on the cluster it ran on.
        dry_run: row.dry_run,
        cluster: row.dry_run.then(|| row.cluster.clone()),
    };
    let hash = crate::auth::hash_token(&format!("retry:{}:{}", row.id, now_ms()));
    let result = submit_parsed(s, peer, principal, req, hash, None).await;
    let (outcome, detail) = match &result {
        Ok((_, c)) => ("ok", format!("as run {}", c.id)),
        Err(e) => ("refused", e.body.error.message.clone()),
    };
    let ctx = Audit::from(peer).project(row.project.clone()).detail(detail);
    s.audit(&principal.token_id, "retry", format!("run {}", row.id), outcome, ctx).await;
    result.map(|(_, c)| c)
}

pub(super) async fn explain_run(
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
                snap.as_ref().and_then(|sn| sn.explanations.value.get(&format!("{id}/{}", j.idx)).cloned());
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

/// A stored waiting spell on the wire.
pub(crate) fn wire_wait(w: &weir_store::WaitRow) -> weir_api::Wait {
    weir_api::Wait {
        from_ms: w.from_ms,
        to_ms: w.to_ms,
        reason: w.reason.clone(),
        queue: w.queue.clone(),
        limit: w.limit.clone(),
        detail: w.detail.clone(),
        summary: crate::words::reason(&w.reason, &w.queue, &w.limit),
    }
}
