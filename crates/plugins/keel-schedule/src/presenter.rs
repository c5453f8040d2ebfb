//! How the schedule and present plugins' events show ([`keel_protocol::present`]):
//!
//! | event | item |
//! |---|---|
//! | `schedule/fired` | a marker: `scheduled prompt <id> (due <time>)` |
//! | `schedule/missed` | an info notice: it came due while keel was not running, not run |
//! | `present/files` | the files, listed when the turn ends |
//!
//! `schedule/created`, `schedule/updated` and `schedule/deleted` show nothing: the tool calls
//! that made them do.

use crate::state::{FIRED_EVENT, MISSED_EVENT};
use keel_protocol::SessionEvent;
use keel_protocol::present::{File, Item, Level, MakePresenter, data_of, field, stateless};
use serde_json::Value;

/// `present/files {files: [{path, description?}]}` (paths relative to the working directory
/// when under it).
pub const PRESENT_EVENT: &str = "present/files";

/// The files of one `present/files` event's data.
pub fn presented(data: &Value) -> Vec<File> {
    data.get("files")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|f| {
            let path = f.get("path")?.as_str()?.to_owned();
            let description = f
                .get("description")
                .and_then(Value::as_str)
                .map(str::to_owned);
            Some(File { path, description })
        })
        .collect()
}

/// The schedule plugin's presenter.
pub fn schedule() -> MakePresenter {
    stateless(present_schedule)
}

/// The present plugin's presenter.
pub fn present() -> MakePresenter {
    stateless(present_files)
}

fn or_unknown(s: &str) -> &str {
    if s.is_empty() { "?" } else { s }
}

fn present_schedule(event: &SessionEvent, out: &mut Vec<Item>) {
    if let Some(data) = data_of(event, FIRED_EVENT) {
        out.push(Item::Marker(format!(
            "scheduled prompt {} (due {})",
            or_unknown(field(data, "id")),
            or_unknown(field(data, "dueAt"))
        )));
    } else if let Some(data) = data_of(event, MISSED_EVENT) {
        out.push(Item::notice(
            Level::Info,
            format!(
                "Schedule {} came due at {} while keel was not running; it was not run \
                 (the model is told at its next turn).",
                or_unknown(field(data, "id")),
                or_unknown(field(data, "dueAt"))
            ),
        ));
    }
}

fn present_files(event: &SessionEvent, out: &mut Vec<Item>) {
    if let Some(data) = data_of(event, PRESENT_EVENT) {
        let files = presented(data);
        if !files.is_empty() {
            out.push(Item::Files(files));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_protocol::{EventBody, OtherEvent, Seq};
    use serde_json::json;

    fn ev(ty: &str, data: serde_json::Value) -> SessionEvent {
        let o = OtherEvent {
            type_name: ty.into(),
            data,
        };
        SessionEvent::new(Seq(3), 0, EventBody::Other(Box::new(o)))
    }

    #[test]
    fn firings_are_markers_misses_notices_and_files_files() {
        let (mut s, mut p) = (schedule()(), present()());
        let mut out = Vec::new();
        for e in [
            ev(
                FIRED_EVENT,
                json!({"id": "sched-1", "dueAt": "2026-01-02T03:04:05Z"}),
            ),
            ev(MISSED_EVENT, json!({"id": "sched-2"})),
            ev(
                PRESENT_EVENT,
                json!({"files": [{"path": "a.md", "description": "notes"}, {"path": 3}]}),
            ),
        ] {
            s.present(&e, &mut out);
            p.present(&e, &mut out);
        }
        assert_eq!(
            out,
            vec![
                Item::Marker("scheduled prompt sched-1 (due 2026-01-02T03:04:05Z)".into()),
                Item::notice(
                    Level::Info,
                    "Schedule sched-2 came due at ? while keel was not running; it was not run \
                     (the model is told at its next turn)."
                ),
                Item::Files(vec![File {
                    path: "a.md".into(),
                    description: Some("notes".into())
                }]),
            ]
        );
    }
}
