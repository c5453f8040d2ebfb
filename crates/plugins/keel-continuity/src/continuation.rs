//! Bounded max-tokens continuation (opt-in: `max_token_continuations = N`).
//!
//! At `agent/turn-stopping`, when any step of the turn finished at the output limit (sticky:
//! a later step cannot clear it), a fixed continuation text is queued as a **new turn**
//! (`followup`, never a steer) — unless N continuations are already in the log (counted from
//! the durable messages, by their source, so a resume cannot reset the budget) or another
//! turn is already waiting (a newer human message goes first).

use crate::plugin::ID;
use keel_agent::InboxMode;
use keel_agent::modes::SerialHook;
use keel_agent::seams::{StopDecision, TurnStopping};
use keel_protocol::{EventBody, FinishReason, KnownSource, Message, MessageSource};
use keel_session::Session;
use serde_json::{Map, json};
use std::sync::Arc;

/// The text of a continuation turn.
pub const CONTINUATION_TEXT: &str = "Your previous answer was cut off at the output limit. Continue exactly where it stopped; do not repeat what you already wrote.";

/// The `form` of a continuation message's source.
pub const FORM: &str = "continuation";

/// The `agent/turn-stopping` hook.
pub(crate) fn hook(limit: u32) -> SerialHook<TurnStopping, StopDecision> {
    Arc::new(move |t: &TurnStopping| {
        let agent = t.agent.clone();
        let turn = t.turn.0;
        let at_limit = t.reason == keel_protocol::TurnEndReason::MaxTokens;
        Box::pin(async move {
            if !at_limit {
                return StopDecision::Stop;
            }
            let (cut, used) = agent.with_session(|s| (ended_at_limit(s, turn), continuations(s)));
            if cut && used < u64::from(limit) && !agent.has_pending_turn() {
                let mut extra = Map::new();
                extra.insert("form".into(), json!(FORM));
                extra.insert("index".into(), json!(used + 1));
                let source = MessageSource::Known(KnownSource::Plugin {
                    plugin: ID.source().into(),
                    extra,
                });
                let m =
                    Message::user_text(CONTINUATION_TEXT, source, uuid::Uuid::new_v4().to_string());
                // A log that cannot be written ends the loop on its own next write; the
                // continuation is only lost with it.
                let _ = agent.enqueue(InboxMode::Followup, m);
            }
            StopDecision::Stop
        })
    })
}

/// Did any step of `turn` finish at the output limit?
pub fn ended_at_limit(s: &Session, turn: u32) -> bool {
    let mut cut = false;
    for ev in s.whole_event_iter() {
        if let EventBody::AssistantMessage(a) = &ev.body
            && a.turn == keel_protocol::TurnNo(turn)
            && a.finish == Some(FinishReason::MaxTokens)
        {
            cut = true;
        }
    }
    cut
}

/// How many continuation messages the log holds.
pub fn continuations(s: &Session) -> u64 {
    s.whole_event_iter()
        .filter(|ev| match &ev.body {
            EventBody::UserMessage(m) => match &m.source {
                MessageSource::Known(KnownSource::Plugin { plugin, extra }) => {
                    plugin == ID.source()
                        && extra.get("form").and_then(|f| f.as_str()) == Some(FORM)
                }
                _ => false,
            },
            _ => false,
        })
        .count() as u64
}
