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
    // The summary's line is not shown again under it.
    assert_eq!(
        card.detail,
        Detail::Output {
            exit: None,
            tail: vec!["more".into()]
        }
    );
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

/// A presenter of made-up events standing for a plugin's: `x/files` → files, `x/note` → a
/// marker and a notice, `x/step` → progress under the call, `x/status` → a status item.
fn presenters() -> keel_protocol::present::PresenterSet {
    use keel_protocol::present::{File, Item, PresenterSet, Status, Step, stateless};
    PresenterSet::new(vec![stateless(|e, out| {
        let keel_protocol::EventBody::Other(o) = &e.body else {
            return;
        };
        let s = |k: &str| o.data.get(k).and_then(|v| v.as_str()).map(str::to_owned);
        match o.type_name.as_str() {
            "x/files" => out.push(Item::Files(vec![File {
                path: s("path").unwrap_or_default(),
                description: s("description"),
            }])),
            "x/note" => {
                out.push(Item::Marker("a boundary".into()));
                out.push(Item::Notice {
                    level: Level::Error,
                    text: "it failed".into(),
                    detail: vec!["its stderr ends: boom".into()],
                });
            }
            "x/step" => out.push(Item::Progress {
                call_id: s("callId").unwrap_or_default(),
                step: Step::Log("half way".into()),
            }),
            "x/status" => out.push(Item::Status {
                key: "x".into(),
                status: s("text").map(|text| Status { text, carry: None }),
            }),
            _ => {}
        }
    })])
}

#[test]
fn presented_files_are_listed_when_the_turn_ends() {
    let mut c = Cells::with_presenters(&presenters());
    c.apply(&ev("turn/start", json!({"turn": 1})));
    let files = json!({"path": "report.md", "description": "the summary"});
    assert_eq!(c.apply(&ev("x/files", files)), vec![]);
    c.apply(&ev("x/files", json!({"path": "b.txt"})));
    let before = c.cells.len();
    let changes = c.apply(&ev(
        "turn/end",
        json!({"turn": 1, "reason": {"kind": "completed"}}),
    ));
    assert_eq!(changes, vec![Change::Added(before)]);
    let file = |path: &str, description: Option<&str>| File {
        path: path.into(),
        description: description.map(str::to_owned),
    };
    assert_eq!(
        c.cells[before],
        Cell::Presented(vec![
            file("report.md", Some("the summary")),
            file("b.txt", None),
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
    // Without presenters, a plugin's events show nothing.
    let mut bare = Cells::new();
    bare.apply(&ev("x/note", json!({})));
    assert!(bare.cells.is_empty());
}

#[test]
fn presenters_items_become_markers_notices_progress_and_status() {
    let mut c = Cells::with_presenters(&presenters());
    assert_eq!(
        c.apply(&ev("x/note", json!({}))),
        vec![Change::Shown(0), Change::Shown(1)]
    );
    assert_eq!(
        c.cells,
        vec![
            Cell::Marker("a boundary".into()),
            Cell::Notice(Level::Error, "it failed\nits stderr ends: boom".into()),
        ]
    );
    assert_eq!(
        c.apply(&ev("x/status", json!({"text": "x 1/2"}))),
        vec![Change::Status]
    );
    assert_eq!(c.status.get("x").map(String::as_str), Some("x 1/2"));
    c.apply(&ev("x/status", json!({})));
    assert!(c.status.is_empty());
    c.apply(&call("w", "workflow", json!({})));
    let at = c.cells.len() - 1;
    assert_eq!(
        c.apply(&ev("x/step", json!({"callId": "w"}))),
        vec![Change::Updated(at)]
    );
    let Cell::Tool(card) = &c.cells[at] else {
        panic!("{:?}", c.cells[at]);
    };
    assert_eq!(card.progress.lines(), vec!["· half way"]);
}
