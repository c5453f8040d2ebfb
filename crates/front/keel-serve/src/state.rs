//! One session's state at a glance, and a command's choices: what a client shows beside the
//! conversation (a status line, a model picker, a rewind list) without replaying the log.
//!
//! `GET /api/v1/sessions/{id}`: `{id, cwd, title, status, events, model, effort, mode, plan,
//! sandbox, approval, provenance, parent, origin}` (`provenance`: whether it records a journal,
//! whose graphs `GET …/provenance` draws; `parent` and `origin`: the session it was forked or
//! delegated from, and how: `subagent`, `fork`, …, from its header). For a session the server hosts, what its agent runs with now; for a
//! stored one, what its log says it chose (`null` where it chose nothing and the configuration
//! decides when it is resumed).
//!
//! `GET /api/v1/sessions/{id}/commands/{name}/choices`: the values a command offers for its
//! argument now (the checkpoints plugin's `rewind`: the session's turns, newest first), as the
//! terminal UI's picker lists them.

use crate::api::{live_or_resumed, load_stored, stored_path};
use crate::{ApiError, App};
use axum::Json;
use axum::extract::{Path, State};
use keel_agent::session_modes;
use keel_protocol::EventBody;
use keel_session::Session;
use serde_json::{Value, json};
use std::sync::Arc;

/// `GET /api/v1/sessions/{id}`.
pub(crate) async fn show(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    if let Some(live) = app.hub.get(&id) {
        let agent = &live.agent;
        let config = agent.config();
        let (title, events, header) = {
            let log = agent.log();
            let session = log.session();
            (
                session.title().map(str::to_owned),
                session.len(),
                session.header().clone(),
            )
        };
        return Ok(Json(json!({
            "id": id,
            "cwd": live.cwd,
            "title": title,
            "status": live.status(),
            "events": events,
            "model": config.model,
            "effort": config.reasoning_effort,
            "mode": keel_host::modes::mode_of(agent),
            "plan": agent.in_plan_mode(),
            "sandbox": agent.sandbox().as_str(),
            "approval": agent.approval().as_str(),
            "provenance": crate::provenance::recorded(&app, &id),
            "parent": header.parent_session,
            "origin": header.origin,
        })));
    }
    stored_path(&app, &id).await?;
    let session = load_stored(&app, &id).await?;
    let mut state = stored(&id, &session);
    state["provenance"] = crate::provenance::recorded(&app, &id).into();
    Ok(Json(state))
}

/// A stored session's state, from its log.
fn stored(id: &str, session: &Session) -> Value {
    let (mut sandbox, mut approval) = (None, None);
    for ev in session.whole_event_iter() {
        match &ev.body {
            EventBody::SandboxMode(m) => sandbox = Some(m.mode.clone()),
            // A log written before keel's words changed says `never`/`auto`.
            EventBody::ApprovalPolicy(p) => {
                approval = Some(keel_agent::ApprovalPolicy::respell(&p.policy).to_owned());
            }
            _ => {}
        }
    }
    let plan = session_modes::last_plan_mode(session).is_some_and(|p| p.active);
    json!({
        "id": id,
        "cwd": session.header().cwd,
        "title": session.title(),
        "status": "stored",
        "events": session.len(),
        "model": session_modes::last_model(session),
        "effort": session_modes::last_effort(session),
        "mode": Value::Null,
        "plan": plan,
        "sandbox": sandbox,
        "approval": approval,
        "parent": session.header().parent_session,
        "origin": session.header().origin,
    })
}

/// `GET /api/v1/sessions/{id}/commands/{name}/choices`: `{"choices": [{args, label, detail,
/// seq, text}]}`; a stored session is resumed (its plugins compute the choices).
pub(crate) async fn choices(
    State(app): State<Arc<App>>,
    Path((id, name)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    stored_path(&app, &id).await?;
    let live = live_or_resumed(&app, &id).await?;
    let Some(source) = live.agent.command_source(&name).cloned() else {
        return Err(ApiError::not_found(format!(
            "session {id} offers no command /{name} (GET …/commands lists them)"
        )));
    };
    let choices = tokio::task::spawn_blocking(move || source.choices(&name))
        .await
        .map_err(|e| {
            ApiError::internal(format!("session {id}: listing the choices failed: {e}"))
        })?;
    let rows: Vec<Value> = choices
        .into_iter()
        .map(|c| {
            json!({"args": c.args, "label": c.label, "detail": c.detail, "seq": c.seq,
                "text": c.text})
        })
        .collect();
    Ok(Json(json!({ "choices": rows })))
}
