//! keel's agent: the loop, its seams, the inbox, system-prompt assembly and the tool host.
//!
//! An [`Agent`] owns one session log ([`keel_session::PersistentSession`]), one model
//! ([`keel_llm::Provider`]) and one tool [`keel_tools::Pipeline`]. Front ends queue prompts
//! ([`Agent::followup`]) and run them ([`Agent::run_pending`]); everything the model saw and did
//! is in the log. Extensions attach to the seams declared in [`seams`]; what they are handed of
//! the agent is its plugin handle, [`AgentHandle`] ([`handle`]).
#![deny(missing_docs)]

pub mod agent;
pub mod background;
pub mod builder;
mod caller;
pub mod compaction;
pub mod config;
pub mod error;
pub mod handle;
pub mod images;
pub mod inbox;
pub mod modes;
pub mod nested;
pub mod plugin;
pub mod prompt;
pub mod rebuild;
pub mod repeat;
pub mod request;
pub mod seams;
pub mod session_modes;
pub mod side;
mod state;
pub mod subagent;
pub mod titles;
mod turn;

pub use agent::{Agent, PLAN_APPROVED_PROMPT, TOOL_SKIPPED_EVENT, user_message};
pub use builder::AgentBuilder;
pub use caller::HEADLESS_DENIAL;
pub use config::{
    AgentConfig, ApprovalPolicy, Approver, Asker, DEFAULT_APPROVAL_SOURCE, ToolSetup, allow_key,
};
pub use error::AgentError;
pub use handle::{AgentHandle, AgentSlot, WeakHandle, calling_agent};
pub use inbox::{Inbox, InboxMode};
pub use seams::HookRegistry;
pub use turn::TurnOutcome;
