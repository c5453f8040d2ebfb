//! Context modes and projection policies.
//!
//! A session is in one of two modes. `native` (the default) sends the whole current surface,
//! exactly as keel does without this crate. `managed` asks a [`Policy`] per request which
//! surface nodes to send; the rest stays in the log, reachable through `history_search`. The
//! mode is logged as `context/mode {mode, policy}` (ignorable) and changes only between turns:
//! at agent build (a flag or config differing from what the log says) or, through
//! [`ContextSwitch::request`], at the first request of the next turn.
//!
//! A policy sees the surface through a [`NodeIndex`] (token estimates, the tool-call units a
//! projection must keep whole, the lexical terms of each node — cached per seq, so a request
//! over a long surface costs little) and returns seqs; the host checks them
//! (`keel_agent::request::check_projection`) and logs `context/projection`.

mod policies;

use crate::plugin::MemoryConfig;
use keel_agent::modes::middleware;
use keel_agent::plugin::{InstallContext, PluginError};
use keel_agent::seams::{ContextRequest, Projection};
use keel_agent::{AgentHandle, AgentSlot};
use keel_protocol::sync::Locked;
use keel_protocol::{ContentBlock, EventBody, KnownSource, Message, MessageSource, Seq};
use keel_session::DerivedMessage;
use rustc_hash::{FxHashMap, FxHashSet};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex, MutexGuard};

pub use policies::{Recent, Relevant, builtin_policies};

/// The ignorable event of a mode change.
pub const MODE_EVENT: &str = "context/mode";

/// A session's context mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ContextMode {
    /// The whole current surface (today's behaviour, byte for byte).
    #[default]
    Native,
    /// A projection policy chooses the history each request carries.
    Managed,
}

impl ContextMode {
    /// `native` or `managed`.
    pub fn as_str(self) -> &'static str {
        match self {
            ContextMode::Native => "native",
            ContextMode::Managed => "managed",
        }
    }
}

/// What a policy chooses from.
pub struct PolicyInput<'a> {
    /// The current surface with its per-node facts.
    pub index: &'a NodeIndex,
    /// Positions (in `index`) the host includes whatever the policy says (the current turn).
    pub required: &'a [usize],
    /// Positions the mode keeps: the session's first human message, the latest runtime-context
    /// snapshot, compaction summaries.
    pub pinned: &'a [usize],
    /// The history budget in estimated tokens.
    pub budget_tokens: u64,
    /// The current human message (what `relevant` scores against).
    pub query: &'a str,
}

/// A projection policy: picks surface seqs for one request. Whatever it returns, the host
/// checks (surface seqs only, each once, in order, tool-call units whole) and adds the
/// required seqs back.
pub trait Policy: Send + Sync {
    /// The name `policy = "…"` selects.
    fn name(&self) -> &str;
    /// The projection's `revision`: the policy's name and parameters.
    fn revision(&self, input: &PolicyInput<'_>) -> String;
    /// Whether it reads the lexical terms of nodes ([`NodeIndex::postings`]); the index builds
    /// them only then.
    fn needs_terms(&self) -> bool {
        false
    }
    /// The seqs to include, in surface order.
    fn project(&self, input: &PolicyInput<'_>) -> Vec<Seq>;
}

/// The surface of one session, indexed for policies and kept up to date across requests: the
/// surface only grows between replacements, so a request indexes only the nodes appended since
/// the last one (a replacement starts over).
#[derive(Debug, Default)]
pub struct NodeIndex {
    generation: u64,
    seqs: Vec<Seq>,
    tokens: Vec<u64>,
    /// Each node's unit (an index into `units`).
    unit_of: Vec<usize>,
    /// Units in surface order: a lone node, or an assistant message with tool calls and the
    /// results answering them.
    units: Vec<Vec<usize>>,
    /// Tool call id → the position of the assistant message making it.
    calls: FxHashMap<String, usize>,
    /// Term → positions of the nodes containing it (ascending), for the first `termed` nodes.
    postings: FxHashMap<String, Vec<u32>>,
    termed: usize,
}

impl NodeIndex {
    /// An index of `nodes` (the surface of `generation`), terms included: what one request
    /// of a fresh session costs.
    pub fn of(nodes: &[DerivedMessage], generation: u64) -> NodeIndex {
        let mut index = NodeIndex::default();
        index.update(nodes, generation);
        index.index_terms(nodes);
        index
    }

    /// Bring the index up to date with `nodes`, the surface of `generation`.
    pub fn update(&mut self, nodes: &[DerivedMessage], generation: u64) {
        let n = self.seqs.len();
        let same_prefix = generation == self.generation
            && nodes.len() >= n
            && (n == 0 || nodes[n - 1].seq == self.seqs[n - 1]);
        if !same_prefix {
            *self = NodeIndex {
                generation,
                ..NodeIndex::default()
            };
        }
        for (i, d) in nodes.iter().enumerate().skip(self.seqs.len()) {
            self.seqs.push(d.seq);
            self.tokens
                .push(keel_agent::compaction::meter::message_tokens(&d.message));
            let answered = d
                .message
                .tool_results()
                .find_map(|r| self.calls.get(r.tool_call_id.as_str()).copied());
            let unit = match answered {
                Some(owner) => self.unit_of[owner],
                None => {
                    self.units.push(Vec::new());
                    self.units.len() - 1
                }
            };
            self.units[unit].push(i);
            self.unit_of.push(unit);
            for call in d.message.tool_calls() {
                self.calls.insert(call.id.clone(), i);
            }
        }
    }

    /// Index the lexical terms of the nodes not indexed yet (`nodes` as given to
    /// [`NodeIndex::update`]); scoring policies ask for it ([`Policy::needs_terms`]).
    pub fn index_terms(&mut self, nodes: &[DerivedMessage]) {
        let mut seen: FxHashSet<String> = FxHashSet::default();
        for (i, d) in nodes
            .iter()
            .enumerate()
            .take(self.seqs.len())
            .skip(self.termed)
        {
            seen.clear();
            let Ok(pos) = u32::try_from(i) else {
                break;
            };
            crate::lexical::for_each_token(&searchable_text(&d.message), |t| {
                if seen.contains(t) {
                    return;
                }
                seen.insert(t.to_owned());
                match self.postings.get_mut(t) {
                    Some(list) => list.push(pos),
                    None => {
                        self.postings.insert(t.to_owned(), vec![pos]);
                    }
                }
            });
            self.termed = i + 1;
        }
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.seqs.len()
    }

    /// Whether the surface is empty.
    pub fn is_empty(&self) -> bool {
        self.seqs.is_empty()
    }

    /// The seq of node `i`.
    pub fn seq(&self, i: usize) -> Seq {
        self.seqs[i]
    }

    /// Estimated tokens of node `i` (the compaction meter's measure).
    pub fn tokens(&self, i: usize) -> u64 {
        self.tokens[i]
    }

    /// Positions of the nodes containing `term` (ascending); empty unless terms were indexed.
    pub fn postings(&self, term: &str) -> &[u32] {
        self.postings.get(term).map_or(&[], Vec::as_slice)
    }

    /// The unit of node `i`.
    pub fn unit_of(&self, i: usize) -> usize {
        self.unit_of[i]
    }

    /// Units in surface order, each its node positions (whole or not at all in a projection).
    pub fn units(&self) -> &[Vec<usize>] {
        &self.units
    }

    /// The seqs of `positions`, sorted into surface order.
    pub fn seqs_of(&self, positions: impl IntoIterator<Item = usize>) -> Vec<Seq> {
        let mut p: Vec<usize> = positions.into_iter().collect();
        p.sort_unstable();
        p.dedup();
        p.into_iter().map(|i| self.seqs[i]).collect()
    }
}

/// The text of a message a search looks at: text blocks, tool call names and arguments, tool
/// result text (reasoning excluded).
pub fn searchable_text(m: &Message) -> String {
    let mut out = String::new();
    for b in &m.content {
        match b {
            ContentBlock::Text { text } => push_line(&mut out, text),
            ContentBlock::ToolCall(c) => {
                push_line(&mut out, &c.name);
                push_line(&mut out, &c.arguments);
            }
            ContentBlock::ToolResult(r) => {
                for inner in &r.content {
                    if let ContentBlock::Text { text } = inner {
                        push_line(&mut out, text);
                    }
                }
            }
            ContentBlock::Reasoning { .. } | ContentBlock::Image(_) => {}
        }
    }
    out
}

fn push_line(out: &mut String, text: &str) {
    if !out.is_empty() {
        out.push('\n');
    }
    out.push_str(text);
}

/// The mode of one session, and a switch requested for the next turn.
#[derive(Debug, Clone)]
struct ModeState {
    mode: ContextMode,
    policy: String,
    /// Requested, applied (and logged) at the first request of the next turn.
    pending: Option<(ContextMode, String)>,
    /// The turn of the last request seen.
    turn: u32,
}

/// The managed-mode machinery of one install (the top-level agent; subagents run native).
pub struct ContextManager {
    policies: Vec<Arc<dyn Policy>>,
    budget_fraction: f64,
    /// Why `managed` cannot be entered, if a part it needs is off.
    unavailable: Option<String>,
    agent: AgentSlot,
    state: Mutex<ModeState>,
    index: Mutex<NodeIndex>,
}

impl std::fmt::Debug for ContextManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContextManager")
            .field("state", &*self.state())
            .finish()
    }
}

/// Why a mode cannot be entered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModeError {
    /// A part `managed` mode needs is disabled.
    #[error("context mode managed is refused: {0}")]
    Unavailable(String),
    /// No policy has this name.
    #[error("context policy {name:?} is unknown (known: {known})")]
    UnknownPolicy {
        /// The name asked for.
        name: String,
        /// The names there are.
        known: String,
    },
}

impl ContextManager {
    fn state(&self) -> MutexGuard<'_, ModeState> {
        self.state.locked()
    }

    fn policy(&self, name: &str) -> Option<&Arc<dyn Policy>> {
        self.policies.iter().find(|p| p.name() == name)
    }

    fn validate(&self, mode: ContextMode, policy: &str) -> Result<(), ModeError> {
        if mode == ContextMode::Native {
            return Ok(());
        }
        if let Some(why) = &self.unavailable {
            return Err(ModeError::Unavailable(why.clone()));
        }
        if self.policy(policy).is_none() {
            return Err(ModeError::UnknownPolicy {
                name: policy.to_owned(),
                known: self
                    .policies
                    .iter()
                    .map(|p| p.name().to_owned())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        Ok(())
    }

    /// The mode now: `(mode, policy)`.
    pub fn mode(&self) -> (ContextMode, String) {
        let st = self.state();
        (st.mode, st.policy.clone())
    }

    /// The agent is built (between turns): learn the logged mode; if `wanted` (flag or
    /// config) differs, switch now and log it.
    fn bind(&self, agent: &AgentHandle, wanted: Option<(ContextMode, String)>) {
        if !self.agent.bind(agent) {
            return;
        }
        let logged = agent.with_session(logged_mode);
        let mut st = self.state();
        if let Some((m, p)) = &logged {
            st.mode = *m;
            st.policy = p.clone();
        }
        let Some((mode, policy)) = wanted else {
            return;
        };
        let same = logged
            .as_ref()
            .is_some_and(|(m, p)| *m == mode && (mode == ContextMode::Native || *p == policy));
        if same || (logged.is_none() && mode == ContextMode::Native) {
            return;
        }
        st.mode = mode;
        st.policy = policy.clone();
        drop(st);
        // A log failure surfaces at the next append.
        let _ = agent.push_ignorable(MODE_EVENT, mode_event(mode, &policy, "start"));
    }

    /// The request's mode, applying a pending switch at the first request of a new turn.
    fn current(&self, turn: u32) -> (ContextMode, String, Option<Value>) {
        let mut st = self.state();
        let mut logged = None;
        if turn != st.turn {
            st.turn = turn;
            if let Some((mode, policy)) = st.pending.take()
                && (mode, policy.as_str()) != (st.mode, st.policy.as_str())
            {
                st.mode = mode;
                st.policy = policy.clone();
                logged = Some(mode_event(mode, &policy, "switch"));
            }
        }
        (st.mode, st.policy.clone(), logged)
    }

    /// The `agent/context` listener.
    async fn project(&self, req: ContextRequest) -> Option<Projection> {
        let (mode, policy_name, switched) = self.current(req.turn.0);
        if let Some(ev) = switched {
            let _ = req.agent.push_ignorable(MODE_EVENT, ev);
        }
        if mode == ContextMode::Native {
            return None;
        }
        let policy = self.policy(&policy_name)?.clone();
        let mut index = self.index.locked();
        index.update(&req.nodes, req.generation);
        if policy.needs_terms() {
            index.index_terms(&req.nodes);
        }
        // The required seqs are the surface's tail (the current turn).
        let first_required = req
            .required
            .first()
            .and_then(|s| (0..index.len()).rev().find(|&i| index.seq(i) == *s));
        let required: Vec<usize> = match first_required {
            Some(f) => (f..index.len()).collect(),
            None => Vec::new(),
        };
        let pinned = pinned(&req.nodes);
        let window = req.agent.config().model_info.context_window;
        let budget_tokens = (window as f64 * self.budget_fraction) as u64;
        let query = current_query(&req.nodes);
        let input = PolicyInput {
            index: &index,
            required: &required,
            pinned: &pinned,
            budget_tokens,
            query: &query,
        };
        Some(Projection {
            policy: policy.name().to_owned(),
            include: policy.project(&input),
            revision: Some(policy.revision(&input)),
        })
    }
}

/// A handle to switch a session's mode between turns (for front ends: a `/context` command).
#[derive(Debug, Clone)]
pub struct ContextSwitch(Arc<ContextManager>);

impl ContextSwitch {
    /// Ask for `mode` with `policy` from the next turn on (logged then). Refused when
    /// `managed` needs a part that is off, or the policy is unknown.
    pub fn request(&self, mode: ContextMode, policy: &str) -> Result<(), ModeError> {
        self.0.validate(mode, policy)?;
        self.0.state().pending = Some((mode, policy.to_owned()));
        Ok(())
    }

    /// The mode now.
    pub fn mode(&self) -> (ContextMode, String) {
        self.0.mode()
    }
}

fn mode_event(mode: ContextMode, policy: &str, when: &str) -> Value {
    match mode {
        ContextMode::Native => json!({"mode": "native", "at": when}),
        ContextMode::Managed => json!({"mode": "managed", "policy": policy, "at": when}),
    }
}

/// The mode the log says (its latest `context/mode`), if any.
pub fn logged_mode(session: &keel_session::Session) -> Option<(ContextMode, String)> {
    let mut out = None;
    for ev in session.whole_event_iter() {
        if let EventBody::Other(o) = &ev.body
            && o.type_name == MODE_EVENT
        {
            let mode = match o.data.get("mode").and_then(Value::as_str) {
                Some("managed") => ContextMode::Managed,
                _ => ContextMode::Native,
            };
            let policy = o
                .data
                .get("policy")
                .and_then(Value::as_str)
                .unwrap_or("recent")
                .to_owned();
            out = Some((mode, policy));
        }
    }
    out
}

/// Positions the mode keeps whatever the budget: the first human message on the surface (the
/// task), the latest runtime-context snapshot, compaction summaries.
pub fn pinned(nodes: &[DerivedMessage]) -> Vec<usize> {
    let mut out = Vec::new();
    if let Some(i) = nodes.iter().position(|d| d.message.source.is_user()) {
        out.push(i);
    }
    let plugin = |d: &DerivedMessage, id: &str| d.message.source.plugin_id() == Some(id);
    if let Some(i) = nodes
        .iter()
        .rposition(|d| plugin(d, keel_agent::request::RUNTIME_CONTEXT_PLUGIN))
    {
        out.push(i);
    }
    let summary = keel_agent::compaction::ID.source();
    out.extend(
        nodes
            .iter()
            .enumerate()
            .filter(|(_, d)| plugin(d, summary))
            .map(|(i, _)| i),
    );
    out.sort_unstable();
    out.dedup();
    out
}

/// The latest human message's text (what `relevant` scores against).
pub fn current_query(nodes: &[DerivedMessage]) -> String {
    nodes
        .iter()
        .rev()
        .find(|d| matches!(&d.message.source, MessageSource::Known(KnownSource::User)))
        .map(|d| d.message.text())
        .unwrap_or_default()
}

/// Whether the configuration disables a part `managed` needs: the compaction row (compaction
/// that measures the projected request).
fn missing_part(settings: &Value) -> Option<String> {
    let rows = settings.get("plugins")?.as_array()?;
    rows.iter()
        .find(|r| {
            let uses = r
                .get("use")
                .or_else(|| r.get("id"))
                .and_then(Value::as_str);
            uses == Some(keel_agent::compaction::ID.as_str())
                && r.get("enabled") == Some(&Value::Bool(false))
        })
        .map(|_| {
            "it needs projection-aware compaction, and the `compaction` plugin row is disabled (enable it, or use context_mode = \"native\")".to_owned()
        })
}

/// Install the context mode of `config`: the listener on the top-level agent and the mode
/// switch at build. Returns the switch handle.
pub fn install(
    ctx: &mut InstallContext,
    config: &MemoryConfig,
    policies: &[Arc<dyn Policy>],
) -> Result<ContextSwitch, PluginError> {
    let manager = Arc::new(ContextManager {
        policies: policies.to_vec(),
        budget_fraction: config.budget_fraction,
        unavailable: missing_part(&ctx.settings),
        agent: AgentSlot::new(),
        state: Mutex::new(ModeState {
            mode: ContextMode::Native,
            policy: config.policy.clone(),
            pending: None,
            turn: 0,
        }),
        index: Mutex::new(NodeIndex::default()),
    });
    let wanted = config.context_mode.map(|m| (m, config.policy.clone()));
    if let Some((mode, policy)) = &wanted {
        manager
            .validate(*mode, policy)
            .map_err(|e| PluginError::Setup {
                plugin: crate::ID.as_str(),
                what: e.to_string(),
                source: None,
            })?;
    }
    let m = manager.clone();
    ctx.agent_hooks
        .context
        .push(middleware(move |req: ContextRequest, next| {
            let m = m.clone();
            Box::pin(async move {
                match m.project(req.clone()).await {
                    Some(p) => p,
                    None => next.run(req).await,
                }
            })
        }));
    let m = manager.clone();
    ctx.on_agent
        .push(Box::new(move |agent| m.bind(agent, wanted)));
    Ok(ContextSwitch(manager))
}
