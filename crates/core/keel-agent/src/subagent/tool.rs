//! The `subagent` tool: depth check, child creation, lineage event and observers (all through
//! the [`Spawner`]), then the child's turn in the foreground or as a background job.

use super::defs::AgentDefs;
use super::spawner::{ChildTask, LiveChild, Spawner};
use super::team;
use super::{SubagentConfig, SubagentMode};
use crate::handle::AgentHandle;
use async_trait::async_trait;
use keel_protocol::ToolSchema;
use keel_session::Store;
use keel_tools::{JobIo, JobResult, JobSpec, Tool, ToolContext, ToolEffect, ToolError, ToolOutput};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

/// The `subagent` (or `subagent_fork`) tool of one agent (bound after the agent is built).
pub struct SubagentTool {
    spawner: Arc<Spawner>,
    /// `subagent_fork`: always seeded with the parent's completed turns.
    fork: bool,
}

impl std::fmt::Debug for SubagentTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubagentTool")
            .field("spawner", &self.spawner)
            .field("fork", &self.fork)
            .finish()
    }
}

#[derive(Deserialize)]
struct Args {
    description: String,
    prompt: String,
    #[serde(default)]
    run_in_background: bool,
    /// dsh 0.2: the child's first working directory.
    #[serde(default)]
    cwd: Option<String>,
    /// A named subagent definition (Claude Code's Task tool calls it `subagent_type`).
    #[serde(default)]
    agent: Option<String>,
}

impl SubagentTool {
    /// An unbound tool; children's sessions go to `store`.
    pub fn new(config: Arc<SubagentConfig>, store: Store) -> Arc<SubagentTool> {
        Self::with_defs(config, store, AgentDefs::none(), false)
    }

    /// The `subagent_fork` tool beside `subagent` (`mode = "both"`).
    pub fn new_fork(config: Arc<SubagentConfig>, store: Store) -> Arc<SubagentTool> {
        Self::with_defs(config, store, AgentDefs::none(), true)
    }

    /// `subagent` (or `subagent_fork` when `fork`) whose calls may name one of `defs`.
    pub fn with_defs(
        config: Arc<SubagentConfig>,
        store: Store,
        defs: Arc<AgentDefs>,
        fork: bool,
    ) -> Arc<SubagentTool> {
        Arc::new(SubagentTool {
            spawner: Spawner::with_defs(config, store, defs),
            fork,
        })
    }

    /// The definitions its calls may name.
    pub fn defs(&self) -> &Arc<AgentDefs> {
        self.spawner.defs()
    }

    /// Bind to the agent whose calls this tool serves (the first binding wins).
    pub fn bind(&self, agent: &AgentHandle) {
        self.spawner.bind(agent);
    }

    fn mode(&self) -> SubagentMode {
        match (self.fork, self.spawner.config().mode) {
            (true, _) | (false, SubagentMode::Fork) => SubagentMode::Fork,
            (false, SubagentMode::Spawn | SubagentMode::Both) => SubagentMode::Spawn,
        }
    }
}

#[async_trait]
impl Tool for SubagentTool {
    fn schema(&self) -> ToolSchema {
        let description = match self.mode() {
            _ if self.fork => {
                "Like subagent, but the child sees this conversation so far. Background: it stays alive for \
                 send_message."
            }
            SubagentMode::Spawn | SubagentMode::Both => {
                "Run a self-contained task in a subagent (fresh session, no approvals); returns its final \
                 answer. Background: a job."
            }
            SubagentMode::Fork => {
                "Run a task in a subagent that sees this conversation so far (no approvals); returns its \
                 final answer. Background: a job."
            }
        };
        let mut parameters = json!({"type":"object","properties":{
            "description":{"type":"string","description":"3-5 words."},
            "prompt":{"type":"string"},
            "run_in_background":{"type":"boolean"},
            "cwd":{"type":"string"}
        },"required":["description","prompt"]});
        // Named definitions are offered on `subagent` only (Claude Code has one tool; a
        // definition is a fresh specialist, not a fork of this conversation). Without one the
        // schema is as it always was.
        let defs = self.spawner.defs();
        if !self.fork
            && !defs.is_empty()
            && let Some(props) = parameters
                .get_mut("properties")
                .and_then(Value::as_object_mut)
        {
            props.insert(
                "agent".into(),
                json!({"type":"string","description": defs.parameter_description()}),
            );
        }
        ToolSchema {
            name: if self.fork {
                "subagent_fork"
            } else {
                "subagent"
            }
            .into(),
            description: description.into(),
            parameters,
        }
    }

    fn aliases(&self) -> &'static [(&'static str, &'static str)] {
        // Claude Code's Task tool names the definition `subagent_type`.
        &[("subagent_type", "agent")]
    }

    fn effect(&self) -> ToolEffect {
        // Only talks to the host: the child's own calls meet the same sandbox and plan mode, and
        // it cannot be approved past them.
        ToolEffect::ReadOnly
    }

    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let a: Args =
            serde_json::from_value(args).map_err(|e| ToolError::InvalidArgs(e.to_string()))?;
        self.spawner.child_depth()?;
        // An unknown name is refused before anything is written.
        let definition = self.spawner.defs().resolve(a.agent.as_deref())?;
        let model = match &definition {
            Some(d) => d.child_model(&self.spawner.parent()?),
            None => None,
        };
        let jobs = match a.run_in_background {
            true => Some(ctx.caller.jobs().ok_or_else(|| {
                ToolError::Denied(
                    "background subagents are not available in this session; call subagent without run_in_background".into(),
                )
            })?),
            false => None,
        };
        let task = ChildTask {
            mode: self.mode(),
            background: a.run_in_background,
            cwd: a.cwd.as_deref(),
            definition: definition.as_deref(),
            model,
            ..ChildTask::new(&a.description, &a.prompt)
        };
        let child = self.spawner.start(task, ctx).await?;
        let value = json!({
            "childSession": child.session_id(),
            "sessionFile": child.session_file().display().to_string(),
        });

        let Some(jobs) = jobs else {
            let result = child.run_turn(&ctx.cancel).await;
            child.finish(&result);
            return result
                .map(|text| ToolOutput::text(text).with_value(value))
                .map_err(|e| ToolError::Failed(e.to_string()));
        };
        let child_id = child.session_id().clone();
        let link = Arc::new(team::Continuable::default());
        team::make_continuable(&child_id, link.clone());
        let description = a.description.clone();
        let job_link = link.clone();
        let job = JobSpec {
            kind: "subagent".into(),
            description: a.description.clone(),
            run: Box::new(move |io| Box::pin(continuable(child, description, job_link, io))),
        };
        let id = jobs
            .spawn(job)
            .map_err(|e| ToolError::Failed(format!("could not start the subagent job: {e}")))?;
        let _ = link.job_id.set(id.clone());
        Ok(ToolOutput::text(format!(
            "Started subagent {id} (session {child_id}) in the background. Its answer arrives as a notice; then it \
             waits: send_message {{\"agent_id\":\"{id}\"}} gives it more work, job_kill ends it."
        ))
        .with_value(json!({ "jobId": id, "childSession": child_id })))
    }
}

/// A continuable child's job: a turn, its answer to the parent as a notice, then wait for
/// `send_message` (or a kill), and again.
async fn continuable(
    child: LiveChild,
    description: String,
    link: Arc<team::Continuable>,
    io: JobIo,
) -> JobResult {
    let _ = link.events.set(io.events.clone());
    let session = child.session_id().clone();
    let mut answered = 0u32;
    let last = loop {
        team::set_state(&session, team::MemberState::Working);
        let result = child.run_turn(&io.cancel).await;
        if io.cancel.is_cancelled() {
            break result;
        }
        let interrupted = team::set_state(&session, team::MemberState::Waiting);
        let job = link.job_id.get().cloned().unwrap_or_default();
        let text = match &result {
            Ok(t) => t.clone(),
            Err(e) => e.to_string(),
        };
        io.output.write(format!("{text}\n").as_bytes());
        if !interrupted {
            let head = match &result {
                Ok(_) => format!("Subagent {job} ({description}) answered"),
                Err(_) => format!("Subagent {job} ({description}) got no answer"),
            };
            io.events.notify(format!(
                "{head}:\n{}\n(It keeps its session: send_message {{\"agent_id\":\"{job}\"}} gives it more work; \
                 job_kill ends it.)",
                team::capped(&text, &job)
            ));
        }
        answered += 1;
        io.events.set_waiting(true);
        tokio::select! {
            () = link.wake.notified() => io.events.set_waiting(false),
            () = io.cancel.cancelled() => break result,
        }
    };
    let ok = last.is_ok();
    // Only a kill ends a continuable child.
    team::set_state(&session, team::MemberState::Ended("killed".into()));
    child.finish(&last);
    match ok {
        true => JobResult::completed(format!("answered {answered} time(s)")),
        false => JobResult::failed("no answer"),
    }
}
