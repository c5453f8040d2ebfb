//! `delegate_status`, `delegate_result`, `delegate_logs` and `delegate_steer`.

use super::{MAX_GUIDANCE_BYTES, Shared, caller, failed, parse};
use crate::render;
use crate::seam::SteerOutcome;
use async_trait::async_trait;
use keel_protocol::ToolSchema;
use keel_tools::{ExecMode, Tool, ToolContext, ToolEffect, ToolError, ToolOutput};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

macro_rules! tool_struct {
    ($name:ident, $doc:literal) => {
        #[doc = $doc]
        #[derive(Debug)]
        pub struct $name {
            shared: Arc<Shared>,
        }

        impl $name {
            /// Over `shared`.
            pub fn new(shared: Arc<Shared>) -> Self {
                $name { shared }
            }
        }
    };
}

tool_struct!(
    StatusTool,
    "`delegate_status {job_id?}`: one delegation's state, or all of the caller's."
);
tool_struct!(
    ResultTool,
    "`delegate_result {job_id}`: a finished delegation's status, artifacts and framed answer."
);
tool_struct!(
    LogsTool,
    "`delegate_logs {job_id, tail?}`: the end of a delegation's log, framed and bounded."
);
tool_struct!(
    SteerTool,
    "`delegate_steer {job_id, guidance}`: hand guidance (at most 16 KiB) to a running delegation."
);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StatusArgs {
    job_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JobArgs {
    job_id: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LogsArgs {
    job_id: String,
    tail: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SteerArgs {
    job_id: String,
    guidance: String,
}

fn job_id_schema() -> Value {
    json!({"type":"object","properties":{"job_id":{"type":"string"}},"required":["job_id"]})
}

#[async_trait]
impl Tool for StatusTool {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "delegate_status".into(),
            description: "State of one delegation, or of all yours when job_id is omitted.".into(),
            parameters: json!({"type":"object","properties":{"job_id":{"type":"string"}}}),
        }
    }
    fn mode(&self) -> ExecMode {
        ExecMode::Parallel
    }
    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }
    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let a: StatusArgs = parse(args)?;
        let (_, who) = caller(ctx, "delegate_status")?;
        let s = &self.shared;
        let pid = a.job_id.as_deref().map(|id| s.provider_id(&who, id));
        let shown = a.job_id.as_deref().unwrap_or("status");
        let jobs = match s.service.status(&who, pid.as_deref()).await {
            Ok(jobs) => jobs,
            Err(e) => return failed(&e, shown, s.max_bytes),
        };
        let lines: Vec<String> = jobs
            .iter()
            .map(|j| render::status_line(&s.display_id(&who, &j.id), j))
            .collect();
        // The whole list also names the jobs the provider found still active from earlier
        // sessions (a supervisor that crashed or was restarted): surfaced, never reaped.
        let earlier: Vec<_> = if a.job_id.is_none() {
            s.service
                .capabilities(&who)
                .await
                .active_from_earlier_sessions
                .into_iter()
                .filter(|e| !jobs.iter().any(|j| j.id == e.id))
                .collect()
        } else {
            Vec::new()
        };
        let mut text = if lines.is_empty() {
            if earlier.is_empty() {
                "No delegations.".to_owned()
            } else {
                "No delegations in this session.".to_owned()
            }
        } else {
            lines.join("\n")
        };
        if !earlier.is_empty() {
            text.push_str(&render::earlier_sessions(&earlier));
        }
        let mut value = json!({ "jobs": jobs });
        if !earlier.is_empty() {
            value["activeFromEarlierSessions"] = json!(earlier);
        }
        Ok(ToolOutput::text(text).with_value(value))
    }
}

#[async_trait]
impl Tool for ResultTool {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "delegate_result".into(),
            description: "A finished delegation's status, artifacts and answer.".into(),
            parameters: job_id_schema(),
        }
    }
    fn mode(&self) -> ExecMode {
        ExecMode::Parallel
    }
    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }
    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let a: JobArgs = parse(args)?;
        let (_, who) = caller(ctx, "delegate_result")?;
        let s = &self.shared;
        let pid = s.provider_id(&who, &a.job_id);
        match s.service.result(&who, &pid).await {
            Ok(r) => {
                let (text, truncated) = render::finished(&a.job_id, &r, s.max_bytes);
                Ok(ToolOutput::text(text).with_value(json!({
                    "jobId": a.job_id,
                    "status": r.job.status.as_str(),
                    "finalTextTruncated": truncated,
                    "artifacts": r.artifacts,
                })))
            }
            Err(e) => failed(&e, &a.job_id, s.max_bytes),
        }
    }
}

#[async_trait]
impl Tool for LogsTool {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "delegate_logs".into(),
            description: "The last lines of a delegation's log.".into(),
            parameters: json!({"type":"object","properties":{
                "job_id":{"type":"string"},
                "tail":{"type":"integer","minimum":1,"description":"Lines; default all."}
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
        let a: LogsArgs = parse(args)?;
        let (_, who) = caller(ctx, "delegate_logs")?;
        let s = &self.shared;
        let pid = s.provider_id(&who, &a.job_id);
        let logs = match s.service.logs(&who, &pid, a.tail).await {
            Ok(l) => l,
            Err(e) => return failed(&e, &a.job_id, s.max_bytes),
        };
        let b = render::bound_tail(&logs, s.max_bytes);
        let mut text = format!("Log of {}:\n{}\n", a.job_id, render::DATA_LINE);
        text.push_str(&render::frame(&a.job_id, Some("logs"), &b.text));
        if let Some(note) = b.note("last") {
            text.push('\n');
            text.push_str(&note);
        }
        Ok(ToolOutput::text(text).with_value(json!({
            "jobId": a.job_id,
            "truncated": b.truncated(),
            "bytes": b.total,
        })))
    }
}

#[async_trait]
impl Tool for SteerTool {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "delegate_steer".into(),
            description: "Send guidance to a running delegation (at most 16 KiB).".into(),
            parameters: json!({"type":"object","properties":{
                "job_id":{"type":"string"},
                "guidance":{"type":"string"}
            },"required":["job_id","guidance"]}),
        }
    }
    fn effect(&self) -> ToolEffect {
        ToolEffect::Executes
    }
    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let a: SteerArgs = parse(args)?;
        if a.guidance.len() > MAX_GUIDANCE_BYTES {
            return Err(ToolError::InvalidArgs(format!(
                "guidance is {} bytes; the limit is {MAX_GUIDANCE_BYTES} (16 KiB). It was not sent: shorten it (it is never trimmed).",
                a.guidance.len()
            )));
        }
        if a.guidance.trim().is_empty() {
            return Err(ToolError::InvalidArgs("guidance is empty".into()));
        }
        let (_, who) = caller(ctx, "delegate_steer")?;
        let s = &self.shared;
        let pid = s.provider_id(&who, &a.job_id);
        let outcome = match s.service.steer(&who, &pid, &a.guidance).await {
            Ok(o) => o,
            Err(e) => return failed(&e, &a.job_id, s.max_bytes),
        };
        let text = match &outcome {
            SteerOutcome::Accepted => format!("Guidance delivered to {} (accepted).", a.job_id),
            SteerOutcome::Refused { detail } => format!(
                "{} refused the guidance: {}",
                a.job_id,
                render::bound_head(detail, 1_000).text
            ),
            SteerOutcome::Unsupported { reason } => format!(
                "[unsupported] {} cannot be steered: {}",
                a.job_id,
                render::bound_head(reason, 1_000).text
            ),
        };
        Ok(ToolOutput::text(text).with_value(json!({ "jobId": a.job_id, "steer": outcome })))
    }
}
