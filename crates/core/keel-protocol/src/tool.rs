//! Tool schemas and the error codes a tool result can carry.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;

/// The ignorable event Code Mode logs when a `run_code` program's sub-call enters the
/// pipeline: `{rootCallId, parentCallId, subCallId, name, arguments}` (the DeepSeek Harness's
/// name and payload). Crash repair, provenance and front ends read it.
pub const CODE_DISPATCH_START_EVENT: &str = "tool/code-dispatch-start";
/// The ignorable event Code Mode logs when a program's sub-call settles: the ids and name of
/// [`CODE_DISPATCH_START_EVENT`] with `isError` and `content`.
pub const CODE_DISPATCH_EVENT: &str = "tool/code-dispatch";

/// What the model is told about a tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSchema {
    /// Tool name, e.g. `read`.
    pub name: String,
    /// What the tool does and when to use it.
    pub description: String,
    /// JSON Schema of the argument object.
    pub parameters: Value,
}

/// Error codes of tool results produced by the pipeline rather than by a tool body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ToolErrorCode {
    /// The model named a tool that is not registered.
    UnknownTool,
    /// The argument string is not valid JSON or does not match the schema.
    InvalidArgs,
    /// The tool produced output that cannot be rendered.
    InvalidToolOutput,
    /// Policy or the user refused the call.
    Denied,
    /// Cancelled while running.
    Aborted,
    /// Cancelled before the body was dispatched.
    AbortedBeforeDispatch,
    /// The body ran past its timeout.
    ToolTimeout,
    /// Crash repair: the call was never started.
    ToolNotStarted,
    /// Crash repair: the call was started and its outcome is unknown.
    ToolOutcomeUnknown,
    /// The tool body itself failed.
    ToolFailed,
}

impl ToolErrorCode {
    /// Spelling used in results and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolErrorCode::UnknownTool => "UNKNOWN_TOOL",
            ToolErrorCode::InvalidArgs => "INVALID_ARGS",
            ToolErrorCode::InvalidToolOutput => "INVALID_TOOL_OUTPUT",
            ToolErrorCode::Denied => "DENIED",
            ToolErrorCode::Aborted => "ABORTED",
            ToolErrorCode::AbortedBeforeDispatch => "ABORTED_BEFORE_DISPATCH",
            ToolErrorCode::ToolTimeout => "TOOL_TIMEOUT",
            ToolErrorCode::ToolNotStarted => "TOOL_NOT_STARTED",
            ToolErrorCode::ToolOutcomeUnknown => "TOOL_OUTCOME_UNKNOWN",
            ToolErrorCode::ToolFailed => "TOOL_FAILED",
        }
    }
}

impl fmt::Display for ToolErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
