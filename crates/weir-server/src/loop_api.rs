//! The API of the plan → apply loop and the reports: the recorded history as `usage.csv` and
//! `runs.csv`, the SLO and usage reports, the clusters and their files, the replay workload,
//! applying a plan, and the scheduled planner's proposals. Service layer: reads and writes the
//! store, never an engine.

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use weir_api::{
    ClusterInfo, ClusterList, PlanDiff, PlanRequest, Proposal, ProposalList, Role, Route, SloReport,
    UsageReport,
};
use weir_store::PlanApplied;

use crate::auth::Principal;
use crate::error::ApiError;
use crate::state::{AppState, Audit, Peer};
use crate::time::now_ms;

/// The planning loop's endpoints: usage and run history, reports, cluster files, replays,
/// plans and proposals.
pub fn router() -> axum::Router<AppState> {
    use axum::routing::{get, post};
    axum::Router::new()
        .route("/v1/usage", get(usage_csv))
        .route("/v1/runs.csv", get(runs_csv))
        .route("/v1/reports/slo", get(slo_report))
        .route("/v1/reports/usage", get(usage_report))
        .route("/v1/clusters", get(clusters))
        .route("/v1/clusters/{name}/config", get(cluster_config))
        .route("/v1/clusters/{name}/plan", post(post_plan))
        .route("/v1/replay", get(replay))
        .route("/v1/proposals", get(proposals))
        .route("/v1/proposals/{id}/apply", post(post_apply_proposal))
}

/// Reports cover this long when the request gives no `since`.
pub const DEFAULT_WINDOW_MS: i64 = 7 * 86_400_000;

#[derive(Deserialize, Default)]
pub struct WindowQuery {
    pub cluster: Option<String>,
    /// Unix ms; default `until` minus `window`.
    pub since: Option<i64>,
    /// Unix ms; default now.
    pub until: Option<i64>,
    /// A duration (`7d`, `30d`, `1h`) ending at `until`, when `since` is not given.
    pub window: Option<String>,
}

impl WindowQuery {
    /// `[since, until)` in Unix ms.
    pub fn span(&self, default_ms: i64) -> Result<(i64, i64), ApiError> {
        let until = self.until.unwrap_or_else(now_ms);
        let since = match (self.since, &self.window) {
            (Some(s), _) => s,
            (None, Some(w)) => {
                let d: weir_model::Duration =
                    w.parse().map_err(|e| ApiError::bad_request(format!("{e}")).field("window"))?;
                until - d.as_millis().min(i64::MAX as u64 / 2) as i64
            }
            (None, None) => until - default_ms,
        };
        if since >= until {
            return Err(ApiError::bad_request(format!("since ({since}) is not before until ({until})"))
                .field("since"));
        }
        Ok((since, until))
    }
}

fn require_all(p: &Principal) -> Result<(), ApiError> {
    if p.can_all(Role::Viewer) {
        Ok(())
    } else {
        Err(ApiError::forbidden(format!(
            "token {} cannot read every project; this needs a viewer grant on `*`",
            p.token_id
        )))
    }
}

/// The cluster a request names, or the only (or `default`) one.
pub fn cluster_name(s: &AppState, asked: Option<&str>) -> Result<String, ApiError> {
    let names = s.registry.cluster_names();
    match asked {
        Some(c) if names.iter().any(|n| n == c) => Ok(c.to_string()),
        Some(c) => Err(ApiError::not_found(format!("no cluster `{c}`")).field("cluster")),
        None if names.len() == 1 => Ok(names[0].clone()),
        None if names.iter().any(|n| n == "default") => Ok("default".into()),
        None => Err(ApiError::bad_request("several clusters: name one with `cluster`").field("cluster")),
    }
}

fn csv(text: String) -> Response {
    ([(header::CONTENT_TYPE, "text/csv; charset=utf-8")], text).into_response()
}

/// `GET /v1/usage`: the recorded queue usage of a cluster as `usage.csv`.
pub async fn usage_csv(
    State(s): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<WindowQuery>,
) -> Result<Response, ApiError> {
    require_all(&s.principal(&headers).await?)?;
    let cluster = cluster_name(&s, q.cluster.as_deref())?;
    let (since, until) = q.span(30 * 86_400_000)?;
    let rows = s.store.usage(&cluster, since, until).await?;
    Ok(csv(crate::reports::usage_csv(&rows, since, until)))
}

/// Runs submitted in the window that `p` may read.
pub async fn readable_runs(
    s: &AppState,
    p: &Principal,
    cluster: Option<&str>,
    since: i64,
    until: i64,
) -> Result<Vec<weir_store::RunRecordRow>, ApiError> {
    let Some(mut scopes) = p.readable() else {
        return Ok(s.store.run_records(cluster, None, since, until).await?);
    };
    // One indexed read per project the caller may see (a scope inside another adds nothing).
    scopes.sort();
    scopes.dedup();
    let top: Vec<&String> =
        scopes.iter().filter(|s| !scopes.iter().any(|o| o != *s && crate::auth::covers(o, s))).collect();
    let mut runs = Vec::new();
    for scope in top {
        runs.extend(s.store.run_records(cluster, Some(scope.as_str()), since, until).await?);
    }
    runs.sort_by_key(|r| r.id);
    runs.dedup_by_key(|r| r.id);
    Ok(runs)
}

/// `GET /v1/runs.csv`: run records as `runs.csv`.
pub async fn runs_csv(
    State(s): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<WindowQuery>,
) -> Result<Response, ApiError> {
    let p = s.principal(&headers).await?;
    let (since, until) = q.span(30 * 86_400_000)?;
    let runs = readable_runs(&s, &p, q.cluster.as_deref(), since, until).await?;
    Ok(csv(crate::reports::runs_csv(&runs, now_ms())))
}

/// `GET /v1/reports/slo`.
pub async fn slo_report(
    State(s): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<WindowQuery>,
) -> Result<Json<SloReport>, ApiError> {
    let p = s.principal(&headers).await?;
    let (since, until) = q.span(DEFAULT_WINDOW_MS)?;
    let runs = readable_runs(&s, &p, q.cluster.as_deref(), since, until).await?;
    let now = now_ms();
    let mut report = crate::reports::slo(&runs, since, until, now);
    let readable: std::collections::BTreeSet<i64> = runs.iter().map(|r| r.id).collect();
    let mut spells = s.store.waits_since(since, crate::wait_report::MAX_SPELLS).await?;
    spells.retain(|w| readable.contains(&w.wait.run_id) && w.submitted_ms < until);
    report.wait_causes = crate::wait_report::wait_causes(&spells, now).iter().map(|c| c.to_api()).collect();
    Ok(Json(report))
}

/// The usage report of one cluster (the planner runs on the blocking pool).
pub async fn usage_report_of(
    s: &AppState,
    cluster: &str,
    since: i64,
    until: i64,
) -> Result<UsageReport, ApiError> {
    let config = s
        .registry
        .cluster(cluster)
        .ok_or_else(|| ApiError::not_found(format!("no cluster `{cluster}`")))?
        .config;
    let rows = s.store.usage(cluster, since, until).await?;
    let name = cluster.to_string();
    tokio::task::spawn_blocking(move || crate::reports::usage(&name, &config, &rows, since, until))
        .await
        .map_err(|e| ApiError::internal(format!("the usage report failed: {e}")))
}

/// `GET /v1/reports/usage`.
pub async fn usage_report(
    State(s): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<WindowQuery>,
) -> Result<Json<UsageReport>, ApiError> {
    require_all(&s.principal(&headers).await?)?;
    let cluster = cluster_name(&s, q.cluster.as_deref())?;
    let (since, until) = q.span(86_400_000)?;
    Ok(Json(usage_report_of(&s, &cluster, since, until).await?))
}

/// `GET /v1/clusters`.
pub async fn clusters(State(s): State<AppState>, headers: HeaderMap) -> Result<Json<ClusterList>, ApiError> {
    s.principal(&headers).await?;
    let clusters = s
        .registry
        .cluster_names()
        .into_iter()
        .filter_map(|name| {
            let c = s.registry.cluster(&name)?;
            Some(ClusterInfo {
                version: c.version,
                nodes: c.config.node_count(),
                total: crate::snapshot::wire(c.config.total_resources()),
                queues: c.config.queues.len(),
                leaves: c.config.leaves().count(),
                backend: s.backends.get(&name).map(|b| b.to_api()),
                name,
            })
        })
        .collect();
    Ok(Json(ClusterList { clusters }))
}

/// `GET /v1/clusters/{name}/config`: the cluster file in force (YAML), its version in the
/// `Weir-Config-Version` header.
pub async fn cluster_config(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    // The whole file: every project's queues and limits.
    require_all(&s.principal(&headers).await?)?;
    let row =
        s.store.cluster(&name).await?.ok_or_else(|| ApiError::not_found(format!("no cluster `{name}`")))?;
    Ok((
        [
            (header::CONTENT_TYPE, "application/yaml; charset=utf-8".to_string()),
            (header::HeaderName::from_static("weir-config-version"), row.version.to_string()),
        ],
        row.config,
    )
        .into_response())
}

/// `GET /v1/replay`: the recorded runs of a window as a workload file (YAML) the simulator
/// replays (`weir plan --server … --validate`).
pub async fn replay(
    State(s): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<WindowQuery>,
) -> Result<Response, ApiError> {
    require_all(&s.principal(&headers).await?)?;
    let cluster = cluster_name(&s, q.cluster.as_deref())?;
    let (since, until) = q.span(30 * 86_400_000)?;
    let (file, skipped) = replay_of(&s, &cluster, since, until).await?;
    let mut text = format!(
        "# The runs of cluster `{cluster}` submitted in [{since}, {until}) ms, as a workload to replay:\n\
         # `at` is each run's submission since the window's start; durations are the recorded ones.\n"
    );
    for why in &skipped {
        text.push_str(&format!("# left out: {why}\n"));
    }
    let body =
        serde_saphyr::to_string(&file).map_err(|e| ApiError::internal(format!("cannot write YAML: {e}")))?;
    text.push_str(&body);
    Ok(([(header::CONTENT_TYPE, "application/yaml; charset=utf-8")], text).into_response())
}

/// The replay workload of a cluster's window.
pub async fn replay_of(
    s: &AppState,
    cluster: &str,
    since: i64,
    until: i64,
) -> Result<(weir_model::WorkloadFile, Vec<String>), ApiError> {
    let config = s
        .registry
        .cluster(cluster)
        .ok_or_else(|| ApiError::not_found(format!("no cluster `{cluster}`")))?
        .config;
    Ok(recorded_workload(s.store.as_ref(), &config, cluster, since, until).await?)
}

/// The runs of `cluster` submitted in `[since, until)` as a workload to replay.
pub async fn recorded_workload(
    store: &dyn weir_store::JobStore,
    config: &weir_model::ClusterConfig,
    cluster: &str,
    since: i64,
    until: i64,
) -> Result<(weir_model::WorkloadFile, Vec<String>), weir_store::StoreError> {
    let runs = store.run_records(Some(cluster), None, since, until).await?;
    let mut specs = BTreeMap::new();
    let mut latest: BTreeMap<&str, i64> = BTreeMap::new();
    for r in &runs {
        let e = latest.entry(r.workflow.as_str()).or_insert(r.id);
        *e = (*e).max(r.id);
    }
    for (name, id) in latest {
        if let Some(row) = store.run(id).await? {
            specs.insert(name.to_string(), row.spec);
        }
    }
    let durations = store.attempt_durations(cluster, since, until).await?;
    let rec = crate::replay::Recorded {
        since_ms: since,
        runs: &runs,
        specs: &specs,
        durations: &durations,
        cluster: config,
    };
    Ok(crate::replay::workload(&rec))
}

/// Check a plan for `cluster` and, unless `dry_run`, apply it: the configuration and the routes
/// in one transaction. The registry and the owning worker follow.
pub async fn apply_plan(s: &AppState, cluster: &str, req: &PlanRequest) -> Result<PlanDiff, ApiError> {
    let loaded =
        s.registry.cluster(cluster).ok_or_else(|| ApiError::not_found(format!("no cluster `{cluster}`")))?;
    let base = req.base_version.unwrap_or(loaded.version);
    if base != loaded.version {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "conflict",
            format!(
                "cluster `{cluster}` is at configuration version {}, not {base} that the plan was made from; \
                 plan again (nothing was changed)",
                loaded.version
            ),
        ));
    }
    let current_routes = s.store.routes().await?;
    let checked = crate::plans::check(
        cluster,
        &loaded.config,
        base,
        &req.config,
        req.routes.as_deref(),
        &current_routes,
    )
    .map_err(|problems| {
        let message =
            problems.iter().map(|p| format!("{}: {}", p.path, p.message)).collect::<Vec<_>>().join("; ");
        let field = problems.first().map(|p| p.path.clone()).unwrap_or_default();
        ApiError::invalid(format!("the plan is refused and nothing was changed — {message}")).field(field)
    })?;
    let mut diff = checked.diff;
    if req.dry_run {
        return Ok(diff);
    }
    // Routes to leave as they are: the current ones to this cluster.
    let routes = checked
        .routes
        .unwrap_or_else(|| current_routes.iter().filter(|r| r.cluster == cluster).cloned().collect());
    match s.store.apply_plan(cluster, base, &req.config, &routes, now_ms()).await? {
        PlanApplied::Applied { version } => {
            s.registry.put_cluster(cluster, checked.config, version);
            if let Err(e) = s.registry.refresh(s.store.as_ref()).await {
                eprintln!("weir serve: cannot refresh routes after a plan: {e}");
            }
            s.wake();
            diff.applied = true;
            diff.version = Some(version);
            Ok(diff)
        }
        PlanApplied::Stale { current } => Err(ApiError::new(
            StatusCode::CONFLICT,
            "conflict",
            format!(
                "cluster `{cluster}` moved to configuration version {current} meanwhile; nothing was changed"
            ),
        )),
        PlanApplied::NoCluster => Err(ApiError::not_found(format!("no cluster `{cluster}`"))),
    }
}

/// `POST /v1/clusters/{name}/plan`.
pub async fn post_plan(
    State(s): State<AppState>,
    peer: Peer,
    headers: HeaderMap,
    Path(name): Path<String>,
    b: Result<Bytes, BytesRejection>,
) -> Result<Json<PlanDiff>, ApiError> {
    let p = s.principal(&headers).await?;
    crate::api::admin_or_audit(&s, &p, &peer, "plan.apply", format!("cluster {name}")).await?;
    let b = crate::state::body(b)?;
    let de = &mut serde_json::Deserializer::from_slice(&b);
    let req: PlanRequest = serde_path_to_error::deserialize(de).map_err(|e| {
        ApiError::bad_request(format!("malformed JSON: {}", e.inner())).field(e.path().to_string())
    })?;
    let applied = apply_plan(&s, &name, &req).await;
    if !req.dry_run {
        let (outcome, detail) = match &applied {
            Ok(d) => (
                "ok",
                format!(
                    "version {} → {}; {} settings and {} routes changed",
                    d.base_version,
                    d.version.unwrap_or(d.base_version),
                    d.queues.len(),
                    d.routes.len()
                ),
            ),
            Err(e) => ("refused", e.body.error.message.clone()),
        };
        let ctx = Audit::from(&peer).detail(detail);
        s.audit(&p.token_id, "plan.apply", format!("cluster {name}"), outcome, ctx).await;
    }
    Ok(Json(applied?))
}

/// A stored proposal as a plan request.
pub fn proposal_request(p: &weir_store::ProposalRow, dry_run: bool) -> PlanRequest {
    let routes: Option<Vec<Route>> = serde_json::from_str(&p.routes).ok();
    PlanRequest { config: p.config.clone(), routes, base_version: Some(p.base_version), dry_run }
}

/// Proposals with what each would change now (if it can still apply).
pub async fn proposals_of(
    s: &AppState,
    cluster: Option<&str>,
    limit: u32,
) -> Result<Vec<Proposal>, ApiError> {
    let rows = s.store.proposals(cluster, limit).await?;
    let mut out = Vec::new();
    for p in rows {
        let diff = if p.state == "proposed" {
            apply_plan(s, &p.cluster, &proposal_request(&p, true)).await.ok()
        } else {
            None
        };
        out.push(Proposal {
            id: p.id,
            cluster: p.cluster.clone(),
            created_ms: p.created_ms,
            base_version: p.base_version,
            state: p.state.clone(),
            summary: serde_json::from_str(&p.summary).unwrap_or(serde_json::Value::Null),
            diff,
        });
    }
    Ok(out)
}

/// `GET /v1/proposals`.
pub async fn proposals(
    State(s): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<WindowQuery>,
) -> Result<Json<ProposalList>, ApiError> {
    require_all(&s.principal(&headers).await?)?;
    Ok(Json(ProposalList { proposals: proposals_of(&s, q.cluster.as_deref(), 20).await? }))
}

/// Apply a waiting proposal (admin): as `POST /v1/clusters/{name}/plan` with its contents.
pub async fn apply_proposal(s: &AppState, id: i64) -> Result<PlanDiff, ApiError> {
    let p = s.store.proposal(id).await?.ok_or_else(|| ApiError::not_found(format!("no proposal {id}")))?;
    if p.state != "proposed" {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "conflict",
            format!("proposal {id} is {}, not waiting", p.state),
        ));
    }
    let diff = apply_plan(s, &p.cluster, &proposal_request(&p, false)).await?;
    s.store.decide_proposal(id, "applied", now_ms()).await?;
    Ok(diff)
}

/// `POST /v1/proposals/{id}/apply`.
pub async fn post_apply_proposal(
    State(s): State<AppState>,
    peer: Peer,
    headers: HeaderMap,
    Path(id): Path<i64>,
) -> Result<Json<PlanDiff>, ApiError> {
    let p = s.principal(&headers).await?;
    crate::api::admin_or_audit(&s, &p, &peer, "proposal.apply", format!("proposal {id}")).await?;
    let applied = apply_proposal(&s, id).await;
    let outcome = if applied.is_ok() { "ok" } else { "refused" };
    s.audit(&p.token_id, "proposal.apply", format!("proposal {id}"), outcome, Audit::from(&peer)).await;
    Ok(Json(applied?))
}
