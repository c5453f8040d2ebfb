//! The capture data model: stages, bindings, dispositions — the words receipts and nodes use.
//!
//! A [`Capture`] is what one runtime boundary observed; a [`Binding`] says which origin (an
//! external source, or an earlier outcome node) led to which outcome of this capture, in what
//! role, and — where the path did not reach a result — the explicit [`Disposition`].

use crate::node::Id;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// A runtime boundary where a formation fact is observed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Stage {
    /// The committed assistant event proposing calls.
    #[serde(rename = "assistant/message")]
    AssistantMessage,
    /// One call block of that message (call id, tool name, raw argument string).
    #[serde(rename = "assistant/tool-call")]
    AssistantToolCall,
    /// The durable `tool/call` event.
    #[serde(rename = "tool/call")]
    ToolCall,
    /// The call as the pre-execute policy saw it.
    #[serde(rename = "tools/pre-execute:enter")]
    PreExecuteEnter,
    /// The pre-execute decision.
    #[serde(rename = "tools/pre-execute")]
    PreExecute,
    /// A guard denial.
    #[serde(rename = "tools/guard")]
    Guard,
    /// Dispatch of the body with the effective arguments.
    #[serde(rename = "tools/execute:enter")]
    ExecuteEnter,
    /// The body's returned value or error.
    #[serde(rename = "tools/execute")]
    Execute,
    /// The post-execute decision.
    #[serde(rename = "tools/post-execute")]
    PostExecute,
    /// The frozen final result.
    #[serde(rename = "tools/settled")]
    Settled,
    /// The durable `tool/result` event.
    #[serde(rename = "tool/result")]
    ToolResult,
    /// A child (subagent) session's result joining the parent call that spawned it.
    #[serde(rename = "subagent/join")]
    SubagentJoin,
    /// An assistant attempt that never became a surface message.
    #[serde(rename = "assistant/attempt")]
    AssistantAttempt,
    /// A call closed without an observed outcome (journal close or resume).
    #[serde(rename = "capture/close")]
    Close,
    /// Capture itself failed; the graph is incomplete from here on.
    #[serde(rename = "capture/failure")]
    CaptureFailure,
}

impl Stage {
    /// Spelling in receipts and nodes.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::AssistantMessage => "assistant/message",
            Stage::AssistantToolCall => "assistant/tool-call",
            Stage::ToolCall => "tool/call",
            Stage::PreExecuteEnter => "tools/pre-execute:enter",
            Stage::PreExecute => "tools/pre-execute",
            Stage::Guard => "tools/guard",
            Stage::ExecuteEnter => "tools/execute:enter",
            Stage::Execute => "tools/execute",
            Stage::PostExecute => "tools/post-execute",
            Stage::Settled => "tools/settled",
            Stage::ToolResult => "tool/result",
            Stage::SubagentJoin => "subagent/join",
            Stage::AssistantAttempt => "assistant/attempt",
            Stage::Close => "capture/close",
            Stage::CaptureFailure => "capture/failure",
        }
    }
}

/// Why a path did not reach a result (the explicit disposition of a binding).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Disposition {
    /// Pre-execute policy, an approval or a guard refused the call.
    Denied,
    /// Cancelled (`ABORTED`, `ABORTED_BEFORE_DISPATCH`).
    Cancelled,
    /// Never executed (`UNKNOWN_TOOL`, `TOOL_NOT_STARTED`, `INVALID_ARGS`).
    NotExecuted,
    /// The body was observed to run and failed.
    ExecutionFailed,
    /// An error (or a result) with no observed execute and no known class.
    PolicyOrPreDispatchUnobserved,
    /// Post-execute blocked the result.
    Suppressed,
    /// `TOOL_OUTCOME_UNKNOWN`, or still open when the journal was closed or resumed.
    OutcomeUnobserved,
    /// An assistant attempt that never became a surface message.
    NoSurfaceMessage,
}

impl Disposition {
    /// Spelling in receipts, nodes and query answers.
    pub fn as_str(self) -> &'static str {
        match self {
            Disposition::Denied => "denied",
            Disposition::Cancelled => "cancelled",
            Disposition::NotExecuted => "not_executed",
            Disposition::ExecutionFailed => "execution_failed",
            Disposition::PolicyOrPreDispatchUnobserved => "policy_or_pre_dispatch_unobserved",
            Disposition::Suppressed => "suppressed",
            Disposition::OutcomeUnobserved => "outcome_unobserved",
            Disposition::NoSurfaceMessage => "no_surface_message",
        }
    }
}

/// Where a binding comes from.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Origin {
    /// An external source record (e.g. the model's output for one assistant event).
    Source {
        /// Source label, e.g. `model:<event id>`.
        source: String,
    },
    /// An earlier outcome node, in this run or (for a subagent join) in a child run.
    Outcome {
        /// The outcome (or disposition) node id.
        outcome: Id,
        /// The run holding that node when it is not this run (a child session).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        run_id: Option<Id>,
    },
}

/// One origin → outcome relation of a capture. Facts, and therefore traversal, are per binding.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Binding {
    /// Where it comes from.
    pub origin: Origin,
    /// Ordinal of the outcome (within the capture) it produces.
    pub outcome: u32,
    /// What role the origin plays (`proposes`, `continues`, `nested_in`, `joins_child`…).
    pub relation_role: Cow<'static, str>,
    /// Set when this path did not reach a result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disposition: Option<Disposition>,
}

impl Binding {
    /// A binding from an earlier outcome of this run to outcome 0.
    pub fn continues(outcome_id: &Id, role: &'static str) -> Binding {
        Binding {
            origin: Origin::Outcome {
                outcome: outcome_id.clone(),
                run_id: None,
            },
            outcome: 0,
            relation_role: Cow::Borrowed(role),
            disposition: None,
        }
    }

    /// A binding from an external source to outcome 0.
    pub fn from_source(source: String, role: &'static str) -> Binding {
        Binding {
            origin: Origin::Source { source },
            outcome: 0,
            relation_role: Cow::Borrowed(role),
            disposition: None,
        }
    }
}
