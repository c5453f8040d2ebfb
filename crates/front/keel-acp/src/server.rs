//! The ACP connection: request handlers, the table of open sessions, turns run on blocking
//! threads (a turn's future holds the session log), their events fed to the client as
//! `session/update` notifications by an agent hook, and the shutdown when the client leaves.

use crate::approve::AcpApprover;
use crate::files::ClientFiles;
use crate::map::{self, Feed, MODE_AUTO, MODE_DEFAULT, MODE_PLAN, MODE_READ_ONLY, Mapper, Modes};
use crate::{AgentSource, LoadError};
use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, AvailableCommand, AvailableCommandInput, AvailableCommandsUpdate,
    CancelNotification, ContentBlock, EmbeddedResourceResource, ErrorCode, FileSystemCapabilities,
    Implementation, InitializeRequest, InitializeResponse, LoadSessionRequest, LoadSessionResponse,
    McpCapabilities, McpServer, NewSessionRequest, NewSessionResponse, PromptCapabilities,
    PromptRequest, PromptResponse, SessionId, SessionMode, SessionModeState, SessionNotification,
    SessionUpdate, SetSessionModeRequest, SetSessionModeResponse, StopReason,
    UnstructuredCommandInput,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent as AcpAgent, Client, ConnectTo, Error};
use keel_agent::{Agent, ApprovalPolicy};
use keel_host::BuildOptions;
use keel_host::commands::{Builtin, CommandKind, CommandSet, Invocation};
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
const RECANCEL_EVERY: Duration = Duration::from_millis(200);
/// How long running turns get to stop after the client left.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Serve ACP on stdin/stdout until the client closes stdin. Must run inside a multi-threaded
/// tokio runtime.
///
/// Lines are read and written by a thread each: the writer writes every line queued and
/// flushes once the queue is empty, instead of a flush (a thread hand-off) per message, which
/// dominated the cost of a streamed update.
pub async fn serve_stdio<S: AgentSource>(source: S) -> Result<(), Error> {
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
    std::thread::Builder::new()
        .name("keel-acp-stdin".into())
        .spawn(move || {
            use std::io::BufRead;
            for line in std::io::stdin().lock().lines() {
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
pub async fn serve<S: AgentSource>(
    source: S,
    transport: impl ConnectTo<AcpAgent>,
) -> Result<(), Error> {
    let server = Arc::new(Server {
        source: Arc::new(source),
        sessions: Mutex::new(HashMap::new()),
        turns: Mutex::new(Vec::new()),
        client_fs: Mutex::new(FileSystemCapabilities::default()),
    });
    let s_init = server.clone();
    let s_new = server.clone();
    let s_load = server.clone();
    let s_prompt = server.clone();
    let s_cancel = server.clone();
    let s_mode = server.clone();
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
}

/// Sends a session's events to the client as updates (the agent's `session_event` hook).
pub(crate) struct UpdateFeed {
    cx: ConnectionTo<Client>,
    session: Arc<OnceLock<SessionId>>,
    mapper: Mutex<Mapper>,
    /// Off while a loaded session is being built and replayed.
    on: AtomicBool,
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
        for update in updates {
            send(&self.cx, session, update);
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

/// The session modes, `agent`'s current one first: each sets plan mode, the sandbox's
/// narrowing and the approval policy together (see [`set_mode`]).
fn modes(agent: &Agent) -> SessionModeState {
    SessionModeState::new(
        agent_modes(agent).id(),
        vec![
            SessionMode::new(MODE_DEFAULT, "Default").description(Some(
                "Work on the task; calls that need approval are asked about".to_owned(),
            )),
            SessionMode::new(MODE_READ_ONLY, "Read-only").description(Some(
                "Read and answer; file changes are refused and every command is asked about"
                    .to_owned(),
            )),
            SessionMode::new(MODE_AUTO, "Auto-approve").description(Some(
                "Work without asking: what would be asked about is approved (within the sandbox)"
                    .to_owned(),
            )),
            SessionMode::new(MODE_PLAN, "Plan").description(Some(
                "Read and plan only; the plan is put to you for approval".to_owned(),
            )),
        ],
    )
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

impl<S: AgentSource> Server<S> {
    fn initialize(&self, req: &InitializeRequest) -> InitializeResponse {
        *self.client_fs.locked() = req.client_capabilities.fs.clone();
        let version = if req.protocol_version < ProtocolVersion::LATEST {
            req.protocol_version
        } else {
            ProtocolVersion::LATEST
        };
        InitializeResponse::new(version)
            .agent_capabilities(
                AgentCapabilities::new()
                    .load_session(true)
                    .prompt_capabilities(PromptCapabilities::new().embedded_context(true))
                    .mcp_capabilities(McpCapabilities::new().http(true)),
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
        options.approver = Some(Arc::new(AcpApprover::new(
            feed.cx.clone(),
            feed.session.clone(),
            cwd.to_path_buf(),
        )));
        Ok(options)
    }

    fn feed(cx: ConnectionTo<Client>, cwd: &Path, on: bool) -> Arc<UpdateFeed> {
        Arc::new(UpdateFeed {
            cx,
            session: Arc::new(OnceLock::new()),
            mapper: Mutex::new(Mapper::new(cwd, if on { Feed::Live } else { Feed::Replay })),
            on: AtomicBool::new(on),
        })
    }

    fn open(&self, agent: Agent, feed: Arc<UpdateFeed>, cwd: PathBuf) -> Arc<Live> {
        let id = SessionId::new(agent.session_id().as_str());
        feed.mapper.locked().set_modes(agent_modes(&agent));
        let _ = feed.session.set(id.clone());
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
        });
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
        let source = self.source.clone();
        let dir = cwd.clone();
        let built = tokio::task::spawn_blocking(move || source.create(&dir, options))
            .await
            .map_err(|e| err(ErrorCode::InternalError, format!("keel: {e}")))?;
        let agent = built.map_err(|e| err(ErrorCode::InternalError, e))?;
        let modes = modes(&agent);
        let live = self.open(agent, feed, cwd);
        Ok((NewSessionResponse::new(live.id.clone()).modes(modes), live))
    }

    async fn load_session(
        &self,
        req: LoadSessionRequest,
        cx: ConnectionTo<Client>,
    ) -> Result<(LoadSessionResponse, Arc<Live>), Error> {
        let id = req.session_id.clone();
        let cwd = working_dir(&req.cwd)?;
        let open = self.sessions().get(&id.0).cloned();
        if let Some(live) = open {
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
                send(&cx, &id, update);
            }
            return Ok((LoadSessionResponse::new().modes(modes(&live.agent)), live));
        }
        let feed = Self::feed(cx.clone(), &cwd, false);
        let _ = feed.session.set(id.clone());
        let options = self.options(&feed, &cwd, &req.mcp_servers)?;
        let source = self.source.clone();
        let name = id.0.to_string();
        let dir = cwd.clone();
        let built = tokio::task::spawn_blocking(move || source.load(&name, &dir, options))
            .await
            .map_err(|e| err(ErrorCode::InternalError, format!("keel: {e}")))?;
        let agent = built.map_err(|e| match e {
            LoadError::NotFound(m) => err(ErrorCode::ResourceNotFound, m),
            LoadError::Unusable(m) => err(ErrorCode::InvalidParams, m),
        })?;
        // Replay the history, then go live.
        let updates = {
            let log = agent.log();
            let mut mapper = feed.mapper.locked();
            let mut updates = Vec::new();
            for event in log.session().events() {
                updates.extend(mapper.map(&event));
            }
            updates.extend(settle_mode(&mapper, &agent));
            mapper.set_feed(Feed::Live);
            updates
        };
        for update in updates {
            send(&cx, &id, update);
        }
        feed.on.store(true, Ordering::Release);
        let modes = modes(&agent);
        let live = self.open(agent, feed, cwd);
        Ok((LoadSessionResponse::new().modes(modes), live))
    }

    async fn set_mode(&self, req: &SetSessionModeRequest) -> Result<SetSessionModeResponse, Error> {
        let live = self.session(&req.session_id)?;
        if live.running.load(Ordering::Acquire) {
            return Err(err(
                ErrorCode::InvalidRequest,
                format!(
                    "session {} is running a prompt: change its mode when it is done, or cancel it",
                    &*req.session_id.0
                ),
            ));
        }
        // The client knows the mode it asked for: the events of the change are not echoed
        // back as `current_mode_update`s.
        let feed = &live.feed;
        feed.on.store(false, Ordering::Release);
        let set = set_mode(&live.agent, &req.mode_id.0);
        feed.mapper.locked().set_modes(agent_modes(&live.agent));
        feed.on.store(true, Ordering::Release);
        set?;
        // The mode is the session's (a later `session/load` keeps it): on disk before the
        // client hears it is set, so that a process killed next does not lose it.
        let ticket = live.agent.log().flush_ticket();
        tokio::task::spawn_blocking(move || ticket.wait())
            .await
            .map_err(|e| err(ErrorCode::InternalError, format!("keel: {e}")))?
            .map_err(|e| {
                err(
                    ErrorCode::InternalError,
                    format!(
                        "keel: session {}: the mode change could not be written: {e}",
                        &*req.session_id.0
                    ),
                )
            })?;
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
        let text = match prompt_text(&req.prompt) {
            Ok(text) => text,
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
            let answer = rt.block_on(run_turn(&live, &text));
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

/// The MCP servers of `session/new` or `session/load` in keel's `[mcp_servers.NAME]` shape.
/// SSE servers are refused (keel speaks stdio and streamable HTTP; `initialize` says so).
fn mcp_servers(servers: &[McpServer]) -> Result<serde_json::Map<String, serde_json::Value>, Error> {
    let mut out = serde_json::Map::new();
    for server in servers {
        let (name, entry) = match server {
            McpServer::Stdio(s) => {
                let env: serde_json::Map<String, serde_json::Value> = s
                    .env
                    .iter()
                    .map(|v| (v.name.clone(), v.value.clone().into()))
                    .collect();
                (
                    &s.name,
                    serde_json::json!({
                        "command": s.command.to_string_lossy(),
                        "args": s.args,
                        "env": env,
                    }),
                )
            }
            McpServer::Http(s) => {
                let headers: serde_json::Map<String, serde_json::Value> = s
                    .headers
                    .iter()
                    .map(|h| (h.name.clone(), h.value.clone().into()))
                    .collect();
                (
                    &s.name,
                    serde_json::json!({"url": s.url, "headers": headers}),
                )
            }
            McpServer::Sse(s) => {
                return Err(err(
                    ErrorCode::InvalidParams,
                    format!(
                        "MCP server {:?} uses SSE, which keel does not speak: give it as a stdio \
                         or streamable HTTP server (mcpCapabilities in initialize)",
                        s.name
                    ),
                ));
            }
            _ => {
                return Err(err(
                    ErrorCode::InvalidParams,
                    "an MCP server of a transport keel does not know: keel speaks stdio and \
                     streamable HTTP",
                ));
            }
        };
        if name.is_empty() {
            return Err(err(ErrorCode::InvalidParams, "an MCP server has no name"));
        }
        out.insert(name.clone(), entry);
    }
    Ok(out)
}

/// The request's `cwd`: an existing directory, absolute as ACP requires.
fn working_dir(cwd: &Path) -> Result<PathBuf, Error> {
    if !cwd.is_absolute() {
        return Err(err(
            ErrorCode::InvalidParams,
            format!("cwd {} is not an absolute path", cwd.display()),
        ));
    }
    let dir = cwd.canonicalize().map_err(|e| {
        err(
            ErrorCode::InvalidParams,
            format!("cwd {}: {e}", cwd.display()),
        )
    })?;
    if !dir.is_dir() {
        return Err(err(
            ErrorCode::InvalidParams,
            format!("cwd {} is not a directory", dir.display()),
        ));
    }
    Ok(dir)
}

/// The prompt as the text keel's model reads: text blocks, resource links as links, embedded
/// text resources inline. Images, audio and binary resources are refused (keel advertises
/// none of them).
pub(crate) fn prompt_text(blocks: &[ContentBlock]) -> Result<String, Error> {
    let mut text = String::new();
    let mut push = |s: &str| {
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        text.push_str(s);
    };
    for block in blocks {
        match block {
            ContentBlock::Text(t) => push(&t.text),
            ContentBlock::ResourceLink(l) => push(&format!("[{}]({})", l.name, l.uri)),
            ContentBlock::Resource(r) => match &r.resource {
                EmbeddedResourceResource::TextResourceContents(t) => {
                    push(&format!(
                        "<context uri=\"{}\">\n{}\n</context>",
                        t.uri, t.text
                    ));
                }
                _ => {
                    return Err(unsupported("a binary embedded resource"));
                }
            },
            ContentBlock::Image(_) => return Err(unsupported("an image")),
            ContentBlock::Audio(_) => return Err(unsupported("audio")),
            _ => return Err(unsupported("a content block of an unknown type")),
        }
    }
    if text.trim().is_empty() {
        return Err(err(
            ErrorCode::InvalidParams,
            "the prompt has no text: send at least one text content block",
        ));
    }
    Ok(text)
}

fn unsupported(what: &str) -> Error {
    err(
        ErrorCode::InvalidParams,
        format!(
            "keel takes text prompts only and this one has {what}; send text, resource links or \
             embedded text resources (see the promptCapabilities of initialize)"
        ),
    )
}

/// The slash commands of `live` as an `available_commands_update`: `/compact`, `/trust`, the
/// custom commands of the workspace (Markdown files, as in the terminal UI) and the plugins'
/// commands. Sent once listed (reading files and listing may start servers: it runs on a
/// blocking thread, after the session's answer), after the workspace's trust notice when it
/// has one (an agent message: what keel left alone, and how to trust the folder).
fn advertise_commands(live: &Arc<Live>, cx: ConnectionTo<Client>) {
    let live = live.clone();
    tokio::task::spawn_blocking(move || {
        if let Some(notice) = live.source.trust_notice(&live.cwd) {
            send(
                &cx,
                &live.id,
                SessionUpdate::AgentMessageChunk(map::chunk(format!("keel: {notice}\n"))),
            );
        }
        let mut list = vec![
            AvailableCommand::new(Builtin::Compact.name(), Builtin::Compact.description()),
            offered(
                Builtin::Trust.name(),
                Builtin::Trust.description(),
                Builtin::Trust.argument_hint().map(str::to_owned),
            ),
        ];
        for c in custom_commands(&live).all() {
            if matches!(c.kind, CommandKind::Custom { .. }) {
                list.push(offered(&c.name, &c.description, c.argument_hint.clone()));
            }
        }
        for source in live.agent.commands() {
            for command in source.commands() {
                list.push(offered(
                    &command.name,
                    &command.description,
                    command.argument_hint,
                ));
            }
        }
        send(
            &cx,
            &live.id,
            SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(list)),
        );
    });
}

fn offered(name: &str, description: &str, hint: Option<String>) -> AvailableCommand {
    let entry = AvailableCommand::new(name, description);
    match hint {
        Some(hint) => entry.input(Some(AvailableCommandInput::Unstructured(
            UnstructuredCommandInput::new(hint),
        ))),
        None => entry,
    }
}

/// The custom commands of `live`'s workspace, read on first use.
fn custom_commands(live: &Live) -> &CommandSet {
    live.custom.get_or_init(|| {
        let config = live.agent.config();
        CommandSet::load_for(&config.cwd, config.keel_home.as_deref())
    })
}

/// What a prompt starting with `/` asks for.
enum Slash {
    /// Compact the conversation now.
    Compact,
    /// Answer with this text, without a model turn (`/trust`).
    Say(String),
    /// Send this text instead (a custom or plugin command, expanded).
    Prompt(String),
}

/// `/name args` of a slash command: `/compact`, a custom command (expanded with its
/// arguments) or a plugin's (expanded by the plugin); `None` when `text` names none of them
/// (it is sent as typed).
async fn slash_command(live: &Live, text: &str) -> Result<Option<Slash>, Error> {
    let Some(rest) = text.strip_prefix('/') else {
        return Ok(None);
    };
    let (name, args) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    if name.is_empty() {
        return Ok(None);
    }
    if name == Builtin::Compact.name() {
        return Ok(Some(Slash::Compact));
    }
    if name == Builtin::Trust.name() {
        let (source, cwd, args) = (
            live.source.clone(),
            live.cwd.clone(),
            args.trim().to_owned(),
        );
        let said = tokio::task::spawn_blocking(move || source.trust(&cwd, &args))
            .await
            .map_err(|e| err(ErrorCode::InternalError, format!("keel: {e}")))?
            .map_err(|e| err(ErrorCode::InvalidParams, format!("/trust: {e}")))?;
        return Ok(Some(Slash::Say(said)));
    }
    if let Ok(Invocation::Custom { prompt, .. }) = custom_commands(live).parse(text) {
        return Ok(Some(Slash::Prompt(prompt)));
    }
    for source in live.agent.commands() {
        if source.commands().iter().any(|c| c.name == name) {
            return source
                .expand(name, args.trim())
                .await
                .map(|p| Some(Slash::Prompt(p)))
                .map_err(|e| err(ErrorCode::InvalidParams, format!("/{name}: {e}")));
        }
    }
    Ok(None)
}

/// `/compact`: compact the session now and say how it went as the agent's message.
async fn compact(live: &Live) -> Result<PromptResponse, Error> {
    use keel_agent::compaction::{CompactionOutcome, CompactionReason, compact_now};
    let report = compact_now(&live.agent, CompactionReason::Manual)
        .await
        .map_err(|e| err(ErrorCode::InternalError, format!("keel: /compact: {e}")))?;
    let said = match &report.outcome {
        CompactionOutcome::Compacted => format!(
            "Compacted the conversation: about {} → {} tokens per request.",
            report.before_tokens, report.after_tokens
        ),
        CompactionOutcome::NotNeeded | CompactionOutcome::Skipped => {
            "Nothing to compact yet.".to_owned()
        }
        CompactionOutcome::Failed { error } => format!("Compaction failed: {error}"),
    };
    send(
        &live.feed.cx,
        &live.id,
        SessionUpdate::AgentMessageChunk(map::chunk(said)),
    );
    Ok(PromptResponse::new(StopReason::EndTurn))
}

/// Queue `text` and run the session's turns until idle, cancelling on `session/cancel`.
async fn run_turn(live: &Live, text: &str) -> Result<PromptResponse, Error> {
    let agent = &live.agent;
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
    agent
        .followup(text)
        .map_err(|e| err(ErrorCode::InternalError, format!("keel: {e}")))?;
    let run = agent.run_until_idle();
    tokio::pin!(run);
    let mut cancelling = false;
    let outcome = loop {
        tokio::select! {
            out = &mut run => break out,
            () = live.cancel.notified(), if !cancelling => {
                cancelling = true;
                agent.cancel_turn();
                agent.kill_jobs();
            }
            () = tokio::time::sleep(RECANCEL_EVERY), if cancelling => agent.cancel_turn(),
        }
    };
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn blocks(v: serde_json::Value) -> Vec<ContentBlock> {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn prompts_take_text_links_and_embedded_text() {
        let text = prompt_text(&blocks(serde_json::json!([
            {"type": "text", "text": "look at"},
            {"type": "resource_link", "name": "a.rs", "uri": "file:///w/a.rs"},
            {"type": "resource", "resource": {"uri": "file:///w/b.rs", "text": "fn b() {}"}}
        ])))
        .unwrap();
        assert_eq!(
            text,
            "look at\n\n[a.rs](file:///w/a.rs)\n\n<context uri=\"file:///w/b.rs\">\nfn b() {}\n</context>"
        );
    }

    #[test]
    fn images_audio_and_empty_prompts_are_refused() {
        for (v, needle) in [
            (
                serde_json::json!([{"type": "image", "mimeType": "image/png", "data": "AA=="}]),
                "an image",
            ),
            (
                serde_json::json!([{"type": "audio", "mimeType": "audio/wav", "data": "AA=="}]),
                "audio",
            ),
            (
                serde_json::json!([{"type": "text", "text": "  "}]),
                "no text",
            ),
        ] {
            let e = prompt_text(&blocks(v)).unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidParams);
            assert!(e.message.contains(needle), "{}", e.message);
        }
    }
}
