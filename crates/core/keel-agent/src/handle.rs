//! The plugin handle: [`AgentHandle`], what hooks, tools and plugin services are given of an
//! agent instead of the [`Agent`] itself.
//!
//! An agent's owner (a front end, the host, a parent running a subagent) holds the [`Agent`]
//! and drives it: runs turns, changes its modes, reads its log directly. A plugin gets an
//! [`AgentHandle`]: it reads the session through closures that never let the log's lock
//! escape ([`AgentHandle::with_session`] and a few direct queries), appends only its own
//! events and messages, queues messages, and reaches the agent's ids, settings, flags, tools
//! and jobs. Everything a plugin may do is a method here.
//!
//! Plugins are installed before their agent exists; they keep a [`WeakHandle`] (or an
//! [`AgentSlot`] bound once the agent is built), so that the agent's own seams, which hold
//! the plugin's hooks and tools, do not keep the agent alive. A tool shared by several agents
//! (a parent and its subagents) finds the agent running the call with [`calling_agent`].

use crate::agent::{Agent, AgentConfig, Inner};
use crate::background::{Background, TurnActivity};
use crate::error::AgentError;
use crate::inbox::InboxMode;
use keel_protocol::{EventBody, Message, Seq, SessionId, SurfaceOp, TurnNo};
use keel_session::Session;
use keel_session::store::FlushTicket;
use keel_tools::{JobControl, Pipeline};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock, Weak};
use tokio_util::sync::CancellationToken;

/// What a plugin holds of an agent: the operations hooks, tools and plugin services use.
/// Clone to share; it keeps the agent alive (hold a [`WeakHandle`] where the agent's own
/// seams keep you alive).
#[derive(Clone)]
pub struct AgentHandle {
    agent: Agent,
}

impl std::fmt::Debug for AgentHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("AgentHandle").field(&self.agent).finish()
    }
}

impl Agent {
    /// The narrow handle plugins are given ([`AgentHandle`]): what hooks, tools and plugin
    /// services may do with this agent.
    pub fn handle(&self) -> AgentHandle {
        AgentHandle::new(self.clone())
    }
}

impl AgentHandle {
    pub(crate) fn new(agent: Agent) -> Self {
        AgentHandle { agent }
    }

    /// The agent behind the handle (inside keel-agent only: its own built-in plugins, the
    /// subagent tool and compaction, run the loop's own operations).
    pub(crate) fn agent(&self) -> &Agent {
        &self.agent
    }

    /// A weak handle to the same agent.
    pub fn downgrade(&self) -> WeakHandle {
        WeakHandle(Arc::downgrade(&self.agent.inner))
    }

    /// True when `other` is a handle to the same agent.
    pub fn is(&self, other: &AgentHandle) -> bool {
        Arc::ptr_eq(&self.agent.inner, &other.agent.inner)
    }

    // --- identity, settings and flags ---

    /// The session id.
    pub fn session_id(&self) -> SessionId {
        self.agent.session_id()
    }

    /// The agent's settings (model, working directory, budgets).
    pub fn config(&self) -> &AgentConfig {
        self.agent.config()
    }

    /// The agent's model provider (a child on another model of the same provider uses it).
    pub fn provider(&self) -> &Arc<dyn keel_llm::Provider> {
        self.agent.provider()
    }

    /// The number of the running turn, or of the last one (0 before the first).
    pub fn current_turn(&self) -> TurnNo {
        self.agent.current_turn()
    }

    /// True while a turn runs.
    pub fn is_busy(&self) -> bool {
        self.agent.is_busy()
    }

    /// True when a follow-up turn is waiting in the inbox.
    pub fn has_pending_turn(&self) -> bool {
        self.agent.has_pending_turn()
    }

    /// True while plan mode is active.
    pub fn in_plan_mode(&self) -> bool {
        self.agent.in_plan_mode()
    }

    /// The cancellation token of the running (or last) turn: work done on the turn's behalf
    /// outside the loop (a command hook) stops with it.
    pub fn turn_cancel_token(&self) -> CancellationToken {
        self.agent.turn_cancel_token()
    }

    /// The agent's tool pipeline: its tools (what is offered, their schemas) and how a tool
    /// dispatches nested calls.
    pub fn pipeline(&self) -> &Pipeline {
        self.agent.pipeline()
    }

    // --- reading the session (the log's lock never escapes) ---

    /// Read the session under the log's lock: `read` gets the session and returns what the
    /// caller needs from it. The lock is held only while `read` runs; `read` must not call
    /// back into this agent (the lock is not reentrant) and must not block.
    pub fn with_session<R>(&self, read: impl FnOnce(&Session) -> R) -> R {
        read(self.agent.log().session())
    }

    /// The seq the next event will get (the session's length).
    pub fn next_seq(&self) -> Seq {
        self.with_session(Session::next_seq)
    }

    /// How deep in a delegation this session is (0 for a top-level session).
    pub fn delegation_depth(&self) -> u32 {
        self.with_session(|s| s.header().delegation_depth)
    }

    /// The session this one was started from (a subagent's parent), if any.
    pub fn parent_session(&self) -> Option<SessionId> {
        self.with_session(|s| s.header().parent_session.clone())
    }

    /// The session log's file (a command hook's `transcript_path`).
    pub fn transcript_path(&self) -> PathBuf {
        self.agent.log().writer().path().to_path_buf()
    }

    /// A ticket to wait for every event appended so far to be on disk: await
    /// [`FlushTicket::durable`] from async code ([`FlushTicket::wait`] blocks the thread).
    pub fn flush_ticket(&self) -> FlushTicket {
        self.agent.log().flush_ticket()
    }

    // --- writing: a plugin's own events and messages ---

    /// Append a plugin's own event (`continuity/projection`, …), marked `ignorable` so that a
    /// reader that does not know `type_name` may skip it. `type_name` must be namespaced
    /// (`plugin/…`) and not a type keel models.
    pub fn push_ignorable(
        &self,
        type_name: &str,
        data: serde_json::Value,
    ) -> Result<Seq, AgentError> {
        self.agent.push_ignorable(type_name, data)
    }

    /// Append a non-surface event (a command hook's `hook/invoked` and `hook/finished`).
    pub fn push(&self, body: EventBody) -> Result<Seq, AgentError> {
        self.agent.push(body)
    }

    /// Append `message` to the surface as a `user/message` event outside any step (a plugin's
    /// greeting; its source says which plugin wrote it).
    pub fn push_message(&self, message: Message) -> Result<Seq, AgentError> {
        self.agent.push_surface(
            EventBody::UserMessage(Box::new(message)),
            SurfaceOp::Append,
            Vec::new(),
        )
    }

    /// Queue a message. Returns whether the agent should wake (followup/steer).
    pub fn enqueue(&self, mode: InboxMode, message: Message) -> Result<bool, AgentError> {
        self.agent.enqueue(mode, message)
    }

    /// Queue a human prompt as its own turn.
    pub fn followup(&self, text: &str) -> Result<(), AgentError> {
        self.agent.followup(text)
    }

    /// Queue a message from outside the loop (a job's notice, a delegation's report).
    /// `choose` picks the inbox mode from whether a turn is running, atomically with the
    /// insertion; a follow-up wakes [`Agent::run_until_idle`]. Returns the mode used.
    pub fn deliver(
        &self,
        message: Message,
        choose: impl FnOnce(TurnActivity) -> InboxMode,
    ) -> Result<InboxMode, AgentError> {
        self.agent.deliver(message, choose)
    }

    /// Start `work` beside the loop (a title request): it never blocks or fails a turn; a
    /// headless front end waits for it, bounded, before it exits ([`crate::side`]). Returns
    /// false when no async runtime runs here.
    pub fn spawn_side_work(
        &self,
        work: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> bool {
        self.agent.spawn_side_work(work)
    }

    // --- control: turns and background work ---

    /// Cancel the running turn.
    pub fn cancel_turn(&self) {
        self.agent.cancel_turn();
    }

    /// Attach the background service whose jobs this agent owns (the `jobs` plugin). The
    /// first attachment wins; returns false when one was attached before.
    pub fn attach_background(&self, service: Arc<dyn Background>) -> bool {
        self.agent.attach_background(service)
    }

    /// Job control scoped to this agent, when a background service is attached: its jobs,
    /// their output, starting and killing them.
    pub fn jobs(&self) -> Option<Arc<dyn JobControl>> {
        self.agent.jobs()
    }

    /// Stop this agent's running jobs. Returns their ids.
    pub fn kill_jobs(&self) -> Vec<String> {
        self.agent.kill_jobs()
    }
}

/// A weak [`AgentHandle`]: held by tools, hooks and services that an agent's own seams keep
/// alive (so they must not keep the agent alive in turn).
#[derive(Clone, Default)]
pub struct WeakHandle(Weak<Inner>);

impl std::fmt::Debug for WeakHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("WeakHandle")
            .field(&(self.0.strong_count() > 0))
            .finish()
    }
}

impl WeakHandle {
    /// The handle, while the agent lives.
    pub fn upgrade(&self) -> Option<AgentHandle> {
        self.0
            .upgrade()
            .map(|inner| AgentHandle::new(Agent { inner }))
    }

    /// True when this points at the agent of `handle`.
    pub fn is(&self, handle: &AgentHandle) -> bool {
        std::ptr::eq(self.0.as_ptr(), Arc::as_ptr(&handle.agent.inner))
    }
}

/// A slot bound once to the agent a tool or hook serves: tools and hooks are registered before
/// their agent exists, and bound to it afterwards (an `on_agent` callback of the plugin
/// install). The first binding wins.
#[derive(Default)]
pub struct AgentSlot(OnceLock<WeakHandle>);

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
    pub fn bind(&self, agent: &AgentHandle) -> bool {
        self.0.set(agent.downgrade()).is_ok()
    }

    /// True once bound (even if the agent has since gone).
    pub fn is_bound(&self) -> bool {
        self.0.get().is_some()
    }

    /// True when bound to `agent`.
    pub fn holds(&self, agent: &AgentHandle) -> bool {
        self.0.get().is_some_and(|w| w.is(agent))
    }

    /// The bound agent, while it lives.
    pub fn get(&self) -> Option<AgentHandle> {
        self.0.get().and_then(WeakHandle::upgrade)
    }
}

/// The agent running a tool call (`None` outside an agent loop): where a tool finds its
/// session, its ancestors and its workspace without taking an id from the model. The step
/// host reports the agent's [`keel_tools::CallerId`], which every agent registers when it is
/// built: the handle comes back typed, with no downcast.
pub fn calling_agent(ctx: &keel_tools::ToolContext<'_>) -> Option<AgentHandle> {
    crate::agent::caller(ctx.caller.caller()?).map(AgentHandle::new)
}
