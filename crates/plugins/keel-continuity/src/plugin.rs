//! The `continuity` plugin row: one [`Tracker`] per agent (the top-level agent and every
//! subagent), on these seams —
//!
//! | seam | what it does |
//! |---|---|
//! | `session/event` | anchors each committed human `user/message` (top-level sessions) |
//! | `agent/inbox/inserted` | a child's first message: its delegation anchor |
//! | `agent/runtime-context` | before each request: is a boundary pending? If so, fold, check the anchors, render, log `continuity/projection` and deliver the projection once |
//! | `subagent/build` | gives the child its own tracker, linked to this one |
//! | `agent/turn-stopping` | bounded max-tokens continuation (only with `max_token_continuations > 0`) |
//! | `tools/guard`, `session/event`, five tools | explicit control (only with `control` other than `"off"`; [`crate::control`]) |
//!
//! Before a boundary the runtime hook is a lock and two comparisons and adds nothing: the
//! request is byte-for-byte the one keel sends without the plugin.

use crate::anchors::{AnchorError, Anchors, Delegation, InitialMessage, SCHEMA_VERSION, Source};
use crate::basis::{Basis, fold};
use crate::continuation;
use crate::control::{ControlGuard, ControlMode, Controller, default_guarded_tools};
pub use crate::presenter::PROJECTION_EVENT;
use crate::render::{BoundaryKind, DEFAULT_BUDGET, Frame, Lineage, Rendered, render};
use keel_agent::plugin::{InstallContext, Plugin, PluginError, PluginId, plugin_config};
use keel_agent::seams::{HookError, HookRegistry, RuntimeContext};
use keel_agent::{AgentHandle, AgentSlot};
use keel_protocol::sync::Locked;
use keel_protocol::{EventBody, KnownSource, Message, MessageSource, Seq, SessionEvent};
use keel_session::Session;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard};

/// The plugin's identity: row id `continuity`; its messages carry the source `keel/continuity`.
pub const ID: PluginId = keel_agent::plugin_id!("continuity");

/// The `[plugins.config]` table of a `continuity` row.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContinuityConfig {
    /// Re-project at boundaries (default true).
    #[serde(default = "yes")]
    pub passive: bool,
    /// Budget of a projection's text in bytes (default 262144).
    #[serde(default = "budget")]
    pub budget_bytes: usize,
    /// How many child results a projection carries (default 3).
    #[serde(default = "three")]
    pub child_results: usize,
    /// Continuations queued after a turn that ended at the output limit (default 0: none).
    #[serde(default)]
    pub max_token_continuations: u32,
    /// Explicit control mode: `"off"` (default), `"contract"` (what `--control contract`
    /// sets: active from the first message) or `"on-request"` (active once a human message
    /// says "use explicit control").
    #[serde(default)]
    pub control: ControlMode,
    /// Tools the control guard admits only with an authorization (default write, edit, bash).
    #[serde(default = "default_guarded_tools")]
    pub guarded_tools: Vec<String>,
}

fn yes() -> bool {
    true
}
fn budget() -> usize {
    DEFAULT_BUDGET
}
fn three() -> usize {
    3
}

impl Default for ContinuityConfig {
    fn default() -> Self {
        ContinuityConfig {
            passive: true,
            budget_bytes: DEFAULT_BUDGET,
            child_results: 3,
            max_token_continuations: 0,
            control: ControlMode::Off,
            guarded_tools: default_guarded_tools(),
        }
    }
}

/// The plugin.
#[derive(Debug, Clone, Copy, Default)]
pub struct ContinuityPlugin;

impl Plugin for ContinuityPlugin {
    fn id(&self) -> PluginId {
        ID
    }

    fn description(&self) -> &'static str {
        "re-projects the human's words, the approved plan, the todo and child results after compaction, resume and delegation"
    }

    fn enabled_by_default(&self) -> bool {
        true
    }

    fn presenter(&self) -> Option<keel_protocol::present::MakePresenter> {
        Some(crate::presenter::presenter())
    }

    fn install(&self, ctx: &mut InstallContext, config: Value) -> Result<(), PluginError> {
        let config: ContinuityConfig = plugin_config(ID, config)?;
        let shared = Arc::new(Shared {
            anchors: Anchors::new(&ctx.keel_home),
            config,
            presenters: ctx.presenters.clone(),
        });
        let top = Tracker::new(shared.clone(), None, None);
        install_agent(&mut ctx.agent_hooks, top.clone());
        if shared.config.max_token_continuations > 0 {
            ctx.agent_hooks
                .turn_stopping
                .push(continuation::hook(shared.config.max_token_continuations));
        }
        ctx.on_agent.push(Box::new(move |agent| top.bind(agent)));
        if shared.config.control != ControlMode::Off {
            install_control(ctx, &shared.config);
        }
        Ok(())
    }
}

/// What every tracker of one install shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) anchors: Anchors,
    pub(crate) config: ContinuityConfig,
    /// The plugins' presenters: the carried state of other plugins (the goal).
    pub(crate) presenters: keel_protocol::present::PresenterSet,
}

/// Continuity's view of one agent.
pub(crate) struct Tracker {
    shared: Arc<Shared>,
    parent: Option<Arc<Tracker>>,
    /// A child's (own, parent's) session ids, from `subagent/build`.
    ids: Option<(String, String)>,
    agent: AgentSlot,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Read from the log once, at the first hook call.
    ready: bool,
    /// A top-level session (anchors its human messages).
    top: bool,
    /// Spawn or fork child: its boundary until delivered.
    child: Option<BoundaryKind>,
    /// Seed length of a fork (replacements before it are inherited, not boundaries).
    seed: u64,
    /// The log's length when this process first saw it (a replacement before it was found
    /// on a cold load: a resume boundary).
    loaded: u64,
    /// The highest boundary seq already answered by a projection.
    answered: Option<Seq>,
    /// The root session of the task.
    root: String,
    /// The child's first message, once inserted.
    first: Option<InitialMessage>,
    /// An anchor failure seen by an observer, surfaced at the next request.
    failure: Option<String>,
}

impl Tracker {
    fn new(
        shared: Arc<Shared>,
        parent: Option<Arc<Tracker>>,
        ids: Option<(String, String)>,
    ) -> Arc<Tracker> {
        Arc::new(Tracker {
            shared,
            parent,
            ids,
            agent: AgentSlot::new(),
            state: Mutex::new(State::default()),
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.locked()
    }

    fn bind(&self, agent: &AgentHandle) {
        self.agent.bind(agent);
        let mut st = self.state();
        if !st.ready {
            let view = agent.with_session(LogView::of);
            self.init(&mut st, &view);
        }
    }

    /// Read what the log says: lineage, seed, loaded length, projections already delivered.
    fn init(&self, st: &mut State, view: &LogView) {
        st.ready = true;
        st.loaded = view.len;
        st.seed = view.seed;
        st.answered = view.answered;
        st.top = self.parent.is_none() && view.depth == 0;
        st.child = view.child_boundary();
        if !st.root.is_empty() {
            return;
        }
        st.root = match &self.parent {
            Some(p) => p.root(),
            None => self.shared.anchors.root_of(&view.id, view.depth),
        };
    }

    fn root(&self) -> String {
        self.state().root.clone()
    }

    /// The agent of the task's root session, when this process runs it.
    fn root_agent(&self) -> Option<AgentHandle> {
        let mut t = self;
        while let Some(p) = &t.parent {
            t = p;
        }
        t.agent.get()
    }

    /// `session/event`: anchor a committed human message.
    fn observe(&self, ev: &SessionEvent) {
        let EventBody::UserMessage(m) = &ev.body else {
            return;
        };
        if !m.source.is_user() {
            return;
        }
        let mut st = self.state();
        if !st.ready || !st.top {
            // Not bound yet (the top agent is bound before its first turn) or a child (a
            // child's messages are not the human's).
            return;
        }
        let source = Source {
            seq: ev.seq.0,
            event_id: m.id.clone(),
            digest: crate::anchors::content_digest(&m.content),
        };
        if let Err(e) = self.shared.anchors.anchor(&st.root, &[source]) {
            st.failure.get_or_insert(e.to_string());
        }
    }

    /// `agent/inbox/inserted`: a child's first message becomes its delegation anchor.
    fn inserted(&self, message: &Message) {
        let (Some(parent), Some((child_id, parent_id))) = (&self.parent, &self.ids) else {
            return;
        };
        let mut st = self.state();
        if st.first.is_some() {
            return;
        }
        if st.root.is_empty() {
            st.root = parent.root();
        }
        let first = InitialMessage {
            id: message.id.clone(),
            digest: crate::anchors::content_digest(&message.content),
        };
        let record = Delegation {
            schema_version: SCHEMA_VERSION,
            child_session_id: child_id.clone(),
            parent_session_id: parent_id.clone(),
            root_session_id: st.root.clone(),
            initial_message: first.clone(),
        };
        if let Err(e) = self.shared.anchors.record_delegation(&record) {
            st.failure.get_or_insert(e.to_string());
        }
        st.first = Some(first);
    }

    /// `agent/runtime-context`: deliver the projection of a pending boundary, once.
    fn runtime(&self, ctx: &RuntimeContext) -> Result<Vec<Message>, HookError> {
        let agent = &ctx.agent;
        let mut st = self.state();
        if !st.ready {
            self.agent.bind(agent);
            let view = agent.with_session(LogView::of);
            self.init(&mut st, &view);
        }
        if let Some(message) = st.failure.take() {
            return Err(hook_error(message));
        }
        let last = agent.with_session(|s| s.surface().last_replacement());
        let Some((kind, boundary)) = pending(st.child, last, st.seed, st.answered, st.loaded)
        else {
            return Ok(Vec::new());
        };
        // A boundary: everything below runs once per boundary.
        let projected = self.project(agent, &st, kind, boundary)?;
        st.child = None;
        st.answered = Some(st.answered.map_or(boundary, |a| a.max(boundary)));
        drop(st);
        if let Some(text) = &projected.text {
            let mut extra = Map::new();
            extra.insert("form".into(), json!("projection"));
            extra.insert("boundarySeq".into(), json!(boundary.0));
            // Not `kind`: that is the source's own tag (`"kind": "plugin"`).
            extra.insert("boundaryKind".into(), json!(kind.as_str()));
            let source = MessageSource::Known(KnownSource::Plugin {
                plugin: ID.source().into(),
                extra,
            });
            let message =
                Message::user_text(text.clone(), source, uuid::Uuid::new_v4().to_string());
            agent
                .push_message(message)
                .map_err(|e| hook_error(format!("cannot log the projection: {e}")))?;
        }
        let mut data = json!({
            "boundarySeq": boundary.0,
            "kind": kind.as_str(),
            "items": projected.items,
            "bytes": projected.bytes(),
        });
        if let Some(src) = &projected.source_session {
            data["sourceSession"] = json!(src);
        }
        agent
            .push_ignorable(PROJECTION_EVENT, data)
            .map_err(|e| hook_error(format!("cannot log {PROJECTION_EVENT}: {e}")))?;
        Ok(Vec::new())
    }

    /// Fold, verify against the anchors and render the projection of a boundary.
    fn project(
        &self,
        agent: &AgentHandle,
        st: &State,
        kind: BoundaryKind,
        boundary: Seq,
    ) -> Result<Projected, HookError> {
        let config = &self.shared.config;
        let presenters = &self.shared.presenters;
        let own_id = agent.session_id().to_string();
        // A spawned child folds its parent's log (its own holds only its prompt); everything
        // else folds its own, up to now.
        let parent_agent = self.parent.as_ref().and_then(|p| p.agent.get());
        let spawn_source = (kind == BoundaryKind::Spawn)
            .then_some(parent_agent.as_ref())
            .flatten();
        let (mut basis, on_surface, source_session) = match spawn_source {
            Some(parent) => {
                let id = parent.session_id().to_string();
                let basis = parent
                    .with_session(|s| fold(s, s.next_seq(), config.child_results, presenters));
                (basis, HashSet::new(), id)
            }
            None => {
                let (basis, on_surface) = agent.with_session(|s| {
                    (
                        fold(s, s.next_seq(), config.child_results, presenters),
                        s.surface().nodes().iter().copied().collect(),
                    )
                });
                (basis, on_surface, own_id.clone())
            }
        };
        // A grandchild's parent holds no human message: the human's words come from the root.
        if spawn_source.is_some()
            && source_session != st.root
            && let Some(root) = self.root_agent()
        {
            basis.humans = root.with_session(|s| fold(s, s.next_seq(), 0, presenters).humans);
        }
        let humans_from = match spawn_source {
            Some(_) if !basis.humans.is_empty() => st.root.clone(),
            _ => source_session.clone(),
        };
        self.verify(st, &basis, &humans_from)?;
        let lineage = Lineage {
            root: st.root.clone(),
            parent: parent_agent
                .map(|p| p.session_id().to_string())
                .or_else(|| agent.parent_session().map(|p| p.to_string())),
            current: own_id,
            first_message: st.first.as_ref().map(|f| (f.id.clone(), f.digest.clone())),
        };
        let frame = Frame {
            kind,
            boundary,
            source_session: &source_session,
            lineage: &lineage,
            budget: config.budget_bytes,
        };
        let Rendered { text, items } = render(&basis, &on_surface, &frame);
        Ok(Projected {
            text,
            items,
            source_session: (source_session != lineage.current).then_some(source_session),
        })
    }

    /// The human messages of the basis must match the task's anchors (new ones are anchored).
    fn verify(&self, st: &State, basis: &Basis, source_session: &str) -> Result<(), HookError> {
        if basis.humans.is_empty() {
            return Ok(());
        }
        // Only the root session's log holds the task's human messages under its seqs; a
        // fork's seed copies them with the same seqs.
        if source_session != st.root && st.seed == 0 {
            return Ok(());
        }
        let sources: Vec<Source> = basis.humans.iter().map(|h| h.source()).collect();
        self.shared
            .anchors
            .verify(&st.root, &sources)
            .map_err(|e: AnchorError| hook_error(e.to_string()))
    }
}

struct Projected {
    text: Option<String>,
    items: Vec<crate::render::Item>,
    source_session: Option<String>,
}

impl Projected {
    fn bytes(&self) -> usize {
        self.text.as_ref().map_or(0, String::len)
    }
}

fn hook_error(message: String) -> HookError {
    HookError {
        plugin: ID.as_str().to_owned(),
        message,
    }
}

/// The boundary a request would answer now, if one is pending: a delegated child's own
/// (`child`, until answered), else the last replacement (`last`) when it is not inherited in
/// a fork's seed and no projection answered it — a resume boundary when it was already in the
/// log this process `loaded`.
pub(crate) fn pending(
    child: Option<BoundaryKind>,
    last: Option<Seq>,
    seed: u64,
    answered: Option<Seq>,
    loaded: u64,
) -> Option<(BoundaryKind, Seq)> {
    let replaced = last.filter(|r| r.0 >= seed && answered.is_none_or(|a| *r > a));
    match (child, replaced) {
        (Some(kind), r) => Some((kind, r.unwrap_or(Seq(loaded)))),
        (None, Some(r)) if r.0 < loaded => Some((BoundaryKind::Resume, r)),
        (None, Some(r)) => Some((BoundaryKind::Replace, r)),
        (None, None) => None,
    }
}

/// What a tracker reads from the log once ([`LogView::of`]).
pub(crate) struct LogView {
    pub(crate) id: String,
    pub(crate) len: u64,
    pub(crate) seed: u64,
    pub(crate) depth: u32,
    /// The highest boundary a projection of this session's own answered.
    pub(crate) answered: Option<Seq>,
    child_answered: bool,
}

impl LogView {
    /// A delegated child's own boundary, while no projection has answered it.
    pub(crate) fn child_boundary(&self) -> Option<BoundaryKind> {
        match (self.depth, self.seed) {
            (0, _) => None,
            _ if self.child_answered => None,
            (_, 0) => Some(BoundaryKind::Spawn),
            _ => Some(BoundaryKind::Fork),
        }
    }

    pub(crate) fn of(session: &Session) -> LogView {
        let h = session.header();
        let seed = h.seed_length.unwrap_or(0);
        let mut answered: Option<Seq> = None;
        let mut child_answered = false;
        for ev in session.whole_event_iter() {
            if let Some((boundary, kind)) = projection_marker(ev) {
                if ev.seq.0 < seed {
                    continue; // inherited from the parent
                }
                answered = Some(answered.map_or(boundary, |a| a.max(boundary)));
                child_answered |= kind.is_child();
            }
        }
        LogView {
            id: h.id.to_string(),
            len: session.len(),
            seed,
            depth: h.delegation_depth,
            answered,
            child_answered,
        }
    }
}

/// A `continuity/projection` event or a projection message: (boundary seq, kind).
pub(crate) fn projection_marker(ev: &SessionEvent) -> Option<(Seq, BoundaryKind)> {
    let (boundary, kind) = match &ev.body {
        EventBody::Other(o) if o.type_name == PROJECTION_EVENT => {
            (o.data.get("boundarySeq")?, o.data.get("kind")?)
        }
        EventBody::UserMessage(m) => match &m.source {
            MessageSource::Known(KnownSource::Plugin { plugin, extra })
                if plugin == ID.source() && extra.get("form")? == "projection" =>
            {
                (extra.get("boundarySeq")?, extra.get("boundaryKind")?)
            }
            _ => return None,
        },
        _ => return None,
    };
    Some((
        Seq(boundary.as_u64()?),
        BoundaryKind::parse(kind.as_str()?)?,
    ))
}

/// Install `tracker`'s hooks into one agent's registry; children get their own trackers.
fn install_agent(hooks: &mut HookRegistry, tracker: Arc<Tracker>) {
    if tracker.shared.config.passive {
        let t = tracker.clone();
        hooks
            .runtime_context
            .push(Arc::new(move |ctx: &RuntimeContext| t.runtime(ctx)));
    }
    let t = tracker.clone();
    hooks
        .session_event
        .push(Arc::new(move |ev: &SessionEvent| t.observe(ev)));
    let t = tracker.clone();
    hooks
        .inbox_inserted
        .push(Arc::new(move |ins: &keel_agent::seams::InboxInserted| {
            t.inserted(&ins.message)
        }));
    let t = tracker;
    hooks.subagent_build.push(Arc::new(move |build, setup| {
        let ids = (build.child.to_string(), build.parent.to_string());
        let child = Tracker::new(t.shared.clone(), Some(t.clone()), Some(ids));
        install_agent(&mut setup.hooks, child);
    }));
}

/// Explicit control: the five tools, the guard (global, so a subagent's guarded calls are
/// admitted against the same contract) and the top agent's observer.
fn install_control(ctx: &mut InstallContext, config: &ContinuityConfig) {
    let controller = Controller::new(
        config.control,
        config.guarded_tools.clone(),
        ctx.cwd.clone(),
        &ctx.keel_home,
    );
    ctx.tools.extend(crate::control::tools(&controller));
    let hook = Arc::new(ControlGuard(controller.clone()));
    ctx.hooks.tools = std::mem::take(&mut ctx.hooks.tools)
        .guard(hook.clone())
        .settled(hook);
    let c = controller.clone();
    ctx.agent_hooks
        .session_event
        .push(Arc::new(move |ev: &SessionEvent| c.observe(ev)));
    ctx.on_agent
        .push(Box::new(move |agent| controller.bind(agent)));
}
