//! The child-agent API plugins build on: a [`Spawner`] bound to the parent agent starts a
//! [`LiveChild`] (its session file with lineage, the `subagent/descriptor` event, the
//! `subagent/started` observers), which runs turns until it is finished. The `subagent` tool
//! is one user of it; workflows and ralph are others.
//!
//! ```text
//! Spawner::start(task, ctx) ─► depth check ─► child session + agent (spawn | fork, model)
//!   ─► parent log: subagent/descriptor ─► subagent/started
//! LiveChild::run_turn(cancel) ─► the queued turn ─► its final text (or why there is none)
//! LiveChild::send(text) ─► another user message queued for the next run_turn
//! LiveChild::finish(result) ─► subagent/finished
//! ```

use super::child::{self, Assignment, Child, ChildError};
use super::defs::{AgentDef, AgentDefs};
use super::{SubagentConfig, SubagentMode};
use crate::agent::Agent;
use crate::handle::{AgentHandle, AgentSlot};
use crate::inbox::InboxMode;
use crate::seams::SubagentNotice;
use keel_llm::{ModelInfo, Provider};
use keel_protocol::{CallId, EventBody, SessionId, SubagentDescriptor};
use keel_session::Store;
use keel_tools::{ToolContext, ToolError};
use std::path::Path;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The model a child runs on when it is not its parent's.
#[derive(Clone)]
pub struct ChildModel {
    /// Provider name (for message sources and `request/context`).
    pub provider_name: String,
    /// The provider.
    pub provider: Arc<dyn Provider>,
    /// Model name.
    pub model: String,
    /// What keel knows of the model.
    pub info: ModelInfo,
}

impl std::fmt::Debug for ChildModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChildModel")
            .field("provider_name", &self.provider_name)
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

/// A child to start.
#[derive(Debug, Clone)]
pub struct ChildTask<'a> {
    /// A few words saying what it does (the descriptor, `list_agents`, the UI).
    pub description: &'a str,
    /// Its first user message, byte for byte.
    pub prompt: &'a str,
    /// A fresh session, or one seeded with the parent's completed turns.
    pub mode: SubagentMode,
    /// What started it when not the `subagent` tool (`workflow`, `ralph`): recorded in the
    /// descriptor's `via`.
    pub via: Option<&'a str>,
    /// Runs in the background (recorded in the descriptor).
    pub background: bool,
    /// Its model; `None`: the parent's.
    pub model: Option<ChildModel>,
    /// Its first working directory (resolved against the parent's, within the sandbox);
    /// `None`: the parent's. Later `working_directory` changes in either do not reach the other.
    pub cwd: Option<&'a str>,
    /// The named subagent definition it runs ([`super::defs`]): its body joins the child's
    /// system prompt, its tool list narrows the child's; `None`: a plain child.
    pub definition: Option<&'a AgentDef>,
}

impl<'a> ChildTask<'a> {
    /// A fresh foreground child on the parent's model.
    pub fn new(description: &'a str, prompt: &'a str) -> Self {
        ChildTask {
            description,
            prompt,
            mode: SubagentMode::Spawn,
            via: None,
            background: false,
            model: None,
            cwd: None,
            definition: None,
        }
    }
}

/// Starts children of one agent (bound after the agent is built, like a tool).
pub struct Spawner {
    config: Arc<SubagentConfig>,
    store: Store,
    agent: AgentSlot,
    /// The named definitions (handed on to children's own `subagent` tools).
    defs: Arc<AgentDefs>,
}

impl std::fmt::Debug for Spawner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spawner")
            .field("config", &self.config)
            .field("bound", &self.agent.is_bound())
            .finish()
    }
}

impl Spawner {
    /// An unbound spawner; children's sessions go to `store`, nested delegation follows
    /// `config` (its depth limit and tool allow-list).
    pub fn new(config: Arc<SubagentConfig>, store: Store) -> Arc<Spawner> {
        Self::with_defs(config, store, AgentDefs::none())
    }

    /// [`Spawner::new`] whose children's own `subagent` tools may name `defs`.
    pub fn with_defs(
        config: Arc<SubagentConfig>,
        store: Store,
        defs: Arc<AgentDefs>,
    ) -> Arc<Spawner> {
        Arc::new(Spawner {
            config,
            store,
            agent: AgentSlot::new(),
            defs,
        })
    }

    /// The named definitions.
    pub fn defs(&self) -> &Arc<AgentDefs> {
        &self.defs
    }

    /// Its settings.
    pub fn config(&self) -> &Arc<SubagentConfig> {
        &self.config
    }

    /// Bind to the parent agent (the first binding wins).
    pub fn bind(&self, agent: &AgentHandle) {
        self.agent.bind(agent);
    }

    /// The bound parent (see [`AgentHandle`]).
    pub fn parent(&self) -> Result<AgentHandle, ToolError> {
        self.agent.get().ok_or_else(|| {
            ToolError::Failed(
                "the spawner is not bound to a running agent (a bug in the host)".into(),
            )
        })
    }

    /// The delegation depth a child would have; `Denied` past [`SubagentConfig::max_depth`].
    pub fn child_depth(&self) -> Result<u32, ToolError> {
        let depth = self.parent()?.delegation_depth() + 1;
        if depth > self.config.max_depth {
            return Err(ToolError::Denied(format!(
                "delegation depth limit reached: a subagent here would be at depth {depth}, over the maximum of {}; \
                 do this task yourself",
                self.config.max_depth
            )));
        }
        Ok(depth)
    }

    /// Start a child for the call in `ctx`: its session file and agent with the prompt
    /// queued, the `subagent/descriptor` event in the parent's log, the started observers.
    /// Run it with [`LiveChild::run_turn`].
    pub async fn start(
        &self,
        task: ChildTask<'_>,
        ctx: &ToolContext<'_>,
    ) -> Result<LiveChild, ToolError> {
        let depth = self.child_depth()?;
        let parent = self.parent()?.agent().clone();
        let assignment = Assignment {
            prompt: task.prompt,
            call_id: &ctx.call.id,
            depth,
            mode: task.mode,
            model: task.model.as_ref(),
            background: task.background,
            cwd: task.cwd,
            definition: task.definition,
            defs: &self.defs,
        };
        let child = child::build(&parent, &self.config, &self.store, &assignment)?;
        ctx.caller
            .emit(EventBody::SubagentDescriptor(Box::new(
                SubagentDescriptor {
                    child_session: child.id.clone(),
                    description: task.description.to_owned(),
                    mode: task.mode.as_str().to_owned(),
                    background: task.background,
                    call_id: Some(ctx.call.id.clone()),
                    delegation_depth: depth,
                    via: task.via.map(str::to_owned),
                },
            )))
            .await;
        let notice = SubagentNotice {
            parent: parent.session_id(),
            child: child.id.clone(),
            call_id: Some(CallId(ctx.call.id.clone())),
            description: task.description.to_owned(),
            result: None,
        };
        parent.hooks().subagent_started.notify(&notice);
        super::team::join(
            &child.id,
            &parent.session_id(),
            task.description,
            task.via,
            &child.agent.handle(),
            &child.path,
        );
        Ok(LiveChild {
            child,
            parent,
            notice,
        })
    }
}

/// A started child: run its turns, message it, finish it.
pub struct LiveChild {
    child: Child,
    parent: Agent,
    notice: SubagentNotice,
}

impl std::fmt::Debug for LiveChild {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveChild")
            .field("session", &self.child.id)
            .finish_non_exhaustive()
    }
}

impl LiveChild {
    /// The child's session id.
    pub fn session_id(&self) -> &SessionId {
        &self.child.id
    }

    /// The child's session file.
    pub fn session_file(&self) -> &Path {
        &self.child.path
    }

    /// The child agent's handle (its inbox, its running turn).
    pub fn handle(&self) -> AgentHandle {
        self.child.agent.handle()
    }

    /// True while one of its turns runs.
    pub fn is_busy(&self) -> bool {
        self.child.agent.is_busy()
    }

    /// Run the child's queued turn (its prompt, or what [`LiveChild::send`] queued); `cancel`
    /// cancels it. `Ok` is its final text; `Err` says why there is none, naming the child's
    /// session file.
    pub async fn run_turn(&self, cancel: &CancellationToken) -> Result<String, ChildError> {
        child::run(&self.child, cancel).await
    }

    /// Queue `text` as the child's next user message (source `keel/subagent`, with the parent
    /// session). While a turn runs, it joins that turn's next step; otherwise it waits for the
    /// next [`LiveChild::run_turn`]. Returns the mode used.
    pub fn send(&self, text: &str) -> Result<InboxMode, ToolError> {
        super::team::message_child(&self.child.agent.handle(), &self.parent.session_id(), text)
            .map_err(|e| ToolError::Failed(format!("could not message the subagent: {e}")))
    }

    /// Cancel the child's running turn (it stays alive and can be sent more).
    pub fn interrupt(&self) {
        self.child.agent.cancel_turn();
    }

    /// Tell the `subagent/finished` observers how it ended (its answer, or why there is none),
    /// and drop the child.
    pub fn finish<E: std::fmt::Display>(mut self, result: &Result<String, E>) {
        let (text, how) = match result {
            Ok(t) => (t.clone(), "answered"),
            Err(e) => (e.to_string(), "failed"),
        };
        super::team::set_state(&self.child.id, super::team::MemberState::Ended(how.into()));
        self.notice.result = Some(text);
        self.parent.hooks().subagent_finished.notify(&self.notice);
    }
}

impl Drop for LiveChild {
    fn drop(&mut self) {
        // A child dropped without `finish` (a killed job, a cancelled workflow) has ended too.
        super::team::set_state(
            &self.child.id,
            super::team::MemberState::Ended("ended".into()),
        );
    }
}
