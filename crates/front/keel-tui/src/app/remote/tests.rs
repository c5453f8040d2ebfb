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
