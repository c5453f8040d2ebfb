//! The workflow and ralph plugins' events, and how they show: each becomes a step of progress
//! under the call that runs the children ([`keel_protocol::present`]), which every front end
//! folds into the same tree (the terminal UI under the running call, ACP as the call's content).
//!
//! | event | step |
//! |---|---|
//! | `workflow/started` | the title (`name: description`) |
//! | `workflow/phase` | a heading |
//! | `workflow/agent` | a child `a<n>`, updated in place by its later events |
//! | `workflow/log` | a log line |
//! | `ralph/round` | a child `r<round>` (`round <round>`), updated in place |
//!
//! `workflow/finished` shows nothing: the call's result says how it ended.

use keel_protocol::present::{Item, MakePresenter, Step, field, stateless};
use keel_protocol::{EventBody, SessionEvent};
use serde_json::Value;

/// A workflow started: `{callId, name, description, phases}`.
pub const STARTED_EVENT: &str = "workflow/started";
/// A phase began: `{callId, title}`.
pub const PHASE_EVENT: &str = "workflow/phase";
/// A child agent changed: `{callId, n, label, phase, status, error?, …}`.
pub const AGENT_EVENT: &str = "workflow/agent";
/// The script logged a line: `{callId, message}`.
pub const LOG_EVENT: &str = "workflow/log";
/// The workflow ended: `{callId, status, agents, error?}`.
pub const FINISHED_EVENT: &str = "workflow/finished";
/// A ralph round changed: `{callId, round, childSession, status, error}`.
pub const ROUND_EVENT: &str = "ralph/round";

/// The workflow plugin's presenter.
pub fn workflow() -> MakePresenter {
    stateless(|event, out| present(event, out, false))
}

/// The ralph plugin's presenter.
pub fn ralph() -> MakePresenter {
    stateless(|event, out| present(event, out, true))
}

fn present(event: &SessionEvent, out: &mut Vec<Item>, ralph: bool) {
    let EventBody::Other(o) = &event.body else {
        return;
    };
    if (o.type_name == ROUND_EVENT) != ralph {
        return;
    }
    let data = &o.data;
    let s = |k: &str| field(data, k).to_owned();
    let number = |k: &str| data.get(k).map(Value::to_string).unwrap_or_default();
    let step = match o.type_name.as_str() {
        STARTED_EVENT => Step::Title(format!("{}: {}", s("name"), s("description"))),
        PHASE_EVENT => Step::Heading(s("title")),
        LOG_EVENT => Step::Log(s("message")),
        AGENT_EVENT => Step::Child {
            key: format!("a{}", number("n")),
            label: s("label"),
            state: s("status"),
            error: s("error"),
        },
        ROUND_EVENT => Step::Child {
            key: format!("r{}", number("round")),
            label: format!("round {}", number("round")),
            state: s("status"),
            error: s("error"),
        },
        _ => return,
    };
    if let Some(call_id) = data.get("callId").and_then(Value::as_str) {
        out.push(Item::Progress {
            call_id: call_id.to_owned(),
            step,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_protocol::{OtherEvent, Seq};
    use serde_json::json;

    fn ev(ty: &str, data: Value) -> SessionEvent {
        SessionEvent::new(
            Seq(1),
            0,
            EventBody::Other(Box::new(OtherEvent {
                type_name: ty.into(),
                data,
            })),
        )
    }

    #[test]
    fn events_become_steps_under_their_call() {
        let (mut p, mut r) = (workflow()(), ralph()());
        let mut out = Vec::new();
        p.present(
            &ev(AGENT_EVENT, json!({"callId": "w", "n": 2, "label": "b.rs", "status": "failed", "error": "no JSON"})),
            &mut out,
        );
        r.present(
            &ev(
                ROUND_EVENT,
                json!({"callId": "r", "round": 1, "status": "running"}),
            ),
            &mut out,
        );
        p.present(
            &ev(
                ROUND_EVENT,
                json!({"callId": "r", "round": 2, "status": "running"}),
            ),
            &mut out,
        );
        r.present(
            &ev(
                AGENT_EVENT,
                json!({"callId": "w", "n": 3, "status": "running"}),
            ),
            &mut out,
        );
        p.present(&ev(FINISHED_EVENT, json!({"callId": "w"})), &mut out);
        p.present(&ev(LOG_EVENT, json!({"message": "no call id"})), &mut out);
        assert_eq!(
            out,
            vec![
                Item::Progress {
                    call_id: "w".into(),
                    step: Step::Child {
                        key: "a2".into(),
                        label: "b.rs".into(),
                        state: "failed".into(),
                        error: "no JSON".into()
                    }
                },
                Item::Progress {
                    call_id: "r".into(),
                    step: Step::Child {
                        key: "r1".into(),
                        label: "round 1".into(),
                        state: "running".into(),
                        error: String::new()
                    }
                },
            ]
        );
    }
}
