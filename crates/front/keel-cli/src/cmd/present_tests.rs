//! One presentation for every front end (issue 45): a session holding the events of seven
//! plugins (continuity's projection, an MCP server that failed, a skill file skipped, a schedule that fired and one
//! missed, a workflow's children under its call, a goal set, rounded and completed, files
//! presented) is shown by each front end — the terminal UI's cells, ACP's updates, `keel run`'s
//! progress lines, the transcript and the HTML page — and every one of them says what the
//! plugins' presenters said, in the presenters' words. The events are built from the plugins'
//! own constants and shapes; the presenters are the host's (every built-in plugin's).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use keel_acp::map::{Feed, Mapper};
use keel_protocol::present::Item;
use keel_protocol::{EventBody, OtherEvent, SessionHeader, SessionId};
use keel_session::Session;
use keel_session::view::Transcript;
use keel_session::view::cells::{Cell, Cells};
use serde_json::{Value, json};

fn core(ty: &str, data: Value) -> EventBody {
    EventBody::parse(ty, &data.to_string()).unwrap()
}

fn plugin(ty: &str, data: Value) -> EventBody {
    EventBody::Other(Box::new(OtherEvent {
        type_name: ty.to_owned(),
        data,
    }))
}

fn goal(revision: u64, status: keel_goals::Status) -> Value {
    serde_json::to_value(keel_goals::Goal {
        goal_id: "g1".into(),
        revision,
        objective: "make the tests pass".into(),
        max_rounds: 5,
        status,
        blocked_reason: None,
        by: "model".into(),
    })
    .unwrap()
}

/// The session: one turn whose step runs a workflow, with the other plugins' events around it.
fn session() -> Session {
    use keel_codemode::flow::presenter as workflow;
    let mut header = SessionHeader::new(SessionId("s-present".into()), 1, Some("/w".into()));
    header.parent_session = None;
    let mut s = Session::new(header);
    let user = json!({"role": "user", "content": [{"type": "text", "text": "go"}],
                      "source": {"kind": "user"}, "id": "u1"});
    let args = json!({"script": "return 1;", "meta": {"name": "fan", "description": "two files"}});
    let answer = json!({"role": "assistant", "content": [
        {"type": "tool-call", "id": "w1", "name": "workflow", "arguments": args.to_string()}],
        "source": {"kind": "model", "provider": "p", "model": "m"}, "id": "a1"});
    let result = json!({"role": "user", "content": [{"type": "tool-result", "toolCallId": "w1",
        "content": [{"type": "text", "text": "done"}], "isError": false}],
        "source": {"kind": "tool", "callId": "w1"}, "id": "r1"});
    let events = [
        plugin(
            keel_mcp::plugin::SERVER_EVENT,
            json!({"server": "db", "status": "failed", "transport": "stdio: db-mcp",
                   "error": "exited with 1", "stderrTail": "no such table"}),
        ),
        plugin(
            keel_skills::WARNING_EVENT,
            json!({"file": ".keel/skills/x/SKILL.md", "error": "no name"}),
        ),
        plugin(
            keel_schedule::MISSED_EVENT,
            json!({"id": "sched-2", "dueAt": "2030-01-02T00:00:00Z", "count": 1}),
        ),
        core("turn/start", json!({"turn": 1})),
        plugin(
            keel_schedule::FIRED_EVENT,
            json!({"id": "sched-1", "dueAt": "2030-01-01T00:00:00Z"}),
        ),
        core("user/message", user),
        plugin(keel_goals::SET_EVENT, goal(1, keel_goals::Status::Active)),
        plugin(keel_goals::ROUND_EVENT, json!({"goalId": "g1", "round": 1})),
        core("step/start", json!({"turn": 1, "step": 1})),
        plugin(
            keel_continuity::PROJECTION_EVENT,
            json!({"kind": "replace", "boundarySeq": 3}),
        ),
        core(
            "assistant/message",
            json!({"turn": 1, "step": 1, "message": answer}),
        ),
        core(
            "tool/call",
            json!({"turn": 1, "step": 1, "callId": "w1", "name": "workflow", "arguments": args.to_string()}),
        ),
        plugin(
            workflow::STARTED_EVENT,
            json!({"callId": "w1", "name": "fan", "description": "two files", "phases": []}),
        ),
        plugin(
            workflow::PHASE_EVENT,
            json!({"callId": "w1", "title": "survey"}),
        ),
        plugin(
            workflow::AGENT_EVENT,
            json!({"callId": "w1", "n": 1, "label": "a.rs", "status": "running"}),
        ),
        plugin(
            workflow::AGENT_EVENT,
            json!({"callId": "w1", "n": 1, "label": "a.rs", "status": "failed", "error": "no JSON"}),
        ),
        plugin(
            keel_schedule::PRESENT_EVENT,
            json!({"files": [{"path": "report.md", "description": "the summary"}]}),
        ),
        core(
            "tool/result",
            json!({"turn": 1, "step": 1, "message": result}),
        ),
        core("step/end", json!({"turn": 1, "step": 1})),
        plugin(keel_goals::SET_EVENT, goal(2, keel_goals::Status::Complete)),
        core(
            "turn/end",
            json!({"turn": 1, "reason": {"kind": "completed"}}),
        ),
    ];
    for body in events {
        // A plugin's events are ignorable (readers without the plugin skip them).
        let surface = matches!(
            body,
            EventBody::UserMessage(_) | EventBody::AssistantMessage(_) | EventBody::ToolResult(_)
        )
        .then(|| (keel_protocol::SurfaceOp::Append, Vec::new()));
        let mut ev = s.stamp(body, surface);
        ev.ignorable = matches!(ev.body, EventBody::Other(_));
        s.append(ev).unwrap();
    }
    s
}

/// What a person must be able to read in every front end: each item's line (a status item's
/// while it is set, a file's path).
fn expected(items: &[Item]) -> Vec<String> {
    let mut out = Vec::new();
    for item in items {
        match item {
            Item::Files(files) => out.extend(files.iter().map(|f| f.path.clone())),
            // A status line is the UI's alone (an editor and a log have none).
            Item::Status { .. } => {}
            // A child's progress is shown in its latest state, under its call.
            Item::Progress {
                step: keel_protocol::present::Step::Child { label, .. },
                ..
            } => out.push(label.clone()),
            other => out.extend(other.line()),
        }
    }
    out.dedup();
    out
}

#[test]
fn every_front_end_shows_what_the_presenters_say() {
    let session = session();
    let presenters = keel_host::presenters();
    let items: Vec<Item> = presenters
        .present_all(
            session
                .events()
                .collect::<Vec<_>>()
                .iter()
                .map(|e| e.as_ref()),
        )
        .into_iter()
        .map(|(_, i)| i)
        .collect();
    let want = expected(&items);
    // The presenters spoke for all seven plugins.
    for needle in [
        "MCP server 'db' (stdio: db-mcp) is not available: exited with 1",
        "Skill file .keel/skills/x/SKILL.md skipped: no name",
        "Schedule sched-2 came due at 2030-01-02T00:00:00Z",
        "scheduled prompt sched-1 (due 2030-01-01T00:00:00Z)",
        "a.rs",
        "report.md",
        "goal g1 complete after 1 rounds",
        "continuity: history replaced at #3 (replace); the task basis was re-projected",
    ] {
        assert!(
            want.iter().any(|w| w.contains(needle)),
            "{needle} not among {want:#?}"
        );
    }

    // The terminal UI's cells.
    let mut cells = Cells::with_presenters(&presenters);
    for ev in session.events() {
        cells.apply(&ev);
    }
    let ui: String = cells
        .cells
        .iter()
        .map(|c| match c {
            Cell::Notice(_, t) | Cell::Marker(t) => t.clone(),
            Cell::Presented(files) => files.iter().map(|f| f.to_string()).collect(),
            Cell::Tool(card) => card.progress.lines().join("\n"),
            _ => String::new(),
        })
        .collect::<Vec<_>>()
        .join("\n");

    // ACP's updates of a `session/load` replay.
    let mut mapper = Mapper::new("/w", Feed::Replay, &presenters);
    let acp = session
        .events()
        .flat_map(|ev| mapper.map(&ev))
        .map(|u| serde_json::to_string(&u).unwrap())
        .collect::<Vec<_>>()
        .join("\n");

    // `keel run`'s progress lines (stderr) as the events arrive, and the files at its end.
    let mut run = Vec::new();
    let mut live = presenters.make();
    for ev in session.events() {
        for item in live.present(&ev) {
            super::progress::say(&mut run, &item).unwrap();
            if let Item::Files(files) = &item {
                for f in files {
                    run.extend(format!("  {f}\n").bytes());
                }
            }
        }
    }
    let run = String::from_utf8(run).unwrap();

    // The transcript (`keel sessions show`) and the HTML page.
    let transcript =
        super::sessions::render::render_text(&Transcript::build(&session, &presenters));
    let html = keel_viewer::render_html(
        &session,
        &keel_viewer::HtmlOptions {
            presenters: presenters.clone(),
            ..Default::default()
        },
    );
    let escaped = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('\'', "&#39;")
            .replace('"', "&quot;")
    };

    for line in &want {
        let json_line = serde_json::to_string(line).unwrap();
        let json_line = json_line.trim_matches('"');
        for (front_end, shown) in [
            ("the terminal UI", ui.contains(line.as_str())),
            ("ACP", acp.contains(json_line)),
            ("keel run", run.contains(line.as_str())),
            ("the transcript", transcript.contains(line.as_str())),
            (
                "the HTML page",
                html.contains(&escaped(line)) || html.contains(line.as_str()),
            ),
        ] {
            assert!(
                shown,
                "{front_end} does not show {line:?}:\nUI:\n{ui}\n\nACP:\n{acp}\n\nrun:\n{run}\n\ntranscript:\n{transcript}"
            );
        }
    }
    // The goal's status item reaches the UI's status line while it is open, and its end
    // clears it; `keel run --goal` exits with the outcome's code.
    assert!(cells.status.is_empty(), "{:?}", cells.status);
    assert_eq!(cells.outcome.as_ref().map(|o| o.code), Some(0));
    insta::assert_snapshot!("keel_run_progress", run);
}
