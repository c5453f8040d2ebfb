//! The [`Agent`]: one session log, one model, one tool pipeline, one inbox.
//!
//! An agent is a cheap handle (`Arc` inside) shared by the loop, hooks and the front end. Every
//! model-visible change goes through the session log ([`Agent::push`]), which validates it,
//! queues it for durable writing and notifies `session/event` observers. The turn and step
//! algorithm is in [`crate::turn`]; request assembly in [`crate::request`].

use crate::error::AgentError;
use crate::inbox::{Inbox, InboxMode};
use crate::prompt::{self, InstructionFile};
use crate::seams::{FlushPoint, HookRegistry, InboxInserted};
use crate::session_modes::{KeptModes, kept_modes};
use futures::future::BoxFuture;
use keel_llm::{ModelInfo, Provider, RetryPolicy};
use keel_protocol::sync::Locked;
use keel_protocol::{
    ApprovalPolicyEvent, EventBody, Message, MessageSource, PlanModeEvent, SandboxModeEvent, Seq,
    SessionEvent, SessionId, SurfaceOp, ToolCallBlock,
};
use keel_protocol::{StepNo, TurnNo};
use keel_session::PersistentSession;
use keel_tools::spill::SpillConfig;
use keel_tools::subprocess::SubprocessService;
use keel_tools::subprocess::confine::Enforcement;
use keel_tools::{ApprovalOutcome, Pipeline, PlanState, SandboxMode, ToolRegistry, Workspace};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use tokio_util::sync::CancellationToken;

/// What happens when a tool call needs approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ApprovalPolicy {
    /// Ask the user (a headless run cannot, so the call is denied with a hint).
    #[default]
    Ask,
    /// Never ask: calls that need approval are denied.
    Never,
    /// Approve automatically.
    Auto,
}

impl ApprovalPolicy {
    /// Spelling used in flags, config and `approval/policy` events.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalPolicy::Ask => "ask",
            ApprovalPolicy::Never => "never",
            ApprovalPolicy::Auto => "auto",
        }
    }

    /// Parse `ask`, `never` or `auto`.
    pub fn parse(s: &str) -> Option<ApprovalPolicy> {
        match s {
            "ask" => Some(ApprovalPolicy::Ask),
            "never" => Some(ApprovalPolicy::Never),
            "auto" => Some(ApprovalPolicy::Auto),
            _ => None,
        }
    }

    /// The stricter of `self` and `other`: `never` (refuses what needs approval) over `ask`
    /// (a person decides) over `auto` (approves it).
    pub fn stricter(self, other: ApprovalPolicy) -> ApprovalPolicy {
        let rank = |p: ApprovalPolicy| match p {
            ApprovalPolicy::Auto => 0,
            ApprovalPolicy::Ask => 1,
            ApprovalPolicy::Never => 2,
        };
        if rank(other) > rank(self) {
            other
        } else {
            self
        }
    }
}

/// Answers approval requests when the policy is `ask` (an interactive front end). Without one
/// (headless) every request is [`ApprovalOutcome::Unanswered`]: a call that needs approval is
/// refused, and a plan submitted with `exit_plan_mode` is handed to the user as the turn's
/// answer (the turn ends; see [`Agent::approve_plan`]). An approver may answer `Unanswered`
/// itself to leave a decision for later.
pub trait Approver: Send + Sync {
    /// Decide on `call`; `reason` says why approval is needed. For `exit_plan_mode` the plan is
    /// the call's `plan` argument.
    fn decide<'a>(
        &'a self,
        call: &'a ToolCallBlock,
        reason: &'a str,
    ) -> BoxFuture<'a, ApprovalOutcome>;
}

/// What an interactive approver's "allow for the session" remembers of `call`: the exact
/// command for `bash`, the tool otherwise.
pub fn allow_key(call: &ToolCallBlock) -> String {
    if call.name == "bash" {
        let args: serde_json::Value = serde_json::from_str(&call.arguments).unwrap_or_default();
        let command = args.get("command").and_then(|c| c.as_str()).unwrap_or("");
        format!("bash:{command}")
    } else {
        call.name.clone()
    }
}

/// Static settings of an agent.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// Provider name (for message sources and `request/context`).
    pub provider_name: String,
    /// Model name.
    pub model: String,
    /// What keel knows of the model (context window, output budget, reasoning).
    pub model_info: ModelInfo,
    /// Workspace root and working directory.
    pub cwd: PathBuf,
    /// `$KEEL_HOME` (user instructions).
    pub keel_home: Option<PathBuf>,
    /// Persona template.
    pub persona: String,
    /// Thinking on/off.
    pub thinking: Option<bool>,
    /// Reasoning effort.
    pub reasoning_effort: Option<String>,
    /// Temperature.
    pub temperature: Option<f64>,
    /// Output budget per request (model default when `None`).
    pub max_tokens: Option<u64>,
    /// Steps per turn before the turn ends `blocked`.
    pub max_steps: u32,
    /// Identical failing tool calls in a row before the model is told to change course; at
    /// twice this the turn is stopped (`REPEATED_TOOL_FAILURE`). 0 = off. See
    /// [`crate::repeat`].
    pub repeat_failure_limit: u32,
    /// Approval policy.
    pub approval: ApprovalPolicy,
    /// Byte budget for AGENTS.md / CLAUDE.md.
    pub instructions_budget: usize,
    /// Retry policy of the default `agent/request-error` listener.
    pub retry: RetryPolicy,
}

impl AgentConfig {
    /// Defaults for `model` in `cwd`.
    pub fn new(
        provider_name: impl Into<String>,
        model: impl Into<String>,
        model_info: ModelInfo,
        cwd: PathBuf,
    ) -> Self {
        AgentConfig {
            provider_name: provider_name.into(),
            model: model.into(),
            model_info,
            cwd,
            keel_home: None,
            persona: prompt::DEFAULT_PERSONA.to_owned(),
            thinking: None,
            reasoning_effort: None,
            temperature: None,
            max_tokens: None,
            max_steps: 200,
            repeat_failure_limit: 3,
            approval: ApprovalPolicy::Ask,
            instructions_budget: prompt::DEFAULT_INSTRUCTIONS_BUDGET,
            retry: RetryPolicy::default(),
        }
    }
}

/// Mutable loop state (never held across an await).
#[derive(Debug, Default)]
pub(crate) struct LoopState {
    pub(crate) inbox: Inbox,
    pub(crate) turn: TurnNo,
    /// A turn is running (set when it starts; cleared, together with the check that no step
    /// input waits, just before it ends). Job notices inject while set and wake otherwise.
    pub(crate) running: bool,
    pub(crate) last_runtime: Option<String>,
    pub(crate) repeats: crate::repeat::RepeatedFailures,
    pub(crate) last_header: Option<Value>,
    pub(crate) last_context: Option<keel_protocol::RequestContext>,
    /// The prompt estimate of the last request built: (turn, step, tokens).
    pub(crate) last_estimate: Option<(TurnNo, StepNo, u64)>,
    /// Provider prompt tokens per estimated token, from the last request the provider
    /// reported usage for (never below 1: the estimate only ever grows).
    pub(crate) prompt_factor: Option<f64>,
}

pub(crate) struct Inner {
    pub(crate) config: AgentConfig,
    pub(crate) provider: Arc<dyn Provider>,
    pub(crate) pipeline: Pipeline,
    pub(crate) hooks: HookRegistry,
    pub(crate) global_hooks: HookRegistry,
    pub(crate) approver: Option<Arc<dyn Approver>>,
    pub(crate) commands: Vec<Arc<dyn crate::plugin::CommandSource>>,
    pub(crate) instructions: Vec<InstructionFile>,
    pub(crate) log: Mutex<PersistentSession>,
    pub(crate) state: Mutex<LoopState>,
    pub(crate) turn_cancel: Mutex<CancellationToken>,
    /// The background service this agent owns jobs in, once attached
    /// ([`crate::background`]).
    pub(crate) background: OnceLock<Arc<dyn crate::background::Background>>,
    /// Signalled when a message from outside the loop queues a follow-up turn
    /// ([`Agent::deliver`]): `run_until_idle` wakes for it even while its background service
    /// has nothing settled to report.
    pub(crate) woken: tokio::sync::Notify,
    /// The approval policy in force: the configuration's (or what a resumed session kept)
    /// until [`Agent::set_approval`].
    pub(crate) approval: Mutex<ApprovalPolicy>,
    /// What a resumed session kept of the modes changed during it.
    pub(crate) kept_modes: KeptModes,
}

/// The ignorable event a tool left out of a changed tool source is logged as.
pub const TOOL_SKIPPED_EVENT: &str = "tool/skipped";

/// A running agent. Clone to share.
#[derive(Clone)]
pub struct Agent {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("session", &self.session_id())
            .field("model", &self.inner.config.model)
            .finish()
    }
}

/// The tools of an agent and how they run: what [`AgentBuilder`] turns into the agent's
/// [`Pipeline`]. The pipeline's seams are not set here: they are the agent's own
/// ([`HookRegistry::tools`], global then agent-scoped), so the pipeline and the agent cannot
/// disagree about which tool hooks run.
pub struct ToolSetup {
    /// The registered tools.
    pub registry: ToolRegistry,
    /// Workspace roots and sandbox mode.
    pub workspace: Workspace,
    /// Plan-mode state shared with `exit_plan_mode` and the prompt (`None`: the registry's).
    pub plan_state: Option<Arc<PlanState>>,
    /// Where large results spill (`None`: the pipeline's default).
    pub spill: Option<SpillConfig>,
    /// The subprocess service tools run commands with (`None`: the pipeline's default).
    pub subprocess: Option<SubprocessService>,
}

impl ToolSetup {
    /// `registry` in `workspace`, with the registry's plan state and the pipeline's defaults.
    pub fn new(registry: ToolRegistry, workspace: Workspace) -> Self {
        ToolSetup {
            registry,
            workspace,
            plan_state: None,
            spill: None,
            subprocess: None,
        }
    }
}

/// Builds an [`Agent`]: its tool pipeline (from a [`ToolSetup`] and the agent's tool seams),
/// its seams (global, then agent-scoped) and its loop state. The one place where an agent is
/// assembled: `keel-host`'s factory and child agents (subagents) both come through here.
pub struct AgentBuilder {
    config: AgentConfig,
    provider: Arc<dyn Provider>,
    tools: ToolSetup,
    log: PersistentSession,
    hooks: HookRegistry,
    agent_hooks: HookRegistry,
    approver: Option<Arc<dyn Approver>>,
    commands: Vec<Arc<dyn crate::plugin::CommandSource>>,
}

impl AgentBuilder {
    /// Global hooks: this agent's and, inherited, its children's (subagents).
    pub fn hooks(mut self, hooks: HookRegistry) -> Self {
        self.hooks = hooks;
        self
    }

    /// Hooks for this agent only, run after the global ones and not inherited by children
    /// (a front end's progress printer, a per-session journal).
    pub fn agent_hooks(mut self, hooks: HookRegistry) -> Self {
        self.agent_hooks = hooks;
        self
    }

    /// The approver used when the policy is `ask`. Without one, `ask` denies (headless).
    pub fn approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.approver = Some(approver);
        self
    }

    /// Slash commands the plugins offer front ends ([`Agent::commands`]).
    pub fn commands(mut self, commands: Vec<Arc<dyn crate::plugin::CommandSource>>) -> Self {
        self.commands = commands;
        self
    }

    /// Build. A fresh session gets `sandbox/mode` and `approval/policy` events; a resumed one
    /// has its loop state (turn counter, inbox, last runtime context and request header)
    /// rebuilt from the log and keeps its modes: plan mode as its last `plan/mode` left it,
    /// the sandbox narrowing and approval policy changed during it
    /// ([`crate::session_modes`], [`Agent::kept_modes`]).
    pub fn build(self) -> Result<Agent, AgentError> {
        let hooks = HookRegistry::layered(&self.hooks, &self.agent_hooks);
        let ToolSetup {
            registry,
            workspace,
            plan_state,
            spill,
            subprocess,
        } = self.tools;
        let mut pipeline =
            Pipeline::builder(Arc::new(registry), workspace).hooks(hooks.tools.clone());
        if let Some(plan_state) = plan_state {
            pipeline = pipeline.plan_state(plan_state);
        }
        if let Some(spill) = spill {
            pipeline = pipeline.spill(spill);
        }
        if let Some(subprocess) = subprocess {
            pipeline = pipeline.subprocess(subprocess);
        }
        let pipeline = pipeline.build().map_err(AgentError::ToolSetup)?;
        let instructions = prompt::load_instructions(
            self.config.keel_home.as_deref(),
            &self.config.cwd,
            pipeline.workspace().cwd(),
            self.config.instructions_budget,
        );
        let fresh = self.log.session().is_empty();
        let state = LoopState::rebuild(self.log.session());
        let kept = if fresh {
            KeptModes::default()
        } else {
            kept_modes(
                self.log.session().whole_event_iter(),
                pipeline.workspace().sandbox(),
                self.config.approval,
            )
        };
        if kept.read_only {
            pipeline.set_read_only(true);
        }
        let approval = kept.approval.unwrap_or(self.config.approval);
        let agent = Agent {
            inner: Arc::new(Inner {
                config: self.config,
                provider: self.provider,
                pipeline,
                hooks,
                global_hooks: self.hooks,
                approver: self.approver,
                commands: self.commands,
                instructions,
                log: Mutex::new(self.log),
                state: Mutex::new(state),
                turn_cancel: Mutex::new(CancellationToken::new()),
                background: OnceLock::new(),
                woken: tokio::sync::Notify::new(),
                approval: Mutex::new(approval),
                kept_modes: kept,
            }),
        };
        if !fresh && let Some(mode) = last_plan_mode(agent.log().session()) {
            // A resumed session stays in (or out of) plan mode as its log left it.
            agent.inner.pipeline.plan_state().set_active(mode.active);
        }
        if fresh {
            let sandbox = agent.sandbox();
            let confinement = agent.inner.pipeline.workspace().confinement();
            agent.push(EventBody::SandboxMode(Box::new(SandboxModeEvent {
                mode: sandbox.as_str().to_owned(),
                enforcement: Some(confinement.enforcement().to_string()),
            })))?;
            let policy = agent.inner.config.approval.as_str().to_owned();
            agent.push(EventBody::ApprovalPolicy(Box::new(ApprovalPolicyEvent {
                policy,
            })))?;
        }
        Ok(agent)
    }
}

/// A weak handle to an [`Agent`]: held by tools and hooks that an agent's own seams keep alive
/// (so they must not keep the agent alive in turn).
#[derive(Clone, Default)]
pub struct WeakAgent(Weak<Inner>);

impl std::fmt::Debug for WeakAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("WeakAgent")
            .field(&(self.0.strong_count() > 0))
            .finish()
    }
}

impl WeakAgent {
    /// The agent, while it lives.
    pub fn upgrade(&self) -> Option<Agent> {
        self.0.upgrade().map(|inner| Agent { inner })
    }

    /// True when this handle points at `agent`.
    pub fn is(&self, agent: &Agent) -> bool {
        std::ptr::eq(self.0.as_ptr(), Arc::as_ptr(&agent.inner))
    }
}

/// A slot bound once to the agent a tool or hook serves: tools and hooks are registered before
/// their agent exists, and bound to it afterwards (an `on_agent` callback of the plugin
/// install). The first binding wins.
#[derive(Default)]
pub struct AgentSlot(OnceLock<WeakAgent>);

impl std::fmt::Debug for AgentSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("AgentSlot").field(&self.is_bound()).finish()
    }
}

impl AgentSlot {
    /// An unbound slot.
    pub fn new() -> Self {
        AgentSlot(OnceLock::new())
    }

    /// Bind to `agent`; returns false when the slot was bound before (the first binding wins).
    pub fn bind(&self, agent: &Agent) -> bool {
        self.0.set(agent.downgrade()).is_ok()
    }

    /// True once bound (even if the agent has since gone).
    pub fn is_bound(&self) -> bool {
        self.0.get().is_some()
    }

    /// True when bound to `agent`.
    pub fn holds(&self, agent: &Agent) -> bool {
        self.0.get().is_some_and(|w| w.is(agent))
    }

    /// The bound agent, while it lives.
    pub fn get(&self) -> Option<Agent> {
        self.0.get().and_then(WeakAgent::upgrade)
    }
}

impl LoopState {
    fn rebuild(session: &keel_session::Session) -> LoopState {
        let mut state = LoopState {
            turn: session.turn_state().last_turn,
            ..LoopState::default()
        };
        for ev in session.events() {
            match &ev.body {
                EventBody::InboxSpliced(s) => state.inbox.replay(s),
                // Input still pending at a fork's boundary belongs to the parent.
                EventBody::SessionEndSeed(_) => state.inbox = Inbox::default(),
                EventBody::RequestHeader(h) => state.last_header = Some(h.header.clone()),
                EventBody::RequestContext(c) => state.last_context = Some((**c).clone()),
                EventBody::UserMessage(m)
                    if m.source.plugin_id() == Some(crate::request::RUNTIME_CONTEXT_PLUGIN) =>
                {
                    state.last_runtime = Some(m.text());
                }
                _ => {}
            }
        }
        state
    }
}

impl Agent {
    /// Start building an agent over a session log, with `tools` as its tool set.
    pub fn builder(
        config: AgentConfig,
        provider: Arc<dyn Provider>,
        tools: ToolSetup,
        log: PersistentSession,
    ) -> AgentBuilder {
        AgentBuilder {
            config,
            provider,
            tools,
            log,
            hooks: HookRegistry::default(),
            agent_hooks: HookRegistry::default(),
            approver: None,
            commands: Vec::new(),
        }
    }

    /// A weak handle to this agent.
    pub fn downgrade(&self) -> WeakAgent {
        WeakAgent(Arc::downgrade(&self.inner))
    }

    /// The cancellation token of the running (or last) turn: work done on the turn's behalf
    /// outside the loop (a command hook) stops with it.
    pub fn turn_cancel_token(&self) -> CancellationToken {
        self.inner.turn_cancel.locked().clone()
    }

    /// The session id.
    pub fn session_id(&self) -> SessionId {
        self.log().session().header().id.clone()
    }

    /// Settings.
    pub fn config(&self) -> &AgentConfig {
        &self.inner.config
    }

    /// The tool pipeline.
    pub fn pipeline(&self) -> &Pipeline {
        &self.inner.pipeline
    }

    /// The model provider.
    pub fn provider(&self) -> &Arc<dyn Provider> {
        &self.inner.provider
    }

    /// The hooks in force (global, then agent-scoped).
    pub fn hooks(&self) -> &HookRegistry {
        &self.inner.hooks
    }

    /// The global hooks only: what a child agent inherits.
    pub fn global_hooks(&self) -> &HookRegistry {
        &self.inner.global_hooks
    }

    /// The sandbox mode in force: the configured one, or read-only while narrowed
    /// ([`Agent::set_read_only`]).
    pub fn sandbox(&self) -> SandboxMode {
        self.inner.pipeline.sandbox()
    }

    /// Narrow the sandbox to read-only (file changes refused, commands asked about) or back
    /// to the configured mode, between turns (an editor's session mode); logs `sandbox/mode`.
    /// Does nothing when it is already so. A resumed session keeps the narrowing
    /// ([`crate::session_modes`]).
    pub fn set_read_only(&self, on: bool) -> Result<(), AgentError> {
        let before = self.sandbox();
        self.inner.pipeline.set_read_only(on);
        let now = self.sandbox();
        if now == before {
            return Ok(());
        }
        let confinement = self.inner.pipeline.workspace().confinement();
        self.push(EventBody::SandboxMode(Box::new(SandboxModeEvent {
            mode: now.as_str().to_owned(),
            enforcement: Some(confinement.enforcement().to_string()),
        })))?;
        Ok(())
    }

    /// The approval policy in force (the configured one until [`Agent::set_approval`]).
    pub fn approval(&self) -> ApprovalPolicy {
        *self.inner.approval.locked()
    }

    /// Change the approval policy between turns (an editor's session mode); logs
    /// `approval/policy`. Does nothing when it is already so. A resumed session keeps the
    /// last policy set so ([`crate::session_modes`]).
    pub fn set_approval(&self, policy: ApprovalPolicy) -> Result<(), AgentError> {
        {
            let mut current = self.inner.approval.locked();
            if *current == policy {
                return Ok(());
            }
            *current = policy;
        }
        self.push(EventBody::ApprovalPolicy(Box::new(ApprovalPolicyEvent {
            policy: policy.as_str().to_owned(),
        })))?;
        Ok(())
    }

    /// What this agent's session kept of the modes changed during it when it was resumed
    /// (empty for a fresh session); a front end tells the person its notes.
    pub fn kept_modes(&self) -> &KeptModes {
        &self.inner.kept_modes
    }

    /// How far the OS enforces the sandbox for commands on this machine.
    pub fn sandbox_enforcement(&self) -> Enforcement {
        self.inner
            .pipeline
            .workspace()
            .confinement()
            .enforcement()
            .clone()
    }

    /// Lock the session log (never hold the guard across an await).
    pub fn log(&self) -> MutexGuard<'_, PersistentSession> {
        self.inner.log.locked()
    }

    pub(crate) fn state(&self) -> MutexGuard<'_, LoopState> {
        self.inner.state.locked()
    }

    /// Append a non-surface event.
    pub fn push(&self, body: EventBody) -> Result<Seq, AgentError> {
        self.commit(body, None)
    }

    /// Append a plugin's own event (`continuity/projection`, …), marked `ignorable` so that a
    /// reader that does not know `type_name` may skip it. `type_name` must be namespaced
    /// (`plugin/…`) and not a type keel models.
    pub fn push_ignorable(
        &self,
        type_name: &str,
        data: serde_json::Value,
    ) -> Result<Seq, AgentError> {
        let body = EventBody::Other(Box::new(keel_protocol::OtherEvent {
            type_name: type_name.to_owned(),
            data,
        }));
        self.commit_with(|log| {
            let mut event = log.session().stamp(body, None);
            event.ignorable = true;
            let seq = event.seq;
            log.append(event).map(|()| seq)
        })
    }

    /// Re-read the tool sources (see [`keel_tools::ToolSource`]); the loop calls this at each
    /// turn start. A tool a source offers that cannot be registered is left out and logged as
    /// an ignorable [`TOOL_SKIPPED_EVENT`] `{tool?, error}`. Returns whether the tools changed.
    pub fn refresh_tools(&self) -> Result<bool, AgentError> {
        let (changed, skipped) = self.inner.pipeline.refresh_tools();
        for e in skipped {
            self.push_ignorable(
                TOOL_SKIPPED_EVENT,
                serde_json::json!({"tool": e.tool(), "error": e.to_string()}),
            )?;
        }
        Ok(changed)
    }

    /// The slash commands plugins offer interactive front ends (MCP server prompts…).
    pub fn commands(&self) -> &[Arc<dyn crate::plugin::CommandSource>] {
        &self.inner.commands
    }

    /// Turn plan mode on or off between turns (a person's `/plan`, Shift-Tab or `--plan`):
    /// sets the flag the prompt and the pipeline read, and logs `plan/mode {active}`. Does
    /// nothing when it is already so.
    pub fn set_plan_mode(&self, active: bool) -> Result<(), AgentError> {
        let plan = self.inner.pipeline.plan_state();
        if plan.is_active() == active {
            return Ok(());
        }
        plan.set_active(active);
        self.push(EventBody::PlanMode(Box::new(
            keel_protocol::PlanModeEvent {
                active,
                plan: None,
                approved: None,
            },
        )))?;
        Ok(())
    }

    /// Append a surface event.
    pub fn push_surface(
        &self,
        body: EventBody,
        op: SurfaceOp,
        sources: Vec<Seq>,
    ) -> Result<Seq, AgentError> {
        self.commit(body, Some((op, sources)))
    }

    fn commit(
        &self,
        body: EventBody,
        surface: Option<(SurfaceOp, Vec<Seq>)>,
    ) -> Result<Seq, AgentError> {
        self.commit_with(|log| match surface {
            Some((op, sources)) => log.push_surface(body, op, sources),
            None => log.push(body),
        })
    }

    /// Append one event with `append` under the log's lock, then tell the `session/event`
    /// observers (outside the lock).
    fn commit_with(
        &self,
        append: impl FnOnce(&mut PersistentSession) -> Result<Seq, keel_session::AppendError>,
    ) -> Result<Seq, AgentError> {
        let observers = &self.inner.hooks.session_event;
        let (seq, copy): (Seq, Option<SessionEvent>) = {
            let mut log = self.log();
            let seq = append(&mut log)?;
            let copy = if observers.is_empty() {
                None
            } else {
                log.session().event(seq).map(|e| e.into_owned())
            };
            (seq, copy)
        };
        if let Some(ev) = copy {
            observers.notify(&ev);
        }
        Ok(seq)
    }

    /// Durability checkpoint: wait until every event so far is on disk, then run the
    /// `session/flush` hooks.
    pub async fn flush(&self, point: FlushPoint) -> Result<(), AgentError> {
        let ticket = self.log().flush_ticket();
        tokio::task::spawn_blocking(move || ticket.wait())
            .await
            .map_err(|source| AgentError::Task {
                what: "the flush task",
                source,
            })??;
        self.inner.hooks.session_flush.run(&point).await;
        Ok(())
    }

    /// Queue a message. Returns whether the agent should wake (followup/steer).
    pub fn enqueue(&self, mode: InboxMode, message: Message) -> Result<bool, AgentError> {
        let (splice, wake) = self.state().inbox.insert(mode, message.clone());
        self.push(EventBody::InboxSpliced(Box::new(splice)))?;
        self.inner
            .hooks
            .inbox_inserted
            .notify(&InboxInserted { mode, message });
        Ok(wake)
    }

    /// Queue a human prompt as its own turn.
    pub fn followup(&self, text: &str) -> Result<(), AgentError> {
        self.enqueue(InboxMode::Followup, user_message(text))
            .map(|_| ())
    }

    /// Queue a human message for the next step of the running turn.
    pub fn steer(&self, text: &str) -> Result<(), AgentError> {
        self.enqueue(InboxMode::Steer, user_message(text))
            .map(|_| ())
    }

    /// Cancel the running turn (first Ctrl-C). Streamed text is kept, unstarted tool calls get
    /// `ABORTED_BEFORE_DISPATCH`, running ones `ABORTED`; the turn ends `aborted`.
    pub fn cancel_turn(&self) {
        self.inner.turn_cancel.locked().cancel();
    }

    pub(crate) fn new_turn_token(&self) -> CancellationToken {
        let token = CancellationToken::new();
        *self.inner.turn_cancel.locked() = token.clone();
        token
    }

    /// The number of the running turn, or of the last one (0 before the first).
    pub fn current_turn(&self) -> TurnNo {
        self.state().turn
    }

    /// True when a follow-up turn is waiting.
    pub fn has_pending_turn(&self) -> bool {
        self.state().inbox.has_turn()
    }
}

/// What the model reads when the user approves its plan between turns
/// ([`Agent::approve_plan`]); the user's own note follows it.
pub const PLAN_APPROVED_PROMPT: &str =
    "I approve the plan. Plan mode is off: carry out the plan now.";

impl Agent {
    /// True while plan mode is active (write tools refused, the plan-mode prompt section sent).
    pub fn in_plan_mode(&self) -> bool {
        self.inner.pipeline.plan_state().is_active()
    }

    /// Enter plan mode before a turn (a front end's `--plan`, `/plan`): sets the flag, so the
    /// next request carries the plan-mode prompt section and tools that could change anything
    /// are refused, and logs `plan/mode {active: true}`. Returns false (logging nothing) when
    /// plan mode is already active. Between turns only: a running turn's requests would change
    /// mid-way.
    pub fn enter_plan_mode(&self) -> Result<bool, AgentError> {
        let was = self.in_plan_mode();
        self.set_plan_mode(true)?;
        Ok(!was)
    }

    /// The plan awaiting the user's approval: plan mode is active and the last `plan/mode`
    /// event holds a plan that was not approved (handed to the user because nobody could
    /// answer, or refused in the turn). `None` otherwise.
    pub fn proposed_plan(&self) -> Option<String> {
        if !self.in_plan_mode() {
            return None;
        }
        let last = last_plan_mode(self.log().session())?;
        match last {
            PlanModeEvent {
                active: true,
                plan: Some(plan),
                approved: Some(false),
            } => Some(plan),
            _ => None,
        }
    }

    /// Approve the plan awaiting approval ([`Agent::proposed_plan`]) between turns: plan mode
    /// ends (logged `plan/mode {active: false, plan, approved: true}`) and a follow-up turn is
    /// queued that tells the model so ([`PLAN_APPROVED_PROMPT`], then `note` when given).
    /// Returns the approved plan, or `None` (nothing logged or queued) when no plan awaits
    /// approval. In a turn, approval goes through the [`Approver`] instead.
    pub fn approve_plan(&self, note: Option<&str>) -> Result<Option<String>, AgentError> {
        let Some(plan) = self.proposed_plan() else {
            return Ok(None);
        };
        self.inner.pipeline.plan_state().set_active(false);
        self.push(EventBody::PlanMode(Box::new(PlanModeEvent {
            active: false,
            plan: Some(plan.clone()),
            approved: Some(true),
        })))?;
        let text = match note.map(str::trim).filter(|n| !n.is_empty()) {
            Some(note) => format!("{PLAN_APPROVED_PROMPT}\n\n{note}"),
            None => PLAN_APPROVED_PROMPT.to_owned(),
        };
        self.followup(&text)?;
        Ok(Some(plan))
    }
}

/// The last `plan/mode` event of `session` (what plan mode it was left in).
fn last_plan_mode(session: &keel_session::Session) -> Option<PlanModeEvent> {
    session
        .whole_event_iter()
        .filter_map(|ev| match &ev.body {
            EventBody::PlanMode(p) => Some(p),
            _ => None,
        })
        .last()
        .map(|p| (**p).clone())
}

/// A human message.
pub fn user_message(text: &str) -> Message {
    Message::user_text(
        text,
        MessageSource::user(),
        uuid::Uuid::new_v4().to_string(),
    )
}
