//! `GET /api/v1/models`: what the web app's settings show of models and keys: the models a
//! session can be switched to (the configured one first) and the endpoint agents are built for:
//! its provider, URL and the environment variable its key is read from, with whether it is set.
//! A key's value never leaves the server, and the page cannot set one: keys are read from the
//! environment `keel serve` starts in (docs/web-app.md, "Settings").

use crate::{ApiError, App};
use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};
use std::sync::Arc;

/// `GET /api/v1/models`: `{"models": [name…], "endpoint": {provider, baseUrl, keyVariable,
/// keySet} | null, "endpointError": string | null}`.
pub(crate) async fn list(State(app): State<Arc<App>>) -> Result<Json<Value>, ApiError> {
    let source = app.source.clone();
    let (models, endpoint) =
        tokio::task::spawn_blocking(move || (source.models(), source.endpoint()))
            .await
            .map_err(|e| ApiError::internal(format!("listing the models failed: {e}")))?;
    let home = app.store.home().to_path_buf();
    let (endpoint, error) = match endpoint {
        Ok(e) => (
            json!({
                "provider": e.provider,
                "baseUrl": e.base_url,
                "keyVariable": e.key.as_ref().and_then(|k| k.var.as_ref()),
                // The variable, or a key stored by `keel login` that stands in for it.
                "keySet": e.key.as_ref().is_some_and(|k| {
                    let set = |v: &str| std::env::var_os(v).is_some_and(|x| !x.is_empty());
                    let stored = keel_host::Credentials::load(&home);
                    let has = |p: &str| stored.as_ref().is_ok_and(|s| s.get(p).is_some());
                    k.comes_from(set, has) != keel_host::KeyFrom::Missing
                }),
            }),
            Value::Null,
        ),
        Err(e) => (Value::Null, json!(e.to_string())),
    };
    Ok(Json(
        json!({ "models": models, "endpoint": endpoint, "endpointError": error }),
    ))
}
