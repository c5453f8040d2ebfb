//! The session modes (default, read-only, auto-approve, plan): what keel offers, which one an
//! agent is in, and setting one (`session/set_mode`, the `mode` config option), durably.

use super::{Live, Server, durable, err};
use crate::map::{MODE_AUTO, MODE_DEFAULT, MODE_PLAN, MODE_READ_ONLY, Mapper, Modes};
use agent_client_protocol::Error;
use agent_client_protocol::v1::schema::{
    ErrorCode, SessionMode, SessionModeState, SessionUpdate, SetSessionModeRequest,
    SetSessionModeResponse,
};
use keel_agent::{Agent, ApprovalPolicy};
use keel_host::AgentSource;
use keel_protocol::sync::Locked;
use keel_tools::SandboxMode;
use std::sync::atomic::Ordering;

/// The session modes and `agent`'s current one; each sets plan mode, the sandbox's narrowing
/// and the approval policy together (see [`set_mode`]).
pub(super) fn modes(agent: &Agent) -> SessionModeState {
    SessionModeState::new(agent_modes(agent).id(), mode_list())
}

/// The session modes keel offers.
pub(super) fn mode_list() -> Vec<SessionMode> {
    vec![
        SessionMode::new(MODE_DEFAULT, "Default").description(Some(
            "Work on the task; calls that need approval are asked about".to_owned(),
        )),
        SessionMode::new(MODE_READ_ONLY, "Read-only").description(Some(
            "Read and answer; file changes are refused and every command is asked about".to_owned(),
        )),
        SessionMode::new(MODE_AUTO, "Auto-approve").description(Some(
            "Work without asking: what would be asked about is approved (within the sandbox)"
                .to_owned(),
        )),
        SessionMode::new(MODE_PLAN, "Plan").description(Some(
            "Read and plan only; the plan is put to you for approval".to_owned(),
        )),
    ]
}

/// What decides `agent`'s mode.
pub(super) fn agent_modes(agent: &Agent) -> Modes {
    Modes {
        plan: agent.in_plan_mode(),
        read_only: agent.sandbox() == SandboxMode::ReadOnly,
        auto: agent.approval() == ApprovalPolicy::Allow,
    }
}

/// The `current_mode_update` that ends a replay whose mode updates (`mapper`'s) left another
/// mode than `agent`'s: the session was started under another configuration, or a mode it
/// kept was read failing closed ([`keel_agent::session_modes`]).
pub(super) fn settle_mode(mapper: &Mapper, agent: &Agent) -> Option<SessionUpdate> {
    let now = agent_modes(agent);
    (mapper.modes() != now).then(|| now.update())
}

/// Put `agent` in `mode`: plan mode on for `plan`, the sandbox narrowed for `read-only`,
/// approvals automatic for `auto`; whatever the mode does not set goes back to the
/// configuration's.
/// (keel_host's, shared with `keel serve`).
pub(super) fn set_mode(agent: &Agent, mode: &str) -> Result<(), Error> {
    keel_host::modes::set_mode(agent, mode).map_err(|e| match e {
        keel_host::modes::ModeError::Unknown(_) => err(ErrorCode::InvalidParams, e.to_string()),
        keel_host::modes::ModeError::Failed(_) => err(ErrorCode::InternalError, e.to_string()),
    })
}

/// `session/set_mode` (or the `mode` config option) on `live`: the mode set, logged and on
/// disk before the answer.
pub(super) async fn apply_mode(live: &Live, mode: &str) -> Result<(), Error> {
    if live.running.load(Ordering::Acquire) {
        return Err(err(
            ErrorCode::InvalidRequest,
            format!(
                "session {} is running a prompt: change its mode when it is done, or cancel it",
                &*live.id.0
            ),
        ));
    }
    // The client knows the mode it asked for: the events of the change are not echoed
    // back as `current_mode_update`s.
    let feed = &live.feed;
    feed.on.store(false, Ordering::Release);
    let set = set_mode(&live.agent, mode);
    feed.mapper.locked().set_modes(agent_modes(&live.agent));
    feed.on.store(true, Ordering::Release);
    set?;
    // The mode is the session's (a later `session/load` keeps it): on disk before the
    // client hears it is set, so that a process killed next does not lose it.
    durable(live, "mode change").await
}

impl<S: AgentSource + 'static> Server<S> {
    pub(super) async fn set_mode(
        &self,
        req: &SetSessionModeRequest,
    ) -> Result<SetSessionModeResponse, Error> {
        let live = self.session(&req.session_id)?;
        apply_mode(&live, &req.mode_id.0).await?;
        Ok(SetSessionModeResponse::new())
    }
}
