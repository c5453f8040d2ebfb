//! The token endpoint: the form request and its answer, refresh, and the token connecting uses
//! (stored, refreshed when it has expired, never waiting for a person).

use super::store::StoredToken;
use super::{AuthError, TokenStore, bad, http_client, http_error, now, preview, read};
use serde_json::Value;

/// A client secret and how it is sent.
#[derive(Clone, Copy)]
pub(super) struct Secret<'a> {
    pub(super) id: &'a str,
    pub(super) secret: &'a str,
    pub(super) method: Option<&'a str>,
}

/// POST a form to the token endpoint and read the token answer.
pub(super) async fn token_request(
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
