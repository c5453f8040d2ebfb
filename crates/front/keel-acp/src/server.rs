//! The ACP connection: request handlers, the table of open sessions, turns run on blocking
//! threads (a turn's future holds the session log), their events fed to the client as
//! `session/update` notifications by an agent hook, and the shutdown when the client leaves.
//!
//! Here: [`serve`] (the request handlers), the session table and what an open session holds,
//! and the update feed. Beside it: [`stdio`] (the transport on stdin/stdout), [`open`]
//! (`session/new`, `session/load` and building an agent over a session), [`modes`] (the
//! session modes), [`turns`] (prompts, cancellation, plugin-queued turns, shutdown),
//! [`sessions`] (list, resume, close, fork), [`config`] (config options), [`params`] and
//! [`slash`].

use crate::map::Mapper;
use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, CancelNotification, CloseSessionRequest, CloseSessionResponse, ErrorCode,
    FileSystemCapabilities, ForkSessionRequest, ForkSessionResponse, Implementation,
    InitializeRequest, InitializeResponse, ListSessionsRequest, ListSessionsResponse,
    LoadSessionRequest, LoadSessionResponse, McpCapabilities, McpServer, NewSessionRequest,
    NewSessionResponse, PromptCapabilities, PromptRequest, PromptResponse, ResumeSessionRequest,
    ResumeSessionResponse, SessionId, SessionNotification, SessionUpdate,
    SetSessionConfigOptionRequest, SetSessionConfigOptionResponse, SetSessionModeRequest,
    SetSessionModeResponse,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent as AcpAgent, Client, ConnectTo, Error};
use keel_agent::Agent;
use keel_host::AgentSource;
use keel_host::commands::CommandSet;
use keel_protocol::SessionEvent;
use keel_protocol::sync::Locked;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::sync::Notify;

mod config;
mod modes;
mod open;
mod params;
mod sessions;
mod slash;
mod stdio;
mod turns;

use modes::{agent_modes, apply_mode, mode_list, modes};
use slash::advertise_commands;

pub use stdio::serve_stdio;

/// How often a cancelled turn is cancelled again until it stops (a cancel can land between
/// two turns of a follow-up chain).
const RECANCEL_EVERY: Duration = Duration::from_millis(200);
/// How long running turns get to stop after the client left.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

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
    /// The task running the turns plugins queue ([`turns::watch_wakes`]): stopped with the session.
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
    /// session then runs the turn it queued ([`turns::watch_wakes`]).
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
}
