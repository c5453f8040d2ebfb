//! One configured server: connecting (bounded by its startup timeout), its tool list, calls
//! (bounded by the tool timeout, cancellation sent to the server when a call is abandoned), and
//! restarts: a server whose connection broke is started again on the next call, at most
//! [`MAX_RESTARTS`] times, then disabled for the session.

use super::http;
use super::stdio::{self, StdioChild};
use crate::config::{ServerConfig, Transport};
use keel_tools::subprocess::SubprocessService;
use rmcp::model::{
    CallToolRequestParams, ClientConfig, ErrorCode, Implementation, JsonObject, Prompt,
    ProtocolVersion, Tool,
};
use rmcp::service::{
    ClientInitializeError, ClientLifecycleMode, ClientServiceExt, NotificationContext,
    RunningService,
};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::{ClientHandler, RoleClient, ServiceError};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

mod oauth;

/// Restarts of a server whose connection broke, before it is disabled.
pub const MAX_RESTARTS: u32 = 3;

/// Longest JSON-RPC line read from a stdio server: a longer one ends the connection (the calls
/// waiting on it fail at once, naming the limit) and the server is restarted on the next call.
pub const MAX_LINE: usize = 64 << 20;

/// The protocol versions keel speaks, oldest first. `2026-07-28` is stateless (`server/discover`
/// and per-request metadata); the others use the `initialize` handshake.
pub const PROTOCOL_VERSIONS: &[&str] = &["2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"];

/// How a connection establishes its lifecycle.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Lifecycle {
    /// `server/discover` first (2026-07-28); a server that does not know it gets `initialize`
    /// (2025-11-25), on the same connection when it answered with an error, else on a new one.
    Auto,
    /// Only `server/discover` with this (stateless) version.
    Discover(ProtocolVersion),
    /// Only `initialize`, offering this version.
    Initialize(ProtocolVersion),
}

impl Lifecycle {
    fn of(config: &ServerConfig) -> Lifecycle {
        match config.protocol_version.as_deref() {
            None => Lifecycle::Auto,
            Some(v) => {
                let v: ProtocolVersion =
                    serde_json::from_value(Value::String(v.to_owned())).unwrap_or_default();
                if v.has_initialize() {
                    Lifecycle::Initialize(v)
                } else {
                    Lifecycle::Discover(v)
                }
            }
        }
    }

    fn mode(&self) -> ClientLifecycleMode {
        match self {
            Lifecycle::Auto => ClientLifecycleMode::Auto {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
            },
            Lifecycle::Discover(v) => ClientLifecycleMode::Discover {
                preferred_versions: vec![v.clone()],
            },
            Lifecycle::Initialize(_) => ClientLifecycleMode::Initialize,
        }
    }

    /// The handshake's request, for messages.
    fn handshake(&self) -> &'static str {
        match self {
            Lifecycle::Auto => "server/discover (then initialize)",
            Lifecycle::Discover(_) => "server/discover",
            Lifecycle::Initialize(_) => "initialize",
        }
    }

    /// The version an `initialize` request offers.
    fn initialize_version(&self) -> ProtocolVersion {
        match self {
            Lifecycle::Initialize(v) => v.clone(),
            _ => ProtocolVersion::LATEST_WITH_INITIALIZE,
        }
    }
}

/// What the client tells servers, and hears from them.
#[derive(Clone)]
struct Handler {
    changed: Arc<Notify>,
    /// Where the server's elicitation requests go ([`crate::elicit`]).
    elicit: crate::elicit::Route,
    /// The server's name (for messages).
    name: String,
    /// The version `initialize` offers.
    version: ProtocolVersion,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::default();
        info.client_info = Implementation::new("keel", env!("CARGO_PKG_VERSION"));
        let mut elicitation = rmcp::model::ElicitationCapability::new();
        elicitation.form = Some(rmcp::model::FormElicitationCapability::new());
        elicitation.url = Some(rmcp::model::UrlElicitationCapability::new());
        info.capabilities.elicitation = Some(elicitation);
        // `initialize` never offers a stateless version (2026-07-28 has no handshake).
        info.protocol_version = self.version.clone();
        info
    }

    async fn on_custom_request(
        &self,
        request: rmcp::model::CustomRequest,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::CustomResult, rmcp::ErrorData> {
        // An elicitation rmcp could not read (a schema outside the restricted subset).
        if request.method == "elicitation/create" {
            let answer = self.elicit.undecodable(&self.name, request.params.as_ref());
            return Ok(rmcp::model::CustomResult::new(answer));
        }
        Err(rmcp::ErrorData::new(
            rmcp::model::ErrorCode::METHOD_NOT_FOUND,
            format!("keel does not offer the method {}", request.method),
            None,
        ))
    }

    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        Ok(self.elicit.request(request).await)
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.changed.notify_one();
    }
}

/// A live connection.
struct Conn {
    service: RunningService<RoleClient, Handler>,
    child: Option<StdioChild>,
    tools: Vec<Tool>,
}

/// Why a server could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartFailure {
    /// What happened.
    pub reason: String,
    /// The end of its stderr, when it is a process that said something.
    pub stderr_tail: String,
}

impl std::fmt::Display for StartFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)?;
        if !self.stderr_tail.is_empty() {
            write!(f, "; its stderr ends: {}", self.stderr_tail)?;
        }
        Ok(())
    }
}

/// Whether a failed handshake failed on the protocol (the server answered something keel
/// could not use), so that another lifecycle may work; not when the connection or the
/// process went away.
fn protocol_failure(e: &ClientInitializeError) -> bool {
    !matches!(
        e,
        ClientInitializeError::ConnectionClosed(_) | ClientInitializeError::Cancelled
    )
}

/// A failed request as a message; a JSON-RPC error says its code, and "method not found"
/// (-32601) says which method the server does not offer.
pub(crate) fn explain_call(e: &ServiceError) -> String {
    match e {
        ServiceError::McpError(data) if data.code == ErrorCode::METHOD_NOT_FOUND => format!(
            "the server does not offer this method (JSON-RPC -32601 method not found: {})",
            http::shorten(&data.message)
        ),
        ServiceError::McpError(data) => format!(
            "JSON-RPC error {}: {}",
            data.code.0,
            http::shorten(&data.message)
        ),
        other => http::explain(other),
    }
}

/// A stdio server that ended (or never started) before it answered `initialize`.
fn exited(
    exit: Result<
        Result<keel_tools::subprocess::CommandOutput, keel_tools::subprocess::SubprocessError>,
        tokio::task::JoinError,
    >,
) -> StartFailure {
    match exit {
        Ok(Ok(out)) => StartFailure {
            reason: format!(
                "it exited ({}) before answering initialize",
                out.code
                    .map_or_else(|| "by a signal".to_owned(), |c| format!("code {c}"))
            ),
            stderr_tail: out.stderr.text().trim().to_owned(),
        },
        Ok(Err(e)) => StartFailure {
            reason: format!("cannot start it: {e}"),
            stderr_tail: String::new(),
        },
        Err(e) => StartFailure {
            reason: format!("cannot start it: {e}"),
            stderr_tail: String::new(),
        },
    }
}

/// How a call failed (the tool renders it as an error result).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallFailure {
    /// The call ran out of time (the server was told to cancel it).
    Timeout(Duration),
    /// The caller abandoned it (the server was told to cancel it).
    Cancelled,
    /// The server is gone or broke the protocol; it is restarted on the next call.
    Broken(String),
    /// The server is disabled (it failed to start, or broke too often).
    Disabled(String),
}

/// Why a server's prompts could not be listed ([`Server::prompts`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PromptsError {
    /// The server is not connected: it has not been started.
    #[error("not started")]
    NotStarted,
    /// The server is disabled (why it failed to start, or broke too often).
    #[error("{0}")]
    Disabled(String),
    /// `prompts/list` failed (what the server or the connection said).
    #[error("prompts/list failed: {0}")]
    Failed(String),
    /// No answer within the startup timeout.
    #[error("no answer to prompts/list within {} s (startup_timeout_sec)", .0.as_secs_f64())]
    Timeout(Duration),
}

/// One configured server (see the module docs).
pub struct Server {
    /// Its configuration.
    pub config: ServerConfig,
    subprocess: SubprocessService,
    workspace: PathBuf,
    state: tokio::sync::Mutex<State>,
    restarts: AtomicU32,
    resources: AtomicBool,
    /// Set by a stdio connection's reader when the server sent a line over [`MAX_LINE`].
    oversized: Arc<AtomicBool>,
    /// Woken by each `tools/list_changed` notification, and when a restarted connection may
    /// offer different tools.
    pub changed: Arc<Notify>,
    /// Where its OAuth tokens are stored ([`Server::with_oauth`]).
    oauth: Option<crate::auth::TokenStore>,
    /// Where its elicitation requests go: to its calls running now ([`crate::elicit`]).
    pub elicit: crate::elicit::Route,
}

#[derive(Default)]
struct State {
    conn: Option<Conn>,
    disabled: Option<String>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("name", &self.config.name)
            .finish_non_exhaustive()
    }
}

impl Server {
    /// A server not started yet.
    pub fn new(config: ServerConfig, subprocess: SubprocessService, workspace: PathBuf) -> Self {
        Server {
            config,
            subprocess,
            workspace,
            state: tokio::sync::Mutex::new(State::default()),
            restarts: AtomicU32::new(0),
            resources: AtomicBool::new(false),
            oversized: Arc::new(AtomicBool::new(false)),
            changed: Arc::new(Notify::new()),
            oauth: None,
            elicit: crate::elicit::Route::default(),
        }
    }

    /// Connect and list its tools (bounded by the startup timeout); on the MCP runtime.
    pub async fn start(&self) -> Result<Vec<Tool>, StartFailure> {
        let mut state = self.state.lock().await;
        match self.connect().await {
            Ok(conn) => {
                let tools = conn.tools.clone();
                let resources = conn
                    .service
                    .peer()
                    .peer_info()
                    .is_some_and(|info| info.capabilities.resources.is_some());
                self.resources.store(resources, Ordering::Relaxed);
                state.conn = Some(conn);
                Ok(tools)
            }
            Err(f) => {
                state.disabled = Some(f.to_string());
                Err(f)
            }
        }
    }

    /// Connect (see [`Lifecycle`]): `server/discover` first unless a version is configured;
    /// a server whose handshake failed on the protocol (not by exiting, not by time) gets one
    /// more try with `initialize` on a new connection, within the same startup timeout.
    async fn connect(&self) -> Result<Conn, StartFailure> {
        let lifecycle = Lifecycle::of(&self.config);
        let limit = self.config.startup_timeout;
        let began = tokio::time::Instant::now();
        match self.connect_with(&lifecycle, limit).await {
            Ok(conn) => Ok(conn),
            Err((first, true)) if lifecycle == Lifecycle::Auto => {
                let left = limit.saturating_sub(began.elapsed());
                let legacy = Lifecycle::Initialize(ProtocolVersion::LATEST_WITH_INITIALIZE);
                self.connect_with(&legacy, left)
                    .await
                    .map_err(|(second, _)| StartFailure {
                        reason: format!(
                            "{}; initialize on a new connection failed too: {}",
                            first.reason, second.reason
                        ),
                        stderr_tail: second.stderr_tail,
                    })
            }
            Err((failure, _)) => Err(failure),
        }
    }

    /// One connection attempt with `lifecycle`, bounded by `limit`; on failure, whether it
    /// failed on the protocol (a retry with another lifecycle may work).
    async fn connect_with(
        &self,
        lifecycle: &Lifecycle,
        limit: Duration,
    ) -> Result<Conn, (StartFailure, bool)> {
        let handler = Handler {
            changed: self.changed.clone(),
            elicit: self.elicit.clone(),
            name: self.config.name.clone(),
            version: lifecycle.initialize_version(),
        };
        let mode = lifecycle.mode();
        match &self.config.transport {
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let dir = match cwd {
                    Some(c) if c.is_absolute() => c.clone(),
                    Some(c) => self.workspace.join(c),
                    None => self.workspace.clone(),
                };
                self.oversized.store(false, Ordering::Relaxed);
                let (reader, writer, mut child) = stdio::spawn(
                    &self.subprocess,
                    command,
                    args,
                    env,
                    &dir,
                    &self.config.name,
                    self.oversized.clone(),
                );
                // The reader ends the stream past MAX_LINE; the transport never sees more.
                let transport = AsyncRwTransport::new_client(reader, writer)
                    .with_max_line_length(MAX_LINE.saturating_add(1));
                let started = async {
                    let service = handler
                        .serve_with_lifecycle(transport, mode)
                        .await
                        .map_err(|e| (http::explain_init(&e), protocol_failure(&e)))?;
                    let tools =
                        service.peer().list_all_tools().await.map_err(|e| {
                            (format!("tools/list failed: {}", explain_call(&e)), false)
                        })?;
                    Ok::<_, (String, bool)>((service, tools))
                };
                let outcome = tokio::select! {
                    r = tokio::time::timeout(limit, started) => match r {
                        Ok(r) => r,
                        Err(_) => Err((format!(
                            "no answer to {} and tools/list within {} s (startup_timeout_sec)",
                            lifecycle.handshake(),
                            limit.as_secs_f64()
                        ), false)),
                    },
                    // It exited before it answered.
                    exit = &mut child.exit => return Err((exited(exit), false)),
                };
                match outcome {
                    Ok((service, tools)) => Ok(Conn {
                        service,
                        child: Some(child),
                        tools,
                    }),
                    Err((reason, retry)) => {
                        // A server that could not start or died closes the connection first:
                        // its exit (or the spawn error) says more than "connection closed".
                        let wait = if retry {
                            Duration::from_millis(100)
                        } else {
                            Duration::from_secs(1)
                        };
                        if let Ok(exit) = tokio::time::timeout(wait, &mut child.exit).await {
                            return Err((exited(exit), false));
                        }
                        child.kill.cancel();
                        let tail =
                            match tokio::time::timeout(Duration::from_secs(3), &mut child.exit)
                                .await
                            {
                                Ok(Ok(Ok(out))) => out.stderr.text().trim().to_owned(),
                                _ => String::new(),
                            };
                        Err((
                            StartFailure {
                                reason,
                                stderr_tail: tail,
                            },
                            retry,
                        ))
                    }
                }
            }
            Transport::Http {
                url,
                headers,
                bearer_token_env_var,
            } => {
                self.connect_http(
                    handler,
                    lifecycle,
                    limit,
                    url,
                    headers,
                    bearer_token_env_var.as_deref(),
                )
                .await
            }
        }
    }

    /// Call `tool` with `arguments`; bounded by the tool timeout and `cancel`.
    pub async fn call(
        &self,
        tool: &str,
        arguments: Option<JsonObject>,
        cancel: CancellationToken,
    ) -> Result<Value, CallFailure> {
        let peer = self.peer().await?;
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = arguments;
        let limit = self.config.tool_timeout;
        // Dropping the call future (timeout, cancel) sends notifications/cancelled.
        let outcome = tokio::select! {
            r = crate::elicit::call_tool(&peer, params, &self.elicit) => r,
            () = tokio::time::sleep(limit) => return Err(CallFailure::Timeout(limit)),
            () = cancel.cancelled() => return Err(CallFailure::Cancelled),
        };
        match outcome {
            Ok(result) => serde_json::to_value(&result)
                .map_err(|e| CallFailure::Broken(format!("unreadable result: {e}"))),
            Err(e) => {
                // A stdio server's transport closes with its process; a streamable HTTP
                // one stays open and answers the call with TransportClosed (its response
                // stream broke) or TransportSend (the POST failed).
                let broken = peer.is_transport_closed()
                    || matches!(
                        e,
                        ServiceError::TransportClosed | ServiceError::TransportSend(_)
                    );
                if broken {
                    self.drop_connection().await;
                    let why = if self.oversized.load(Ordering::Relaxed) {
                        format!(
                            "it sent a message over {} MiB, more than keel reads from a stdio \
                             server, so its connection was closed",
                            MAX_LINE >> 20
                        )
                    } else {
                        format!(
                            "the server went away during the call ({})",
                            http::explain(&e)
                        )
                    };
                    // The restarts used so far: each reconnection counts one.
                    let used = self.restarts.load(Ordering::Relaxed);
                    if used >= MAX_RESTARTS {
                        let disabled = format!(
                            "its connection broke {} times (restarted {MAX_RESTARTS} times); it \
                             is disabled for this session",
                            used + 1
                        );
                        self.state.lock().await.disabled = Some(disabled.clone());
                        Err(CallFailure::Broken(format!("{why}; {disabled}")))
                    } else {
                        let left = MAX_RESTARTS - used;
                        Err(CallFailure::Broken(format!(
                            "{why}; it is restarted on the next call (at most {left} more \
                             restart{})",
                            if left == 1 { "" } else { "s" }
                        )))
                    }
                } else {
                    Err(CallFailure::Broken(explain_call(&e)))
                }
            }
        }
    }

    /// The connection's peer, (re)connecting when the last connection broke (at most
    /// [`MAX_RESTARTS`] times, then the server is disabled).
    async fn peer(&self) -> Result<rmcp::Peer<RoleClient>, CallFailure> {
        let mut state = self.state.lock().await;
        if let Some(why) = &state.disabled {
            return Err(CallFailure::Disabled(why.clone()));
        }
        if state.conn.is_none() {
            let n = self.restarts.fetch_add(1, Ordering::Relaxed) + 1;
            if n > MAX_RESTARTS {
                let why = format!(
                    "its connection broke {} times (restarted {MAX_RESTARTS} times); it is \
                     disabled for this session",
                    MAX_RESTARTS + 1
                );
                state.disabled = Some(why.clone());
                return Err(CallFailure::Disabled(why));
            }
            match self.connect().await {
                Ok(conn) => {
                    state.conn = Some(conn);
                    self.changed.notify_one();
                }
                Err(f) => return Err(CallFailure::Broken(format!("restart {n} failed: {f}"))),
            }
        }
        match &state.conn {
            Some(c) => Ok(c.service.peer().clone()),
            None => Err(CallFailure::Broken("not connected".into())),
        }
    }

    /// Whether the server said at `initialize` that it offers resources.
    pub fn offers_resources(&self) -> bool {
        self.resources.load(Ordering::Relaxed)
    }

    /// Its resources (`resources/list`, every page) as JSON, bounded by the tool timeout.
    pub async fn list_resources(&self) -> Result<Value, CallFailure> {
        let peer = self.peer().await?;
        let limit = self.config.tool_timeout;
        match tokio::time::timeout(limit, peer.list_all_resources()).await {
            Err(_) => Err(CallFailure::Timeout(limit)),
            Ok(Err(e)) => Err(CallFailure::Broken(format!(
                "resources/list failed: {}",
                explain_call(&e)
            ))),
            Ok(Ok(list)) => serde_json::to_value(&list)
                .map_err(|e| CallFailure::Broken(format!("unreadable resources/list: {e}"))),
        }
    }

    /// The contents of resource `uri` (`resources/read`) as JSON, bounded by the tool timeout.
    pub async fn read_resource(&self, uri: &str) -> Result<Value, CallFailure> {
        let peer = self.peer().await?;
        let params: rmcp::model::ReadResourceRequestParams =
            serde_json::from_value(serde_json::json!({ "uri": uri }))
                .map_err(|e| CallFailure::Broken(e.to_string()))?;
        let limit = self.config.tool_timeout;
        match tokio::time::timeout(limit, peer.read_resource(params)).await {
            Err(_) => Err(CallFailure::Timeout(limit)),
            Ok(Err(e)) => Err(CallFailure::Broken(format!(
                "resources/read of {uri} failed: {}",
                explain_call(&e)
            ))),
            Ok(Ok(r)) => serde_json::to_value(&r)
                .map_err(|e| CallFailure::Broken(format!("unreadable resources/read: {e}"))),
        }
    }

    async fn drop_connection(&self) {
        let conn = self.state.lock().await.conn.take();
        if let Some(conn) = conn {
            if let Some(child) = &conn.child {
                child.kill.cancel();
            }
            let _ = conn.service.cancel().await;
        }
    }

    /// The server's prompts (`prompts/list`, every page), bounded by the startup timeout; empty
    /// when it does not offer prompts. `Err` when it is not connected or the listing failed.
    pub async fn prompts(&self) -> Result<Vec<Prompt>, PromptsError> {
        let peer = {
            let state = self.state.lock().await;
            match &state.conn {
                Some(c) => c.service.peer().clone(),
                None => {
                    return Err(match &state.disabled {
                        Some(why) => PromptsError::Disabled(why.clone()),
                        None => PromptsError::NotStarted,
                    });
                }
            }
        };
        let offers = peer
            .peer_info()
            .is_some_and(|info| info.capabilities.prompts.is_some());
        if !offers {
            return Ok(Vec::new());
        }
        let limit = self.config.startup_timeout;
        match tokio::time::timeout(limit, peer.list_all_prompts()).await {
            Ok(Ok(prompts)) => Ok(prompts),
            Ok(Err(e)) => Err(PromptsError::Failed(explain_call(&e))),
            Err(_) => Err(PromptsError::Timeout(limit)),
        }
    }

    /// The text of prompt `name` with `arguments` (`prompts/get`): its messages' text, in
    /// order, bounded by the tool timeout.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: serde_json::Map<String, Value>,
    ) -> Result<String, CallFailure> {
        let peer = self.peer().await?;
        let params: rmcp::model::GetPromptRequestParams =
            serde_json::from_value(serde_json::json!({ "name": name, "arguments": arguments }))
                .map_err(|e| CallFailure::Broken(e.to_string()))?;
        let limit = self.config.tool_timeout;
        let result = match tokio::time::timeout(limit, peer.get_prompt(params)).await {
            Err(_) => return Err(CallFailure::Timeout(limit)),
            Ok(Err(e)) => {
                return Err(CallFailure::Broken(format!(
                    "prompts/get {name} failed: {}",
                    explain_call(&e)
                )));
            }
            Ok(Ok(r)) => r,
        };
        let value = serde_json::to_value(&result.messages)
            .map_err(|e| CallFailure::Broken(format!("unreadable prompts/get: {e}")))?;
        let texts: Vec<String> = value
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m.pointer("/content/text").and_then(Value::as_str))
            .map(str::to_owned)
            .collect();
        Ok(texts.join("\n\n"))
    }

    /// End the connection and the server's process tree, waiting (a few seconds at most) for
    /// the process to exit. A later call starts it again (a restart).
    pub async fn stop(&self) {
        let conn = self.state.lock().await.conn.take();
        if let Some(conn) = conn {
            let _ = conn.service.cancel().await;
            if let Some(mut child) = conn.child {
                child.kill.cancel();
                let _ = tokio::time::timeout(Duration::from_secs(5), &mut child.exit).await;
            }
        }
    }

    /// The server's current tools (re-listed after a `list_changed`), bounded by the startup
    /// timeout; `None` when it is not connected or did not answer.
    pub async fn tools(&self) -> Option<Vec<Tool>> {
        let peer = {
            let state = self.state.lock().await;
            state.conn.as_ref()?.service.peer().clone()
        };
        tokio::time::timeout(self.config.startup_timeout, peer.list_all_tools())
            .await
            .ok()?
            .ok()
    }
}
