//! Dashboard sessions: the login page (with its nonce against login CSRF), logging in and out,
//! the session cookie, the visitor a session stands for, and the session's way into the API's
//! reads. The store keeps the session (its id's hash → the token's hash, with an expiry); the
//! browser keeps only the id.

use askama::Template;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::{api_error, page, page_error, Visitor};
use crate::auth::hash_token;
use crate::state::{AppState, Audit};
use crate::time::now_ms;

/// The cookie that carries the session id.
const COOKIE: &str = "weir_session";
/// The cookie that carries the login form's nonce (only to `/login`).
const LOGIN_COOKIE: &str = "weir_login";
/// The cookie in which earlier releases kept the token itself: expired at every login and
/// logout, so that no browser keeps a token in a cookie after an upgrade.
const LEGACY_TOKEN_COOKIE: &str = "weir_token";
/// How long a login form may be left open.
const LOGIN_FORM_SECONDS: u32 = 1800;

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
pub(super) async fn login_page(State(s): State<AppState>, q: axum::extract::Query<LoginQuery>) -> Response {
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
pub(super) async fn login(
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
    for (name, path) in [(LOGIN_COOKIE, "/login"), (LEGACY_TOKEN_COOKIE, "/")] {
        if let Some(v) = set_cookie(&s, name, "", path, 0) {
            h.append(header::SET_COOKIE, v);
        }
    }
    r
}

#[derive(Deserialize)]
pub struct CsrfForm {
    csrf: String,
}

/// Ends the session (with the form's token; a forged logout is refused) and clears the cookie.
pub(super) async fn logout(
    State(s): State<AppState>,
    headers: HeaderMap,
    Form(f): Form<CsrfForm>,
) -> Response {
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
    for name in [COOKIE, LEGACY_TOKEN_COOKIE] {
        if let Some(v) = set_cookie(&s, name, "", "/", 0) {
            r.headers_mut().append(header::SET_COOKIE, v);
        }
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
