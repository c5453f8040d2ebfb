//! What changes a session besides a message, each as the command line or the terminal UI
//! does it, through the same code: `POST …/fork` (`keel fork`: the binary's
//! [`keel_host::AgentSource::fork`]), `POST …/rewind` (the terminal UI's `/rewind`: the
//! `rewind` command of the session's own agent, offered by the checkpoints plugin through the
//! command seam), `POST …/mode` (the session modes of [`keel_host::modes`], as an editor sets
//! them over ACP) and `POST …/model` (the terminal UI's `/model`: an agent rebuilt over the
//! same session on the model and/or reasoning effort, which the session keeps with a
//! `model/selected` event).
//!
//! A rewind, a mode or a model switch changes a session between turns: while a turn runs it
//! is refused with 409 `turn_running` (as the terminal UI refuses it), and while it is done
//! the session runs no turn (a message sent meanwhile is queued and runs after). A fork only
//! reads the session, so it is never refused: the fork of a running session ends after its
//! last completed turn.

use crate::api::{live_or_resumed, parse, source_error, stored_path};
use crate::hub::{Hold, Live, Pending};
use crate::{ApiError, App};
use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use keel_host::{SessionRef, SessionSpec};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

/// The command that rewinds (the checkpoints plugin's).
const REWIND: &str = "rewind";

/// 409 `turn_running`: `id` runs a turn, so `what` waits.
fn running(id: &str, what: &str) -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        "turn_running",
        format!(
            "session {id} is running a turn: {what} when it has ended, or cancel it \
             (POST …/cancel)"
        ),
    )
}

/// A blocking call's task failed.
fn joined(id: &str, what: &str, e: tokio::task::JoinError) -> ApiError {
    ApiError::internal(format!("session {id}: the {what} failed: {e}"))
}

/// The body of `POST …/fork`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ForkBody {
    /// Fork just before this event (the start of the turn holding it); after the last
    /// completed turn when absent.
    at: Option<u64>,
}

/// `POST /api/v1/sessions/{id}/fork`: a new session seeded with this one's log, as `keel
/// fork --at seq:AT` writes it (stored, not hosted: a message resumes it). `201 {"id"}`.
pub(crate) async fn fork(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body: ForkBody = match body {
        Ok(bytes) if bytes.iter().all(u8::is_ascii_whitespace) => ForkBody::default(),
        body => parse(body)?,
    };
    let path = stored_path(&app, &id).await?;
    // A hosted session's events are on disk first: the fork reads the file.
    let len = match app.hub.get(&id) {
        Some(live) => {
            let ticket = live.agent.log().flush_ticket();
            ticket
                .durable()
                .await
                .map_err(|e| ApiError::internal(format!("session {id}: {e}")))?;
            live.agent.log().session().len()
        }
        None => crate::api::load_stored(&app, &id).await?.len(),
    };
    if let Some(at) = body.at
        && at >= len
    {
        return Err(ApiError::bad_request(format!(
            "at: session {id} has {len} events (seqs 0..{}), no seq {at}",
            len.saturating_sub(1)
        )));
    }
    let source = app.source.clone();
    let cwd = app.source.workspace().to_path_buf();
    let (child, _) =
        tokio::task::spawn_blocking(move || source.fork(SessionRef::Path(&path), &cwd, body.at))
            .await
            .map_err(|e| joined(&id, "fork", e))?
            .map_err(source_error)?;
    Ok((StatusCode::CREATED, Json(json!({ "id": child }))).into_response())
}

/// What a rewind returns to the earlier point (`keel rewind --files`, `--conversation`).
#[derive(Debug, Default, Deserialize, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum Scope {
    /// The files and the conversation.
    #[default]
    Both,
    /// The workspace's files only.
    Files,
    /// The conversation only.
    Conversation,
}

/// Where a rewind goes: a seq, or the command line's form.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum To {
    /// Just before the turn holding this event (`seq:S`).
    Seq(u64),
    /// `N` (just before turn N), `seq:S` or `undo`.
    Text(String),
}

/// The body of `POST …/rewind`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RewindBody {
    to: To,
    #[serde(default)]
    scope: Scope,
    /// Overwrite files changed by hand since the checkpoint (`--force`).
    #[serde(default)]
    force: bool,
}

impl RewindBody {
    /// The arguments of `/rewind`, or 400 naming what is wrong with `to`.
    fn args(&self) -> Result<String, ApiError> {
        let point = match &self.to {
            To::Seq(seq) => format!("seq:{seq}"),
            To::Text(text) => {
                let text = text.trim();
                let number = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
                let ok = text == "undo"
                    || number(text)
                    || text.strip_prefix("seq:").is_some_and(|s| number(s.trim()));
                if !ok {
                    return Err(ApiError::bad_request(format!(
                        "to: a seq (a number), \"N\" (just before turn N), \"seq:S\" or \
                         \"undo\", not {text:?}"
                    )));
                }
                text.replace(' ', "")
            }
        };
        let scope = match self.scope {
            Scope::Both => "",
            Scope::Files => " --files",
            Scope::Conversation => " --conversation",
        };
        let force = if self.force { " --force" } else { "" };
        Ok(format!("{point}{scope}{force}"))
    }
}

/// `POST /api/v1/sessions/{id}/rewind`: the files and the conversation back to just before a
/// turn, as the terminal UI's `/rewind` (the checkpoints plugin's command). `{"message"}`:
/// what was done, as the UI says it.
pub(crate) async fn rewind(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    stored_path(&app, &id).await?;
    let body: RewindBody = parse(body)?;
    let args = body.args()?;
    let live = live_or_resumed(&app, &id).await?;
    let hold = Hold::take(&live).ok_or_else(|| running(&id, "rewind it"))?;
    let Some(source) = live.agent.command_source(REWIND).cloned() else {
        return Err(ApiError::new(
            StatusCode::NOT_IMPLEMENTED,
            "unsupported",
            format!("session {id}: rewind needs the checkpoints plugin, which is off here"),
        ));
    };
    let done = tokio::task::spawn_blocking(move || source.act(REWIND, &args))
        .await
        .map_err(|e| joined(&id, "rewind", e))?;
    durable(&live, &id).await?;
    drop(hold);
    match done {
        Some(Ok(said)) => Ok(Json(json!({ "message": said }))),
        Some(Err(e)) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "rewind_refused",
            format!("session {id}: {e}"),
        )),
        None => Err(ApiError::internal(format!(
            "session {id}: the rewind command did nothing"
        ))),
    }
}

/// `live`'s log on disk.
async fn durable(live: &Live, id: &str) -> Result<(), ApiError> {
    let ticket = live.agent.log().flush_ticket();
    ticket
        .durable()
        .await
        .map_err(|e| ApiError::internal(format!("session {id}: {e}")))
}

/// The body of `POST …/mode`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ModeBody {
    mode: String,
}

/// `POST /api/v1/sessions/{id}/mode`: the session in `default`, `read-only`, `auto` or `plan`
/// ([`keel_host::modes::set_mode`]), logged and on disk before the answer. `{"mode"}`.
pub(crate) async fn mode(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    stored_path(&app, &id).await?;
    let body: ModeBody = parse(body)?;
    if !keel_host::modes::MODES.contains(&body.mode.as_str()) {
        return Err(ApiError::bad_request(format!(
            "mode: {}",
            keel_host::modes::ModeError::Unknown(body.mode)
        )));
    }
    let live = live_or_resumed(&app, &id).await?;
    let hold = Hold::take(&live).ok_or_else(|| running(&id, "change its mode"))?;
    let agent = live.clone();
    let set =
        tokio::task::spawn_blocking(move || keel_host::modes::set_mode(&agent.agent, &body.mode))
            .await
            .map_err(|e| joined(&id, "mode change", e))?;
    durable(&live, &id).await?;
    drop(hold);
    set.map_err(|e| ApiError::internal(format!("session {id}: {e}")))?;
    Ok(Json(
        json!({ "mode": keel_host::modes::mode_of(&live.agent) }),
    ))
}

/// The body of `POST …/model`: a model, a reasoning effort, or both.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelBody {
    model: Option<String>,
    effort: Option<String>,
}

/// Whether `effort` looks like a reasoning effort (`low`, `medium`, `high`, …: a short word of
/// lowercase letters). Which ones a model takes is its provider's to say.
fn is_effort(effort: &str) -> bool {
    (1..=16).contains(&effort.len()) && effort.bytes().all(|b| b.is_ascii_lowercase())
}

/// `POST /api/v1/sessions/{id}/model`: the session's agent rebuilt over the same session on
/// `model` and/or with the reasoning `effort`, as the terminal UI's `/model NAME` (the session
/// keeps both: `model/selected` in its log). `{"model", "effort"}`: what its agent runs with
/// (`effort` null when none is set; a model that takes no effort is sent none).
pub(crate) async fn model(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    stored_path(&app, &id).await?;
    let body: ModelBody = parse(body)?;
    if body.model.is_none() && body.effort.is_none() {
        return Err(ApiError::bad_request(
            "model, effort: give a model, a reasoning effort or both",
        ));
    }
    if body.model.as_deref().is_some_and(|m| m.trim().is_empty()) {
        return Err(ApiError::bad_request(
            "model: a model name, not an empty one",
        ));
    }
    if let Some(effort) = body.effort.as_deref().filter(|e| !is_effort(e)) {
        return Err(ApiError::bad_request(format!(
            "effort: {effort:?} is not a reasoning effort (a word such as low, medium or high)"
        )));
    }
    let live = live_or_resumed(&app, &id).await?;
    // Messages that come meanwhile wait for the new agent (they resume through `opening`).
    let _opening = app.hub.opening.lock().await;
    let live = app.hub.get(&id).unwrap_or(live);
    let hold = Hold::take(&live).ok_or_else(|| running(&id, "switch its model"))?;
    let current = (
        live.agent.config().model.clone(),
        live.agent.config().reasoning_effort.clone(),
    );
    let model = body.model.clone().unwrap_or_else(|| current.0.clone());
    let effort = body.effort.clone().or_else(|| current.1.clone());
    if (&model, &effort) == (&current.0, &current.1) {
        return Ok(Json(answer(&live)));
    }
    let Some(old) = app.hub.take(&id) else {
        return Err(ApiError::internal(format!(
            "session {id} stopped being hosted during the switch"
        )));
    };
    let switched = rebuild(&app, &old, Some(model.clone()), effort.clone()).await;
    let (new, failure) = match switched {
        Ok(new) => (new, None),
        // As the terminal UI does: the session again on the model it had.
        Err(e) => (
            rebuild(&app, &old, Some(current.0), current.1).await?,
            Some(e),
        ),
    };
    if failure.is_none() {
        let mut chosen = json!({ "model": model });
        if let Some(effort) = &body.effort {
            chosen["effort"] = json!(effort);
        }
        new.agent
            .push_ignorable(keel_agent::session_modes::MODEL_EVENT, chosen)
            .map_err(|e| {
                ApiError::internal(format!(
                    "session {id}: the model could not be kept in the session: {e}"
                ))
            })?;
        durable(&new, &id).await?;
    }
    app.hub.replace(&old, new.clone());
    drop(hold);
    // The old agent ends off the async threads (its log writer joins its thread).
    drop(tokio::task::spawn_blocking(move || drop(old)));
    match failure {
        Some(e) => Err(e),
        None => Ok(Json(answer(&new))),
    }
}

/// The model route's answer: what `live`'s agent runs with.
fn answer(live: &Live) -> Value {
    let config = live.agent.config();
    json!({ "model": config.model, "effort": config.reasoning_effort })
}

/// An agent built over `old`'s session on `model` with `effort` (`None`: the configured or the
/// session's), after `old` let go of the log (one writer per session), announcing on `old`'s
/// channel with `old`'s requests.
async fn rebuild(
    app: &App,
    old: &Arc<Live>,
    model: Option<String>,
    effort: Option<String>,
) -> Result<Arc<Live>, ApiError> {
    let (pending, options) = Pending::following(old);
    let source = app.source.clone();
    let held = old.clone();
    let spec = SessionSpec {
        model,
        effort,
        ..SessionSpec::in_dir(old.cwd.clone())
    };
    let agent = tokio::task::spawn_blocking(move || {
        held.agent.kill_jobs();
        let path = {
            let mut log = held.agent.log();
            // Already let go when this is the second try.
            let _ = log.release();
            log.writer().path().to_path_buf()
        };
        source.resume(SessionRef::Path(&path), &spec, options)
    })
    .await
    .map_err(|e| ApiError::internal(format!("rebuilding the agent failed: {e}")))?
    .map_err(source_error)?;
    Ok(pending.finish(agent, old.cwd.clone()))
}
