//! The error a tool body returns. Every variant maps to a [`ToolErrorCode`] and to a text the
//! model can read (`CODE: message`); the pipeline turns it into an error [`crate::ToolOutcome`],
//! so no tool error ever aborts a turn.

use keel_protocol::ToolErrorCode;
use serde_json::Value;
use std::path::PathBuf;

/// Why a tool body failed. Returned by [`crate::Tool::execute`]; the pipeline surfaces it to
/// the model as an error result carrying [`ToolError::code`] in `meta.code`.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// Arguments passed the schema but make no sense (bad regex, offset past the end). The
    /// model should fix its arguments and retry.
    #[error("{0}")]
    InvalidArgs(String),
    /// Policy refused the operation (path outside the workspace, read-only sandbox, plan mode).
    /// The model should not retry the same call.
    #[error("{0}")]
    Denied(String),
    /// The body ran past its time limit. `message` carries what output there was.
    #[error("{message}")]
    Timeout {
        /// Readable explanation, with the tail of any output.
        message: String,
        /// Structured details (spill path of the full output…).
        meta: Option<Value>,
    },
    /// The call was cancelled while its body ran; children were killed.
    #[error("{0}")]
    Aborted(String),
    /// A filesystem operation failed on `path`. The model may inspect and retry.
    #[error("{op} {}: {source}", path.display())]
    Io {
        /// What was attempted (`reading`, `writing`…).
        op: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// Any other failure of the body, explained for the model.
    #[error("{0}")]
    Failed(String),
    /// A failure with a tool-specific code the model must see (`MEMORY_REVISION_CONFLICT`,
    /// `VARIABLE_REVISION_CONFLICT`…): the model reads `CODE: message` with this code; the
    /// result's `meta.code` stays `INVALID_ARGS` (the model should re-read and retry) and
    /// `meta.error` carries this code, beside the other fields of `meta`.
    #[error("{message}")]
    Coded {
        /// The specific code (`UPPER_SNAKE`).
        code: &'static str,
        /// Readable explanation.
        message: String,
        /// `{"error": code, ...details}`.
        meta: Value,
    },
}

impl ToolError {
    /// The error code recorded in `meta.code`.
    pub fn code(&self) -> ToolErrorCode {
        match self {
            ToolError::InvalidArgs(_) | ToolError::Coded { .. } => ToolErrorCode::InvalidArgs,
            ToolError::Denied(_) => ToolErrorCode::Denied,
            ToolError::Timeout { .. } => ToolErrorCode::ToolTimeout,
            ToolError::Aborted(_) => ToolErrorCode::Aborted,
            ToolError::Io { .. } | ToolError::Failed(_) => ToolErrorCode::ToolFailed,
        }
    }

    /// Structured details beyond the code, if any.
    pub fn meta(&self) -> Option<&Value> {
        match self {
            ToolError::Timeout { meta, .. } => meta.as_ref(),
            ToolError::Coded { meta, .. } => Some(meta),
            _ => None,
        }
    }

    /// Shorthand for an [`ToolError::Io`] error.
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        ToolError::Io {
            op,
            path: path.into(),
            source,
        }
    }

    /// A [`ToolError::Coded`] error: `details` (an object, or `null`) gains `"error": code`.
    pub fn coded(code: &'static str, message: impl Into<String>, details: Value) -> Self {
        let mut meta = match details {
            Value::Object(m) => m,
            _ => serde_json::Map::new(),
        };
        meta.insert("error".into(), Value::from(code));
        ToolError::Coded {
            code,
            message: message.into(),
            meta: Value::Object(meta),
        }
    }

    /// Model-facing text: `CODE: message` (a [`ToolError::Coded`] error shows its own code).
    pub fn model_text(&self) -> String {
        match self {
            ToolError::Coded { code, .. } => format!("{code}: {self}"),
            _ => format!("{}: {self}", self.code()),
        }
    }
}
