//! Routes and clusters: read-only for viewers, editable by global admins (the same checks and
//! store writes as the API's `PUT /v1/routes/{key}`, `PUT /v1/clusters/{name}/config` and
//! `POST /v1/proposals/{id}/apply`).

use askama::Template;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::Form;
use serde::Deserialize;
use weir_store::RouteRow;

use super::pages::{signed_in, try_page};
use super::views::{resources, time};
use super::{api_error, html, visitor, Nav, Visitor};
use crate::error::ApiError;
use crate::state::{AppState, Audit, Peer};
use crate::time::now_ms;

pub struct RouteLine {
    key: String,
    cluster: String,
    queue: String,
}

#[derive(Template)]
#[template(path = "routes.html")]
struct RoutesPage {
    nav: Nav,
    admin: bool,
    message: String,
    message_class: String,
    routes: Vec<RouteLine>,
    clusters: Vec<String>,
    leaves: Vec<String>,
}

async fn routes_page(s: &AppState, v: &Visitor, message: Result<String, String>) -> Response {
    let rows = try_page!(s.store.routes().await.map_err(ApiError::from));
    let clusters = s.registry.cluster_names();
    // The form's choices (every leaf of every cluster) are an admin's only.
    let leaves = clusters
        .iter()
        .filter(|_| v.is_admin())
        .filter_map(|c| s.registry.cluster(c))
        .flat_map(|c| c.config.leaves().map(|q| q.path.to_string()).collect::<Vec<_>>())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let (message, message_class) = match message {
        Ok(m) => (m, "ok".to_string()),
        Err(m) => (m, "error".to_string()),
    };
    html(&RoutesPage {
        nav: Nav::new(v, "Routes", "/routes", 0),
        admin: v.is_admin(),
        message,
        message_class,
        routes: rows
            .into_iter()
            .filter(|r| crate::api::route_visible(&v.principal, r))
            .map(|r| RouteLine { key: r.key, cluster: r.cluster, queue: r.queue })
            .collect(),
        clusters,
        leaves,
    })
}

pub async fn routes(State(s): State<AppState>, headers: HeaderMap) -> Response {
    let v = signed_in!(s, headers);
    routes_page(&s, &v, Ok(String::new())).await
}

#[derive(Deserialize)]
pub struct RouteForm {
    csrf: String,
    key: String,
    cluster: String,
    queue: String,
}

pub async fn put_route(
    State(s): State<AppState>,
    peer: Peer,
    headers: HeaderMap,
    Form(f): Form<RouteForm>,
) -> Response {
    let v = signed_in!(s, headers);
    if let Some(r) = v.refuse_form(&f.csrf, true) {
        return r;
    }
    let key = f.key.trim().to_string();
    let outcome = if !crate::plans::route_key_ok(&key) {
        Err(format!("`{key}` is not a route key: write workflow:NAME or project:PROJECT:TIER (tier 1 to 3)"))
    } else {
        let leaf = s.registry.cluster(&f.cluster).is_some_and(|c| {
            weir_model::QueuePath::parse(&f.queue)
                .and_then(|q| c.config.find(&q))
                .is_some_and(|i| c.config.queues[i].is_leaf())
        });
        if !leaf {
            Err(format!("{} is not a leaf queue of cluster `{}`", f.queue, f.cluster))
        } else {
            let row = RouteRow { key: key.clone(), cluster: f.cluster.clone(), queue: f.queue.clone() };
            match s.store.put_route(&row, now_ms()).await {
                Ok(()) => {
                    s.registry.put_route(row);
                    let ctx = Audit::from(&peer).detail(format!("to {}/{} (dashboard)", f.cluster, f.queue));
                    s.audit(&v.principal.token_id, "route.put", format!("route {key}"), "ok", ctx).await;
                    Ok(format!("{key} now goes to {}:{}", f.cluster, f.queue))
                }
                Err(e) => Err(ApiError::from(e).body.error.message),
            }
        }
    };
    routes_page(&s, &v, outcome).await
}

#[derive(Deserialize)]
pub struct DeleteForm {
    csrf: String,
    key: String,
}

pub async fn delete_route(
    State(s): State<AppState>,
    peer: Peer,
    headers: HeaderMap,
    Form(f): Form<DeleteForm>,
) -> Response {
    let v = signed_in!(s, headers);
    if let Some(r) = v.refuse_form(&f.csrf, true) {
        return r;
    }
    let outcome = match s.store.delete_route(&f.key).await {
        Ok(true) => {
            s.registry.delete_route(&f.key);
            let ctx = Audit::from(&peer).detail("dashboard");
            s.audit(&v.principal.token_id, "route.delete", format!("route {}", f.key), "ok", ctx).await;
            Ok(format!("deleted {}", f.key))
        }
        Ok(false) => Err(format!("no route {}", f.key)),
        Err(e) => Err(ApiError::from(e).body.error.message),
    };
    routes_page(&s, &v, outcome).await
}

pub struct ValidationLine {
    label: String,
    current: String,
    planned: String,
}

pub struct ProposalView {
    id: i64,
    state: String,
    created: String,
    headline: String,
    validation: Vec<ValidationLine>,
    changes: Vec<String>,
    /// What to know before applying it (too little history, not validated).
    warnings: Vec<String>,
    /// Made from less history than the server asks for: applying it needs `force`.
    short_history: bool,
}

pub struct ClusterView {
    name: String,
    version: i64,
    nodes: u64,
    total: String,
    queues: usize,
    config: String,
    proposals: Vec<ProposalView>,
    /// The backend's state (`healthy`, `unhealthy`, …) and a line saying what it is; empty when
    /// this server runs no worker.
    backend_state: String,
    backend: String,
}

#[derive(Template)]
#[template(path = "clusters.html")]
struct ClustersPage {
    nav: Nav,
    admin: bool,
    message: String,
    message_class: String,
    clusters: Vec<ClusterView>,
}

/// A proposal's stored summary as lines: its verdict and the validation figures.
fn proposal_view(p: &weir_api::Proposal) -> ProposalView {
    let sum = &p.summary;
    let headline = sum["headline"].as_str().unwrap_or("").to_string();
    let validation = sum["validation"]
        .as_array()
        .map(|rows| {
            rows.iter()
                .filter_map(|r| {
                    Some(ValidationLine {
                        label: r.get(0)?.as_str()?.to_string(),
                        current: r.get(1)?.as_str()?.to_string(),
                        planned: r.get(2)?.as_str()?.to_string(),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    let changes = p
        .diff
        .as_ref()
        .map(|d| {
            d.queues
                .iter()
                .map(|c| format!("{} {}: {} → {}", c.queue, c.field, c.from, c.to))
                .chain(d.routes.iter().map(|r| {
                    format!(
                        "route {}: {} → {}",
                        r.key,
                        r.from.as_deref().unwrap_or("none"),
                        r.to.as_deref().unwrap_or("removed")
                    )
                }))
                .collect()
        })
        .unwrap_or_default();
    let warnings: Vec<String> = p.diff.as_ref().map(|d| d.warnings.clone()).unwrap_or_default();
    ProposalView {
        id: p.id,
        state: p.state.clone(),
        created: time(p.created_ms),
        headline,
        validation,
        changes,
        short_history: warnings.iter().any(|w| w.starts_with("forced:")),
        warnings: warnings.into_iter().map(|w| w.trim_start_matches("forced: ").to_string()).collect(),
    }
}

/// `slurm · healthy · Slurm 22.05.8 (v0.0.38) · 1 node reported · checked 12:00:01`.
fn backend_line(b: &crate::backend_status::BackendStatus, with_reason: bool) -> String {
    let mut parts = vec![b.kind.clone(), b.state.as_str().to_string()];
    if !b.version.is_empty() {
        parts.push(b.version.clone());
    }
    if let Some(n) = b.nodes {
        parts.push(format!("{n} node{} reported", if n == 1 { "" } else { "s" }));
    }
    parts.push(format!("checked {}", time(b.checked_ms)));
    let mut line = parts.join(" · ");
    if let (true, Some(reason)) = (with_reason, &b.reason) {
        line.push_str(" — ");
        line.push_str(reason);
    }
    line
}

async fn clusters_page(s: &AppState, v: &Visitor, message: Result<String, String>) -> Response {
    let mut views = Vec::new();
    let show_proposals = v.reads_all();
    for name in s.registry.cluster_names() {
        let Some(row) = try_page!(s.store.cluster(&name).await.map_err(ApiError::from)) else { continue };
        let loaded = s.registry.cluster(&name);
        let proposals = if show_proposals {
            try_page!(crate::loop_api::proposals_of(s, Some(&name), 3).await)
                .iter()
                .map(proposal_view)
                .collect()
        } else {
            Vec::new()
        };
        views.push(ClusterView {
            version: row.version,
            nodes: loaded.as_ref().map_or(0, |c| c.config.node_count()),
            total: loaded
                .as_ref()
                .map_or_else(String::new, |c| resources(&crate::snapshot::wire(c.config.total_resources()))),
            queues: loaded.as_ref().map_or(0, |c| c.config.queues.len()),
            // The file names every project's queues: for viewers of every project only.
            config: if v.reads_all() { row.config } else { String::new() },
            proposals,
            backend_state: s.backends.get(&name).map_or_else(String::new, |b| b.state.as_str().to_string()),
            // The reason may name the target's address: for viewers of every project only.
            backend: s.backends.get(&name).map_or_else(String::new, |b| backend_line(&b, v.reads_all())),
            name,
        });
    }
    let (message, message_class) = match message {
        Ok(m) => (m, "ok".to_string()),
        Err(m) => (m, "error".to_string()),
    };
    html(&ClustersPage {
        nav: Nav::new(v, "Clusters", "/clusters", 0),
        admin: v.is_admin(),
        message,
        message_class,
        clusters: views,
    })
}

pub async fn clusters(State(s): State<AppState>, headers: HeaderMap) -> Response {
    let v = signed_in!(s, headers);
    clusters_page(&s, &v, Ok(String::new())).await
}

#[derive(Deserialize)]
pub struct ClusterForm {
    csrf: String,
    config: Option<String>,
    apply_proposal: Option<i64>,
    dismiss_proposal: Option<i64>,
    /// "Plan now".
    plan: Option<String>,
    /// Apply a proposal made from too little history.
    force: Option<String>,
}

pub async fn put_cluster(
    State(s): State<AppState>,
    peer: Peer,
    headers: HeaderMap,
    Path(name): Path<String>,
    Form(f): Form<ClusterForm>,
) -> Response {
    let v = signed_in!(s, headers);
    if let Some(r) = v.refuse_form(&f.csrf, true) {
        return r;
    }
    let who = v.principal.token_id.clone();
    let (outcome, action, target) = if let Some(id) = f.dismiss_proposal {
        let done = crate::loop_api::dismiss_proposal(&s, id).await;
        (
            done.map(|()| format!("dismissed proposal {id}")).map_err(|e| e.body.error.message),
            "proposal.dismiss",
            format!("proposal {id}"),
        )
    } else if f.plan.is_some() {
        let made = crate::loop_api::plan_now(&s, &name).await;
        let made = made.map(|p| format!("planned cluster `{name}`: proposal {} ({})", p.id, p.state));
        (made.map_err(|e| e.body.error.message), "plan.now", format!("cluster {name}"))
    } else {
        let (action, target) = match f.apply_proposal {
            Some(id) => ("proposal.apply", format!("proposal {id}")),
            None => ("cluster.put", format!("cluster {name}")),
        };
        (apply_or_reload(&s, &name, f, &who).await, action, target)
    };
    let result = if outcome.is_ok() { "ok" } else { "invalid" };
    let ctx = Audit::from(&peer).detail("dashboard");
    s.audit(&who, action, target, result, ctx).await;
    clusters_page(&s, &v, outcome).await
}

async fn apply_or_reload(s: &AppState, name: &str, f: ClusterForm, who: &str) -> Result<String, String> {
    let force = f.force.is_some();
    match (f.apply_proposal, f.config) {
        (Some(id), _) => match crate::loop_api::apply_proposal(s, id, who, force).await {
            Ok(d) => Ok(format!(
                "applied proposal {id}: cluster `{}` is at configuration version {}; {} settings and {} routes changed",
                d.cluster,
                d.version.unwrap_or(d.base_version),
                d.queues.len(),
                d.routes.len()
            )),
            Err(e) => Err(e.body.error.message),
        },
        (None, Some(text)) => match crate::state::reload_cluster(s, name, text.replace("\r\n", "\n"), who).await {
            Ok(a) => Ok(format!("reloaded `{}`: {} queues, {} leaves", a.cluster, a.queues, a.leaves)),
            Err(e) => Err(e.body.error.message),
        },
        (None, None) => Err("nothing to do: the form sent neither a file nor a proposal".to_string()),
    }
}

#[derive(Template)]
#[template(path = "history.html")]
struct HistoryPage {
    nav: Nav,
    admin: bool,
    cluster: String,
    current: i64,
    message: String,
    message_class: String,
    versions: Vec<VersionLine>,
}

struct VersionLine {
    version: i64,
    at: String,
    actor: String,
    source: String,
    changes: Vec<String>,
    routes_known: bool,
}

async fn history_page(s: &AppState, v: &Visitor, name: &str, message: Result<String, String>) -> Response {
    if !v.reads_all() {
        return super::page_error(
            axum::http::StatusCode::FORBIDDEN,
            &format!(
                "token {} cannot read every project; a cluster's history shows every project's queues",
                v.principal.token_id
            ),
        );
    }
    let h = try_page!(crate::loop_api::history_of(s, name, 200).await);
    let versions = h
        .versions
        .iter()
        .map(|c| VersionLine {
            version: c.version,
            at: time(c.at_ms),
            actor: c.actor.clone(),
            source: c.source.clone(),
            changes: c
                .queues
                .iter()
                .map(|q| format!("{} {}: {} → {}", q.queue, q.field, q.from, q.to))
                .chain(c.routes.iter().map(|r| {
                    format!(
                        "route {}: {} → {}",
                        r.key,
                        r.from.as_deref().unwrap_or("none"),
                        r.to.as_deref().unwrap_or("removed")
                    )
                }))
                .collect(),
            routes_known: c.routes_known,
        })
        .collect();
    let (message, message_class) = match message {
        Ok(m) => (m, "ok".to_string()),
        Err(m) => (m, "error".to_string()),
    };
    html(&HistoryPage {
        nav: Nav::new(v, "Clusters", "/clusters", 0),
        admin: v.is_admin(),
        cluster: h.cluster,
        current: h.current,
        message,
        message_class,
        versions,
    })
}

/// A cluster's configuration history, with a rollback button per earlier version for admins.
pub async fn history(State(s): State<AppState>, headers: HeaderMap, Path(name): Path<String>) -> Response {
    let v = signed_in!(s, headers);
    history_page(&s, &v, &name, Ok(String::new())).await
}

#[derive(Deserialize)]
pub struct RollbackForm {
    csrf: String,
    version: i64,
    /// The version the page showed as current: a rollback made from a stale page is refused.
    base_version: i64,
}

pub async fn rollback(
    State(s): State<AppState>,
    peer: Peer,
    headers: HeaderMap,
    Path(name): Path<String>,
    Form(f): Form<RollbackForm>,
) -> Response {
    let v = signed_in!(s, headers);
    if let Some(r) = v.refuse_form(&f.csrf, true) {
        return r;
    }
    let req = weir_api::RollbackRequest { base_version: Some(f.base_version), dry_run: false };
    let done = crate::loop_api::rollback(&s, &name, f.version, &req, &v.principal.token_id).await;
    let outcome = match done {
        Ok(d) => Ok(format!(
            "rolled back to version {}: cluster `{name}` is at configuration version {}; {} settings and {} routes changed",
            f.version,
            d.version.unwrap_or(d.base_version),
            d.queues.len(),
            d.routes.len()
        )),
        Err(e) => Err(e.body.error.message),
    };
    let result = if outcome.is_ok() { "ok" } else { "refused" };
    let ctx = Audit::from(&peer).detail(format!("dashboard: to version {}", f.version));
    s.audit(&v.principal.token_id, "cluster.rollback", format!("cluster {name}"), result, ctx).await;
    history_page(&s, &v, &name, outcome).await
}

#[derive(Template)]
#[template(path = "audit.html")]
struct AuditPage {
    nav: Nav,
    token: String,
    action: String,
    entries: Vec<AuditLine>,
    older: String,
}

struct AuditLine {
    at: String,
    token: String,
    action: String,
    target: String,
    project: String,
    client: String,
    outcome: String,
    outcome_class: &'static str,
    detail: String,
}

#[derive(Deserialize)]
pub struct AuditForm {
    token: Option<String>,
    action: Option<String>,
    before: Option<i64>,
}

/// The audit log, for global admins.
pub async fn audit(
    State(s): State<AppState>,
    headers: HeaderMap,
    axum::extract::Query(q): axum::extract::Query<AuditForm>,
) -> Response {
    let v = signed_in!(s, headers);
    if !v.is_admin() {
        return super::page_error(
            axum::http::StatusCode::FORBIDDEN,
            &format!("token {} is not a global admin: the audit log is for admins", v.principal.token_id),
        );
    }
    let token = q.token.unwrap_or_default().trim().to_string();
    let action = q.action.unwrap_or_default().trim().to_string();
    const PAGE: u32 = 200;
    let filter = weir_store::AuditFilter {
        token_id: Some(token.clone()).filter(|t| !t.is_empty()),
        action: Some(action.clone()).filter(|a| !a.is_empty()),
        since_ms: None,
        before: q.before,
        limit: PAGE,
    };
    let rows = try_page!(s.store.audit(&filter).await.map_err(ApiError::from));
    let older = match rows.last() {
        Some(last) if rows.len() == PAGE as usize => format!(
            "/audit?token={}&action={}&before={}",
            super::pages::encode(&token),
            super::pages::encode(&action),
            last.id
        ),
        _ => String::new(),
    };
    let entries = rows
        .into_iter()
        .map(|r| {
            let e = r.entry;
            AuditLine {
                at: time(e.at_ms),
                outcome_class: match e.outcome.as_str() {
                    "ok" | "created" => "ok",
                    "denied" | "refused" | "invalid" => "bad",
                    _ => "other",
                },
                token: e.token_id,
                action: e.action,
                target: e.target,
                project: e.project.unwrap_or_default(),
                client: e.client.unwrap_or_default(),
                outcome: e.outcome,
                detail: e.detail.unwrap_or_default(),
            }
        })
        .collect();
    html(&AuditPage { nav: Nav::new(&v, "Audit log", "/audit", 0), token, action, entries, older })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proposal_reads_as_its_headline_figures_and_changes() {
        let p = weir_api::Proposal {
            id: 4,
            cluster: "default".into(),
            created_ms: 0,
            base_version: 2,
            state: "proposed".into(),
            summary: serde_json::json!({
                "headline": "verdict keep",
                "validation": [["tier 1 SLO success", "50.0%", "100.0%"]]
            }),
            diff: Some(weir_api::PlanDiff {
                cluster: "default".into(),
                base_version: 2,
                version: None,
                applied: false,
                queues: vec![weir_api::SettingChange {
                    queue: "root.a".into(),
                    field: "weight".into(),
                    from: "1".into(),
                    to: "3".into(),
                }],
                routes: vec![],
                history_ms: None,
                warnings: vec![],
            }),
        };
        let v = proposal_view(&p);
        assert_eq!(v.headline, "verdict keep");
        assert_eq!(v.validation[0].planned, "100.0%");
        assert_eq!(v.changes, ["root.a weight: 1 → 3"]);
    }
}
