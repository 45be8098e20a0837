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
    /// The API's address is taken or not allowed.
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
    /// A file or folder of the data directory.
    #[error("cannot {action} {path}: {source}")]
    Io { action: &'static str, path: PathBuf, source: std::io::Error },
}

/// An API error: status, code, message and maybe the offending field.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub body: ErrorBody,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            body: ErrorBody {
                error: ErrorDetail {
                    code: code.to_string(),
                    message: message.into(),
                    field: None,
                    existing_run: None,
                },
            },
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

    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
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
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", format!("{e}; nothing was changed"))
        } else {
            ApiError::internal(e.to_string())
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(self.body)).into_response()
    }
}
