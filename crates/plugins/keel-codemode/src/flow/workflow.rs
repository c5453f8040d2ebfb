//! The `workflow {script, meta, args?}` tool: the script (JavaScript or TypeScript) runs as the
//! body of an async function in a fresh Code Mode engine whose only calls are the workflow's:
//! `agent()` starts a child through the [`Spawner`] (spawn, `via: "workflow"`), `phase()` and
//! `log()` record progress. Progress goes to the parent's log as `workflow/*` events.
//!
//! ```text
//! workflow call ─► strip types ─► workflow/started ─► engine (setup.js: args, agent, parallel,
//!   pipeline, phase, log) ─► agent() ─► WorkflowBridge ─► permit (max_parallel) ─► Spawner::start
//!   ─► workflow/agent running ─► child turn(s) (schema: told once) ─► workflow/agent done
//!   ─► the script's return value ─► workflow/finished ─► the tool result
//! ```

use crate::engine::{self, Bridge, Completed, Failed, FailureKind, Limits, SubCall, SubResult};
use crate::flow::children::{child_model, run_child, schema_instruction};
use crate::flow::presenter as present;
use crate::strip::strip_types;
use async_trait::async_trait;
use keel_agent::AgentHandle;
use keel_agent::subagent::{ChildTask, Spawner, SubagentMode};
use keel_protocol::ToolSchema;
use keel_tools::{ExecMode, Tool, ToolContext, ToolEffect, ToolError, ToolOutput};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// The tool's name.
pub const WORKFLOW: &str = "workflow";
/// Code of a failed workflow.
pub const WORKFLOW_FAILED: &str = "WORKFLOW_FAILED";
/// Default bound on children running at once (`max_parallel`), and `parallel()`'s default limit.
pub const DEFAULT_MAX_PARALLEL: usize = 4;
/// Default time limit of one workflow, children included (`time_limit_sec`).
pub const DEFAULT_TIME_LIMIT_SEC: u64 = 1800;
/// `agent()` calls one workflow may make.
const MAX_AGENTS: u32 = 256;
const SETUP: &str = include_str!("setup.js");
/// Time past the workflow's own limit after which the pipeline gives up on the tool.
const PIPELINE_MARGIN: Duration = Duration::from_secs(30);

/// The `workflow` tool of one agent.
#[derive(Debug)]
pub struct WorkflowTool {
    spawner: Arc<Spawner>,
    limits: Limits,
    max_parallel: usize,
}

impl WorkflowTool {
    /// The tool, starting children through `spawner`, at most `max_parallel` at once.
    pub fn new(spawner: Arc<Spawner>, limits: Limits, max_parallel: usize) -> Self {
        WorkflowTool {
            spawner,
            limits,
            max_parallel: max_parallel.max(1),
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Phase {
    title: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Meta {
    name: String,
    description: String,
    #[serde(default)]
    phases: Vec<Phase>,
}

/// Arguments of one `agent()` call, as the setup script sends them.
#[derive(Deserialize)]
struct AgentArgs {
    prompt: String,
    #[serde(default)]
    schema: Option<Value>,
    #[serde(default)]
    label: Option<String>,
    #[serde(default)]
    phase: Option<String>,
    #[serde(default)]
    provider: Option<String>,
    #[serde(default)]
    model: Option<String>,
}

fn invalid(what: &str) -> ToolError {
    ToolError::InvalidArgs(what.to_owned())
}

#[async_trait]
impl Tool for WorkflowTool {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: WORKFLOW.into(),
            description: "Run a workflow: `script` is the body of an async JS/TS function with \
                          agent(prompt, {schema, label, phase, model}) (a subagent; its answer, \
                          or JSON with schema), parallel(thunks, {limit}), pipeline(...steps), \
                          phase(title), log(msg), args. Returns the script's return value."
                .into(),
            parameters: json!({"type":"object","properties":{
                "script":{"type":"string"},
                "meta":{"type":"object","properties":{
                    "name":{"type":"string"},
                    "description":{"type":"string"},
                    "whenToUse":{"type":"string"},
                    "phases":{"type":"array","items":{"type":"object","properties":{
                        "title":{"type":"string"},"detail":{"type":"string"},
                        "provider":{"type":"string"},"model":{"type":"string"}
                    },"required":["title"]}}
                },"required":["name","description"]},
                "args":{"type":"object"}
            },"required":["script","meta"]}),
        }
    }

    fn effect(&self) -> ToolEffect {
        // Only talks to the host: each child's calls meet the sandbox, plan mode and approvals.
        ToolEffect::ReadOnly
    }

    fn timeout(&self) -> Option<Duration> {
        Some(self.limits.time + PIPELINE_MARGIN)
    }

    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let script = match args.get("script") {
            Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
            _ => {
                return Err(invalid(
                    "`script` must be a non-empty string (the body of an async function)",
                ));
            }
        };
        let meta: Meta = match args.get("meta") {
            Some(m @ Value::Object(_)) => serde_json::from_value(m.clone()).map_err(|e| {
                invalid(&format!(
                    "`meta` must be {{name: string, description: string, phases?: \
                     [{{title: string}}]}}: {e}"
                ))
            })?,
            _ => {
                return Err(invalid(
                    "`meta` must be an object with `name` and `description`",
                ));
            }
        };
        let script_args = match args.get("args") {
            None | Some(Value::Null) => json!({}),
            Some(a @ Value::Object(_)) => a.clone(),
            Some(_) => return Err(invalid("`args` must be an object")),
        };
        let Some(agent) = keel_agent::calling_agent(ctx) else {
            return Err(ToolError::Failed(
                "workflow runs only inside an agent (it needs the agent's children)".into(),
            ));
        };
        let script = strip_types(&script).map_err(|e| {
            failed_error(&Failed {
                kind: FailureKind::Syntax,
                message: format!("SyntaxError: {}", e.message),
                line: Some(e.line),
                tool_name: None,
                code: None,
                logs: Vec::new(),
                sub_calls: 0,
            })
        })?;
        let call_id = ctx.call.id.clone();
        let titles: Vec<&str> = meta.phases.iter().map(|p| p.title.as_str()).collect();
        log(
            &agent,
            present::STARTED_EVENT,
            json!({"callId": call_id, "name": meta.name, "description": meta.description, "phases": titles}),
        );
        let args_literal = Value::String(script_args.to_string()).to_string();
        let setup = SETUP
            .replace("__ARGS__", &args_literal)
            .replace("__LIMIT__", &self.max_parallel.to_string());
        let bridge = WorkflowBridge {
            ctx,
            spawner: &self.spawner,
            agent: agent.clone(),
            permits: Semaphore::new(self.max_parallel),
            agents: AtomicU32::new(0),
        };
        let names = ["agent".to_owned(), "log".to_owned(), "phase".to_owned()];
        let limits = Limits {
            // The bridge bounds the children; the engine must not queue `log` behind them.
            max_parallel: 64,
            max_sub_calls: 10_000,
            ..self.limits.clone()
        };
        let outcome =
            engine::run_with_setup(&script, Some(&setup), &names, &limits, &bridge, &ctx.cancel)
                .await;
        let agents = bridge.agents.load(Ordering::Relaxed);
        match outcome {
            Ok(done) => {
                log(
                    &agent,
                    present::FINISHED_EVENT,
                    json!({"callId": call_id, "status": "completed", "agents": agents}),
                );
                Ok(render(&done, agents))
            }
            Err(f) if f.kind == FailureKind::Cancelled && ctx.cancel.is_cancelled() => {
                log(
                    &agent,
                    present::FINISHED_EVENT,
                    json!({"callId": call_id, "status": "cancelled", "agents": agents}),
                );
                Err(ToolError::Aborted(format!(
                    "the workflow was cancelled after starting {agents} agents; its running \
                     agents were cancelled"
                )))
            }
            Err(f) => {
                let error = failed_error(&f);
                log(
                    &agent,
                    present::FINISHED_EVENT,
                    json!({"callId": call_id, "status": "failed", "agents": agents, "error": error.to_string()}),
                );
                Err(error)
            }
        }
    }
}

/// Record a `workflow/*` event in the parent's log (ignorable: readers without the plugin skip
/// it). A failed append loses only the record.
fn log(agent: &AgentHandle, type_name: &str, data: Value) {
    let _ = agent.push_ignorable(type_name, data);
}

/// The script's return value: a string as itself, anything else as JSON.
fn render(done: &Completed, agents: u32) -> ToolOutput {
    let text = match serde_json::from_str::<Value>(&done.result) {
        Ok(Value::String(s)) => s,
        _ => done.result.clone(),
    };
    ToolOutput::text(text).with_value(json!({"agents": agents, "logs": done.logs}))
}

/// `WORKFLOW_FAILED: message (kind) at line N`, with the logs up to the failure.
fn failed_error(f: &Failed) -> ToolError {
    let mut message = format!("{} ({})", f.message, f.kind.as_str());
    if let Some(line) = f.line {
        message.push_str(&format!(" at line {line}"));
    }
    if let (Some(tool), Some(code)) = (&f.tool_name, &f.code) {
        message.push_str(&format!("; the failed call was {tool}() ({code})"));
    }
    if !f.logs.is_empty() {
        message.push_str("\nlogs:\n");
        message.push_str(&f.logs.join("\n"));
    }
    ToolError::coded(
        WORKFLOW_FAILED,
        message,
        json!({"kind": f.kind.as_str(), "line": f.line}),
    )
}

/// Performs the script's `agent()`, `phase()` and `log()` calls.
struct WorkflowBridge<'a> {
    ctx: &'a ToolContext<'a>,
    spawner: &'a Spawner,
    agent: AgentHandle,
    permits: Semaphore,
    agents: AtomicU32,
}

fn refused(code: &str, text: impl Into<String>) -> SubResult {
    SubResult {
        ok: false,
        text: text.into(),
        code: Some(code.to_owned()),
    }
}

impl WorkflowBridge<'_> {
    async fn agent_call(&self, a: AgentArgs, cancel: CancellationToken) -> SubResult {
        let model = match child_model(&self.agent, a.provider.as_deref(), a.model.as_deref()) {
            Ok(m) => m,
            Err(why) => return refused("INVALID_ARGS", why.to_string()),
        };
        let n = self.agents.fetch_add(1, Ordering::Relaxed) + 1;
        if n > MAX_AGENTS {
            return refused(
                "LIMIT",
                format!("this workflow has started its {MAX_AGENTS} agents; no more are allowed"),
            );
        }
        let _permit = tokio::select! {
            biased;
            () = cancel.cancelled() => return refused("ABORTED", "the workflow was cancelled"),
            p = self.permits.acquire() => match p {
                Ok(p) => p,
                Err(_) => return refused("ABORTED", "the workflow ended"),
            },
        };
        let label = a.label.clone().unwrap_or_else(|| format!("agent {n}"));
        let prompt = match &a.schema {
            Some(schema) => format!("{}{}", a.prompt, schema_instruction(schema)),
            None => a.prompt.clone(),
        };
        let task = ChildTask {
            mode: SubagentMode::Spawn,
            via: Some(WORKFLOW),
            model,
            ..ChildTask::new(&label, &prompt)
        };
        let call_id = self.ctx.call.id.clone();
        let event = |session: &str, status: &str, error: Option<&str>| {
            json!({"callId": call_id, "n": n, "label": label, "phase": a.phase,
                   "childSession": session, "status": status, "error": error})
        };
        // What starting the child cost (its session file, agent, descriptor), for the docs'
        // figure of agent()'s overhead.
        let started = Instant::now();
        let answer = run_child(
            self.spawner,
            self.ctx,
            task,
            a.schema.as_ref(),
            &cancel,
            |session| {
                let mut data = event(session, "running", None);
                data["startUs"] =
                    json!(u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX));
                log(&self.agent, present::AGENT_EVENT, data);
            },
        )
        .await;
        match answer {
            Err(why) => refused(
                "AGENT_FAILED",
                format!("agent {label:?} could not start: {why}"),
            ),
            Ok(answer) => match answer.result {
                Ok(value) => {
                    log(
                        &self.agent,
                        present::AGENT_EVENT,
                        event(&answer.child_session, "completed", None),
                    );
                    SubResult {
                        ok: true,
                        text: value.to_string(),
                        code: None,
                    }
                }
                Err(why) => {
                    let why = why.to_string();
                    log(
                        &self.agent,
                        present::AGENT_EVENT,
                        event(&answer.child_session, "failed", Some(&why)),
                    );
                    refused("AGENT_FAILED", format!("agent {label:?} failed: {why}"))
                }
            },
        }
    }
}

#[async_trait]
impl Bridge for WorkflowBridge<'_> {
    fn mode(&self, _name: &str) -> ExecMode {
        ExecMode::Parallel
    }

    async fn call(&self, call: SubCall, cancel: CancellationToken) -> SubResult {
        let args: Value = serde_json::from_str(&call.arguments).unwrap_or(Value::Null);
        let call_id = self.ctx.call.id.clone();
        match call.name.as_str() {
            "agent" => match serde_json::from_value::<AgentArgs>(args) {
                Ok(a) => self.agent_call(a, cancel).await,
                Err(e) => refused(
                    "INVALID_ARGS",
                    format!(
                        "agent(prompt, opts): prompt must be a string and opts {{schema, label, phase, provider, model}}: {e}"
                    ),
                ),
            },
            "phase" => {
                log(
                    &self.agent,
                    present::PHASE_EVENT,
                    json!({"callId": call_id, "title": args["title"]}),
                );
                SubResult {
                    ok: true,
                    text: String::new(),
                    code: None,
                }
            }
            "log" => {
                log(
                    &self.agent,
                    present::LOG_EVENT,
                    json!({"callId": call_id, "phase": args["phase"], "message": args["message"]}),
                );
                SubResult {
                    ok: true,
                    text: String::new(),
                    code: None,
                }
            }
            other => refused("UNKNOWN_TOOL", format!("a workflow has no call {other}")),
        }
    }
}
