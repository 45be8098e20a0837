//! The migration table: each dry-run's verdict (viewers of its project), and the approval that
//! moves a workflow to the cluster its dry-run ran on (global admins; the same store write and
//! audit as the API's `POST /v1/migrations/{workflow}/approve`).

use askama::Template;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use axum::Form;
use serde::Deserialize;

use super::pages::{signed_in, try_page};
use super::views::time;
use super::{api_error, html, visitor, Nav, Visitor};
use crate::error::ApiError;
use crate::state::{AppState, Peer};

pub struct VerdictLine {
    run_id: i64,
    workflow: String,
    logical_date: String,
    cluster: String,
    queue: String,
    verdict: String,
    at: String,
    approved: String,
    /// The differences, one line each, untolerated first.
    differences: Vec<String>,
    /// Whether an admin may approve this one (not `different`, not approved yet).
    approvable: bool,
}

#[derive(Template)]
#[template(path = "migrations.html")]
struct MigrationsPage {
    nav: Nav,
    admin: bool,
    message: String,
    message_class: String,
    verdicts: Vec<VerdictLine>,
}

fn difference_line(d: &serde_json::Value) -> String {
    let s = |k: &str| d[k].as_str().map(str::to_string).unwrap_or_else(|| d[k].to_string());
    let part = d["partition"].as_str().filter(|p| !p.is_empty()).unwrap_or("(output)");
    let output = d["output"].as_str().filter(|o| !o.is_empty()).map(|o| format!("{o} ")).unwrap_or_default();
    let tolerated = d["tolerated"].as_bool().unwrap_or(false);
    format!(
        "{output}{part}: {}: shadow {}, production {}{}",
        s("what"),
        s("shadow"),
        s("production"),
        if tolerated { " (tolerated)" } else { "" }
    )
}

async fn migrations_page(s: &AppState, v: &Visitor, message: Result<String, String>) -> Response {
    let rows = try_page!(s.store.dry_run_verdicts(None, 200).await.map_err(ApiError::from));
    let verdicts = rows
        .into_iter()
        .filter(|r| v.reads(&r.project))
        .map(|r| {
            let diffs: Vec<serde_json::Value> = serde_json::from_str(&r.differences).unwrap_or_default();
            let mut differences: Vec<(bool, String)> = diffs
                .iter()
                .map(|d| (d["tolerated"].as_bool().unwrap_or(false), difference_line(d)))
                .collect();
            differences.sort_by_key(|(tolerated, _)| *tolerated);
            VerdictLine {
                run_id: r.run_id,
                approvable: r.verdict != "different" && r.approved_ms.is_none(),
                verdict: if r.verdict == "equivalent" {
                    "equivalent within tolerance".into()
                } else {
                    r.verdict
                },
                workflow: r.workflow,
                logical_date: r.logical_date,
                cluster: r.cluster,
                queue: r.queue,
                at: time(r.at_ms),
                approved: match (r.approved_by, r.approved_ms) {
                    (Some(by), Some(at)) => format!("{by}, {}", time(at)),
                    _ => String::new(),
                },
                differences: differences.into_iter().map(|(_, l)| l).collect(),
            }
        })
        .collect();
    let (message, message_class) = match message {
        Ok(m) => (m, "ok".to_string()),
        Err(m) => (m, "error".to_string()),
    };
    html(&MigrationsPage {
        nav: Nav::new(v, "Migrations", "/migrations", 0),
        admin: v.is_admin(),
        message,
        message_class,
        verdicts,
    })
}

pub async fn migrations(State(s): State<AppState>, headers: HeaderMap) -> Response {
    let v = signed_in!(s, headers);
    migrations_page(&s, &v, Ok(String::new())).await
}

#[derive(Deserialize)]
pub struct ApproveForm {
    csrf: String,
    workflow: String,
    cluster: String,
}

pub async fn approve(
    State(s): State<AppState>,
    peer: Peer,
    headers: HeaderMap,
    Form(f): Form<ApproveForm>,
) -> Response {
    let v = signed_in!(s, headers);
    if let Some(r) = v.refuse_form(&f.csrf, true) {
        return r;
    }
    let outcome = match crate::api::migrations::approve(
        &s,
        &v.principal.token_id,
        &peer,
        &f.workflow,
        &f.cluster,
    )
    .await
    {
        Ok(done) => Ok(format!(
            "{} now goes to {}:{} (dry-run run {}, {})",
            done.route.key, done.route.cluster, done.route.queue, done.verdict.run_id, done.verdict.verdict
        )),
        Err(e) => Err(e.body.error.message),
    };
    migrations_page(&s, &v, outcome).await
}
