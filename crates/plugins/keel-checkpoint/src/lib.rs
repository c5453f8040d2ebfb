//! Workspace checkpoints: before each step that may change files, keel records the workspace
//! in a shadow git repository under `$KEEL_HOME` (never the user's `.git`; see [`shadow`]),
//! and logs it as a session event, so that `keel rewind` can put the files back as they were
//! before any turn — what `bash` and its children wrote included.
//!
//! ```text
//! tools/execute (a call that may change files: write, edit, bash, run_code, an MCP tool not
//!   marked read-only, subagent, workflow, ralph, delegate) ─► first such call of its step?
//!   ─► snapshot (walk; git only when something changed) ─► checkpoint/created {snapshot,
//!      turn, step, callId, at: "step", changed, notRestorable}
//! agent/turn-stopping ─► snapshot ─► checkpoint/created {at: "turn-end"} (what the agent left:
//!   later differences are someone else's, and a rewind keeps them unless told otherwise)
//! ```
//!
//! A checkpoint that fails (no `git`, a full disk) never stops the call: it is logged once as
//! `checkpoint/failed {reason}` and the session goes on without checkpoints.
#![deny(missing_docs)]

mod objects;
pub mod rewind;
pub mod shadow;

use async_trait::async_trait;
use futures::FutureExt;
use keel_agent::modes::SerialHook;
use keel_agent::plugin::{
    CommandChoice, CommandError, CommandSource, InstallContext, Plugin, PluginCommand, PluginError,
    PluginId, plugin_config,
};
use keel_agent::seams::{StopDecision, TurnStopping};
use keel_agent::{AgentHandle, AgentSlot};
use keel_protocol::EventBody;
use keel_protocol::sync::Locked;
use keel_tools::{ExecuteMiddleware, ExecuteNext, HookContext, ToolEffect, ToolError, ToolOutput};
use serde::Deserialize;
use serde_json::{Value, json};
pub use shadow::{Caps, CheckpointError, Restored, Shadow, Snapshot};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// The plugin's id (`[[plugins]] id = "checkpoints"`).
pub const ID: PluginId = keel_agent::plugin_id!("checkpoints");
/// A checkpoint was taken.
pub const CREATED_EVENT: &str = "checkpoint/created";
/// A rewind put files back.
pub const RESTORED_EVENT: &str = "checkpoint/restored";
/// Checkpoints stopped working in this session.
pub const FAILED_EVENT: &str = "checkpoint/failed";

/// Most changed paths a `checkpoint/created` lists (`changed` counts them all).
pub const PATHS_LOGGED: usize = 50;

/// Tools that change files through others (children, scripts) though their own effect is
/// read-only.
const DELEGATING: [&str; 5] = ["subagent", "subagent_fork", "workflow", "ralph", "delegate"];

/// Settings (`[[plugins]] id = "checkpoints"`, `[plugins.config]`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CheckpointConfig {
    /// Largest file stored; bigger ones are listed as not restorable.
    pub max_file_bytes: u64,
    /// Most bytes of changed files one checkpoint stores.
    pub max_checkpoint_bytes: u64,
    /// Most files a workspace may hold for checkpoints to be taken.
    pub max_files: usize,
}

impl Default for CheckpointConfig {
    fn default() -> Self {
        let caps = Caps::default();
        CheckpointConfig {
            max_file_bytes: caps.max_file_bytes,
            max_checkpoint_bytes: caps.max_checkpoint_bytes,
            max_files: caps.max_files,
        }
    }
}

impl CheckpointConfig {
    /// The caps these settings give.
    pub fn caps(&self) -> Caps {
        Caps {
            max_file_bytes: self.max_file_bytes,
            max_checkpoint_bytes: self.max_checkpoint_bytes,
            max_files: self.max_files,
        }
    }
}

/// The shadow repository of the workspace `cwd` under `keel_home`.
pub fn shadow_dir(keel_home: &Path, cwd: &Path) -> PathBuf {
    keel_home
        .join("checkpoints")
        .join(keel_session::Store::project_key(cwd))
        .join("git")
}

/// How many snapshots the process takes at once (see [`Shared::checkpoint`]).
static SNAPSHOTS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(4);

/// One agent's checkpointer.
struct Shared {
    slot: AgentSlot,
    git_dir: PathBuf,
    cwd: PathBuf,
    caps: Caps,
    shadow: Mutex<Option<Shadow>>,
    /// The step last checkpointed: `(turn, step)`.
    last_step: Mutex<Option<(u32, u32)>>,
    off: AtomicBool,
}

impl Shared {
    /// Take a checkpoint and log it; a failure turns checkpoints off for the session.
    async fn checkpoint(self: &Arc<Self>, at: &'static str, call_id: Option<String>) {
        if self.off.load(Ordering::Relaxed) {
            return;
        }
        let Some(agent) = self.slot.get() else {
            return;
        };
        let (turn, step) = current_step(&agent);
        if at == "step" {
            let mut last = self.last_step.locked();
            if *last == Some((turn, step)) {
                return;
            }
            *last = Some((turn, step));
        }
        let me = self.clone();
        let message = format!("keel {} turn {turn} step {step} ({at})", agent.session_id());
        let publish = at == "turn-end";
        // A few snapshots at a time in the process: each object written holds a ~300 KiB zlib
        // compressor while it is written, and a server's sessions reach their steps together
        // (a hundred at once would hold 30 MiB); more at a time would not go faster on the
        // machine's cores either. Closed never, so the permit is always granted.
        let _permit = SNAPSHOTS.acquire().await;
        let taken = tokio::task::spawn_blocking(move || {
            me.with_shadow(|shadow| {
                let snapshot = shadow.snapshot(&message)?;
                if publish {
                    shadow.publish()?;
                }
                Ok(snapshot)
            })
            .map_err(|e: CheckpointError| e.to_string())
        })
        .await
        .unwrap_or_else(|e| Err(format!("the checkpoint task failed: {e}")));
        match taken {
            Ok(s) => {
                let _ = agent.push_ignorable(
                    CREATED_EVENT,
                    json!({
                        "snapshot": s.commit, "turn": turn, "step": step, "at": at,
                        "callId": call_id, "changed": s.changed,
                        "paths": &s.paths[..s.paths.len().min(PATHS_LOGGED)],
                        "notRestorable": s.not_restorable,
                    }),
                );
            }
            Err(reason) => {
                self.off.store(true, Ordering::Relaxed);
                let _ = agent.push_ignorable(FAILED_EVENT, json!({ "reason": reason }));
            }
        }
    }

    /// Run `work` on the workspace's shadow repository, opened (or created) on first use.
    fn with_shadow<R, E: From<CheckpointError>>(
        &self,
        work: impl FnOnce(&mut Shadow) -> Result<R, E>,
    ) -> Result<R, E> {
        let mut guard = self.shadow.locked();
        let shadow = match guard.as_mut() {
            Some(shadow) => shadow,
            None => guard.insert(Shadow::open(&self.git_dir, &self.cwd, self.caps)?),
        };
        work(shadow)
    }
}

/// The turn and step the agent is in (from its last `step/start`).
fn current_step(agent: &AgentHandle) -> (u32, u32) {
    agent.with_session(|s| {
        let mut seq = s.len();
        while seq > 0 {
            seq -= 1;
            if let Some(ev) = s.event(keel_protocol::Seq(seq))
                && let EventBody::StepStart(r) = &ev.body
            {
                return (r.turn.0, r.step.0);
            }
        }
        (0, 0)
    })
}

/// The `tools/execute` middleware: a checkpoint before the first call of a step that may
/// change files.
struct BeforeStep(Arc<Shared>);

#[async_trait]
impl ExecuteMiddleware for BeforeStep {
    async fn around(
        &self,
        ctx: &HookContext<'_>,
        args: Value,
        next: ExecuteNext<'_>,
    ) -> Result<ToolOutput, ToolError> {
        let changes_files = ctx.tool.is_some_and(|t| t.effect != ToolEffect::ReadOnly)
            || DELEGATING.contains(&ctx.call.name.as_str());
        if changes_files && ctx.parent.is_none() {
            self.0.checkpoint("step", Some(ctx.call.id.clone())).await;
        }
        next.run(args).await
    }
}

fn at_turn_end(shared: Arc<Shared>) -> SerialHook<TurnStopping, StopDecision> {
    Arc::new(move |_t: &TurnStopping| {
        let shared = shared.clone();
        async move {
            shared.checkpoint("turn-end", None).await;
            StopDecision::Stop
        }
        .boxed()
    })
}

/// `/rewind N [--files|--conversation] [--force]` and `/rewind undo` in the terminal UI and
/// over ACP: the live session's files and conversation back to before turn N (see
/// [`rewind`]), logged as `checkpoint/restored` and `surface/rewind`.
struct RewindCommand(Arc<Shared>);

const REWIND_USAGE: &str = "usage: /rewind N [--files|--conversation] [--force] (back to just before turn N) | /rewind undo";

/// Why `/rewind` did nothing, or stopped: what the person is told.
#[derive(Debug, thiserror::Error)]
enum RewindCommandError {
    /// The command is not bound to a running agent.
    #[error("no running agent")]
    NoAgent,
    /// A turn is running.
    #[error("a turn is running: rewind when it has ended")]
    Busy,
    /// A `--option` it does not know.
    #[error("/rewind: unknown option {option}; {}", REWIND_USAGE)]
    UnknownOption {
        /// The option as typed.
        option: String,
    },
    /// No turn (or `undo`) given, or one it cannot read.
    #[error("{}", REWIND_USAGE)]
    Usage,
    /// The rewind cannot be planned (no such turn, no checkpoints, …).
    #[error("/rewind {spec}: {source}")]
    Refused {
        /// The point as typed.
        spec: String,
        /// Why.
        source: rewind::RewindError,
    },
    /// The files' restore stopped part-way (what it did is logged, so undo returns them).
    #[error(
        "/rewind {spec} stopped part-way: {reason}; /rewind undo returns the files to what they were before it"
    )]
    Incomplete {
        /// The point as typed.
        spec: String,
        /// Why it stopped.
        reason: String,
    },
    /// The files' restore failed before changing anything.
    #[error("/rewind {spec}: {source}; nothing was changed")]
    NotApplied {
        /// The point as typed.
        spec: String,
        /// Why.
        source: rewind::RewindError,
    },
    /// The files were restored, but `checkpoint/restored` could not be logged.
    #[error("the files were rewound but the log could not record it: {0}")]
    FilesUnrecorded(keel_agent::AgentError),
    /// `surface/rewind` could not be logged.
    #[error("the conversation could not be rewound: {0}")]
    ConversationNotRewound(keel_agent::AgentError),
}

impl RewindCommand {
    fn run(&self, args: &str) -> Result<String, RewindCommandError> {
        use rewind::{RewindError, Scope};
        let agent = self.0.slot.get().ok_or(RewindCommandError::NoAgent)?;
        if agent.is_busy() {
            return Err(RewindCommandError::Busy);
        }
        let words: Vec<&str> = args.split_whitespace().collect();
        if let Some(bad) = words
            .iter()
            .find(|w| w.starts_with("--") && !["--force", "--files", "--conversation"].contains(w))
        {
            return Err(RewindCommandError::UnknownOption {
                option: (*bad).to_owned(),
            });
        }
        let force = words.contains(&"--force");
        let asked = Scope::of_flags(
            words.contains(&"--files"),
            words.contains(&"--conversation"),
        );
        let spec = words
            .iter()
            .find(|w| !w.starts_with("--"))
            .ok_or(RewindCommandError::Usage)?;
        let point = rewind::Point::parse(spec).ok_or(RewindCommandError::Usage)?;
        let decided = agent
            .with_session(|s| rewind::Rewind::decide(s, point, asked))
            .map_err(|source| RewindCommandError::Refused {
                spec: (*spec).to_owned(),
                source,
            })?;
        let files_done = match &decided.files {
            Some(plan) => {
                let applied = self.0.with_shadow(|shadow| {
                    rewind::apply(shadow, plan, force, agent.session_id().as_str())
                });
                let record = match applied {
                    Ok(record) => record,
                    Err(RewindError::Incomplete { reason, record }) => {
                        let _ = agent.push_ignorable(RESTORED_EVENT, record);
                        return Err(RewindCommandError::Incomplete {
                            spec: (*spec).to_owned(),
                            reason,
                        });
                    }
                    Err(source) => {
                        return Err(RewindCommandError::NotApplied {
                            spec: (*spec).to_owned(),
                            source,
                        });
                    }
                };
                agent
                    .push_ignorable(RESTORED_EVENT, record.clone())
                    .map_err(RewindCommandError::FilesUnrecorded)?;
                Some(rewind::describe(&record, &point.target()))
            }
            None => None,
        };
        if let Some(body) = &decided.conversation {
            agent
                .push(keel_protocol::EventBody::SurfaceRewind(Box::new(
                    body.clone(),
                )))
                .map_err(RewindCommandError::ConversationNotRewound)?;
        }
        let mut notes = decided.notes(files_done, &point.since());
        notes.push("Undo: /rewind undo".into());
        Ok(notes.join(" "))
    }
}

impl CommandSource for RewindCommand {
    fn commands(&self) -> Vec<PluginCommand> {
        vec![PluginCommand {
            name: "rewind".into(),
            description: "Return the files and the conversation to just before turn N".into(),
            argument_hint: Some("N [--files|--conversation] [--force] | undo".into()),
        }]
    }

    fn expand<'a>(
        &'a self,
        _name: &'a str,
        _args: &'a str,
    ) -> futures::future::BoxFuture<'a, Result<String, CommandError>> {
        Box::pin(async { Err(CommandError::Failed(REWIND_USAGE.into())) })
    }

    fn act(&self, _name: &str, args: &str) -> Option<Result<String, CommandError>> {
        Some(
            self.run(args)
                .map_err(|e| CommandError::Failed(Box::new(e))),
        )
    }

    /// The session's turns, newest first, each with its prompt and the files it changed.
    fn choices(&self, _name: &str) -> Vec<CommandChoice> {
        let Some(agent) = self.0.slot.get() else {
            return Vec::new();
        };
        let mut points = agent.with_session(rewind::turn_points);
        points.reverse();
        points
            .into_iter()
            .map(|p| {
                let one_line = keel_protocol::text::one_line;
                let files = match p.files.len() {
                    0 => "no file changed".to_owned(),
                    n => format!("{n} file(s): {}", one_line(&p.files.join(", "), 40)),
                };
                let prompt = if p.prompt.is_empty() {
                    "(no prompt)"
                } else {
                    &p.prompt
                };
                CommandChoice {
                    args: p.turn.to_string(),
                    label: format!("turn {} · {} · {files}", p.turn, one_line(prompt, 40)),
                    detail: if p.files.is_empty() {
                        "It changed no file.".to_owned()
                    } else {
                        format!("It changed: {}", p.files.join(", "))
                    },
                    seq: Some(p.seq),
                    text: Some(p.prompt),
                }
            })
            .collect()
    }
}

/// The `checkpoints` plugin (on by default; `enabled = false` in its row turns it off).
#[derive(Debug, Clone, Copy, Default)]
pub struct CheckpointPlugin;

impl Plugin for CheckpointPlugin {
    fn id(&self) -> PluginId {
        ID
    }
    fn description(&self) -> &'static str {
        "workspace checkpoints before each step that may change files, in a shadow git repository (keel rewind)"
    }
    fn enabled_by_default(&self) -> bool {
        true
    }
    fn install(&self, ctx: &mut InstallContext, config: Value) -> Result<(), PluginError> {
        let config: CheckpointConfig = plugin_config(ID, config)?;
        let shared = Arc::new(Shared {
            slot: AgentSlot::new(),
            git_dir: shadow_dir(&ctx.keel_home, &ctx.cwd),
            cwd: ctx.cwd.clone(),
            caps: config.caps(),
            shadow: Mutex::new(None),
            last_step: Mutex::new(None),
            off: AtomicBool::new(false),
        });
        // This agent's own calls: a child's writes happen inside its parent's step, which the
        // parent's checkpoint already covers.
        let hooks = std::mem::take(&mut ctx.agent_hooks.tools);
        ctx.agent_hooks.tools = hooks.execute(Arc::new(BeforeStep(shared.clone())));
        ctx.agent_hooks
            .turn_stopping
            .push(at_turn_end(shared.clone()));
        ctx.commands.push(Arc::new(RewindCommand(shared.clone())));
        ctx.on_agent.push(Box::new(move |agent| {
            shared.slot.bind(agent);
        }));
        Ok(())
    }
}
