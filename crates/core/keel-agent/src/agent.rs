//! The [`Agent`]: one session log, one model, one tool pipeline, one inbox.
//!
//! An agent is a cheap handle (`Arc` inside) shared by the loop and the front end that owns it;
//! plugins get the narrower [`crate::AgentHandle`]. Every model-visible change goes through the
//! session log ([`Agent::push`]), which validates it, queues it for durable writing and
//! notifies `session/event` observers.
//!
//! This module holds the agent's state and the operations on it (log, inbox, modes, the
//! background service). The modules above it depend on it, never the other way: building in
//! [`crate::builder`], request assembly in [`crate::request`], the turn and step algorithm in
//! [`crate::turn`], the plugin-facing handle in [`crate::handle`].

use crate::background::{Background, TurnActivity};
use crate::error::AgentError;
use crate::inbox::InboxMode;
use crate::prompt::InstructionFile;
use crate::seams::{FlushPoint, HookRegistry, InboxInserted};
use crate::session_modes::KeptModes;
use crate::state::LoopState;
use keel_llm::Provider;
use keel_protocol::TurnNo;
use keel_protocol::sync::Locked;
use keel_protocol::{
    ApprovalPolicyEvent, EventBody, Message, MessageSource, PlanModeEvent, SandboxModeEvent, Seq,
    SessionEvent, SessionId, SurfaceOp,
};
use keel_session::PersistentSession;
use keel_tools::CallerId;
use keel_tools::subprocess::confine::Enforcement;
use keel_tools::{JobControl, Pipeline, SandboxMode};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use tokio_util::sync::CancellationToken;

pub use crate::config::{AgentConfig, ApprovalPolicy, Approver, Asker, ToolSetup, allow_key};

pub(crate) struct Inner {
    pub(crate) config: AgentConfig,
    pub(crate) provider: Arc<dyn Provider>,
    pub(crate) pipeline: Pipeline,
    pub(crate) hooks: HookRegistry,
    pub(crate) global_hooks: HookRegistry,
    pub(crate) approver: Option<Arc<dyn Approver>>,
    pub(crate) asker: Option<Arc<dyn Asker>>,
    pub(crate) commands: Vec<Arc<dyn crate::plugin::CommandSource>>,
    pub(crate) instructions: Vec<InstructionFile>,
    /// Instruction files found and not read (a link out of the workspace, a FIFO …).
    pub(crate) skipped_instructions: Vec<crate::prompt::SkippedInstructions>,
    pub(crate) log: Mutex<PersistentSession>,
    pub(crate) state: Mutex<LoopState>,
    pub(crate) turn_cancel: Mutex<CancellationToken>,
    /// The background service this agent owns jobs in, once attached
    /// ([`crate::background`]).
    pub(crate) background: OnceLock<Arc<dyn Background>>,
    /// Signalled when a message from outside the loop queues a follow-up turn
    /// ([`Agent::deliver`]): `run_until_idle` wakes for it even while its background service
    /// has nothing settled to report.
    pub(crate) woken: tokio::sync::Notify,
    /// The approval policy in force: the configuration's (or what a resumed session kept)
    /// until [`Agent::set_approval`].
    pub(crate) approval: Mutex<ApprovalPolicy>,
    /// Where the policy in force came from ([`AgentConfig::approval_source`] until
    /// [`Agent::set_approval`] or a resumed session's kept mode), named in a refusal.
    pub(crate) approval_source: Mutex<String>,
    /// What a resumed session kept of the modes changed during it.
    pub(crate) kept_modes: KeptModes,
    /// This agent's entry among the tool callers ([`crate::calling_agent`]); removed when the
    /// agent goes.
    pub(crate) caller: CallerEntry,
    /// Work started beside the loop by its hooks ([`crate::side`]).
    pub(crate) side_work: crate::side::SideWork,
}

/// The agents that may be running tool calls, by the [`CallerId`] their step hosts hand the
/// pipeline: how [`crate::calling_agent`] finds the agent of a tool call, typed.
static CALLERS: Mutex<BTreeMap<u64, Weak<Inner>>> = Mutex::new(BTreeMap::new());
static NEXT_CALLER: AtomicU64 = AtomicU64::new(1);

/// An agent's place among the tool callers: registered when the agent is built, removed when
/// it goes.
#[derive(Default)]
pub(crate) struct CallerEntry(OnceLock<CallerId>);

impl CallerEntry {
    /// Register `agent` (once).
    pub(crate) fn register(&self, agent: &Agent) {
        let id = CallerId::new(NEXT_CALLER.fetch_add(1, Ordering::Relaxed));
        if self.0.set(id).is_ok() {
            CALLERS
                .locked()
                .insert(id.get(), Arc::downgrade(&agent.inner));
        }
    }

    /// The id the agent's step hosts report as the caller.
    pub(crate) fn id(&self) -> Option<CallerId> {
        self.0.get().copied()
    }
}

impl Drop for CallerEntry {
    fn drop(&mut self) {
        if let Some(id) = self.0.get() {
            CALLERS.locked().remove(&id.get());
        }
    }
}

/// The live agent registered as `id` ([`CallerEntry`]).
pub(crate) fn caller(id: CallerId) -> Option<Agent> {
    let weak = CALLERS.locked().get(&id.get()).cloned()?;
    weak.upgrade().map(|inner| Agent { inner })
}

/// The ignorable event a tool left out of a changed tool source is logged as.
pub const TOOL_SKIPPED_EVENT: &str = "tool/skipped";

/// A running agent, as its owner (a front end, the host, a parent running a subagent) holds
/// it. Clone to share.
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

impl Agent {
    /// The cancellation token of the running (or last) turn: work done on the turn's behalf
    /// outside the loop (a command hook) stops with it.
    pub fn turn_cancel_token(&self) -> CancellationToken {
        self.inner.turn_cancel.locked().clone()
    }

    /// The session id.
    pub fn session_id(&self) -> SessionId {
        self.log().session().header().id.clone()
    }

    /// The image store of the agent's keel home (`$KEEL_HOME/attachments`; `None` without a
    /// home): where prompt images and `read_image` results are kept.
    pub fn attachments(&self) -> Option<keel_tools::Attachments> {
        self.config()
            .keel_home
            .as_deref()
            .map(keel_tools::Attachments::under_home)
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

    /// Where the approval policy in force came from: the flag, file and key, or the mode set
    /// during the session ([`AgentConfig::approval_source`]).
    pub fn approval_source(&self) -> String {
        self.inner.approval_source.locked().clone()
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
        *self.inner.approval_source.locked() = if policy == self.inner.config.approval {
            self.inner.config.approval_source.clone()
        } else {
            format!("the session's mode (approval {})", policy.as_str())
        };
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

    /// Instruction files found in the workspace and not read, with why (a symlink out of the
    /// workspace, a FIFO, a file over the size limit); a front end tells the person, once.
    pub fn skipped_instructions(&self) -> &[crate::prompt::SkippedInstructions] {
        &self.inner.skipped_instructions
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

    /// The plugin command source that offers the slash command `name`, if one does.
    pub fn command_source(&self, name: &str) -> Option<&Arc<dyn crate::plugin::CommandSource>> {
        self.inner
            .commands
            .iter()
            .find(|c| c.commands().iter().any(|p| p.name == name))
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
        // The writer thread wakes this task when the flush is durable: no blocking-pool
        // thread in between.
        let ticket = self.log().flush_ticket();
        ticket.durable().await?;
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

    /// Attach the background service whose jobs this agent owns. The first attachment wins;
    /// returns false when one was attached before.
    pub fn attach_background(&self, service: Arc<dyn Background>) -> bool {
        self.inner.background.set(service).is_ok()
    }

    /// The attached background service, if any.
    pub fn background(&self) -> Option<&Arc<dyn Background>> {
        self.inner.background.get()
    }

    /// The id this agent's step hosts report as the caller of a tool
    /// ([`keel_tools::ToolCaller::caller`]): a host of the owner's that runs tools on the
    /// agent's behalf reports it too, so that [`crate::calling_agent`] finds the agent.
    pub fn caller_id(&self) -> Option<CallerId> {
        self.inner.caller.id()
    }

    /// Job control scoped to this agent (what its tools get), when a background service is
    /// attached and lets it own jobs.
    pub fn jobs(&self) -> Option<Arc<dyn JobControl>> {
        self.background()?.control(&self.session_id())
    }

    /// Stop this agent's running jobs (a front end about to exit). Returns their ids.
    pub fn kill_jobs(&self) -> Vec<String> {
        self.background()
            .map(|s| s.stop_owned(&self.session_id()))
            .unwrap_or_default()
    }

    /// True while a turn runs.
    pub fn is_busy(&self) -> bool {
        self.state().running
    }

    /// Queue a message from outside the loop (a job's notice). `choose` picks the inbox mode
    /// from whether a turn is running, atomically with the insertion. Returns the mode used.
    pub fn deliver(
        &self,
        message: Message,
        choose: impl FnOnce(TurnActivity) -> InboxMode,
    ) -> Result<InboxMode, AgentError> {
        let (splice, mode) = {
            let mut state = self.state();
            let activity = if state.running {
                TurnActivity::Running
            } else {
                TurnActivity::Idle
            };
            let mode = choose(activity);
            (state.inbox.insert(mode, message.clone()).0, mode)
        };
        self.push(EventBody::InboxSpliced(Box::new(splice)))?;
        self.hooks()
            .inbox_inserted
            .notify(&InboxInserted { mode, message });
        if mode == InboxMode::Followup {
            self.inner.woken.notify_one();
        }
        Ok(mode)
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
        let last = crate::session_modes::last_plan_mode(self.log().session())?;
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

/// A human message.
pub fn user_message(text: &str) -> Message {
    Message::user_text(
        text,
        MessageSource::user(),
        uuid::Uuid::new_v4().to_string(),
    )
}
