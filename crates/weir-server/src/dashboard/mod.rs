//! The web dashboard, served by `weir serve` at `/`: server-rendered pages (askama templates,
//! checked at compile time) over the same store reads as the API, with one small script
//! (`static/weir.js`, no dependencies) that refreshes a page's `<main>` in place and tails
//! task logs.
//!
//! Authentication is by session. The login page takes a token once and checks it; the server
//! then keeps a session — a random id mapped, in the store, to the token's hash, expiring after
//! `ServerConfig::session_lifetime` and ended by logging out or by revoking the token — and the
//! browser keeps only the session id, in an `HttpOnly`, `SameSite=Strict`, `Path=/` cookie
//! (`Secure` when served over TLS). The token itself never goes into a cookie. The login form is
//! protected from cross-site requests by a nonce kept both in a short-lived cookie and in the
//! form (double submit), so another site cannot log a visitor in as someone else.
//! The session also authenticates the API's GET requests (what the log tail reads) but never a
//! request that changes anything; the dashboard's own forms carry a token derived from the
//! session id, checked before any change.
//! A token's grants decide what a page shows: a viewer of a project sees only its runs and
//! queues; routes and clusters are editable by global admins only.
//!
//! Like the API, the dashboard is service layer: it reads the store (and the queue snapshots
//! the engine actors publish) and never touches an engine or a backend.

mod admin;
mod advice;
mod dag;
mod grid;
mod migrations;
mod nodes;
mod pages;
mod reports;
mod run;
mod session;
mod usage_by;
pub(crate) mod views;

use askama::Template;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use subtle::ConstantTimeEq;
use weir_api::Role;

use crate::auth::Principal;
use crate::error::ApiError;
use crate::state::AppState;
use crate::time::now_ms;

pub use session::{cookie_for_reads, visitor};

const CSS: &str = include_str!("../../static/weir.css");
const JS: &str = include_str!("../../static/weir.js");

/// Pages, their assets, login and logout.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/", get(pages::overview))
        .route("/login", get(session::login_page).post(session::login))
        .route("/logout", post(session::logout))
        .route("/queues", get(pages::queues))
        .route("/nodes", get(nodes::nodes))
        .route("/runs", get(pages::runs))
        .route("/runs/{id}", get(run::run))
        .route("/runs/{id}/logs/{task}", get(run::logs))
        .route("/runs/{id}/kill", post(run::kill))
        .route("/runs/{id}/retry", post(run::retry))
        .route("/grid", get(grid::grid_page))
        .route("/slo", get(reports::slo))
        .route("/usage", get(reports::usage))
        .route("/usage/by", get(usage_by::usage_by))
        .route("/routes", get(admin::routes).post(admin::put_route))
        .route("/routes/delete", post(admin::delete_route))
        .route("/clusters", get(admin::clusters))
        .route("/clusters/{name}", post(admin::put_cluster))
        .route("/clusters/{name}/history", get(admin::history).post(admin::rollback))
        .route("/audit", get(admin::audit))
        .route("/migrations", get(migrations::migrations).post(migrations::approve))
        .route("/advice", get(advice::advice))
        .route("/advice/move", post(advice::make))
        .route("/advice/now", post(advice::now))
        .route("/static/weir.css", get(|| async { asset("text/css; charset=utf-8", CSS) }))
        .route("/static/weir.js", get(|| async { asset("text/javascript; charset=utf-8", JS) }))
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type), (header::CACHE_CONTROL, "no-cache")], body).into_response()
}

/// A signed-in visitor.
pub struct Visitor {
    pub principal: Principal,
    pub csrf: String,
}

impl Visitor {
    pub fn is_admin(&self) -> bool {
        self.principal.is_global_admin()
    }

    /// Whether the visitor may read what belongs to `project`.
    pub fn reads(&self, project: &str) -> bool {
        self.principal.can(project, Role::Viewer)
    }

    /// Whether the visitor sees everything (a viewer of `*` or more).
    pub fn reads_all(&self) -> bool {
        self.principal.can_all(Role::Viewer)
    }

    /// Why a submitted form may change nothing, if it may not: its token is not the one the
    /// dashboard gave this visitor (a stale or forged form), or it needs a global admin.
    pub fn refuse_form(&self, csrf: &str, admin_only: bool) -> Option<Response> {
        if !bool::from(self.csrf.as_bytes().ct_eq(csrf.as_bytes())) {
            return Some(page_error(
                StatusCode::FORBIDDEN,
                "this form is stale or was not sent by the dashboard; reload the page",
            ));
        }
        if admin_only && !self.is_admin() {
            return Some(page_error(
                StatusCode::FORBIDDEN,
                &format!("token {} is not a global admin", self.principal.token_id),
            ));
        }
        None
    }
}

/// The navigation bar and page frame every page template gets.
pub struct Nav {
    pub title: String,
    pub tabs: Vec<Tab>,
    pub who: String,
    pub csrf: String,
    /// Seconds between live refreshes of `<main>`; 0: none.
    pub refresh: u32,
    pub now: String,
}

pub struct Tab {
    pub href: &'static str,
    pub label: &'static str,
    pub active: bool,
}

impl Nav {
    pub fn new(v: &Visitor, title: impl Into<String>, active: &str, refresh: u32) -> Nav {
        let tabs = [
            ("/", "Overview"),
            ("/queues", "Queues"),
            ("/nodes", "Nodes"),
            ("/runs", "Runs"),
            ("/grid", "Grid"),
            ("/slo", "SLO"),
            ("/usage", "Usage"),
            ("/routes", "Routes"),
            ("/clusters", "Clusters"),
            ("/migrations", "Migrations"),
            ("/advice", "Advice"),
            ("/audit", "Audit"),
        ]
        .into_iter()
        .filter(|(href, _)| *href != "/audit" || v.is_admin())
        .filter(|(href, _)| !matches!(*href, "/nodes" | "/advice") || v.reads_all())
        .map(|(href, label)| Tab { href, label, active: href == active })
        .collect();
        let role = if v.is_admin() {
            "admin"
        } else if v.reads_all() {
            "viewer of all projects"
        } else {
            "project access"
        };
        Nav {
            title: title.into(),
            tabs,
            who: format!("token {} · {role}", v.principal.token_id),
            csrf: v.csrf.clone(),
            refresh,
            now: views::time(now_ms()),
        }
    }
}

/// Render a template as a page.
pub fn html<T: Template>(t: &T) -> Response {
    match t.render() {
        Ok(body) => page(StatusCode::OK, body),
        Err(e) => page_error(StatusCode::INTERNAL_SERVER_ERROR, &format!("cannot render the page: {e}")),
    }
}

fn page(status: StatusCode, body: String) -> Response {
    (
        status,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; script-src 'self'; \
                 frame-ancestors 'none'; form-action 'self'",
            ),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        body,
    )
        .into_response()
}

#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage<'a> {
    status: u16,
    message: &'a str,
}

/// A plain page that says what went wrong.
pub fn page_error(status: StatusCode, message: &str) -> Response {
    let body = ErrorPage { status: status.as_u16(), message }
        .render()
        .unwrap_or_else(|_| format!("{} {message}", status.as_u16()));
    page(status, body)
}

/// An API error as a page.
pub fn api_error(e: ApiError) -> Response {
    page_error(e.status, &e.body.error.message)
}
