//! `bash {command, description?, timeout_ms?, workdir?}`: runs `bash -c command` through the
//! [`crate::subprocess`] service (own process group, scrubbed environment, tail-capped merged
//! output with the full stream spilled). A non-zero exit is a normal result ending in
//! `[exit code: N]`; running past the timeout is `TOOL_TIMEOUT` with the output's tail.

use super::parse;
use crate::error::ToolError;
use crate::subprocess::{CommandSpec, OutputMode, RunEnd};
use crate::tool::{ExecMode, Tool, ToolContext, ToolEffect, ToolOutput};
use crate::workspace::Access;
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
            default_timeout: Duration::from_secs(120),
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
    timeout_ms: Option<u64>,
    workdir: Option<String>,
}

#[async_trait]
impl Tool for BashTool {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "bash".into(),
            description: format!(
                "Run a command with `bash -c` and return its combined stdout and stderr; a \
                 non-zero exit adds `[exit code: N]`. Output over {} bytes keeps the end and \
                 saves the rest to a file. Secret-looking environment variables are removed. \
                 Prefer read/write/edit/glob/grep over cat/sed/find/grep.",
                self.cfg.output_cap
            ),
            parameters: json!({"type":"object","properties":{
                "command":{"type":"string"},
                "description":{"type":"string","description":"What it does, in 5-10 words."},
                "timeout_ms":{"type":"integer","minimum":1,"maximum":self.cfg.max_timeout.as_millis() as u64,
                    "description":format!("Default {}.", self.cfg.default_timeout.as_millis())},
                "workdir":{"type":"string","description":"Directory to run in (default: working directory)."}
            },"required":["command"]}),
        }
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
        let limit = a
            .timeout_ms
            .map_or(self.cfg.default_timeout, Duration::from_millis)
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
            .label("bash");
        let out = ctx
            .subprocess
            .run(spec, &ctx.cancel)
            .await
            .map_err(|e| ToolError::Failed(format!("could not run the command: {e}")))?;
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
}
