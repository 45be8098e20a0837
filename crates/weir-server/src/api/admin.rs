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

use crate::auth::{hash_token, new_token};
use crate::error::ApiError;
use crate::state::{body, is_yaml, reload_cluster, require_admin, AppState};
use crate::submit;
use crate::time::now_ms;

pub(super) async fn list_routes(
    State(s): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<RouteList>, ApiError> {
    s.principal(&headers).await?;
    let routes = s.store.routes().await?;
    Ok(Json(RouteList {
        routes: routes
            .into_iter()
            .map(|r| Route { key: r.key, cluster: r.cluster, queue: r.queue })
            .collect(),
    }))
}

pub(super) async fn put_route(
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

pub(super) async fn delete_route(
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

pub(super) async fn put_workflow(
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

pub(super) async fn put_cluster_config(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(name): Path<String>,
    b: Result<Bytes, BytesRejection>,
) -> Result<Json<ClusterConfigApplied>, ApiError> {
    require_admin(&s.principal(&headers).await?)?;
    let b = body(b)?;
    let text = String::from_utf8(b.to_vec()).map_err(|_| ApiError::bad_request("the body is not UTF-8"))?;
    Ok(Json(reload_cluster(&s, &name, text).await?))
}

pub(super) async fn create_token(
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
            id: t.id,
            name: t.name,
            grants: serde_json::from_str::<Vec<Grant>>(&t.grants).unwrap_or_default(),
            created_ms: t.created_ms,
            revoked_ms: t.revoked_ms,
        })
        .collect();
    Ok(Json(TokenList { tokens }))
}

pub(super) async fn revoke_token(
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
