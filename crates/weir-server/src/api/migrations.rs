//! `/v1/migrations`: the migration table (each dry-run's verdict) and the approval that moves a
//! workflow's route to the cluster its dry-run ran on.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::Json;
use weir_api::{ApproveMigration, MigrationApproved, MigrationStatus, MigrationVerdict, Role, Route};
use weir_store::{Approval, DryRunVerdictRow, MigrationApproval};

use crate::error::ApiError;
use crate::state::{body, AppState, Audit, Peer};
use crate::time::now_ms;

/// How many verdicts `GET /v1/migrations` returns.
const LIMIT: u32 = 500;

pub(crate) fn wire(v: DryRunVerdictRow) -> MigrationVerdict {
    MigrationVerdict {
        run_id: v.run_id,
        workflow: v.workflow,
        project: v.project,
        logical_date: v.logical_date,
        cluster: v.cluster,
        queue: v.queue,
        production_run: v.production_run,
        verdict: v.verdict,
        differences: serde_json::from_str(&v.differences).unwrap_or(serde_json::Value::String(v.differences)),
        at_ms: v.at_ms,
        approved_by: v.approved_by,
        approved_ms: v.approved_ms,
    }
}

#[derive(serde::Deserialize)]
pub(super) struct StatusQuery {
    workflow: Option<String>,
}

/// The verdicts of the workflows whose project the caller may view, newest first.
pub(super) async fn migration_status(
    State(s): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<StatusQuery>,
) -> Result<Json<MigrationStatus>, ApiError> {
    let p = s.principal(&headers).await?;
    let rows = s.store.dry_run_verdicts(q.workflow.as_deref(), LIMIT).await?;
    Ok(Json(MigrationStatus {
        verdicts: rows.into_iter().filter(|v| p.can(&v.project, Role::Viewer)).map(wire).collect(),
    }))
}

/// Approving moves a route, so it needs what changing a route needs (a global admin); every
/// outcome is audited.
pub(super) async fn approve_migration(
    State(s): State<AppState>,
    peer: Peer,
    headers: HeaderMap,
    Path(workflow): Path<String>,
    b: Result<Bytes, BytesRejection>,
) -> Result<Json<MigrationApproved>, ApiError> {
    let p = s.principal(&headers).await?;
    let target = format!("route workflow:{workflow}");
    super::admin_or_audit(&s, &p, &peer, "migrate.approve", target.clone()).await?;
    let b = body(b)?;
    let req: ApproveMigration =
        serde_json::from_slice(&b).map_err(|e| ApiError::bad_request(format!("malformed JSON: {e}")))?;
    approve(&s, &p.token_id, &peer, &workflow, &req.cluster).await
}

/// The approval itself (the API's and the dashboard's form): the cluster must be loaded; the
/// store approves the newest verdict there and moves the route in one transaction.
pub(crate) async fn approve(
    s: &AppState,
    token_id: &str,
    peer: &Peer,
    workflow: &str,
    cluster: &str,
) -> Result<Json<MigrationApproved>, ApiError> {
    let target = format!("route workflow:{workflow}");
    if s.registry.cluster(cluster).is_none() {
        return Err(ApiError::invalid(format!("no cluster `{cluster}`")).field("cluster"));
    }
    let approval = MigrationApproval {
        workflow: workflow.to_string(),
        cluster: cluster.to_string(),
        actor: token_id.to_string(),
        client: peer.0.clone(),
        at_ms: now_ms(),
    };
    match s.store.approve_migration(&approval).await? {
        Approval::Approved { verdict, route } => {
            s.registry.put_route(route.clone());
            Ok(Json(MigrationApproved {
                verdict: wire(verdict),
                route: Route { key: route.key, cluster: route.cluster, queue: route.queue },
            }))
        }
        Approval::NoVerdict => {
            let ctx = Audit::from(peer).detail(format!("no dry-run verdict on {cluster}"));
            s.audit(token_id, "migrate.approve", target, "not_found", ctx).await;
            Err(ApiError::not_found(format!(
                "no dry-run of workflow `{workflow}` on cluster `{cluster}` has a verdict: run \
                 `weir submit --dry-run --cluster {cluster}` first"
            )))
        }
        Approval::Different { verdict } => {
            let ctx = Audit::from(peer).detail(format!("dry-run run {} was different", verdict.run_id));
            s.audit(token_id, "migrate.approve", target, "refused", ctx).await;
            Err(ApiError::conflict(
                format!(
                    "the newest dry-run of workflow `{workflow}` on cluster `{cluster}` (run {}) is \
                     `different` from production: see `weir migrate status {workflow}`",
                    verdict.run_id
                ),
                verdict.run_id,
            ))
        }
    }
}
