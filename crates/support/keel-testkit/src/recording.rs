//! Recording test doubles for the keel-tools pipeline: a [`ToolCaller`] that logs every call
//! the pipeline makes to its host ([`RecordingHost`]), hooks at every seam that log each seam
//! and answer with configurable decisions ([`RecordingHooks`]), and hooks that pass everything
//! through and record nothing ([`PassThrough`], for benchmarks measuring the seams' cost).
//!
//! Data flow: the host and the hooks push one line per event into a shared, ordered [`Log`]
//! (`host:call_started:<id>`, `pre:<id>`, `guard:<id>`, `host:checkpoint`, `exec:before:<id>`,
//! `exec:after:<id>`, `post:<id>`, `settled:<id>`, `host:commit:<id>`, …). Give the host and
//! the hooks clones of one log (and tools under test, too) to assert on the interleaving of
//! everything that happened in a batch. The doubles also keep typed records (emitted events,
//! approval requests, exec tokens, post-execute content lengths) for finer assertions.
//!
//! These are test doubles: they assert the pipeline's contracts (a settled outcome belongs to
//! its call; arguments reaching `pre-execute` are a JSON object) and panic when one is broken.

use async_trait::async_trait;
use keel_protocol::sync::Locked;
use keel_protocol::{ContentBlock, EventBody, ToolCallBlock};
use keel_tools::{
    ApprovalOutcome, ExecToken, ExecuteMiddleware, ExecuteNext, GuardDecision, GuardHook, Handoff,
    HookContext, PostDecision, PostExecuteHook, PreDecision, PreExecuteHook, ResultDraft,
    SettledHook, ToolCaller, ToolError, ToolHooks, ToolOutcome, ToolOutput,
};
use serde_json::Value;
use std::sync::{Arc, Mutex, MutexGuard};

/// Lock `m`, going on with the data when a panicking test thread poisoned it.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.locked()
}

/// A shared, ordered log of what happened. Clones share the same lines.
#[derive(Debug, Clone, Default)]
pub struct Log(Arc<Mutex<Vec<String>>>);

impl Log {
    /// Append one line.
    pub fn push(&self, line: impl Into<String>) {
        lock(&self.0).push(line.into());
    }

    /// Every line so far, leaving the log empty.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *lock(&self.0))
    }

    /// Every line so far, leaving the log as it is.
    pub fn snapshot(&self) -> Vec<String> {
        lock(&self.0).clone()
    }
}

/// A [`ToolCaller`] that logs every call into a [`Log`] and answers approval requests with a
/// fixed decision.
///
/// Lines: `host:call_started:<id>`, `host:checkpoint`, `host:ask:<id>`, `host:escalate:<id>`,
/// `host:emit:<type>`, `host:commit:<id>`, `host:hand_off`.
#[derive(Debug)]
pub struct RecordingHost {
    log: Log,
    answer: ApprovalOutcome,
    emitted: Mutex<Vec<EventBody>>,
    asked: Mutex<Vec<(String, String)>>,
    handoffs: Mutex<Vec<Handoff>>,
}

impl RecordingHost {
    /// A host logging into `log` that approves every request when `approve` is true and denies
    /// every one (with the reason `not now`) otherwise.
    pub fn new(log: Log, approve: bool) -> Self {
        Self::answering(
            log,
            if approve {
                ApprovalOutcome::Approved
            } else {
                ApprovalOutcome::Denied {
                    reason: Some("not now".into()),
                }
            },
        )
    }

    /// A host logging into `log` that answers every approval request with `answer` (e.g.
    /// [`ApprovalOutcome::Unanswered`], as a headless run does).
    pub fn answering(log: Log, answer: ApprovalOutcome) -> Self {
        RecordingHost {
            log,
            answer,
            emitted: Mutex::new(Vec::new()),
            asked: Mutex::new(Vec::new()),
            handoffs: Mutex::new(Vec::new()),
        }
    }

    /// The hand-offs tools asked for so far, in order.
    pub fn handoffs(&self) -> Vec<Handoff> {
        lock(&self.handoffs).clone()
    }

    /// The log this host writes to.
    pub fn log(&self) -> &Log {
        &self.log
    }

    /// The event bodies emitted so far, in order.
    pub fn emitted(&self) -> Vec<EventBody> {
        lock(&self.emitted).clone()
    }

    /// The approval requests so far, in order: (call id, reason).
    pub fn asked(&self) -> Vec<(String, String)> {
        lock(&self.asked).clone()
    }
}

#[async_trait]
impl ToolCaller for RecordingHost {
    async fn call_started(&self, call: &ToolCallBlock) {
        self.log.push(format!("host:call_started:{}", call.id));
    }

    async fn checkpoint(&self) {
        self.log.push("host:checkpoint");
    }

    async fn ask_approval(&self, call: &ToolCallBlock, reason: &str) -> ApprovalOutcome {
        self.log.push(format!("host:ask:{}", call.id));
        lock(&self.asked).push((call.id.clone(), reason.to_owned()));
        self.answer.clone()
    }

    async fn ask_escalation(&self, call: &ToolCallBlock, reason: &str) -> ApprovalOutcome {
        self.log.push(format!("host:escalate:{}", call.id));
        lock(&self.asked).push((call.id.clone(), reason.to_owned()));
        self.answer.clone()
    }

    fn hand_off(&self, handoff: Handoff) {
        self.log.push("host:hand_off");
        lock(&self.handoffs).push(handoff);
    }

    async fn emit(&self, body: EventBody) {
        self.log.push(format!("host:emit:{}", body.type_name()));
        lock(&self.emitted).push(body);
    }

    /// # Panics
    /// When `outcome` is not the outcome of `call`.
    async fn commit_result(&self, call: &ToolCallBlock, outcome: &ToolOutcome) {
        assert_eq!(
            call.id, outcome.call_id,
            "settled with another call's outcome"
        );
        self.log.push(format!("host:commit:{}", call.id));
    }
}

/// One hook at every pipeline seam (pre-execute, guard, execute middleware, post-execute,
/// settled), each logging `<seam>:<call id>` into its [`Log`] and answering with the configured
/// decision, or letting the call through when none is configured. Build one with
/// [`RecordingHooks::new`] and the `with_*` methods, and install it with
/// [`RecordingHooks::hooks`].
///
/// Seams logged: `pre`, `guard`, `exec:before` / `exec:after` (around the rest of the execute
/// chain), `post`, `settled`.
#[derive(Debug, Default)]
pub struct RecordingHooks {
    log: Log,
    pre: Option<PreDecision>,
    guard: Option<GuardDecision>,
    post: Option<PostDecision>,
    rewrite: Option<Value>,
    seen: Mutex<Vec<(String, ExecToken, Option<ExecToken>)>>,
    post_text_len: Mutex<Vec<usize>>,
}

impl RecordingHooks {
    /// Hooks logging into `log` that let every call through.
    pub fn new(log: Log) -> Self {
        RecordingHooks {
            log,
            ..RecordingHooks::default()
        }
    }

    /// Answer `tools/pre-execute` with `decision` (default: allow).
    pub fn with_pre(mut self, decision: PreDecision) -> Self {
        self.pre = Some(decision);
        self
    }

    /// Answer `tools/guard` with `decision` (default: pass).
    pub fn with_guard(mut self, decision: GuardDecision) -> Self {
        self.guard = Some(decision);
        self
    }

    /// Answer `tools/post-execute` with `decision` (default: accept).
    pub fn with_post(mut self, decision: PostDecision) -> Self {
        self.post = Some(decision);
        self
    }

    /// Hand `args` on down the execute chain instead of the call's own arguments.
    pub fn with_rewrite(mut self, args: Value) -> Self {
        self.rewrite = Some(args);
        self
    }

    /// The log the seams are written to.
    pub fn log(&self) -> &Log {
        &self.log
    }

    /// These hooks installed at every seam.
    pub fn hooks(self: &Arc<Self>) -> ToolHooks {
        ToolHooks::new()
            .pre_execute(self.clone())
            .guard(self.clone())
            .execute(self.clone())
            .post_execute(self.clone())
            .settled(self.clone())
    }

    /// Every seam reached so far, in order: (seam, the call's exec token, its parent's token).
    pub fn seen(&self) -> Vec<(String, ExecToken, Option<ExecToken>)> {
        lock(&self.seen).clone()
    }

    /// Forget the seams reached so far.
    pub fn clear_seen(&self) {
        lock(&self.seen).clear();
    }

    /// For every result post-execute saw, in order: the bytes of its text blocks.
    pub fn post_text_lens(&self) -> Vec<usize> {
        lock(&self.post_text_len).clone()
    }

    fn note(&self, seam: &str, ctx: &HookContext<'_>) {
        self.log.push(format!("{seam}:{}", ctx.call.id));
        lock(&self.seen).push((seam.to_owned(), ctx.token, ctx.parent));
    }
}

#[async_trait]
impl PreExecuteHook for RecordingHooks {
    /// # Panics
    /// When the arguments are not a JSON object (the pipeline validates them first).
    async fn pre_execute(&self, ctx: &HookContext<'_>, args: &Value) -> PreDecision {
        assert!(
            args.is_object(),
            "pre-execute got arguments that are not an object"
        );
        self.note("pre", ctx);
        self.pre.clone().unwrap_or(PreDecision::Allow)
    }
}

#[async_trait]
impl GuardHook for RecordingHooks {
    async fn check(&self, ctx: &HookContext<'_>, _args: &Value) -> GuardDecision {
        self.note("guard", ctx);
        self.guard.clone().unwrap_or(GuardDecision::Pass)
    }
}

#[async_trait]
impl ExecuteMiddleware for RecordingHooks {
    async fn around(
        &self,
        ctx: &HookContext<'_>,
        args: Value,
        next: ExecuteNext<'_>,
    ) -> Result<ToolOutput, ToolError> {
        self.note("exec:before", ctx);
        let args = self.rewrite.clone().unwrap_or(args);
        let out = next.run(args).await;
        self.note("exec:after", ctx);
        out
    }
}

#[async_trait]
impl PostExecuteHook for RecordingHooks {
    async fn post_execute(&self, ctx: &HookContext<'_>, result: &ResultDraft) -> PostDecision {
        self.note("post", ctx);
        let len = result.content.iter().map(|b| match b {
            ContentBlock::Text { text } => text.len(),
            _ => 0,
        });
        lock(&self.post_text_len).push(len.sum());
        self.post.clone().unwrap_or(PostDecision::Accept)
    }
}

#[async_trait]
impl SettledHook for RecordingHooks {
    /// # Panics
    /// When `outcome` is not the outcome of the call in `ctx`.
    async fn settled(&self, ctx: &HookContext<'_>, outcome: &ToolOutcome) {
        assert_eq!(
            outcome.call_id, ctx.call.id,
            "settled with another call's outcome"
        );
        self.note("settled", ctx);
    }
}

/// One hook at every seam that lets every call through unchanged and records nothing: the
/// pipeline's per-seam cost without any work in the hooks (benchmarks).
#[derive(Debug, Clone, Copy, Default)]
pub struct PassThrough;

impl PassThrough {
    /// A pass-through hook installed at every seam.
    pub fn hooks() -> ToolHooks {
        let pass = Arc::new(PassThrough);
        ToolHooks::new()
            .pre_execute(pass.clone())
            .guard(pass.clone())
            .execute(pass.clone())
            .post_execute(pass.clone())
            .settled(pass)
    }
}

#[async_trait]
impl PreExecuteHook for PassThrough {
    async fn pre_execute(&self, _ctx: &HookContext<'_>, _args: &Value) -> PreDecision {
        PreDecision::Allow
    }
}

#[async_trait]
impl GuardHook for PassThrough {
    async fn check(&self, _ctx: &HookContext<'_>, _args: &Value) -> GuardDecision {
        GuardDecision::Pass
    }
}

#[async_trait]
impl ExecuteMiddleware for PassThrough {
    async fn around(
        &self,
        _ctx: &HookContext<'_>,
        args: Value,
        next: ExecuteNext<'_>,
    ) -> Result<ToolOutput, ToolError> {
        next.run(args).await
    }
}

#[async_trait]
impl PostExecuteHook for PassThrough {
    async fn post_execute(&self, _ctx: &HookContext<'_>, _result: &ResultDraft) -> PostDecision {
        PostDecision::Accept
    }
}

#[async_trait]
impl SettledHook for PassThrough {
    async fn settled(&self, _ctx: &HookContext<'_>, _outcome: &ToolOutcome) {}
}
