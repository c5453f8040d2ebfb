//! Rendering with ratatui's test backend: snapshots of each kind of cell, the modals and the
//! status line (fixed times, so elapsed figures are stable), and a live session rendered the
//! same as the same session read back from its file.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use keel_protocol::{EventBody, SessionEvent};
use keel_tui::cells::Cells;
use keel_tui::input::Input;
use keel_tui::view::{self, LineCache, Modal, Screen};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::{Value, json};

const T0: i64 = 1_796_000_000_000;

/// One event from its type and data, at `T0 + ms`.
fn ev(seq: u64, ms: i64, ty: &str, data: Value) -> SessionEvent {
    let body = EventBody::parse(ty, &data.to_string()).unwrap();
    SessionEvent::new(keel_protocol::Seq(seq), T0 + ms, body)
}

fn user(text: &str) -> Value {
    json!({"role": "user", "content": [{"type": "text", "text": text}], "source": {"kind": "user"}, "id": "u"})
}

fn assistant(turn: u32, step: u32, text: &str) -> Value {
    json!({"turn": turn, "step": step, "message": {"role": "assistant", "content": [{"type": "text", "text": text}],
        "source": {"kind": "model", "provider": "deepseek", "model": "deepseek-chat"}, "id": "a"},
        "usage": {"inputTokens": 30000, "outputTokens": 500, "cacheReadTokens": 90000}})
}

fn call(id: &str, name: &str, args: Value) -> Value {
    json!({"turn": 1, "step": 1, "callId": id, "name": name, "arguments": args.to_string()})
}

fn result(id: &str, text: &str, is_error: bool, meta: Value) -> Value {
    json!({"turn": 1, "step": 1, "message": {"role": "user", "content": [{"type": "tool-result", "toolCallId": id,
        "content": [{"type": "text", "text": text}], "isError": is_error}], "source": {"kind": "tool", "callId": id}, "id": "r"},
        "meta": meta})
}

/// A session with an answer, every kind of tool card and a compaction.
fn session() -> Vec<SessionEvent> {
    let answer = "## Plan\n\nI will **fix** the parser:\n\n1. read `src/parse.rs`\n2. change the loop\n\n```rust\nfn main() {\n    let x = 42; // answer\n}\n```\n";
    vec![
        ev(0, 0, "sandbox/mode", json!({"mode": "workspace-write"})),
        ev(1, 0, "approval/policy", json!({"policy": "ask"})),
        ev(2, 0, "turn/start", json!({"turn": 1})),
        ev(3, 0, "user/message", user("Fix the parser, please.")),
        ev(4, 0, "step/start", json!({"turn": 1, "step": 1})),
        ev(
            5,
            10,
            "request/context",
            json!({"provider": "deepseek", "model": "deepseek-chat", "contextWindow": 128000}),
        ),
        ev(6, 900, "assistant/message", assistant(1, 1, answer)),
        ev(
            7,
            1000,
            "tool/call",
            call("c1", "read", json!({"path": "src/parse.rs"})),
        ),
        ev(
            8,
            1200,
            "tool/result",
            result("c1", "fn parse() {}\nfn main() {}\n", false, json!({})),
        ),
        ev(
            9,
            1300,
            "tool/call",
            call(
                "c2",
                "edit",
                json!({"path": "src/parse.rs", "old_string": "fn parse() {}", "new_string": "fn parse() -> Result<(), Error> {\n    Ok(())\n}"}),
            ),
        ),
        ev(
            10,
            1400,
            "tool/result",
            result(
                "c2",
                "Edited src/parse.rs (1 replacement)",
                false,
                json!({}),
            ),
        ),
        ev(
            11,
            1500,
            "tool/call",
            call("c3", "bash", json!({"command": "cargo test"})),
        ),
        ev(
            12,
            4700,
            "tool/result",
            result(
                "c3",
                "running 3 tests\ntest a ... ok\ntest b ... FAILED\nfailures: b\ntest result: FAILED",
                false,
                json!({"exitCode": 101}),
            ),
        ),
        ev(
            13,
            4800,
            "tool/call",
            call(
                "c4",
                "write",
                json!({"path": "/etc/passwd", "content": "x"}),
            ),
        ),
        ev(
            14,
            4810,
            "tool/result",
            result(
                "c4",
                "SANDBOX_DENIED: /etc/passwd is outside the workspace",
                true,
                json!({"code": "SANDBOX_DENIED"}),
            ),
        ),
        ev(
            15,
            4900,
            "tool/call",
            call(
                "c5",
                "subagent",
                json!({"description": "survey the tests", "prompt": "…"}),
            ),
        ),
        ev(
            16,
            5000,
            "todo/write",
            json!({"todos": [
            {"content": "Read the parser", "status": "completed"},
            {"content": "Fix the loop", "status": "in_progress", "activeForm": "Fixing the loop"},
            {"content": "Run the tests", "status": "pending"}]}),
        ),
        ev(
            17,
            5100,
            "compaction/end",
            json!({"outcome": "summarised", "beforeTokens": 90000, "afterTokens": 12000}),
        ),
    ]
}

fn transcript(events: &[SessionEvent]) -> Cells {
    // Plugins' events (a workflow's children) show through the plugins' presenters.
    let mut t = Cells::with_presenters(&keel_host::presenters());
    for e in events {
        t.apply(e);
    }
    t
}

/// The screen as text, one line per row (trailing spaces cut).
fn draw(t: &Cells, modal: Option<&Modal>, now_ms: i64, width: u16, height: u16) -> String {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    let input = Input::new();
    let screen = Screen {
        cells: t,
        input: &input,
        scroll: 0,
        from: 0,
        modal,
        now: T0 + now_ms,
        show_reasoning: false,
        completions: &[],
        completion: 0,
        queued: 0,
        hint: None,
    };
    let mut cache = LineCache::default();
    terminal
        .draw(|f| view::draw(f, &screen, &mut cache))
        .unwrap();
    let buf = terminal.backend().buffer().clone();
    let mut out = String::new();
    for y in 0..buf.area.height {
        let mut line = String::new();
        for x in 0..buf.area.width {
            line.push_str(buf[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[test]
fn a_session_with_every_card_kind() {
    let t = transcript(&session());
    let screen = draw(&t, None, 7000, 100, 60);
    assert!(screen.contains("› Fix the parser, please."));
    assert!(screen.contains("✓ read src/parse.rs"));
    assert!(screen.contains("+ fn parse() -> Result<(), Error> {"));
    assert!(screen.contains("exit 101"));
    assert!(screen.contains("✗ write /etc/passwd"));
    assert!(screen.contains("subagent survey the tests"));
    assert!(screen.contains("history compacted"));
    assert!(screen.contains("Fixing the loop"), "the todo panel");
    insta::assert_snapshot!("session", screen);
}

#[test]
fn the_status_line_shows_the_running_step_and_context() {
    let mut events = session();
    // The turn is still running: step 1 started at T0.
    events.truncate(12);
    let t = transcript(&events);
    let screen = draw(&t, None, 2500, 100, 30);
    let status = screen
        .lines()
        .rev()
        .find(|l| !l.is_empty())
        .unwrap()
        .to_owned();
    assert!(status.contains("deepseek-chat"), "{status}");
    assert!(status.contains("workspace-write"), "{status}");
    assert!(status.contains("context 93%"), "{status}");
    assert!(status.contains("turn 1 step 1 2.5s"), "{status}");
    assert!(
        screen.contains("bash cargo test (1.0s)"),
        "a running card counts its time"
    );
    insta::assert_snapshot!("running", screen);
}

#[test]
fn the_status_line_says_what_runs_unasked_under_the_sandbox() {
    let status = |sandbox: &str, policy: &str| {
        let mut events = session();
        events[0] = ev(0, 0, "sandbox/mode", json!({"mode": sandbox}));
        events[1] = ev(1, 0, "approval/policy", json!({"policy": policy}));
        events.truncate(12);
        let t = transcript(&events);
        let screen = draw(&t, None, 2500, 200, 30);
        screen
            .lines()
            .rev()
            .find(|l| !l.is_empty())
            .unwrap()
            .to_owned()
    };
    let s = status("workspace-write", "ask");
    assert!(
        s.contains("approval ask") && s.contains("edits and commands in the workspace run unasked"),
        "{s}"
    );
    // A log written with keel's old words reads as the new ones.
    let s = status("read-only", "never");
    assert!(
        s.contains("approval deny") && s.contains("only reads run; commands and edits refused"),
        "{s}"
    );
    let s = status("read-only", "auto");
    assert!(
        s.contains("approval allow") && s.contains("reads and commands run unasked"),
        "{s}"
    );
    let s = status("full-access", "ask");
    assert!(s.contains("everything runs unasked"), "{s}");
}

#[test]
fn the_approval_modal() {
    let t = transcript(&session()[..4]);
    let modal = Modal {
        title: "Allow bash?".into(),
        body: "rm -rf target\n\nthe sandbox is read-only and 'bash' runs commands that could change files".into(),
        options: vec![
            "Allow once".into(),
            "Allow this command for the session".into(),
            "Deny (what you typed is sent as the reason)".into(),
        ],
        selected: 1,
        markdown: false,
    };
    let screen = draw(&t, Some(&modal), 0, 100, 24);
    assert!(screen.contains("› 2. Allow this command for the session"));
    insta::assert_snapshot!("approval", screen);
}

#[test]
fn the_plan_approval_modal() {
    let t = transcript(&session()[..4]);
    let modal = Modal {
        title: "Approve this plan?".into(),
        body: "1. Read `src/parse.rs`\n2. Replace the loop with an iterator\n3. Run `cargo test`"
            .into(),
        options: vec![
            "Approve and start".into(),
            "Keep planning (type feedback first, then choose)".into(),
        ],
        selected: 0,
        markdown: true,
    };
    let screen = draw(&t, Some(&modal), 0, 100, 24);
    assert!(screen.contains("Approve and start"));
    insta::assert_snapshot!("plan_approval", screen);
}

#[test]
fn a_streamed_answer_renders_as_it_grows_and_settles_to_the_message() {
    let text = "Here is a table:\n\n| name | size |\n|------|------|\n| a.rs | 10 |\n";
    let mut events = session()[..5].to_vec();
    let mut seq = 5;
    events.push(ev(seq, 10, "assistant/chunk", json!({"turn": 1, "step": 1, "chunk": {"type": "block-start", "index": 0, "blockType": "text"}})));
    for piece in text.split_inclusive('\n') {
        seq += 1;
        events.push(ev(seq, 20, "assistant/chunk", json!({"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": piece}})));
    }
    let streaming = draw(&transcript(&events), None, 100, 80, 20);
    events.push(ev(seq + 1, 30, "assistant/message", assistant(1, 1, text)));
    let settled = draw(&transcript(&events), None, 100, 80, 20);
    assert!(streaming.contains("a.rs"), "{streaming}");
    // Same text either way: streaming shows what the message will be.
    let body = |s: &str| {
        s.lines()
            .filter(|l| l.contains("a.rs") || l.contains("name"))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(body(&streaming), body(&settled));
}

/// The same session seen live (the agent's committed-event feed, as the UI takes it) and read
/// back from its file (as `keel resume` shows it) renders the same, compaction marker included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_session_and_its_file_render_the_same() {
    use keel_testkit::agent::{AgentOptions, agent_fixture, load_session};
    use std::sync::{Arc, Mutex};
    let seen: Arc<Mutex<Vec<SessionEvent>>> = Arc::default();
    let mut hooks = keel_agent::HookRegistry::default();
    let feed = seen.clone();
    hooks.session_event.push(Arc::new(move |e: &SessionEvent| {
        feed.lock().unwrap().push(e.clone())
    }));
    let f = agent_fixture(
        r#"
responses:
  - match: { last_user_contains: "first" }
    tool_calls:
      - { id: w1, name: write, arguments: { path: "notes.md", content: "one\ntwo\n" } }
      - { id: b1, name: bash, arguments: { command: "cat notes.md; exit 4" } }
  - match: { last_tool_result_contains: "two" }
    text: "Wrote **notes.md**:\n\n- one\n- two\n"
  - match: { last_message_contains: "Context compaction" }
    text: "SUMMARY: a file was written."
  - text: "Second answer."
"#,
        AgentOptions {
            approval: keel_agent::ApprovalPolicy::Allow,
            hooks,
            ..AgentOptions::default()
        },
    );
    f.agent.followup("first task").unwrap();
    f.agent.run_until_idle().await.unwrap();
    keel_agent::compaction::compact_now(&f.agent, keel_agent::compaction::CompactionReason::Manual)
        .await
        .unwrap();
    f.agent.followup("second task").unwrap();
    f.agent.run_until_idle().await.unwrap();

    let live = transcript(&seen.lock().unwrap());
    let from_file: Vec<SessionEvent> = load_session(&f.session_path)
        .events()
        .map(|e| e.into_owned())
        .collect();
    let resumed = transcript(&from_file);
    assert_eq!(live.cells, resumed.cells);
    let now = from_file.last().unwrap().time - T0;
    let a = draw(&live, None, now, 90, 50);
    let b = draw(&resumed, None, now, 90, 50);
    assert_eq!(a, b);
    assert!(a.contains("history compacted"), "{a}");
    assert!(a.contains("✓ write notes.md"), "{a}");
    assert!(a.contains("exit 4"), "{a}");
    assert!(a.contains("Second answer."), "{a}");
}

#[test]
fn the_session_picker() {
    let entries: Vec<keel_tui::SessionEntry> = [
        ("Fix the parser, please.", 90_000, 48_000),
        (
            "Add a --verbose flag to the CLI and test it",
            7_200_000,
            1_500,
        ),
        ("", 3 * 86_400_000, 300),
    ]
    .iter()
    .enumerate()
    .map(|(i, (title, age, bytes))| keel_tui::SessionEntry {
        path: format!("/s/{i}").into(),
        id: format!("session-{i}"),
        title: (*title).into(),
        modified: T0 - age,
        bytes: *bytes,
    })
    .collect();
    let modal = view::picker(&entries, T0);
    let screen = draw(&Cells::new(), Some(&modal), 0, 100, 20);
    assert!(screen.contains("› 1. Fix the parser, please."), "{screen}");
    assert!(screen.contains("1m ago"), "{screen}");
    assert!(screen.contains("2h ago"), "{screen}");
    assert!(screen.contains("(no prompt yet)"), "{screen}");
    insta::assert_snapshot!("picker", screen);
}

/// In the terminal's own scrollback, what settled is printed once and the live area keeps only
/// the cells still changing, sized to them.
#[test]
fn the_live_area_holds_only_the_cells_still_changing() {
    let events = vec![
        ev(0, 0, "turn/start", json!({"turn": 1})),
        ev(1, 0, "user/message", user("List the files.")),
        ev(2, 0, "step/start", json!({"turn": 1, "step": 1})),
        ev(
            3,
            5,
            "tool/call",
            call("c1", "bash", json!({"command": "ls"})),
        ),
    ];
    let mut t = transcript(&events);
    // The prompt can no longer change; the running bash card can.
    assert_eq!(view::settled_until(&t, 0), 1);
    assert_eq!(view::settled_until(&t, 1), 1);
    let input = Input::new();
    let screen = |t: &Cells, from: usize| {
        let mut cache = LineCache::default();
        let screen = Screen {
            cells: t,
            input: &input,
            scroll: 0,
            from,
            modal: None,
            now: T0 + 100,
            show_reasoning: false,
            completions: &[],
            completion: 0,
            queued: 0,
            hint: None,
        };
        view::live_height(&screen, &mut cache, 80, 40)
    };
    // Editor (3 rows) + status (1) + the card (its line and a blank).
    assert_eq!(screen(&t, 1), 6);
    // From the start the prompt's two rows count too.
    assert_eq!(screen(&t, 0), 8);
    // Never taller than the screen.
    let many: Vec<SessionEvent> = (0..100)
        .map(|i| {
            ev(
                10 + i,
                10,
                "tool/call",
                call(&format!("x{i}"), "bash", json!({"command": "ls"})),
            )
        })
        .collect();
    for e in &many {
        t.apply(e);
    }
    assert_eq!(screen(&t, 1), 40);
    // Once the card finishes everything has settled.
    t.apply(&ev(
        200,
        50,
        "tool/result",
        result("c1", "a\nb", false, json!({"exitCode": 0})),
    ));
    assert_eq!(view::settled_until(&t, 1), 2);
}

/// A running workflow's block lists its phases and children as they go; once the call has its
/// result the block shows the result alone.
#[test]
fn a_running_workflow_lists_its_children_in_its_block() {
    let args = json!({"script": "return 1;", "meta": {"name": "fan", "description": "two agents"}});
    let mut events = vec![
        ev(1, 0, "user/message", user("go")),
        ev(2, 1, "tool/call", call("w1", "workflow", args)),
        ev(
            3,
            2,
            "workflow/started",
            json!({"callId": "w1", "name": "fan", "description": "two agents", "phases": ["survey"]}),
        ),
        ev(
            4,
            3,
            "workflow/phase",
            json!({"callId": "w1", "title": "survey"}),
        ),
        ev(
            5,
            4,
            "workflow/agent",
            json!({"callId": "w1", "n": 1, "label": "read a.rs", "status": "running"}),
        ),
        ev(
            6,
            5,
            "workflow/agent",
            json!({"callId": "w1", "n": 2, "label": "read b.rs", "status": "running"}),
        ),
        ev(
            7,
            6,
            "workflow/agent",
            json!({"callId": "w1", "n": 1, "label": "read a.rs", "status": "completed"}),
        ),
    ];
    let screen = draw(&transcript(&events), None, 10, 80, 20);
    for line in [
        "│ fan: two agents",
        "│ ▸ survey",
        "│   ✓ read a.rs",
        "│   … read b.rs",
    ] {
        assert!(screen.contains(line), "{line:?} in\n{screen}");
    }
    events.push(ev(
        8,
        7,
        "tool/result",
        result("w1", "{\"ok\":true}", false, json!({})),
    ));
    let screen = draw(&transcript(&events), None, 10, 80, 20);
    assert!(!screen.contains("▸ survey"), "{screen}");
}
