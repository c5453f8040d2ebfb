//! The `subagent` tool: depth check, child creation, lineage event and observers, then the
//! child's turn in the foreground or as a background job.

use super::child::{self, Assignment, Child};
use super::{SubagentConfig, SubagentMode};
use crate::agent::Agent;
use crate::handle::{AgentHandle, AgentSlot};
use crate::seams::SubagentNotice;
use async_trait::async_trait;
use keel_protocol::{CallId, EventBody, SubagentDescriptor, ToolSchema};
use keel_session::Store;
use keel_tools::{JobResult, JobSpec, Tool, ToolContext, ToolEffect, ToolError, ToolOutput};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

/// The `subagent` tool of one agent (bound after the agent is built).
pub struct SubagentTool {
    config: Arc<SubagentConfig>,
    store: Store,
    agent: AgentSlot,
}

impl std::fmt::Debug for SubagentTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubagentTool")
            .field("config", &self.config)
            .field("bound", &self.agent.is_bound())
            .finish()
    }
}

#[derive(Deserialize)]
struct Args {
    description: String,
    prompt: String,
    #[serde(default)]
    run_in_background: bool,
}

impl SubagentTool {
    /// An unbound tool; children's sessions go to `store`.
    pub fn new(config: Arc<SubagentConfig>, store: Store) -> Arc<SubagentTool> {
        Arc::new(SubagentTool {
            config,
            store,
            agent: AgentSlot::new(),
        })
    }

    /// Bind to the agent whose calls this tool serves (the first binding wins).
    pub fn bind(&self, agent: &AgentHandle) {
        self.agent.bind(agent);
    }

    fn parent(&self) -> Result<Agent, ToolError> {
        self.agent.get().map(|h| h.agent().clone()).ok_or_else(|| {
            ToolError::Failed(
                "the subagent tool is not bound to a running agent (a bug in the host)".into(),
            )
        })
    }
}

#[async_trait]
impl Tool for SubagentTool {
    fn schema(&self) -> ToolSchema {
        let description = match self.config.mode {
            SubagentMode::Spawn => {
                "Run a self-contained task in a subagent (fresh session, no approvals); returns its final \
                 answer. Background: a job."
            }
            SubagentMode::Fork => {
                "Run a task in a subagent that sees this conversation so far (no approvals); returns its \
                 final answer. Background: a job."
            }
        };
        ToolSchema {
            name: "subagent".into(),
            description: description.into(),
            parameters: json!({"type":"object","properties":{
                "description":{"type":"string","description":"3-5 words."},
                "prompt":{"type":"string"},
                "run_in_background":{"type":"boolean"}
            },"required":["description","prompt"]}),
        }
    }

    fn effect(&self) -> ToolEffect {
        // Only talks to the host: the child's own calls meet the same sandbox and plan mode, and
        // it cannot be approved past them.
        ToolEffect::ReadOnly
    }

    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let a: Args =
            serde_json::from_value(args).map_err(|e| ToolError::InvalidArgs(e.to_string()))?;
        let parent = self.parent()?;
        let depth = parent.log().session().header().delegation_depth + 1;
        if depth > self.config.max_depth {
            return Err(ToolError::Denied(format!(
                "delegation depth limit reached: a subagent here would be at depth {depth}, over the maximum of {}; \
                 do this task yourself",
                self.config.max_depth
            )));
        }
        let jobs = match a.run_in_background {
            true => Some(ctx.caller.jobs().ok_or_else(|| {
                ToolError::Denied(
                    "background subagents are not available in this session; call subagent without run_in_background".into(),
                )
            })?),
            false => None,
        };
        let task = Assignment {
            prompt: &a.prompt,
            call_id: &ctx.call.id,
            depth,
        };
        let child = child::build(&parent, &self.config, &self.store, &task)?;
        ctx.caller
            .emit(EventBody::SubagentDescriptor(Box::new(
                SubagentDescriptor {
                    child_session: child.id.clone(),
                    description: a.description.clone(),
                    mode: self.config.mode.as_str().to_owned(),
                    background: a.run_in_background,
                    call_id: Some(ctx.call.id.clone()),
                    delegation_depth: depth,
                },
            )))
            .await;
        let mut notice = SubagentNotice {
            parent: parent.session_id(),
            child: child.id.clone(),
            call_id: Some(CallId(ctx.call.id.clone())),
            description: a.description.clone(),
            result: None,
        };
        parent.hooks().subagent_started.notify(&notice);
        let value =
            json!({ "childSession": child.id, "sessionFile": child.path.display().to_string() });

        let Some(jobs) = jobs else {
            let result = child::run(&child, &ctx.cancel)
                .await
                .map_err(|e| e.to_string());
            notice.result = Some(result.clone().unwrap_or_else(|e| e));
            parent.hooks().subagent_finished.notify(&notice);
            return result
                .map(|text| ToolOutput::text(text).with_value(value))
                .map_err(ToolError::Failed);
        };
        let finished = parent.hooks().subagent_finished.clone();
        let child_id = child.id.clone();
        let job = JobSpec {
            kind: "subagent".into(),
            description: a.description.clone(),
            run: Box::new(move |io| {
                Box::pin(async move {
                    let result: Result<String, String> = child::run(&child, &io.cancel)
                        .await
                        .map_err(|e| e.to_string());
                    let Child { agent, .. } = child;
                    drop(agent);
                    let text = result.clone().unwrap_or_else(|e| e);
                    io.output.write(text.as_bytes());
                    notice.result = Some(text);
                    finished.notify(&notice);
                    match result {
                        Ok(_) => JobResult::completed("answered"),
                        Err(_) => JobResult::failed("no answer"),
                    }
                })
            }),
        };
        let id = jobs
            .spawn(job)
            .map_err(|e| ToolError::Failed(format!("could not start the subagent job: {e}")))?;
        Ok(ToolOutput::text(format!(
            "Started subagent job {id} (session {child_id}). You will be notified when it finishes; read its answer \
             with job_output {{\"job_id\":\"{id}\"}}."
        ))
        .with_value(json!({ "jobId": id, "childSession": child_id })))
    }
}
