//! The agent's mutable loop state ([`LoopState`]) and how a resumed session rebuilds it from
//! its log.

use crate::inbox::Inbox;
use keel_protocol::{EventBody, StepNo, TurnNo};
use serde_json::Value;

/// Plugin id of runtime-context messages.
pub const RUNTIME_CONTEXT_PLUGIN: &str = "keel/runtime-context";

/// Mutable loop state (never held across an await).
#[derive(Debug, Default)]
pub(crate) struct LoopState {
    pub(crate) inbox: Inbox,
    pub(crate) turn: TurnNo,
    /// A turn is running (set when it starts; cleared, together with the check that no step
    /// input waits, just before it ends). Job notices inject while set and wake otherwise.
    pub(crate) running: bool,
    pub(crate) last_runtime: Option<String>,
    pub(crate) repeats: crate::repeat::RepeatedFailures,
    pub(crate) last_header: Option<Value>,
    pub(crate) last_context: Option<keel_protocol::RequestContext>,
    /// The prompt estimate of the last request built: (turn, step, tokens).
    pub(crate) last_estimate: Option<(TurnNo, StepNo, u64)>,
    /// Provider prompt tokens per estimated token, from the last request the provider
    /// reported usage for (never below 1: the estimate only ever grows).
    pub(crate) prompt_factor: Option<f64>,
}

impl LoopState {
    pub(crate) fn rebuild(session: &keel_session::Session) -> LoopState {
        let mut state = LoopState {
            turn: session.turn_state().last_turn,
            ..LoopState::default()
        };
        for ev in session.events() {
            match &ev.body {
                EventBody::InboxSpliced(s) => state.inbox.replay(s),
                // Input still pending at a fork's boundary belongs to the parent.
                EventBody::SessionEndSeed(_) => state.inbox = Inbox::default(),
                EventBody::RequestHeader(h) => state.last_header = Some(h.header.clone()),
                EventBody::RequestContext(c) => state.last_context = Some((**c).clone()),
                EventBody::UserMessage(m)
                    if m.source.plugin_id() == Some(RUNTIME_CONTEXT_PLUGIN) =>
                {
                    state.last_runtime = Some(m.text());
                }
                _ => {}
            }
        }
        state
    }
}
