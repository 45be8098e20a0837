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
use weir_planner::{tier1_regression, Tier1};
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
        .route("/v1/waits.csv", get(waits_csv))
        .route("/v1/reports/slo", get(slo_report))
        .route("/v1/reports/usage", get(usage_report))
        .route("/v1/clusters", get(clusters))
        .route("/v1/clusters/{name}/config", get(cluster_config))
        .route("/v1/clusters/{name}/plan", post(post_plan))
        .route("/v1/replay", get(replay))
        .route("/v1/proposals", get(proposals))
        .route("/v1/proposals/{id}/apply", post(post_apply_proposal))
        .route("/v1/proposals/{id}/dismiss", post(post_dismiss_proposal))
        .route("/v1/clusters/{name}/proposals", post(post_plan_now))
        .route("/v1/clusters/{name}/history", get(config_history))
        .route("/v1/clusters/{name}/history/{version}/rollback", post(post_rollback))
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

/// `GET /v1/waits.csv`: what the jobs of runs submitted in the window waited for, per leaf and
/// reason (`waits.csv`, the history `weir plan --server` reads beside `usage.csv`).
pub async fn waits_csv(
    State(s): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<WindowQuery>,
) -> Result<Response, ApiError> {
    require_all(&s.principal(&headers).await?)?;
    let cluster = cluster_name(&s, q.cluster.as_deref())?;
    let (since, until) = q.span(30 * 86_400_000)?;
    let runs = s.store.run_records(Some(&cluster), None, since, until).await?;
    let leaf_of: BTreeMap<i64, (String, u8)> = runs.into_iter().map(|r| (r.id, (r.queue, r.tier))).collect();
    let mut spells = s.store.waits_since(since, crate::wait_report::MAX_SPELLS).await?;
    spells.retain(|w| w.submitted_ms < until);
    let waits = crate::wait_report::queue_waits(&spells, &leaf_of, since, until, now_ms());
    Ok(csv(crate::wait_report::waits_csv(&waits)))
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
    report.at_risk = at_risk_now(&s, &runs, now)
        .await?
        .into_iter()
        .map(|a| weir_api::AtRiskRun {
            id: a.run,
            workflow: a.workflow,
            tier: a.tier,
            state: a.state,
            deadline_ms: a.deadline_ms,
            late_by_ms: a.late_by_ms,
            reason: a.reason,
        })
        .collect();
    let days = day_starts(since, until);
    for (tier, cells) in crate::slo_watch::trend(&runs, &days, now) {
        for (day_ms, d) in days.iter().zip(cells) {
            report.trend.push(weir_api::TierDay { tier, day_ms: *day_ms, met: d.met, missed: d.missed });
        }
    }
    Ok(Json(report))
}

/// The UTC days that overlap `[since, until)`, by their starts.
pub fn day_starts(since: i64, until: i64) -> Vec<i64> {
    crate::usage_by::bucket_starts(since, until, 86_400_000)
}

/// The runs of `runs` at risk now, each with the spell it is waiting in, if any.
pub async fn at_risk_now(
    s: &AppState,
    runs: &[weir_store::RunRecordRow],
    now: i64,
) -> Result<Vec<crate::slo_watch::AtRisk>, ApiError> {
    let mut open = BTreeMap::new();
    for r in runs.iter().filter(|r| r.slo_ms.is_some() && r.finished_ms.is_none()) {
        let waits = s.store.waits(r.id).await?;
        if let Some(w) = waits.into_iter().rev().find(|w| w.to_ms.is_none()) {
            open.insert(r.id, w);
        }
    }
    Ok(crate::slo_watch::at_risk(runs, &open, now))
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
    let from = recorded_since(s, cluster, since, until).await?;
    let name = cluster.to_string();
    tokio::task::spawn_blocking(move || crate::reports::usage(&name, &config, &rows, since, until, from))
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

/// Who changes a cluster's configuration and from what, for its history.
#[derive(Clone, Debug)]
pub struct Origin {
    /// A token id, `weir` for the server itself.
    pub actor: String,
    /// `plan`, `proposal 7`, `rollback to version 3`, `edit`.
    pub source: String,
}

impl Origin {
    pub fn new(actor: impl Into<String>, source: impl Into<String>) -> Origin {
        Origin { actor: actor.into(), source: source.into() }
    }
}

fn refused(field: &str, message: String) -> ApiError {
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "refused", message).field(field)
}

/// A span in words: `16 s`, `4.5 min`, `3.0 h`, `1 day`, `2.5 days`.
pub fn span_words(ms: i64) -> String {
    let s = ms.max(0) as f64 / 1000.0;
    if s < 90.0 {
        format!("{s:.0} s")
    } else if s < 5400.0 {
        format!("{:.1} min", s / 60.0)
    } else if s < 86_400.0 {
        format!("{:.1} h", s / 3600.0)
    } else if s % 86_400.0 == 0.0 {
        let days = s / 86_400.0;
        format!("{days:.0} day{}", if days == 1.0 { "" } else { "s" })
    } else {
        format!("{:.1} days", s / 86_400.0)
    }
}

/// How much of `[since, until)` the server recorded for `cluster`: from the later of `since`
/// and when it began recording the cluster (its first configuration version, usage row or
/// run).
pub async fn recorded_since(s: &AppState, cluster: &str, since: i64, until: i64) -> Result<i64, ApiError> {
    let began = s.store.recording_since(cluster).await?.unwrap_or(until);
    Ok(since.max(began).min(until))
}

fn tier1(f: &weir_api::Tier1Figures) -> Tier1 {
    Tier1 { slo_success_ratio: f.slo_success_ratio, slo_successful_workflows: f.slo_successful_workflows }
}

/// The guards of the plan → apply loop, for any plan however it arrives (the CLI, the API, a
/// proposal): a validation worse for tier 1 is refused; a plan without validation is
/// refused unless `unvalidated`; one made from less recorded history than the server's
/// minimum is refused unless `force`. Returns the warnings to show with the diff and how
/// much history the plan came from.
async fn guard(
    s: &AppState,
    cluster: &str,
    req: &PlanRequest,
) -> Result<(Vec<String>, Option<i64>), ApiError> {
    let mut warnings = Vec::new();
    match &req.validation {
        Some(v) => {
            if let Some(why) = tier1_regression(tier1(&v.current), tier1(&v.planned)) {
                return Err(refused(
                    "validation",
                    format!(
                        "the plan is refused and nothing was changed: its validation replay is worse for tier 1 — {why}"
                    ),
                ));
            }
        }
        None if req.unvalidated => warnings.push(
            "not validated: the plan was not replayed against the recorded runs, so nobody checked it keeps tier 1's SLOs"
                .to_string(),
        ),
        None => {
            return Err(refused(
                "validation",
                "the plan is refused and nothing was changed: it carries no validation (tier 1 on the current and the \
                 planned settings in a replay of the recorded runs); plan with `weir plan --validate`, or apply it \
                 anyway (`weir apply --unvalidated`, `unvalidated: true` in the request)"
                    .to_string(),
            ))
        }
    }
    let min = s.planning.min_history.as_millis() as i64;
    let history = match req.history {
        Some(w) if w.since_ms >= w.until_ms => {
            return Err(ApiError::bad_request(format!(
                "history: since_ms ({}) is not before until_ms ({})",
                w.since_ms, w.until_ms
            ))
            .field("history"))
        }
        Some(w) => {
            let from = recorded_since(s, cluster, w.since_ms, w.until_ms).await?;
            let got = w.until_ms - from;
            if got < min {
                let what = format!(
                    "the plan was made from {} of recorded history (the server began recording cluster `{cluster}` {} \
                     before the plan's window ended), less than the {} this server asks for (--plan-min-history): \
                     too little to see a day's peaks",
                    span_words(got),
                    span_words(got),
                    span_words(min)
                );
                if !req.force {
                    return Err(refused(
                        "history",
                        format!("the plan is refused and nothing was changed: {what}; plan again later, or apply it anyway (`weir apply --force`, `force: true` in the request)"),
                    ));
                }
                warnings.push(format!("forced: {what}"));
            }
            Some(got)
        }
        None => {
            warnings.push(
                "the plan does not say which window of this server's history it came from, so the server cannot tell \
                 whether it saw enough history"
                    .to_string(),
            );
            None
        }
    };
    Ok((warnings, history))
}

/// Check a plan for `cluster` and, unless `dry_run`, apply it: the configuration and the routes
/// in one transaction, recorded in the cluster's history. The registry and the owning worker
/// follow.
pub async fn apply_plan(
    s: &AppState,
    cluster: &str,
    req: &PlanRequest,
    origin: &Origin,
) -> Result<PlanDiff, ApiError> {
    apply_checked(s, cluster, req, origin, true).await
}

async fn apply_checked(
    s: &AppState,
    cluster: &str,
    req: &PlanRequest,
    origin: &Origin,
    guarded: bool,
) -> Result<PlanDiff, ApiError> {
    let loaded =
        s.registry.cluster(cluster).ok_or_else(|| ApiError::not_found(format!("no cluster `{cluster}`")))?;
    if !req.dry_run && req.base_version.is_none() {
        return Err(refused(
            "base_version",
            format!(
                "the plan is refused and nothing was changed: it does not say which configuration version it was made \
                 from (base_version); cluster `{cluster}` is at version {} (GET /v1/clusters/{cluster}/config answers it \
                 in Weir-Config-Version)",
                loaded.version
            ),
        ));
    }
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
        )
        .field("base_version"));
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
    if guarded {
        let (warnings, history) = guard(s, cluster, req).await?;
        diff.warnings = warnings;
        diff.history_ms = history;
    }
    if req.dry_run {
        return Ok(diff);
    }
    // Routes to leave as they are: the current ones to this cluster.
    let routes = checked
        .routes
        .unwrap_or_else(|| current_routes.iter().filter(|r| r.cluster == cluster).cloned().collect());
    let wire: Vec<Route> = routes
        .iter()
        .map(|r| Route { key: r.key.clone(), cluster: r.cluster.clone(), queue: r.queue.clone() })
        .collect();
    let change = weir_store::ConfigChange {
        actor: origin.actor.clone(),
        source: origin.source.clone(),
        diff: diff_json(&diff.queues, &diff.routes),
        routes: serde_json::to_string(&wire).ok(),
    };
    // A plan keeps the comments of the file in force; a rollback brings its version back as it was.
    let text = if guarded {
        crate::plans::keep_comments(&loaded_text(s, cluster).await?, &req.config)
    } else {
        req.config.clone()
    };
    match s.store.apply_plan(cluster, base, &text, &routes, &change, now_ms()).await? {
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

/// The cluster file in force, as stored (with its comments).
async fn loaded_text(s: &AppState, cluster: &str) -> Result<String, ApiError> {
    Ok(s.store.cluster(cluster).await?.map(|c| c.config).unwrap_or_default())
}

/// The diff of an edit from the file `before` (if any) to `after`: the settings of the queues
/// in both, and the queues that appear or go.
pub fn edit_diff(before: Option<&str>, after: &str) -> String {
    let parse = |t: &str| weir_model::ClusterConfig::from_yaml("config", t).ok();
    let (Some(a), Some(b)) = (before.and_then(parse), parse(after)) else {
        return diff_json(&[], &[]);
    };
    let mut queues = crate::plans::setting_changes(&a, &b);
    let paths =
        |c: &weir_model::ClusterConfig| c.queues.iter().map(|q| q.path.to_string()).collect::<Vec<_>>();
    let (pa, pb) = (paths(&a), paths(&b));
    for q in pb.iter().filter(|q| !pa.contains(q)) {
        queues.push(weir_api::SettingChange {
            queue: q.clone(),
            field: "(queue)".into(),
            from: "-".into(),
            to: "added".into(),
        });
    }
    for q in pa.iter().filter(|q| !pb.contains(q)) {
        queues.push(weir_api::SettingChange {
            queue: q.clone(),
            field: "(queue)".into(),
            from: "present".into(),
            to: "removed".into(),
        });
    }
    if a.nodes != b.nodes {
        queues.push(weir_api::SettingChange {
            queue: "nodes".into(),
            field: "(section)".into(),
            from: format!("{} nodes, {}", a.node_count(), a.total_resources()),
            to: format!("{} nodes, {}", b.node_count(), b.total_resources()),
        });
    }
    diff_json(&queues, &[])
}

/// A change's diff as the history stores it.
pub fn diff_json(queues: &[weir_api::SettingChange], routes: &[weir_api::RouteChange]) -> String {
    serde_json::json!({"queues": queues, "routes": routes}).to_string()
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
    let applied = apply_plan(&s, &name, &req, &Origin::new(&p.token_id, "plan")).await;
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

/// A stored proposal as a plan request: its validation (tier 1 in the server's replays) and
/// the window of history it was planned from, as the scheduled planner stored them.
pub fn proposal_request(p: &weir_store::ProposalRow, dry_run: bool, force: bool) -> PlanRequest {
    let routes: Option<Vec<Route>> = serde_json::from_str(&p.routes).ok();
    let summary: serde_json::Value = serde_json::from_str(&p.summary).unwrap_or_default();
    let validation: Option<weir_api::PlanValidation> = serde_json::from_value(summary["tier1"].clone()).ok();
    let history: Option<weir_api::HistoryWindow> = serde_json::from_value(summary["history"].clone()).ok();
    PlanRequest {
        config: p.config.clone(),
        routes,
        base_version: Some(p.base_version),
        dry_run,
        unvalidated: validation.is_none(),
        validation,
        history,
        force,
    }
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
            // Shown even when made from too little history: the warning says so.
            apply_plan(s, &p.cluster, &proposal_request(&p, true, true), &Origin::new("weir", "proposal"))
                .await
                .ok()
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
pub async fn apply_proposal(s: &AppState, id: i64, actor: &str, force: bool) -> Result<PlanDiff, ApiError> {
    let p = s.store.proposal(id).await?.ok_or_else(|| ApiError::not_found(format!("no proposal {id}")))?;
    if p.state != "proposed" {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "conflict",
            format!("proposal {id} is {}, not waiting", p.state),
        ));
    }
    let origin = Origin::new(actor, format!("proposal {id}"));
    let diff = apply_plan(s, &p.cluster, &proposal_request(&p, false, force), &origin).await?;
    s.store.decide_proposal(id, "applied", now_ms()).await?;
    Ok(diff)
}

/// `POST /v1/proposals/{id}/apply`.
pub async fn post_apply_proposal(
    State(s): State<AppState>,
    peer: Peer,
    headers: HeaderMap,
    Path(id): Path<i64>,
    Query(q): Query<ForceQuery>,
) -> Result<Json<PlanDiff>, ApiError> {
    let p = s.principal(&headers).await?;
    crate::api::admin_or_audit(&s, &p, &peer, "proposal.apply", format!("proposal {id}")).await?;
    let applied = apply_proposal(&s, id, &p.token_id, q.force).await;
    let outcome = if applied.is_ok() { "ok" } else { "refused" };
    s.audit(&p.token_id, "proposal.apply", format!("proposal {id}"), outcome, Audit::from(&peer)).await;
    Ok(Json(applied?))
}

#[derive(Deserialize, Default)]
pub struct ForceQuery {
    /// Apply a proposal made from less recorded history than the server's minimum.
    #[serde(default)]
    pub force: bool,
}

/// Dismiss a waiting proposal.
pub async fn dismiss_proposal(s: &AppState, id: i64) -> Result<(), ApiError> {
    let p = s.store.proposal(id).await?.ok_or_else(|| ApiError::not_found(format!("no proposal {id}")))?;
    if !s.store.decide_proposal(id, "dismissed", now_ms()).await? {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "conflict",
            format!("proposal {id} is {}, not waiting: only a waiting proposal is dismissed", p.state),
        ));
    }
    Ok(())
}

/// `POST /v1/proposals/{id}/dismiss`.
pub async fn post_dismiss_proposal(
    State(s): State<AppState>,
    peer: Peer,
    headers: HeaderMap,
    Path(id): Path<i64>,
) -> Result<StatusCode, ApiError> {
    let p = s.principal(&headers).await?;
    crate::api::admin_or_audit(&s, &p, &peer, "proposal.dismiss", format!("proposal {id}")).await?;
    let done = dismiss_proposal(&s, id).await;
    let outcome = if done.is_ok() { "ok" } else { "refused" };
    s.audit(&p.token_id, "proposal.dismiss", format!("proposal {id}"), outcome, Audit::from(&peer)).await;
    done.map(|()| StatusCode::NO_CONTENT)
}

/// Plan `cluster` now, as the scheduled planner does; the new proposal.
pub async fn plan_now(s: &AppState, cluster: &str) -> Result<Proposal, ApiError> {
    if s.registry.cluster(cluster).is_none() {
        return Err(ApiError::not_found(format!("no cluster `{cluster}`")));
    }
    let (id, _) = crate::autoplan::propose(s.store.as_ref(), &s.registry, cluster, s.planning.window)
        .await
        .map_err(|why| refused("cluster", format!("no proposal for cluster `{cluster}`: {why}")))?;
    proposals_of(s, Some(cluster), 20)
        .await?
        .into_iter()
        .find(|p| p.id == id)
        .ok_or_else(|| ApiError::internal(format!("proposal {id} was stored but cannot be read back")))
}

/// `POST /v1/clusters/{name}/proposals`: plan now.
pub async fn post_plan_now(
    State(s): State<AppState>,
    peer: Peer,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<(StatusCode, Json<Proposal>), ApiError> {
    let p = s.principal(&headers).await?;
    crate::api::admin_or_audit(&s, &p, &peer, "plan.now", format!("cluster {name}")).await?;
    let made = plan_now(&s, &name).await;
    let (outcome, ctx) = match &made {
        Ok(pr) => ("ok", Audit::from(&peer).detail(format!("proposal {} ({})", pr.id, pr.state))),
        Err(e) => ("refused", Audit::from(&peer).detail(e.body.error.message.clone())),
    };
    s.audit(&p.token_id, "plan.now", format!("cluster {name}"), outcome, ctx).await;
    Ok((StatusCode::CREATED, Json(made?)))
}

/// A recorded version as the API shows it.
pub fn version_of(v: &weir_store::ConfigVersionRow) -> weir_api::ConfigVersion {
    let diff: serde_json::Value = serde_json::from_str(&v.diff).unwrap_or_default();
    weir_api::ConfigVersion {
        version: v.version,
        at_ms: v.at_ms,
        actor: v.actor.clone(),
        source: v.source.clone(),
        queues: serde_json::from_value(diff["queues"].clone()).unwrap_or_default(),
        routes: serde_json::from_value(diff["routes"].clone()).unwrap_or_default(),
        routes_known: v.routes.is_some(),
    }
}

/// The recorded versions of a cluster's configuration, newest first.
pub async fn history_of(
    s: &AppState,
    cluster: &str,
    limit: u32,
) -> Result<weir_api::ConfigHistory, ApiError> {
    let loaded =
        s.registry.cluster(cluster).ok_or_else(|| ApiError::not_found(format!("no cluster `{cluster}`")))?;
    let rows = s.store.config_versions(cluster, limit).await?;
    Ok(weir_api::ConfigHistory {
        cluster: cluster.to_string(),
        current: loaded.version,
        versions: rows.iter().map(version_of).collect(),
    })
}

/// `GET /v1/clusters/{name}/history`.
pub async fn config_history(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<Json<weir_api::ConfigHistory>, ApiError> {
    require_all(&s.principal(&headers).await?)?;
    Ok(Json(history_of(&s, &name, 200).await?))
}

/// Bring back `version` of `cluster`'s configuration: its file and, when recorded, the routes
/// to the cluster, through a plan's checks (not its guards: the version ran before).
pub async fn rollback(
    s: &AppState,
    cluster: &str,
    version: i64,
    req: &weir_api::RollbackRequest,
    actor: &str,
) -> Result<PlanDiff, ApiError> {
    let loaded =
        s.registry.cluster(cluster).ok_or_else(|| ApiError::not_found(format!("no cluster `{cluster}`")))?;
    let row = s.store.config_version(cluster, version).await?.ok_or_else(|| {
        ApiError::not_found(format!("cluster `{cluster}` has no recorded configuration version {version}"))
    })?;
    let routes: Option<Vec<Route>> = row.routes.as_deref().and_then(|r| serde_json::from_str(r).ok());
    let plan = PlanRequest {
        config: row.config,
        routes,
        base_version: Some(req.base_version.unwrap_or(loaded.version)),
        dry_run: req.dry_run,
        ..PlanRequest::default()
    };
    let origin = Origin::new(actor, format!("rollback to version {version}"));
    apply_checked(s, cluster, &plan, &origin, false).await.map_err(|mut e| {
        if e.status == StatusCode::BAD_REQUEST {
            e.body.error.message = format!("cannot roll back to version {version}: {}", e.body.error.message);
        }
        e
    })
}

/// `POST /v1/clusters/{name}/history/{version}/rollback`.
pub async fn post_rollback(
    State(s): State<AppState>,
    peer: Peer,
    headers: HeaderMap,
    Path((name, version)): Path<(String, i64)>,
    b: Result<Bytes, BytesRejection>,
) -> Result<Json<PlanDiff>, ApiError> {
    let p = s.principal(&headers).await?;
    crate::api::admin_or_audit(&s, &p, &peer, "cluster.rollback", format!("cluster {name}")).await?;
    let b = crate::state::body(b)?;
    let req: weir_api::RollbackRequest = if b.iter().all(u8::is_ascii_whitespace) {
        weir_api::RollbackRequest::default()
    } else {
        let de = &mut serde_json::Deserializer::from_slice(&b);
        serde_path_to_error::deserialize(de).map_err(|e| {
            ApiError::bad_request(format!("malformed JSON: {}", e.inner())).field(e.path().to_string())
        })?
    };
    let done = rollback(&s, &name, version, &req, &p.token_id).await;
    if !req.dry_run {
        let (outcome, detail) = match &done {
            Ok(d) => {
                ("ok", format!("to version {version}: now version {}", d.version.unwrap_or(d.base_version)))
            }
            Err(e) => ("refused", e.body.error.message.clone()),
        };
        s.audit(
            &p.token_id,
            "cluster.rollback",
            format!("cluster {name}"),
            outcome,
            Audit::from(&peer).detail(detail),
        )
        .await;
    }
    Ok(Json(done?))
}
