//! Following a session's event stream: the reconnecting loop ([`follow`]) and what reads each
//! connection ([`Feed`]) into the mirror and the UI.

use super::*;

/// Follow the session's event stream for as long as the UI shows it: when it breaks (the
/// server restarted, the connection reset) reconnect after a short wait (100 ms doubling to
/// 2 s) with `Last-Event-ID`, the last event shown, so nothing is lost or shown twice; the
/// person sees "reconnecting to …" meanwhile. A stream that ends (the server does not run the
/// session: it was closed, or the server restarted and stores it) is looked at again every
/// 2 s, or at once when a message is sent, for when the server runs it again.
pub(super) async fn follow(
    link: Arc<dyn ServerLink>,
    feed: Arc<Feed>,
    kick: Arc<tokio::sync::Notify>,
) {
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
            Err(StreamError::BeyondLog(why)) => {
                stored_said = false;
                match link.get(&format!("/api/v1/sessions/{}", feed.id)).await {
                    Ok(state) if state["events"].as_u64().is_some() => {
                        feed.follow_again(state["events"].as_u64().unwrap_or(0));
                        std::time::Duration::ZERO
                    }
                    // Not known now: tried again as a broken stream is.
                    _ => {
                        feed.status(Some(format!(
                            "reconnecting to {} (Ctrl-D leaves) — {why}",
                            link.shown()
                        )));
                        RETRY_MAX
                    }
                }
            }
            Err(StreamError::Broken(why)) => {
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

/// What reads the event stream.
pub(super) struct Feed {
    pub(super) link: Arc<dyn ServerLink>,
    pub(super) id: String,
    pub(super) mirror: Arc<Mutex<Session>>,
    pub(super) turns: tokio::sync::watch::Sender<Turns>,
    pub(super) always: Arc<Mutex<HashSet<String>>>,
    pub(super) tx: Sender<Msg>,
    pub(super) runtime: tokio::runtime::Handle,
    /// The seq of the last log event shown: a reconnect's `Last-Event-ID`.
    pub(super) last: Mutex<Option<u64>>,
    /// Following the session again from the start of its log ([`Feed::follow_again`]): the
    /// events up to this seq were shown already; they go to the mirror only.
    pub(super) replay_upto: Mutex<Option<u64>>,
    /// This connection of the stream sent something.
    pub(super) got: AtomicBool,
    /// A status about the link shows ("reconnecting to …").
    pub(super) status_shown: AtomicBool,
    /// Requests put to the person and not resolved yet, by `requestId`: their `callId` (a
    /// reconnect's `pending` lists those still open again).
    pub(super) asked: Mutex<HashMap<String, String>>,
}

impl Feed {
    /// The link's status line (`None`: following the session, nothing to say).
    fn status(&self, text: Option<String>) {
        self.status_shown.store(text.is_some(), Ordering::SeqCst);
        let _ = self.tx.send(Msg::Link(text));
    }

    /// The server's log holds `events` events, fewer than this terminal showed (a repair
    /// after a crash cut its torn tail): follow it again from its start, into a new mirror,
    /// showing only what comes after its end now, and tell the person that what was shown
    /// after it is gone.
    fn follow_again(&self, events: u64) {
        let end = events.checked_sub(1);
        let shown = self.last.locked().take();
        *self.replay_upto.locked() = end;
        {
            let mut mirror = self.mirror.locked();
            let header = mirror.header().clone();
            *mirror = Session::new(header);
        }
        self.turns.send_modify(|t| t.running = false);
        let upto = end.map_or_else(|| "no event".to_owned(), |seq| format!("seq {seq}"));
        let _ = self.tx.send(Msg::Show(crate::cells::Cell::Notice(
            crate::cells::Level::Info,
            format!(
                "the server's log of session {} ends at {upto}, before what was shown here \
                 (seq {}): a log repaired after a crash loses its unfinished tail, so what was \
                 shown after {upto} is no longer part of the session; following it from there",
                self.id,
                shown.map_or_else(|| "?".to_owned(), |s| s.to_string()),
            ),
        )));
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
        if self
            .replay_upto
            .locked()
            .is_some_and(|upto| event.seq.0 <= upto)
        {
            // Shown already, before the log was followed again: whether a turn runs only.
            match &event.body {
                EventBody::TurnStart(_) => self.turns.send_modify(|t| t.running = true),
                EventBody::TurnEnd(_) => self.turns.send_modify(|t| t.running = false),
                _ => {}
            }
            return;
        }
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
