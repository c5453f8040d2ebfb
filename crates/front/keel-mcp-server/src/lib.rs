//! keel as an MCP server (`keel mcp-server`): a front end beside the terminal UI and ACP.
//!
//! Two tools let another agent (Claude Code, Codex, another keel) delegate to keel over stdio:
//!
//! - `keel` (`prompt`, and optionally `cwd`, `sandbox`, `approval`, `model`) runs a task in a
//!   new keel session and answers with the final text and the session id;
//! - `keel_reply` (`session_id`, `prompt`) continues such a session with another turn.
//!
//! This crate speaks the protocol and runs the turns; agents come from the front end's
//! [`AgentSource`] handed to [`serve_stdio`] (the `keel` binary's, built on `keel-host` like
//! every other front end's). Each call gets a [`TurnControl`]: a sink for [`ProgressUpdate`]s,
//! which become MCP progress notifications when the request carries a progress token, and a
//! cancellation token, cancelled when the client sends `notifications/cancelled` for the
//! request (or the server shuts down). [`drive`] runs an agent's queued turns under that
//! control and [`observe_progress`] turns the agent's session events into progress updates.
//!
//! Calls run concurrently, each in its own session; a session runs one turn at a time, so a
//! `keel_reply` to a session whose turn is still running is refused.

#![deny(missing_docs)]

mod drive;
mod handler;
mod runner;
mod tools;

pub use drive::{drive, observe_progress};
pub use handler::answer_result;
pub use keel_host::AgentSource;
pub use tools::{KEEL_TOOL, REPLY_TOOL, parse_reply, parse_task, tools};

use keel_agent::ApprovalPolicy;
use keel_host::SourceError;
use keel_protocol::{StepNo, TurnEndReason, TurnNo};
use keel_tools::SandboxMode;
use std::fmt;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// A new task: the `keel` tool's arguments, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRequest {
    /// What to do (not blank).
    pub prompt: String,
    /// The workspace root; relative to the server's working directory. `None`: the server's.
    pub cwd: Option<PathBuf>,
    /// Sandbox mode; `None`: as configured.
    pub sandbox: Option<SandboxMode>,
    /// Approval policy; `None`: as configured. `ask` cannot ask anyone over MCP, so calls that
    /// need approval are refused, as in any headless run.
    pub approval: Option<ApprovalPolicy>,
    /// Model name; `None`: as configured.
    pub model: Option<String>,
}

/// Another turn in a session: the `keel_reply` tool's arguments, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplyRequest {
    /// The session id a `keel` call answered with.
    pub session_id: String,
    /// What to say next (not blank).
    pub prompt: String,
}

/// How a call's turn ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The session the turn ran in.
    pub session_id: String,
    /// The last assistant text of the turn (may be empty).
    pub final_text: String,
    /// Why the turn ended; anything but `completed` makes the tool result an error.
    pub turn_end: TurnEndReason,
}

impl Answer {
    /// True when the turn completed normally.
    pub fn completed(&self) -> bool {
        self.turn_end == TurnEndReason::Completed
    }
}

/// What a running call reports as it goes: each one becomes an MCP progress notification (when
/// the client asked for progress) whose message is this value's [`fmt::Display`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProgressUpdate {
    /// The call's session exists (a new one, or the resumed one); reported before the turn
    /// starts, so a client can find the session even when it cancels the call.
    Started {
        /// The session id.
        session_id: String,
    },
    /// A step (one model request and its tool calls) opens.
    Step {
        /// Turn number.
        turn: TurnNo,
        /// Step number within the turn, from 1.
        step: StepNo,
    },
    /// A tool call starts.
    ToolCall {
        /// Tool name.
        name: String,
        /// Its arguments, shortened to one line.
        summary: String,
    },
    /// A tool call's result arrived.
    ToolResult {
        /// False when the tool reported an error.
        ok: bool,
        /// The first line of the result, shortened.
        summary: String,
    },
    /// A failed model request is retried.
    Retry {
        /// The failure code.
        code: String,
        /// Attempt number.
        attempt: u32,
    },
    /// The turn ended.
    TurnEnded {
        /// The reason's kind (`completed`, `aborted`, …).
        kind: String,
    },
    /// What a plugin's event shows ([`keel_protocol::present::Item::line`]): a notice, a
    /// marker, a child's progress, how a goal ended.
    Note(String),
}

impl fmt::Display for ProgressUpdate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProgressUpdate::Started { session_id } => write!(f, "session {session_id} started"),
            ProgressUpdate::Step { turn, step } => write!(f, "turn {turn} step {step}"),
            ProgressUpdate::ToolCall { name, summary } => write!(f, "→ {name} {summary}"),
            ProgressUpdate::ToolResult { ok: true, summary } => write!(f, "✓ {summary}"),
            ProgressUpdate::ToolResult { ok: false, summary } => write!(f, "✗ {summary}"),
            ProgressUpdate::Retry { code, attempt } => {
                write!(f, "model call failed ({code}), retry {attempt}")
            }
            ProgressUpdate::TurnEnded { kind } => write!(f, "turn ended: {kind}"),
            ProgressUpdate::Note(text) => f.write_str(text),
        }
    }
}

/// A call's controls, handed to the [`TaskRunner`]: report progress, and stop when cancelled.
#[derive(Clone)]
pub struct TurnControl {
    progress: Arc<dyn Fn(ProgressUpdate) + Send + Sync>,
    cancel: CancellationToken,
}

impl fmt::Debug for TurnControl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TurnControl")
            .field("cancelled", &self.cancel.is_cancelled())
            .finish_non_exhaustive()
    }
}

impl TurnControl {
    /// Controls reporting to `progress`, cancelled by `cancel`.
    pub fn new(
        progress: Arc<dyn Fn(ProgressUpdate) + Send + Sync>,
        cancel: CancellationToken,
    ) -> Self {
        TurnControl { progress, cancel }
    }

    /// Controls that report nowhere and are never cancelled (tests, embedding).
    pub fn detached() -> Self {
        TurnControl::new(Arc::new(|_| {}), CancellationToken::new())
    }

    /// Report `update`.
    pub fn report(&self, update: ProgressUpdate) {
        (self.progress)(update);
    }

    /// The call's cancellation token.
    pub fn cancel_token(&self) -> &CancellationToken {
        &self.cancel
    }

    /// True once the call is cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }
}

/// Runs the server's calls ([`runner::Runner`] over an [`AgentSource`]; tests use their own).
///
/// An `Err` is a failure before or around the turn (a bad `cwd`, a configuration error, an
/// unknown session): its text reaches the client as an error result. A turn that ran and ended
/// badly is an `Ok` [`Answer`] whose [`Answer::turn_end`] says why.
pub(crate) trait TaskRunner: Send + Sync + 'static {
    /// Run `task` in a new session.
    fn run(
        &self,
        task: TaskRequest,
        control: TurnControl,
    ) -> impl Future<Output = Result<Answer, SourceError>> + Send;

    /// Run another turn in an existing session.
    fn reply(
        &self,
        reply: ReplyRequest,
        control: TurnControl,
    ) -> impl Future<Output = Result<Answer, SourceError>> + Send;
}

/// Why the server could not serve.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The MCP handshake failed (the client went away, or spoke something else).
    #[error("MCP initialization failed: {0}")]
    Initialize(String),
    /// The service loop ended abnormally.
    #[error("the MCP service stopped: {0}")]
    Service(String),
}

/// How long [`serve_stdio`] waits, after the client closed the connection, for the turns it
/// cancelled to end (and write their `turn/end`).
pub const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// Serve the two tools over stdin/stdout, with agents from `source`, until the client closes
/// the connection; then cancel the calls still running and wait (at most [`SHUTDOWN_GRACE`])
/// for them to end. Must run in a Tokio runtime with IO and time enabled. Nothing else may
/// write to stdout meanwhile.
pub async fn serve_stdio<S: AgentSource + 'static>(source: S) -> Result<(), ServerError> {
    let server = handler::KeelServer::new(runner::Runner::new(source));
    let explained = handler::Explained(server.clone());
    let (input, output, written) = checked_stdio();
    let running = rmcp::ServiceExt::serve(explained, (input, output))
        .await
        .map_err(|e| ServerError::Initialize(e.to_string()))?;
    let quit = running.waiting().await;
    server.shutdown(SHUTDOWN_GRACE).await;
    // What rmcp wrote last reaches stdout before the process ends.
    let _ = tokio::time::timeout(SHUTDOWN_GRACE, written).await;
    quit.map(|_| ())
        .map_err(|e| ServerError::Service(e.to_string()))
}

/// stdin and stdout for rmcp, with one check between the client and it: an `initialize` whose
/// `protocolVersion` is not a string is answered here with -32602 naming what the client
/// sent (rmcp, which cannot parse it as an `initialize`, would only say that the request lacks
/// 2026-07-28's `_meta`), and never reaches rmcp. Both answer streams go to stdout a whole line
/// at a time. The handle ends when everything was written.
fn checked_stdio() -> (
    tokio::io::DuplexStream,
    tokio::io::DuplexStream,
    tokio::task::JoinHandle<()>,
) {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    const PIPE: usize = 256 * 1024;
    let (rmcp_in, mut feed) = tokio::io::duplex(PIPE);
    let (rmcp_out, drain) = tokio::io::duplex(PIPE);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();
    let written = tokio::spawn(async move {
        let mut out = tokio::io::stdout();
        while let Some(line) = rx.recv().await {
            if out.write_all(&line).await.is_err() || out.flush().await.is_err() {
                break;
            }
        }
    });
    let answers = tx.clone();
    tokio::spawn(async move {
        let mut lines = BufReader::new(drain).split(b'\n');
        while let Ok(Some(mut line)) = lines.next_segment().await {
            line.push(b'\n');
            if answers.send(line).is_err() {
                break;
            }
        }
    });
    tokio::spawn(async move {
        let mut lines = BufReader::new(tokio::io::stdin()).split(b'\n');
        while let Ok(Some(mut line)) = lines.next_segment().await {
            if let Some(refusal) = bad_initialize(&line) {
                let _ = tx.send(refusal);
                continue;
            }
            line.push(b'\n');
            if feed.write_all(&line).await.is_err() {
                break;
            }
        }
        // The client closed stdin: rmcp sees the end of its input.
        let _ = feed.shutdown().await;
    });
    (rmcp_in, rmcp_out, written)
}

/// The -32602 answer (a whole line) to an `initialize` request whose `protocolVersion` is
/// not a string, naming the client and what it sent; `None` for any other line.
fn bad_initialize(line: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(line).ok()?;
    if !text.contains("\"initialize\"") {
        return None;
    }
    let msg: serde_json::Value = serde_json::from_str(text).ok()?;
    if msg.get("method")?.as_str()? != "initialize" {
        return None;
    }
    let params = msg.get("params")?;
    let version = params.get("protocolVersion")?;
    if version.is_string() {
        return None;
    }
    let client = params
        .get("clientInfo")
        .and_then(|c| c.get("name"))
        .and_then(serde_json::Value::as_str)
        .map_or_else(|| "the client".to_owned(), |n| format!("client {n:?}"));
    let answer = serde_json::json!({
        "jsonrpc": "2.0",
        "id": msg.get("id").cloned().unwrap_or(serde_json::Value::Null),
        "error": {
            "code": -32602,
            "message": format!(
                "initialize: protocolVersion must be a version string such as \"2025-11-25\"; {client} sent {version}"
            ),
        },
    });
    let mut out = answer.to_string().into_bytes();
    out.push(b'\n');
    Some(out)
}
