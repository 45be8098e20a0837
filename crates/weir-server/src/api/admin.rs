//! `/v1` administration: routes, registered workflows, tokens and cluster files.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use weir_api::{
    ClusterConfigApplied, CreateToken, Grant, Role, Route, RouteList, RouteTarget, TokenCreated, TokenInfo,
    TokenList,
};
use weir_store::{RouteRow, TokenRow};

use crate::auth::{hash_token, new_token, role_name, Principal};
use crate::error::ApiError;
use crate::state::{body, is_yaml, reload_cluster, require_admin, AppState, Audit, Peer};
use crate::submit::{self, project_of_queue};
use crate::time::now_ms;

/// The routing table: all of it for a viewer of every project, else the routes into queues of
/// the caller's projects and those keyed by its projects.
pub(super) async fn list_routes(
    State(s): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<RouteList>, ApiError> {
    let p = s.principal(&headers).await?;
    let routes = s.store.routes().await?;
    let policy_routes = s
        .router
        .settings
        .routes
        .iter()
        .filter(|r| {
            r.candidates.iter().any(|c| {
                let row = RouteRow { key: r.key.clone(), cluster: c.cluster.clone(), queue: c.queue.clone() };
                route_visible(&p, &row)
            })
        })
        .map(|r| weir_api::PolicyRoute {
            key: r.key.clone(),
            policy: r.policy.name().to_string(),
            spill_after_seconds: match r.policy {
                crate::routing::Policy::Spill { after } => Some(after.as_secs()),
                _ => None,
            },
            candidates: r
                .candidates
                .iter()
                .map(|c| RouteTarget { cluster: c.cluster.clone(), queue: c.queue.clone() })
                .collect(),
        })
        .collect();
    Ok(Json(RouteList {
        routes: routes
            .into_iter()
            .filter(|r| route_visible(&p, r))
            .map(|r| Route { key: r.key, cluster: r.cluster, queue: r.queue })
            .collect(),
        policy_routes,
    }))
}

pub(crate) fn route_visible(p: &Principal, r: &RouteRow) -> bool {
    let keyed = r.key.strip_prefix("project:").and_then(|k| k.rsplit_once(':')).map(|(project, _)| project);
    p.can(&project_of_queue(&r.queue), Role::Viewer) || keyed.is_some_and(|k| p.can(k, Role::Viewer))
}

pub(super) async fn put_route(
    State(s): State<AppState>,
    peer: Peer,
    headers: HeaderMap,
    Path(key): Path<String>,
    b: Result<Bytes, BytesRejection>,
) -> Result<Json<Route>, ApiError> {
    let p = s.principal(&headers).await?;
    admin_or_audit(&s, &p, &peer, "route.put", format!("route {key}")).await?;
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
    let ctx = Audit::from(&peer).detail(format!("to {}/{}", target.cluster, target.queue));
    s.audit(&p.token_id, "route.put", format!("route {key}"), "ok", ctx).await;
    Ok(Json(Route { key, cluster: target.cluster, queue: target.queue }))
}

pub(super) async fn delete_route(
    State(s): State<AppState>,
    peer: Peer,
    headers: HeaderMap,
    Path(key): Path<String>,
) -> Result<StatusCode, ApiError> {
    let p = s.principal(&headers).await?;
    admin_or_audit(&s, &p, &peer, "route.delete", format!("route {key}")).await?;
    if !s.store.delete_route(&key).await? {
        return Err(ApiError::not_found(format!("no route `{key}`")));
    }
    s.registry.delete_route(&key);
    s.audit(&p.token_id, "route.delete", format!("route {key}"), "ok", Audit::from(&peer)).await;
    Ok(StatusCode::NO_CONTENT)
}

pub(super) async fn put_workflow(
    State(s): State<AppState>,
    peer: Peer,
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
    let accepted = submit::accept(&s.registry, spec, &s.limits)?;
    principal.require(&accepted.owner, Role::Submitter)?;
    let text = serde_json::to_string(&accepted.spec).map_err(|e| ApiError::internal(e.to_string()))?;
    s.store.put_workflow(&accepted.project, &name, &text, now_ms()).await?;
    let ctx = Audit::from(&peer).project(accepted.project.clone());
    s.audit(&principal.token_id, "workflow.put", format!("workflow {}/{name}", accepted.project), "ok", ctx)
        .await;
    Ok(StatusCode::NO_CONTENT)
}

pub(super) async fn put_cluster_config(
    State(s): State<AppState>,
    peer: Peer,
    headers: HeaderMap,
    Path(name): Path<String>,
    b: Result<Bytes, BytesRejection>,
) -> Result<Json<ClusterConfigApplied>, ApiError> {
    let p = s.principal(&headers).await?;
    admin_or_audit(&s, &p, &peer, "cluster.put", format!("cluster {name}")).await?;
    let b = body(b)?;
    let text = String::from_utf8(b.to_vec()).map_err(|_| ApiError::bad_request("the body is not UTF-8"))?;
    let applied = reload_cluster(&s, &name, text, &p.token_id).await;
    let outcome = if applied.is_ok() { "ok" } else { "invalid" };
    s.audit(&p.token_id, "cluster.put", format!("cluster {name}"), outcome, Audit::from(&peer)).await;
    Ok(Json(applied?))
}

pub(super) async fn create_token(
    State(s): State<AppState>,
    peer: Peer,
    headers: HeaderMap,
    b: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let p = s.principal(&headers).await?;
    admin_or_audit(&s, &p, &peer, "token.create", String::new()).await?;
    let b = body(b)?;
    let de = &mut serde_json::Deserializer::from_slice(&b);
    let req: CreateToken = serde_path_to_error::deserialize(de).map_err(|e| {
        ApiError::bad_request(format!("malformed JSON: {}", e.inner())).field(e.path().to_string())
    })?;
    if req.name.trim().is_empty() || req.name.chars().any(char::is_control) || req.name.len() > 200 {
        return Err(ApiError::invalid("a token needs a name: printable, at most 200 bytes").field("name"));
    }
    for (i, u) in req.user.iter().chain(req.act_as.iter().filter(|u| *u != "*")).enumerate() {
        if !valid_user(u) {
            let field = if req.user.is_some() && i == 0 { "user".to_string() } else { "act_as".to_string() };
            return Err(ApiError::invalid(format!(
                "`{u}` is not a user name: letters, digits, `.`, `_`, `-`, `@`, at most 64"
            ))
            .field(field));
        }
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
        user: Some(req.user.clone().unwrap_or_else(|| id.clone())),
        act_as: serde_json::to_string(&req.act_as).map_err(|e| ApiError::internal(e.to_string()))?,
    };
    s.store.create_token(&row).await?;
    let grants =
        req.grants.iter().map(|g| format!("{}:{}", role_name(g.role), g.project)).collect::<Vec<_>>();
    let ctx = Audit::from(&peer).detail(format!(
        "`{}` as user {} with {}",
        req.name,
        row.user.as_deref().unwrap_or_default(),
        grants.join(", ")
    ));
    s.audit(&p.token_id, "token.create", format!("token {id}"), "ok", ctx).await;
    Ok((StatusCode::CREATED, Json(TokenCreated { id, name: req.name, token: secret })).into_response())
}

pub(super) async fn list_tokens(
    State(s): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<TokenList>, ApiError> {
    require_admin(&s.principal(&headers).await?)?;
    let tokens = s
        .store
        .tokens()
        .await?
        .into_iter()
        .map(|t| TokenInfo {
            user: t.user.clone().unwrap_or_else(|| t.id.clone()),
            id: t.id,
            name: t.name,
            grants: serde_json::from_str::<Vec<Grant>>(&t.grants).unwrap_or_default(),
            act_as: serde_json::from_str(&t.act_as).unwrap_or_default(),
            created_ms: t.created_ms,
            revoked_ms: t.revoked_ms,
        })
        .collect();
    Ok(Json(TokenList { tokens }))
}

pub(super) async fn revoke_token(
    State(s): State<AppState>,
    peer: Peer,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let p = s.principal(&headers).await?;
    admin_or_audit(&s, &p, &peer, "token.revoke", format!("token {id}")).await?;
    if !s.store.revoke_token(&id, now_ms()).await? {
        return Err(ApiError::not_found(format!("no live token `{id}`")));
    }
    s.audit(&p.token_id, "token.revoke", format!("token {id}"), "ok", Audit::from(&peer)).await;
    Ok(StatusCode::NO_CONTENT)
}

/// A scheduler user name: what per-user limits count and the audit log shows.
fn valid_user(u: &str) -> bool {
    !u.is_empty()
        && u.len() <= 64
        && u.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '@'))
}

/// A global admin passes; anyone else is refused (403) and the attempt is audited.
pub(crate) async fn admin_or_audit(
    s: &AppState,
    p: &Principal,
    peer: &Peer,
    action: &str,
    target: String,
) -> Result<(), ApiError> {
    if let Err(e) = require_admin(p) {
        s.audit(&p.token_id, action, target, "denied", Audit::from(peer)).await;
        return Err(e);
    }
    Ok(())
}

#[derive(serde::Deserialize)]
pub(super) struct AuditQuery {
    token: Option<String>,
    action: Option<String>,
    since: Option<i64>,
    cursor: Option<String>,
    limit: Option<u32>,
}

/// `GET /v1/audit`: global admins only.
pub(super) async fn audit(
    State(s): State<AppState>,
    headers: HeaderMap,
    q: Result<axum::extract::Query<AuditQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<weir_api::AuditList>, ApiError> {
    require_admin(&s.principal(&headers).await?)?;
    let axum::extract::Query(q) = q.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let before = match &q.cursor {
        Some(c) => Some(c.parse::<i64>().map_err(|_| ApiError::bad_request("bad cursor").field("cursor"))?),
        None => None,
    };
    let limit = q.limit.unwrap_or(100).clamp(1, 1000);
    let filter =
        weir_store::AuditFilter { token_id: q.token, action: q.action, since_ms: q.since, before, limit };
    let rows = s.store.audit(&filter).await?;
    let next_cursor = (rows.len() == limit as usize).then(|| rows.last().map(|r| r.id.to_string())).flatten();
    Ok(Json(weir_api::AuditList { entries: rows.into_iter().map(audit_entry).collect(), next_cursor }))
}

pub(crate) fn audit_entry(r: weir_store::AuditRow) -> weir_api::AuditEntry {
    let e = r.entry;
    weir_api::AuditEntry {
        id: r.id,
        at_ms: e.at_ms,
        token: e.token_id,
        action: e.action,
        target: e.target,
        project: e.project,
        client: e.client,
        outcome: e.outcome,
        detail: e.detail,
    }
}
