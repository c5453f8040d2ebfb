//! Login: dynamic client registration, PKCE, and the authorization code grant on a loopback
//! redirect (`127.0.0.1`), ending in a stored token.

use super::token::{Secret, token_request};
use super::{
    AuthError, StoredToken, TokenStore, bad, discover, http_client, http_error, preview, read,
};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngCore as _;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use std::time::Duration;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use url::Url;

/// A client registered for `redirect_uri`.
#[derive(Debug, Clone)]
pub struct Client {
    /// Its id.
    pub id: String,
    /// Its secret, when the server issued one.
    pub secret: Option<String>,
    /// How the secret is sent (the registration's `token_endpoint_auth_method`).
    pub auth_method: Option<String>,
}

/// Dynamic client registration (RFC 7591) at `registration_endpoint`.
pub async fn register(
    client: &reqwest::Client,
    name: &str,
    registration_endpoint: &str,
    redirect_uri: &str,
    scope: Option<&str>,
) -> Result<Client, AuthError> {
    let what = format!("MCP server '{name}': client registration ({registration_endpoint})");
    let mut body = json!({
        "client_name": "keel",
        "application_type": "native",
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    });
    if let Some(scope) = scope {
        body["scope"] = json!(scope);
    }
    let response = client
        .post(registration_endpoint)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json")
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| http_error(&what, e))?;
    let (status, _, body) = read(&what, response).await?;
    if !status.is_success() {
        return Err(bad(format!("{what} answered {status}: {}", preview(&body))));
    }
    let answer: Value = serde_json::from_slice(&body).map_err(|_| {
        bad(format!(
            "{what}: the answer is not JSON: {}",
            preview(&body)
        ))
    })?;
    let Some(id) = answer.get("client_id").and_then(Value::as_str) else {
        return Err(bad(format!(
            "{what}: the answer has no `client_id`: {}",
            preview(&body)
        )));
    };
    Ok(Client {
        id: id.to_owned(),
        secret: answer
            .get("client_secret")
            .and_then(Value::as_str)
            .map(str::to_owned),
        auth_method: answer
            .get("token_endpoint_auth_method")
            .and_then(Value::as_str)
            .map(str::to_owned),
    })
}

/// A PKCE pair: the verifier and its S256 challenge.
pub fn pkce() -> (String, String) {
    let mut bytes = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    let verifier = URL_SAFE_NO_PAD.encode(bytes);
    let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
    (verifier, challenge)
}

fn random_state() -> String {
    let mut bytes = [0u8; 16];
    rand::thread_rng().fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

/// How `login` shows the person the authorization URL.
pub trait Browser: Send + Sync {
    /// Show or open `url`.
    fn open(&self, url: &str);
}

/// The whole login (see the module docs): discovery, registration, the authorization code on
/// a loopback redirect (waiting at most `wait` for it), the token, stored.
pub async fn login(
    store: &TokenStore,
    name: &str,
    server_url: &str,
    browser: &dyn Browser,
    wait: Duration,
) -> Result<StoredToken, AuthError> {
    let client = http_client()?;
    let found = discover(&client, name, server_url).await?;
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .map_err(|e| bad(format!("cannot listen on 127.0.0.1 for the redirect: {e}")))?;
    let port = listener
        .local_addr()
        .map_err(|e| bad(format!("cannot listen on 127.0.0.1 for the redirect: {e}")))?
        .port();
    let redirect_uri = format!("http://127.0.0.1:{port}/callback");
    let Some(registration) = found.registration_endpoint.as_deref() else {
        return Err(bad(format!(
            "MCP server '{name}': its authorization server {} offers no dynamic client registration, which keel needs to log in",
            found.issuer
        )));
    };
    let registered = register(
        &client,
        name,
        registration,
        &redirect_uri,
        found.scope.as_deref(),
    )
    .await?;
    let (verifier, challenge) = pkce();
    let state = random_state();
    let mut url = Url::parse(&found.authorization_endpoint)
        .map_err(|e| bad(format!("authorization endpoint: {e}")))?;
    {
        let mut q = url.query_pairs_mut();
        q.append_pair("response_type", "code")
            .append_pair("client_id", &registered.id)
            .append_pair("redirect_uri", &redirect_uri)
            .append_pair("code_challenge", &challenge)
            .append_pair("code_challenge_method", "S256")
            .append_pair("state", &state)
            .append_pair("resource", &found.resource);
        if let Some(scope) = found.scope.as_deref() {
            q.append_pair("scope", scope);
        }
    }
    browser.open(url.as_str());
    let (code, iss) = tokio::time::timeout(wait, receive_code(&listener, &state, name))
        .await
        .map_err(|_| {
            bad(format!(
                "MCP server '{name}': no authorization came back to {redirect_uri} within {} s",
                wait.as_secs()
            ))
        })??;
    // RFC 9207: a present `iss` must be the issuer exactly; an advertised one must be present.
    match iss.as_deref() {
        Some(iss) if iss != found.issuer => {
            return Err(bad(format!(
                "MCP server '{name}': the authorization response came from issuer {iss:?}, not {:?}; it was rejected",
                found.issuer
            )));
        }
        None if found.iss_supported => {
            return Err(bad(format!(
                "MCP server '{name}': the authorization server {} says its responses carry `iss`, and this one did not; it was rejected",
                found.issuer
            )));
        }
        _ => {}
    }
    let form = [
        ("grant_type", "authorization_code"),
        ("code", code.as_str()),
        ("redirect_uri", redirect_uri.as_str()),
        ("client_id", registered.id.as_str()),
        ("code_verifier", verifier.as_str()),
        ("resource", found.resource.as_str()),
    ];
    let secret = registered.secret.as_deref().map(|secret| Secret {
        id: &registered.id,
        secret,
        method: registered.auth_method.as_deref(),
    });
    let (access, refresh_token, expires_at, scope) =
        token_request(&client, name, &found.token_endpoint, &form, secret).await?;
    let token = StoredToken {
        server_url: server_url.to_owned(),
        access_token: access,
        refresh_token,
        expires_at,
        scope: scope.or(found.scope),
        token_endpoint: found.token_endpoint,
        client_id: registered.id,
        client_secret: registered.secret,
        token_endpoint_auth_method: registered.auth_method,
        issuer: Some(found.issuer),
    };
    store.save(&token)?;
    Ok(token)
}

/// Wait on `listener` for the redirect carrying `state`; other requests get a 404.
async fn receive_code(
    listener: &tokio::net::TcpListener,
    state: &str,
    name: &str,
) -> Result<(String, Option<String>), AuthError> {
    loop {
        let (mut stream, _) = listener
            .accept()
            .await
            .map_err(|e| bad(format!("the redirect listener failed: {e}")))?;
        let mut buf = Vec::with_capacity(1024);
        let mut chunk = [0u8; 1024];
        let head = loop {
            let read = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut chunk)).await;
            match read {
                Ok(Ok(0)) | Err(_) | Ok(Err(_)) => break None,
                Ok(Ok(n)) => {
                    buf.extend_from_slice(&chunk[..n]);
                    if buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        break Some(String::from_utf8_lossy(&buf).into_owned());
                    }
                    if buf.len() > 16 * 1024 {
                        break None;
                    }
                }
            }
        };
        let Some(head) = head else { continue };
        let target = head.split_whitespace().nth(1).unwrap_or("/");
        let Ok(url) = Url::parse(&format!("http://127.0.0.1{target}")) else {
            continue;
        };
        if url.path() != "/callback" {
            let _ = stream
                .write_all(
                    b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                )
                .await;
            continue;
        }
        let param = |key: &str| {
            url.query_pairs()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.into_owned())
        };
        let (page, outcome) = if param("state").as_deref() != Some(state) {
            (
                "The answer did not match this login (state); it was ignored.",
                None,
            )
        } else if let Some(error) = param("error") {
            let description = param("error_description").unwrap_or_default();
            (
                "The authorization server refused; see the terminal.",
                Some(Err(bad(format!(
                    "MCP server '{name}': the authorization server answered error={error:?} {description}"
                ).trim_end().to_owned()))),
            )
        } else if let Some(code) = param("code") {
            (
                "keel is logged in. You may close this page.",
                Some(Ok((code, param("iss")))),
            )
        } else {
            (
                "The redirect carried no code; see the terminal.",
                Some(Err(bad(format!(
                    "MCP server '{name}': the redirect carried neither a code nor an error"
                )))),
            )
        };
        let body = format!("<!doctype html><title>keel</title><p>{page}</p>\n");
        let _ = stream
            .write_all(
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                )
                .as_bytes(),
            )
            .await;
        if let Some(outcome) = outcome {
            return outcome;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pkce_challenge_is_the_s256_of_the_verifier() {
        let (v, c) = pkce();
        assert_eq!(v.len(), 43);
        assert_eq!(c, URL_SAFE_NO_PAD.encode(Sha256::digest(v.as_bytes())));
    }
}
