//! The `data` of every core event type keel models, one struct (or enum) per type, in
//! DeepSeek Harness's JSON shapes (field names, defaults and omissions are part of the format).
//!
//! Data flow: [`super::EventBody`] maps each `type` string to one of these and (de)serializes it
//! with serde; nothing here reads or writes a line by itself.

use crate::ids::{Seq, SessionId, StepNo, TurnNo};
use crate::message::Message;
use crate::stream::{FinishReason, ModelFailure, StreamChunk, TokenUsage};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `turn/start`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnStart {
    /// Turn number, from 1.
    pub turn: TurnNo,
}

/// `turn/end`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnEnd {
    /// Turn number.
    pub turn: TurnNo,
    /// Why the turn ended.
    pub reason: TurnEndReason,
}

/// Why a turn ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum TurnEndReason {
    /// Nothing more was owed.
    Completed,
    /// Cancelled (Ctrl-C, caller abort).
    Aborted {
        /// Who or what aborted.
        #[serde(default)]
        reason: String,
    },
    /// A hook or policy stopped the turn.
    Blocked {
        /// Why.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// A model failure that was not retried (or retries ran out).
    Error {
        /// Failure code.
        code: String,
        /// Detail.
        #[serde(default)]
        message: String,
    },
    /// The model hit its output limit (sticky: the turn cannot continue normally).
    MaxTokens,
    /// Closed by crash repair.
    Interrupted,
}

impl TurnEndReason {
    /// The `kind` string.
    pub fn kind(&self) -> &'static str {
        match self {
            TurnEndReason::Completed => "completed",
            TurnEndReason::Aborted { .. } => "aborted",
            TurnEndReason::Blocked { .. } => "blocked",
            TurnEndReason::Error { .. } => "error",
            TurnEndReason::MaxTokens => "max-tokens",
            TurnEndReason::Interrupted => "interrupted",
        }
    }
}

/// `step/start` and `step/end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepRef {
    /// Turn number.
    pub turn: TurnNo,
    /// Step number within the turn, from 1.
    pub step: StepNo,
}

/// `assistant/chunk`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AssistantChunk {
    /// Turn number.
    pub turn: TurnNo,
    /// Step number.
    pub step: StepNo,
    /// The chunk.
    pub chunk: StreamChunk,
}

/// `assistant/message`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AssistantMessageEvent {
    /// Turn number.
    pub turn: TurnNo,
    /// Step number.
    pub step: StepNo,
    /// The message.
    pub message: Message,
    /// Usage of the request that produced it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<TokenUsage>,
    /// How the stream finished (keel writes it; dsh does not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish: Option<FinishReason>,
    /// The stream was cut short (cancel); the message holds what had streamed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
}

/// `tool/call`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallEvent {
    /// Turn number.
    pub turn: TurnNo,
    /// Step number.
    pub step: StepNo,
    /// Provider call id.
    pub call_id: String,
    /// Tool name.
    pub name: String,
    /// Raw argument string.
    pub arguments: String,
}

/// `tool/result`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResultEvent {
    /// Turn number.
    pub turn: TurnNo,
    /// Step number.
    pub step: StepNo,
    /// The user-role message holding the `tool-result` block.
    pub message: Message,
    /// Structured details not sent to the model (error code, exit status, paths…).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
}

/// Status of a todo item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    /// Not started.
    Pending,
    /// Being worked on.
    InProgress,
    /// Done.
    Completed,
}

/// One todo item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TodoItem {
    /// What to do.
    pub content: String,
    /// Status.
    pub status: TodoStatus,
    /// Present-continuous form shown while in progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_form: Option<String>,
}

/// `todo/write`: the whole list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TodoWrite {
    /// The list.
    pub todos: Vec<TodoItem>,
}

/// `plan/mode`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanModeEvent {
    /// Whether plan mode is active after this event.
    pub active: bool,
    /// The plan proposed with `exit_plan_mode`, when exiting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<String>,
    /// Whether the plan was approved, when exiting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved: Option<bool>,
}

/// `request/header`: the non-history part of requests (system prompt, tools, call config).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestHeader {
    /// The header object (shape owned by the writer; dsh's and keel's differ).
    pub header: Value,
    /// Other fields (dsh writes `reason`), kept as written.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, Value>,
}

/// `request/context`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestContext {
    /// Provider name.
    pub provider: String,
    /// Model name.
    pub model: String,
    /// Context window in tokens.
    pub context_window: u64,
    /// Output token limit, when keel set one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output: Option<u64>,
}

/// `session/end-seed`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionEndSeed {
    /// The session the seed came from.
    pub parent_session: SessionId,
    /// Number of inherited events.
    pub seed_length: u64,
}

/// Which inbox queue changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InboxTarget {
    /// Messages waiting for their own turn (`followup`).
    NextTurn,
    /// Messages joining the next step (`steer`, `inject`).
    NextStep,
}

/// `agent/inbox/spliced`: `removedCount` items removed at `start`, `inserted` put there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InboxSpliced {
    /// Which queue.
    pub target: InboxTarget,
    /// Index of the change.
    pub start: u32,
    /// Items removed.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub removed_count: u32,
    /// Items inserted.
    #[serde(default)]
    pub inserted: Vec<Message>,
}

fn is_zero_u32(v: &u32) -> bool {
    *v == 0
}

/// `llm/retry`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LlmRetry {
    /// Turn number.
    pub turn: TurnNo,
    /// Step number.
    pub step: StepNo,
    /// Retry attempt, from 1.
    pub attempt: u32,
    /// Delay before the retry.
    pub delay_ms: u64,
    /// The failure being retried.
    pub failure: ModelFailure,
}

/// An inclusive seq span.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeqSpan {
    /// First seq.
    pub start: Seq,
    /// Last seq.
    pub end: Seq,
}

/// `compaction/start`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionStart {
    /// `pressure`, `overflow` or `manual`.
    #[serde(default)]
    pub reason: String,
    /// Estimated request tokens that triggered it.
    #[serde(default)]
    pub estimated_tokens: u64,
    /// The model's context window.
    #[serde(default)]
    pub context_window: u64,
}

/// `compaction/summary` and `compaction/prune`: which surface nodes the next event replaces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionSpan {
    /// The span replaced.
    pub shadowed_range: SeqSpan,
    /// Every shadowed seq.
    #[serde(default)]
    pub shadowed_seqs: Vec<Seq>,
    /// Estimated tokens of the shadowed nodes.
    #[serde(default)]
    pub shadowed_token_count: u64,
}

/// `compaction/end`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionEnd {
    /// `compacted`, `skipped` or `failed`.
    #[serde(default)]
    pub outcome: String,
    /// Estimated tokens before.
    #[serde(default)]
    pub before_tokens: u64,
    /// Estimated tokens after.
    #[serde(default)]
    pub after_tokens: u64,
    /// Failure detail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `approval/asked`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalAsked {
    /// The call.
    pub call_id: String,
    /// Tool name.
    pub tool: String,
    /// Why approval is needed.
    #[serde(default)]
    pub reason: String,
}

/// `approval/decided`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalDecided {
    /// The call.
    pub call_id: String,
    /// Approved?
    pub approved: bool,
    /// Who decided: `user`, `policy`, `headless`.
    pub by: String,
    /// Detail shown to the model on denial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// One question of `ask_user_question`, in dsh's shape (snake_case, as the model sends it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Question {
    /// The question's id: answers are keyed by it.
    pub id: String,
    /// The question.
    pub question: String,
    /// A short label shown above it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
    /// The choices; none means a free-text answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<QuestionOption>,
    /// Several choices may be picked.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub multi_select: bool,
}

/// A choice of a [`Question`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuestionOption {
    /// What is shown and answered.
    pub label: String,
    /// What the choice means.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// The answer to one [`Question`]: a label or free text, or the labels picked of a
/// multi-select question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum QuestionAnswer {
    /// One label, or free text.
    One(String),
    /// The labels picked (multi-select).
    Many(Vec<String>),
}

/// `question/asked`: `ask_user_question` puts questions to the user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QuestionAsked {
    /// The call.
    pub call_id: String,
    /// The questions, as the model sent them.
    pub questions: Vec<Question>,
}

/// `question/answered`: what came back for a `question/asked`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QuestionAnswered {
    /// The call.
    pub call_id: String,
    /// Who answered: `user` (answers given), `declined` (the user dismissed the questions),
    /// `headless` (nobody could answer).
    pub by: String,
    /// Answers by question id (questions left unanswered are absent).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub answers: std::collections::BTreeMap<String, QuestionAnswer>,
    /// Why there are no answers, when there are none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `subagent/descriptor`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubagentDescriptor {
    /// Child session id.
    pub child_session: SessionId,
    /// Short description.
    pub description: String,
    /// `spawn` or `fork`.
    pub mode: String,
    /// Runs as a background job.
    #[serde(default)]
    pub background: bool,
    /// The parent call that spawned it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// Child's delegation depth.
    #[serde(default)]
    pub delegation_depth: u32,
    /// What started it when not the `subagent` tool (`workflow`, `ralph`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
}

/// `hook/invoked`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HookInvoked {
    /// Hook event name (`PreToolUse`…).
    pub hook_event: String,
    /// The command line.
    pub command: String,
    /// Tool name, for tool events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
}

/// `hook/result`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HookResult {
    /// Hook event name.
    pub hook_event: String,
    /// The command line.
    pub command: String,
    /// Exit code (absent on timeout or spawn failure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// `allow`, `block`, `none`…
    #[serde(default)]
    pub decision: String,
    /// Message shown to the model or the user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Wall time.
    #[serde(default)]
    pub duration_ms: u64,
}

/// `context/projection`: the history one request carried when a projection policy chose it
/// (`agent/context`). With the surface at this point of the log, it rebuilds the request's
/// messages exactly; `maxTokens` completes the body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextProjection {
    /// Turn number.
    pub turn: TurnNo,
    /// Step number.
    pub step: StepNo,
    /// How many replacements produced the surface the projection was chosen from.
    #[serde(default)]
    pub surface_generation: u64,
    /// Policy name.
    pub policy: String,
    /// The policy and its parameters, as the policy names them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// The included surface nodes, run-length encoded in surface order: `[firstSeq, count]`
    /// is `count` consecutive surface nodes starting at `firstSeq` ([`SeqRuns`]).
    pub include: SeqRuns,
    /// Surface nodes left out.
    pub omitted_count: u64,
    /// The request's `max_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
}

/// Seqs of surface nodes, run-length encoded over surface order: each `[first, count]` is
/// `count` consecutive surface nodes starting at `first`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SeqRuns(pub Vec<[u64; 2]>);

impl SeqRuns {
    /// Encode `include` (a subsequence of `surface`, both in surface order).
    pub fn encode(surface: &[Seq], include: &[Seq]) -> SeqRuns {
        let mut runs: Vec<[u64; 2]> = Vec::new();
        let mut want = include.iter().peekable();
        let mut open = false;
        for s in surface {
            if want.peek() == Some(&s) {
                want.next();
                match runs.last_mut() {
                    Some(run) if open => run[1] += 1,
                    _ => runs.push([s.0, 1]),
                }
                open = true;
            } else {
                open = false;
            }
        }
        SeqRuns(runs)
    }

    /// Decode against `surface`: the included seqs in surface order. `None` when a run does
    /// not fit the surface (a first seq that is not on it, or a count past its end).
    pub fn decode(&self, surface: &[Seq]) -> Option<Vec<Seq>> {
        let mut out = Vec::new();
        for &[first, count] in &self.0 {
            let start = surface.iter().position(|s| s.0 == first)?;
            let count = usize::try_from(count).ok()?;
            out.extend_from_slice(surface.get(start..start.checked_add(count)?)?);
        }
        Some(out)
    }
}

/// `sandbox/mode`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SandboxModeEvent {
    /// Mode name.
    pub mode: String,
    /// How far the OS enforces the mode for commands (keel's extension; dsh writes none), e.g.
    /// `landlock (ABI 7): writes confined, network open` or `none: commands run unconfined (…)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enforcement: Option<String>,
}

/// `approval/policy`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalPolicyEvent {
    /// Policy name.
    pub policy: String,
}

/// `permission/preset` (dsh).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PermissionPresetEvent {
    /// Preset name.
    pub preset: String,
}

/// `session/title`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionTitle {
    /// The title.
    pub title: String,
    /// Messages it was made from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub message_seqs: Vec<Seq>,
    /// How it was made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<Value>,
}

/// `surface/rewind` (keel): the model-visible history returns to what it was just before event
/// `toSeq` — the surface nodes are those it had then, nothing is deleted from the log. Only
/// between turns, and only to a point between turns. Not ignorable: a reader that skipped it
/// would give the model the rewound history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SurfaceRewind {
    /// The surface becomes what it was just before this event.
    pub to_seq: Seq,
    /// The turn whose prompt the point is just before, when it is one (for readers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<TurnNo>,
    /// Why: `"rewind"`, or `"undo"` for the rewind of a rewind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}
