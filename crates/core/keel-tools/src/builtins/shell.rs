//! `bash {command, restart?, timeoutMs?}` as one persistent shell (dsh's minimal preset,
//! [`crate::registry::Preset::Minimal`]): every call runs in the same `bash` process, so `cd`,
//! variables and functions carry over from one call to the next.
//!
//! The shell is started on the first call (in the working directory, with the sandbox's
//! confinement and the scrubbed environment, stderr merged into stdout) and lives until keel
//! exits, `restart` is asked for, or a command times out or is cancelled (its process group is
//! killed and the next call starts a fresh shell, which the result says). Each command is
//! followed by a marker line carrying `$?`, which ends the call's output. A non-zero status is
//! reported as `[exit code: N]`, a sandbox refusal as `bash`'s
//! `[sandbox: file access denied under <mode> mode]`.

use super::bash::{BashConfig, refused_access};
use super::parse;
use crate::error::ToolError;
use crate::subprocess::{CommandSpec, OutputMode, OutputSink};
use crate::tool::{ExecMode, Tool, ToolContext, ToolEffect, ToolOutput};
use crate::workspace::SandboxMode;
use async_trait::async_trait;
use keel_protocol::ToolSchema;
use keel_protocol::sync::Locked;
use serde::Deserialize;
use serde_json::{Value, json};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// The persistent `bash` of the minimal preset.
#[derive(Debug)]
pub struct ShellTool {
    cfg: BashConfig,
    shell: tokio::sync::Mutex<Option<Shell>>,
    commands: AtomicU64,
}

/// One running shell.
#[derive(Debug)]
struct Shell {
    input: tokio::sync::mpsc::UnboundedSender<Vec<u8>>,
    output: Arc<Output>,
    /// Cancelling it kills the shell's process group.
    kill: CancellationToken,
}

/// What the shell has written since the current command started.
#[derive(Debug, Default)]
struct Output {
    bytes: Mutex<Vec<u8>>,
    /// Bytes dropped from the front to keep the buffer bounded.
    dropped: AtomicU64,
    exited: AtomicBool,
    changed: Notify,
}

#[derive(Deserialize)]
struct ShellArgs {
    #[serde(default)]
    command: String,
    #[serde(default)]
    restart: bool,
    #[serde(rename = "timeoutMs")]
    timeout_ms: Option<u64>,
}

impl ShellTool {
    /// A shell tool with `bash`'s limits (timeouts, output cap).
    pub fn new(cfg: BashConfig) -> Self {
        ShellTool {
            cfg,
            shell: tokio::sync::Mutex::new(None),
            commands: AtomicU64::new(0),
        }
    }

    fn start(&self, ctx: &ToolContext<'_>) -> Shell {
        let (input, messages) = tokio::sync::mpsc::unbounded_channel();
        let output = Arc::new(Output::default());
        let cap = self.cfg.output_cap.max(1024);
        let sink = {
            let output = output.clone();
            OutputSink::new(move |chunk| {
                {
                    let mut bytes = output.bytes.locked();
                    bytes.extend_from_slice(chunk);
                    // Keep the tail: the marker that ends a command comes last.
                    if bytes.len() > 4 * cap {
                        let cut = bytes.len() - 2 * cap;
                        bytes.drain(..cut);
                        output.dropped.fetch_add(cut as u64, Ordering::Relaxed);
                    }
                }
                output.changed.notify_waiters();
            })
        };
        let shell = if Path::new("/bin/bash").exists() {
            "/bin/bash"
        } else {
            "/bin/sh"
        };
        let spec = CommandSpec::new([shell, "--noprofile", "--norc"])
            .cwd(ctx.workspace.cwd())
            .output(OutputMode::Merged)
            .stdin_stream(messages)
            .tee(sink)
            .spill(false)
            .cap(1024)
            .label("shell")
            .env("TMPDIR", ctx.workspace.temp_dir())
            .confine(ctx.workspace.confinement());
        let kill = CancellationToken::new();
        let service = ctx.subprocess.clone();
        let (done, token) = (output.clone(), kill.clone());
        tokio::spawn(async move {
            let _ = service.run(spec, &token).await;
            done.exited.store(true, Ordering::Release);
            done.changed.notify_waiters();
        });
        Shell {
            input,
            output,
            kill,
        }
    }
}

/// Kills the shell if the call ends (cancelled, dropped) before its command finished.
struct Running<'a> {
    shell: &'a Shell,
    finished: bool,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        if !self.finished {
            self.shell.kill.cancel();
        }
    }
}

#[async_trait]
impl Tool for ShellTool {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "bash".into(),
            description: "Run a command in one persistent bash shell: the working directory, \
                          variables and functions carry over between calls. Returns stdout and \
                          stderr; a non-zero status adds `[exit code: N]`."
                .into(),
            parameters: json!({"type":"object","properties":{
                "command":{"type":"string"},
                "restart":{"type":"boolean","description":"Start a fresh shell first."},
                "timeoutMs":{"type":"integer","minimum":1,"maximum":self.cfg.max_timeout.as_millis() as u64,
                    "description":format!("Default {}; past it the shell is restarted.", self.cfg.default_timeout.as_millis())}
            },"required":["command"]}),
        }
    }
    fn aliases(&self) -> &'static [(&'static str, &'static str)] {
        &[("timeout_ms", "timeoutMs")]
    }
    fn mode(&self) -> ExecMode {
        ExecMode::Exclusive
    }
    fn effect(&self) -> ToolEffect {
        ToolEffect::Executes
    }
    fn timeout(&self) -> Option<Duration> {
        Some(self.cfg.max_timeout + Duration::from_secs(30))
    }
    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let a: ShellArgs = parse(args)?;
        let mut slot = self.shell.lock().await;
        let mut notes = Vec::new();
        let alive = slot
            .as_ref()
            .is_some_and(|s| !s.kill.is_cancelled() && !s.output.exited.load(Ordering::Acquire));
        if a.restart || !alive {
            if let Some(old) = slot.take() {
                old.kill.cancel();
                notes.push(if a.restart {
                    "[shell restarted]"
                } else {
                    "[the previous shell had ended; this is a fresh one]"
                });
            }
            *slot = Some(self.start(ctx));
        }
        let Some(shell) = slot.as_ref() else {
            return Err(ToolError::Failed("the shell could not be started".into()));
        };
        if a.command.trim().is_empty() {
            let text = notes.join("\n");
            return Ok(ToolOutput::text(if text.is_empty() {
                "(no command)".to_owned()
            } else {
                text
            }));
        }
        let n = self.commands.fetch_add(1, Ordering::Relaxed);
        let marker = format!("__keel_done_{}_{n}__", std::process::id());
        shell.output.bytes.locked().clear();
        shell.output.dropped.store(0, Ordering::Relaxed);
        // The command reads no stdin (the shell's stdin is where commands arrive); braces keep
        // it in this shell, so `cd` and variables stay.
        let script = format!(
            "{{ {}\n}} < /dev/null\n__keel_status=$?; printf '\\n{marker} %d\\n' \"$__keel_status\"\n",
            a.command
        );
        let mut running = Running {
            shell,
            finished: false,
        };
        if shell.input.send(script.into_bytes()).is_err() {
            return Err(ToolError::Failed(
                "the shell has exited; call again to start a fresh one".into(),
            ));
        }
        let limit = a
            .timeout_ms
            .map_or(self.cfg.default_timeout, Duration::from_millis)
            .min(self.cfg.max_timeout);
        let started = Instant::now();
        let deadline = tokio::time::Instant::now() + limit;
        let end = format!("\n{marker} ");
        loop {
            let changed = shell.output.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let (text, status) = {
                let text = String::from_utf8_lossy(&shell.output.bytes.locked()).into_owned();
                let found = text.find(&end).and_then(|at| {
                    let rest = &text[at + end.len()..];
                    let line_end = rest.find('\n')?;
                    Some((at, rest[..line_end].trim().parse::<i32>().ok()))
                });
                match found {
                    Some((at, status)) => (text[..at].to_owned(), Some(status)),
                    None => (text, None),
                }
            };
            if let Some(status) = status {
                running.finished = true;
                let dropped = shell.output.dropped.load(Ordering::Relaxed);
                return Ok(self.render(notes, text, dropped, status, ctx, started));
            }
            if shell.output.exited.load(Ordering::Acquire) {
                running.finished = true;
                notes.push("[the shell exited; the next call starts a fresh one]");
                return Ok(self.render(notes, text, 0, None, ctx, started));
            }
            tokio::select! {
                () = &mut changed => {}
                () = tokio::time::sleep_until(deadline) => {
                    // Dropping `running` kills the shell.
                    return Err(ToolError::Timeout {
                        message: format!(
                            "the command ran longer than {} ms; the shell was killed and the \
                             next call starts a fresh one (working directory and variables \
                             are lost). Output so far:\n{}",
                            limit.as_millis(),
                            tail(&text, self.cfg.output_cap)
                        ),
                        meta: None,
                    });
                }
                () = ctx.cancel.cancelled() => {
                    return Err(ToolError::Aborted(
                        "the command was cancelled; the shell was killed".into(),
                    ));
                }
            }
        }
    }
}

impl ShellTool {
    fn render(
        &self,
        notes: Vec<&str>,
        output: String,
        dropped: u64,
        status: Option<i32>,
        ctx: &ToolContext<'_>,
        started: Instant,
    ) -> ToolOutput {
        let mut text = String::new();
        for note in notes {
            text.push_str(note);
            text.push('\n');
        }
        let total = output.len() as u64 + dropped;
        let shown = tail(&output, self.cfg.output_cap);
        if shown.len() < output.len() || dropped > 0 {
            text.push_str(&format!(
                "[output truncated: showing the last {} of {total} bytes]\n",
                shown.len()
            ));
        }
        text.push_str(shown);
        if output.is_empty() {
            text.push_str("(no output)");
        }
        let mut meta = serde_json::Map::new();
        meta.insert("outputBytes".into(), json!(total));
        meta.insert(
            "durationMs".into(),
            json!(started.elapsed().as_millis() as u64),
        );
        if let Some(code) = status {
            meta.insert("exitCode".into(), json!(code));
            if code != 0 {
                if !text.ends_with('\n') {
                    text.push('\n');
                }
                text.push_str(&format!("[exit code: {code}]"));
                let mode = ctx.workspace.sandbox();
                if mode != SandboxMode::FullAccess && refused_access(&text) {
                    meta.insert("sandboxDenied".into(), json!(true));
                    text.push_str(&format!(
                        "\n[sandbox: file access denied under {mode} mode]"
                    ));
                }
            }
        }
        ToolOutput::text(text).with_value(Value::Object(meta))
    }
}

/// The last `cap` bytes of `text`, on a character boundary.
fn tail(text: &str, cap: usize) -> &str {
    if text.len() <= cap {
        return text;
    }
    &text[text.ceil_char_boundary(text.len() - cap)..]
}
