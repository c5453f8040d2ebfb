//! The checks every request passes before any route sees it, in this order:
//!
//! 1. `Host` names this server on a loopback name (`127.0.0.1:PORT`, `localhost:PORT`,
//!    `[::1]:PORT`) or a trusted host (`--trusted-host NAME`: `NAME:PORT`), else 403
//!    `forbidden_host`: a page on another site cannot reach the server through a name it
//!    rebinds to 127.0.0.1 (DNS rebinding).
//!    A server listening beyond loopback also accepts the address it listens on.
//! 2. A request with an `Origin` comes from the server's own origin (its scheme, `http://` or
//!    `https://`, and one of those hosts), else 403 `forbidden_origin`: another site's page
//!    cannot post to it (CSRF).
//! 3. The token: `Authorization: Bearer TOKEN` or the `keel_token` cookie, else 401
//!    `unauthorized`. `GET /?token=TOKEN` (the URL `keel serve` prints) sets that cookie
//!    (HttpOnly, SameSite=Strict, and Secure over TLS) and redirects to `/`.

use crate::{ApiError, App};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// The cookie that carries the token for a browser.
pub const COOKIE: &str = "keel_token";

/// The security middleware (see the module documentation).
pub(crate) async fn guard(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    let headers = req.headers();
    let Some(host) = header_str(headers, header::HOST) else {
        return forbidden(
            "forbidden_host",
            "the request has no Host header".to_owned(),
        );
    };
    if !is_own_host(host, app.port, &app.trusted_hosts) {
        return forbidden(
            "forbidden_host",
            format!(
                "Host {host} is not this server's (a loopback name or a trusted host, with port \
                 {})",
                app.port
            ),
        );
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("");
        let own = origin
            .strip_prefix(app.scheme)
            .and_then(|rest| rest.strip_prefix("://"))
            .is_some_and(|host| is_own_host(host, app.port, &app.trusted_hosts));
        if !own {
            return forbidden(
                "forbidden_origin",
                format!("requests from origin {origin:?} are refused: only this server's own"),
            );
        }
    }
    if req.uri().path() == "/"
        && let Some(given) = query_token(req.uri().query())
    {
        if !same(given.as_bytes(), app.token.as_bytes()) {
            return unauthorized();
        }
        let secure = if app.scheme == "https" {
            "; Secure"
        } else {
            ""
        };
        let cookie = format!(
            "{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/{secure}",
            app.token
        );
        return (
            StatusCode::SEE_OTHER,
            [
                (header::LOCATION, "/".to_owned()),
                (header::SET_COOKIE, cookie),
            ],
        )
            .into_response();
    }
    match presented_token(headers) {
        Some(given) if same(given.as_bytes(), app.token.as_bytes()) => next.run(req).await,
        // A browser opening the app without the cookie: a page that says where the URL is.
        _ if req.uri().path() == "/" && crate::web::wants_html(headers) => crate::web::no_token(),
        _ => unauthorized(),
    }
}

fn forbidden(code: &'static str, message: String) -> Response {
    ApiError::new(StatusCode::FORBIDDEN, code, message).into_response()
}

fn unauthorized() -> Response {
    let mut response = ApiError::new(
        StatusCode::UNAUTHORIZED,
        "unauthorized",
        "a token is required: `Authorization: Bearer TOKEN` or the cookie that the URL \
         `keel serve` printed sets",
    )
    .into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer"),
    );
    response
}

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    headers.get(name)?.to_str().ok()
}

/// Whether `host` (a `Host` header, or an origin without its scheme) names this server: a
/// loopback name or one of `trusted` (lowercase host names), with exactly `port`.
pub fn is_own_host(host: &str, port: u16, trusted: &[String]) -> bool {
    let Some((name, p)) = host.rsplit_once(':') else {
        return false;
    };
    let name = name.to_ascii_lowercase();
    p.parse::<u16>().ok() == Some(port)
        && (matches!(name.as_str(), "127.0.0.1" | "localhost" | "[::1]") || trusted.contains(&name))
}

/// How `ip` appears in a `Host` header (an IPv6 address in brackets).
pub fn address_host(ip: std::net::IpAddr) -> String {
    match ip {
        std::net::IpAddr::V4(v4) => v4.to_string(),
        std::net::IpAddr::V6(v6) => format!("[{v6}]"),
    }
}

/// `name` as a trusted host: lowercased, when it is a host name (letters, digits, `-`, `.`).
pub fn trusted_host(name: &str) -> Option<String> {
    let ok = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
    ok.then(|| name.to_ascii_lowercase())
}

/// The token a request presents: its bearer token, else its `keel_token` cookie.
fn presented_token(headers: &HeaderMap) -> Option<&str> {
    if let Some(auth) = header_str(headers, header::AUTHORIZATION) {
        return auth.strip_prefix("Bearer ").map(str::trim);
    }
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| pair.trim().strip_prefix(COOKIE)?.strip_prefix('='))
}

/// The `token` parameter of a query string.
fn query_token(query: Option<&str>) -> Option<&str> {
    query?
        .split('&')
        .find_map(|pair| pair.strip_prefix("token="))
}

/// Compare in time independent of where the bytes differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_hosts_are_loopback_names_with_the_port() {
        let none: &[String] = &[];
        assert!(is_own_host("127.0.0.1:8080", 8080, none));
        assert!(is_own_host("localhost:8080", 8080, none));
        assert!(is_own_host("LOCALHOST:8080", 8080, none));
        assert!(is_own_host("[::1]:8080", 8080, none));
        assert!(!is_own_host("127.0.0.1:8081", 8080, none));
        assert!(!is_own_host("127.0.0.1", 8080, none));
        assert!(!is_own_host("evil.example:8080", 8080, none));
        assert!(!is_own_host("localhost.evil.example:8080", 8080, none));
        let trusted = [trusted_host("Keel.Local").unwrap()];
        assert!(is_own_host("keel.local:8080", 8080, &trusted));
        assert!(is_own_host("KEEL.local:8080", 8080, &trusted));
        assert!(!is_own_host("keel.local:8081", 8080, &trusted));
        assert!(!is_own_host("evil.keel.local:8080", 8080, &trusted));
        let v6 = address_host("fd00::5".parse().unwrap());
        assert_eq!(v6, "[fd00::5]");
        assert!(is_own_host("[FD00::5]:8080", 8080, &[v6]));
        assert_eq!(address_host("10.0.0.5".parse().unwrap()), "10.0.0.5");
        assert_eq!(trusted_host("a/b"), None);
        assert_eq!(trusted_host("a:1"), None);
        assert_eq!(trusted_host(""), None);
    }

    #[test]
    fn tokens_come_from_bearer_or_cookie() {
        let mut h = HeaderMap::new();
        h.insert(header::COOKIE, "a=b; keel_token=xyz; c=d".parse().unwrap());
        assert_eq!(presented_token(&h), Some("xyz"));
        h.insert(header::AUTHORIZATION, "Bearer abc".parse().unwrap());
        assert_eq!(presented_token(&h), Some("abc"));
        assert_eq!(query_token(Some("x=1&token=t")), Some("t"));
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"ab"));
    }
}
