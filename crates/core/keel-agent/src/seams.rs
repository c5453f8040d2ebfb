//! The agent's seams, declared once with their mode and payload.
//!
//! | seam | mode | payload → result |
//! |---|---|---|
//! | `agent/inbox/inserted` | observe | [`InboxInserted`] |
//! | `prompt/section` | contributors | [`PromptCtx`] → system-prompt sections |
//! | `prompt/context` | contributors | [`PromptCtx`] → runtime-context facts |
//! | `agent/runtime-context` | serial (sync) | [`RuntimeContext`] → sourced messages after the snapshot |
//! | `agent/pre-step` | waterfall | [`PreStep`] → [`PreStepOutcome`] |
//! | `agent/context` | waterfall | [`ContextRequest`] → [`Projection`] |
//! | `agent/request` | waterfall | [`CallConfig`] → [`CallConfig`] |
//! | `llm/request` | observe (awaited) | [`LlmRequest`] (the exact final request) |
//! | `llm/stream` | waterfall | [`StreamCall`] → [`ChunkStream`] |
//! | `agent/request-error` | waterfall | [`RequestError`] → [`ErrorDecision`] |
//! | `agent/turn-stopping` | serial | [`TurnStopping`] → [`StopDecision`] |
//! | `session/event` | observe | committed [`SessionEvent`] |
//! | `session/flush` | serial (awaited) | [`FlushPoint`] |
//! | `subagent/started`, `subagent/finished` | observe | [`SubagentNotice`] |
//! | `tools/*` | see `keel_tools::seams` | held in [`HookRegistry::tools`] |
//!
//! Hooks that need the agent (to read the session, append their own events, queue messages)
//! receive its plugin handle, an [`AgentHandle`], in their payload.

use crate::handle::AgentHandle;
use crate::inbox::InboxMode;
use crate::modes::{Observers, Serial, Waterfall};
use crate::prompt::PromptSection;
use keel_llm::{ChatRequest, ChunkStream};
use keel_protocol::{CallId, Message, ModelFailure, Seq, SessionEvent, SessionId, StepNo, TurnNo};
use keel_session::DerivedMessage;
use keel_tools::ToolHooks;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// `agent/inbox/inserted`: a message entered the inbox.
#[derive(Debug, Clone)]
pub struct InboxInserted {
    /// How it entered.
    pub mode: InboxMode,
    /// The message.
    pub message: Message,
}

/// What `prompt/section` and `prompt/context` contributors see.
#[derive(Debug, Clone)]
pub struct PromptCtx {
    /// Model name.
    pub model: String,
    /// Session id.
    pub session: SessionId,
    /// Plan mode active?
    pub plan_mode: bool,
}

/// A contributor of prompt sections or runtime facts.
pub type Contributor = Arc<dyn Fn(&PromptCtx) -> Vec<PromptSection> + Send + Sync>;

/// `agent/runtime-context`: the step's runtime context is being assembled — before the step's
/// input is logged, and again before a same-step retry (after an overflow compaction, say).
/// Hooks return sourced `user` messages to log right after the runtime-context snapshot (on the
/// wire they join the step's input into one user message); most calls return nothing, and a
/// hook must make that case cheap (it runs before every request).
#[derive(Clone)]
pub struct RuntimeContext {
    /// The agent (its plugin handle).
    pub agent: AgentHandle,
    /// Turn number.
    pub turn: TurnNo,
    /// Step number.
    pub step: StepNo,
    /// Attempt within the step (0 first, then retries).
    pub attempt: u32,
}

/// A hook failed in a way that must stop the loop (a plugin's integrity check, say): the turn
/// does not continue and the message reaches the user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("plugin {plugin}: {message}")]
pub struct HookError {
    /// Plugin id.
    pub plugin: String,
    /// What failed and what to do (names the file, the event or the setting).
    pub message: String,
}

/// An `agent/runtime-context` hook.
pub type RuntimeHook =
    Arc<dyn Fn(&RuntimeContext) -> Result<Vec<Message>, HookError> + Send + Sync>;

/// `agent/pre-step`: the messages claimed for this step, before they are logged.
#[derive(Clone)]
pub struct PreStep {
    /// The agent (its plugin handle).
    pub agent: AgentHandle,
    /// Turn number.
    pub turn: TurnNo,
    /// Step number.
    pub step: StepNo,
    /// Messages about to enter the surface.
    pub messages: Vec<Message>,
}

/// Result of `agent/pre-step`.
#[derive(Debug, Clone)]
pub enum PreStepOutcome {
    /// Enter the step with these messages.
    Enter(Vec<Message>),
    /// Do not run the step; the turn ends `blocked` with this reason.
    Reject(String),
}

/// `agent/context`: choose which surface nodes a request includes.
#[derive(Clone)]
pub struct ContextRequest {
    /// The agent (its plugin handle).
    pub agent: AgentHandle,
    /// Turn number.
    pub turn: TurnNo,
    /// Step number.
    pub step: StepNo,
    /// How many replacements produced `nodes` (the host recomputes when it changes while a
    /// listener runs).
    pub generation: u64,
    /// Current surface nodes, in order.
    pub nodes: Arc<[DerivedMessage]>,
    /// Seqs that must be included (the current turn's nodes). The host adds them back, with
    /// their tool-call units, if a projection drops them.
    pub required: Vec<Seq>,
}

/// A projection: which surface seqs to send. The host refuses one that names a seq not on the
/// surface, names one twice, breaks surface order, or splits an assistant message's tool calls
/// from their results (the whole surface is sent instead, and the refusal logged); it adds the
/// required seqs back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Projection {
    /// Policy name (`default` means "everything"; anything else is logged as
    /// `context/projection`).
    pub policy: String,
    /// Included seqs, in surface order.
    pub include: Vec<Seq>,
    /// The policy and its parameters (logged with the projection).
    pub revision: Option<String>,
}

impl Projection {
    /// The whole surface (`all` its seqs): the default.
    pub fn whole(all: Vec<Seq>) -> Projection {
        Projection {
            policy: crate::request::DEFAULT_POLICY.into(),
            include: all,
            revision: None,
        }
    }
}

/// `agent/request`: call configuration for the step's request.
#[derive(Debug, Clone, PartialEq)]
pub struct CallConfig {
    /// Model.
    pub model: String,
    /// Output budget.
    pub max_tokens: Option<u64>,
    /// Thinking on/off.
    pub thinking: Option<bool>,
    /// Reasoning effort.
    pub reasoning_effort: Option<String>,
    /// Temperature.
    pub temperature: Option<f64>,
}

/// `llm/request`: the exact final request of a step, with its identity.
#[derive(Debug, Clone)]
pub struct LlmRequest {
    /// Session id.
    pub session: SessionId,
    /// Turn number.
    pub turn: TurnNo,
    /// Step number.
    pub step: StepNo,
    /// Attempt within the step (0 first, then retries).
    pub attempt: u32,
    /// The request as it will be sent.
    pub request: ChatRequest,
}

/// `llm/stream`: start the model call.
#[derive(Debug, Clone)]
pub struct StreamCall {
    /// The request.
    pub request: ChatRequest,
    /// Cancels the call.
    pub cancel: CancellationToken,
}

/// `agent/request-error`: a model call failed.
#[derive(Clone)]
pub struct RequestError {
    /// The agent (its plugin handle).
    pub agent: AgentHandle,
    /// Turn number.
    pub turn: TurnNo,
    /// Step number.
    pub step: StepNo,
    /// Retries already made in this step.
    pub attempt: u32,
    /// The failure.
    pub failure: ModelFailure,
}

/// Result of `agent/request-error`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorDecision {
    /// Rebuild the request (runtime context included) and try again after `delay`, in the same
    /// step; logged as `llm/retry`.
    Retry {
        /// Wait first.
        delay: Duration,
    },
    /// End the turn with the failure.
    GiveUp,
}

/// `agent/turn-stopping`: the turn has nothing more owed. Runs when a turn completes and when
/// it ends at the output limit (`reason`); after a max-tokens end the turn ends whatever the
/// hooks decide (a [`StopDecision::Continue`] is ignored — more work is a new turn, queued with
/// [`AgentHandle::enqueue`]).
#[derive(Clone)]
pub struct TurnStopping {
    /// The agent (its plugin handle).
    pub agent: AgentHandle,
    /// Turn number.
    pub turn: TurnNo,
    /// How the turn would end: `Completed` or `MaxTokens`.
    pub reason: keel_protocol::TurnEndReason,
    /// The final assistant text of the turn.
    pub final_text: String,
}

/// Result of one `agent/turn-stopping` hook.
#[derive(Debug, Clone, PartialEq)]
pub enum StopDecision {
    /// Let the turn end.
    Stop,
    /// Keep working: these messages join the next step.
    Continue(Vec<Message>),
}

/// `session/flush`: a durability checkpoint was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushPoint {
    /// Before a model request.
    BeforeRequest,
    /// Before a top-level tool body.
    BeforeToolBody,
    /// At a step boundary.
    StepBoundary,
    /// At a turn boundary.
    TurnBoundary,
}

/// `subagent/started` / `subagent/finished`.
#[derive(Debug, Clone)]
pub struct SubagentNotice {
    /// Parent session.
    pub parent: SessionId,
    /// Child session.
    pub child: SessionId,
    /// The call that spawned it.
    pub call_id: Option<CallId>,
    /// Description.
    pub description: String,
    /// Final answer (finished only).
    pub result: Option<String>,
}

/// `subagent/build`: the child agent about to be built.
#[derive(Debug, Clone)]
pub struct ChildBuild {
    /// Parent session.
    pub parent: SessionId,
    /// Child session (its log exists; the agent does not yet).
    pub child: SessionId,
    /// The parent's call that spawns it.
    pub call_id: CallId,
    /// The child's delegation depth (1 for a child of a top-level session).
    pub depth: u32,
}

/// What a `subagent/build` hook adds to the child agent.
#[derive(Default)]
pub struct ChildSetup {
    /// Hooks scoped to the child (not inherited by its own children).
    pub hooks: HookRegistry,
    /// Tools of the child; each replaces an inherited tool of the same name (e.g. a query tool
    /// bound to the child's own session instead of the parent's).
    pub tools: Vec<Arc<dyn keel_tools::Tool>>,
    /// Names of the parent's tools the child does not inherit (the job tools: children own no
    /// jobs).
    pub withheld: Vec<String>,
}

/// A `subagent/build` hook: fills the child's [`ChildSetup`], e.g. with a per-session journal.
/// It runs from the parent's layered hooks, so a hook registered agent-scoped sees only that
/// agent's own children.
pub type ChildHook = Arc<dyn Fn(&ChildBuild, &mut ChildSetup) + Send + Sync>;

/// Every seam's registered hooks.
#[derive(Clone, Default)]
pub struct HookRegistry {
    /// `agent/inbox/inserted`.
    pub inbox_inserted: Observers<InboxInserted>,
    /// `prompt/section`.
    pub prompt_sections: Vec<Contributor>,
    /// `prompt/context`.
    pub prompt_context: Vec<Contributor>,
    /// `agent/runtime-context`.
    pub runtime_context: Vec<RuntimeHook>,
    /// `agent/pre-step`.
    pub pre_step: Waterfall<PreStep, PreStepOutcome>,
    /// `agent/context`.
    pub context: Waterfall<ContextRequest, Projection>,
    /// `agent/request`.
    pub request: Waterfall<CallConfig, CallConfig>,
    /// `llm/request`.
    pub llm_request: Serial<LlmRequest, ()>,
    /// `llm/stream`.
    pub llm_stream: Waterfall<StreamCall, ChunkStream>,
    /// `agent/request-error`.
    pub request_error: Waterfall<RequestError, ErrorDecision>,
    /// `agent/turn-stopping`.
    pub turn_stopping: Serial<TurnStopping, StopDecision>,
    /// `session/event`.
    pub session_event: Observers<SessionEvent>,
    /// `session/flush`.
    pub session_flush: Serial<FlushPoint, ()>,
    /// `subagent/started`.
    pub subagent_started: Observers<SubagentNotice>,
    /// `subagent/finished`.
    pub subagent_finished: Observers<SubagentNotice>,
    /// `subagent/build`.
    pub subagent_build: Vec<ChildHook>,
    /// The tool pipeline's seams.
    pub tools: ToolHooks,
}

impl HookRegistry {
    /// Global hooks followed by one agent's hooks.
    pub fn layered(global: &HookRegistry, agent: &HookRegistry) -> HookRegistry {
        let mut prompt_sections = global.prompt_sections.clone();
        prompt_sections.extend(agent.prompt_sections.iter().cloned());
        let mut prompt_context = global.prompt_context.clone();
        prompt_context.extend(agent.prompt_context.iter().cloned());
        let mut runtime_context = global.runtime_context.clone();
        runtime_context.extend(agent.runtime_context.iter().cloned());
        let mut subagent_build = global.subagent_build.clone();
        subagent_build.extend(agent.subagent_build.iter().cloned());
        HookRegistry {
            inbox_inserted: global.inbox_inserted.extended(&agent.inbox_inserted),
            prompt_sections,
            prompt_context,
            runtime_context,
            pre_step: global.pre_step.extended(&agent.pre_step),
            context: global.context.extended(&agent.context),
            request: global.request.extended(&agent.request),
            llm_request: global.llm_request.extended(&agent.llm_request),
            llm_stream: global.llm_stream.extended(&agent.llm_stream),
            request_error: global.request_error.extended(&agent.request_error),
            turn_stopping: global.turn_stopping.extended(&agent.turn_stopping),
            session_event: global.session_event.extended(&agent.session_event),
            session_flush: global.session_flush.extended(&agent.session_flush),
            subagent_started: global.subagent_started.extended(&agent.subagent_started),
            subagent_finished: global.subagent_finished.extended(&agent.subagent_finished),
            subagent_build,
            tools: ToolHooks::layered(&global.tools, &agent.tools),
        }
    }
}
