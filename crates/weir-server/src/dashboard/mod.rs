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
mod dag;
mod pages;
mod reports;
mod run;
pub(crate) mod views;

use askama::Template;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Form, Router};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use weir_api::Role;

use crate::auth::{hash_token, Principal};
use crate::error::ApiError;
use crate::state::{AppState, Audit};
use crate::time::now_ms;

/// The cookie that carries the session id.
const COOKIE: &str = "weir_session";
/// The cookie that carries the login form's nonce (only to `/login`).
const LOGIN_COOKIE: &str = "weir_login";
/// How long a login form may be left open.
const LOGIN_FORM_SECONDS: u32 = 1800;

const CSS: &str = include_str!("../../static/weir.css");
const JS: &str = include_str!("../../static/weir.js");

/// Pages, their assets, login and logout.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/", get(pages::overview))
        .route("/login", get(login_page).post(login))
        .route("/logout", post(logout))
        .route("/queues", get(pages::queues))
        .route("/runs", get(pages::runs))
        .route("/runs/{id}", get(run::run))
        .route("/runs/{id}/logs/{task}", get(run::logs))
        .route("/slo", get(reports::slo))
        .route("/usage", get(reports::usage))
        .route("/routes", get(admin::routes).post(admin::put_route))
        .route("/routes/delete", post(admin::delete_route))
        .route("/clusters", get(admin::clusters))
        .route("/clusters/{name}", post(admin::put_cluster))
        .route("/audit", get(admin::audit))
        .route("/static/weir.css", get(|| async { asset("text/css; charset=utf-8", CSS) }))
        .route("/static/weir.js", get(|| async { asset("text/javascript; charset=utf-8", JS) }))
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type), (header::CACHE_CONTROL, "no-cache")], body).into_response()
}

/// `/v1` GET requests without an `Authorization` header may authenticate with the dashboard's
/// session (the log tail's `fetch`); anything that changes state must send the header. The
/// session's token hash travels to the authenticator in an internal header, which is first
/// removed from every request, so no client can send it.
pub async fn cookie_for_reads(State(s): State<AppState>, mut req: Request, next: Next) -> Response {
    req.headers_mut().remove(crate::auth::SESSION_TOKEN_HASH);
    let read = matches!(*req.method(), Method::GET | Method::HEAD);
    if read && req.uri().path().starts_with("/v1/") && !req.headers().contains_key(header::AUTHORIZATION) {
        if let Some(id) = cookie(req.headers(), COOKIE) {
            if let Ok(Some(session)) = s.store.session(&hash_token(&id), now_ms()).await {
                if let Ok(v) = HeaderValue::from_str(&session.token_hash) {
                    req.headers_mut().insert(crate::auth::SESSION_TOKEN_HASH, v);
                }
            }
        }
    }
    next.run(req).await
}

/// The value of the cookie `name`, if the request carries a non-empty one.
fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// A `Set-Cookie` value: `HttpOnly; SameSite=Strict` always, `Secure` when the browser reaches
/// the server over TLS.
fn set_cookie(s: &AppState, name: &str, value: &str, path: &str, max_age: u64) -> Option<HeaderValue> {
    let secure = if s.sessions.secure { "; Secure" } else { "" };
    HeaderValue::from_str(&format!(
        "{name}={value}; Path={path}; HttpOnly; SameSite=Strict; Max-Age={max_age}{secure}"
    ))
    .ok()
}

/// The form token for a session: a hash only the cookie's holder can compute.
fn csrf_of(session_id: &str) -> String {
    Sha256::digest(format!("weir-dashboard-form:{session_id}").as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
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

/// The visitor, or a redirect to the login page.
pub async fn visitor(s: &AppState, headers: &HeaderMap) -> Result<Visitor, Response> {
    let Some(id) = cookie(headers, COOKIE) else {
        return Err(Redirect::to("/login").into_response());
    };
    let session = match s.store.session(&hash_token(&id), now_ms()).await {
        Ok(Some(session)) => session,
        Ok(None) => return Err(Redirect::to("/login?expired=1").into_response()),
        Err(e) => return Err(api_error(e.into())),
    };
    match s.auth.principal_by_hash(s.store.as_ref(), session.token_hash).await {
        Ok(principal) => Ok(Visitor { principal, csrf: csrf_of(&id) }),
        Err(e) if e.status == StatusCode::UNAUTHORIZED => {
            Err(Redirect::to("/login?expired=1").into_response())
        }
        Err(e) => Err(page_error(e.status, &e.body.error.message)),
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
            ("/runs", "Runs"),
            ("/slo", "SLO"),
            ("/usage", "Usage"),
            ("/routes", "Routes"),
            ("/clusters", "Clusters"),
            ("/audit", "Audit"),
        ]
        .into_iter()
        .filter(|(href, _)| *href != "/audit" || v.is_admin())
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

#[derive(Template)]
#[template(path = "login.html")]
struct LoginPage {
    message: String,
    nonce: String,
}

#[derive(Deserialize)]
pub struct LoginQuery {
    expired: Option<u8>,
}

/// The login page, with a fresh nonce in its form and in a cookie only `/login` receives.
async fn login_page(State(s): State<AppState>, q: axum::extract::Query<LoginQuery>) -> Response {
    let message = if q.expired.is_some() { "Your session has ended; log in again." } else { "" };
    login_form(&s, StatusCode::OK, message.to_string())
}

fn login_form(s: &AppState, status: StatusCode, message: String) -> Response {
    let Ok(nonce) = crate::auth::random_hex() else {
        return page_error(StatusCode::INTERNAL_SERVER_ERROR, "no randomness for the login form");
    };
    let mut r = match (LoginPage { message, nonce: nonce.clone() }).render() {
        Ok(body) => page(status, body),
        Err(e) => {
            return page_error(StatusCode::INTERNAL_SERVER_ERROR, &format!("cannot render the page: {e}"))
        }
    };
    if let Some(v) = set_cookie(s, LOGIN_COOKIE, &nonce, "/login", LOGIN_FORM_SECONDS.into()) {
        r.headers_mut().append(header::SET_COOKIE, v);
    }
    r
}

#[derive(Deserialize)]
pub struct LoginForm {
    token: String,
    #[serde(default)]
    nonce: String,
}

/// Checks the form's nonce against its cookie (a cross-site form has no cookie: `SameSite`),
/// then the token; starts a session whose id alone goes to the browser.
async fn login(
    State(s): State<AppState>,
    peer: crate::state::Peer,
    headers: HeaderMap,
    Form(f): Form<LoginForm>,
) -> Response {
    let expected = cookie(&headers, LOGIN_COOKIE).unwrap_or_default();
    if expected.is_empty() || !bool::from(expected.as_bytes().ct_eq(f.nonce.as_bytes())) {
        return login_form(
            &s,
            StatusCode::FORBIDDEN,
            "This login form is stale or was not sent by this dashboard; log in again.".into(),
        );
    }
    let token = f.token.trim();
    let principal = match s.auth.principal_of(s.store.as_ref(), token).await {
        Ok(p) => p,
        Err(e) if e.status == StatusCode::UNAUTHORIZED => {
            return login_form(
                &s,
                StatusCode::UNAUTHORIZED,
                format!("{} — check the token and try again.", e.body.error.message),
            );
        }
        Err(e) => return api_error(e),
    };
    let Ok(id) = crate::auth::random_hex() else {
        return page_error(StatusCode::INTERNAL_SERVER_ERROR, "no randomness for a session");
    };
    let now = now_ms();
    let lifetime = s.sessions.lifetime.as_millis().min(i64::MAX as u128) as i64;
    let row = weir_store::SessionRow {
        id_hash: hash_token(&id),
        token_hash: hash_token(token),
        created_ms: now,
        expires_ms: now.saturating_add(lifetime),
    };
    if let Err(e) = s.store.create_session(&row).await {
        return api_error(e.into());
    }
    // A login replaces the browser's earlier session rather than leaving it alive beside it.
    if let Some(old) = cookie(&headers, COOKIE) {
        if let Err(e) = s.store.delete_session(&hash_token(&old)).await {
            eprintln!("weir serve: cannot end a replaced dashboard session: {e}");
        }
    }
    s.audit(&principal.token_id, "login", "dashboard".into(), "ok", Audit::from(&peer)).await;
    let mut r = Redirect::to("/").into_response();
    let h = r.headers_mut();
    if let Some(v) = set_cookie(&s, COOKIE, &id, "/", s.sessions.lifetime.as_secs()) {
        h.append(header::SET_COOKIE, v);
    }
    if let Some(v) = set_cookie(&s, LOGIN_COOKIE, "", "/login", 0) {
        h.append(header::SET_COOKIE, v);
    }
    r
}

#[derive(Deserialize)]
pub struct CsrfForm {
    csrf: String,
}

/// Ends the session (with the form's token; a forged logout is refused) and clears the cookie.
async fn logout(State(s): State<AppState>, headers: HeaderMap, Form(f): Form<CsrfForm>) -> Response {
    if let Ok(v) = visitor(&s, &headers).await {
        if let Some(r) = v.refuse_form(&f.csrf, false) {
            return r;
        }
        if let Some(id) = cookie(&headers, COOKIE) {
            if let Err(e) = s.store.delete_session(&hash_token(&id)).await {
                return api_error(e.into());
            }
        }
    }
    let mut r = Redirect::to("/login").into_response();
    if let Some(v) = set_cookie(&s, COOKIE, "", "/", 0) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cookie_is_found_among_others() {
        let mut h = HeaderMap::new();
        h.insert(header::COOKIE, HeaderValue::from_static("a=1; weir_session=abc ; b=2"));
        assert_eq!(cookie(&h, COOKIE).as_deref(), Some("abc"));
        h.insert(header::COOKIE, HeaderValue::from_static("weir_session="));
        assert_eq!(cookie(&h, COOKIE), None);
    }

    #[test]
    fn form_tokens_depend_on_the_session() {
        assert_eq!(csrf_of("a"), csrf_of("a"));
        assert_ne!(csrf_of("a"), csrf_of("b"));
        assert_eq!(csrf_of("a").len(), 64);
    }
}
