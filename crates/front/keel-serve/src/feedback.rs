//! `POST /api/v1/sessions/{id}/feedback {"seq", "rating": "up" | "down" | null, "note"?}`: the
//! person's rating of an answer, kept in the session's log as an ignorable `feedback/rated`
//! event (`{seq, rating, note?}`; the last one for a seq wins, `null` takes it back). keel sends
//! it nowhere: it stays with the session, for the person (the web app's thumbs under an answer
//! show it again) and for whoever reads the log. A stored session is resumed first, as for a
//! message.

use crate::api::{live_or_resumed, parse, stored_path};
use crate::{ApiError, App};
use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use keel_protocol::{EventBody, Seq};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

/// The event a rating is kept as.
pub const FEEDBACK_EVENT: &str = "feedback/rated";

/// The body of `POST …/feedback`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FeedbackBody {
    /// A whole number (`451.0` too, as JSON Schema's integers are).
    seq: serde_json::Number,
    rating: Option<String>,
    #[serde(default)]
    note: Option<String>,
}

/// `POST /api/v1/sessions/{id}/feedback` → `{"seq": SEQ_OF_THE_EVENT}`.
pub(crate) async fn rate(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let body: FeedbackBody = parse(body)?;
    if let Some(r) = body.rating.as_deref()
        && r != "up"
        && r != "down"
    {
        return Err(ApiError::bad_request(format!(
            "rating: {r:?} is neither \"up\" nor \"down\" (null takes a rating back)"
        )));
    }
    if body.note.as_ref().is_some_and(|n| n.chars().count() > 4000) {
        return Err(ApiError::bad_request("note: at most 4000 characters"));
    }
    let seq = body
        .seq
        .as_u64()
        .or_else(|| {
            body.seq
                .as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < 9.0e15)
                .map(|f| f as u64)
        })
        .ok_or_else(|| {
            ApiError::not_found(format!("seq {}: session {id} has no event there", body.seq))
        })?;
    stored_path(&app, &id).await?;
    let live = live_or_resumed(&app, &id).await?;
    let rated = {
        let log = live.agent.log();
        match log.session().event(Seq(seq)) {
            Some(ev) => matches!(
                ev.body,
                EventBody::AssistantMessage(_) | EventBody::AssistantChunk(_)
            ),
            None => false,
        }
    };
    if !rated {
        return Err(ApiError::not_found(format!(
            "seq {seq}: session {id} has no answer there to rate"
        )));
    }
    let mut data = json!({"seq": seq, "rating": body.rating});
    if let Some(note) = body.note {
        data["note"] = json!(note);
    }
    let logged = live
        .agent
        .push_ignorable(FEEDBACK_EVENT, data)
        .map_err(|e| ApiError::internal(format!("session {id}: the rating was not logged: {e}")))?;
    Ok(Json(json!({ "seq": logged.0 })))
}
