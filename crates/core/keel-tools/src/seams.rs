//! The tool seams: `tools/pre-execute`, `tools/guard`, `tools/execute`, `tools/post-execute`
//! and `tools/settled`, declared here with their modes and payloads.
//!
//! Hooks are trait objects collected in a [`ToolHooks`] (cloneable; [`ToolHooks::layered`]
//! puts global hooks before an agent's own). Every hook receives a [`HookContext`]: the call,
//! the resolved tool's scheduling/effect, the dispatch's unique [`ExecToken`] and, for nested
//! dispatch (a tool that runs tools), the parent dispatch's token.
//!
//! Order of one call: pre-execute (built-in plan-mode and sandbox policy first, then hooks in
//! registration order) → guards → checkpoint → execute middleware (outermost first) → body →
//! post-execute → spill → settled.
//!
//! `tools/observe` ([`PipelineObserver`]) is observe-only: it is told what each phase actually
//! decided (the final pre-execute decision with its approval outcome, each guard denial, the
//! body's dispatch and return, the post-execute decisions) and cannot change anything. It
//! exists for recorders such as provenance, which must see facts no single waterfall hook sees.

use crate::caller::{ApprovalOutcome, ToolOutcome};
use crate::error::ToolError;
use crate::tool::{ExecMode, ToolEffect, ToolOutput};
use crate::workspace::SandboxMode;
use async_trait::async_trait;
use futures::future::BoxFuture;
use keel_protocol::{ContentBlock, ToolCallBlock, ToolErrorCode};
use serde_json::Value;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Opaque identity of one dispatch (one call through the pipeline), unique in the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExecToken(u64);

static NEXT_TOKEN: AtomicU64 = AtomicU64::new(1);

impl ExecToken {
    /// A token never handed out before.
    pub(crate) fn fresh() -> Self {
        ExecToken(NEXT_TOKEN.fetch_add(1, Ordering::Relaxed))
    }
}

impl fmt::Display for ExecToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "exec-{}", self.0)
    }
}

/// Scheduling and effect of the tool a call resolved to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolInfo {
    /// How the tool is scheduled.
    pub mode: ExecMode,
    /// What the tool can change.
    pub effect: ToolEffect,
}

/// What every tool hook receives.
#[derive(Debug, Clone, Copy)]
pub struct HookContext<'a> {
    /// The call, arguments as the model sent them.
    pub call: &'a ToolCallBlock,
    /// The resolved tool; `None` only in `tools/settled` for calls naming an unknown tool.
    pub tool: Option<ToolInfo>,
    /// This dispatch.
    pub token: ExecToken,
    /// The dispatch this one is nested in, if any.
    pub parent: Option<ExecToken>,
    /// Sandbox mode in force.
    pub sandbox: SandboxMode,
}

/// Decision of a `tools/pre-execute` hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PreDecision {
    /// No objection; later hooks still run.
    Allow,
    /// Refuse the call; the model sees `DENIED: <reason>`. Later hooks do not run.
    Deny(String),
    /// Ask the caller for approval with this reason; denial becomes `DENIED`. Later hooks do not
    /// run.
    Ask(String),
}

/// `tools/pre-execute` — mode: **waterfall, first non-allow wins**. Hooks run in order on the
/// validated arguments; the first [`PreDecision::Deny`] or [`PreDecision::Ask`] decides and
/// stops the chain. A call every hook allows proceeds to the guards.
#[async_trait]
pub trait PreExecuteHook: Send + Sync {
    /// Decide about one call.
    async fn pre_execute(&self, ctx: &HookContext<'_>, args: &Value) -> PreDecision;
}

/// Verdict of a `tools/guard` hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuardDecision {
    /// No objection.
    Pass,
    /// Refuse the call; the model sees `DENIED: <reason>`.
    Deny(String),
}

/// `tools/guard` — mode: **guard**. Runs after pre-execute (and any approval); any guard may
/// deny and none may re-allow. The first denial stops the call before its body.
#[async_trait]
pub trait GuardHook: Send + Sync {
    /// Check one call that pre-execute allowed.
    async fn check(&self, ctx: &HookContext<'_>, args: &Value) -> GuardDecision;
}

/// The rest of the `tools/execute` chain: the next middleware, or the body itself (which the
/// pipeline runs under the tool's timeout and the batch's cancellation).
pub struct ExecuteNext<'a> {
    pub(crate) rest: &'a [Arc<dyn ExecuteMiddleware>],
    pub(crate) ctx: &'a HookContext<'a>,
    pub(crate) body: &'a (dyn BodyRunner + 'a),
}

impl<'a> ExecuteNext<'a> {
    /// Run the rest of the chain with (possibly rewritten) arguments. Not calling it
    /// short-circuits the body.
    pub fn run(self, args: Value) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        match self.rest.split_first() {
            Some((first, rest)) => {
                let next = ExecuteNext {
                    rest,
                    ctx: self.ctx,
                    body: self.body,
                };
                first.around(self.ctx, args, next)
            }
            None => self.body.run(args),
        }
    }
}

/// The innermost step of the execute chain (implemented by the pipeline).
pub(crate) trait BodyRunner: Send + Sync {
    fn run(&self, args: Value) -> BoxFuture<'_, Result<ToolOutput, ToolError>>;
}

/// `tools/execute` — mode: **waterfall middleware** around the body, outermost registered
/// first. Receives the effective arguments and a [`ExecuteNext`]; may time, wrap, rewrite arguments,
/// or return without calling `next` (short-circuit).
#[async_trait]
pub trait ExecuteMiddleware: Send + Sync {
    /// Wrap one body execution.
    async fn around(
        &self,
        ctx: &HookContext<'_>,
        args: Value,
        next: ExecuteNext<'_>,
    ) -> Result<ToolOutput, ToolError>;
}

/// A result between the body and `tools/settled`, as `tools/post-execute` sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct ResultDraft {
    /// Model-facing content.
    pub content: Vec<ContentBlock>,
    /// Whether the call failed.
    pub is_error: bool,
    /// Error code when failed.
    pub code: Option<ToolErrorCode>,
    /// The tool's structured value.
    pub value: Option<Value>,
}

/// Decision of a `tools/post-execute` hook.
#[derive(Debug, Clone, PartialEq)]
pub enum PostDecision {
    /// Keep the result as is.
    Accept,
    /// Replace the model-facing content (error flag kept).
    ReplaceContent(Vec<ContentBlock>),
    /// Replace the structured value.
    ReplaceValue(Value),
    /// Withhold the result: the model sees `DENIED: <reason>`; later hooks do not run.
    Block(String),
}

/// `tools/post-execute` — mode: **waterfall**. Runs in order on results of bodies that were
/// dispatched (not on pre-dispatch errors); each hook sees the result as replaced by earlier
/// ones. Large text is spilled after this phase, so hooks see the full text.
#[async_trait]
pub trait PostExecuteHook: Send + Sync {
    /// Inspect one result.
    async fn post_execute(&self, ctx: &HookContext<'_>, result: &ResultDraft) -> PostDecision;
}

/// `tools/settled` — mode: **serial, awaited**. Called in model order with every frozen final
/// result (errors included), before the caller's `settled` and so before `tool/result` is
/// appended. For durable observers such as the provenance journal.
#[async_trait]
pub trait SettledHook: Send + Sync {
    /// Observe one final result.
    async fn settled(&self, ctx: &HookContext<'_>, outcome: &ToolOutcome);
}

/// `tools/observe` — mode: **observe**, synchronous. Told, for every call that reaches the
/// phase, what the phase actually decided. Observers run in registration order on the
/// pipeline's task: they must be quick, must not block and cannot change the call. Every method
/// defaults to doing nothing.
///
/// Order for one call: [`pre_execute_entered`](Self::pre_execute_entered) →
/// [`pre_execute_decided`](Self::pre_execute_decided) → [`guard_denied`](Self::guard_denied)
/// (at most once) → [`body_dispatched`](Self::body_dispatched) →
/// [`body_returned`](Self::body_returned) → [`post_executed`](Self::post_executed). A phase the
/// call did not reach is not reported (an unknown tool, invalid arguments or a cancellation
/// before dispatch report nothing here; `tools/settled` still sees the final result).
pub trait PipelineObserver: Send + Sync {
    /// The validated arguments, before the built-in policy and the `tools/pre-execute` hooks.
    fn pre_execute_entered(&self, _ctx: &HookContext<'_>, _args: &Value) {}

    /// The final pre-execute decision (built-in policy and hooks); for [`PreDecision::Ask`],
    /// `approval` is the caller's answer (`None` if the call was cancelled while asking, in which
    /// case this is not called).
    fn pre_execute_decided(
        &self,
        _ctx: &HookContext<'_>,
        _decision: &PreDecision,
        _approval: Option<&ApprovalOutcome>,
    ) {
    }

    /// Guard number `guard` (registration order, from 0) denied the call.
    fn guard_denied(&self, _ctx: &HookContext<'_>, _guard: usize, _reason: &str) {}

    /// The body is about to run with these effective arguments (after every `tools/execute`
    /// middleware; not called when a middleware short-circuits).
    fn body_dispatched(&self, _ctx: &HookContext<'_>, _args: &Value) {}

    /// What the body returned, timeout and cancellation included.
    fn body_returned(&self, _ctx: &HookContext<'_>, _result: &Result<ToolOutput, ToolError>) {}

    /// The post-execute phase ran on `incoming` (the execute chain's result); `decisions` are
    /// the hooks' answers in order (empty without hooks; stops at a block).
    fn post_executed(
        &self,
        _ctx: &HookContext<'_>,
        _incoming: &ResultDraft,
        _decisions: &[PostDecision],
    ) {
    }
}

/// `tools/expose` — mode: **policy, any may hide**. Asked about the tools a request offers and
/// about each call the model makes itself (a call with no parent dispatch): a tool some hook
/// hides is left out of requests, and a model-direct call of it is answered `UNKNOWN_TOOL` with
/// the hook's hint. Nested calls (a tool running tools) are not affected. Code Mode's `code`
/// tools mode uses it: the model reaches the other tools only from inside `run_code`.
pub trait ExposeHook: Send + Sync {
    /// `Some(hint)` when the model may not see or call `name` directly now; the hint says how
    /// to reach it instead.
    fn hidden(&self, name: &str) -> Option<String>;
}

/// The hooks attached to a pipeline, per seam, in run order.
#[derive(Clone, Default)]
pub struct ToolHooks {
    pub(crate) pre: Vec<Arc<dyn PreExecuteHook>>,
    pub(crate) guard: Vec<Arc<dyn GuardHook>>,
    pub(crate) execute: Vec<Arc<dyn ExecuteMiddleware>>,
    pub(crate) post: Vec<Arc<dyn PostExecuteHook>>,
    pub(crate) settled: Vec<Arc<dyn SettledHook>>,
    pub(crate) observers: Vec<Arc<dyn PipelineObserver>>,
    pub(crate) expose: Vec<Arc<dyn ExposeHook>>,
}

impl fmt::Debug for ToolHooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolHooks")
            .field("pre_execute", &self.pre.len())
            .field("guard", &self.guard.len())
            .field("execute", &self.execute.len())
            .field("post_execute", &self.post.len())
            .field("settled", &self.settled.len())
            .field("observers", &self.observers.len())
            .field("expose", &self.expose.len())
            .finish()
    }
}

impl ToolHooks {
    /// No hooks.
    pub fn new() -> Self {
        Self::default()
    }

    /// Global hooks followed by an agent's own (a child agent gets only the global ones).
    pub fn layered(global: &ToolHooks, agent: &ToolHooks) -> Self {
        let mut out = global.clone();
        out.extend(agent);
        out
    }

    /// Append every hook of `other` after this one's, seam by seam.
    pub fn extend(&mut self, other: &ToolHooks) {
        self.pre.extend(other.pre.iter().cloned());
        self.guard.extend(other.guard.iter().cloned());
        self.execute.extend(other.execute.iter().cloned());
        self.post.extend(other.post.iter().cloned());
        self.settled.extend(other.settled.iter().cloned());
        self.observers.extend(other.observers.iter().cloned());
        self.expose.extend(other.expose.iter().cloned());
    }

    /// Add a `tools/pre-execute` hook.
    pub fn pre_execute(mut self, hook: Arc<dyn PreExecuteHook>) -> Self {
        self.pre.push(hook);
        self
    }

    /// Add a `tools/guard` hook.
    pub fn guard(mut self, hook: Arc<dyn GuardHook>) -> Self {
        self.guard.push(hook);
        self
    }

    /// Add a `tools/execute` middleware (inside those added before).
    pub fn execute(mut self, hook: Arc<dyn ExecuteMiddleware>) -> Self {
        self.execute.push(hook);
        self
    }

    /// Add a `tools/post-execute` hook.
    pub fn post_execute(mut self, hook: Arc<dyn PostExecuteHook>) -> Self {
        self.post.push(hook);
        self
    }

    /// Add a `tools/settled` hook.
    pub fn settled(mut self, hook: Arc<dyn SettledHook>) -> Self {
        self.settled.push(hook);
        self
    }

    /// Add a `tools/observe` observer.
    pub fn observe(mut self, observer: Arc<dyn PipelineObserver>) -> Self {
        self.observers.push(observer);
        self
    }

    /// Add a `tools/expose` hook.
    pub fn expose(mut self, hook: Arc<dyn ExposeHook>) -> Self {
        self.expose.push(hook);
        self
    }

    /// The hint of the first `tools/expose` hook that hides `name` from the model, if any.
    pub fn hidden(&self, name: &str) -> Option<String> {
        self.expose.iter().find_map(|h| h.hidden(name))
    }
}
