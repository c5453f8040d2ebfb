//! One ACP agent process and keel's client side of its conversation.
//!
//! ```text
//! subprocess service ─ argv, cwd, scrubbed env, time limit, process group
//!   stdin  ◄─ JSON-RPC lines (Lines transport ◄─ agent-client-protocol Client)
//!   stdout ─► LineBuffer ─► JSON lines to the Client; anything else is logged and skipped
//! Client: initialize (no fs, no terminal) ─► session/new {cwd} ─► session/prompt {prompt}
//!   session/update           ─► Account (log lines, answer) ─► plan reports
//!   session/request_permission ◄► the authority grant (permission.rs)
//!   cancel                   ─► session/cancel; the prompt's answer awaited for a grace
//!   steer                    ─► session/cancel, then session/prompt {guidance} on the session
//! the conversation ends ─► stdin closes ─► the agent gets a grace to exit, then its group is
//! killed.
//! ```

use crate::account::{Account, Report};
use crate::lines::{LineBuffer, Piece};
use crate::permission::{self, Grant, Verdict};
use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    CancelNotification, ClientCapabilities, ContentBlock, Implementation, InitializeRequest,
    NewSessionRequest, PromptRequest, RequestPermissionRequest, RequestPermissionResponse,
    SessionId, SessionNotification, StopReason, TextContent, ToolKind,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, Lines};
use keel_protocol::sync::Locked;
use keel_tools::subprocess::{CommandOutput, CommandSpec, OutputSink, RunEnd, SubprocessService};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// Longest stdout line read whole; a longer one is skipped.
const MAX_LINE: usize = 16 << 20;
/// How long the connection may still read after the agent's process ended.
const DRAIN: Duration = Duration::from_secs(2);

/// Guidance for the running agent, with the channel its outcome goes back on.
#[derive(Debug)]
pub struct Steer {
    /// The supervisor's words (the next prompt).
    pub text: String,
    /// Accepted once the new prompt is sent; refused when the turn would not stop.
    pub done: oneshot::Sender<SteerOutcome>,
}

/// The answer to a [`Steer`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SteerOutcome {
    /// The running turn stopped and the guidance was sent as the next prompt.
    Accepted,
    /// The agent did not take it.
    Refused {
        /// Why.
        detail: String,
    },
}

/// Why the session did not open (the message names the command and what happened).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NotOpened(pub String);

/// What one run needs.
pub struct Conversation {
    /// The command, with its argv, cwd, environment and time limit (stdin and stdout are the
    /// protocol's: set here).
    pub command: CommandSpec,
    /// The command as the person configured it, for messages (`keel acp`, `codex-acp`).
    pub shown: String,
    /// `session/new`'s working directory.
    pub cwd: PathBuf,
    /// The task.
    pub prompt: String,
    /// The authority permission requests are answered by.
    pub grant: Grant,
    /// Time for `initialize` and `session/new` together.
    pub handshake: Duration,
    /// Time a cancelled turn gets to answer, and the agent to exit after stdin closed.
    pub grace: Duration,
    /// Where the updates go.
    pub account: Arc<Account>,
    /// Plan reports, as they come.
    pub report: Arc<dyn Fn(Report) + Send + Sync>,
    /// Fired to cancel the conversation (a delegation's `job_kill`).
    pub cancel: CancellationToken,
    /// Steering.
    pub steers: mpsc::UnboundedReceiver<Steer>,
    /// Told `Ok` once the session is open, or the reason it could not be.
    pub opened: oneshot::Sender<Result<(), NotOpened>>,
}

/// How the conversation ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// The last prompt was answered with this stop reason.
    Stopped(StopReason),
    /// Cancelled by the supervisor (`job_kill`).
    Cancelled,
    /// It failed; the message names the command and what happened.
    Failed(String),
}

/// The conversation's own failure, before the process's end is known.
struct Broke {
    /// The protocol step that failed (`initialize`, `session/new`, `session/prompt`).
    step: &'static str,
    /// What the SDK or the agent said.
    message: String,
}

/// Run the agent and hold the conversation (see the module docs). Returns how it ended and
/// the ACP session id.
pub async fn run(sp: &SubprocessService, c: Conversation) -> (Ending, Option<String>) {
    let Conversation {
        command,
        shown,
        cwd,
        prompt,
        grant,
        handshake,
        grace,
        account,
        report,
        cancel,
        steers,
        opened,
    } = c;
    let (to_agent, stdin) = mpsc::unbounded_channel::<Vec<u8>>();
    let (lines_tx, lines_rx) = mpsc::unbounded_channel::<std::io::Result<String>>();
    let not_json: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
    let sink = {
        let buffer = Mutex::new(LineBuffer::new(MAX_LINE));
        let account = account.clone();
        let not_json = not_json.clone();
        OutputSink::new(move |bytes| {
            let mut buffer = buffer.locked();
            buffer.feed(bytes, |piece| match piece {
                Piece::Line(line) => {
                    if serde_json::from_slice::<serde::de::IgnoredAny>(line).is_ok() {
                        let _ = lines_tx.send(Ok(String::from_utf8_lossy(line).into_owned()));
                    } else if !line.iter().all(u8::is_ascii_whitespace) {
                        let text = String::from_utf8_lossy(line);
                        let shown: String = text.trim().chars().take(200).collect();
                        account.note(format!("(not JSON-RPC, skipped) {shown}"));
                        not_json.locked().get_or_insert(shown);
                    }
                }
                Piece::Oversized => {
                    account.note(format!("(a line over {MAX_LINE} bytes was skipped)"));
                }
            });
        })
    };
    let command = command.stdin_stream(stdin).tee_stdout(sink).spill(false);
    let kill = CancellationToken::new();
    let process = sp.run(command, &kill);

    let outgoing = futures::sink::unfold(to_agent, |tx, line: String| async move {
        let mut bytes = line.into_bytes();
        bytes.push(b'\n');
        tx.send(bytes).map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::BrokenPipe,
                "the agent's stdin is closed",
            )
        })?;
        Ok::<_, std::io::Error>(tx)
    });
    let incoming = futures::stream::unfold(lines_rx, |mut rx| async move {
        rx.recv().await.map(|line| (line, rx))
    });
    let transport = Lines::new(Box::pin(outgoing), Box::pin(incoming));
    let session_id: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
    let talk = talk(
        transport,
        Talk {
            cwd,
            prompt,
            grant,
            handshake,
            grace,
            account: account.clone(),
            report,
            cancel,
            steers,
            session_id: session_id.clone(),
        },
        opened,
    );
    tokio::pin!(process);
    tokio::pin!(talk);
    let (talked, out) = tokio::select! {
        (talked, opened) = &mut talk => {
            // Over: the transport is gone, so the agent's stdin is closed. It gets a grace to
            // exit by itself, then its process group is ended.
            let out = match tokio::time::timeout(grace, &mut process).await {
                Ok(out) => out,
                Err(_) => {
                    kill.cancel();
                    process.await
                }
            };
            (Some((talked, opened)), out)
        }
        out = &mut process => {
            let talked = tokio::time::timeout(DRAIN, &mut talk).await.ok();
            (talked, out)
        }
    };
    account.flush();
    let first_garbage = not_json.locked().clone();
    let (ending, opened) = match talked {
        Some((Ok(ending), opened)) => (ending, opened),
        Some((Err(broke), opened)) => (
            Ending::Failed(failure(&shown, &broke, &out, first_garbage.as_deref())),
            opened,
        ),
        None => {
            let broke = Broke {
                step: "session/prompt",
                message: "no answer after the agent ended".into(),
            };
            (
                Ending::Failed(failure(&shown, &broke, &out, first_garbage.as_deref())),
                None,
            )
        }
    };
    if let Some(opened) = opened {
        let why = match &ending {
            Ending::Failed(why) => why.clone(),
            Ending::Cancelled => {
                format!("cancelled before the ACP agent `{shown}` opened its session")
            }
            Ending::Stopped(_) => {
                format!("the ACP agent `{shown}` ended before its session opened")
            }
        };
        let _ = opened.send(Err(NotOpened(why)));
    }
    let id = session_id.locked().clone();
    (ending, id)
}

/// A message naming the command, the step and what the process did.
fn failure(
    shown: &str,
    broke: &Broke,
    out: &Result<CommandOutput, keel_tools::subprocess::SubprocessError>,
    not_json: Option<&str>,
) -> String {
    let step = broke.step;
    let mut why = match out {
        Err(e) => format!("cannot start the ACP agent `{shown}`: {e}"),
        Ok(out) => {
            let stderr = out.stderr.text();
            let stderr = stderr.trim();
            let tail: String = {
                let start = stderr.char_indices().rev().nth(600).map_or(0, |(i, _)| i);
                stderr[start..].to_owned()
            };
            let said = if tail.is_empty() {
                String::new()
            } else {
                format!("; its stderr ends: {tail}")
            };
            match (out.end, out.code) {
                (RunEnd::TimedOut, _) => format!(
                    "the ACP agent `{shown}` ran past its time limit of {} s and was stopped \
                     (during {step})",
                    out.duration.as_secs()
                ),
                (RunEnd::Exited, Some(code)) => {
                    format!("the ACP agent `{shown}` exited {code} during {step}{said}")
                }
                (RunEnd::Exited, None) => {
                    format!("the ACP agent `{shown}` was killed by a signal during {step}{said}")
                }
                (RunEnd::Cancelled, _) => format!(
                    "the ACP agent `{shown}` failed during {step} ({}) and was stopped{said}",
                    broke.message
                ),
            }
        }
    };
    if let Some(line) = not_json {
        why.push_str(&format!(
            "; it wrote to stdout what is not JSON-RPC (ACP needs stdout for the protocol \
             alone): {line}"
        ));
    } else if !matches!(out, Ok(o) if o.end == RunEnd::Cancelled) && !broke.message.is_empty() {
        why.push_str(&format!(" ({})", broke.message));
    }
    why
}

/// The client's half, moved into the connection.
struct Talk {
    cwd: PathBuf,
    prompt: String,
    grant: Grant,
    handshake: Duration,
    grace: Duration,
    account: Arc<Account>,
    report: Arc<dyn Fn(Report) + Send + Sync>,
    cancel: CancellationToken,
    steers: mpsc::UnboundedReceiver<Steer>,
    session_id: Arc<Mutex<Option<String>>>,
}

type Opened = Option<oneshot::Sender<Result<(), NotOpened>>>;

/// Connect as the client over `transport` and hold the conversation.
async fn talk(
    transport: impl agent_client_protocol::ConnectTo<Client> + 'static,
    t: Talk,
    opened: oneshot::Sender<Result<(), NotOpened>>,
) -> (Result<Ending, Broke>, Opened) {
    let updates = t.account.clone();
    let report = t.report.clone();
    let asked = t.account.clone();
    let grant = t.grant;
    let opened_slot = Arc::new(Mutex::new(Some(opened)));
    let slot = opened_slot.clone();
    let result = Client
        .v1()
        .name("keel")
        .on_receive_notification(
            async move |note: SessionNotification, _cx| {
                if let Some(r) = updates.update(&note.update) {
                    report(r);
                }
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |req: RequestPermissionRequest,
                        responder: Responder<RequestPermissionResponse>,
                        _cx| { responder.respond(decide(&asked, grant, &req)) },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_with(transport, async move |cx: ConnectionTo<Agent>| {
            Ok(converse(&cx, t, &slot).await)
        })
        .await;
    let opened = opened_slot.locked().take();
    match result {
        Ok(r) => (r, opened),
        Err(e) => (
            Err(Broke {
                step: "the connection",
                message: e.message,
            }),
            opened,
        ),
    }
}

/// The answer to one permission request, logged.
fn decide(
    account: &Account,
    grant: Grant,
    req: &RequestPermissionRequest,
) -> RequestPermissionResponse {
    let id = req.tool_call.tool_call_id.0.to_string();
    let known = account.call(&id);
    let kind = req
        .tool_call
        .fields
        .kind
        .or_else(|| known.as_ref().map(|k| k.0))
        .unwrap_or(ToolKind::Other);
    let title = req
        .tool_call
        .fields
        .title
        .clone()
        .or_else(|| known.map(|k| k.1))
        .unwrap_or(id);
    let verdict = permission::verdict(grant, &kind);
    account.note(format!(
        "permission {} ({} authority): {} {}",
        match verdict {
            Verdict::Allow => "allowed",
            Verdict::Reject => "rejected",
        },
        grant.as_str(),
        permission::kind_name(&kind),
        title.chars().take(160).collect::<String>()
    ));
    RequestPermissionResponse::new(permission::answer(verdict, &req.options))
}

fn text_prompt(session: &SessionId, text: String) -> PromptRequest {
    PromptRequest::new(
        session.clone(),
        vec![ContentBlock::Text(TextContent::new(text))],
    )
}

/// initialize → session/new → session/prompt, then steer or cancel until the last prompt
/// answers.
async fn converse(
    cx: &ConnectionTo<Agent>,
    mut t: Talk,
    opened: &Mutex<Opened>,
) -> Result<Ending, Broke> {
    let handshake = async {
        cx.send_request(
            InitializeRequest::new(ProtocolVersion::V1)
                .client_capabilities(ClientCapabilities::new())
                .client_info(Implementation::new("keel", env!("CARGO_PKG_VERSION"))),
        )
        .block_task()
        .await
        .map_err(|e| Broke {
            step: "initialize",
            message: e.message,
        })?;
        cx.send_request(NewSessionRequest::new(t.cwd.clone()))
            .block_task()
            .await
            .map_err(|e| Broke {
                step: "session/new",
                message: e.message,
            })
    };
    let session = tokio::select! {
        r = tokio::time::timeout(t.handshake, handshake) => match r {
            Ok(r) => r?.session_id,
            Err(_) => {
                return Err(Broke {
                    step: "initialize and session/new",
                    message: format!("no answer within {} s", t.handshake.as_secs()),
                });
            }
        },
        // Killed before its session opened: there is no turn to cancel.
        () = t.cancel.cancelled() => return Ok(Ending::Cancelled),
    };
    *t.session_id.locked() = Some(session.0.to_string());
    if let Some(tx) = opened.locked().take() {
        let _ = tx.send(Ok(()));
    }
    let mut text = std::mem::take(&mut t.prompt);
    loop {
        let answer = cx.send_request(text_prompt(&session, text)).block_task();
        tokio::pin!(answer);
        let steer = tokio::select! {
            r = &mut answer => {
                return r.map(|a| Ending::Stopped(a.stop_reason)).map_err(|e| Broke {
                    step: "session/prompt",
                    message: e.message,
                });
            }
            () = t.cancel.cancelled() => {
                t.account.note("cancelled: session/cancel sent".into());
                let _ = cx.send_notification(CancelNotification::new(session.clone()));
                let _ = tokio::time::timeout(t.grace, &mut answer).await;
                return Ok(Ending::Cancelled);
            }
            Some(steer) = t.steers.recv() => steer,
        };
        // Steering: stop the turn, then prompt the same session with the guidance.
        let _ = cx.send_notification(CancelNotification::new(session.clone()));
        match tokio::time::timeout(t.grace, &mut answer).await {
            Ok(_) => {
                t.account.note(format!(
                    "steered: {}",
                    steer.text.chars().take(160).collect::<String>()
                ));
                t.account.new_prompt();
                let _ = steer.done.send(SteerOutcome::Accepted);
                text = steer.text;
            }
            Err(_) => {
                let _ = steer.done.send(SteerOutcome::Refused {
                    detail: format!(
                        "the delegate did not stop its turn within {} s of session/cancel",
                        t.grace.as_secs()
                    ),
                });
                // It keeps running: wait for its own answer (or a cancel).
                tokio::select! {
                    r = &mut answer => {
                        return r.map(|a| Ending::Stopped(a.stop_reason)).map_err(|e| Broke {
                            step: "session/prompt",
                            message: e.message,
                        });
                    }
                    () = t.cancel.cancelled() => return Ok(Ending::Cancelled),
                }
            }
        }
    }
}
