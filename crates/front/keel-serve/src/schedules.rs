//! `GET /api/v1/schedules`: the schedules of every session the server hosts (the web app's
//! automation page), folded from each log as the schedule plugin folds it (`keel_host::plugins::schedules`: a
//! front end knows no plugin crate). A stored session's
//! schedules wait for it to be resumed, so they are not listed; the session's own `/schedule`
//! command (`POST …/commands/schedule`) creates, lists and deletes them.

use crate::App;
use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};
use std::sync::Arc;

/// `GET /api/v1/schedules`: `{"schedules": [{session, title, cwd, id, prompt, dueAt,
/// everySeconds}]}`, soonest first (`dueAt` in ms since the epoch; `everySeconds` null for a
/// one-shot).
pub(crate) async fn list(State(app): State<Arc<App>>) -> Json<Value> {
    let mut rows: Vec<Value> = Vec::new();
    for live in app.hub.all() {
        let (active, title, id) = {
            let log = live.agent.log();
            let session = log.session();
            (
                keel_host::plugins::schedules(session.whole_event_iter()),
                session.title().map(str::to_owned),
                session.header().id.to_string(),
            )
        };
        rows.extend(active.iter().map(|s| {
            json!({"session": id, "title": title, "cwd": live.cwd, "id": s.id,
                "prompt": s.prompt, "dueAt": s.due_ms, "everySeconds": s.every_seconds})
        }));
    }
    rows.sort_by_key(|r| r["dueAt"].as_i64().unwrap_or(i64::MAX));
    Json(json!({ "schedules": rows }))
}
