//! `GET /api/v1/sessions/{id}/paths?prefix=P`: `@path` completion for a composer, as the
//! terminal UI completes it: the entries of the session's workspace that `P` may be completed
//! to, one directory level at a time ([`keel_tools::complete::complete_path`]: gitignore-aware,
//! never outside the workspace).

use crate::api::{load_stored, stored_path};
use crate::{ApiError, App};
use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use serde::Deserialize;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;

/// Paths offered at most.
const MAX: usize = 20;

/// The query of `GET …/paths`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PathsQuery {
    /// What was typed after `@`.
    #[serde(default)]
    prefix: String,
}

/// `GET /api/v1/sessions/{id}/paths?prefix=P`: `{"paths": [path…]}`, directories ending in `/`.
pub(crate) async fn complete(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    query: Result<Query<PathsQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let cwd: PathBuf = match app.hub.get(&id) {
        Some(live) => live.cwd.clone(),
        None => {
            stored_path(&app, &id).await?;
            let session = load_stored(&app, &id).await?;
            match session.header().cwd.clone() {
                Some(cwd) => PathBuf::from(cwd),
                None => return Ok(Json(json!({ "paths": [] }))),
            }
        }
    };
    let paths = tokio::task::spawn_blocking(move || {
        keel_tools::complete::complete_path(&cwd, &query.prefix, MAX)
    })
    .await
    .map_err(|e| ApiError::internal(format!("completing a path failed: {e}")))?;
    Ok(Json(json!({ "paths": paths })))
}
