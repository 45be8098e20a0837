//! Nodes and their allocation (`GET /v1/nodes`, the dashboard's Nodes page): what the engine
//! actors publish in their snapshots, read from the store like the queue tree. Nodes belong to
//! no project, so reading them needs a viewer grant on `*`.

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::Json;
use serde::Deserialize;
use weir_api::{ClusterNodes, NodesResponse, Role};

use crate::auth::Principal;
use crate::error::ApiError;
use crate::state::AppState;

/// Every served cluster's nodes (or one cluster's), as last published; a cluster whose worker
/// has published nothing yet has no nodes and no `as_of_ms`.
pub(crate) async fn cluster_nodes(
    s: &AppState,
    cluster: Option<&str>,
) -> Result<Vec<ClusterNodes>, ApiError> {
    let mut out = Vec::new();
    for (name, snap) in crate::state::served_snapshots(s, cluster).await? {
        let (as_of_ms, nodes) = match snap {
            Some(sn) => (sn.as_of_ms, (*sn.nodes.value).clone()),
            None => (None, Vec::new()),
        };
        out.push(ClusterNodes { cluster: name, as_of_ms, nodes });
    }
    if let Some(c) = cluster {
        if out.is_empty() {
            return Err(ApiError::not_found(format!("no cluster `{c}`")).field("cluster"));
        }
    }
    Ok(out)
}

/// Why `p` may not read nodes, if it may not.
pub(crate) fn refuse(p: &Principal) -> Option<ApiError> {
    (!p.can_all(Role::Viewer)).then(|| {
        ApiError::forbidden(format!(
            "token {} cannot read every project; nodes are shared by all projects and need a viewer grant on `*`",
            p.token_id
        ))
    })
}

#[derive(Deserialize)]
pub(crate) struct NodesQuery {
    cluster: Option<String>,
}

/// `GET /v1/nodes[?cluster=NAME]`.
pub(crate) async fn nodes(
    State(s): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<NodesQuery>,
) -> Result<Json<NodesResponse>, ApiError> {
    let p = s.principal(&headers).await?;
    if let Some(e) = refuse(&p) {
        return Err(e);
    }
    Ok(Json(NodesResponse { clusters: cluster_nodes(&s, q.cluster.as_deref()).await? }))
}
