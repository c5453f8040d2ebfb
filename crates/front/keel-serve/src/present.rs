//! Plugins' events as the items every front end renders ([`keel_protocol::present`]), for the
//! event streams of clients that ask for them (`GET …/events?present=true`, the web app): an
//! `event: present` message `{"seq", "items": [Item…]}` goes just before the log event that
//! showed the items. An item is one of
//!
//! - `{"kind": "notice", "level": "error" | "info", "text", "detail": [line…]}`
//! - `{"kind": "marker", "text"}`: a boundary in the conversation (a schedule fired)
//! - `{"kind": "progress", "callId", "step": {"kind": "title" | "heading" | "log", "text"} |
//!   {"kind": "child", "key", "label", "state", "error"}}`: what a call running children does
//! - `{"kind": "status", "key", "text": string | null}`: a status item (the goal), null to
//!   clear it
//! - `{"kind": "files", "files": [{"path", "description"}]}`: files presented
//! - `{"kind": "outcome", "code", "text"}`: how something a plugin drove ended
//!
//! Presenters keep state across events (the goal's rounds): a stream that starts after the
//! log's first event runs them over the events before its start first, showing nothing.

use keel_protocol::SessionEvent;
use keel_protocol::present::{Item, Level, Presenters, Step};
use keel_session::Session;
use serde_json::{Value, json};

/// Fresh presenters of every built-in plugin, primed with `session`'s events before `next`.
pub(crate) fn primed(session: &Session, next: u64) -> Presenters {
    let mut presenters = keel_host::presenters().make();
    for event in session.whole_event_iter().take_while(|e| e.seq.0 < next) {
        presenters.present(event);
    }
    presenters
}

/// The `present` message's data for `event`, when its presenters show anything.
pub(crate) fn items_of(presenters: &mut Presenters, event: &SessionEvent) -> Option<Value> {
    let items = presenters.present(event);
    (!items.is_empty()).then(
        || json!({"seq": event.seq.0, "items": items.iter().map(item_json).collect::<Vec<_>>()}),
    )
}

/// One item as JSON (see the module documentation).
pub(crate) fn item_json(item: &Item) -> Value {
    match item {
        Item::Notice {
            level,
            text,
            detail,
        } => json!({"kind": "notice", "level": match level {
            Level::Error => "error",
            Level::Info => "info",
        }, "text": text, "detail": detail}),
        Item::Marker(text) => json!({"kind": "marker", "text": text}),
        Item::Progress { call_id, step } => {
            let step = match step {
                Step::Title(t) => json!({"kind": "title", "text": t}),
                Step::Heading(t) => json!({"kind": "heading", "text": t}),
                Step::Log(t) => json!({"kind": "log", "text": t}),
                Step::Child {
                    key,
                    label,
                    state,
                    error,
                } => json!({"kind": "child", "key": key, "label": label, "state": state,
                    "error": error}),
            };
            json!({"kind": "progress", "callId": call_id, "step": step})
        }
        Item::Status { key, status } => {
            json!({"kind": "status", "key": key, "text": status.as_ref().map(|s| &s.text)})
        }
        Item::Files(files) => json!({"kind": "files", "files": files.iter().map(|f| {
            json!({"path": f.path, "description": f.description})
        }).collect::<Vec<_>>()}),
        Item::Outcome(o) => json!({"kind": "outcome", "code": o.code, "text": o.text}),
    }
}
