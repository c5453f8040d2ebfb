//! `GET /api/v1/sessions/{id}/events`: a session's log as Server-Sent Events. Each message is
//! one event: `id:` its seq, `data:` the event's JSON exactly as `keel run --json` prints it.
//! First the log after `?after=SEQ` (or after the `Last-Event-ID` a reconnecting client sends,
//! which wins), then, for a live session, each event as it is appended.
//!
//! The stream reads the log itself: the agent's event hook only announces seqs on a bounded
//! broadcast channel, which the stream subscribes to before it reads. A stream that falls
//! behind (a client that stops reading) lags on that channel and catches up from the log, so
//! the agent never waits for a client and no event is lost or sent twice. The stream of a
//! stored session (not hosted live) sends its log and ends, and so does the stream of a live
//! session once it is closed; a stream that starts at the end of a stored log whose file is
//! unchanged since a stream read it ([`StoredEnds`]) ends at once without reading the file (an
//! attached terminal looks again every 2 s). A start beyond the log's end (an
//! `after` or `Last-Event-ID` naming an event the log does not have) is a 400.
//!
//! With `?present=true` the stream also carries the plugins' items, each list just before the
//! event that showed it ([`crate::present`]).
//!
//! A live session's stream also carries its approvals and questions ([`crate::requests`]) as
//! named messages without `id:`: first `event: pending` with every open request
//! (`{"requests": […]}`, so a client that connects or reconnects late sees what waits for an
//! answer), then `event: request` for each request opened and `event: resolved` for each
//! request resolved, in order, none lost.

use crate::hub::Live;
use crate::requests::Note;
use crate::{ApiError, App};
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use keel_protocol::Seq;
use keel_protocol::sync::Locked;
use keel_session::Session;
use serde::Deserialize;
use serde_json::json;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use tokio::sync::{broadcast, watch};

/// Events read from the log under one hold of its lock.
const BATCH: u64 = 256;

/// The query of the events route.
#[derive(Debug, Default, Deserialize)]
pub struct EventsQuery {
    /// Start after this seq (exclusive); from the first event when absent.
    pub after: Option<u64>,
    /// Also send the plugins' items (`event: present`, [`crate::present`]).
    #[serde(default)]
    pub present: bool,
}

/// The route's handler.
pub(crate) async fn events(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    query: Result<Query<EventsQuery>, axum::extract::rejection::QueryRejection>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let last = match headers.get("last-event-id") {
        Some(v) => Some(
            v.to_str()
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
                .ok_or_else(|| ApiError::bad_request("Last-Event-ID must be an event seq"))?,
        ),
        None => None,
    };
    let next = last.or(query.after).map_or(0, |seq| seq.saturating_add(1));
    let mut ready = VecDeque::new();
    let source = match app.hub.get_settled(&id).await {
        Some(live) => {
            let notices = live.events.subscribe();
            // Subscribed before the snapshot: no change after it goes unannounced.
            let changed = live.requests.subscribe();
            let (open, cursor) = live.requests.snapshot();
            ready.push_back(named("pending", &json!({ "requests": open })));
            Source::Live {
                live,
                notices,
                changed,
                cursor,
            }
        }
        None => {
            let path = crate::api::stored_path(&app, &id).await?;
            // Taken before the load: a file changed meanwhile is read again next time.
            let stamp = FileStamp::of(&path);
            match stamp.and_then(|stamp| app.stored_ends.get(&id, stamp)) {
                // A client looking again at a stored log it has read to its end (an attached
                // terminal, every 2 s): answered without reading the unchanged file.
                Some(end) if next >= end => Source::Ended(end),
                _ => {
                    let session = crate::api::load_stored_at(path, &id).await?;
                    if let Some(stamp) = stamp {
                        app.stored_ends.put(&id, stamp, session.next_seq().0);
                    }
                    Source::Stored(Box::new(session))
                }
            }
        }
    };
    let end = match &source {
        Source::Live { live, .. } => live.agent.log().session().next_seq().0,
        Source::Stored(session) => session.next_seq().0,
        Source::Ended(end) => *end,
    };
    if next > end {
        // Its own code: a client that showed more than the log now holds (a log repaired
        // after a crash lost its torn tail) knows to follow it again from its end.
        return Err(ApiError::new(
            axum::http::StatusCode::BAD_REQUEST,
            "beyond_log",
            format!(
                "session {id} has no event {} yet: its log ends at seq {}",
                next - 1,
                end.saturating_sub(1)
            ),
        ));
    }
    let presenters = match &source {
        _ if !query.present => None,
        Source::Live { live, .. } => Some(crate::present::primed(live.agent.log().session(), next)),
        Source::Stored(session) => Some(crate::present::primed(session, next)),
        Source::Ended(_) => None,
    };
    let stream = futures::stream::unfold(
        Reader {
            source,
            next,
            ready,
            presenters,
        },
        |mut reader| async move {
            let event = reader.next_event().await?;
            Some((Ok(event), reader))
        },
    );
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

/// Where a stream's events come from.
enum Source {
    /// A live session's log, then its announcements; and its requests' changes.
    Live {
        live: Arc<Live>,
        notices: broadcast::Receiver<u64>,
        /// Told of each change of the session's requests.
        changed: watch::Receiver<usize>,
        /// The next change of the session's requests to send.
        cursor: usize,
    },
    /// A stored session's log, loaded once.
    Stored(Box<Session>),
    /// A stored session's log, unchanged since a stream read it, that ends at this seq, where
    /// the stream starts: nothing to send.
    Ended(u64),
}

/// Where stored sessions' logs ended when a stream last read them, by session id, with the
/// file's identity then: a stream that starts at that end of an unchanged file sends nothing
/// and needs no load.
#[derive(Debug, Default)]
pub(crate) struct StoredEnds(std::sync::Mutex<std::collections::HashMap<String, (FileStamp, u64)>>);

/// How many stored sessions' ends are remembered (then forgotten all at once).
const STORED_ENDS: usize = 1024;

impl StoredEnds {
    fn get(&self, id: &str, stamp: FileStamp) -> Option<u64> {
        let ends = self.0.locked();
        ends.get(id)
            .and_then(|(seen, end)| (*seen == stamp).then_some(*end))
    }

    fn put(&self, id: &str, stamp: FileStamp, end: u64) {
        let mut ends = self.0.locked();
        if ends.len() >= STORED_ENDS && !ends.contains_key(id) {
            ends.clear();
        }
        ends.insert(id.to_owned(), (stamp, end));
    }
}

/// A session file's identity and version: an append changes its length, a repair or a rewrite
/// its length or modification time (and a replacement its inode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileStamp {
    dev: u64,
    ino: u64,
    len: u64,
    modified: Option<std::time::SystemTime>,
}

impl FileStamp {
    fn of(path: &std::path::Path) -> Option<FileStamp> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::symlink_metadata(path).ok()?;
        Some(FileStamp {
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
            modified: meta.modified().ok(),
        })
    }
}

/// One stream's place in the log.
struct Reader {
    source: Source,
    /// The seq of the next event to send.
    next: u64,
    /// Events read and not yet sent.
    ready: VecDeque<Event>,
    /// The plugins' presenters, for a client that asked for their items.
    presenters: Option<keel_protocol::present::Presenters>,
}

impl Reader {
    /// The next event to send, waiting for it when the stream has caught up with a live
    /// session; `None` at the end of a stored log or when the session is gone.
    async fn next_event(&mut self) -> Option<Event> {
        loop {
            if let Some(event) = self.ready.pop_front() {
                return Some(event);
            }
            match &mut self.source {
                Source::Ended(_) => return None,
                Source::Stored(session) => {
                    read(
                        session,
                        &mut self.next,
                        &mut self.ready,
                        &mut self.presenters,
                    );
                    if self.ready.is_empty() {
                        return None;
                    }
                }
                Source::Live {
                    live,
                    notices,
                    changed,
                    cursor,
                } => {
                    // A session rebuilt on another agent (a model switch): its log goes on
                    // there, announced on the same channel.
                    while let Some(next) = live.successor.get().cloned() {
                        *live = next;
                    }
                    // Requests first: a person waits on them.
                    for note in live.requests.since(cursor) {
                        self.ready.push_back(match note {
                            Note::Asked(view) => named("request", &view),
                            Note::Resolved(how) => named("resolved", &how),
                        });
                    }
                    read(
                        live.agent.log().session(),
                        &mut self.next,
                        &mut self.ready,
                        &mut self.presenters,
                    );
                    if !self.ready.is_empty() {
                        continue;
                    }
                    // Closed (no longer hosted) and all of its log sent: the stream ends.
                    if live.closed.load(std::sync::atomic::Ordering::Acquire) {
                        return None;
                    }
                    // Caught up: wait for an event appended after the read, or a request's
                    // change. A lagged stream reads the log again.
                    tokio::select! {
                        notice = notices.recv() => match notice {
                            Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                            Err(broadcast::error::RecvError::Closed) => return None,
                        },
                        // The sender lives as long as the session: never closed here.
                        _ = changed.changed() => {}
                    }
                }
            }
        }
    }
}

/// A message that is not an event of the log: `event: NAME`, no `id:` (a reconnecting client's
/// `Last-Event-ID` stays the last log event's seq).
fn named(name: &str, data: &serde_json::Value) -> Event {
    Event::default().event(name).data(data.to_string())
}

/// Queue up to [`BATCH`] events of `session` from `*next` on, advancing `*next`; each after
/// the items its `presenters` show, when there are presenters.
fn read(
    session: &Session,
    next: &mut u64,
    ready: &mut VecDeque<Event>,
    presenters: &mut Option<keel_protocol::present::Presenters>,
) {
    let end = session.next_seq().0.min(next.saturating_add(BATCH));
    while *next < end {
        let seq = *next;
        *next += 1;
        let Some(event) = session.event(Seq(seq)) else {
            continue;
        };
        if let Some(items) = presenters
            .as_mut()
            .and_then(|p| crate::present::items_of(p, &event))
        {
            ready.push_back(named("present", &items));
        }
        if let Ok(json) = event.to_json() {
            ready.push_back(Event::default().id(seq.to_string()).data(json));
        }
    }
}
