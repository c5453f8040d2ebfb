//! A session's slash commands over the API, as the terminal UI and an editor run them:
//! `GET …/commands` lists them (for a client's `/` menu) and `POST …/commands/{name}
//! {"args"}` runs one. `compact` compacts the conversation now; a custom command (a Markdown
//! file of the workspace or the user) is expanded and sent as a turn; a plugin's command acts
//! and says what it did (`/goal pause`), or gives the prompt that is sent as a turn (`/goal
//! OBJECTIVE`, `/review`). The goal, say, is set, paused, edited, resumed and cleared this way,
//! through the goals plugin's own `/goal`.

use crate::api::{live_or_resumed, parse, stored_path};
use crate::hub::{self, Hold, Live};
use crate::{ApiError, App};
use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use keel_host::commands::{Builtin, CommandKind, CommandSet, Invocation};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

/// The body of `POST …/commands/{name}`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CommandBody {
    /// What follows the name on the command line (`pause`, `--max-rounds 3 OBJECTIVE`).
    #[serde(default)]
    args: String,
}

/// The workspace's and the user's custom commands for `live`: read from disk on first use,
/// then kept for the session's life (a command file added or edited later is seen by a
/// session created or resumed after it).
async fn custom(live: &Arc<Live>) -> Result<&CommandSet, ApiError> {
    if let Some(set) = live.custom.get() {
        return Ok(set);
    }
    let held = live.clone();
    let set = tokio::task::spawn_blocking(move || {
        let config = held.agent.config();
        CommandSet::load_for(&config.cwd, config.keel_home.as_deref())
    })
    .await
    .map_err(|e| ApiError::internal(format!("reading the custom commands failed: {e}")))?;
    Ok(live.custom.get_or_init(|| set))
}

/// `GET /api/v1/sessions/{id}/commands`: `{"commands": [{"name", "description",
/// "argumentHint", "kind"}]}`, `kind` being `builtin`, `custom` or `plugin`.
pub(crate) async fn list(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let live = live_or_resumed(&app, &id).await?;
    let set = custom(&live).await?;
    let compact = Builtin::Compact;
    let mut rows = vec![json!({
        "name": compact.name(),
        "description": compact.description(),
        "argumentHint": compact.argument_hint(),
        "kind": "builtin",
    })];
    for c in set.all() {
        if matches!(c.kind, CommandKind::Custom { .. }) {
            rows.push(json!({
                "name": c.name,
                "description": c.description,
                "argumentHint": c.argument_hint,
                "kind": "custom",
            }));
        }
    }
    for source in live.agent.commands() {
        for c in source.commands() {
            rows.push(json!({
                "name": c.name,
                "description": c.description,
                "argumentHint": c.argument_hint,
                "kind": "plugin",
            }));
        }
    }
    Ok(Json(json!({ "commands": rows })))
}

/// `POST /api/v1/sessions/{id}/commands/{name} {"args"?}`: run the command. `200 {"message"}`
/// for one that acted (compaction, `/goal pause`); `202 {"prompt"}` for one whose prompt was
/// queued as a turn. 404 for a name the session does not offer; 409 `command_refused` when
/// the command said no (its message names why); 409 `turn_running` for `compact` mid-turn.
pub(crate) async fn run(
    State(app): State<Arc<App>>,
    Path((id, name)): Path<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    stored_path(&app, &id).await?;
    let body: CommandBody = if body.as_ref().is_ok_and(|b| b.is_empty()) {
        CommandBody::default()
    } else {
        parse(body)?
    };
    let args = body.args.trim().to_owned();
    let live = live_or_resumed(&app, &id).await?;
    let refused = |e: &dyn std::fmt::Display| {
        ApiError::new(
            StatusCode::CONFLICT,
            "command_refused",
            format!("session {id}: /{name}: {e}"),
        )
    };
    if name == Builtin::Compact.name() {
        return compact(&live, &id).await;
    }
    if let Ok(Invocation::Custom { prompt, .. }) =
        custom(&live).await?.parse(&format!("/{name} {args}"))
    {
        return queue(live, &id, prompt);
    }
    let Some(source) = live.agent.command_source(&name).cloned() else {
        return Err(ApiError::not_found(format!(
            "session {id} offers no command /{name} (GET …/commands lists them)"
        )));
    };
    if let Some(done) = source.act_async(&name, &args) {
        let said = done.await.map_err(|e| refused(&e))?;
        return Ok(Json(json!({ "message": said })).into_response());
    }
    let (source_, name_, args_) = (source.clone(), name.clone(), args.clone());
    let acted = tokio::task::spawn_blocking(move || source_.act(&name_, &args_))
        .await
        .map_err(|e| ApiError::internal(format!("session {id}: /{name} failed: {e}")))?;
    if let Some(done) = acted {
        let said = done.map_err(|e| refused(&e))?;
        return Ok(Json(json!({ "message": said })).into_response());
    }
    let prompt = source.expand(&name, &args).await.map_err(|e| refused(&e))?;
    queue(live, &id, prompt)
}

/// `prompt` queued as a turn of `live`: 202 `{"prompt"}`.
fn queue(live: Arc<Live>, id: &str, prompt: String) -> Result<Response, ApiError> {
    live.agent
        .followup(&prompt)
        .map_err(|e| ApiError::internal(format!("session {id}: {e}")))?;
    hub::run_turns(live);
    Ok((StatusCode::ACCEPTED, Json(json!({ "prompt": prompt }))).into_response())
}

/// `compact`: the conversation compacted now, between turns.
async fn compact(live: &Arc<Live>, id: &str) -> Result<Response, ApiError> {
    use keel_agent::compaction::{CompactionReason, compact_now};
    let hold = Hold::take(live).ok_or_else(|| {
        ApiError::new(
            StatusCode::CONFLICT,
            "turn_running",
            format!("session {id} is running a turn: compact it when it has ended"),
        )
    })?;
    let report = compact_now(&live.agent, CompactionReason::Manual)
        .await
        .map_err(|e| ApiError::internal(format!("session {id}: /compact: {e}")))?;
    drop(hold);
    // A failed summary is the model's failure, not the server's.
    let said = report.said().map_err(|error| {
        ApiError::new(
            StatusCode::BAD_GATEWAY,
            "compaction_failed",
            format!("session {id}: compaction failed: {error}"),
        )
    })?;
    Ok(Json(json!({ "message": said })).into_response())
}
