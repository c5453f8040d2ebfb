//! OAuth 2.1 for streamable HTTP servers (the MCP authorization spec, 2025-06-18 and
//! 2025-11-25): discovery (the server's `401` challenge or its protected resource metadata →
//! the authorization server's metadata), dynamic client registration, the authorization code
//! grant with PKCE (S256) on a loopback redirect (`127.0.0.1`), refresh, and the token store.
//!
//! Tokens live in `$KEEL_HOME/mcp/oauth/<hash of the server URL>.json` (directory 0700, file
//! 0600) and are **bound to the server URL they were issued for**: a server is sent a stored
//! token only when its configured `url` is exactly that URL, so a project's configuration
//! cannot name another server under a known name and get the token sent elsewhere. Refresh
//! uses the token endpoint recorded at login, not one discovered again.
//!
//! Only `keel mcp login` opens a browser and waits; connecting (`keel run`, the UI) uses a
//! stored token, refreshes it when it has expired, and otherwise fails at once with a hint.
//!
//! The parts: [`store`] keeps tokens (bound to their URL, private files), [`discovery`] finds the
//! authorization server and its endpoints, [`token`] asks the token endpoint (refresh, and what
//! connecting uses), [`login`] registers a client and runs the authorization code grant. This
//! module holds what they share: the error, the HTTP client and reading a bounded answer.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

mod discovery;
mod login;
mod store;
mod token;

pub use discovery::{Discovery, challenge_param, discover};
pub use login::{Browser, Client, login, pkce, register};
pub use store::{StoredToken, TokenStore};
pub use token::{refresh, refresh_stored, usable_token};

/// Largest metadata or token answer read.
const MAX_BODY: usize = 1 << 20;
/// Bytes of an unexpected answer quoted in an error.
const PREVIEW: usize = 200;
/// A token this close to its expiry is refreshed before use.
const EXPIRY_MARGIN: u64 = 30;
/// One request to a metadata, registration or token endpoint.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// What went wrong, naming the server (or endpoint) and what it sent.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// A request failed below HTTP, or timed out.
    #[error("{what}: {why}")]
    Http {
        /// The request.
        what: String,
        /// Why.
        why: String,
    },
    /// An answer keel cannot use.
    #[error("{0}")]
    Bad(String),
    /// The token store.
    #[error("the OAuth token store ({path}): {why}")]
    Store {
        /// The file or directory.
        path: String,
        /// Why.
        why: String,
    },
}

fn bad(text: impl Into<String>) -> AuthError {
    AuthError::Bad(text.into())
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// An HTTP client for the authorization exchanges (no cookies, bounded redirects, a time
/// limit per request).
pub fn http_client() -> Result<reqwest::Client, AuthError> {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::limited(5))
        .timeout(REQUEST_TIMEOUT)
        .build()
        .map_err(|e| AuthError::Http {
            what: "building the HTTP client".into(),
            why: e.to_string(),
        })
}

fn preview(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        return "an empty body".into();
    }
    let mut end = PREVIEW.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let cut = if end < text.len() { "…" } else { "" };
    format!("{:?}", format!("{}{cut}", &text[..end]))
}

fn http_error(what: &str, e: reqwest::Error) -> AuthError {
    let e = e.without_url();
    let mut why = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        let text = s.to_string();
        if !why.contains(&text) {
            why.push_str(": ");
            why.push_str(&text);
        }
        source = s.source();
    }
    if e.is_timeout() {
        why.push_str(" (no answer in time)");
    }
    AuthError::Http {
        what: what.to_owned(),
        why,
    }
}

/// Status, headers and at most [`MAX_BODY`] bytes of an answer.
async fn read(
    what: &str,
    response: reqwest::Response,
) -> Result<(reqwest::StatusCode, reqwest::header::HeaderMap, Vec<u8>), AuthError> {
    let status = response.status();
    let headers = response.headers().clone();
    let mut body = Vec::new();
    let mut response = response;
    while let Some(chunk) = response.chunk().await.map_err(|e| http_error(what, e))? {
        if body.len() + chunk.len() > MAX_BODY {
            return Err(bad(format!(
                "{what}: the answer is larger than {MAX_BODY} bytes"
            )));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((status, headers, body))
}
