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
    ) -> BoxFuture<'static, Result<(), String>>;
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

/// Follow the session's event stream for as long as the UI shows it: when it breaks (the
/// server restarted, the connection reset) reconnect after a short wait (100 ms doubling to
/// 2 s) with `Last-Event-ID`, the last event shown, so nothing is lost or shown twice; the
/// person sees "reconnecting to …" meanwhile. A stream that ends (the server does not run the
/// session: it was closed, or the server restarted and stores it) is looked at again every
/// 2 s, or at once when a message is sent, for when the server runs it again.
async fn follow(link: Arc<dyn ServerLink>, feed: Arc<Feed>, kick: Arc<tokio::sync::Notify>) {
    let path = format!("/api/v1/sessions/{}/events", feed.id);
    let mut delay = RETRY_MIN;
    let mut stored_said = false;
    loop {
        feed.got.store(false, Ordering::SeqCst);
        let last = *feed.last.locked();
        let on = feed.clone();
        let sink: StreamSink = Box::new(move |m| on.message(m));
        let ended = link.stream(&path, last, sink).await;
        let got = feed.got.load(Ordering::SeqCst);
        let wait = match ended {
            Ok(()) => {
                // Not run there now: no turn runs (one the stored log left open died with
                // its server; the next message repairs and resumes the session).
                feed.turns.send_modify(|t| {
                    t.live = false;
                    t.running = false;
                });
                delay = RETRY_MIN;
                if !stored_said || got {
                    stored_said = true;
                    feed.status(Some(format!(
                        "session {} is not running on {} (closed, or the server restarted): \
                         your next message resumes it there",
                        feed.id,
                        link.shown()
                    )));
                }
                RETRY_MAX
            }
            Err(why) => {
                stored_said = false;
                feed.turns.send_modify(|t| t.live = false);
                if got {
                    // It was connected: the first retry comes soon again.
                    delay = RETRY_MIN;
                }
                feed.status(Some(format!(
                    "reconnecting to {} (Ctrl-D leaves) — {why}",
                    link.shown()
                )));
                let wait = delay;
                delay = (delay * 2).min(RETRY_MAX);
                wait
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = kick.notified() => {}
        }
    }
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

/// `text` for a URL's query: everything but the unreserved characters percent-encoded.
fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
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

/// What reads the event stream.
struct Feed {
    link: Arc<dyn ServerLink>,
    id: String,
    mirror: Arc<Mutex<Session>>,
    turns: tokio::sync::watch::Sender<Turns>,
    always: Arc<Mutex<HashSet<String>>>,
    tx: Sender<Msg>,
    runtime: tokio::runtime::Handle,
    /// The seq of the last log event shown: a reconnect's `Last-Event-ID`.
    last: Mutex<Option<u64>>,
    /// This connection of the stream sent something.
    got: AtomicBool,
    /// A status about the link shows ("reconnecting to …").
    status_shown: AtomicBool,
    /// Requests put to the person and not resolved yet, by `requestId`: their `callId` (a
    /// reconnect's `pending` lists those still open again).
    asked: Mutex<HashMap<String, String>>,
}

impl Feed {
    /// The link's status line (`None`: following the session, nothing to say).
    fn status(&self, text: Option<String>) {
        self.status_shown.store(text.is_some(), Ordering::SeqCst);
        let _ = self.tx.send(Msg::Link(text));
    }

    fn message(&self, m: StreamMessage) {
        self.got.store(true, Ordering::SeqCst);
        if self.status_shown.load(Ordering::SeqCst) {
            self.status(None);
        }
        match m.event.as_deref() {
            None | Some("message") => {
                let seq = m.id.as_deref().and_then(|id| id.trim().parse::<u64>().ok());
                let mut last = self.last.locked();
                // Shown already (a server that would send it again): not twice.
                if let (Some(seq), Some(shown)) = (seq, *last)
                    && seq <= shown
                {
                    return;
                }
                if seq.is_some() {
                    *last = seq;
                }
                drop(last);
                self.event(&m.data)
            }
            Some("pending") => {
                // The live stream begins with it: the server runs the session.
                self.turns.send_modify(|t| t.live = true);
                let data: Value = serde_json::from_str(&m.data).unwrap_or_default();
                let requests: Vec<&Value> =
                    data["requests"].as_array().into_iter().flatten().collect();
                // Asked before the stream broke and no longer open (answered elsewhere
                // meanwhile, or gone with a server that restarted): their modals close.
                let open: HashSet<&str> = requests
                    .iter()
                    .filter_map(|r| r["requestId"].as_str())
                    .collect();
                let gone: Vec<String> = {
                    let mut asked = self.asked.locked();
                    let ids: Vec<String> = asked
                        .keys()
                        .filter(|id| !open.contains(id.as_str()))
                        .cloned()
                        .collect();
                    ids.iter().filter_map(|id| asked.remove(id)).collect()
                };
                for call in gone {
                    let _ = self.tx.send(Msg::Resolved(call));
                }
                for request in requests {
                    self.request(request);
                }
            }
            Some("request") => {
                let request: Value = serde_json::from_str(&m.data).unwrap_or_default();
                self.request(&request);
            }
            Some("resolved") => {
                let data: Value = serde_json::from_str(&m.data).unwrap_or_default();
                if let Some(request) = data["requestId"].as_str() {
                    self.asked.locked().remove(request);
                }
                if let Some(call) = data["callId"].as_str() {
                    let _ = self.tx.send(Msg::Resolved(call.to_owned()));
                }
            }
            Some(_) => {}
        }
    }

    fn event(&self, data: &str) {
        let event: SessionEvent = match keel_session::store::parse_record(data) {
            Ok(LogRecord::Event(event)) => event,
            Ok(LogRecord::Header(header)) => {
                *self.mirror.locked() = Session::new(header);
                return;
            }
            Ok(_) => return,
            Err(e) => {
                let _ = self.tx.send(Msg::Show(crate::cells::Cell::Notice(
                    crate::cells::Level::Error,
                    format!("the server sent an event keel cannot read ({e})"),
                )));
                return;
            }
        };
        // The mirror may start later than the log (a fork's inherited events): what it
        // refuses is still shown.
        let _ = self.mirror.locked().append(event.clone());
        let started = matches!(event.body, EventBody::TurnStart(_));
        match &event.body {
            EventBody::TurnStart(_) => self.turns.send_modify(|t| t.running = true),
            EventBody::TurnEnd(_) => self.turns.send_modify(|t| {
                t.running = false;
                t.ends += 1;
            }),
            _ => {}
        }
        let _ = self.tx.send(Msg::Agent(Box::new(event)));
        if started {
            // A turn the UI did not start (running when it attached, or another client's):
            // shown as running, so that Ctrl-C cancels it ([`SessionDriver::has_pending_turn`]).
            let _ = self.tx.send(Msg::Woken);
        }
    }

    /// A request of the server: the UI's modal or form; its answer posted back.
    fn request(&self, request: &Value) {
        let Some(request_id) = request["requestId"].as_str() else {
            return;
        };
        let call_id = request["callId"].as_str().unwrap_or_default().to_owned();
        // Listed again by a reconnect's `pending`: its modal is open already.
        if self
            .asked
            .locked()
            .insert(request_id.to_owned(), call_id.clone())
            .is_some()
        {
            return;
        }
        let base = format!("/api/v1/sessions/{}", self.id);
        let link = self.link.clone();
        match request["kind"].as_str() {
            Some("question") => {
                let questions: Vec<Question> =
                    serde_json::from_value(request["questions"].clone()).unwrap_or_default();
                let (reply, answer) = tokio::sync::oneshot::channel();
                let _ = self.tx.send(Msg::Question(QuestionAsk {
                    questions,
                    reply,
                    call_id: Some(call_id),
                }));
                let path = format!("{base}/questions/{request_id}");
                self.runtime.spawn(async move {
                    let body = match answer.await {
                        Ok(UserAnswer::Answered(answers)) => json!({ "answers": answers }),
                        Ok(UserAnswer::Declined { reason }) => {
                            json!({ "declined": true, "note": reason })
                        }
                        // Closed here (detached, or answered elsewhere): another client may.
                        Ok(UserAnswer::Unanswered { .. }) | Err(_) => return,
                    };
                    let _ = link.post(&path, body).await;
                });
            }
            _ => {
                let arguments = match &request["arguments"] {
                    Value::String(s) => s.clone(),
                    Value::Null => String::new(),
                    other => other.to_string(),
                };
                let call = keel_protocol::ToolCallBlock {
                    id: call_id.clone(),
                    name: request["tool"].as_str().unwrap_or("tool").to_owned(),
                    arguments,
                };
                let (reply, answer) = tokio::sync::oneshot::channel();
                let _ = self.tx.send(Msg::Ask(Ask {
                    call,
                    reason: request["reason"].as_str().unwrap_or_default().to_owned(),
                    reply,
                }));
                let path = format!("{base}/approvals/{request_id}");
                let always = self.always.clone();
                self.runtime.spawn(async move {
                    let body = match answer.await {
                        Ok(ApprovalOutcome::Approved) => {
                            if always.locked().remove(&call_id) {
                                json!({ "decision": "allow_always" })
                            } else {
                                json!({ "decision": "allow" })
                            }
                        }
                        Ok(ApprovalOutcome::Denied { reason }) => {
                            json!({ "decision": "deny", "note": reason })
                        }
                        Ok(_) | Err(_) => return,
                    };
                    let _ = link.post(&path, body).await;
                });
            }
        }
    }
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
            } else if self.approval() == "auto" {
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

    fn no_choices(&self) -> Option<String> {
        Some(
            "the server lists no choices for this command (its plugin is off there, or the \
             server could not be reached)"
                .into(),
        )
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A server that streams `events` (then ends the stream) and records every POST.
    struct Fake {
        events: Vec<String>,
        posts: Arc<Mutex<Vec<(String, Value)>>>,
    }

    impl ServerLink for Fake {
        fn get(&self, _path: &str) -> BoxFuture<'static, Result<Value, String>> {
            Box::pin(async { Ok(json!({ "commands": [] })) })
        }
        fn post(&self, path: &str, body: Value) -> BoxFuture<'static, Result<Value, String>> {
            self.posts.locked().push((path.to_owned(), body));
            Box::pin(async { Ok(json!({})) })
        }
        fn stream(
            &self,
            _path: &str,
            _last: Option<u64>,
            mut sink: StreamSink,
        ) -> BoxFuture<'static, Result<(), String>> {
            let events = self.events.clone();
            Box::pin(async move {
                for data in events {
                    sink(StreamMessage {
                        id: None,
                        event: None,
                        data,
                    });
                }
                Ok(())
            })
        }
    }

    #[test]
    fn leaving_plan_mode_restores_a_read_only_session_and_detaching_posts_nothing() {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let posts = Arc::new(Mutex::new(Vec::new()));
        let link = Arc::new(Fake {
            events: vec![
                r#"{"type":"sandbox/mode","seq":0,"time":1,"data":{"mode":"read-only"}}"#.into(),
            ],
            posts: posts.clone(),
        });
        let (tx, rx) = std::sync::mpsc::channel();
        let driver = RemoteDriver::open(
            link,
            Some("s1".into()),
            PathBuf::from("/ws"),
            &tx,
            runtime.handle().clone(),
        )
        .unwrap();
        // The mode event reaches the UI (and the mirror) before the stream's end.
        let first = rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap();
        assert!(matches!(first, Msg::Agent(_)));
        assert_eq!(SessionDriver::sandbox(&driver), "read-only");
        SessionDriver::set_plan_mode(&driver, true).unwrap();
        SessionDriver::set_plan_mode(&driver, false).unwrap();
        drop(driver);
        let posts = posts.locked().clone();
        assert_eq!(
            posts,
            vec![
                (
                    "/api/v1/sessions/s1/mode".to_owned(),
                    json!({ "mode": "plan" })
                ),
                (
                    "/api/v1/sessions/s1/mode".to_owned(),
                    json!({ "mode": "read-only" })
                ),
            ]
        );
    }

    /// A server whose event stream breaks: each connection sends its batch of `(seq, event)`
    /// then fails, the last one ends; each connection's `Last-Event-ID` is recorded.
    struct Breaking {
        batches: Mutex<std::collections::VecDeque<Vec<(u64, String)>>>,
        lasts: Arc<Mutex<Vec<Option<u64>>>>,
    }

    impl ServerLink for Breaking {
        fn get(&self, _path: &str) -> BoxFuture<'static, Result<Value, String>> {
            Box::pin(async { Ok(json!({ "commands": [] })) })
        }
        fn post(&self, _path: &str, _body: Value) -> BoxFuture<'static, Result<Value, String>> {
            Box::pin(async { Ok(json!({})) })
        }
        fn stream(
            &self,
            _path: &str,
            last: Option<u64>,
            mut sink: StreamSink,
        ) -> BoxFuture<'static, Result<(), String>> {
            let first = {
                let mut lasts = self.lasts.locked();
                lasts.push(last);
                lasts.len() == 1
            };
            let batch = self.batches.locked().pop_front();
            Box::pin(async move {
                let Some(batch) = batch else {
                    // Stays connected, silent.
                    futures::future::pending::<()>().await;
                    return Ok(());
                };
                // The first connection's request is gone by the second.
                let pending = if first {
                    r#"{"requests":[{"requestId":"r1","callId":"c1","kind":"approval","tool":"bash","arguments":{"command":"ls"},"reason":"asks"}]}"#
                } else {
                    r#"{"requests":[]}"#
                };
                sink(StreamMessage {
                    id: None,
                    event: Some("pending".into()),
                    data: pending.into(),
                });
                for (seq, data) in batch {
                    sink(StreamMessage {
                        id: Some(seq.to_string()),
                        event: None,
                        data,
                    });
                }
                Err("connection reset".into())
            })
        }
        fn shown(&self) -> String {
            "http://127.0.0.1:1".into()
        }
    }

    fn event(seq: u64, kind: &str) -> (u64, String) {
        let data = match kind {
            "start" => {
                format!(r#"{{"type":"turn/start","seq":{seq},"time":1,"data":{{"turn":1}}}}"#)
            }
            _ => format!(
                r#"{{"type":"sandbox/mode","seq":{seq},"time":1,"data":{{"mode":"m{seq}"}}}}"#
            ),
        };
        (seq, data)
    }

    #[test]
    fn a_broken_stream_reconnects_after_the_last_event_shown_and_shows_none_twice() {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let lasts = Arc::new(Mutex::new(Vec::new()));
        let link = Arc::new(Breaking {
            batches: Mutex::new(
                vec![
                    vec![event(0, "mode"), event(1, "start")],
                    vec![],
                    // A server that sends an event again: shown once.
                    vec![event(1, "start"), event(2, "mode")],
                ]
                .into(),
            ),
            lasts: lasts.clone(),
        });
        let (tx, rx) = std::sync::mpsc::channel();
        let driver = RemoteDriver::open(
            link,
            Some("s1".into()),
            PathBuf::from("/ws"),
            &tx,
            runtime.handle().clone(),
        )
        .unwrap();
        let mut seqs = Vec::new();
        let mut said = Vec::new();
        let mut woken = 0;
        let (mut asked, mut closed) = (Vec::new(), Vec::new());
        while seqs.len() < 3 {
            match rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap() {
                Msg::Agent(ev) => seqs.push(ev.seq.0),
                Msg::Link(text) => said.push(text),
                Msg::Woken => woken += 1,
                Msg::Ask(ask) => asked.push(ask.call.id),
                Msg::Resolved(call) => closed.push(call),
                _ => {}
            }
        }
        assert_eq!(seqs, vec![0, 1, 2]);
        // The request asked once, and its modal closed when a reconnect no longer lists it.
        assert_eq!(
            (asked, closed),
            (vec!["c1".to_owned()], vec!["c1".to_owned()])
        );
        assert_eq!(woken, 1, "the running turn is announced once");
        // Running (a turn/start without its end): the UI shows it running.
        assert!(SessionDriver::has_pending_turn(&driver));
        // (A fourth connection, after 2, may have begun already.)
        assert_eq!(lasts.locked()[..3], [None, Some(1), Some(1)]);
        assert!(
            said.iter().any(|s| s
                .as_deref()
                .is_some_and(|s| s.starts_with("reconnecting to http://127.0.0.1:1"))),
            "{said:?}"
        );
        assert!(said.contains(&None), "{said:?}");
    }
}
