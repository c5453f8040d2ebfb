//! The remote driver against a fake server link.

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
    ) -> BoxFuture<'static, Result<(), StreamError>> {
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
    ) -> BoxFuture<'static, Result<(), StreamError>> {
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
            Err(StreamError::Broken("connection reset".into()))
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
        "new" => {
            format!(r#"{{"type":"sandbox/mode","seq":{seq},"time":1,"data":{{"mode":"mnew"}}}}"#)
        }
        _ => {
            format!(r#"{{"type":"sandbox/mode","seq":{seq},"time":1,"data":{{"mode":"m{seq}"}}}}"#)
        }
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

/// A server that restarted and repaired the session's log: it lost the torn tail (seq 2 and 3)
/// that the first connection sent. The second connection, after seq 3, is refused
/// `beyond_log`; the log then holds two events and goes on with a new seq 2.
struct Repaired {
    lasts: Arc<Mutex<Vec<Option<u64>>>>,
    gets: Arc<Mutex<Vec<String>>>,
}

impl ServerLink for Repaired {
    fn get(&self, path: &str) -> BoxFuture<'static, Result<Value, String>> {
        self.gets.locked().push(path.to_owned());
        Box::pin(async { Ok(json!({ "id": "s1", "status": "stored", "events": 2 })) })
    }
    fn post(&self, _path: &str, _body: Value) -> BoxFuture<'static, Result<Value, String>> {
        Box::pin(async { Ok(json!({})) })
    }
    fn stream(
        &self,
        _path: &str,
        last: Option<u64>,
        mut sink: StreamSink,
    ) -> BoxFuture<'static, Result<(), StreamError>> {
        let connection = {
            let mut lasts = self.lasts.locked();
            lasts.push(last);
            lasts.len()
        };
        Box::pin(async move {
            let batch = match connection {
                1 => vec![
                    event(0, "mode"),
                    event(1, "start"),
                    event(2, "mode"),
                    event(3, "mode"),
                ],
                2 => return Err(StreamError::BeyondLog("no event 4 yet".into())),
                3 => vec![event(0, "mode"), event(1, "start"), event(2, "new")],
                _ => {
                    futures::future::pending::<()>().await;
                    return Ok(());
                }
            };
            for (seq, data) in batch {
                sink(StreamMessage {
                    id: Some(seq.to_string()),
                    event: None,
                    data,
                });
            }
            if connection == 1 {
                return Err(StreamError::Broken("connection reset".into()));
            }
            futures::future::pending::<()>().await;
            Ok(())
        })
    }
}

#[test]
fn a_log_repaired_shorter_than_what_was_shown_is_followed_again_from_its_end() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (lasts, gets) = (
        Arc::new(Mutex::new(Vec::new())),
        Arc::new(Mutex::new(Vec::new())),
    );
    let link = Arc::new(Repaired {
        lasts: lasts.clone(),
        gets: gets.clone(),
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
    let mut shown = Vec::new();
    let mut notices = Vec::new();
    while shown.len() < 5 {
        match rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap() {
            Msg::Agent(ev) => {
                let mode = match &ev.body {
                    EventBody::SandboxMode(m) => m.mode.clone(),
                    _ => "turn".into(),
                };
                shown.push((ev.seq.0, mode));
            }
            Msg::Show(crate::cells::Cell::Notice(_, text)) => {
                notices.push((shown.len(), text));
            }
            _ => {}
        }
    }
    // Seq 0 and 1 are not shown twice; the new seq 2 is shown after the notice.
    let expected: Vec<(u64, String)> = vec![
        (0, "m0".into()),
        (1, "turn".into()),
        (2, "m2".into()),
        (3, "m3".into()),
        (2, "mnew".into()),
    ];
    assert_eq!(shown, expected);
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert_eq!(notices[0].0, 4, "the notice comes before the new events");
    assert!(
        notices[0].1.contains("ends at seq 1") && notices[0].1.contains("(seq 3)"),
        "{}",
        notices[0].1
    );
    assert_eq!(lasts.locked()[..3], [None, Some(3), None]);
    assert_eq!(gets.locked().as_slice(), ["/api/v1/sessions/s1"]);
    // The mirror is the server's log now: three events, a turn running (seq 1's start).
    assert_eq!(SessionDriver::sandbox(&driver), "mnew");
    assert!(SessionDriver::has_pending_turn(&driver));
}
