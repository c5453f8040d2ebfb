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

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngCore as _;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use url::Url;

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

/// A token and what is needed to refresh it, as stored.
#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct StoredToken {
    /// The server URL it was issued for (the binding).
    pub server_url: String,
    /// The access token.
    pub access_token: String,
    /// The refresh token, when one was issued.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// Expiry, seconds since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    /// The scope granted (or asked for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// The token endpoint found at login (refresh goes there).
    pub token_endpoint: String,
    /// The client id (registered or configured).
    pub client_id: String,
    /// The client secret, when registration issued one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// How the secret is sent (`client_secret_basic`; otherwise in the form).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_endpoint_auth_method: Option<String>,
    /// The authorization server's issuer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
}

impl std::fmt::Debug for StoredToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredToken")
            .field("server_url", &self.server_url)
            .field("expires_at", &self.expires_at)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

impl StoredToken {
    /// Whether it has expired (or will within [`EXPIRY_MARGIN`] seconds).
    pub fn expired(&self) -> bool {
        self.expires_at
            .is_some_and(|at| now().saturating_add(EXPIRY_MARGIN) >= at)
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The token store under `$KEEL_HOME/mcp/oauth`.
#[derive(Debug, Clone)]
pub struct TokenStore {
    dir: PathBuf,
}

impl TokenStore {
    /// The store of `keel_home`.
    pub fn new(keel_home: &Path) -> Self {
        TokenStore {
            dir: keel_home.join("mcp").join("oauth"),
        }
    }

    /// The file holding the token of `server_url`.
    pub fn path(&self, server_url: &str) -> PathBuf {
        let digest = Sha256::digest(server_url.as_bytes());
        self.dir
            .join(format!("{}.json", hex::encode(&digest[..16])))
    }

    fn store_error(path: &Path, e: impl std::fmt::Display) -> AuthError {
        AuthError::Store {
            path: path.display().to_string(),
            why: e.to_string(),
        }
    }

    /// The token issued for exactly `server_url`, if any.
    pub fn load(&self, server_url: &str) -> Result<Option<StoredToken>, AuthError> {
        let path = self.path(server_url);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Self::store_error(&path, e)),
        };
        let token: StoredToken = serde_json::from_slice(&bytes)
            .map_err(|e| Self::store_error(&path, format!("unreadable ({e})")))?;
        // The binding: a file for another URL (a hash collision, a hand edit) is not used.
        Ok((token.server_url == server_url).then_some(token))
    }

    /// Write `token` (directory 0700, file 0600, replaced atomically).
    pub fn save(&self, token: &StoredToken) -> Result<(), AuthError> {
        std::fs::create_dir_all(&self.dir).map_err(|e| Self::store_error(&self.dir, e))?;
        set_mode(&self.dir, 0o700).map_err(|e| Self::store_error(&self.dir, e))?;
        let path = self.path(&token.server_url);
        let tmp = path.with_extension("json.tmp");
        let bytes = serde_json::to_vec_pretty(token).map_err(|e| Self::store_error(&path, e))?;
        write_private(&tmp, &bytes).map_err(|e| Self::store_error(&tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| Self::store_error(&path, e))
    }

    /// Remove the token of `server_url`; whether there was one.
    pub fn remove(&self, server_url: &str) -> Result<bool, AuthError> {
        let path = self.path(server_url);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(Self::store_error(&path, e)),
        }
    }
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

#[cfg(not(unix))]
fn set_mode(_path: &Path, _mode: u32) -> std::io::Result<()> {
    Ok(())
}

fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    set_mode(path, 0o600)
}

/// What discovery found.
#[derive(Debug, Clone)]
pub struct Discovery {
    /// The authorization server's issuer.
    pub issuer: String,
    /// Whether it says its authorization responses carry `iss` (RFC 9207).
    pub iss_supported: bool,
    /// Its authorization endpoint.
    pub authorization_endpoint: String,
    /// Its token endpoint.
    pub token_endpoint: String,
    /// Its registration endpoint, when it offers dynamic client registration.
    pub registration_endpoint: Option<String>,
    /// The scope to ask for (the challenge's, else the resource's `scopes_supported`).
    pub scope: Option<String>,
    /// The resource the token is for (the protected resource metadata's `resource`, else the
    /// server URL).
    pub resource: String,
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

/// GET `url` as a JSON object: `Ok(None)` for a 404 (or other 4xx), an error for anything
/// else that is not a JSON object.
/// The first of `urls` that answers with a JSON object ([`get_json`]), with its answer.
async fn first_json(
    client: &reqwest::Client,
    urls: &[Url],
    what: &str,
) -> Result<Option<(Url, serde_json::Map<String, Value>)>, AuthError> {
    for url in urls {
        if let Some(meta) = get_json(client, url, what).await? {
            return Ok(Some((url.clone(), meta)));
        }
    }
    Ok(None)
}

async fn get_json(
    client: &reqwest::Client,
    url: &Url,
    what: &str,
) -> Result<Option<serde_json::Map<String, Value>>, AuthError> {
    let what = format!("{what} ({url})");
    let response = client
        .get(url.clone())
        .header("Accept", "application/json")
        .header("MCP-Protocol-Version", "2025-11-25")
        .send()
        .await
        .map_err(|e| http_error(&what, e))?;
    let (status, _, body) = read(&what, response).await?;
    if status.is_client_error() {
        return Ok(None);
    }
    if !status.is_success() {
        return Err(bad(format!("{what} answered {status}: {}", preview(&body))));
    }
    match serde_json::from_slice::<Value>(&body) {
        Ok(Value::Object(map)) => Ok(Some(map)),
        _ => Err(bad(format!(
            "{what} is not a JSON object: {}",
            preview(&body)
        ))),
    }
}

/// A parameter of a `WWW-Authenticate: Bearer …` challenge (quoted or not).
pub fn challenge_param(header: &str, name: &str) -> Option<String> {
    let lower = header.to_ascii_lowercase();
    let needle = format!("{name}=");
    let mut from = 0;
    while let Some(found) = lower[from..].find(&needle) {
        let at = from + found;
        from = at + needle.len();
        // A whole parameter name: preceded by a separator.
        if at > 0 && !matches!(lower.as_bytes()[at - 1], b' ' | b',' | b'\t') {
            continue;
        }
        let value = &header[at + needle.len()..];
        if let Some(quoted) = value.strip_prefix('"') {
            return quoted.find('"').map(|end| quoted[..end].to_owned());
        }
        let end = value
            .find(|c: char| c == ',' || c.is_whitespace())
            .unwrap_or(value.len());
        return (end > 0).then(|| value[..end].to_owned());
    }
    None
}

/// An endpoint from metadata: an absolute URL, https unless it is on this machine.
fn endpoint(
    meta: &serde_json::Map<String, Value>,
    key: &str,
    whose: &str,
) -> Result<Url, AuthError> {
    let Some(value) = meta.get(key) else {
        return Err(bad(format!("{whose} has no `{key}`")));
    };
    let Some(text) = value.as_str() else {
        return Err(bad(format!("{whose}: `{key}` is not a string but {value}")));
    };
    let url = Url::parse(text)
        .map_err(|e| bad(format!("{whose}: `{key}` {text:?} is not a URL ({e})")))?;
    secure(&url).map_err(|why| bad(format!("{whose}: `{key}` {why}")))?;
    Ok(url)
}

/// https, or http on a loopback host.
fn secure(url: &Url) -> Result<(), String> {
    match url.scheme() {
        "https" => Ok(()),
        "http" if is_loopback(url) => Ok(()),
        other => Err(format!(
            "{url} must be https:// (http:// only on this machine), not {other}://"
        )),
    }
}

fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// `origin` + `/.well-known/<name>` + `path` (RFC 8414 / RFC 9728 insertion), with `path`'s
/// trailing slash dropped.
fn well_known(base: &Url, name: &str, with_path: bool) -> Url {
    let mut url = base.clone();
    let path = base.path().trim_end_matches('/');
    let path = if with_path { path } else { "" };
    url.set_path(&format!("/.well-known/{name}{path}"));
    url.set_query(None);
    url.set_fragment(None);
    url
}

/// Ask the server unauthenticated (an `initialize`), to read its challenge: the
/// `resource_metadata` URL and the `scope` of a `401`'s `WWW-Authenticate`.
async fn challenge(
    client: &reqwest::Client,
    server: &Url,
    name: &str,
) -> Result<Option<String>, AuthError> {
    let what = format!(
        "MCP server '{name}' ({})",
        crate::config::redact_url(server.as_str())
    );
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "keel", "version": env!("CARGO_PKG_VERSION")}}
    });
    let response = client
        .post(server.clone())
        .header("Accept", "application/json, text/event-stream")
        .header("Content-Type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| http_error(&what, e))?;
    if response.status() != reqwest::StatusCode::UNAUTHORIZED {
        return Ok(None);
    }
    Ok(response
        .headers()
        .get(reqwest::header::WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned))
}

/// Discover how `server_url` (configured as `name`) is authorized (see the module docs).
pub async fn discover(
    client: &reqwest::Client,
    name: &str,
    server_url: &str,
) -> Result<Discovery, AuthError> {
    let server = Url::parse(server_url)
        .map_err(|e| bad(format!("MCP server '{name}': `url` is not a URL ({e})")))?;
    let shown = crate::config::redact_url(server_url);
    let header = challenge(client, &server, name).await?;
    let challenge_scope = header.as_deref().and_then(|h| challenge_param(h, "scope"));
    // Protected resource metadata: the challenge's URL, else the well-known ones.
    let mut candidates = Vec::new();
    if let Some(h) = header.as_deref()
        && let Some(u) = challenge_param(h, "resource_metadata")
    {
        let url = server.join(&u).map_err(|e| {
            bad(format!(
                "MCP server '{name}' ({shown}) sent resource_metadata={u:?}, which is not a URL ({e})"
            ))
        })?;
        candidates.push(url);
    } else {
        candidates.push(well_known(&server, "oauth-protected-resource", true));
        candidates.push(well_known(&server, "oauth-protected-resource", false));
    }
    let resource_meta = first_json(
        client,
        &candidates,
        &format!("MCP server '{name}': protected resource metadata"),
    )
    .await?;
    let legacy = resource_meta.is_none();
    // The issuer identifier as the resource names it (compared exactly, RFC 8414 §3.3).
    let mut issuer_id: Option<String> = None;
    let (issuer, resource, resource_scopes) = match resource_meta {
        Some((url, meta)) => {
            let whose = format!("MCP server '{name}': protected resource metadata ({url})");
            let servers = meta.get("authorization_servers").and_then(Value::as_array);
            let Some(first) = servers.and_then(|s| s.first()).and_then(Value::as_str) else {
                return Err(bad(format!(
                    "{whose} names no authorization server (`authorization_servers`: {})",
                    meta.get("authorization_servers")
                        .map_or("absent".into(), Value::to_string)
                )));
            };
            let resource = match meta.get("resource") {
                Some(Value::String(r)) => {
                    if !resource_matches(r, &server) {
                        return Err(bad(format!(
                            "{whose}: its `resource` {r:?} is not the server's URL {shown}"
                        )));
                    }
                    r.clone()
                }
                Some(other) => {
                    return Err(bad(format!(
                        "{whose}: `resource` is not a string but {other}"
                    )));
                }
                None => server_url.to_owned(),
            };
            let scopes = meta
                .get("scopes_supported")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .filter(|s| !s.is_empty());
            let issuer = Url::parse(first).map_err(|e| {
                bad(format!(
                    "{whose}: authorization server {first:?} is not a URL ({e})"
                ))
            })?;
            issuer_id = Some(first.to_owned());
            (issuer, resource, scopes)
        }
        // The 2025-03-26 fallback: the server's origin is the authorization server.
        None => {
            let mut origin = server.clone();
            origin.set_path("/");
            origin.set_query(None);
            (origin, server_url.to_owned(), None)
        }
    };
    secure(&issuer).map_err(|why| {
        bad(format!(
            "MCP server '{name}': the authorization server {why}"
        ))
    })?;
    let has_path = !issuer.path().trim_end_matches('/').is_empty();
    let mut tries = vec![well_known(&issuer, "oauth-authorization-server", has_path)];
    if has_path {
        tries.push(well_known(&issuer, "openid-configuration", true));
        let mut appended = issuer.clone();
        appended.set_path(&format!(
            "{}/.well-known/openid-configuration",
            issuer.path().trim_end_matches('/')
        ));
        tries.push(appended);
    } else {
        tries.push(well_known(&issuer, "openid-configuration", false));
    }
    let found = first_json(
        client,
        &tries,
        &format!("MCP server '{name}': authorization server metadata"),
    )
    .await?;
    let Some((url, meta)) = found else {
        if legacy {
            // 2025-03-26: no metadata at all means the default endpoints at the server's origin.
            let at = |path: &str| {
                let mut u = issuer.clone();
                u.set_path(path);
                u.to_string()
            };
            return Ok(Discovery {
                issuer: issuer.to_string(),
                iss_supported: false,
                authorization_endpoint: at("/authorize"),
                token_endpoint: at("/token"),
                registration_endpoint: Some(at("/register")),
                scope: challenge_scope,
                resource,
            });
        }
        return Err(bad(format!(
            "MCP server '{name}': its authorization server {issuer} publishes no metadata (tried {})",
            tries.iter().map(Url::as_str).collect::<Vec<_>>().join(", ")
        )));
    };
    let whose = format!("MCP server '{name}': authorization server metadata ({url})");
    let authorization_endpoint = endpoint(&meta, "authorization_endpoint", &whose)?;
    let token_endpoint = endpoint(&meta, "token_endpoint", &whose)?;
    let registration_endpoint = match meta.get("registration_endpoint") {
        None | Some(Value::Null) => None,
        Some(_) => Some(endpoint(&meta, "registration_endpoint", &whose)?.to_string()),
    };
    // PKCE S256 is required: a server that does not say it supports it is not used.
    let methods = meta.get("code_challenge_methods_supported");
    let s256 = methods
        .and_then(Value::as_array)
        .is_some_and(|m| m.iter().any(|v| v.as_str() == Some("S256")));
    if !s256 {
        return Err(bad(format!(
            "{whose} does not offer PKCE with S256 (`code_challenge_methods_supported`: {}); keel requires it",
            methods.map_or("absent".into(), Value::to_string)
        )));
    }
    let meta_issuer = meta.get("issuer").and_then(Value::as_str);
    if let Some(expected) = issuer_id.as_deref()
        && meta_issuer != Some(expected)
    {
        return Err(bad(format!(
            "{whose}: its `issuer` {} is not the authorization server {expected:?} the resource names; keel does not use it",
            meta_issuer.map_or("(absent)".to_owned(), |i| format!("{i:?}"))
        )));
    }
    let iss_supported = meta
        .get("authorization_response_iss_parameter_supported")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    Ok(Discovery {
        issuer: meta_issuer.unwrap_or(issuer.as_str()).to_owned(),
        iss_supported,
        authorization_endpoint: authorization_endpoint.to_string(),
        token_endpoint: token_endpoint.to_string(),
        registration_endpoint,
        scope: challenge_scope.or(resource_scopes),
        resource,
    })
}

/// Whether a protected resource's `resource` identifies `server`: same origin, and a path
/// that is the server's or one of its parents.
fn resource_matches(resource: &str, server: &Url) -> bool {
    let Ok(r) = Url::parse(resource) else {
        return false;
    };
    if r.origin() != server.origin() {
        return false;
    }
    let rp = r.path().trim_end_matches('/');
    let sp = server.path().trim_end_matches('/');
    sp == rp || sp.starts_with(&format!("{rp}/"))
}

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

/// A client secret and how it is sent.
#[derive(Clone, Copy)]
struct Secret<'a> {
    id: &'a str,
    secret: &'a str,
    method: Option<&'a str>,
}

/// POST a form to the token endpoint and read the token answer.
async fn token_request(
    client: &reqwest::Client,
    name: &str,
    token_endpoint: &str,
    form: &[(&str, &str)],
    secret: Option<Secret<'_>>,
) -> Result<(String, Option<String>, Option<u64>, Option<String>), AuthError> {
    let what = format!("MCP server '{name}': the token endpoint ({token_endpoint})");
    let basic = secret.filter(|s| s.method == Some("client_secret_basic"));
    let body = {
        let mut pairs = url::form_urlencoded::Serializer::new(String::new());
        pairs.extend_pairs(form.iter());
        if let Some(s) = secret
            && basic.is_none()
        {
            pairs.append_pair("client_secret", s.secret);
        }
        pairs.finish()
    };
    let mut request = client
        .post(token_endpoint)
        .header("Content-Type", "application/x-www-form-urlencoded")
        .header("Accept", "application/json")
        .body(body);
    if let Some(s) = basic {
        request = request.basic_auth(s.id, Some(s.secret));
    }
    let response = request.send().await.map_err(|e| http_error(&what, e))?;
    let (status, _, body) = read(&what, response).await?;
    let answer: Option<Value> = serde_json::from_slice(&body).ok();
    if !status.is_success() {
        let error = answer
            .as_ref()
            .and_then(|a| a.get("error"))
            .and_then(Value::as_str);
        let description = answer
            .as_ref()
            .and_then(|a| a.get("error_description"))
            .and_then(Value::as_str);
        return Err(bad(match (error, description) {
            (Some(e), Some(d)) => format!("{what} answered {status}: {e} ({d})"),
            (Some(e), None) => format!("{what} answered {status}: {e}"),
            _ => format!("{what} answered {status}: {}", preview(&body)),
        }));
    }
    let Some(Value::Object(answer)) = answer else {
        return Err(bad(format!(
            "{what}: the answer is not a JSON object: {}",
            preview(&body)
        )));
    };
    let Some(access) = answer
        .get("access_token")
        .and_then(Value::as_str)
        .filter(|t| !t.trim().is_empty())
    else {
        return Err(bad(format!(
            "{what}: the answer has no (or an empty) `access_token` (keys: {})",
            answer.keys().cloned().collect::<Vec<_>>().join(", ")
        )));
    };
    if let Some(kind) = answer.get("token_type").and_then(Value::as_str)
        && !kind.eq_ignore_ascii_case("bearer")
    {
        return Err(bad(format!("{what}: token_type {kind:?} is not Bearer")));
    }
    let expires_at = answer
        .get("expires_in")
        .and_then(|v| {
            v.as_u64()
                .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        })
        .map(|secs| now().saturating_add(secs));
    Ok((
        access.to_owned(),
        answer
            .get("refresh_token")
            .and_then(Value::as_str)
            .map(str::to_owned),
        expires_at,
        answer
            .get("scope")
            .and_then(Value::as_str)
            .map(str::to_owned),
    ))
}

/// A refreshed `token` (its refresh token kept when the server issues no new one).
pub async fn refresh(
    client: &reqwest::Client,
    name: &str,
    token: &StoredToken,
) -> Result<StoredToken, AuthError> {
    let Some(refresh_token) = token.refresh_token.as_deref() else {
        return Err(bad(format!(
            "MCP server '{name}': the stored token expired and has no refresh token; run `keel mcp login {name}`"
        )));
    };
    let mut form = vec![
        ("grant_type", "refresh_token"),
        ("refresh_token", refresh_token),
        ("client_id", token.client_id.as_str()),
        ("resource", token.server_url.as_str()),
    ];
    if let Some(scope) = token.scope.as_deref() {
        form.push(("scope", scope));
    }
    let secret = token.client_secret.as_deref().map(|secret| Secret {
        id: &token.client_id,
        secret,
        method: token.token_endpoint_auth_method.as_deref(),
    });
    let (access, new_refresh, expires_at, scope) =
        token_request(client, name, &token.token_endpoint, &form, secret).await?;
    Ok(StoredToken {
        access_token: access,
        refresh_token: new_refresh.or_else(|| token.refresh_token.clone()),
        expires_at,
        scope: scope.or_else(|| token.scope.clone()),
        ..token.clone()
    })
}

/// What connecting uses: the stored token of `server_url` (refreshed and saved again when it
/// has expired). `Ok(None)`: no token is stored. Never waits for a person.
pub async fn usable_token(
    store: &TokenStore,
    name: &str,
    server_url: &str,
) -> Result<Option<String>, AuthError> {
    let Some(token) = store.load(server_url)? else {
        return Ok(None);
    };
    if !token.expired() {
        return Ok(Some(token.access_token));
    }
    let client = http_client()?;
    let fresh = refresh(&client, name, &token).await.map_err(|e| {
        bad(format!(
            "the stored token expired and could not be refreshed: {e}; run `keel mcp login {name}`"
        ))
    })?;
    store.save(&fresh)?;
    Ok(Some(fresh.access_token))
}

/// Refresh the stored token of `server_url` now (after the server refused it with a 401);
/// `Ok(None)` when none is stored or it has no refresh token.
pub async fn refresh_stored(
    store: &TokenStore,
    name: &str,
    server_url: &str,
) -> Result<Option<String>, AuthError> {
    let Some(token) = store.load(server_url)? else {
        return Ok(None);
    };
    if token.refresh_token.is_none() {
        return Ok(None);
    }
    let fresh = refresh(&http_client()?, name, &token).await?;
    store.save(&fresh)?;
    Ok(Some(fresh.access_token))
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
    fn challenge_parameters_are_read_quoted_or_not() {
        let h = r#"Bearer error="invalid_token", resource_metadata="https://a.example/.well-known/oauth-protected-resource/mcp", scope="files:read files:write""#;
        assert_eq!(
            challenge_param(h, "resource_metadata").as_deref(),
            Some("https://a.example/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(
            challenge_param(h, "scope").as_deref(),
            Some("files:read files:write")
        );
        assert_eq!(
            challenge_param("Bearer scope=a,x=1", "scope").as_deref(),
            Some("a")
        );
        assert_eq!(challenge_param("Bearer xscope=a", "scope"), None);
    }

    #[test]
    fn well_known_urls_insert_the_path() {
        let u = Url::parse("https://a.example/tenant/mcp/").unwrap();
        assert_eq!(
            well_known(&u, "oauth-protected-resource", true).as_str(),
            "https://a.example/.well-known/oauth-protected-resource/tenant/mcp"
        );
        assert_eq!(
            well_known(&u, "oauth-authorization-server", false).as_str(),
            "https://a.example/.well-known/oauth-authorization-server"
        );
    }

    #[test]
    fn resources_match_only_the_same_origin_and_a_parent_path() {
        let s = Url::parse("https://a.example/mcp").unwrap();
        assert!(resource_matches("https://a.example/mcp", &s));
        assert!(resource_matches("https://a.example/", &s));
        assert!(!resource_matches("https://b.example/mcp", &s));
        assert!(!resource_matches("https://a.example/other", &s));
    }

    #[test]
    fn pkce_challenge_is_the_s256_of_the_verifier() {
        let (v, c) = pkce();
        assert_eq!(v.len(), 43);
        assert_eq!(c, URL_SAFE_NO_PAD.encode(Sha256::digest(v.as_bytes())));
    }

    #[test]
    fn tokens_are_private_and_bound_to_their_url() {
        let home = tempfile::tempdir().unwrap();
        let store = TokenStore::new(home.path());
        let token = StoredToken {
            server_url: "https://a.example/mcp".into(),
            access_token: "secret".into(),
            refresh_token: None,
            expires_at: None,
            scope: None,
            token_endpoint: "https://a.example/token".into(),
            client_id: "c".into(),
            client_secret: None,
            token_endpoint_auth_method: None,
            issuer: None,
        };
        store.save(&token).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(store.path(&token.server_url))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert_eq!(
            store.load("https://a.example/mcp").unwrap(),
            Some(token.clone())
        );
        assert_eq!(store.load("https://evil.example/mcp").unwrap(), None);
        // A file copied under another URL's name is not used for that URL.
        std::fs::copy(
            store.path(&token.server_url),
            store.path("https://evil.example/mcp"),
        )
        .unwrap();
        assert_eq!(store.load("https://evil.example/mcp").unwrap(), None);
        assert!(!format!("{token:?}").contains("secret"));
        assert!(store.remove("https://a.example/mcp").unwrap());
        assert!(!store.remove("https://a.example/mcp").unwrap());
    }
}
