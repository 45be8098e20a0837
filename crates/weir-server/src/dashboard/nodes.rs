//! The Nodes page: every node of every cluster with its capacity, what is allocated on it and
//! what is free, its running task attempts and its state — the engine's view as its actor last
//! published it (`crate::nodes`). Like `/v1/nodes`, for viewers of every project.

use askama::Template;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;

use super::pages::{signed_in, try_page};
use super::views::{cores, dominant, memory, time_opt};
use super::{api_error, html, page_error, visitor, Nav};
use crate::state::AppState;

pub struct NodeRow {
    id: String,
    label: String,
    state: String,
    containers: u32,
    cores_used: String,
    cores_free: String,
    cores_total: String,
    memory_used: String,
    memory_free: String,
    memory_total: String,
    gpus: String,
    /// Dominant share of the node in use, 0–100, for the bar.
    used_percent: u32,
}

pub struct ClusterNodesView {
    name: String,
    as_of: String,
    summary: String,
    nodes: Vec<NodeRow>,
}

#[derive(Template)]
#[template(path = "nodes.html")]
struct NodesPage {
    nav: Nav,
    clusters: Vec<ClusterNodesView>,
}

pub async fn nodes(State(s): State<AppState>, headers: HeaderMap) -> Response {
    let v = signed_in!(s, headers);
    if let Some(e) = crate::nodes::refuse(&v.principal) {
        return page_error(StatusCode::FORBIDDEN, &e.body.error.message);
    }
    let clusters = try_page!(crate::nodes::cluster_nodes(&s, None).await);
    let views = clusters
        .into_iter()
        .map(|c| {
            let running = c.nodes.iter().map(|n| n.containers).sum::<u32>();
            let full = c.nodes.iter().filter(|n| n.state == "full").count();
            ClusterNodesView {
                summary: format!("{} nodes · {running} task attempts running · {full} full", c.nodes.len()),
                as_of: time_opt(c.as_of_ms),
                nodes: c
                    .nodes
                    .into_iter()
                    .map(|n| NodeRow {
                        used_percent: (dominant(&n.used, &n.capacity).clamp(0.0, 1.0) * 100.0).round() as u32,
                        label: n.label.unwrap_or_default(),
                        state: n.state,
                        containers: n.containers,
                        cores_used: cores(n.used.cpu),
                        cores_free: cores(n.free.cpu),
                        cores_total: cores(n.capacity.cpu),
                        memory_used: memory(n.used.memory),
                        memory_free: memory(n.free.memory),
                        memory_total: memory(n.capacity.memory),
                        gpus: if n.capacity.gpu == 0 {
                            String::new()
                        } else {
                            format!(
                                "{} of {}{}",
                                n.used.gpu,
                                n.capacity.gpu,
                                n.gpu_model.map(|m| format!(" {m}")).unwrap_or_default()
                            )
                        },
                        // A backend's nodes by the target's name, with the engine's id.
                        id: match n.name {
                            Some(name) => format!("{name} ({})", n.id),
                            None => n.id,
                        },
                    })
                    .collect(),
                name: c.cluster,
            }
        })
        .collect();
    html(&NodesPage { nav: Nav::new(&v, "Nodes", "/nodes", 2), clusters: views })
}
