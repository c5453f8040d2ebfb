//! Turns: `session/prompt` (a turn run on a blocking thread of its own, since its future holds
//! the session log), `session/cancel`, the turns plugins queue while the session is idle, and
//! the shutdown when the client leaves.

use super::params::{Images, Prompt, prompt_content};
use super::slash::{Slash, compact, slash_command};
use super::{Live, RECANCEL_EVERY, SHUTDOWN_GRACE, Server, err, send};
use crate::map;
use agent_client_protocol::Error;
use agent_client_protocol::v1::Responder;
use agent_client_protocol::v1::schema::{
    ErrorCode, PromptRequest, PromptResponse, SessionId, SessionUpdate, StopReason,
};
use keel_host::AgentSource;
use keel_protocol::TurnEndReason;
use keel_protocol::sync::Locked;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::sync::Notify;

impl<S: AgentSource + 'static> Server<S> {
    pub(super) fn cancel(&self, id: &SessionId) {
        let Some(live) = self.sessions().get(&id.0).cloned() else {
            return;
        };
        if live.running.load(Ordering::Acquire) {
            live.cancelled.store(true, Ordering::Release);
            live.cancel.notify_one();
        }
    }

    pub(super) fn prompt(&self, req: PromptRequest, responder: Responder<PromptResponse>) {
        let live = match self.session(&req.session_id) {
            Ok(live) => live,
            Err(e) => {
                let _ = responder.respond_with_error(e);
                return;
            }
        };
        let config = live.agent.config();
        let store = live.agent.attachments();
        let images = match (&store, config.model_info.vision) {
            (Some(store), true) => Images::Store(store),
            _ => Images::Refuse {
                model: &config.model,
            },
        };
        let prompt = match prompt_content(&req.prompt, images) {
            Ok(prompt) => prompt,
            Err(e) => {
                let _ = responder.respond_with_error(e);
                return;
            }
        };
        if live.running.swap(true, Ordering::AcqRel) {
            let _ = responder.respond_with_error(err(
                ErrorCode::InvalidRequest,
                format!(
                    "session {} is already running a prompt: wait for it or send session/cancel",
                    &*req.session_id.0
                ),
            ));
            return;
        }
        live.cancelled.store(false, Ordering::Release);
        let rt = tokio::runtime::Handle::current();
        // The turn's future holds the session log: it runs on a blocking thread of its own.
        let handle = tokio::task::spawn_blocking(move || {
            let answer = rt.block_on(run_turn(&live, prompt));
            live.running.store(false, Ordering::Release);
            let _ = responder.respond_with_result(answer);
        });
        let mut turns = self.turns.locked();
        turns.retain(|t| !t.is_finished());
        turns.push(handle);
    }

    /// The client left: cancel what runs and wait (bounded) for the turns to end.
    pub(super) async fn shutdown(&self) {
        let open: Vec<Arc<Live>> = self.sessions().values().cloned().collect();
        for live in &open {
            if live.running.load(Ordering::Acquire) {
                live.cancelled.store(true, Ordering::Release);
                live.cancel.notify_one();
            }
        }
        let turns = std::mem::take(&mut *self.turns.locked());
        let all = futures::future::join_all(turns);
        let _ = tokio::time::timeout(SHUTDOWN_GRACE, all).await;
        for live in &open {
            live.agent.kill_jobs();
        }
    }
}

/// Run the session's queued turns until idle, cancelling on `session/cancel`.
async fn run_cancellable(
    live: &Live,
) -> Result<Option<keel_agent::TurnOutcome>, keel_agent::AgentError> {
    live.agent
        .run_until_idle_cancellable(live.cancel.notified(), RECANCEL_EVERY)
        .await
}

/// How often a woken session looks whether the prompt it waits for has ended.
const WAKE_POLL: Duration = Duration::from_millis(100);

/// Run the turns a plugin queues while no prompt runs (a schedule firing while the session is
/// idle): their events reach the client as `session/update`s like a prompt's, with no prompt
/// to answer. A turn queued during a prompt is that prompt's to run. Ends with the session.
pub(super) async fn watch_wakes(live: std::sync::Weak<Live>, wake: Arc<Notify>) {
    loop {
        wake.notified().await;
        let live = loop {
            let Some(live) = live.upgrade() else {
                return;
            };
            if !live.running.load(Ordering::Acquire) {
                break live;
            }
            drop(live);
            tokio::time::sleep(WAKE_POLL).await;
        };
        if !live.agent.has_pending_turn() || live.running.swap(true, Ordering::AcqRel) {
            continue;
        }
        live.cancelled.store(false, Ordering::Release);
        let rt = tokio::runtime::Handle::current();
        // The turn's future holds the session log: it runs on a blocking thread of its own.
        let _ = tokio::task::spawn_blocking(move || {
            let _ = rt.block_on(run_cancellable(&live));
            live.running.store(false, Ordering::Release);
        })
        .await;
    }
}

/// Queue `prompt` and run the session's turns until idle, cancelling on `session/cancel`.
async fn run_turn(live: &Live, prompt: Prompt) -> Result<PromptResponse, Error> {
    let agent = &live.agent;
    let text = prompt.text.as_str();
    let expanded = match slash_command(live, text).await? {
        Some(Slash::Compact) => return compact(live).await,
        Some(Slash::Say(said)) => {
            send(
                &live.feed.cx,
                &live.id,
                SessionUpdate::AgentMessageChunk(map::chunk(said)),
            );
            return Ok(PromptResponse::new(StopReason::EndTurn));
        }
        Some(Slash::Prompt(prompt)) => Some(prompt),
        None => None,
    };
    let text = expanded.as_deref().unwrap_or(text);
    let mut message = keel_agent::user_message(text);
    if text.is_empty() {
        message.content.clear(); // an image-only prompt
    }
    message.content.extend(
        prompt
            .images
            .into_iter()
            .map(keel_protocol::ContentBlock::Image),
    );
    agent
        .enqueue(keel_agent::InboxMode::Followup, message)
        .map_err(|e| err(ErrorCode::InternalError, format!("keel: {e}")))?;
    let outcome = run_cancellable(live).await;
    if live.cancelled.load(Ordering::Acquire) {
        return Ok(PromptResponse::new(StopReason::Cancelled));
    }
    let id = agent.session_id();
    let outcome = outcome.map_err(|e| {
        err(
            ErrorCode::InternalError,
            format!("keel: session {}: {e}", id.as_str()),
        )
    })?;
    let Some(outcome) = outcome else {
        return Ok(PromptResponse::new(StopReason::EndTurn));
    };
    let reason = match outcome.reason {
        TurnEndReason::Completed | TurnEndReason::Blocked { .. } => StopReason::EndTurn,
        TurnEndReason::MaxTokens => StopReason::MaxTokens,
        TurnEndReason::Aborted { .. } | TurnEndReason::Interrupted => StopReason::Cancelled,
        TurnEndReason::Error { code, message } => {
            return Err(err(
                ErrorCode::InternalError,
                format!(
                    "keel: session {}: the turn failed: {code}: {message}",
                    id.as_str()
                ),
            ));
        }
    };
    Ok(PromptResponse::new(reason))
}
