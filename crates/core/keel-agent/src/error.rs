//! Errors of the agent loop.

use keel_session::{AppendError, StoreError};

/// Why the agent loop stopped with an error (model failures are not errors: they end the turn
/// with `turn/end{error}` and are reported in the [`crate::TurnOutcome`]).
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The session refused an event: a bug in keel or a hook; the turn cannot continue.
    #[error("session log refused an event: {0}")]
    Append(#[from] AppendError),
    /// The session file could not be written; nothing more can be committed.
    #[error("session file could not be written: {0}")]
    Store(#[from] StoreError),
    /// A hook stopped the loop (see [`crate::seams::HookError`]).
    #[error(transparent)]
    Hook(#[from] crate::seams::HookError),
    /// The tool pipeline could not be prepared (its spill directory): the agent cannot be
    /// built; report it to the user.
    #[error("cannot prepare the tools: {0}")]
    ToolSetup(#[source] std::io::Error),
    /// A blocking task of the loop (the durability wait) could not be joined: a bug or a
    /// runtime shutting down; the turn cannot continue.
    #[error("{what} failed")]
    Task {
        /// Which task.
        what: &'static str,
        /// Why it failed.
        #[source]
        source: tokio::task::JoinError,
    },
}
