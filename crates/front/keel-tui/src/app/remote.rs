//! `keel attach`: the UI on a session a running `keel serve` hosts, through its HTTP API
//! (docs/serve.md). The HTTP client is the front end's ([`ServerLink`], keel-cli's reqwest
//! client): this driver only says which route does what.
//!
//! The session's event stream (`GET …/events`) is read on the runtime: each log event goes into
//! a local mirror [`Session`] (what [`SessionDriver::with_session`] reads) and to the UI as
//! [`Msg::Agent`], exactly as the local driver's hook sends it; the first connection replays
//! the log, so the history shows as it was seen live. A stream that breaks is reconnected with
//! `Last-Event-ID` ([`follow`]), the UI told meanwhile ([`Msg::Link`]); a turn running on the
//! server that the UI did not start is announced ([`Msg::Woken`]) so that it shows running. The named messages `pending` and
//! `request` become the approval modal ([`Msg::Ask`]) or the question form ([`Msg::Question`]),
//! whose answer is posted back; `resolved` closes a modal answered elsewhere
//! ([`Msg::Resolved`]). Leaving never closes nor cancels the session: it keeps running on the
//! server.

use super::driver::{CommandDone, CommandRun, DriverError, SessionDriver};
use super::question::QuestionAsk;
use super::{Ask, Msg, Target};
use crate::slash::Slash;
use futures::future::BoxFuture;
use keel_agent::InboxMode;
use keel_agent::plugin::CommandChoice;
use keel_protocol::sync::Locked;
use keel_protocol::{EventBody, LogRecord, Question, SessionEvent, SessionHeader, SessionId};
use keel_session::Session;
use keel_tools::{ApprovalOutcome, UserAnswer};
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};

mod feed;
use feed::{Feed, follow};

/// One message of a session's event stream (Server-Sent Events).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamMessage {
    /// `id:` (a log event's seq).
    pub id: Option<String>,
    /// `event:` (`None` for a log event; `pending`, `request`, `resolved`).
    pub event: Option<String>,
    /// `data:` (JSON).
    pub data: String,
}

/// Where each message of an event stream goes.
pub type StreamSink = Box<dyn FnMut(StreamMessage) + Send>;

/// Why an event stream ended in error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamError {
    /// It broke, or could not be opened (what the person is told): tried again.
    Broken(String),
    /// The server's log ends before the `Last-Event-ID` given (its `beyond_log` answer): a
    /// server killed mid-write repaired the log's torn tail when it opened the session again.
    /// The session is followed again from the start of its log.
    BeyondLog(String),
}

/// The HTTP client of a `keel serve` (its URL and token are the link's): the front end's.
/// Errors are what the person is told.
pub trait ServerLink: Send + Sync {
    /// `GET path` (under the server's base URL): its JSON answer.
    fn get(&self, path: &str) -> BoxFuture<'static, Result<Value, String>>;
    /// `POST path` with a JSON body: its JSON answer (an error answer is an `Err`).
    fn post(&self, path: &str, body: Value) -> BoxFuture<'static, Result<Value, String>>;
    /// Read `GET path` (an event stream) until it ends, each message to `sink`; with
    /// `Last-Event-ID: last` when `last` is given (a reconnect: the stream starts after it).
    fn stream(
        &self,
        path: &str,
        last: Option<u64>,
        sink: StreamSink,
    ) -> BoxFuture<'static, Result<(), StreamError>>;
    /// The server as the person names it (`http://HOST:PORT`), for "reconnecting to …".
    fn shown(&self) -> String {
        "the keel server".into()
    }
}

/// The first wait before reconnecting a broken event stream; it doubles up to [`RETRY_MAX`].
const RETRY_MIN: std::time::Duration = std::time::Duration::from_millis(100);
/// The longest wait between two attempts to reconnect (and between two looks at a session
/// the server does not run, for when it runs again).
const RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(2);

/// What the driver needs to know about the session's turns, from its stream.
#[derive(Debug, Default, Clone)]
struct Turns {
    /// `turn/end` events seen.
    ends: u64,
    /// A turn is running (a `turn/start` without its end yet).
    running: bool,
    /// The server runs the session now (its live stream is connected: it began with
    /// `pending`); false while the stream reconnects, or while the session is stored there.
    live: bool,
}

/// A session of a `keel serve`.
pub(super) struct RemoteDriver {
    link: Arc<dyn ServerLink>,
    id: String,
    mirror: Arc<Mutex<Session>>,
    turns: tokio::sync::watch::Receiver<Turns>,
    /// The `turn/end` count [`SessionDriver::run_until_idle`] waits for.
    awaited: Arc<Mutex<u64>>,
    /// Calls the person allowed for the session: their answer is `allow_always`.
    always: Arc<Mutex<HashSet<String>>>,
    /// The mode to go back to when plan mode ends.
    before_plan: Mutex<Option<&'static str>>,
    tx: Sender<Msg>,
    runtime: tokio::runtime::Handle,
    cwd: PathBuf,
    stream: tokio::task::JoinHandle<()>,
    /// Wakes the stream's follower out of its wait (a message may have resumed the session).
    kick: Arc<tokio::sync::Notify>,
}

impl Drop for RemoteDriver {
    fn drop(&mut self) {
        // Detach: the session stays on the server.
        self.stream.abort();
    }
}

fn err(e: String) -> DriverError {
    DriverError::Remote(e)
}

impl RemoteDriver {
    /// Attach to session `id` (`None`: a new session in `cwd`, created on the server).
    pub(super) fn open(
        link: Arc<dyn ServerLink>,
        id: Option<String>,
        cwd: PathBuf,
        tx: &Sender<Msg>,
        runtime: tokio::runtime::Handle,
    ) -> Result<RemoteDriver, DriverError> {
        let id = match id {
            Some(id) => id,
            None => {
                let created = runtime
                    .block_on(
                        link.post("/api/v1/sessions", json!({ "cwd": cwd.to_string_lossy() })),
                    )
                    .map_err(err)?;
                created["id"]
                    .as_str()
                    .ok_or_else(|| err("the server created no session id".into()))?
                    .to_owned()
            }
        };
        let header = SessionHeader::new(
            SessionId(id.clone()),
            keel_protocol::time::now_ms(),
            Some(cwd.to_string_lossy().into_owned()),
        );
        let mirror = Arc::new(Mutex::new(Session::new(header)));
        let (turns_tx, turns) = tokio::sync::watch::channel(Turns::default());
        let always = Arc::new(Mutex::new(HashSet::new()));
        let feed = Arc::new(Feed {
            link: link.clone(),
            id: id.clone(),
            mirror: mirror.clone(),
            turns: turns_tx,
            always: always.clone(),
            tx: tx.clone(),
            runtime: runtime.clone(),
            last: Mutex::new(None),
            replay_upto: Mutex::new(None),
            got: AtomicBool::new(false),
            status_shown: AtomicBool::new(false),
            asked: Mutex::new(HashMap::new()),
        });
        let kick = Arc::new(tokio::sync::Notify::new());
        let stream = runtime.spawn(follow(link.clone(), feed, kick.clone()));
        Ok(RemoteDriver {
            link,
            id,
            mirror,
            turns,
            awaited: Arc::new(Mutex::new(0)),
            always,
            before_plan: Mutex::new(None),
            tx: tx.clone(),
            runtime,
            cwd,
            stream,
            kick,
        })
    }

    fn post(&self, route: &str, body: Value) -> Result<Value, DriverError> {
        let path = format!("/api/v1/sessions/{}/{route}", self.id);
        let answer = self
            .runtime
            .block_on(self.link.post(&path, body))
            .map_err(err)?;
        // A message resumes a session the server stored: follow it again now.
        self.kick.notify_waiters();
        Ok(answer)
    }

    /// A field of the session's state (`GET /api/v1/sessions/{id}`: what its agent runs with).
    fn state(&self, field: &str) -> Option<String> {
        let path = format!("/api/v1/sessions/{}", self.id);
        let state = self.runtime.block_on(self.link.get(&path)).ok()?;
        state[field].as_str().map(str::to_owned)
    }

    /// `/trust` on the server (see [`SessionDriver::trust`]).
    fn trust_there(&self, level: Option<keel_host::ProjectTrust>) -> Result<String, DriverError> {
        let cwd = SessionDriver::cwd(self).to_string_lossy().into_owned();
        let query = format!("/api/v1/trust?cwd={}", percent_encode(&cwd));
        let before = self.runtime.block_on(self.link.get(&query)).map_err(err)?;
        let server = self.link.shown();
        let Some(level) = level else {
            return Ok(trust_text(&before, &server, None));
        };
        let after = self
            .runtime
            .block_on(self.link.post(
                "/api/v1/trust",
                json!({ "cwd": cwd, "level": level.as_str() }),
            ))
            .map_err(err)?;
        let mut text = trust_text(&after, &server, Some(&before));
        if before["level"] != after["level"] {
            // The server keeps a hosted session's agent as it was built: closed, its next
            // message resumes it on an agent built with the decision.
            self.post("close", json!({}))?;
            text.push_str(&format!(
                "\nThe session was closed on the server so that the decision holds: your next \
                 message resumes it there on an agent built with it ({}).",
                self.id
            ));
        }
        Ok(text)
    }

    /// The last logged value of a mode event of the mirror.
    fn last_mode(&self, pick: fn(&EventBody) -> Option<String>) -> Option<String> {
        let mirror = self.mirror.locked();
        let mut last = None;
        for ev in mirror.events() {
            if let Some(v) = pick(&ev.body) {
                last = Some(v);
            }
        }
        last
    }
}

/// What a query value keeps as it is: letters, digits and `-_.~`.
const KEPT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

fn percent_encode(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, KEPT).to_string()
}

/// What `/trust` says of the server's answer (`GET`/`POST /api/v1/trust`: `root`, `level`,
/// `decided`, `source`, `files`); `before`: the answer before a decision was recorded.
fn trust_text(ws: &Value, server: &str, before: Option<&Value>) -> String {
    let root = ws["root"].as_str().unwrap_or("(this workspace)");
    let level = ws["level"].as_str().unwrap_or("untrusted");
    let how = match ws["source"]["kind"].as_str() {
        Some("recorded") => format!(
            "recorded in {}",
            ws["recordedIn"]
                .as_str()
                .or(ws["source"]["layer"].as_str())
                .unwrap_or("the server's configuration")
        ),
        Some("flag") => "by `keel serve --trust-project`".to_owned(),
        _ => "nobody decided".to_owned(),
    };
    let files: Vec<String> = ws["files"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| {
            let what: Vec<&str> = f["what"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let mut line = format!(
                "- {}: {}",
                f["file"].as_str().unwrap_or("?"),
                what.join(", ")
            );
            if let Some(change) = f["changed"].as_str() {
                line.push_str(&format!(" ({change} since trusted: inert)"));
            }
            line
        })
        .collect();
    let trusted = level == "trusted";
    let mut s = match before {
        None => format!("Workspace {root} (on the server at {server}): {level} ({how})"),
        Some(_) => format!("Workspace {root} is now {level} on the server at {server} ({how})."),
    };
    if files.is_empty() {
        s.push_str("\nIts files hold no hooks, MCP servers or settings that trust would change.");
        return s;
    }
    s.push_str(match before {
        None if trusted => "\nIn effect because it is trusted:",
        None => "\nIgnored until you trust it:",
        Some(b) if b["level"] == ws["level"] => "\nNothing changes in this session:",
        Some(_) if trusted => "\nFrom the session's next message these take effect:",
        Some(_) => "\nFrom the session's next message these stay inert:",
    });
    for line in files {
        s.push('\n');
        s.push_str(&line);
    }
    if before.is_none() {
        s.push_str("\n/trust yes trusts it · /trust no keeps its files inert (both are recorded on the server)");
    }
    s
}

impl<'s> SessionDriver<'s> for RemoteDriver {
    fn open(&self, target: &Target) -> Result<Box<dyn SessionDriver<'s> + 's>, DriverError> {
        // Another session of the same server: a stored one by its id (its file's stem), or a
        // new one in this workspace.
        let id = target.resume.as_ref().and_then(|p| {
            p.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .map(|s| s.trim_end_matches(".jsonl").to_owned())
        });
        let driver = RemoteDriver::open(
            self.link.clone(),
            id,
            self.cwd.clone(),
            &self.tx,
            self.runtime.clone(),
        )?;
        Ok(Box::new(driver))
    }

    fn session_id(&self) -> String {
        self.id.clone()
    }

    fn session_file(&self) -> PathBuf {
        // The server's path is not said; the id names the session there.
        PathBuf::from(format!("{}.jsonl", self.id))
    }

    fn cwd(&self) -> PathBuf {
        self.mirror
            .locked()
            .header()
            .cwd
            .as_ref()
            .map(PathBuf::from)
            .unwrap_or_else(|| self.cwd.clone())
    }

    fn sandbox(&self) -> String {
        if let Some(mode) = self.state("sandbox") {
            return mode;
        }
        self.last_mode(|b| match b {
            EventBody::SandboxMode(m) => Some(m.mode.clone()),
            _ => None,
        })
        .unwrap_or_else(|| "(the server's)".into())
    }

    fn model(&self) -> String {
        self.state("model").unwrap_or_default()
    }

    fn approval(&self) -> String {
        if let Some(policy) = self.state("approval") {
            return policy;
        }
        self.last_mode(|b| match b {
            EventBody::ApprovalPolicy(p) => Some(p.policy.clone()),
            _ => None,
        })
        .unwrap_or_else(|| "(the server's)".into())
    }

    fn replays_history(&self) -> bool {
        true
    }

    fn with_session(&self, read: &mut dyn FnMut(&Session)) {
        read(&self.mirror.locked());
    }

    fn slash(&self) -> Slash {
        // The server's commands (`GET …/commands`): its plugins' and its custom commands, run
        // there (`POST …/commands/{name}`); the built-in ones are the UI's own.
        let path = format!("/api/v1/sessions/{}/commands", self.id);
        let listed = self
            .runtime
            .block_on(self.link.get(&path))
            .unwrap_or_default();
        let externals: Vec<keel_agent::plugin::PluginCommand> = listed["commands"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["kind"] != "builtin")
            .filter_map(|c| {
                Some(keel_agent::plugin::PluginCommand {
                    name: c["name"].as_str()?.to_owned(),
                    description: c["description"].as_str().unwrap_or_default().to_owned(),
                    argument_hint: c["argumentHint"].as_str().map(str::to_owned),
                })
            })
            .collect();
        Slash::load(&self.cwd, None, &externals)
    }

    fn send(&self, mode: InboxMode, text: &str) -> Result<(), DriverError> {
        let delivery = match mode {
            InboxMode::Steer => "steer",
            _ => "queue",
        };
        if mode != InboxMode::Steer {
            let t = self.turns.borrow().clone();
            let mut awaited = self.awaited.locked();
            *awaited = (*awaited).max(t.ends) + if t.running { 2 } else { 1 };
        }
        self.post("messages", json!({ "text": text, "delivery": delivery }))?;
        Ok(())
    }

    fn run_until_idle(&self) -> BoxFuture<'static, Result<(), DriverError>> {
        let mut turns = self.turns.clone();
        let awaited = *self.awaited.locked();
        Box::pin(async move {
            loop {
                {
                    // Idle once the awaited turns ended; or when nothing runs and the server
                    // does not run the session (stored, or the stream reconnects): a turn that
                    // starts later shows as running again (`Msg::Woken`).
                    let t = turns.borrow_and_update();
                    if !t.running && (t.ends >= awaited || !t.live) {
                        return Ok(());
                    }
                }
                if turns.changed().await.is_err() {
                    return Ok(());
                }
            }
        })
    }

    fn has_pending_turn(&self) -> bool {
        // A turn runs on the server that the UI does not wait for yet (it ran when the UI
        // attached, or another client started it): the UI shows it running.
        self.turns.borrow().running
    }

    fn cancel(&self) {
        let _ = self.post("cancel", json!({}));
    }

    fn kill_jobs(&self) {}

    fn allow_for_session(&self, call: &keel_protocol::ToolCallBlock) {
        self.always.locked().insert(call.id.clone());
    }

    fn set_plan_mode(&self, on: bool) -> Result<(), DriverError> {
        let mode = if on {
            let now = self.state("mode");
            let before = if let Some(mode) = keel_host::modes::MODES
                .into_iter()
                .find(|m| now.as_deref() == Some(*m) && *m != keel_host::modes::MODE_PLAN)
            {
                mode
            } else if self.sandbox() == "read-only" {
                keel_host::modes::MODE_READ_ONLY
            } else if keel_agent::ApprovalPolicy::parse(&self.approval())
                == Some(keel_agent::ApprovalPolicy::Allow)
            {
                keel_host::modes::MODE_AUTO
            } else {
                keel_host::modes::MODE_DEFAULT
            };
            *self.before_plan.locked() = Some(before);
            keel_host::modes::MODE_PLAN
        } else {
            self.before_plan
                .locked()
                .take()
                .unwrap_or(keel_host::modes::MODE_DEFAULT)
        };
        self.post("mode", json!({ "mode": mode }))?;
        Ok(())
    }

    fn release(&self) -> Result<(), DriverError> {
        Ok(())
    }

    fn rebuild(&mut self, model: Option<String>) -> Result<(), DriverError> {
        match model {
            Some(model) => {
                self.post("model", json!({ "model": model }))?;
                Ok(())
            }
            None => Err(DriverError::Unavailable(
                "trust (the server decides what an attached session may run)".into(),
            )),
        }
    }

    fn keep_model(&self, _model: &str) -> Result<(), DriverError> {
        Ok(())
    }

    fn compact(&self) -> BoxFuture<'static, Result<(), DriverError>> {
        let link = self.link.clone();
        let path = format!("/api/v1/sessions/{}/commands/compact", self.id);
        Box::pin(async move {
            link.post(&path, json!({ "args": "" })).await.map_err(err)?;
            Ok(())
        })
    }

    fn fork(&self, at: Option<u64>) -> Result<PathBuf, DriverError> {
        let body = match at {
            Some(at) => json!({ "at": at }),
            None => json!({}),
        };
        let forked = self.post("fork", body)?;
        let id = forked["id"]
            .as_str()
            .ok_or_else(|| err("the server forked no session id".into()))?;
        Ok(PathBuf::from(format!("{id}.jsonl")))
    }

    fn command(&self, name: &str, args: &str) -> Result<CommandRun, DriverError> {
        let link = self.link.clone();
        let path = format!("/api/v1/sessions/{}/commands/{name}", self.id);
        let args = args.to_owned();
        Ok(CommandRun::Later(Box::pin(async move {
            let answer = link
                .post(&path, json!({ "args": args }))
                .await
                .map_err(err)?;
            Ok(
                match (answer["message"].as_str(), answer["prompt"].as_str()) {
                    (Some(message), _) => CommandDone::Said(message.to_owned()),
                    // The server queued the prompt as a turn already: said, not sent again.
                    (None, Some(_)) => CommandDone::Said("queued on the server".into()),
                    (None, None) => CommandDone::Said(answer.to_string()),
                },
            )
        })))
    }

    fn choices(&self, name: &str) -> Option<Vec<CommandChoice>> {
        let path = format!("/api/v1/sessions/{}/commands/{name}/choices", self.id);
        let listed = self.runtime.block_on(self.link.get(&path)).ok()?;
        let choices = listed["choices"]
            .as_array()?
            .iter()
            .map(|c| CommandChoice {
                args: c["args"].as_str().unwrap_or_default().to_owned(),
                label: c["label"].as_str().unwrap_or_default().to_owned(),
                detail: c["detail"].as_str().unwrap_or_default().to_owned(),
                seq: c["seq"].as_u64(),
                text: c["text"].as_str().map(str::to_owned),
            })
            .collect();
        Some(choices)
    }

    fn trust(&self, level: Option<keel_host::ProjectTrust>) -> Option<Result<String, DriverError>> {
        Some(self.trust_there(level))
    }

    fn trust_notice(&self) -> Option<Option<String>> {
        let cwd = SessionDriver::cwd(self).to_string_lossy().into_owned();
        let query = format!("/api/v1/trust?cwd={}", percent_encode(&cwd));
        // Not known (the server cannot be reached now): nothing said, rather than the local
        // configuration's word for what the server runs.
        let ws = self.runtime.block_on(self.link.get(&query)).ok();
        Some(ws.and_then(|ws| ws["notice"].as_str().map(str::to_owned)))
    }

    fn no_choices(&self) -> Option<String> {
        Some(
            "the server lists no choices for this command (its plugin is off there, or the \
             server could not be reached)"
                .into(),
        )
    }
}

#[cfg(test)]
mod tests;
