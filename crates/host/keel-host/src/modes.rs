//! keel's session modes, as every front end offers them (an editor's `session/set_mode`, the
//! service's `POST …/mode`): `default`, `read-only`, `auto` and `plan`. Each sets plan mode,
//! the sandbox's narrowing and the approval policy together ([`set_mode`]); each change is
//! logged by the agent (`plan/mode`, `sandbox/mode`, `approval/policy`), so a resumed session
//! keeps it ([`keel_agent::session_modes`]).

use keel_agent::{Agent, AgentError, ApprovalPolicy};
use keel_tools::SandboxMode;

/// The session mode id of keel's plan mode.
pub const MODE_PLAN: &str = "plan";
/// The session mode id of keel's normal mode (the approval policy decides what is asked).
pub const MODE_DEFAULT: &str = "default";
/// The session mode id of the sandbox narrowed to read-only: file changes are refused and
/// every command is asked about.
pub const MODE_READ_ONLY: &str = "read-only";
/// The session mode id of approving without asking whatever the sandbox lets keel ask about.
pub const MODE_AUTO: &str = "auto";

/// Every mode id, in the order front ends list them.
pub const MODES: [&str; 4] = [MODE_DEFAULT, MODE_READ_ONLY, MODE_AUTO, MODE_PLAN];

/// Why a mode was not set.
#[derive(Debug, thiserror::Error)]
pub enum ModeError {
    /// No mode of that id.
    #[error(
        "no session mode {0:?}: keel has {MODE_DEFAULT:?}, {MODE_READ_ONLY:?}, {MODE_AUTO:?} \
         and {MODE_PLAN:?}"
    )]
    Unknown(String),
    /// The agent could not set it (its log could not be written).
    #[error("keel: {0}")]
    Failed(#[from] AgentError),
}

/// Put `agent` in `mode`: plan mode on for `plan`, the sandbox narrowed for `read-only`,
/// approvals automatic for `auto`; whatever the mode does not set goes back to the
/// configuration's.
pub fn set_mode(agent: &Agent, mode: &str) -> Result<(), ModeError> {
    let configured = agent.config().approval;
    let (plan, read_only, approval) = match mode {
        MODE_DEFAULT => (false, false, configured),
        MODE_READ_ONLY => (false, true, configured),
        MODE_AUTO => (false, false, ApprovalPolicy::Allow),
        MODE_PLAN => (true, false, configured),
        other => return Err(ModeError::Unknown(other.to_owned())),
    };
    agent.set_read_only(read_only)?;
    agent.set_approval(approval)?;
    agent.set_plan_mode(plan)?;
    Ok(())
}

/// The mode `agent` is in: plan mode wins, then the read-only sandbox, then automatic
/// approvals; else `default`.
pub fn mode_of(agent: &Agent) -> &'static str {
    if agent.in_plan_mode() {
        MODE_PLAN
    } else if agent.sandbox() == SandboxMode::ReadOnly {
        MODE_READ_ONLY
    } else if agent.approval() == ApprovalPolicy::Allow {
        MODE_AUTO
    } else {
        MODE_DEFAULT
    }
}
