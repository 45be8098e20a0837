//! The service layer's HTTP API (`/v1`): runs (`runs`), routes, workflows, tokens and cluster
//! files (`admin`), queues and `/metrics` here. Handlers authenticate, authorize, validate,
//! and read or write the store; they never call a backend and never wait on an engine. The
//! planning loop's endpoints are `loop_api`'s, task logs `logs`'.

mod admin;
pub(crate) mod migrations;
pub(crate) mod runs;

pub(crate) use admin::{admin_or_audit, route_visible};

use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde::Deserialize;
use weir_api::{Health, QueuesResponse, Role};

use crate::error::ApiError;
use crate::state::{cluster_queues, visible_queues, AppState};
use crate::time::now_ms;

/// The `/v1` API, `/healthz`, `/readyz` and `/metrics`.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/v1/openapi.json", get(openapi))
        .route("/v1/runs", post(runs::submit_run).get(runs::list_runs))
        .route("/v1/runs/{id}", get(runs::get_run))
        .route("/v1/runs/{id}/kill", post(runs::kill_run))
        .route("/v1/runs/{id}/retry", post(runs::retry_run))
        .route("/v1/runs/{id}/explain", get(runs::explain_run))
        .route("/v1/slo/check", post(crate::jockey::check_handler))
        .route("/v1/runs/{id}/tasks/{task}/logs", get(crate::logs::task_logs))
        .route("/v1/queues", get(queues))
        .route("/v1/queues/{path}", get(queue))
        .route("/v1/nodes", get(crate::nodes::nodes))
        .route("/v1/routes", get(admin::list_routes))
        .route("/v1/routes/{key}", put(admin::put_route).delete(admin::delete_route))
        .route("/v1/migrations", get(migrations::migration_status))
        .route("/v1/migrations/{workflow}/approve", post(migrations::approve_migration))
        .route("/v1/workflows/{name}", put(admin::put_workflow))
        .route("/v1/tokens", post(admin::create_token).get(admin::list_tokens))
        .route("/v1/tokens/{id}", axum::routing::delete(admin::revoke_token))
        .route("/v1/clusters/{name}/config", put(admin::put_cluster_config))
        .route("/v1/audit", get(admin::audit))
        .route("/metrics", get(metrics))
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

#[derive(Deserialize)]
struct ClusterQuery {
    cluster: Option<String>,
}

async fn queues(
    State(s): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<ClusterQuery>,
) -> Result<Json<QueuesResponse>, ApiError> {
    let p = s.principal(&headers).await?;
    Ok(Json(QueuesResponse { clusters: visible_queues(&p, cluster_queues(&s, q.cluster.as_deref()).await?) }))
}

async fn queue(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(path): Path<String>,
    Query(q): Query<ClusterQuery>,
) -> Result<Json<weir_api::QueueInfo>, ApiError> {
    let p = s.principal(&headers).await?;
    let want = if path.starts_with("root") { path.clone() } else { format!("root.{path}") };
    crate::state::one_queue(&s, &p, q.cluster.as_deref(), &want)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::not_found(format!("no queue {want}")))
}

/// `GET /metrics`: OpenMetrics or the classic text format, by `Accept`. Needs a token that may
/// read every project (the queue gauges cover every queue). A store that does not answer
/// still gets an answer, with `weir_store_up 0`: an alert can then tell the store from the
/// server.
async fn metrics(State(s): State<AppState>, headers: HeaderMap) -> Result<Response, ApiError> {
    let p = s.principal(&headers).await?;
    if !p.can_all(Role::Viewer) {
        return Err(ApiError::forbidden(format!(
            "token {} cannot read every project; /metrics needs a viewer grant on `*`",
            p.token_id
        )));
    }
    let format = crate::metrics::Format::negotiate(
        headers.get(axum::http::header::ACCEPT).and_then(|v| v.to_str().ok()),
    );
    let now = now_ms();
    // Runs submitted since `now` or not yet ended: the ones not yet ended.
    let (clusters, unfinished) = tokio::join!(cluster_queues(&s, None), s.store.run_counts(now));
    let view = match (&clusters, &unfinished) {
        (Ok(clusters), Ok(unfinished)) => Some(crate::metrics::StoreView { clusters, unfinished }),
        _ => None,
    };
    let text = s.metrics.render(view, now, format).await;
    Ok((
        [(axum::http::header::CONTENT_TYPE, format.content_type()), (axum::http::header::VARY, "Accept")],
        text,
    )
        .into_response())
}
