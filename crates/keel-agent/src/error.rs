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
    /// An internal task failed (a bug).
    #[error("internal error: {0}")]
    Internal(String),
}
