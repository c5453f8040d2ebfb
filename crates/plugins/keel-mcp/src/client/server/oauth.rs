//! Connecting to a streamable HTTP server, with its stored OAuth token when it has one
//! ([`crate::auth`]): the token is used only when no `bearer_token_env_var` or
//! `Authorization` header is configured; a `401` with a stored token refreshes it once and
//! tries again; a `401` without one fails with a hint (`keel mcp login NAME`, or
//! `bearer_token_env_var`). Nothing here waits for a person.

use super::*;
use std::collections::BTreeMap;

/// The name the stored token goes by in [`http::transport`] (never an environment variable).
const STORED_TOKEN: &str = "<stored OAuth token>";

/// Whether a connection failure is the server asking for authorization.
fn auth_required(why: &str) -> bool {
    why.contains("Auth required") || why.contains("401")
}

impl Server {
    /// Use `store` for this server's OAuth tokens (streamable HTTP servers only).
    pub fn with_oauth(mut self, store: crate::auth::TokenStore) -> Self {
        self.oauth = Some(store);
        self
    }

    /// Connect to the streamable HTTP server at `url` (see the module docs).
    /// On failure, whether it failed on the protocol (a retry with another lifecycle may
    /// work).
    pub(super) async fn connect_http(
        &self,
        handler: Handler,
        lifecycle: &Lifecycle,
        limit: Duration,
        url: &str,
        headers: &BTreeMap<String, String>,
        bearer_token_env_var: Option<&str>,
    ) -> Result<Conn, (StartFailure, bool)> {
        let name = &self.config.name;
        let failure = |reason: String| {
            (
                StartFailure {
                    reason,
                    stderr_tail: String::new(),
                },
                false,
            )
        };
        let configured = bearer_token_env_var.is_some()
            || headers
                .keys()
                .any(|k| k.eq_ignore_ascii_case("authorization"));
        let store = self.oauth.as_ref().filter(|_| !configured);
        let mut token = match store {
            None => None,
            Some(store) => {
                match tokio::time::timeout(limit, crate::auth::usable_token(store, name, url)).await
                {
                    Ok(Ok(t)) => t,
                    Ok(Err(e)) => return Err(failure(format!("OAuth: {e}"))),
                    Err(_) => {
                        return Err(failure(format!(
                            "OAuth: refreshing the stored token took longer than {} s (startup_timeout_sec)",
                            limit.as_secs_f64()
                        )));
                    }
                }
            }
        };
        let mut refreshed = false;
        loop {
            let why = match self
                .try_http(
                    handler.clone(),
                    lifecycle,
                    limit,
                    url,
                    headers,
                    bearer_token_env_var,
                    token.as_deref(),
                )
                .await
            {
                Ok(conn) => return Ok(conn),
                Err((why, retry)) if !auth_required(&why) || configured => {
                    let (failure, _) = failure(why);
                    return Err((failure, retry));
                }
                Err((why, _)) => why,
            };
            let Some(store) = store else {
                return Err(failure(why));
            };
            if token.is_none() {
                return Err(failure(format!(
                    "{why}; the server asks for authorization: run `keel mcp login {name}` (OAuth), or set `bearer_token_env_var`"
                )));
            }
            if refreshed {
                return Err(failure(format!(
                    "{why}; it refused the stored OAuth token even after a refresh: run `keel mcp login {name}`"
                )));
            }
            refreshed = true;
            token = match tokio::time::timeout(limit, crate::auth::refresh_stored(store, name, url))
                .await
            {
                Ok(Ok(Some(t))) => Some(t),
                Ok(Ok(None)) => {
                    return Err(failure(format!(
                        "{why}; it refused the stored OAuth token, which cannot be refreshed: run `keel mcp login {name}`"
                    )));
                }
                Ok(Err(e)) => {
                    return Err(failure(format!(
                        "{why}; it refused the stored OAuth token and refreshing failed ({e}): run `keel mcp login {name}`"
                    )));
                }
                Err(_) => {
                    return Err(failure(format!(
                        "{why}; refreshing the stored OAuth token timed out"
                    )));
                }
            };
        }
    }

    /// One attempt: the `lifecycle`'s handshake and `tools/list` within `limit`; on failure,
    /// why, and whether it failed on the protocol.
    #[allow(clippy::too_many_arguments)]
    async fn try_http(
        &self,
        handler: Handler,
        lifecycle: &Lifecycle,
        limit: Duration,
        url: &str,
        headers: &BTreeMap<String, String>,
        bearer_token_env_var: Option<&str>,
        token: Option<&str>,
    ) -> Result<Conn, (String, bool)> {
        let var_name = bearer_token_env_var.or(token.map(|_| STORED_TOKEN));
        // The token is read now (a changed variable counts at the next restart).
        let transport = http::transport(url, headers, var_name, &|name: &str| match token {
            Some(t) if name == STORED_TOKEN => Ok(t.to_owned()),
            _ => std::env::var(name),
        })
        .map_err(|why| (why.to_string(), false))?;
        let mode = lifecycle.mode();
        let started = async {
            let service = handler
                .serve_with_lifecycle(transport, mode)
                .await
                .map_err(|e| (http::explain_init(&e), protocol_failure(&e)))?;
            let tools = service
                .peer()
                .list_all_tools()
                .await
                .map_err(|e| (format!("tools/list failed: {}", explain_call(&e)), false))?;
            Ok::<_, (String, bool)>((service, tools))
        };
        match tokio::time::timeout(limit, started).await {
            Ok(Ok((service, tools))) => Ok(Conn {
                service,
                child: None,
                tools,
            }),
            Ok(Err((why, retry))) => Err((
                format!("cannot connect to {}: {why}", http::redacted_url(url)),
                retry,
            )),
            Err(_) => Err((
                format!(
                    "{} did not answer {} and tools/list within {} s (startup_timeout_sec)",
                    http::redacted_url(url),
                    lifecycle.handshake(),
                    limit.as_secs_f64()
                ),
                false,
            )),
        }
    }
}
