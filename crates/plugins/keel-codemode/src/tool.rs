//! The `run_code {code, description}` tool: runs the program in a fresh engine with the
//! agent's visible tools bridged in, and renders `{logs, result}` as its text. A program that
//! fails (throws, does not parse, passes a limit) is a `CODE_RUN_FAILED` result with the
//! message and the line; the turn goes on.

use crate::RUN_CODE;
use crate::bridge::PipelineBridge;
use crate::engine::{self, Completed, Failed, FailureKind, Limits};
use async_trait::async_trait;
use keel_protocol::ToolSchema;
use keel_tools::{ExecMode, Tool, ToolContext, ToolEffect, ToolError, ToolOutput};
use serde_json::{Value, json};
use std::time::Duration;

/// Code of a failed run: the model reads `CODE_RUN_FAILED: message`.
pub const CODE_RUN_FAILED: &str = "CODE_RUN_FAILED";

/// Time past the run's own limit after which the pipeline gives up on the tool (the engine
/// stops itself at its limit; this is the backstop).
const PIPELINE_MARGIN: Duration = Duration::from_secs(15);

/// The `run_code` tool.
#[derive(Debug, Clone)]
pub struct RunCodeTool {
    limits: Limits,
}

impl RunCodeTool {
    /// The tool with these limits.
    pub fn new(limits: Limits) -> Self {
        RunCodeTool { limits }
    }
}

/// The names the program can call: the tools the registry offers, less `run_code`, sorted.
pub fn callable_names(schemas: &[ToolSchema]) -> Vec<String> {
    let mut names: Vec<String> = schemas
        .iter()
        .map(|s| s.name.clone())
        .filter(|n| n != RUN_CODE)
        .collect();
    names.sort();
    names
}

#[async_trait]
impl Tool for RunCodeTool {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: RUN_CODE.into(),
            description: "Run a JavaScript program over your tools in one call. `code` is the \
                          body of an async function: `await tools.NAME(args)` calls a tool (see \
                          the `tools` declaration in the system prompt) and resolves to its \
                          result text; a failed call rejects with an Error carrying toolName, \
                          message and code. Start independent calls together and await them \
                          with Promise.all. console.log lines are collected; return a \
                          JSON-serialisable value. The result is {logs, result}. No file \
                          system, network, modules or timers: only `tools`."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "code": {
                        "type": "string",
                        "minLength": 1,
                        "description": "The body of an async function (JavaScript; TypeScript types are stripped)."
                    },
                    "description": {
                        "type": "string",
                        "description": "What the program does, in 5-10 words."
                    }
                },
                "required": ["code"],
                "additionalProperties": false
            }),
        }
    }

    fn mode(&self) -> ExecMode {
        ExecMode::Exclusive
    }

    /// The program changes nothing itself; each of its calls is checked (plan mode, sandbox,
    /// approvals, guards) as the tool it calls.
    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }

    fn timeout(&self) -> Option<Duration> {
        Some(self.limits.time + PIPELINE_MARGIN)
    }

    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let code = args.get("code").and_then(Value::as_str).unwrap_or_default();
        let Some(agent) = keel_agent::calling_agent(ctx) else {
            return Err(ToolError::Failed(
                "run_code runs only inside an agent (it needs the agent's tool pipeline)".into(),
            ));
        };
        let pipeline = agent.pipeline();
        let names = callable_names(&pipeline.registry().offered_schemas());
        let bridge = PipelineBridge::new(pipeline, ctx.caller, Some(&agent), ctx.call, ctx.token);
        let code = match crate::strip::strip_types(code) {
            Ok(code) => code,
            Err(e) => return Err(render_failed(&stripping_failed(e))),
        };
        match engine::run(&code, &names, &self.limits, &bridge, &ctx.cancel).await {
            Ok(done) => Ok(render_completed(&done)),
            Err(failed) if failed.kind == FailureKind::Cancelled && ctx.cancel.is_cancelled() => {
                Err(ToolError::Aborted(format!(
                    "run_code was cancelled after {} tool calls; the program was stopped",
                    failed.sub_calls
                )))
            }
            Err(failed) => Err(render_failed(&failed)),
        }
    }
}

/// A program whose TypeScript cannot be stripped, as a syntax failure at its line.
pub fn stripping_failed(e: crate::strip::StripError) -> Failed {
    Failed {
        kind: FailureKind::Syntax,
        message: format!("SyntaxError: {}", e.message),
        line: Some(e.line),
        tool_name: None,
        code: None,
        logs: Vec::new(),
        sub_calls: 0,
    }
}

/// `{"logs":[…],"result":…}` (plus `logsDropped` when lines were left out).
pub fn render_completed(done: &Completed) -> ToolOutput {
    let result: Value =
        serde_json::from_str(&done.result).unwrap_or(Value::String(done.result.clone()));
    let mut body = serde_json::Map::new();
    body.insert("logs".into(), json!(done.logs));
    if done.logs_dropped > 0 {
        body.insert("logsDropped".into(), json!(done.logs_dropped));
    }
    body.insert("result".into(), result);
    let text = Value::Object(body).to_string();
    ToolOutput::text(text).with_value(json!({"subCalls": done.sub_calls}))
}

/// The `CODE_RUN_FAILED` error of a failed run: message, line, and the logs up to the failure.
pub fn render_failed(failed: &Failed) -> ToolError {
    let mut message = format!("{} ({})", failed.message, failed.kind.as_str());
    if let Some(line) = failed.line {
        message.push_str(&format!(" at line {line}"));
    }
    if let (Some(tool), Some(code)) = (&failed.tool_name, &failed.code) {
        message.push_str(&format!("; the failed call was tools.{tool} ({code})"));
    }
    if !failed.logs.is_empty() {
        message.push_str("\nlogs:\n");
        message.push_str(&failed.logs.join("\n"));
    }
    let kind = match failed.kind {
        FailureKind::Syntax => "syntax",
        FailureKind::Thrown => "thrown",
        FailureKind::TimeLimit => "time_limit",
        FailureKind::MemoryLimit => "memory_limit",
        FailureKind::StackLimit => "stack_limit",
        FailureKind::Cancelled => "cancelled",
        FailureKind::Stalled => "stalled",
        FailureKind::Engine => "engine",
    };
    ToolError::coded(
        CODE_RUN_FAILED,
        message,
        json!({
            "kind": kind,
            "line": failed.line,
            "toolName": failed.tool_name,
            "toolCode": failed.code,
            "subCalls": failed.sub_calls,
        }),
    )
}
