//! The server's errors: [`ServeError`] when it cannot start or stops serving, [`ApiError`] for
//! one request, answered as `{"error": {"code", "message"}}` with its HTTP status.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use std::net::SocketAddr;

/// Why the server could not start, or stopped serving.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The listen address is beyond loopback, without TLS and without being told that plain
    /// HTTP is meant.
    #[error(
        "{0} is not a loopback address: serving beyond this machine needs TLS (--tls-cert FILE \
         --tls-key FILE), or --insecure-no-tls to send the token and every session in clear"
    )]
    NotLoopback(SocketAddr),
    /// The listen address is a wildcard.
    #[error(
        "keel serve does not listen on a wildcard address ({0}): name one address of this \
         machine (127.0.0.1, or an interface's address with TLS)"
    )]
    Wildcard(SocketAddr),
    /// The certificate or key could not be used.
    #[error("TLS: {}: {why}", path.display())]
    Tls {
        /// The file.
        path: std::path::PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// A trusted host is not a host name.
    #[error("--trusted-host {0:?} is not a host name (letters, digits, `-` and `.`, no port)")]
    TrustedHost(String),
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// Accepting connections failed.
    #[error("serving failed: {0}")]
    Serve(std::io::Error),
}

/// A request's failure: its status, a stable machine-readable code and a message for people.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{status} {code}: {message}")]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// The stable code (`not_found`, `bad_request`, `unauthorized`, …).
    pub code: &'static str,
    /// What went wrong, whole.
    pub message: String,
}

impl ApiError {
    /// An error with `status`, `code` and `message`.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }

    /// 400 `bad_request`.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    /// 404 `not_found`.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// 409 `session_busy`: the session is open for writing in another keel process (one
    /// process writes a session); the message names it and the holder's pid.
    pub fn session_busy(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "session_busy", message)
    }

    /// 500 `internal`.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }

    /// The JSON body.
    pub fn body(&self) -> serde_json::Value {
        serde_json::json!({"error": {"code": self.code, "message": self.message}})
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(self.body())).into_response()
    }
}
