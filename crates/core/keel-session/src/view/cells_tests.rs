//! Tests of [`super`]: the changes `Cells::apply` reports.
#![allow(clippy::unwrap_used)]
use super::*;
use keel_protocol::Seq;
use pretty_assertions::assert_eq;
use serde_json::json;

fn ev(ty: &str, data: Value) -> SessionEvent {
    SessionEvent::new(Seq(1), 0, EventBody::parse(ty, &data.to_string()).unwrap())
}

fn delta(text: &str) -> SessionEvent {
    ev(
        "assistant/chunk",
        json!({"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": text}}),
    )
}

fn answer(text: &str) -> SessionEvent {
    ev(
        "assistant/message",
        json!({"turn": 1, "step": 1, "message": {"role": "assistant", "content": [{"type": "reasoning", "text": "hmm"}, {"type": "text", "text": text}], "source": {"kind": "model", "provider": "p", "model": "m"}, "id": "a"}}),
    )
}

fn call(id: &str, name: &str, args: Value) -> SessionEvent {
    ev(
        "tool/call",
        json!({"turn": 1, "step": 1, "callId": id, "name": name, "arguments": args.to_string()}),
    )
}

fn result(id: &str, text: &str, is_error: bool) -> SessionEvent {
    ev(
        "tool/result",
        json!({"turn": 1, "step": 1, "message": {"role": "user", "content": [{"type": "tool-result", "toolCallId": id, "content": [{"type": "text", "text": text}], "isError": is_error}], "source": {"kind": "tool", "callId": id}, "id": "r"}}),
    )
}

#[test]
fn streamed_text_is_added_then_appended_and_the_message_only_settles_it() {
    let mut c = Cells::new();
    c.apply(&ev("step/start", json!({"turn": 1, "step": 1})));
    assert_eq!(c.apply(&delta("Hel")), vec![Change::Added(0)]);
    assert_eq!(
        c.apply(&delta("lo")),
        vec![Change::Streamed {
            at: 0,
            delta: "lo".into()
        }]
    );
    // The reasoning did not stream: it is added whole; the text is replaced and settled.
    assert_eq!(
        c.apply(&answer("Hello!")),
        vec![Change::Added(1), Change::Updated(0)]
    );
    assert_eq!(
        c.cells,
        vec![
            Cell::Assistant {
                text: "Hello!".into(),
                streaming: false
            },
            Cell::Reasoning {
                text: "hmm".into(),
                streaming: false
            },
        ]
    );
    // A replay (no deltas) gives the same answer, added whole.
    let mut r = Cells::new();
    r.apply(&ev("step/start", json!({"turn": 1, "step": 1})));
    assert_eq!(
        r.apply(&answer("Hello!")),
        vec![Change::Added(0), Change::Added(1)]
    );
    assert_eq!(r.cells[1], c.cells[0]);
}

#[test]
fn a_call_is_paired_with_its_approval_and_its_result() {
    let mut c = Cells::new();
    let added = c.apply(&call("c1", "bash", json!({"command": "cargo\ntest"})));
    assert_eq!(added, vec![Change::Added(0)]);
    let Cell::Tool(card) = &c.cells[0] else {
        panic!("{:?}", c.cells)
    };
    assert_eq!(card.key_arg, "cargo⏎test");
    assert_eq!(card.state, ToolState::Running);
    assert_eq!(
        c.apply(&ev(
            "approval/decided",
            json!({"callId": "c1", "approved": false, "by": "user", "reason": "no"})
        )),
        vec![
            Change::Updated(0),
            Change::Refused {
                call_id: "c1".into(),
                reason: Some("no".into())
            }
        ]
    );
    assert_eq!(
        c.apply(&result("c1", "DENIED: no\nmore", true)),
        vec![
            Change::Updated(0),
            Change::ToolResult {
                call_id: "c1".into(),
                is_error: true,
                output: "DENIED: no\nmore".into()
            }
        ]
    );
    let Cell::Tool(card) = &c.cells[0] else {
        panic!("{:?}", c.cells)
    };
    assert_eq!(card.state, ToolState::Denied);
    assert_eq!(card.summary, "DENIED: no");
    // A result for a call without a card is still reported.
    assert_eq!(c.apply(&result("c9", "ok", false)).len(), 1);
}

#[test]
fn key_args_name_known_tools_only() {
    assert_eq!(
        key_arg("read", &json!({"path": "a.rs"})).as_deref(),
        Some("a.rs")
    );
    assert_eq!(key_arg("mystery", &json!({"x": "y"})), None);
    assert_eq!(
        key_arg(
            "ask_user_question",
            &json!({"questions": [{"id": "a", "question": "Which?"}, {"id": "b", "question": "B?"}]})
        )
        .as_deref(),
        Some("Which? (+1 more)")
    );
    // A card falls back to the first string argument.
    assert_eq!(card_arg("mystery", &json!({"x": "y"})), "y");
    assert_eq!(card_arg("mystery", &json!({})), "");
}

#[test]
fn todos_and_plans_report_their_changes() {
    let mut c = Cells::new();
    assert_eq!(
        c.apply(&ev(
            "todo/write",
            json!({"todos": [{"content": "a", "status": "pending"}]})
        )),
        vec![Change::Todos]
    );
    assert_eq!(c.todos.len(), 1);
    let plan = call("p1", "exit_plan_mode", json!({"plan": "do it"}));
    assert_eq!(c.apply(&plan), vec![Change::Added(0), Change::Added(1)]);
    assert_eq!(
        c.apply(&ev("plan/mode", json!({"active": false, "approved": true}))),
        vec![Change::Updated(1)]
    );
    assert_eq!(
        c.cells[1],
        Cell::Plan {
            text: "do it".into(),
            approved: Some(true)
        }
    );
}

#[test]
fn presented_files_are_listed_when_the_turn_ends() {
    let mut c = Cells::new();
    c.apply(&ev("turn/start", json!({"turn": 1})));
    let files = json!({"files": [{"path": "report.md", "description": "the summary"}, {"path": "out/data.csv"}]});
    assert_eq!(c.apply(&ev("present/files", files)), vec![]);
    c.apply(&ev("present/files", json!({"files": [{"path": "b.txt"}]})));
    let before = c.cells.len();
    let changes = c.apply(&ev(
        "turn/end",
        json!({"turn": 1, "reason": {"kind": "completed"}}),
    ));
    assert_eq!(changes, vec![Change::Added(before)]);
    assert_eq!(
        c.cells[before],
        Cell::Presented(vec![
            ("report.md".into(), Some("the summary".into())),
            ("out/data.csv".into(), None),
            ("b.txt".into(), None),
        ])
    );
    // The next turn starts with none.
    c.apply(&ev("turn/start", json!({"turn": 2})));
    let n = c.cells.len();
    c.apply(&ev(
        "turn/end",
        json!({"turn": 2, "reason": {"kind": "completed"}}),
    ));
    assert_eq!(c.cells.len(), n);
}

#[test]
fn schedule_firings_and_misses_are_shown() {
    let mut c = Cells::new();
    c.apply(&ev(
        "schedule/fired",
        json!({"id": "sched-1", "dueAt": "2030-01-01T00:00:00Z", "firedAt": "2030-01-01T00:00:01Z"}),
    ));
    c.apply(&ev(
        "schedule/missed",
        json!({"id": "sched-2", "dueAt": "2030-01-02T00:00:00Z", "count": 1}),
    ));
    assert_eq!(
        c.cells,
        vec![
            Cell::Marker("scheduled prompt sched-1".into()),
            Cell::Notice(
                Level::Info,
                "Schedule sched-2 came due at 2030-01-02T00:00:00Z while keel was not running; \
                 it was not run (the model is told at its next turn)."
                    .into()
            ),
        ]
    );
}
