//! The ACP connection: request handlers, the table of open sessions, turns run on blocking
//! threads (a turn's future holds the session log), their events fed to the client as
//! `session/update` notifications by an agent hook, and the shutdown when the client leaves.

use crate::approve::AcpApprover;
use crate::ask::AcpAsker;
use crate::files::ClientFiles;
use crate::map::{self, Feed, MODE_AUTO, MODE_DEFAULT, MODE_PLAN, MODE_READ_ONLY, Mapper, Modes};
use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, CancelNotification, CloseSessionRequest, CloseSessionResponse, ErrorCode,
    FileSystemCapabilities, ForkSessionRequest, ForkSessionResponse, Implementation,
    InitializeRequest, InitializeResponse, ListSessionsRequest, ListSessionsResponse,
    LoadSessionRequest, LoadSessionResponse, McpCapabilities, McpServer, NewSessionRequest,
    NewSessionResponse, PromptCapabilities, PromptRequest, PromptResponse, ResumeSessionRequest,
    ResumeSessionResponse, SessionId, SessionMode, SessionModeState, SessionNotification,
    SessionUpdate, SetSessionConfigOptionRequest, SetSessionConfigOptionResponse,
    SetSessionModeRequest, SetSessionModeResponse, StopReason,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent as AcpAgent, Client, ConnectTo, Error};
use keel_agent::{Agent, ApprovalPolicy};
use keel_host::BuildOptions;
use keel_host::commands::CommandSet;
use keel_host::{AgentSource, SessionRef, SessionSpec, SourceError};
use keel_protocol::sync::Locked;
use keel_protocol::{SessionEvent, TurnEndReason};
use keel_tools::SandboxMode;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::sync::Notify;

/// How often a cancelled turn is cancelled again until it stops (a cancel can land between
/// two turns of a follow-up chain).
mod config;
mod params;
mod sessions;
mod slash;

use params::{Images, Prompt, mcp_servers, prompt_content, working_dir};
use slash::{Slash, advertise_commands, compact, slash_command};

const RECANCEL_EVERY: Duration = Duration::from_millis(200);
/// How long running turns get to stop after the client left.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Serve ACP on stdin/stdout until the client closes stdin. Must run inside a multi-threaded
/// tokio runtime.
///
/// Lines are read and written by a thread each: the writer writes every line queued and
/// flushes once the queue is empty, instead of a flush (a thread hand-off) per message, which
/// dominated the cost of a streamed update.
pub async fn serve_stdio<S: AgentSource + 'static>(source: S) -> Result<(), Error> {
    let (out_tx, out_rx) = std::sync::mpsc::channel::<String>();
    let writer = std::thread::Builder::new()
        .name("keel-acp-stdout".into())
        .spawn(move || write_lines(&out_rx))
        .map_err(|e| {
            err(
                ErrorCode::InternalError,
                format!("keel: cannot start the stdout writer: {e}"),
            )
        })?;
    let (in_tx, in_rx) = tokio::sync::mpsc::unbounded_channel::<std::io::Result<String>>();
    let refusals = out_tx.clone();
    std::thread::Builder::new()
        .name("keel-acp-stdin".into())
        .spawn(move || {
            use std::io::BufRead;
            // Until an `initialize` with a usable version arrives, one with a version of the
            // wrong type is answered here, naming what was sent (the SDK's answer does not).
            let mut initialized = false;
            for line in std::io::stdin().lock().lines() {
                if let Ok(text) = &line
                    && !initialized
                {
                    match params::check_initialize(text) {
                        params::Initialize::Other => {}
                        params::Initialize::Valid => initialized = true,
                        params::Initialize::Refused(answer) => {
                            let _ = refusals.send(answer);
                            continue;
                        }
                    }
                }
                let stop = line.is_err();
                if in_tx.send(line).is_err() || stop {
                    break;
                }
            }
        })
        .map_err(|e| {
            err(
                ErrorCode::InternalError,
                format!("keel: cannot start the stdin reader: {e}"),
            )
        })?;
    let outgoing = futures::sink::unfold(out_tx, |tx, line: String| async move {
        tx.send(line)
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "stdout is closed"))?;
        Ok::<_, std::io::Error>(tx)
    });
    let incoming = futures::stream::unfold(in_rx, |mut rx| async move {
        rx.recv().await.map(|line| (line, rx))
    });
    let served = serve(
        source,
        agent_client_protocol::Lines::new(Box::pin(outgoing), Box::pin(incoming)),
    )
    .await;
    // The connection (and with it the sending side) is gone: the writer drains and ends.
    let _ = tokio::task::spawn_blocking(move || writer.join()).await;
    served
}

/// Write each line to stdout, flushing whenever nothing more is queued.
fn write_lines(lines: &std::sync::mpsc::Receiver<String>) {
    use std::io::Write;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, stdout.lock());
    while let Ok(line) = lines.recv() {
        let mut next = Some(line);
        while let Some(line) = next {
            if out.write_all(line.as_bytes()).is_err() || out.write_all(b"\n").is_err() {
                return;
            }
            next = lines.try_recv().ok();
        }
        if out.flush().is_err() {
            return;
        }
    }
}

/// Serve ACP over `transport` until it closes; then cancel the turns still running and wait
/// for them (their logs end with a `turn/end`).
pub async fn serve<S: AgentSource + 'static>(
    source: S,
    transport: impl ConnectTo<AcpAgent>,
) -> Result<(), Error> {
    let server = Arc::new(Server {
        source: Arc::new(source),
        sessions: Mutex::new(HashMap::new()),
        turns: Mutex::new(Vec::new()),
        client_fs: Mutex::new(FileSystemCapabilities::default()),
        client_forms: AtomicBool::new(false),
        models: OnceLock::new(),
    });
    let s_init = server.clone();
    let s_new = server.clone();
    let s_load = server.clone();
    let s_prompt = server.clone();
    let s_cancel = server.clone();
    let s_mode = server.clone();
    let s_list = server.clone();
    let s_resume = server.clone();
    let s_close = server.clone();
    let s_fork = server.clone();
    let s_config = server.clone();
    let served = AcpAgent
        .v1()
        .name("keel")
        .on_receive_request(
            async move |req: InitializeRequest, responder: Responder<InitializeResponse>, _cx| {
                responder.respond(s_init.initialize(&req))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: NewSessionRequest,
                        responder: Responder<NewSessionResponse>,
                        cx: ConnectionTo<Client>| {
                answer_opened(s_new.new_session(req, cx.clone()).await, responder, cx)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: LoadSessionRequest,
                        responder: Responder<LoadSessionResponse>,
                        cx: ConnectionTo<Client>| {
                answer_opened(s_load.load_session(req, cx.clone()).await, responder, cx)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: PromptRequest, responder: Responder<PromptResponse>, _cx| {
                s_prompt.prompt(req, responder);
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: SetSessionModeRequest,
                        responder: Responder<SetSessionModeResponse>,
                        _cx| {
                responder.respond_with_result(s_mode.set_mode(&req).await)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: ListSessionsRequest,
                        responder: Responder<ListSessionsResponse>,
                        _cx| {
                responder.respond_with_result(s_list.list_sessions(req).await)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: ResumeSessionRequest,
                        responder: Responder<ResumeSessionResponse>,
                        cx: ConnectionTo<Client>| {
                answer_opened(
                    s_resume.resume_session(req, cx.clone()).await,
                    responder,
                    cx,
                )
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: ForkSessionRequest,
                        responder: Responder<ForkSessionResponse>,
                        cx: ConnectionTo<Client>| {
                answer_opened(s_fork.fork_session(req, cx.clone()).await, responder, cx)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: CloseSessionRequest,
                        responder: Responder<CloseSessionResponse>,
                        _cx| {
                responder.respond_with_result(s_close.close_session(&req).await)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: SetSessionConfigOptionRequest,
                        responder: Responder<SetSessionConfigOptionResponse>,
                        _cx| {
                responder.respond_with_result(s_config.set_config_option(&req).await)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |note: CancelNotification, _cx| {
                s_cancel.cancel(&note.session_id);
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_to(transport)
        .await;
    server.shutdown().await;
    match served {
        Err(e) if agent_client_protocol::is_incoming_transport_closed(&e) => Ok(()),
        other => other,
    }
}

struct Server<S> {
    source: Arc<S>,
    sessions: Mutex<HashMap<Arc<str>, Arc<Live>>>,
    /// Turns started by `session/prompt` (finished ones are pruned as new ones start).
    turns: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// What the client offered of its file system in `initialize`.
    client_fs: Mutex<FileSystemCapabilities>,
    /// The client declared form elicitation (`ask_user_question` asks with a form).
    client_forms: AtomicBool,
    /// The models sessions can be switched to ([`AgentSource::models`]), read once.
    models: OnceLock<Vec<String>>,
}

/// An open session.
struct Live {
    id: SessionId,
    agent: Agent,
    /// A prompt is running.
    running: AtomicBool,
    /// `session/cancel` arrived during the running prompt.
    cancelled: AtomicBool,
    cancel: Notify,
    /// Its updates to the client.
    feed: Arc<UpdateFeed>,
    /// The custom commands (Markdown files) of its workspace, read once when first offered.
    custom: OnceLock<CommandSet>,
    /// What built it: answers `/trust` for its workspace ([`AgentSource::trust`]).
    source: Arc<dyn AgentSource>,
    /// The client's working directory for it.
    cwd: PathBuf,
    /// The client's MCP servers for it (an agent rebuilt over the session gets them again).
    servers: Vec<McpServer>,
    /// The task running the turns plugins queue ([`watch_wakes`]): stopped with the session.
    waker: OnceLock<tokio::task::AbortHandle>,
}

impl Drop for Live {
    fn drop(&mut self) {
        if let Some(waker) = self.waker.get() {
            waker.abort();
        }
    }
}

/// Sends a session's events to the client as updates (the agent's `session_event` hook).
pub(crate) struct UpdateFeed {
    cx: ConnectionTo<Client>,
    session: Arc<OnceLock<SessionId>>,
    mapper: Mutex<Mapper>,
    /// Off while a loaded session is being built and replayed.
    on: AtomicBool,
    /// Signalled when a plugin queues a message for the agent (a schedule firing): an idle
    /// session then runs the turn it queued ([`watch_wakes`]).
    wake: Arc<Notify>,
    /// The session's model and the models it can switch to, for the `config_option_update`
    /// that follows a mode keel changed itself (set when the session opens).
    models: OnceLock<config::Models>,
}

impl UpdateFeed {
    fn observe(&self, event: &SessionEvent) {
        if !self.on.load(Ordering::Acquire) {
            return;
        }
        let Some(session) = self.session.get() else {
            return;
        };
        let updates = self.mapper.locked().map(event);
        // A mode keel changed itself is also a change of the `mode` config option.
        let mode = updates.iter().rev().find_map(|u| match u {
            SessionUpdate::CurrentModeUpdate(m) => Some(m.current_mode_id.0.clone()),
            _ => None,
        });
        for update in updates {
            send(&self.cx, session, update);
        }
        if let (Some(mode), Some(models)) = (mode, self.models.get()) {
            send(&self.cx, session, config::option_update(&mode, models));
        }
    }
}

/// Answer `session/new` or `session/load`, then offer the opened session's slash commands.
fn answer_opened<T: agent_client_protocol::JsonRpcResponse>(
    opened: Result<(T, Arc<Live>), Error>,
    responder: Responder<T>,
    cx: ConnectionTo<Client>,
) -> Result<(), Error> {
    match opened {
        Ok((answer, live)) => {
            responder.respond(answer)?;
            advertise_commands(&live, cx);
            Ok(())
        }
        Err(e) => responder.respond_with_error(e),
    }
}

fn send(cx: &ConnectionTo<Client>, session: &SessionId, update: SessionUpdate) {
    // The client gone is noticed by the connection; an update lost then has nobody to see it.
    let _ = cx.send_notification(SessionNotification::new(session.clone(), update));
}

fn err(code: ErrorCode, message: impl Into<String>) -> Error {
    Error::new(code, message.into())
}

/// The session modes and `agent`'s current one; each sets plan mode, the sandbox's narrowing
/// and the approval policy together (see [`set_mode`]).
fn modes(agent: &Agent) -> SessionModeState {
    SessionModeState::new(agent_modes(agent).id(), mode_list())
}

/// The session modes keel offers.
fn mode_list() -> Vec<SessionMode> {
    vec![
        SessionMode::new(MODE_DEFAULT, "Default").description(Some(
            "Work on the task; calls that need approval are asked about".to_owned(),
        )),
        SessionMode::new(MODE_READ_ONLY, "Read-only").description(Some(
            "Read and answer; file changes are refused and every command is asked about".to_owned(),
        )),
        SessionMode::new(MODE_AUTO, "Auto-approve").description(Some(
            "Work without asking: what would be asked about is approved (within the sandbox)"
                .to_owned(),
        )),
        SessionMode::new(MODE_PLAN, "Plan").description(Some(
            "Read and plan only; the plan is put to you for approval".to_owned(),
        )),
    ]
}

/// What decides `agent`'s mode.
fn agent_modes(agent: &Agent) -> Modes {
    Modes {
        plan: agent.in_plan_mode(),
        read_only: agent.sandbox() == SandboxMode::ReadOnly,
        auto: agent.approval() == ApprovalPolicy::Auto,
    }
}

/// The `current_mode_update` that ends a replay whose mode updates (`mapper`'s) left another
/// mode than `agent`'s: the session was started under another configuration, or a mode it
/// kept was read failing closed ([`keel_agent::session_modes`]).
fn settle_mode(mapper: &Mapper, agent: &Agent) -> Option<SessionUpdate> {
    let now = agent_modes(agent);
    (mapper.modes() != now).then(|| now.update())
}

/// Put `agent` in `mode`: plan mode on for `plan`, the sandbox narrowed for `read-only`,
/// approvals automatic for `auto`; whatever the mode does not set goes back to the
/// configuration's.
fn set_mode(agent: &Agent, mode: &str) -> Result<(), Error> {
    let configured = agent.config().approval;
    let (plan, read_only, approval) = match mode {
        MODE_DEFAULT => (false, false, configured),
        MODE_READ_ONLY => (false, true, configured),
        MODE_AUTO => (false, false, ApprovalPolicy::Auto),
        MODE_PLAN => (true, false, configured),
        other => {
            return Err(err(
                ErrorCode::InvalidParams,
                format!(
                    "no session mode {other:?}: keel has {MODE_DEFAULT:?}, {MODE_READ_ONLY:?}, \
                     {MODE_AUTO:?} and {MODE_PLAN:?}"
                ),
            ));
        }
    };
    let failed = |e: keel_agent::AgentError| err(ErrorCode::InternalError, format!("keel: {e}"));
    agent.set_read_only(read_only).map_err(failed)?;
    agent.set_approval(approval).map_err(failed)?;
    agent.set_plan_mode(plan).map_err(failed)?;
    Ok(())
}

/// `session/set_mode` (or the `mode` config option) on `live`: the mode set, logged and on
/// disk before the answer.
async fn apply_mode(live: &Live, mode: &str) -> Result<(), Error> {
    if live.running.load(Ordering::Acquire) {
        return Err(err(
            ErrorCode::InvalidRequest,
            format!(
                "session {} is running a prompt: change its mode when it is done, or cancel it",
                &*live.id.0
            ),
        ));
    }
    // The client knows the mode it asked for: the events of the change are not echoed
    // back as `current_mode_update`s.
    let feed = &live.feed;
    feed.on.store(false, Ordering::Release);
    let set = set_mode(&live.agent, mode);
    feed.mapper.locked().set_modes(agent_modes(&live.agent));
    feed.on.store(true, Ordering::Release);
    set?;
    // The mode is the session's (a later `session/load` keeps it): on disk before the
    // client hears it is set, so that a process killed next does not lose it.
    durable(live, "mode change").await
}

/// Wait until what `live`'s log holds is on disk; `what` names the change in the error.
async fn durable(live: &Live, what: &str) -> Result<(), Error> {
    let ticket = live.agent.log().flush_ticket();
    ticket.durable().await.map_err(|e| {
        err(
            ErrorCode::InternalError,
            format!(
                "keel: session {}: the {what} could not be written: {e}",
                &*live.id.0
            ),
        )
    })
}

impl<S: AgentSource + 'static> Server<S> {
    fn initialize(&self, req: &InitializeRequest) -> InitializeResponse {
        *self.client_fs.locked() = req.client_capabilities.fs.clone();
        let forms = req
            .client_capabilities
            .elicitation
            .as_ref()
            .is_some_and(|e| e.supports_form());
        self.client_forms.store(forms, Ordering::SeqCst);
        let version = if req.protocol_version < ProtocolVersion::LATEST {
            req.protocol_version
        } else {
            ProtocolVersion::LATEST
        };
        InitializeResponse::new(version)
            .agent_capabilities(
                AgentCapabilities::new()
                    .load_session(true)
                    .prompt_capabilities(
                        PromptCapabilities::new()
                            .embedded_context(true)
                            .image(self.source.reads_images()),
                    )
                    .mcp_capabilities(McpCapabilities::new().http(true))
                    .session_capabilities(sessions::capabilities()),
            )
            .agent_info(Some(Implementation::new("keel", env!("CARGO_PKG_VERSION"))))
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, Arc<Live>>> {
        self.sessions.locked()
    }

    fn session(&self, id: &SessionId) -> Result<Arc<Live>, Error> {
        self.sessions().get(&id.0).cloned().ok_or_else(|| {
            err(
                ErrorCode::ResourceNotFound,
                format!(
                    "no open session {:?}: create one with session/new or open it with session/load",
                    &*id.0
                ),
            )
        })
    }

    /// Build options feeding `feed`, asking the client for approvals, reading and writing
    /// files through it when it offered to, with the session's own MCP servers.
    fn options(
        &self,
        feed: &Arc<UpdateFeed>,
        cwd: &Path,
        servers: &[McpServer],
    ) -> Result<BuildOptions, Error> {
        let mut options = BuildOptions {
            mcp_servers: mcp_servers(servers)?,
            ..BuildOptions::default()
        };
        let fs = self.client_fs.locked().clone();
        if let Some(files) = ClientFiles::offered(feed.cx.clone(), feed.session.clone(), &fs) {
            options.text_files = Some(Arc::new(files));
        }
        let observer = feed.clone();
        options
            .agent_hooks
            .session_event
            .push(Arc::new(move |ev: &SessionEvent| observer.observe(ev)));
        let wake = feed.wake.clone();
        options.agent_hooks.inbox_inserted.push(Arc::new(
            move |m: &keel_agent::seams::InboxInserted| {
                if m.mode == keel_agent::InboxMode::Followup && !m.message.source.is_user() {
                    wake.notify_one();
                }
            },
        ));
        options.approver = Some(Arc::new(AcpApprover::new(
            feed.cx.clone(),
            feed.session.clone(),
            cwd.to_path_buf(),
        )));
        options.asker = Some(Arc::new(AcpAsker::new(
            feed.cx.clone(),
            feed.session.clone(),
            cwd.to_path_buf(),
            self.client_forms.load(Ordering::SeqCst),
        )));
        Ok(options)
    }

    fn feed(cx: ConnectionTo<Client>, cwd: &Path, on: bool) -> Arc<UpdateFeed> {
        Arc::new(UpdateFeed {
            cx,
            session: Arc::new(OnceLock::new()),
            mapper: Mutex::new(Mapper::new(cwd, if on { Feed::Live } else { Feed::Replay })),
            on: AtomicBool::new(on),
            wake: Arc::new(Notify::new()),
            models: OnceLock::new(),
        })
    }

    /// Put `agent` in the table of open sessions (replacing an agent of the same session).
    fn open(
        &self,
        agent: Agent,
        feed: Arc<UpdateFeed>,
        cwd: PathBuf,
        servers: Vec<McpServer>,
    ) -> Arc<Live> {
        let id = SessionId::new(agent.session_id().as_str());
        feed.mapper.locked().set_modes(agent_modes(&agent));
        let _ = feed.session.set(id.clone());
        let _ = feed.models.set(self.models_of(&agent));
        let live = Arc::new(Live {
            id: id.clone(),
            agent,
            running: AtomicBool::new(false),
            cancelled: AtomicBool::new(false),
            cancel: Notify::new(),
            feed,
            custom: OnceLock::new(),
            source: self.source.clone(),
            cwd,
            servers,
            waker: OnceLock::new(),
        });
        let waker = tokio::spawn(watch_wakes(Arc::downgrade(&live), live.feed.wake.clone()));
        let _ = live.waker.set(waker.abort_handle());
        self.sessions().insert(id.0, live.clone());
        live
    }

    async fn new_session(
        &self,
        req: NewSessionRequest,
        cx: ConnectionTo<Client>,
    ) -> Result<(NewSessionResponse, Arc<Live>), Error> {
        let cwd = working_dir(&req.cwd)?;
        let feed = Self::feed(cx, &cwd, true);
        let options = self.options(&feed, &cwd, &req.mcp_servers)?;
        let servers = req.mcp_servers;
        let source = self.source.clone();
        let dir = cwd.clone();
        let built =
            tokio::task::spawn_blocking(move || source.create(&SessionSpec::in_dir(dir), options))
                .await
                .map_err(|e| err(ErrorCode::InternalError, format!("keel: {e}")))?;
        let agent = built.map_err(|e| err(ErrorCode::InternalError, e.to_string()))?;
        let modes = modes(&agent);
        let live = self.open(agent, feed, cwd, servers);
        let options = self.config_options(&live);
        Ok((
            NewSessionResponse::new(live.id.clone())
                .modes(modes)
                .config_options(options),
            live,
        ))
    }

    async fn load_session(
        &self,
        req: LoadSessionRequest,
        cx: ConnectionTo<Client>,
    ) -> Result<(LoadSessionResponse, Arc<Live>), Error> {
        let cwd = working_dir(&req.cwd)?;
        let live = self
            .reopen(&req.session_id, cwd, req.mcp_servers, cx, true)
            .await?;
        let answer = LoadSessionResponse::new()
            .modes(modes(&live.agent))
            .config_options(self.config_options(&live));
        Ok((answer, live))
    }

    /// The open session `id`, or an agent built over it (`session/load`, `session/resume`,
    /// `session/fork`'s new session), with its history sent as updates when `replay`.
    async fn reopen(
        &self,
        id: &SessionId,
        cwd: PathBuf,
        servers: Vec<McpServer>,
        cx: ConnectionTo<Client>,
        replay: bool,
    ) -> Result<Arc<Live>, Error> {
        let open = self.sessions().get(&id.0).cloned();
        if let Some(live) = open {
            if !replay {
                return Ok(live);
            }
            // Open here already: its history again, from the agent that has it (a second
            // agent would write the same log).
            if live.running.load(Ordering::Acquire) {
                return Err(err(
                    ErrorCode::InvalidParams,
                    format!("session {} is running a prompt: cancel it first", &*id.0),
                ));
            }
            let updates = {
                let log = live.agent.log();
                let mut mapper = Mapper::new(&cwd, Feed::Replay);
                let mut updates = Vec::new();
                for event in log.session().events() {
                    updates.extend(mapper.map(&event));
                }
                updates.extend(settle_mode(&mapper, &live.agent));
                updates
            };
            for update in updates {
                send(&cx, id, update);
            }
            return Ok(live);
        }
        let feed = Self::feed(cx.clone(), &cwd, false);
        let _ = feed.session.set(id.clone());
        let options = self.options(&feed, &cwd, &servers)?;
        let agent = self
            .build_over(id, SessionSpec::in_dir(cwd.clone()), options)
            .await?;
        // Replay the history, then go live.
        let updates = {
            let log = agent.log();
            let mut mapper = feed.mapper.locked();
            let mut updates = Vec::new();
            if replay {
                for event in log.session().events() {
                    updates.extend(mapper.map(&event));
                }
                updates.extend(settle_mode(&mapper, &agent));
            }
            mapper.set_feed(Feed::Live);
            updates
        };
        for update in updates {
            send(&cx, id, update);
        }
        feed.on.store(true, Ordering::Release);
        Ok(self.open(agent, feed, cwd, servers))
    }

    /// An agent over the stored session `id` under `spec` (cold resume with crash repair).
    async fn build_over(
        &self,
        id: &SessionId,
        spec: SessionSpec,
        options: BuildOptions,
    ) -> Result<Agent, Error> {
        let source = self.source.clone();
        let name = id.0.to_string();
        let built = tokio::task::spawn_blocking(move || {
            source.resume(SessionRef::Id(&name), &spec, options)
        })
        .await
        .map_err(|e| err(ErrorCode::InternalError, format!("keel: {e}")))?;
        built.map_err(|e| match e {
            SourceError::NotFound(m) => err(
                ErrorCode::ResourceNotFound,
                format!(
                    "{m}: pass the id of a keel session (session/list, keel sessions list --all)"
                ),
            ),
            SourceError::Failed(m) | SourceError::Unsupported(m) => {
                err(ErrorCode::InvalidParams, m)
            }
        })
    }

    async fn set_mode(&self, req: &SetSessionModeRequest) -> Result<SetSessionModeResponse, Error> {
        let live = self.session(&req.session_id)?;
        apply_mode(&live, &req.mode_id.0).await?;
        Ok(SetSessionModeResponse::new())
    }

    fn cancel(&self, id: &SessionId) {
        let Some(live) = self.sessions().get(&id.0).cloned() else {
            return;
        };
        if live.running.load(Ordering::Acquire) {
            live.cancelled.store(true, Ordering::Release);
            live.cancel.notify_one();
        }
    }

    fn prompt(&self, req: PromptRequest, responder: Responder<PromptResponse>) {
        let live = match self.session(&req.session_id) {
            Ok(live) => live,
            Err(e) => {
                let _ = responder.respond_with_error(e);
                return;
            }
        };
        let config = live.agent.config();
        let store = live.agent.attachments();
        let images = match (&store, config.model_info.vision) {
            (Some(store), true) => Images::Store(store),
            _ => Images::Refuse {
                model: &config.model,
            },
        };
        let prompt = match prompt_content(&req.prompt, images) {
            Ok(prompt) => prompt,
            Err(e) => {
                let _ = responder.respond_with_error(e);
                return;
            }
        };
        if live.running.swap(true, Ordering::AcqRel) {
            let _ = responder.respond_with_error(err(
                ErrorCode::InvalidRequest,
                format!(
                    "session {} is already running a prompt: wait for it or send session/cancel",
                    &*req.session_id.0
                ),
            ));
            return;
        }
        live.cancelled.store(false, Ordering::Release);
        let rt = tokio::runtime::Handle::current();
        // The turn's future holds the session log: it runs on a blocking thread of its own.
        let handle = tokio::task::spawn_blocking(move || {
            let answer = rt.block_on(run_turn(&live, prompt));
            live.running.store(false, Ordering::Release);
            let _ = responder.respond_with_result(answer);
        });
        let mut turns = self.turns.locked();
        turns.retain(|t| !t.is_finished());
        turns.push(handle);
    }

    /// The client left: cancel what runs and wait (bounded) for the turns to end.
    async fn shutdown(&self) {
        let open: Vec<Arc<Live>> = self.sessions().values().cloned().collect();
        for live in &open {
            if live.running.load(Ordering::Acquire) {
                live.cancelled.store(true, Ordering::Release);
                live.cancel.notify_one();
            }
        }
        let turns = std::mem::take(&mut *self.turns.locked());
        let all = futures::future::join_all(turns);
        let _ = tokio::time::timeout(SHUTDOWN_GRACE, all).await;
        for live in &open {
            live.agent.kill_jobs();
        }
    }
}

/// Run the session's queued turns until idle, cancelling on `session/cancel`.
async fn run_cancellable(
    live: &Live,
) -> Result<Option<keel_agent::TurnOutcome>, keel_agent::AgentError> {
    let agent = &live.agent;
    let run = agent.run_until_idle();
    tokio::pin!(run);
    let mut cancelling = false;
    loop {
        tokio::select! {
            out = &mut run => break out,
            () = live.cancel.notified(), if !cancelling => {
                cancelling = true;
                agent.cancel_turn();
                agent.kill_jobs();
            }
            () = tokio::time::sleep(RECANCEL_EVERY), if cancelling => agent.cancel_turn(),
        }
    }
}

/// How often a woken session looks whether the prompt it waits for has ended.
const WAKE_POLL: Duration = Duration::from_millis(100);

/// Run the turns a plugin queues while no prompt runs (a schedule firing while the session is
/// idle): their events reach the client as `session/update`s like a prompt's, with no prompt
/// to answer. A turn queued during a prompt is that prompt's to run. Ends with the session.
async fn watch_wakes(live: std::sync::Weak<Live>, wake: Arc<Notify>) {
    loop {
        wake.notified().await;
        let live = loop {
            let Some(live) = live.upgrade() else {
                return;
            };
            if !live.running.load(Ordering::Acquire) {
                break live;
            }
            drop(live);
            tokio::time::sleep(WAKE_POLL).await;
        };
        if !live.agent.has_pending_turn() || live.running.swap(true, Ordering::AcqRel) {
            continue;
        }
        live.cancelled.store(false, Ordering::Release);
        let rt = tokio::runtime::Handle::current();
        // The turn's future holds the session log: it runs on a blocking thread of its own.
        let _ = tokio::task::spawn_blocking(move || {
            let _ = rt.block_on(run_cancellable(&live));
            live.running.store(false, Ordering::Release);
        })
        .await;
    }
}

/// Queue `prompt` and run the session's turns until idle, cancelling on `session/cancel`.
async fn run_turn(live: &Live, prompt: Prompt) -> Result<PromptResponse, Error> {
    let agent = &live.agent;
    let text = prompt.text.as_str();
    let expanded = match slash_command(live, text).await? {
        Some(Slash::Compact) => return compact(live).await,
        Some(Slash::Say(said)) => {
            send(
                &live.feed.cx,
                &live.id,
                SessionUpdate::AgentMessageChunk(map::chunk(said)),
            );
            return Ok(PromptResponse::new(StopReason::EndTurn));
        }
        Some(Slash::Prompt(prompt)) => Some(prompt),
        None => None,
    };
    let text = expanded.as_deref().unwrap_or(text);
    let mut message = keel_agent::user_message(text);
    if text.is_empty() {
        message.content.clear(); // an image-only prompt
    }
    message.content.extend(
        prompt
            .images
            .into_iter()
            .map(keel_protocol::ContentBlock::Image),
    );
    agent
        .enqueue(keel_agent::InboxMode::Followup, message)
        .map_err(|e| err(ErrorCode::InternalError, format!("keel: {e}")))?;
    let outcome = run_cancellable(live).await;
    if live.cancelled.load(Ordering::Acquire) {
        return Ok(PromptResponse::new(StopReason::Cancelled));
    }
    let id = agent.session_id();
    let outcome = outcome.map_err(|e| {
        err(
            ErrorCode::InternalError,
            format!("keel: session {}: {e}", id.as_str()),
        )
    })?;
    let Some(outcome) = outcome else {
        return Ok(PromptResponse::new(StopReason::EndTurn));
    };
    let reason = match outcome.reason {
        TurnEndReason::Completed | TurnEndReason::Blocked { .. } => StopReason::EndTurn,
        TurnEndReason::MaxTokens => StopReason::MaxTokens,
        TurnEndReason::Aborted { .. } | TurnEndReason::Interrupted => StopReason::Cancelled,
        TurnEndReason::Error { code, message } => {
            return Err(err(
                ErrorCode::InternalError,
                format!(
                    "keel: session {}: the turn failed: {code}: {message}",
                    id.as_str()
                ),
            ));
        }
    };
    Ok(PromptResponse::new(reason))
}
