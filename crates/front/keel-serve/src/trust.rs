//! The trust question of a workspace over the API, as the terminal UI asks it before its first
//! agent and `/trust` answers it: `GET /api/v1/trust?cwd=DIR` says what is decided for the
//! workspace and what its files hold that the decision governs (and whether to ask: nobody
//! decided and trusting would change something, or files changed since it was trusted);
//! `POST /api/v1/trust {"cwd", "level"}` records `trusted` or `untrusted` in the user's
//! configuration, as `/trust yes|no` does. The decision applies to sessions created or resumed
//! from then on (a hosted session keeps the agent it was built with until it is closed), as in
//! an editor over ACP.

use crate::api::{parse, source_error, workspace};
use crate::{ApiError, App};
use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Query, State};
use keel_host::{ProjectTrust, TrustSource, WorkspaceTrust};
use serde::Deserialize;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;

/// The query of `GET /api/v1/trust`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TrustQuery {
    cwd: PathBuf,
}

/// The body of `POST /api/v1/trust`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TrustBody {
    cwd: PathBuf,
    level: String,
}

/// `GET /api/v1/trust?cwd=DIR`: the workspace's decision (see the module documentation).
pub(crate) async fn show(
    State(app): State<Arc<App>>,
    query: Result<Query<TrustQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let cwd = workspace(&query.cwd)?;
    let source = app.source.clone();
    let ws = tokio::task::spawn_blocking(move || source.trust(&cwd))
        .await
        .map_err(|e| ApiError::internal(format!("reading the workspace's trust failed: {e}")))?
        .map_err(source_error)?;
    Ok(Json(describe(&ws)))
}

/// `POST /api/v1/trust {"cwd", "level": "trusted" | "untrusted"}`: the decision recorded;
/// answers what `GET` answers now, plus the file it went to.
pub(crate) async fn record(
    State(app): State<Arc<App>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let body: TrustBody = parse(body)?;
    let Some(level) = ProjectTrust::parse(&body.level) else {
        return Err(ApiError::bad_request(format!(
            "level: {:?} is neither \"trusted\" nor \"untrusted\"",
            body.level
        )));
    };
    let cwd = workspace(&body.cwd)?;
    let source = app.source.clone();
    let (file, ws) = tokio::task::spawn_blocking(move || {
        let (_, file) = source.record_trust(&cwd, level)?;
        Ok::<_, keel_host::SourceError>((file, source.trust(&cwd)?))
    })
    .await
    .map_err(|e| ApiError::internal(format!("recording the workspace's trust failed: {e}")))?
    .map_err(source_error)?;
    let mut answer = describe(&ws);
    answer["recordedIn"] = json!(file);
    Ok(Json(answer))
}

/// A workspace's trust as JSON: `root`, `level` (`trusted`, `untrusted`), `decided` (false:
/// nobody decided, it is untrusted until someone does), `source`, `ask`, `notice` (what is
/// left alone, or null), `files` (`[{file, what, changed?}]`, paths relative to the root).
fn describe(ws: &WorkspaceTrust) -> Value {
    let d = &ws.decision;
    let source = match &d.source {
        TrustSource::Recorded { dir, layer } => {
            json!({"kind": "recorded", "dir": dir, "layer": layer})
        }
        TrustSource::Flag => json!({"kind": "flag"}),
        TrustSource::Undecided => json!({"kind": "undecided"}),
    };
    let files: Vec<Value> = ws
        .governed()
        .map(|g| {
            let mut row = json!({"file": g.file, "what": g.what});
            if let Some(change) = g.change {
                row["changed"] = json!(change.to_string());
            }
            row
        })
        .collect();
    json!({
        "root": d.root,
        "level": d.trust.as_str(),
        "decided": !d.is_undecided(),
        "source": source,
        "ask": ws.should_ask(),
        "notice": ws.notice(),
        "files": files,
    })
}
