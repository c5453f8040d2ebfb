//! The seam between the UI and the session it shows: everything [`App`](super::App) does with
//! its session goes through a [`SessionDriver`]: [`LocalDriver`], an agent in this process, or
//! `keel attach`'s remote one (`remote.rs`), a client of `keel serve`'s HTTP API
//! (docs/serve.md). Each method says which route the remote driver uses.
//!
//! What the session says comes on the UI's [`Msg`] channel whatever the driver: the committed
//! events ([`Msg::Agent`]), approvals ([`Msg::Ask`]) and questions ([`Msg::Question`]). The local
//! driver's agent hooks send them; a remote driver feeds them from the session's event stream
//! (`GET /api/v1/sessions/{id}/events`, with `Last-Event-ID` on reconnect): each log event into
//! a local mirror [`Session`] and then as [`Msg::Agent`], each named `request` message as a
//! [`Msg::Ask`] or [`Msg::Question`] whose reply it posts to `POST …/approvals/{requestId}`
//! (`allow`, `allow_always` for an approval the UI allows for the session, `deny` with the note)
//! or `POST …/questions/{requestId}`; a `resolved` message for a request answered elsewhere
//! closes its modal.

use super::images::{self, ImagesError};
use super::{Msg, Target, UiApprover};
use crate::slash::Slash;
use futures::future::BoxFuture;
use keel_agent::compaction::{CompactionError, CompactionReason, compact_now};
use keel_agent::plugin::{CommandChoice, CommandError};
use keel_agent::{Agent, AgentError, InboxMode, allow_key};
use keel_host::{AgentSource, BuildOptions, SessionRef, SessionSpec, SourceError};
use keel_protocol::sync::Locked;
use keel_protocol::{SessionEvent, ToolCallBlock};
use keel_session::{Session, StoreError};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::Sender;

/// Why the session did not do what the UI asked (the text is what the transcript shows).
#[derive(Debug, thiserror::Error)]
pub(super) enum DriverError {
    /// The agent refused or failed.
    #[error(transparent)]
    Agent(#[from] AgentError),
    /// A message's `@image` could not be sent.
    #[error(transparent)]
    Images(#[from] ImagesError),
    /// A plugin command failed.
    #[error(transparent)]
    Command(#[from] CommandError),
    /// The session has no such command.
    #[error("/{0} is not available here")]
    Unavailable(String),
    /// An agent could not be built (another session, or this one again).
    #[error(transparent)]
    Source(#[from] SourceError),
    /// The session's log could not be let go of.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Compaction failed.
    #[error(transparent)]
    Compaction(#[from] CompactionError),
    /// The `keel serve` of a remote session refused or could not be reached.
    #[error("{0}")]
    Remote(String),
}

/// What a slash command of the session did ([`SessionDriver::command`]).
pub(super) enum CommandRun {
    /// It acted at once: what the person is told.
    Said(String),
    /// It runs in the background; resolves to what it gives.
    Later(BoxFuture<'static, Result<CommandDone, DriverError>>),
}

/// What a background slash command gave.
pub(super) enum CommandDone {
    /// What the person is told (an action that took a while).
    Said(String),
    /// The prompt to send as a message.
    Prompt(String),
}

/// Everything the UI does with its session. `'s`: what the driver borrows from the front end.
///
/// A remote driver: `{id}` below is the session's id, every route under `/api/v1/sessions/{id}`
/// unless it says otherwise.
pub(super) trait SessionDriver<'s> {
    /// Another session through the same means (`/new`, `/resume`, a fork): `target.resume` the
    /// session to continue, `None` for a new one. The returned driver's events and requests come
    /// on the same channel. Remote: `POST /api/v1/sessions {"cwd", "model"}` for a new session
    /// (then its event stream), the stored session's id otherwise (a message resumes it).
    fn open(&self, target: &Target) -> Result<Box<dyn SessionDriver<'s> + 's>, DriverError>;

    /// The session's id. Remote: the `{id}` it was opened on.
    fn session_id(&self) -> String;
    /// The session's log file (shown by `/status`; what a rebuild or a fork names). Remote:
    /// the server's path for it (a `SessionRef::Id` would do where the UI names the session).
    fn session_file(&self) -> PathBuf;
    /// The session's workspace. Remote: the mirror's session header (`cwd`), or the session's
    /// listing (`GET /api/v1/sessions`).
    fn cwd(&self) -> PathBuf;
    /// The sandbox mode the session's agent enforces (`workspace-write`, …). Remote:
    /// `GET /api/v1/sessions/{id}`'s `sandbox`, else the last `sandbox/mode` event of the
    /// mirror.
    fn sandbox(&self) -> String;
    /// The approval policy the session's agent applies. Remote: `GET /api/v1/sessions/{id}`'s
    /// `approval`, else the last `approval/policy` event of the mirror.
    fn approval(&self) -> String;
    /// Where the approval policy came from (`--approval deny`, `approval = "deny" in FILE`,
    /// keel's default); `None` when not known here (remote).
    fn approval_source(&self) -> Option<String> {
        None
    }
    /// The model the session's agent runs on, as configured (or chosen by `/model`), before
    /// any request names it; empty when unknown. Remote: `GET /api/v1/sessions/{id}`'s
    /// `model`.
    fn model(&self) -> String {
        String::new()
    }
    /// The context window of the agent's model, in tokens, when known. Remote: unknown.
    fn context_window(&self) -> Option<u64> {
        None
    }
    /// The names of the tools the agent offers (an MCP server's are `mcp__SERVER__TOOL`).
    /// Remote: none known.
    fn tool_names(&self) -> Vec<String> {
        Vec::new()
    }
    /// Read the session's log (the history a resumed session shows). Remote: the mirror built
    /// from the event stream.
    fn with_session(&self, read: &mut dyn FnMut(&Session));
    /// The turns started in the session ([`SessionDriver::with_session`]).
    fn turns(&self) -> u64 {
        let mut turns = 0;
        self.with_session(&mut |s| turns = s.turn_count());
        turns
    }
    /// Whether every event of the session, its history included, comes on the UI's channel
    /// ([`Msg::Agent`]): what the UI showed from [`SessionDriver::with_session`] it does not
    /// show again when its message comes. Remote: true (the event stream replays it).
    fn replays_history(&self) -> bool {
        false
    }
    /// The session's slash commands (custom commands and plugins' commands). Remote:
    /// `GET …/commands`.
    fn slash(&self) -> Slash;

    /// Send `text` as a message (its `@image` words attach the images): `Followup` runs it as
    /// a turn after what is queued, `Steer` puts it into the running turn. Remote:
    /// `POST …/messages {"text", "delivery": "queue" | "steer", "images": [DATA_URL…]}` (the
    /// images read here, sent as `data:` URLs; the server stores them).
    fn send(&self, mode: InboxMode, text: &str) -> Result<(), DriverError>;
    /// Drive the session until it is idle (no turn running or queued); `Err`: why it stopped.
    /// Remote: the server drives its turns; this waits on the mirror for the `turn/end` after
    /// which nothing is queued (and says an `error` event's text).
    fn run_until_idle(&self) -> BoxFuture<'static, Result<(), DriverError>>;
    /// Whether a turn waits to be run (queued by a plugin: a schedule fired). Remote: whether
    /// a turn runs on the server (a `turn/start` without its end: one running when the UI
    /// attached, or another client's), so that the UI shows it running and Ctrl-C cancels it;
    /// the server runs it, the UI only waits for its end.
    fn has_pending_turn(&self) -> bool;
    /// Cancel the running turn (Ctrl-C). Remote: `POST …/cancel`.
    fn cancel(&self);
    /// Stop the session's background jobs (the UI leaves, or switches session). Remote:
    /// nothing (detaching leaves the session and its jobs running; `GET …/jobs` and
    /// `POST …/jobs/{jobId}/kill` stop them on request).
    fn kill_jobs(&self);

    /// Approve calls like `call` (the same `bash` command, the same tool) without asking for
    /// the rest of the session: the person chose "allow for the session" for it, and its own
    /// approval is answered `Approved`. Remote: that answer goes as
    /// `POST …/approvals/{requestId} {"decision": "allow_always"}` (the server remembers it).
    fn allow_for_session(&self, call: &ToolCallBlock);

    /// Plan mode on or off (between turns). Remote: `POST …/mode {"mode": "plan"}`, and to
    /// leave it the mode the session had before (`default`, `read-only` or `auto`, from the
    /// mirror's `sandbox/mode` and `approval/policy` events: `…/mode` sets all three).
    fn set_plan_mode(&self, on: bool) -> Result<(), DriverError>;
    /// Let go of the session's log, so that [`SessionDriver::rebuild`] can open it again (one
    /// writer per session); the jobs stop. Remote: nothing (the server rebuilds).
    fn release(&self) -> Result<(), DriverError>;
    /// The same session on a new agent, after [`SessionDriver::release`]: on `model` (`None`:
    /// the configured one, or the model the session kept), with what the workspace's trust now
    /// allows. On `Err` nothing changed (the log stays let go of). Remote:
    /// `POST …/model {"model"}` (a trust decision goes through [`SessionDriver::trust`]).
    fn rebuild(&mut self, model: Option<String>) -> Result<(), DriverError>;
    /// Keep `model` in the session (a later resume runs it). Remote: nothing (`POST …/model`
    /// logged it).
    fn keep_model(&self, model: &str) -> Result<(), DriverError>;
    /// Compact the conversation now. Remote: `POST …/commands/compact`.
    fn compact(&self) -> BoxFuture<'static, Result<(), DriverError>>;
    /// A new session seeded with this one's log up to just before event `at` (the start of
    /// the turn holding it; after the last completed turn when `None`), stored: the file to
    /// [`SessionDriver::open`]. Remote: `POST …/fork {"at"}` → `201 {"id"}` (a remote
    /// [`Target`] names the session by that id).
    fn fork(&self, at: Option<u64>) -> Result<PathBuf, DriverError>;
    /// Run the session's command `/name args` (a plugin's: `/goal`, `/rewind N --files`, …).
    /// Remote: `POST …/commands/{name} {"args"}` as [`CommandRun::Later`]: `200 {"message"}`
    /// is [`CommandDone::Said`]; `202 {"prompt"}` (the server queued it as a turn already) is
    /// said too, not sent again; a `409 command_refused` is the error. (`/rewind` may take
    /// `POST …/rewind {"to", "scope"}` instead.)
    fn command(&self, name: &str, args: &str) -> Result<CommandRun, DriverError>;
    /// The values `/name` offers for its argument now (`/rewind`: the session's turns, newest
    /// first); `None` when the session has no such command. Remote:
    /// `GET …/commands/{name}/choices`.
    fn choices(&self, name: &str) -> Option<Vec<CommandChoice>>;
    /// `/trust` (`level` `None`: show the decision; `Some`: record it) decided where the
    /// session runs: `None` when the UI's own front end decides (its [`AgentSource`]), else
    /// what to tell the person. Remote: the server's trust for the session's workspace,
    /// `GET /api/v1/trust?cwd=DIR`; to record, `POST /api/v1/trust {"cwd", "level"}` and, when
    /// the decision changed, `POST …/close`: the session's next message resumes it on an agent
    /// built with the decision (the server keeps a hosted session's agent as it was built).
    fn trust(
        &self,
        _level: Option<keel_host::ProjectTrust>,
    ) -> Option<Result<String, DriverError>> {
        None
    }
    /// What is left alone in the session's workspace until it is trusted, said once when the
    /// UI opens: `None` when the UI's own front end decides (its [`AgentSource`]), else the
    /// server's notice (`Some(None)`: nothing to say). Remote: `GET /api/v1/trust?cwd=DIR`'s
    /// `notice`.
    fn trust_notice(&self) -> Option<Option<String>> {
        None
    }
    /// Why [`SessionDriver::choices`] offers none for a command the UI lists by itself
    /// (`/rewind`): `None` when the session has no such command (its plugin is off).
    fn no_choices(&self) -> Option<String> {
        None
    }
}

/// The session's agent in this process, built by the front end's [`AgentSource`].
pub(super) struct LocalDriver<'s> {
    agent: Agent,
    source: &'s dyn AgentSource,
    tx: Sender<Msg>,
    approver: Arc<UiApprover>,
    runtime: tokio::runtime::Handle,
}

impl<'s> LocalDriver<'s> {
    /// An agent on `target` whose committed events feed the UI and whose approvals the UI
    /// answers. Built in the runtime's context, as `keel acp` builds: a plugin's timer (a
    /// schedule resumed with the session) starts on the runtime the agent runs on.
    pub(super) fn open(
        source: &'s dyn AgentSource,
        target: &Target,
        tx: &Sender<Msg>,
        approver: &Arc<UiApprover>,
        runtime: tokio::runtime::Handle,
    ) -> Result<LocalDriver<'s>, SourceError> {
        let agent = {
            let _rt = runtime.enter();
            build(source, target, tx, approver)?
        };
        Ok(LocalDriver {
            agent,
            source,
            tx: tx.clone(),
            approver: approver.clone(),
            runtime,
        })
    }
}

/// The slash commands for `agent`: custom commands of its workspace and keel home, and its
/// plugins' commands.
fn slash_of(agent: &Agent) -> Slash {
    let externals: Vec<keel_agent::plugin::PluginCommand> =
        agent.commands().iter().flat_map(|c| c.commands()).collect();
    let config = agent.config();
    Slash::load(&config.cwd, config.keel_home.as_deref(), &externals)
}

/// Build an agent whose committed events feed the UI and whose approvals the UI answers.
fn build(
    source: &dyn AgentSource,
    target: &Target,
    tx: &Sender<Msg>,
    approver: &Arc<UiApprover>,
) -> Result<Agent, SourceError> {
    let mut options = BuildOptions::default();
    let feed = tx.clone();
    options
        .agent_hooks
        .session_event
        .push(Arc::new(move |ev: &SessionEvent| {
            let _ = feed.send(Msg::Agent(Box::new(ev.clone())));
        }));
    let wake = tx.clone();
    options.agent_hooks.inbox_inserted.push(Arc::new(
        move |m: &keel_agent::seams::InboxInserted| {
            if m.mode == InboxMode::Followup && !m.message.source.is_user() {
                let _ = wake.send(Msg::Woken);
            }
        },
    ));
    options.approver = Some(approver.clone());
    options.asker = Some(approver.clone());
    let spec = SessionSpec {
        cwd: Some(source.workspace().to_path_buf()),
        model: target.model.clone(),
        ..SessionSpec::default()
    };
    match &target.resume {
        Some(path) => source.resume(SessionRef::Path(path), &spec, options),
        None => source.create(&spec, options),
    }
}

impl<'s> SessionDriver<'s> for LocalDriver<'s> {
    fn open(&self, target: &Target) -> Result<Box<dyn SessionDriver<'s> + 's>, DriverError> {
        let driver = LocalDriver::open(
            self.source,
            target,
            &self.tx,
            &self.approver,
            self.runtime.clone(),
        )?;
        Ok(Box::new(driver))
    }

    fn session_id(&self) -> String {
        self.agent.session_id().to_string()
    }

    fn session_file(&self) -> PathBuf {
        self.agent.log().writer().path().to_path_buf()
    }

    fn cwd(&self) -> PathBuf {
        self.agent.config().cwd.clone()
    }

    fn sandbox(&self) -> String {
        self.agent.sandbox().as_str().to_owned()
    }

    fn approval(&self) -> String {
        self.agent.approval().as_str().to_owned()
    }

    fn approval_source(&self) -> Option<String> {
        Some(self.agent.approval_source())
    }

    fn model(&self) -> String {
        self.agent.config().model.clone()
    }

    fn context_window(&self) -> Option<u64> {
        Some(self.agent.config().model_info.context_window)
    }

    fn tool_names(&self) -> Vec<String> {
        let registry = self.agent.pipeline().registry();
        registry.names().map(str::to_owned).collect()
    }

    fn with_session(&self, read: &mut dyn FnMut(&Session)) {
        read(self.agent.log().session());
    }

    fn slash(&self) -> Slash {
        slash_of(&self.agent)
    }

    fn send(&self, mode: InboxMode, text: &str) -> Result<(), DriverError> {
        let message = match images::with_images(&self.agent, text) {
            None => keel_agent::user_message(text),
            Some(message) => message?,
        };
        self.agent.enqueue(mode, message)?;
        Ok(())
    }

    fn run_until_idle(&self) -> BoxFuture<'static, Result<(), DriverError>> {
        let agent = self.agent.clone();
        Box::pin(async move {
            agent.run_until_idle().await?;
            Ok(())
        })
    }

    fn has_pending_turn(&self) -> bool {
        self.agent.has_pending_turn()
    }

    fn cancel(&self) {
        self.agent.cancel_turn();
    }

    fn kill_jobs(&self) {
        self.agent.kill_jobs();
    }

    fn allow_for_session(&self, call: &ToolCallBlock) {
        self.approver.allowed.locked().insert(allow_key(call));
    }

    fn set_plan_mode(&self, on: bool) -> Result<(), DriverError> {
        Ok(self.agent.set_plan_mode(on)?)
    }

    fn release(&self) -> Result<(), DriverError> {
        self.agent.kill_jobs();
        Ok(self.agent.log().release()?)
    }

    fn rebuild(&mut self, model: Option<String>) -> Result<(), DriverError> {
        let target = Target {
            resume: Some(self.session_file()),
            model,
        };
        let agent = {
            let _rt = self.runtime.enter();
            build(self.source, &target, &self.tx, &self.approver)?
        };
        self.agent = agent;
        Ok(())
    }

    fn keep_model(&self, model: &str) -> Result<(), DriverError> {
        self.agent.push_ignorable(
            keel_agent::session_modes::MODEL_EVENT,
            serde_json::json!({ "model": model }),
        )?;
        Ok(())
    }

    fn compact(&self) -> BoxFuture<'static, Result<(), DriverError>> {
        let agent = self.agent.clone();
        Box::pin(async move {
            compact_now(&agent, CompactionReason::Manual).await?;
            Ok(())
        })
    }

    fn fork(&self, at: Option<u64>) -> Result<PathBuf, DriverError> {
        let file = self.session_file();
        let (_, forked) = self
            .source
            .fork(SessionRef::Path(&file), self.source.workspace(), at)?;
        Ok(forked)
    }

    fn command(&self, name: &str, args: &str) -> Result<CommandRun, DriverError> {
        let Some(source) = self.agent.command_source(name).cloned() else {
            return Err(DriverError::Unavailable(name.to_owned()));
        };
        if let Some(said) = source.act(name, args) {
            return Ok(CommandRun::Said(said?));
        }
        let (name, args) = (name.to_owned(), args.to_owned());
        Ok(CommandRun::Later(Box::pin(async move {
            // An action that takes a while (a delegated review) tells the person what came of
            // it; any other command gives the prompt it sends.
            Ok(match source.act_async(&name, &args) {
                Some(done) => CommandDone::Said(done.await?),
                None => CommandDone::Prompt(source.expand(&name, &args).await?),
            })
        })))
    }

    fn choices(&self, name: &str) -> Option<Vec<CommandChoice>> {
        let source = self.agent.command_source(name)?;
        Some(source.choices(name))
    }
}
