//! The job tools: `job_output {job_id, wait?, timeout_ms?}`, `job_list {}` and
//! `job_kill {job_id}`. They act on the calling agent's jobs through the host's
//! [`JobControl`](keel_tools::JobControl), so one instance serves any agent; an agent without a
//! job service gets a clear refusal. Schemas are kept short: they ride on every request.

use super::JobsConfig;
use async_trait::async_trait;
use keel_protocol::ToolSchema;
use keel_tools::{
    ExecMode, JobControl, JobInfo, JobOutput, Tool, ToolContext, ToolEffect, ToolError, ToolOutput,
};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// Names of the job tools.
pub const JOB_TOOL_NAMES: [&str; 3] = ["job_output", "job_list", "job_kill"];

fn control(ctx: &ToolContext<'_>) -> Result<Arc<dyn JobControl>, ToolError> {
    ctx.caller.jobs().ok_or_else(|| {
        ToolError::Denied("background jobs are not available in this session".into())
    })
}

fn parse<T: serde::de::DeserializeOwned>(args: Value) -> Result<T, ToolError> {
    serde_json::from_value(args).map_err(|e| ToolError::InvalidArgs(e.to_string()))
}

fn state_line(info: &JobInfo) -> String {
    let status = match info.waiting {
        true => "running, waiting for a message",
        false => info.status.as_str(),
    };
    let mut line = format!("{} [{status}] {}", info.id, info.description);
    if let Some(summary) = info
        .summary
        .as_deref()
        .filter(|s| *s != info.status.as_str())
    {
        line.push_str(&format!(" ({summary})"));
    }
    line.push_str(&format!(
        ", {:.1}s, {} bytes of output",
        info.elapsed_ms as f64 / 1000.0,
        info.output_bytes
    ));
    line
}

fn render_output(out: &JobOutput) -> ToolOutput {
    let mut text = state_line(&out.info);
    if out.truncated {
        text.push_str(&format!("\n[showing the last {} bytes]", out.text.len()));
    }
    text.push_str("\n---\n");
    text.push_str(if out.text.is_empty() {
        "(no output yet)"
    } else {
        &out.text
    });
    ToolOutput::text(text).with_value(json!({ "job": out.info }))
}

/// `job_output`: a job's state and buffered output, optionally after waiting for it.
#[derive(Debug, Clone)]
pub struct JobOutputTool {
    wait_default: Duration,
    wait_max: Duration,
}

#[derive(Deserialize)]
struct OutputArgs {
    job_id: String,
    #[serde(default)]
    wait: bool,
    timeout_ms: Option<u64>,
}

#[async_trait]
impl Tool for JobOutputTool {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "job_output".into(),
            description: "Status and output tail of a background job; wait: block until it ends or timeout_ms passes.".into(),
            parameters: json!({"type":"object","properties":{
                "job_id":{"type":"string"},
                "wait":{"type":"boolean"},
                "timeout_ms":{"type":"integer","minimum":1,"maximum":self.wait_max.as_millis() as u64,
                    "description":format!("Default {}.", self.wait_default.as_millis())}
            },"required":["job_id"]}),
        }
    }
    fn mode(&self) -> ExecMode {
        ExecMode::Parallel
    }
    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }
    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let a: OutputArgs = parse(args)?;
        let jobs = control(ctx)?;
        let out = if a.wait {
            let limit = a
                .timeout_ms
                .map_or(self.wait_default, Duration::from_millis)
                .min(self.wait_max);
            jobs.wait(&a.job_id, limit, &ctx.cancel).await
        } else {
            jobs.output(&a.job_id)
        };
        out.map(|o| render_output(&o))
            .map_err(|e| ToolError::InvalidArgs(e.to_string()))
    }
}

/// `job_list`: the caller's jobs.
#[derive(Debug, Clone, Copy)]
pub struct JobListTool;

#[async_trait]
impl Tool for JobListTool {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "job_list".into(),
            description:
                "List your background jobs (id, status, description, runtime, output size).".into(),
            parameters: json!({"type":"object","properties":{}}),
        }
    }
    fn mode(&self) -> ExecMode {
        ExecMode::Parallel
    }
    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }
    async fn execute(&self, _args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let jobs = control(ctx)?.list();
        let text = if jobs.is_empty() {
            "No background jobs.".to_owned()
        } else {
            jobs.iter().map(state_line).collect::<Vec<_>>().join("\n")
        };
        Ok(ToolOutput::text(text).with_value(json!({ "jobs": jobs })))
    }
}

/// `job_kill`: stop a running job (its process group, or its subagent's turn).
#[derive(Debug, Clone, Copy)]
pub struct JobKillTool;

#[derive(Deserialize)]
struct KillArgs {
    job_id: String,
    reason: Option<String>,
}

#[async_trait]
impl Tool for JobKillTool {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "job_kill".into(),
            description:
                "Stop a running background job (kills its processes or cancels its subagent)."
                    .into(),
            parameters: json!({"type":"object","properties":{
                "job_id":{"type":"string"},
                "reason":{"type":"string","description":"Why, for the log."}
            },"required":["job_id"]}),
        }
    }
    fn effect(&self) -> ToolEffect {
        // Only stops work this agent started.
        ToolEffect::ReadOnly
    }
    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let a: KillArgs = parse(args)?;
        let info = control(ctx)?
            .kill(&a.job_id)
            .map_err(|e| ToolError::InvalidArgs(e.to_string()))?;
        let because = a.reason.map(|r| format!(" ({r})")).unwrap_or_default();
        let text = match info.summary.as_deref() {
            Some("killed") => format!("Killed job {}{because}.", info.id),
            _ => format!(
                "Job {} had already finished: {}",
                info.id,
                state_line(&info)
            ),
        };
        Ok(ToolOutput::text(text).with_value(json!({ "job": info })))
    }
}

/// The three job tools, configured.
pub fn all(config: &JobsConfig) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(JobOutputTool {
            wait_default: Duration::from_millis(config.wait_default_ms),
            wait_max: Duration::from_millis(config.wait_max_ms.max(1)),
        }),
        Arc::new(JobListTool),
        Arc::new(JobKillTool),
    ]
}
