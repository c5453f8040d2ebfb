//! The arguments of the capture API (what each pipeline stage hands the [`crate::Recorder`])
//! and the classification of calls that did not reach a result into explicit dispositions.

use crate::graph::Snapshot;
use crate::model::Disposition;
use keel_jcs::Payload;
use keel_protocol::ToolErrorCode;

/// How a pre-execute `ask` was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Approval {
    /// The user (or approval policy) approved.
    Approved,
    /// The user (or approval policy) refused.
    Denied,
}

/// The actual pre-execute decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreDecision<'a> {
    /// Allowed without asking.
    Allow,
    /// Denied by policy.
    Deny {
        /// Why.
        reason: &'a str,
    },
    /// Asked; the approval outcome.
    Ask(Approval),
}

/// Dispatch of a tool body.
#[derive(Debug, Clone, Copy)]
pub struct Dispatch<'a> {
    /// The pipeline's opaque execution token for this dispatch.
    pub token: &'a str,
    /// For nested dispatch (a tool calling tools, a subagent), the parent's execution token.
    pub parent_token: Option<&'a str>,
    /// The effective arguments the body receives.
    pub arguments: Payload<'a>,
}

/// What the body returned.
#[derive(Debug, Clone, Copy)]
pub enum ExecuteResult<'a> {
    /// A normalized returned value.
    Value(Payload<'a>),
    /// An error.
    Error {
        /// Pipeline error code, if any.
        code: Option<ToolErrorCode>,
        /// Error text.
        message: &'a str,
    },
}

/// The post-execute decision.
#[derive(Debug, Clone, Copy)]
pub enum PostDecision<'a> {
    /// Accepted unchanged.
    Accept,
    /// The structured value was replaced (e.g. redaction).
    ReplaceValue(Payload<'a>),
    /// Only the model-facing content was replaced (e.g. spill).
    ReplaceContent(Payload<'a>),
    /// The result was blocked.
    Block {
        /// Why.
        reason: &'a str,
    },
}

/// The frozen final result of a call (what `tool/result` will carry).
#[derive(Debug, Clone, Copy)]
pub struct SettledResult<'a> {
    /// Structured value.
    pub value: Payload<'a>,
    /// Model-facing content.
    pub content: Payload<'a>,
    /// Whether the result is an error.
    pub is_error: bool,
    /// Pipeline error code, if any.
    pub error_code: Option<ToolErrorCode>,
}

/// A child (subagent) session's node that joins a parent call.
#[derive(Debug, Clone, Copy)]
pub struct ChildLink<'a> {
    /// The child's run (session) id.
    pub run_id: &'a str,
    /// The child graph's `graph_id` at join time.
    pub graph_id: &'a str,
    /// The child's outcome node that the parent call incorporates.
    pub node_id: &'a str,
}

impl<'a> ChildLink<'a> {
    /// Link to the last outcome of a child snapshot (`None` when it has none).
    pub fn last_outcome_of(child: &'a Snapshot, graph_id: &'a str) -> Option<ChildLink<'a>> {
        Some(ChildLink {
            run_id: child.run_id(),
            graph_id,
            node_id: child.last_outcome()?,
        })
    }
}

/// Observed facts about a call that decide its disposition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CallFacts {
    /// A pre-execute denial, a refused approval or a guard denial was observed.
    pub denied: bool,
    /// A `tools/execute` result was observed.
    pub executed: bool,
    /// That result was an error.
    pub execution_failed: bool,
    /// Post-execute blocked the result.
    pub blocked: bool,
}

/// The disposition of a settled call, or `None` when it reached a result through an observed
/// execute. Conservative: a class is only claimed when observed or named by the error code.
pub fn classify(
    facts: &CallFacts,
    is_error: bool,
    code: Option<ToolErrorCode>,
) -> Option<Disposition> {
    use ToolErrorCode as C;
    if facts.blocked {
        return Some(Disposition::Suppressed);
    }
    if facts.denied {
        return Some(Disposition::Denied);
    }
    match code {
        Some(C::Aborted | C::AbortedBeforeDispatch) => Some(Disposition::Cancelled),
        Some(C::UnknownTool | C::ToolNotStarted | C::InvalidArgs) => Some(Disposition::NotExecuted),
        Some(C::Denied) => Some(Disposition::Denied),
        Some(C::ToolOutcomeUnknown) => Some(Disposition::OutcomeUnobserved),
        Some(_) if facts.executed => Some(Disposition::ExecutionFailed),
        Some(_) => Some(Disposition::PolicyOrPreDispatchUnobserved),
        None if facts.executed && (is_error || facts.execution_failed) => {
            Some(Disposition::ExecutionFailed)
        }
        None if facts.executed => None,
        None => Some(Disposition::PolicyOrPreDispatchUnobserved),
    }
}
