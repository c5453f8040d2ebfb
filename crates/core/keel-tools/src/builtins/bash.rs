//! `bash {command, description?, timeoutMs?, workdir?, run_in_background?}` (dsh's names;
//! `timeout_ms` is read as `timeoutMs`): runs
//! `bash -c command` through the [`crate::subprocess`] service (own process group, scrubbed
//! environment, tail-capped merged output with the full stream spilled). A non-zero exit is a
//! normal result ending in `[exit code: N]` (and, when the sandbox confined the command and its
//! output says a file access was refused, `[sandbox: file access denied under <mode> mode]`);
//! running past the timeout is `TOOL_TIMEOUT` with the output's tail.
//!
//! With `run_in_background: true` the command starts as a job of the caller's job service
//! ([`crate::ToolCaller::jobs`]) and the call returns the job id at once; the output streams
//! into the job's buffer, the time limit defaults to the maximum, and `job_kill` kills the
//! process group. Without a job service the call is refused.

use super::parse;
use crate::error::ToolError;
use crate::escalation::with_escalation;
use crate::jobs::{JobResult, JobSpec};
use crate::subprocess::{CommandOutput, CommandSpec, OutputMode, RunEnd, SubprocessService};
use crate::tool::{ExecMode, Tool, ToolContext, ToolEffect, ToolOutput};
use crate::workspace::{Access, SandboxMode};
use async_trait::async_trait;
use keel_protocol::ToolSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::path::Path;
use std::time::Duration;

/// Limits of the `bash` tool.
#[derive(Debug, Clone)]
pub struct BashConfig {
    /// Timeout when the call gives none.
    pub default_timeout: Duration,
    /// Largest timeout a call may ask for.
    pub max_timeout: Duration,
    /// Bytes of output (tail) returned to the model.
    pub output_cap: usize,
}

impl Default for BashConfig {
    fn default() -> Self {
        BashConfig {
            default_timeout: Duration::from_secs(60),
            max_timeout: Duration::from_secs(600),
            output_cap: 30_000,
        }
    }
}

/// The `bash` tool.
#[derive(Debug, Clone, Default)]
pub struct BashTool {
    cfg: BashConfig,
}

impl BashTool {
    /// A `bash` tool with these limits.
    pub fn new(cfg: BashConfig) -> Self {
        BashTool { cfg }
    }
}

#[derive(Deserialize)]
struct BashArgs {
    command: String,
    description: Option<String>,
    #[serde(rename = "timeoutMs")]
    timeout_ms: Option<u64>,
    workdir: Option<String>,
    #[serde(default)]
    run_in_background: bool,
}

/// Bytes of the command kept in a background job's description.
const JOB_DESCRIPTION_CAP: usize = 120;

#[async_trait]
impl Tool for BashTool {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "bash".into(),
            description: format!(
                "Run a command with `bash -c` and return its combined stdout and stderr; a \
                 non-zero exit adds `[exit code: N]`. Output over {} bytes keeps the end and \
                 saves the rest to a file.",
                self.cfg.output_cap
            ),
            parameters: with_escalation(
                json!({"type":"object","properties":{
                "command":{"type":"string"},
                "description":{"type":"string","description":"What it does, in 5-10 words."},
                "timeoutMs":{"type":"integer","minimum":1,"maximum":self.cfg.max_timeout.as_millis() as u64,
                    "description":format!("Default {}.", self.cfg.default_timeout.as_millis())},
                "workdir":{"type":"string","description":"Default: the working directory."},
                "run_in_background":{"type":"boolean","description":"Run as a job; see job_output."}
            },"required":["command"]}),
                true,
            ),
        }
    }
    fn aliases(&self) -> &'static [(&'static str, &'static str)] {
        &[("timeout_ms", "timeoutMs")]
    }
    fn escalates(&self) -> bool {
        true
    }
    fn mode(&self) -> ExecMode {
        ExecMode::Exclusive
    }
    fn effect(&self) -> ToolEffect {
        ToolEffect::Executes
    }
    fn timeout(&self) -> Option<Duration> {
        // Backstop only: the body enforces the call's own timeout and kills the group.
        Some(self.cfg.max_timeout + Duration::from_secs(30))
    }
    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let a: BashArgs = parse(args)?;
        let dir = match &a.workdir {
            Some(w) => {
                let d = ctx.workspace.resolve(w, Access::Read)?;
                if !d.is_dir() {
                    return Err(ToolError::InvalidArgs(format!(
                        "workdir '{w}' is not a directory"
                    )));
                }
                d
            }
            None => ctx.workspace.cwd().to_path_buf(),
        };
        let default_limit = if a.run_in_background {
            self.cfg.max_timeout
        } else {
            self.cfg.default_timeout
        };
        let limit = a
            .timeout_ms
            .map_or(default_limit, Duration::from_millis)
            .min(self.cfg.max_timeout);
        let shell = if Path::new("/bin/bash").exists() {
            "/bin/bash"
        } else {
            "/bin/sh"
        };
        let spec = CommandSpec::new([shell, "-c", a.command.as_str()])
            .cwd(dir)
            .timeout(limit)
            .output(OutputMode::Merged)
            .cap(self.cfg.output_cap)
            .label("bash")
            .env("TMPDIR", ctx.workspace.temp_dir())
            .confine(ctx.workspace.confinement());
        if a.run_in_background {
            let description = a.description.clone().unwrap_or_else(|| a.command.clone());
            return start_job(ctx, spec, limit, description);
        }
        let out = ctx
            .subprocess
            .run(spec, &ctx.cancel)
            .await
            .map_err(|e| ToolError::Failed(format!("could not run the command: {e}")))?;
        let confined = ctx.workspace.sandbox() != SandboxMode::FullAccess;
        let sandbox = confined.then(|| ctx.workspace.sandbox());
        render(out, limit, sandbox)
    }
}

/// Start `spec` as a background job; the output streams into the job's buffer.
fn start_job(
    ctx: &ToolContext<'_>,
    spec: CommandSpec,
    limit: Duration,
    description: String,
) -> Result<ToolOutput, ToolError> {
    let jobs = ctx.caller.jobs().ok_or_else(|| {
        ToolError::Denied(
            "background jobs are not available in this session; run the command without \
             run_in_background"
                .into(),
        )
    })?;
    let service: SubprocessService = ctx.subprocess.clone();
    let cut = description.floor_char_boundary(JOB_DESCRIPTION_CAP);
    let job = JobSpec {
        kind: "bash".into(),
        description: description[..cut].to_owned(),
        run: Box::new(move |io| {
            Box::pin(async move {
                let spec = spec.tee(io.output.clone());
                match service.run(spec, &io.cancel).await {
                    Err(e) => JobResult::failed(format!("could not run the command: {e}")),
                    Ok(out) => match (out.end, out.code, out.signal) {
                        (RunEnd::TimedOut, ..) => JobResult::failed(format!(
                            "timed out after {} ms; its processes were killed",
                            limit.as_millis()
                        )),
                        (RunEnd::Cancelled, ..) => JobResult::failed("cancelled"),
                        (RunEnd::Exited, Some(0), _) => JobResult::completed("exit code 0"),
                        (RunEnd::Exited, Some(code), _) => {
                            JobResult::failed(format!("exit code {code}"))
                        }
                        (RunEnd::Exited, None, sig) => JobResult::failed(format!(
                            "killed by signal {}",
                            sig.unwrap_or_default()
                        )),
                    },
                }
            })
        }),
    };
    let id = jobs
        .spawn(job)
        .map_err(|e| ToolError::Failed(e.to_string()))?;
    Ok(ToolOutput::text(format!(
        "Started background job {id}. You will be notified when it finishes; read its output \
         with job_output {{\"job_id\":\"{id}\"}} or stop it with job_kill."
    ))
    .with_value(json!({ "jobId": id })))
}

/// The model-facing result of a finished foreground run.
fn render(
    out: CommandOutput,
    limit: Duration,
    sandbox: Option<SandboxMode>,
) -> Result<ToolOutput, ToolError> {
    let captured = &out.stdout;
    let mut text = String::new();
    if let Some(spill) = &captured.spill {
        text.push_str(&format!(
            "[output truncated: showing the last {} of {} bytes; full output in {}]\n",
            captured.tail.len(),
            captured.total,
            spill.display()
        ));
    } else if captured.truncated() {
        text.push_str(&format!(
            "[output truncated: showing the last {} of {} bytes]\n",
            captured.tail.len(),
            captured.total
        ));
    }
    text.push_str(&captured.text());
    let mut meta = Map::new();
    meta.insert("outputBytes".into(), json!(captured.total));
    meta.insert("durationMs".into(), json!(out.duration.as_millis() as u64));
    if let Some(spill) = &captured.spill {
        meta.insert("outputFile".into(), json!(spill.display().to_string()));
    }
    match out.end {
        RunEnd::TimedOut => {
            return Err(ToolError::Timeout {
                message: format!(
                    "the command ran longer than {} ms and was killed. Output so far:\n{text}",
                    limit.as_millis()
                ),
                meta: Some(Value::Object(meta)),
            });
        }
        RunEnd::Cancelled => {
            return Err(ToolError::Aborted(
                "the command was cancelled and its processes were killed".into(),
            ));
        }
        RunEnd::Exited => {}
    }
    if captured.total == 0 {
        text.push_str("(no output)");
    }
    if let Some(code) = out.code {
        meta.insert("exitCode".into(), json!(code));
        if code != 0 {
            if !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&format!("[exit code: {code}]"));
            if let Some(mode) = sandbox
                && refused_access(&text)
            {
                meta.insert("sandboxDenied".into(), json!(true));
                text.push_str(&format!(
                    "\n[sandbox: file access denied under {mode} mode]"
                ));
            }
        }
    } else if let Some(sig) = out.signal {
        meta.insert("signal".into(), json!(sig));
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&format!("[killed by signal {sig}]"));
    }
    Ok(ToolOutput::text(text).with_value(Value::Object(meta)))
}

/// Whether a failed command's output says the system refused a file access (what the sandbox's
/// confinement makes writes outside the workspace fail with).
pub(super) fn refused_access(output: &str) -> bool {
    [
        "Permission denied",
        "Read-only file system",
        "Operation not permitted",
    ]
    .iter()
    .any(|m| output.contains(m))
}
