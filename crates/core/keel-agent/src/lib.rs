//! keel's agent: the loop, its seams, the inbox, system-prompt assembly and the tool host.
//!
//! An [`Agent`] owns one session log ([`keel_session::PersistentSession`]), one model
//! ([`keel_llm::Provider`]) and one tool [`keel_tools::Pipeline`]. Front ends queue prompts
//! ([`Agent::followup`]) and run them ([`Agent::run_pending`]); everything the model saw and did
//! is in the log. Extensions attach to the seams declared in [`seams`].
#![deny(missing_docs)]

pub mod agent;
pub mod background;
pub mod compaction;
pub mod error;
mod host;
pub mod inbox;
pub mod modes;
pub mod plugin;
pub mod prompt;
pub mod rebuild;
pub mod repeat;
pub mod request;
pub mod seams;
pub mod session_modes;
pub mod subagent;
mod turn;

pub use agent::{
    Agent, AgentBuilder, AgentConfig, AgentSlot, ApprovalPolicy, Approver, PLAN_APPROVED_PROMPT,
    TOOL_SKIPPED_EVENT, ToolSetup, WeakAgent, allow_key, user_message,
};
pub use error::AgentError;
pub use host::{HEADLESS_DENIAL, calling_agent};
pub use inbox::{Inbox, InboxMode};
pub use seams::HookRegistry;
pub use turn::TurnOutcome;
