//! The pipeline's view of the agent loop ([`ToolCaller`]) and the per-call result it hands
//! back ([`ToolOutcome`]).
//!
//! The loop owns the session log: the pipeline never appends events itself. It tells the caller
//! when a call starts (`tool/call`), when to flush durably (before a body runs), when to ask
//! the user, which events tools emit (`todo/write`, `plan/mode`) and, in model order, each
//! frozen final result (`tools/settled`), after which the caller appends `tool/result`.

use crate::jobs::JobControl;
use async_trait::async_trait;
use keel_protocol::{
    ContentBlock, EventBody, Question, QuestionAnswer, ToolCallBlock, ToolErrorCode,
};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The answer to an approval request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalOutcome {
    /// Go ahead.
    Approved,
    /// Refused (by the user or a policy).
    Denied {
        /// Shown to the model, when given.
        reason: Option<String>,
    },
    /// Nobody could answer now: a headless run (no approver to ask) or one whose policy is
    /// never to ask. A caller that needs the answer at once treats it as a refusal; one that
    /// can leave the decision for later does so (`exit_plan_mode` hands the plan to the user
    /// and ends the turn, see [`ToolCaller::hand_off`]).
    Unanswered {
        /// Why nobody could answer (shown to the model when the call is refused).
        reason: Option<String>,
    },
}

impl ApprovalOutcome {
    /// True only for [`ApprovalOutcome::Approved`].
    pub fn is_approved(&self) -> bool {
        matches!(self, ApprovalOutcome::Approved)
    }
}

/// What came back for `ask_user_question`'s questions ([`ToolCaller::ask_user`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UserAnswer {
    /// The user answered; questions left unanswered are absent.
    Answered(BTreeMap<String, QuestionAnswer>),
    /// The user dismissed the questions.
    Declined {
        /// What they said, when anything.
        reason: Option<String>,
    },
    /// Nobody could answer: a headless run, a closed input, a client that cannot ask.
    Unanswered {
        /// Why (shown to the model).
        reason: String,
    },
}

/// Why a caller with nobody to ask answers [`UserAnswer::Unanswered`].
pub const NO_PERSON_PRESENT: &str = "no person is present to answer (headless run)";

/// A tool's request to end the turn after the current step and hand the work back to the user,
/// who decides how it goes on (a plan nobody could approve now). The step's other calls still
/// run and are answered; no further model request is made in this turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handoff {
    /// Why the turn ends: logged in `turn/end` (kind `blocked`).
    pub reason: String,
    /// What the user should read: the turn's answer (the plan).
    pub answer: String,
}

/// The final result of one call, as committed: the caller turns it into a `tool/result` event.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutcome {
    /// The call this answers.
    pub call_id: String,
    /// Model-facing content.
    pub content: Vec<ContentBlock>,
    /// Whether the call failed.
    pub is_error: bool,
    /// Structured details not sent to the model: `code` (for errors), `spill` (path of the
    /// full text when spilled), and the fields of the tool's own value (exit code…).
    pub meta: Option<Value>,
}

impl ToolOutcome {
    /// The error code in `meta.code`, if any.
    pub fn code(&self) -> Option<&str> {
        self.meta.as_ref()?.get("code")?.as_str()
    }

    /// Concatenated text of the content's text blocks.
    pub fn text(&self) -> String {
        keel_protocol::text_of(&self.content)
    }

    /// An error outcome whose text is `CODE: message`.
    pub fn error(call_id: &str, code: ToolErrorCode, message: &str) -> Self {
        ToolOutcome {
            call_id: call_id.to_owned(),
            content: vec![ContentBlock::text(format!("{code}: {message}"))],
            is_error: true,
            meta: Some(serde_json::json!({ "code": code.as_str() })),
        }
    }
}

/// The agent loop as seen by the pipeline. Every method is awaited in place.
#[async_trait]
pub trait ToolCaller: Send + Sync {
    /// A call enters the pipeline (in model order, before any of its phases): append
    /// `tool/call`.
    async fn call_started(&self, call: &ToolCallBlock);

    /// Durability checkpoint: called before a tool body runs; flush the log.
    async fn checkpoint(&self);

    /// A pre-execute hook (or a tool such as `exit_plan_mode`) asks for approval. Log
    /// `approval/asked` / `approval/decided`; a caller with nobody to ask answers
    /// [`ApprovalOutcome::Unanswered`].
    async fn ask_approval(&self, call: &ToolCallBlock, reason: &str) -> ApprovalOutcome;

    /// A call asks to run outside the sandbox ([`crate::escalation`]); `reason` names the
    /// mode and carries the model's justification. Log it as [`ToolCaller::ask_approval`]
    /// does, but only a person may approve: the `auto` policy does not. Default: nobody is
    /// asked, [`ApprovalOutcome::Unanswered`].
    async fn ask_escalation(&self, _call: &ToolCallBlock, _reason: &str) -> ApprovalOutcome {
        ApprovalOutcome::Unanswered {
            reason: Some("nobody here can approve running outside the sandbox".into()),
        }
    }

    /// `ask_user_question` puts `questions` to the user. Log `question/asked` /
    /// `question/answered`. Default: [`UserAnswer::Unanswered`] (nobody to ask).
    async fn ask_user(&self, _call: &ToolCallBlock, _questions: &[Question]) -> UserAnswer {
        UserAnswer::Unanswered {
            reason: NO_PERSON_PRESENT.to_owned(),
        }
    }

    /// A tool emits an event (`todo/write`, `plan/mode`): append it.
    async fn emit(&self, body: EventBody);

    /// The frozen final result of `call`, in model order, after the `tools/settled` hooks.
    async fn commit_result(&self, call: &ToolCallBlock, outcome: &ToolOutcome);

    /// A tool ends the turn after this step, handing the work back to the user (see
    /// [`Handoff`]). The first hand-off of a step wins. Default: ignored (a caller without turns).
    fn hand_off(&self, _handoff: Handoff) {}

    /// Background job control for the agent running this call, scoped to it; `None` (the
    /// default) when it has no job service, and tools then refuse to start background work.
    fn jobs(&self) -> Option<Arc<dyn JobControl>> {
        None
    }

    /// Who is calling: the id of the agent running the call, for tools whose identity comes
    /// from the caller (memory scopes, the session's own history) — no tool takes a session
    /// id from the model. keel-agent turns it into the agent's handle (`calling_agent`).
    /// `None` (the default) outside an agent.
    fn caller(&self) -> Option<CallerId> {
        None
    }
}

/// The id of the agent running a tool call ([`ToolCaller::caller`]): an opaque number the
/// agent loop hands out, one per agent, never reused within a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CallerId(u64);

impl CallerId {
    /// The id numbered `n`.
    pub const fn new(n: u64) -> Self {
        CallerId(n)
    }

    /// Its number.
    pub const fn get(self) -> u64 {
        self.0
    }
}

/// A caller that records nothing and answers no approval (headless without a log). For
/// benchmarks, tests and one-off tool runs.
#[derive(Debug, Default, Clone, Copy)]
pub struct NullCaller;

#[async_trait]
impl ToolCaller for NullCaller {
    async fn call_started(&self, _call: &ToolCallBlock) {}
    async fn checkpoint(&self) {}
    async fn ask_approval(&self, _call: &ToolCallBlock, _reason: &str) -> ApprovalOutcome {
        ApprovalOutcome::Unanswered {
            reason: Some("no one can approve in headless mode".into()),
        }
    }
    async fn emit(&self, _body: EventBody) {}
    async fn commit_result(&self, _call: &ToolCallBlock, _outcome: &ToolOutcome) {}
}
