//! The server's error type, and the API's error answers (`{error: {code, message, field?}}`).

use std::net::SocketAddr;
use std::path::PathBuf;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use weir_api::{ErrorBody, ErrorDetail};
use weir_store::StoreError;

/// Why the server could not start or keep going.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The store could not be opened or used; see the cause.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A cluster file is invalid. Fix it; retrying does not help.
    #[error(transparent)]
    Model(#[from] weir_model::ModelError),
    /// A cluster cannot drive the engine (e.g. a scheduler mode the engine lacks).
    #[error("cluster `{cluster}`: {source}")]
    Engine { cluster: String, source: weir_engine::EngineError },
    /// The execution backend could not be set up.
    #[error(transparent)]
    Backend(#[from] weir_backend::BackendError),
    /// Tasks cannot run as configured (the task user is missing or is root). Fix the machine
    /// or the settings; retrying does not help.
    #[error("{message}")]
    TaskUser { message: String },
    /// The API's address is taken or not allowed.
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
    /// A file or folder of the data directory.
    #[error("cannot {action} {path}: {source}")]
    Io { action: &'static str, path: PathBuf, source: std::io::Error },
    /// The TLS certificate or key file cannot be read or used. Fix the file; retrying does not
    /// help.
    #[error("TLS {what} {path}: {problem}")]
    Tls { what: &'static str, path: PathBuf, problem: String },
}

/// An API error: status, code, message and maybe the offending field.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    /// Boxed: errors travel in every handler's `Result`, which stays small.
    pub body: Box<ErrorBody>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            body: Box::new(ErrorBody {
                error: ErrorDetail {
                    code: code.to_string(),
                    message: message.into(),
                    field: None,
                    existing_run: None,
                    incident: None,
                    retry_after_s: None,
                },
            }),
        }
    }

    pub fn field(mut self, field: impl Into<String>) -> ApiError {
        self.body.error.field = Some(field.into());
        self
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    pub fn invalid(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid", message)
    }

    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    pub fn forbidden(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    pub fn unauthorized(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    pub fn conflict(message: impl Into<String>, existing: i64) -> ApiError {
        let mut e = ApiError::new(StatusCode::CONFLICT, "conflict", message);
        e.body.error.existing_run = Some(existing);
        e
    }

    /// Something went wrong inside the server. The details go to the server's log under an
    /// incident id; the client sees only the id (internal messages may name files, queries or
    /// other tenants' data).
    pub fn internal(message: impl Into<String>) -> ApiError {
        let incident = incident_id();
        eprintln!("weir serve: internal error {incident}: {}", message.into());
        let mut e = ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            format!("internal error {incident}: the details are in the server's log"),
        );
        e.body.error.incident = Some(incident);
        e
    }

    /// Over a rate or a quota: try again in `retry_after_s` seconds (429, `Retry-After`).
    pub fn rate_limited(message: impl Into<String>, retry_after_s: u64) -> ApiError {
        let mut e = ApiError::new(StatusCode::TOO_MANY_REQUESTS, "rate_limited", message);
        e.body.error.retry_after_s = Some(retry_after_s.max(1));
        e
    }

    /// The cluster a submission routes to has an unhealthy backend and its operator said to
    /// refuse rather than queue (503, with a Retry-After).
    pub fn backend_unhealthy(message: impl Into<String>) -> ApiError {
        let mut e = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "backend_unhealthy", message);
        e.body.error.retry_after_s = Some(30);
        e
    }

    /// Not there yet, and soon will be (503, `Retry-After: 1`): e.g. a queue asked for before
    /// its cluster's engine has published anything.
    pub fn not_ready(message: impl Into<String>) -> ApiError {
        let mut e = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "not_ready", message);
        e.body.error.retry_after_s = Some(1);
        e
    }

    /// Well-formed but refused as a whole (422), e.g. an idempotency key reused with another
    /// request.
    pub fn unprocessable(code: &str, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, code, message)
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> ApiError {
        ApiError::from_store(&e)
    }
}

impl ApiError {
    pub fn from_store(e: &StoreError) -> ApiError {
        if e.is_unavailable() {
            eprintln!("weir serve: the store is unavailable: {e}");
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                "the store is unavailable; nothing was changed. Try again later",
            )
        } else {
            ApiError::internal(e.to_string())
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let retry = self.body.error.retry_after_s;
        let mut r = (self.status, axum::Json(*self.body)).into_response();
        if let Some(s) = retry {
            r.headers_mut().insert(axum::http::header::RETRY_AFTER, axum::http::HeaderValue::from(s));
        }
        r
    }
}

/// A short random id for an incident, e.g. `e-3f9a0c12`.
fn incident_id() -> String {
    let mut b = [0u8; 4];
    let _ = getrandom::fill(&mut b);
    format!("e-{}", b.iter().map(|x| format!("{x:02x}")).collect::<String>())
}

/// Every response: `X-Content-Type-Options: nosniff`, and every error the documented JSON shape
/// — axum's own rejections (a bad path parameter, a wrong method, an unsupported media type)
/// answer plain text, which this turns into `{error: {code, message}}` with the same status
/// and message. HTML error pages of the dashboard are left as they are.
pub async fn uniform_responses(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let mut r = next.run(req).await;
    r.headers_mut()
        .insert(axum::http::header::X_CONTENT_TYPE_OPTIONS, axum::http::HeaderValue::from_static("nosniff"));
    let status = r.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return r;
    }
    let content_type =
        r.headers().get(axum::http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    if content_type.starts_with("application/json") || content_type.starts_with("text/html") {
        return r;
    }
    let (parts, body) = r.into_parts();
    let text = axum::body::to_bytes(body, 64 * 1024).await.unwrap_or_default();
    let text = String::from_utf8_lossy(&text).trim().chars().take(500).collect::<String>();
    let code = match status.as_u16() {
        400 => "bad_request",
        401 => "unauthorized",
        403 => "forbidden",
        404 => "not_found",
        405 => "method_not_allowed",
        408 => "timeout",
        413 => "payload_too_large",
        415 => "unsupported_media_type",
        422 => "unprocessable",
        429 => "rate_limited",
        503 => "unavailable",
        s if s >= 500 => "internal",
        _ => "bad_request",
    };
    let message =
        if text.is_empty() { status.canonical_reason().unwrap_or("error").to_lowercase() } else { text };
    let mut out = ApiError::new(status, code, message).into_response();
    for name in [axum::http::header::ALLOW, axum::http::header::RETRY_AFTER] {
        if let Some(v) = parts.headers.get(&name) {
            out.headers_mut().insert(name, v.clone());
        }
    }
    out.headers_mut()
        .insert(axum::http::header::X_CONTENT_TYPE_OPTIONS, axum::http::HeaderValue::from_static("nosniff"));
    out
}
