//! Building and running a child agent: its session (spawn or fork, lineage header), its
//! filtered tool set, its never-ask approval policy, its first message; then one turn whose
//! cancellation follows the caller's.

use super::defs::{AgentDef, AgentDefs};
use super::tool::SubagentTool;
use super::{ChildModel, ID, SubagentConfig, SubagentMode};
use crate::agent::{Agent, ApprovalPolicy, ToolSetup};
use crate::error::AgentError;
use crate::inbox::InboxMode;
use crate::seams::{ChildBuild, ChildSetup};
use keel_protocol::{
    ApprovalPolicyEvent, CallId, EventBody, KnownSource, Message, MessageSource, Seq,
    SessionHeader, SessionId, TurnEndReason,
};
use keel_session::{
    Format, PersistentSession, Session, Store, WriterOptions, new_session_id, now_ms,
};
use keel_tools::{SandboxMode, ToolError};
use serde_json::{Map, json};
use std::path::PathBuf;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Tools a child never inherits: its own `subagent` is bound to it instead, plan approval and
/// questions need the human (nobody answers a child), and the team tools are its parent's
/// (a child owns no background children; a continuable child gets its own `send_message`, to
/// its parent). Plugins
/// withhold their own (the job tools) through `subagent/build`.
const NOT_INHERITED: [&str; 8] = [
    "subagent",
    "subagent_fork",
    "exit_plan_mode",
    "ask_user_question",
    "send_message",
    "list_agents",
    "interrupt_agent",
    "report",
];

/// A child agent ready to run its first turn.
pub(crate) struct Child {
    pub(crate) agent: Agent,
    pub(crate) id: SessionId,
    pub(crate) path: PathBuf,
}

/// What the child is asked to do.
pub(crate) struct Assignment<'a> {
    pub(crate) prompt: &'a str,
    pub(crate) call_id: &'a str,
    pub(crate) depth: u32,
    pub(crate) mode: SubagentMode,
    pub(crate) model: Option<&'a ChildModel>,
    /// A continuable background child: it gets `send_message` to its parent.
    pub(crate) background: bool,
    /// Its first working directory, as the call gave it (`None`: the parent's).
    pub(crate) cwd: Option<&'a str>,
    /// The named definition it runs, if any.
    pub(crate) definition: Option<&'a AgentDef>,
    /// The definitions its own `subagent` tool may name.
    pub(crate) defs: &'a Arc<AgentDefs>,
}

fn failed(what: &str, e: impl std::fmt::Display) -> ToolError {
    ToolError::Failed(format!("could not start the subagent: {what}: {e}"))
}

/// Create the child's session file and agent, with the prompt queued as its first turn.
pub(crate) fn build(
    parent: &Agent,
    config: &Arc<SubagentConfig>,
    store: &Store,
    task: &Assignment<'_>,
) -> Result<Child, ToolError> {
    // The child's own working directory cell, starting where the parent is (or at `cwd`):
    // checked before anything is written, so a bad `cwd` leaves no session file behind.
    let workspace = parent.pipeline().workspace().clone();
    if let Some(dir) = task.cwd {
        workspace.enter(dir).map_err(|e| match e {
            ToolError::InvalidArgs(why) => ToolError::InvalidArgs(format!("cwd: {why}")),
            other => other,
        })?;
    }
    let id = new_session_id();
    let session = match task.mode {
        SubagentMode::Spawn | SubagentMode::Both => {
            let (cwd, parent_id) = {
                let log = parent.log();
                let h = log.session().header();
                (h.cwd.clone(), h.id.clone())
            };
            let mut header = SessionHeader::new(id.clone(), now_ms(), cwd);
            header.parent_session = Some(parent_id);
            header.origin = Some("subagent".into());
            header.delegation_depth = task.depth;
            Session::new(header)
        }
        SubagentMode::Fork => fork_session(parent, id.clone(), task.depth)?,
    };
    let format = Format::of_path(parent.log().writer().path());
    let options = WriterOptions {
        format,
        ..WriterOptions::default()
    };
    let log = PersistentSession::create(store, &parent.config().cwd, session, options)
        .map_err(|e| failed("cannot create its session file", e))?;
    let path = log.writer().path().to_path_buf();

    // `subagent/build`: hooks and tools scoped to this child (a plugin's per-session journal
    // and the query tools bound to it).
    let info = ChildBuild {
        parent: parent.session_id(),
        child: id.clone(),
        call_id: CallId::from(task.call_id),
        depth: task.depth,
    };
    let mut own = ChildSetup::default();
    for hook in &parent.hooks().subagent_build {
        hook(&info, &mut own);
    }
    let ChildSetup {
        hooks: mut own,
        tools,
        withheld,
    } = own;
    // A named definition: its body after keel's own system prompt, its tools as a filter.
    if let Some(def) = task.definition {
        let section = def.prompt_section();
        own.prompt_sections
            .push(Arc::new(move |_| vec![section.clone()]));
    }
    let provided: Vec<String> = tools.iter().map(|t| t.schema().name).collect();

    let allowed = |name: &str| {
        config
            .tools
            .as_ref()
            .is_none_or(|list| list.iter().any(|t| t == name))
            && task.definition.is_none_or(|d| d.allows(name))
    };
    let mut registry = parent.pipeline().registry().filtered(|name| {
        allowed(name)
            && !NOT_INHERITED.contains(&name)
            && !withheld.iter().any(|w| w == name)
            && !provided.iter().any(|p| p == name)
    });
    for tool in tools {
        let name = tool.schema().name;
        if allowed(&name) {
            registry
                .register(tool)
                .map_err(|e| failed(&format!("cannot register its tool {name}"), e))?;
        }
    }
    if task.background {
        registry
            .register(Arc::new(super::team::ParentMessageTool::new(
                parent.session_id(),
            )))
            .map_err(|e| failed("cannot register its send_message tool", e))?;
    }
    let nested = (task.depth < config.max_depth && allowed("subagent"))
        .then(|| SubagentTool::with_defs(config.clone(), store.clone(), task.defs.clone(), false));
    if let Some(tool) = &nested {
        registry
            .register(tool.clone())
            .map_err(|e| failed("cannot register its subagent tool", e))?;
    }
    let pp = parent.pipeline();
    let tool_setup = ToolSetup {
        registry,
        workspace,
        plan_state: Some(pp.plan_state().clone()),
        spill: Some(pp.spill_config().clone()),
        subprocess: Some(pp.subprocess().clone()),
    };

    let mut agent_config = parent.config().clone();
    let mut provider = parent.provider().clone();
    if let Some(m) = task.model {
        agent_config.provider_name.clone_from(&m.provider_name);
        agent_config.model.clone_from(&m.model);
        agent_config.model_info = m.info;
        provider = m.provider.clone();
    }
    (agent_config.approval, agent_config.approval_source) = match parent.approval() {
        ApprovalPolicy::Allow => (ApprovalPolicy::Allow, parent.approval_source()),
        // A subagent has nobody to ask: what its parent would ask about is refused.
        ApprovalPolicy::Ask => (
            ApprovalPolicy::Deny,
            "a subagent, which cannot ask (its parent's policy is ask)".to_owned(),
        ),
        ApprovalPolicy::Deny => (ApprovalPolicy::Deny, parent.approval_source()),
    };
    let policy = agent_config.approval;
    let agent = Agent::builder(agent_config, provider, tool_setup, log)
        .hooks(parent.global_hooks().clone())
        .agent_hooks(own)
        .build()
        .map_err(|e| failed("cannot build the agent", e))?;
    if let Some(tool) = &nested {
        tool.bind(&agent.handle());
    }
    // A parent narrowed to read-only (an editor's mode) hands that on.
    agent
        .set_read_only(parent.sandbox() == SandboxMode::ReadOnly)
        .map_err(|e| failed("cannot write its log", e))?;
    if task.mode == SubagentMode::Fork {
        // The seed carries the parent's policy; the child's own follows it.
        let event = ApprovalPolicyEvent {
            policy: policy.as_str().to_owned(),
        };
        agent
            .push(EventBody::ApprovalPolicy(Box::new(event)))
            .map_err(|e| failed("cannot write its log", e))?;
    }
    let mut extra = Map::new();
    extra.insert("parentSession".into(), json!(parent.session_id()));
    extra.insert("callId".into(), json!(task.call_id));
    if let Some(def) = task.definition {
        extra.insert("agent".into(), json!(def.name));
    }
    let source = MessageSource::Known(KnownSource::Plugin {
        plugin: ID.source().into(),
        extra,
    });
    let first = Message::user_text(task.prompt, source, uuid::Uuid::new_v4().to_string());
    agent
        .enqueue(InboxMode::Followup, first)
        .map_err(|e| failed("cannot write its log", e))?;
    Ok(Child { agent, id, path })
}

/// The parent's log up to its last completed turn (before its first turn when none has
/// completed), as a child session with a subagent lineage header.
fn fork_session(parent: &Agent, id: SessionId, depth: u32) -> Result<Session, ToolError> {
    let forked = {
        let log = parent.log();
        let s = log.session();
        let boundary = match s.last_turn_end() {
            Some(end) => Seq(end.0 + 1),
            None => s
                .events()
                .find(|e| matches!(e.body, EventBody::TurnStart(_)))
                .map_or(s.next_seq(), |e| e.seq),
        };
        s.fork(boundary, id)
            .map_err(|e| failed("cannot fork the session", e))?
    };
    let mut header = forked.header().clone();
    header.origin = Some("subagent".into());
    header.delegation_depth = depth;
    let mut child = Session::new(header);
    for ev in forked.events() {
        child
            .append(ev.into_owned())
            .map_err(|e| failed("cannot copy the seed", e))?;
    }
    Ok(child)
}

/// Why a child's turn gave no answer ([`super::LiveChild::run_turn`]); each names the child's
/// session and its file.
#[derive(Debug, thiserror::Error)]
pub enum ChildError {
    /// The turn ended without completing (aborted, blocked, an error, …).
    #[error(
        "the subagent's turn ended {} without an answer; see subagent session {session} ({}){}",
        describe(.reason),
        .path.display(),
        after_last(.last_text)
    )]
    Unfinished {
        /// Why it ended.
        reason: TurnEndReason,
        /// What the child said last (empty: nothing).
        last_text: String,
        /// The child's session id.
        session: String,
        /// The child's session file.
        path: PathBuf,
    },
    /// No turn was queued.
    #[error("the subagent had nothing to run; see subagent session {session} ({})", .path.display())]
    NothingToRun {
        /// The child's session id.
        session: String,
        /// The child's session file.
        path: PathBuf,
    },
    /// The child's agent failed.
    #[error("the subagent failed: {error}; see subagent session {session} ({})", .path.display())]
    Failed {
        /// What failed.
        error: AgentError,
        /// The child's session id.
        session: String,
        /// The child's session file.
        path: PathBuf,
    },
}

/// `. Its last text:\n…`, or nothing when there is none.
fn after_last(text: &str) -> String {
    if text.is_empty() {
        String::new()
    } else {
        format!(". Its last text:\n{text}")
    }
}

/// Run the child's queued turn; `cancel` cancels it. `Ok` is its final answer; `Err` explains
/// why there is none.
pub(crate) async fn run(child: &Child, cancel: &CancellationToken) -> Result<String, ChildError> {
    let run = child.agent.run_pending();
    tokio::pin!(run);
    // Polling the run first creates the turn's token before a cancellation is looked at.
    let result = tokio::select! {
        biased;
        r = &mut run => r,
        () = cancel.cancelled() => {
            child.agent.cancel_turn();
            run.await
        }
    };
    let session = child.id.to_string();
    let path = child.path.clone();
    match result {
        Ok(Some(o)) if o.completed() && o.final_text.is_empty() => {
            Ok("(the subagent finished without a final answer)".into())
        }
        Ok(Some(o)) if o.completed() => Ok(o.final_text),
        Ok(Some(o)) => Err(ChildError::Unfinished {
            reason: o.reason,
            last_text: o.final_text,
            session,
            path,
        }),
        Ok(None) => Err(ChildError::NothingToRun { session, path }),
        Err(error) => Err(ChildError::Failed {
            error,
            session,
            path,
        }),
    }
}

fn describe(reason: &TurnEndReason) -> String {
    match reason {
        TurnEndReason::Completed => "completed".into(),
        TurnEndReason::Aborted { reason } => format!("aborted ({reason})"),
        TurnEndReason::Blocked { reason } => format!(
            "blocked ({})",
            reason.as_deref().unwrap_or("no reason given")
        ),
        TurnEndReason::Error { code, message } => format!("with error {code}: {message}"),
        TurnEndReason::MaxTokens => "at the model's output limit".into(),
        TurnEndReason::Interrupted => "interrupted".into(),
    }
}
