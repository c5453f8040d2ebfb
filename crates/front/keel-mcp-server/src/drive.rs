//! Running an agent's turns under a call's [`TurnControl`]: progress from its session events,
//! and cancellation through [`Agent::cancel_turn`].

use super::{Answer, ProgressUpdate, TurnControl};
use keel_agent::{Agent, HookRegistry};
use keel_host::SourceError;
use keel_protocol::sync::Locked;
use keel_protocol::{EventBody, SessionEvent};
use keel_session::view::text::one_line;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often a cancelled call repeats [`Agent::cancel_turn`] until the agent is idle: a cancel
/// that lands between two turns (or before the first starts) would otherwise be lost, since
/// every turn takes a fresh cancellation token.
const RECANCEL_EVERY: Duration = Duration::from_millis(50);

/// Register a `session/event` observer on `hooks` that reports the agent's steps, tool calls,
/// tool results, retries and turn ends to `control`, and what plugins' events show (through
/// their presenters: notices, markers, children's progress) as notes.
pub fn observe_progress(hooks: &mut HookRegistry, control: &TurnControl) {
    let control = control.clone();
    let presenters = Mutex::new(keel_host::presenters().make());
    hooks.session_event.push(Arc::new(move |ev: &SessionEvent| {
        if let Some(update) = progress_of(ev) {
            control.report(update);
        }
        for item in presenters.locked().present(ev) {
            if let Some(line) = item.line() {
                control.report(ProgressUpdate::Note(line));
            }
        }
    }));
}

fn progress_of(ev: &SessionEvent) -> Option<ProgressUpdate> {
    Some(match &ev.body {
        EventBody::StepStart(s) => ProgressUpdate::Step {
            turn: s.turn,
            step: s.step,
        },
        EventBody::ToolCall(c) => ProgressUpdate::ToolCall {
            name: c.name.clone(),
            summary: one_line(&c.arguments, 120),
        },
        EventBody::ToolResult(r) => {
            let text: String = r.message.tool_results().map(|b| b.text()).collect();
            let ok = !r.message.tool_results().any(|b| b.is_error);
            let first = text.lines().next().unwrap_or("(no output)");
            ProgressUpdate::ToolResult {
                ok,
                summary: one_line(first, 120),
            }
        }
        EventBody::LlmRetry(r) => ProgressUpdate::Retry {
            code: r.failure.code.to_string(),
            attempt: r.attempt,
        },
        EventBody::TurnEnd(t) => ProgressUpdate::TurnEnded {
            kind: t.reason.kind().to_owned(),
        },
        _ => return None,
    })
}

/// Run `agent`'s queued turns until it is idle ([`Agent::run_until_idle`]) and answer with the
/// last turn's outcome. When `control` is cancelled, the running turn is cancelled
/// ([`Agent::cancel_turn`]: it ends `aborted`, the log stays valid) and the agent's background
/// jobs are stopped; the answer then says `aborted`. Background jobs still running when the
/// agent goes idle are stopped too (the call owns the agent).
pub async fn drive(agent: &Agent, control: &TurnControl) -> Result<Answer, SourceError> {
    let outcome = agent
        .run_until_idle_cancellable(control.cancel_token().cancelled(), RECANCEL_EVERY)
        .await;
    agent.kill_jobs();
    let session_id = agent.session_id().as_str().to_owned();
    match outcome {
        Ok(Some(outcome)) => Ok(Answer {
            session_id,
            final_text: outcome.final_text,
            turn_end: outcome.reason,
        }),
        Ok(None) => Err(SourceError::Failed(format!(
            "session {session_id}: no turn ran"
        ))),
        Err(e) => Err(SourceError::Failed(format!("session {session_id}: {e}"))),
    }
}
