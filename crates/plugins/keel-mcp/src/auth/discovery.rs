//! Discovery: from the server's `401` challenge (or the well-known protected resource metadata)
//! to the authorization server's metadata, checked (https, PKCE S256, the issuer the resource
//! names), with the 2025-03-26 fallback to the server's origin.

use super::{AuthError, bad, http_error, preview, read};
use serde_json::{Value, json};
use url::Url;

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

/// GET `url` as a JSON object: `Ok(None)` for a 404 (or other 4xx), an error for anything
/// else that is not a JSON object.
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

/// An address OAuth traffic may not go to: neither https nor http on this machine.
#[derive(Debug, thiserror::Error)]
#[error("{url} must be https:// (http:// only on this machine), not {}://", .url.scheme())]
struct Insecure {
    url: Url,
}

/// https, or http on a loopback host.
fn secure(url: &Url) -> Result<(), Insecure> {
    match url.scheme() {
        "https" => Ok(()),
        "http" if is_loopback(url) => Ok(()),
        _ => Err(Insecure { url: url.clone() }),
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
}
