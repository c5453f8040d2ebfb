//! How continuity's events show ([`keel_protocol::present`]): a projection
//! (`continuity/projection`) is a boundary marker saying what kind of boundary it answered and
//! where (`continuity: history replaced at #12 (replace); the task basis was re-projected`), in
//! the terminal UI, an editor, the transcript and the HTML page alike. Its receipts and control
//! events show nothing.

use keel_protocol::SessionEvent;
use keel_protocol::present::{Item, MakePresenter, data_of, field, stateless};

/// The event type of a delivered (or empty) projection.
pub const PROJECTION_EVENT: &str = "continuity/projection";

/// The presenter of the plugin's events.
pub fn presenter() -> MakePresenter {
    stateless(present)
}

fn present(event: &SessionEvent, out: &mut Vec<Item>) {
    let Some(data) = data_of(event, PROJECTION_EVENT) else {
        return;
    };
    let kind = match field(data, "kind") {
        "" => "?",
        k => k,
    };
    let what = match kind {
        "resume" => "cold resume",
        "replace" => "history replaced",
        "spawn" | "fork" => "subagent start",
        _ => "boundary",
    };
    let at = data
        .get("boundarySeq")
        .and_then(serde_json::Value::as_u64)
        .map(|b| format!(" at #{b}"))
        .unwrap_or_default();
    out.push(Item::Marker(format!(
        "continuity: {what}{at} ({kind}); the task basis was re-projected"
    )));
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_protocol::{EventBody, OtherEvent, Seq};
    use serde_json::json;

    #[test]
    fn a_projection_is_a_marker_naming_its_boundary() {
        let o = OtherEvent {
            type_name: PROJECTION_EVENT.into(),
            data: json!({"kind": "replace", "boundarySeq": 12}),
        };
        let mut out = Vec::new();
        presenter()().present(
            &SessionEvent::new(Seq(20), 0, EventBody::Other(Box::new(o))),
            &mut out,
        );
        assert_eq!(
            out,
            vec![Item::Marker(
                "continuity: history replaced at #12 (replace); the task basis was re-projected"
                    .into()
            )]
        );
    }
}
