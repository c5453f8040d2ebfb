//! Agent teams: the live children of every agent in this process, and the tools a parent uses
//! to talk to them (`send_message`, `list_agents`, `interrupt_agent`) and a continuable child
//! uses to talk back (its own `send_message`, to its parent).
//!
//! Every child started through a [`super::Spawner`] joins the roster while it lives
//! (foreground children too, so `list_agents` and `interrupt_agent` see them). A background
//! child of the `subagent` tool is **continuable**: after each turn it stays alive as a job
//! that waits for a message ([`keel_tools::JobEvents::set_waiting`]: the owner's driver does
//! not wait for it), its answer reaches the parent as a job notice (joining a running turn, or
//! waking an idle parent within the jobs' wake budget), and `send_message` queues its next
//! turn. The job ends when it is killed (`job_kill`, or its owner exiting).
//!
//! ```text
//! subagent {run_in_background} ─► job: turn ─► notice "answered" ─► waiting
//!        ▲                                                           │
//!        └──────────── send_message: queue the message, wake ◄──────┘
//! send_message {agent_id: "parent"} (in the child) ─► notice to the parent now (its next step)
//! ```
//!
//! The roster is keyed by session id with parent links; `list_agents` and the control tools
//! see only the caller's own children (or descendants), never another session's.

use crate::handle::{AgentHandle, AgentSlot, WeakHandle, calling_agent};
use crate::inbox::InboxMode;
use async_trait::async_trait;
use keel_protocol::sync::Locked;
use keel_protocol::{KnownSource, Message, MessageSource, SessionId, ToolSchema};
use keel_tools::{JobEvents, Tool, ToolContext, ToolEffect, ToolError, ToolOutput};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, OnceLock};
use std::time::Instant;
use tokio::sync::Notify;

/// Bytes of a continuable child's answer or report quoted in its notice; the whole answer is
/// in the job's output (`job_output`).
pub const NOTICE_CAP: usize = 16 * 1024;

/// Where a child is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemberState {
    /// Running a turn.
    Working,
    /// Between turns, waiting for `send_message` (continuable children only).
    Waiting,
    /// Finished (foreground: answered or failed; background: killed).
    Ended(String),
}

impl MemberState {
    fn as_str(&self) -> &str {
        match self {
            MemberState::Working => "working",
            MemberState::Waiting => "waiting for a message",
            MemberState::Ended(how) => how,
        }
    }
}

/// One child in the roster.
struct Member {
    session: SessionId,
    parent: SessionId,
    description: String,
    via: Option<String>,
    agent: WeakHandle,
    path: PathBuf,
    state: MemberState,
    started: Instant,
    /// Set for continuable children.
    link: Option<Arc<Continuable>>,
    /// `interrupt_agent` stopped its running turn: that turn's end is not announced.
    interrupted: bool,
}

/// What a continuable child's job shares with the roster.
#[derive(Default)]
pub(crate) struct Continuable {
    /// The job's id (set right after it starts).
    pub(crate) job_id: OnceLock<String>,
    /// The job's link to its owner.
    pub(crate) events: OnceLock<JobEvents>,
    /// Wakes the job's loop when a message is queued.
    pub(crate) wake: Notify,
}

static ROSTER: LazyLock<Mutex<Vec<Member>>> = LazyLock::new(Mutex::default);

/// Ended members kept per parent (for `list_agents`); older ones are forgotten.
const ENDED_KEPT: usize = 64;

/// Add a child that just started.
pub(crate) fn join(
    session: &SessionId,
    parent: &SessionId,
    description: &str,
    via: Option<&str>,
    agent: &AgentHandle,
    path: &Path,
) {
    let mut roster = ROSTER.locked();
    let ended = roster
        .iter()
        .filter(|m| &m.parent == parent && matches!(m.state, MemberState::Ended(_)))
        .count();
    if ended >= ENDED_KEPT
        && let Some(i) = roster
            .iter()
            .position(|m| &m.parent == parent && matches!(m.state, MemberState::Ended(_)))
    {
        roster.remove(i);
    }
    roster.push(Member {
        session: session.clone(),
        parent: parent.clone(),
        description: description.to_owned(),
        via: via.map(str::to_owned),
        agent: agent.downgrade(),
        path: path.to_path_buf(),
        state: MemberState::Working,
        started: Instant::now(),
        link: None,
        interrupted: false,
    });
}

/// Make `session` a continuable child.
pub(crate) fn make_continuable(session: &SessionId, link: Arc<Continuable>) {
    if let Some(m) = ROSTER.locked().iter_mut().find(|m| &m.session == session) {
        m.link = Some(link);
    }
}

/// Record where `session` is; returns whether its last turn was interrupted (and clears that).
pub(crate) fn set_state(session: &SessionId, state: MemberState) -> bool {
    let mut roster = ROSTER.locked();
    let Some(m) = roster.iter_mut().find(|m| &m.session == session) else {
        return false;
    };
    if matches!(m.state, MemberState::Ended(_)) {
        return false;
    }
    m.state = state;
    std::mem::take(&mut m.interrupted)
}

/// What `list_agents` and the UI show of one child.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentInfo {
    /// The child's session id.
    pub session: SessionId,
    /// Its parent's session id.
    pub parent: SessionId,
    /// The job id of a continuable child.
    pub job_id: Option<String>,
    /// What it does.
    pub description: String,
    /// What started it when not the `subagent` tool.
    pub via: Option<String>,
    /// Where it is.
    pub state: MemberState,
    /// Seconds since it started.
    pub elapsed_secs: u64,
    /// Its session file.
    pub path: PathBuf,
}

/// The children of `parent` (and theirs, with `descendants`), oldest first.
pub fn agents_of(parent: &SessionId, descendants: bool) -> Vec<AgentInfo> {
    let roster = ROSTER.locked();
    let mut parents = vec![parent.clone()];
    let mut out = Vec::new();
    let mut i = 0;
    while i < parents.len() {
        let current = parents[i].clone();
        for m in roster.iter().filter(|m| m.parent == current) {
            out.push(AgentInfo {
                session: m.session.clone(),
                parent: m.parent.clone(),
                job_id: m.link.as_ref().and_then(|l| l.job_id.get().cloned()),
                description: m.description.clone(),
                via: m.via.clone(),
                state: m.state.clone(),
                elapsed_secs: m.started.elapsed().as_secs(),
                path: m.path.clone(),
            });
            if descendants {
                parents.push(m.session.clone());
            }
        }
        i += 1;
    }
    out
}

/// The member of `parent` named by `id` (its job id or session id), with its agent and link.
fn find(
    parent: &SessionId,
    id: &str,
    descendants: bool,
) -> Result<(AgentInfo, WeakHandle, Option<Arc<Continuable>>), ToolError> {
    let known = agents_of(parent, descendants);
    let Some(info) = known
        .into_iter()
        .find(|a| a.session.as_str() == id || a.job_id.as_deref() == Some(id))
    else {
        return Err(ToolError::InvalidArgs(format!(
            "no agent '{id}' among yours (see list_agents)"
        )));
    };
    let roster = ROSTER.locked();
    let m = roster
        .iter()
        .find(|m| m.session == info.session)
        .ok_or_else(|| ToolError::InvalidArgs(format!("no agent '{id}' among yours")))?;
    Ok((info, m.agent.clone(), m.link.clone()))
}

fn mark_interrupted(session: &SessionId) {
    if let Some(m) = ROSTER.locked().iter_mut().find(|m| &m.session == session) {
        m.interrupted = true;
    }
}

/// A message from a parent to its child (source `keel/subagent`, with the parent's session).
fn parent_message(parent: &SessionId, text: &str) -> Message {
    let mut extra = Map::new();
    extra.insert("parentSession".into(), json!(parent));
    let source = MessageSource::Known(KnownSource::Plugin {
        plugin: super::ID.source().into(),
        extra,
    });
    Message::user_text(text, source, uuid::Uuid::new_v4().to_string())
}

/// Queue `text` from `parent` in `child`'s inbox: it joins a running turn's next step, or waits
/// as the next turn of an idle child. Returns the mode used.
pub(crate) fn message_child(
    child: &AgentHandle,
    parent: &SessionId,
    text: &str,
) -> Result<InboxMode, crate::AgentError> {
    child.deliver(parent_message(parent, text), |activity| match activity {
        crate::background::TurnActivity::Running => InboxMode::Inject,
        crate::background::TurnActivity::Idle => InboxMode::Followup,
    })
}

/// Cut `text` to [`NOTICE_CAP`] bytes, saying where the rest is.
pub(crate) fn capped(text: &str, job_id: &str) -> String {
    if text.len() <= NOTICE_CAP {
        return text.to_owned();
    }
    let cut = text.floor_char_boundary(NOTICE_CAP);
    format!(
        "{}\n[… {} more bytes: job_output {{\"job_id\":\"{job_id}\"}}]",
        &text[..cut],
        text.len() - cut
    )
}

fn caller_session(slot: &AgentSlot, ctx: &ToolContext<'_>) -> Result<SessionId, ToolError> {
    calling_agent(ctx)
        .or_else(|| slot.get())
        .map(|a| a.session_id())
        .ok_or_else(|| ToolError::Failed("this tool is not bound to a running agent".into()))
}

fn parse<T: serde::de::DeserializeOwned>(args: Value) -> Result<T, ToolError> {
    serde_json::from_value(args).map_err(|e| ToolError::InvalidArgs(e.to_string()))
}

/// `send_message {agent_id, message}` (dsh 0.2's name; `subagent_id`, keel's earlier one, is
/// read as an alias).
#[derive(Debug, Default)]
pub struct SendMessageTool {
    agent: AgentSlot,
}

/// `list_agents {scope?}`.
#[derive(Debug, Default)]
pub struct ListAgentsTool {
    agent: AgentSlot,
}

/// `interrupt_agent {agent_id}`.
#[derive(Debug, Default)]
pub struct InterruptAgentTool {
    agent: AgentSlot,
}

/// Unbound control tools (bound by [`bind_controls`] once the agent exists).
pub(crate) fn unbound_controls() -> (
    Arc<SendMessageTool>,
    Arc<ListAgentsTool>,
    Arc<InterruptAgentTool>,
) {
    (
        Arc::new(SendMessageTool::default()),
        Arc::new(ListAgentsTool::default()),
        Arc::new(InterruptAgentTool::default()),
    )
}

/// Bind control tools made by [`unbound_controls`].
pub(crate) fn bind_controls(
    tools: &(
        Arc<SendMessageTool>,
        Arc<ListAgentsTool>,
        Arc<InterruptAgentTool>,
    ),
    agent: &AgentHandle,
) {
    tools.0.agent.bind(agent);
    tools.1.agent.bind(agent);
    tools.2.agent.bind(agent);
}

/// Offered from the first request on (as in dsh 0.2), so the tool list never changes mid-session
/// and every request stays a byte-prefix of the next; a child never has them (`child.rs`).
fn offered_to(slot: &AgentSlot) -> bool {
    slot.get().is_some()
}

#[derive(Deserialize)]
struct SendArgs {
    agent_id: String,
    message: String,
}

#[async_trait]
impl Tool for SendMessageTool {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "send_message".into(),
            description:
                "Send a message to a background subagent you started; it answers in a notice."
                    .into(),
            parameters: json!({"type":"object","properties":{
                "agent_id":{"type":"string"},
                "message":{"type":"string"}
            },"required":["agent_id","message"]}),
        }
    }
    fn offered(&self) -> bool {
        offered_to(&self.agent)
    }
    fn aliases(&self) -> &'static [(&'static str, &'static str)] {
        &[("subagent_id", "agent_id")]
    }
    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }
    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let a: SendArgs = parse(args)?;
        if a.message.trim().is_empty() {
            return Err(ToolError::InvalidArgs("message is empty".into()));
        }
        let me = caller_session(&self.agent, ctx)?;
        let (info, agent, link) = find(&me, &a.agent_id, false)?;
        let name = info
            .job_id
            .clone()
            .unwrap_or_else(|| info.session.to_string());
        if let MemberState::Ended(how) = &info.state {
            return Err(ToolError::Failed(format!(
                "agent_id '{}': that subagent has ended ({how}); start a new one",
                a.agent_id
            )));
        }
        let Some(link) = link else {
            return Err(ToolError::Failed(format!(
                "agent_id '{}': it runs in the foreground of a call and takes no messages; only background \
                 subagents (run_in_background) do",
                a.agent_id
            )));
        };
        let Some(child) = agent.upgrade() else {
            return Err(ToolError::Failed(format!(
                "agent_id '{}': that subagent has ended",
                a.agent_id
            )));
        };
        let mode = message_child(&child, &me, &a.message)
            .map_err(|e| ToolError::Failed(format!("could not message {name}: {e}")))?;
        let text = if mode == InboxMode::Followup {
            // Working again before this call returns: the parent's driver must wait for it.
            if let Some(events) = link.events.get() {
                events.set_waiting(false);
            }
            set_state(&info.session, MemberState::Working);
            link.wake.notify_one();
            format!("Sent to {name}; it starts a turn on it. Its answer will arrive as a notice.")
        } else {
            format!("Sent to {name}; it joins the turn it is running.")
        };
        Ok(ToolOutput::text(text).with_value(json!({"agentId": name, "session": info.session})))
    }
}

#[derive(Deserialize)]
struct ListArgs {
    #[serde(default)]
    scope: Option<String>,
}

/// One line per agent.
pub fn render_agents(agents: &[AgentInfo]) -> String {
    if agents.is_empty() {
        return "No subagents.".into();
    }
    let mut out = String::new();
    for a in agents {
        let id = a.job_id.clone().unwrap_or_else(|| a.session.to_string());
        out.push_str(&format!(
            "{id}  {}  {}s  {}",
            a.state.as_str(),
            a.elapsed_secs,
            a.description
        ));
        if a.job_id.is_some() {
            out.push_str(&format!("  (session {})", a.session));
        }
        if let Some(via) = &a.via {
            out.push_str(&format!("  [{via}]"));
        }
        out.push('\n');
    }
    out
}

#[async_trait]
impl Tool for ListAgentsTool {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "list_agents".into(),
            description: "List your subagents and their state.".into(),
            parameters: json!({"type":"object","properties":{
                "scope":{"type":"string","enum":["children","descendants"]}
            }}),
        }
    }
    fn offered(&self) -> bool {
        offered_to(&self.agent)
    }
    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }
    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let a: ListArgs = parse(args)?;
        let descendants = match a.scope.as_deref() {
            None | Some("children") => false,
            Some("descendants") => true,
            Some(other) => {
                return Err(ToolError::InvalidArgs(format!(
                    "scope must be children or descendants, not {other:?}"
                )));
            }
        };
        let me = caller_session(&self.agent, ctx)?;
        let agents = agents_of(&me, descendants);
        let value: Vec<Value> = agents
            .iter()
            .map(|a| {
                json!({
                    "id": a.job_id.clone().unwrap_or_else(|| a.session.to_string()),
                    "session": a.session, "parent": a.parent, "state": a.state.as_str(),
                    "description": a.description,
                })
            })
            .collect();
        Ok(ToolOutput::text(render_agents(&agents)).with_value(json!({ "agents": value })))
    }
}

#[derive(Deserialize)]
struct InterruptArgs {
    agent_id: String,
}

#[async_trait]
impl Tool for InterruptAgentTool {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "interrupt_agent".into(),
            description: "Stop a subagent's running turn; a background one keeps its session and takes messages.".into(),
            parameters: json!({"type":"object","properties":{
                "agent_id":{"type":"string"}
            },"required":["agent_id"]}),
        }
    }
    fn offered(&self) -> bool {
        offered_to(&self.agent)
    }
    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }
    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let a: InterruptArgs = parse(args)?;
        let me = caller_session(&self.agent, ctx)?;
        let (info, agent, _) = find(&me, &a.agent_id, true)?;
        let name = info
            .job_id
            .clone()
            .unwrap_or_else(|| info.session.to_string());
        let text = match (&info.state, agent.upgrade()) {
            (MemberState::Ended(how), _) => {
                return Err(ToolError::Failed(format!(
                    "agent_id '{}': that subagent has ended ({how})",
                    a.agent_id
                )));
            }
            (_, None) => {
                return Err(ToolError::Failed(format!(
                    "agent_id '{}': that subagent has ended",
                    a.agent_id
                )));
            }
            (MemberState::Waiting, Some(_)) => {
                format!("{name} was not running a turn; it is waiting for a message.")
            }
            (MemberState::Working, Some(child)) => {
                mark_interrupted(&info.session);
                child.cancel_turn();
                format!("Interrupted {name}'s turn.")
            }
        };
        Ok(ToolOutput::text(text))
    }
}

/// A continuable child's `send_message {agent_id, message}` (dsh 0.2, where it replaced
/// `report`): a message to the agent that started it, delivered at once. `agent_id` is
/// `"parent"` or the parent's session id; `output` (the parameter of `report`, which this
/// replaces) is read as `message`.
#[derive(Debug)]
pub struct ParentMessageTool {
    parent: SessionId,
}

impl ParentMessageTool {
    /// The tool of a child whose parent is `parent`.
    pub fn new(parent: SessionId) -> Self {
        ParentMessageTool { parent }
    }
}

#[async_trait]
impl Tool for ParentMessageTool {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "send_message".into(),
            description: format!(
                "Send a message to the agent that started you (agent_id \"parent\" or {}); it \
                 sees it at its next step.",
                self.parent
            ),
            parameters: json!({"type":"object","properties":{
                "agent_id":{"type":"string"},
                "message":{"type":"string"}
            },"required":["agent_id","message"]}),
        }
    }
    fn aliases(&self) -> &'static [(&'static str, &'static str)] {
        &[("output", "message")]
    }
    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }
    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let a: SendArgs = parse(args)?;
        if a.agent_id != "parent" && a.agent_id != self.parent.as_str() {
            return Err(ToolError::InvalidArgs(format!(
                "agent_id '{}' is not your parent: a subagent messages only the agent that \
                 started it (\"parent\" or {})",
                a.agent_id, self.parent
            )));
        }
        if a.message.trim().is_empty() {
            return Err(ToolError::InvalidArgs("message is empty".into()));
        }
        let me = calling_agent(ctx).map(|a| a.session_id()).ok_or_else(|| {
            ToolError::Failed("send_message is not bound to a running agent".into())
        })?;
        let (description, link) = {
            let roster = ROSTER.locked();
            let m = roster.iter().find(|m| m.session == me);
            (
                m.map(|m| m.description.clone()).unwrap_or_default(),
                m.and_then(|m| m.link.clone()),
            )
        };
        let Some((job, events)) = link
            .as_ref()
            .and_then(|l| Some((l.job_id.get()?.clone(), l.events.get()?.clone())))
        else {
            return Err(ToolError::Failed(
                "send_message to the parent works only in a background subagent; give your \
                 result as your answer"
                    .into(),
            ));
        };
        events.notify(format!(
            "Message from subagent {job} ({description}):\n{}",
            capped(&a.message, &job)
        ));
        Ok(ToolOutput::text("Sent."))
    }
}

/// `/agents`: the person's view of this session's subagents in interactive front ends (the
/// terminal UI, ACP clients): list them, open one (its conversation so far), stop one.
#[derive(Debug, Default)]
pub struct AgentsCommand {
    agent: AgentSlot,
}

/// Why `/agents` did nothing: what the person is told.
#[derive(Debug, thiserror::Error)]
enum AgentsCommandError {
    /// The command is not bound to a running agent.
    #[error("no running agent")]
    NoAgent,
    /// No subagent of this session has the id given.
    #[error(transparent)]
    Unknown(#[from] ToolError),
    /// An ended child's session file could not be read.
    #[error("cannot read {}: {source}", .path.display())]
    Unreadable {
        /// Its session file.
        path: PathBuf,
        /// What loading it gave.
        source: keel_session::LoadError,
    },
    /// The child's background job could not be killed.
    #[error(transparent)]
    Kill(#[from] keel_tools::JobError),
    /// The child to stop has already ended (the id as given).
    #[error("{0} has already ended")]
    Ended(String),
    /// Neither `list`, `open ID` nor `stop ID`.
    #[error("usage: /agents [open ID | stop ID]")]
    Usage,
}

/// Bytes of a child's conversation `/agents open` shows (the end of it).
const OPEN_CAP: usize = 12 * 1024;

impl AgentsCommand {
    /// Bind to the agent whose children it shows.
    pub fn bind(&self, agent: &AgentHandle) {
        self.agent.bind(agent);
    }

    fn run(&self, args: &str) -> Result<String, AgentsCommandError> {
        let me = self
            .agent
            .get()
            .ok_or(AgentsCommandError::NoAgent)?
            .session_id();
        let (word, rest) = args.split_once(char::is_whitespace).unwrap_or((args, ""));
        let rest = rest.trim();
        match word {
            "" | "list" => Ok(render_agents(&agents_of(&me, true))),
            "open" if !rest.is_empty() => {
                let (info, agent, _) = find(&me, rest, true)?;
                let text = match agent.upgrade() {
                    Some(live) => live.with_session(conversation),
                    None => keel_session::Store::load(&info.path)
                        .map(|l| conversation(&l.session))
                        .map_err(|source| AgentsCommandError::Unreadable {
                            path: info.path.clone(),
                            source,
                        })?,
                };
                Ok(format!(
                    "{} ({}) {}, session file {}\n\n{text}",
                    info.job_id.as_deref().unwrap_or(info.session.as_str()),
                    info.description,
                    info.state.as_str(),
                    info.path.display()
                ))
            }
            "stop" if !rest.is_empty() => {
                let (info, agent, link) = find(&me, rest, true)?;
                if let (Some(job), Some(parent)) = (
                    link.as_ref().and_then(|l| l.job_id.get().cloned()),
                    self.agent.get(),
                ) && let Some(jobs) = parent.jobs()
                {
                    jobs.kill(&job)?;
                    return Ok(format!("Stopped {job}."));
                }
                match agent.upgrade() {
                    Some(live) => {
                        live.cancel_turn();
                        Ok(format!("Interrupted {}.", info.session))
                    }
                    None => Err(AgentsCommandError::Ended(rest.to_owned())),
                }
            }
            _ => Err(AgentsCommandError::Usage),
        }
    }
}

/// The conversation of a child as text: each message's role and text, tool calls by name;
/// the last [`OPEN_CAP`] bytes.
fn conversation(session: &keel_session::Session) -> String {
    use keel_protocol::{ContentBlock, Role};
    let mut out = String::new();
    for seq in session.surface().nodes() {
        let Some(m) = session.surface_message(*seq) else {
            continue;
        };
        let who = match m.role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        for block in &m.content {
            match block {
                ContentBlock::Text { text, .. } if !text.trim().is_empty() => {
                    out.push_str(&format!("{who}: {}\n", keel_protocol::text::cut(text, 600)));
                }
                ContentBlock::ToolCall(call) => {
                    out.push_str(&format!("{who}: → {}\n", call.name));
                }
                _ => {}
            }
        }
    }
    if out.len() > OPEN_CAP {
        let cut = out.ceil_char_boundary(out.len() - OPEN_CAP);
        out = format!("[…]\n{}", &out[cut..]);
    }
    out
}

impl crate::plugin::CommandSource for AgentsCommand {
    fn commands(&self) -> Vec<crate::plugin::PluginCommand> {
        vec![crate::plugin::PluginCommand {
            name: "agents".into(),
            description: "List this session's subagents, open one, or stop one".into(),
            argument_hint: Some("[open ID | stop ID]".into()),
        }]
    }

    fn expand<'a>(
        &'a self,
        _name: &'a str,
        _args: &'a str,
    ) -> futures::future::BoxFuture<'a, Result<String, crate::plugin::CommandError>> {
        Box::pin(async {
            Err(crate::plugin::CommandError::Failed(
                "usage: /agents [open ID | stop ID]".into(),
            ))
        })
    }

    fn act(&self, _name: &str, args: &str) -> Option<Result<String, crate::plugin::CommandError>> {
        Some(
            self.run(args.trim())
                .map_err(|e| crate::plugin::CommandError::Failed(Box::new(e))),
        )
    }
}
