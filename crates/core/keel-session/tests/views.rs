//! The read-only views (`keel_session::view`): the transcript of sessions built in memory and
//! of the real DeepSeek Harness logs, one-line event summaries, and the health check of session
//! files written to a temp directory (valid, open turn, torn tail, unloadable, broken brackets).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::{B, testdata};
use keel_protocol::{EventBody, Seq};
use keel_session::view::transcript::{Block, Entry, Item, Origin};
use keel_session::view::{AfterRepair, Status, Transcript, call_names, check_file, event_summary};
use keel_session::{LoadError, Session, Store, WriterOptions};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

fn turn(block: &Block) -> &keel_session::view::transcript::Turn {
    match block {
        Block::Turn(t) => t,
        Block::Item(i) => panic!("expected a turn, got {i:?}"),
    }
}

fn step(entry: &Entry) -> &keel_session::view::transcript::Step {
    match entry {
        Entry::Step(s) => s,
        Entry::Item(i) => panic!("expected a step, got {i:?}"),
    }
}

/// Every item of a transcript, in order, wherever it was placed.
fn all_items(t: &Transcript) -> Vec<&Item> {
    let mut out = Vec::new();
    for block in &t.blocks {
        match block {
            Block::Item(i) => out.push(i),
            Block::Turn(turn) => {
                for entry in &turn.entries {
                    match entry {
                        Entry::Item(i) => out.push(i),
                        Entry::Step(s) => out.extend(s.items.iter()),
                    }
                }
            }
        }
    }
    out
}

fn seq_of(item: &Item) -> Seq {
    match item {
        Item::User { seq, .. }
        | Item::Assistant { seq, .. }
        | Item::ToolResult { seq, .. }
        | Item::Compaction { seq, .. }
        | Item::Note { seq, .. } => *seq,
    }
}

fn load_fixture(dir: &str) -> Session {
    Store::load(&testdata().join(dir).join("session.jsonl.zstd"))
        .unwrap()
        .session
}

/// Write `session` as a plain session file under `dir`.
fn write(dir: &Path, session: &Session) -> PathBuf {
    let path = dir.join("s").join("session.jsonl");
    Store::create_at(&path, session, WriterOptions::default())
        .unwrap()
        .close()
        .unwrap();
    path
}

// ------------------------------------------------------------------------------ transcript

#[test]
fn transcript_places_events_under_their_turn_and_step() {
    let mut b = B::new();
    b.full_turn(1);
    b.full_turn(2);
    let t = Transcript::build(&b.s, &Default::default());
    assert_eq!(t.id, "session-test");
    assert_eq!(t.cwd.as_deref(), Some("/home/user/project"));
    assert_eq!(t.events, b.s.len());
    assert_eq!(t.blocks.len(), 2);
    let first = turn(&t.blocks[0]);
    assert_eq!((first.turn.0, first.seq), (1, Seq(0)));
    assert_eq!(first.entries.len(), 2);
    let s1 = step(&first.entries[0]);
    assert_eq!((s1.turn.0, s1.step.0, s1.seq), (1, 1, Seq(1)));
    assert!(s1.ended.is_some());
    // Chunks are not shown: the user message, the assistant message, the result.
    assert_eq!(s1.items.len(), 3);
    match &s1.items[0] {
        Item::User {
            origin, text, fate, ..
        } => {
            assert_eq!(*origin, Origin::Human);
            assert_eq!(text, "prompt 1");
            assert!(fate.shadowed_by.is_none() && fate.replaces.is_empty());
        }
        other => panic!("{other:?}"),
    }
    match &s1.items[1] {
        Item::Assistant { text, calls, .. } => {
            assert_eq!(text, "thinking");
            assert_eq!(calls.len(), 1);
            assert_eq!(
                (calls[0].id.as_str(), calls[0].name.as_str()),
                ("c1", "bash")
            );
            assert!(calls[0].started.is_some() && calls[0].result.is_some());
        }
        other => panic!("{other:?}"),
    }
    match &s1.items[2] {
        Item::ToolResult {
            call_id,
            tool,
            is_error,
            text,
            ..
        } => {
            assert_eq!(call_id, "c1");
            assert_eq!(tool.as_deref(), Some("bash"));
            assert!(!is_error);
            assert_eq!(text, "ok");
        }
        other => panic!("{other:?}"),
    }
    let end = first.end.as_ref().unwrap();
    assert_eq!(
        (end.reason.as_str(), end.detail.as_deref()),
        ("completed", None)
    );

    // The serde shape is the `keel sessions show --json` format.
    let v = serde_json::to_value(&t).unwrap();
    assert_eq!(v["blocks"][0]["block"], "turn");
    assert_eq!(v["blocks"][0]["entries"][0]["entry"], "step");
    let user = &v["blocks"][0]["entries"][0]["items"][0];
    assert_eq!(user["kind"], "user");
    assert_eq!(user["origin"], "human");
    assert_eq!(user.get("shadowedBy"), None);
    assert_eq!(
        v["blocks"][0]["end"],
        json!({"seq": first.end.as_ref().unwrap().seq, "reason": "completed"})
    );
}

#[test]
fn events_outside_turns_stay_items_and_open_turns_stay_open() {
    let mut b = B::new();
    b.turn_end(7);
    b.user("before any turn");
    b.turn_start(1);
    b.step_start(1, 1);
    b.assistant(1, 1, "", &[("c9", "bash")]);
    b.tool_call(1, 1, "c9");
    let t = Transcript::build(&b.s, &Default::default());
    assert_eq!(t.blocks.len(), 3);
    match &t.blocks[0] {
        Block::Item(Item::Note { event, text, .. }) => {
            assert_eq!(event, "turn/end");
            assert_eq!(text, "turn 7 ended outside an open turn");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(&t.blocks[1], Block::Item(Item::User { .. })));
    let open = turn(&t.blocks[2]);
    assert!(open.end.is_none());
    let s = step(&open.entries[0]);
    assert!(s.ended.is_none());
    match &s.items[0] {
        Item::Assistant { calls, .. } => {
            assert!(calls[0].started.is_some());
            assert!(calls[0].result.is_none());
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn compaction_marks_the_pruned_original_and_its_replacement() {
    let session = load_fixture("compaction-prune");
    let t = Transcript::build(&session, &Default::default());
    let items = all_items(&t);
    let by_seq = |n: u64| {
        items
            .iter()
            .find(|i| seq_of(i) == Seq(n))
            .copied()
            .unwrap_or_else(|| panic!("no item #{n}"))
    };
    match by_seq(33) {
        Item::ToolResult { fate, .. } => {
            let shadow = fate.shadowed_by.unwrap();
            assert_eq!((shadow.seq, shadow.how), (Seq(36), "pruned"));
        }
        other => panic!("{other:?}"),
    }
    match by_seq(35) {
        Item::Compaction { phase, detail, .. } => {
            assert_eq!(*phase, "prune");
            assert!(detail.starts_with("shadows #33..#33"), "{detail}");
        }
        other => panic!("{other:?}"),
    }
    match by_seq(36) {
        Item::ToolResult { fate, .. } => assert_eq!(fate.replaces, vec![Seq(33)]),
        other => panic!("{other:?}"),
    }
}

#[test]
fn real_logs_have_plugin_context_notes_and_named_calls() {
    let session = load_fixture("multi-step");
    let t = Transcript::build(&session, &Default::default());
    let items = all_items(&t);
    assert!(items.iter().any(|i| matches!(
        i,
        Item::User { origin: Origin::Plugin, plugin: Some(p), .. } if p == "@deepseek-ai/dsh-system-prompt"
    )));
    assert!(items.iter().any(|i| matches!(
        i,
        Item::Note { event, text, .. } if event == "todo/write" && text.starts_with("3 items: [x] Write calc.py")
    )));
    let names = call_names(&session);
    assert_eq!(names.get("call_mock_4_0").map(String::as_str), Some("edit"));
    // Every tool/call of the log is named.
    for ev in session.events() {
        if let EventBody::ToolCall(c) = &ev.body {
            assert_eq!(names.get(&c.call_id), Some(&c.name));
        }
    }
}

#[test]
fn event_summaries_are_one_line_and_name_the_tool() {
    let mut b = B::new();
    b.full_turn(1);
    let names = call_names(&b.s);
    let summaries: Vec<String> = b.s.events().map(|e| event_summary(&e, &names)).collect();
    assert_eq!(summaries[0], "turn 1");
    assert_eq!(summaries[1], "step 1.1");
    assert_eq!(summaries[2], "[human] prompt 1");
    assert_eq!(summaries[3], "1.1 text thin");
    assert_eq!(summaries[5], "1.1 thinking + calls: bash");
    assert_eq!(summaries[6], "1.1 bash {} [c1]");
    assert_eq!(summaries[7], "1.1 bash ok: ok");
    assert_eq!(summaries.last().unwrap(), "turn 1: completed");
    // Without the call's name the result says `?`.
    let result = b.s.event(Seq(7)).unwrap();
    assert_eq!(event_summary(&result, &HashMap::new()), "1.1 ? ok: ok");
}

// ------------------------------------------------------------------------------ check

#[test]
fn a_closed_log_is_valid() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = B::new();
    b.full_turn(1);
    let path = write(dir.path(), &b.s);
    let (report, loaded) = check_file(&path);
    assert_eq!(report.status, Status::Valid);
    assert!(report.error.is_none());
    assert_eq!(loaded.unwrap().session.len(), b.s.len());
    let f = report.loaded.as_ref().unwrap();
    assert_eq!(f.format, "plain");
    assert_eq!(f.id, "session-test");
    assert_eq!((f.events, f.turns), (b.s.len(), 1));
    assert_eq!((f.open_turn, f.open_step.as_deref()), (None, None));
    assert_eq!(f.last_turn_end, Some(Seq(b.s.len() - 1)));
    assert_eq!(f.derived_messages, b.s.derive_messages().len());
    assert!(f.torn_tail.is_none());
    assert!(f.violations.is_empty() && f.repair.is_empty());
    assert!(f.violations_after_repair.is_empty());
    let v = serde_json::to_value(&report).unwrap();
    assert_eq!(v["status"], "valid");
    assert_eq!(v.get("error"), None);
    assert_eq!(v["violations"], json!([]));
}

#[test]
fn an_open_turn_is_repairable_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let src = testdata().join("interrupted").join("session.jsonl.zstd");
    let path = dir.path().join("session.jsonl.zstd");
    std::fs::copy(&src, &path).unwrap();
    let before = std::fs::read(&path).unwrap();
    let (report, _) = check_file(&path);
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert_eq!(report.status, Status::Repairable);
    let f = report.loaded.as_ref().unwrap();
    assert_eq!(f.format, "zstd");
    assert_eq!(f.open_turn, Some(keel_protocol::TurnNo(1)));
    assert_eq!(f.open_step.as_deref(), Some("1.1"));
    let planned: Vec<&str> = f.repair.iter().map(|e| e.type_name.as_str()).collect();
    assert_eq!(planned, ["tool/result", "step/end", "turn/end"]);
    assert!(
        f.repair[0].summary.contains("TOOL_OUTCOME_UNKNOWN"),
        "{}",
        f.repair[0].summary
    );
    assert_eq!(f.repair[2].summary, "turn 1: interrupted");
    assert!(f.violations_after_repair.is_empty());
}

#[test]
fn a_torn_tail_is_repairable_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = B::new();
    b.full_turn(1);
    let path = write(dir.path(), &b.s);
    let whole = std::fs::metadata(&path).unwrap().len();
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(br#"{"type":"turn/start","seq":15"#);
    std::fs::write(&path, &bytes).unwrap();
    let (report, _) = check_file(&path);
    assert_eq!(report.status, Status::Repairable);
    let torn = report.loaded.as_ref().unwrap().torn_tail.as_ref().unwrap();
    assert_eq!(torn.offset, whole);
    assert_eq!(torn.dropped_bytes, bytes.len() as u64 - whole);
    let lines_before = bytes[..whole as usize]
        .iter()
        .filter(|&&c| c == b'\n')
        .count();
    assert_eq!(torn.line, lines_before as u64 + 1);
    let v = serde_json::to_value(&report).unwrap();
    assert_eq!(v["tornTail"]["droppedBytes"], json!(torn.dropped_bytes));
}

#[test]
fn an_unloadable_file_is_corrupt_with_the_loader_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.jsonl");
    std::fs::write(&path, "garbage\n").unwrap();
    let (report, loaded) = check_file(&path);
    assert!(loaded.is_none());
    assert_eq!(report.status, Status::Corrupt);
    assert!(report.loaded.is_none());
    let error: &LoadError = report.error.as_ref().unwrap();
    let v = serde_json::to_value(&report).unwrap();
    assert_eq!(v["error"], Value::String(error.to_string()));
    assert_eq!(v.get("format"), None);
    assert_eq!(v["status"], "corrupt");
}

#[test]
fn broken_brackets_are_corrupt_and_listed() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = B::new();
    b.turn_start(1);
    b.turn_start(2);
    let path = write(dir.path(), &b.s);
    let (report, _) = check_file(&path);
    assert_eq!(report.status, Status::Corrupt);
    let f = report.loaded.as_ref().unwrap();
    assert!(!f.violations.is_empty());
    // Crash repair closes the open turn, but the earlier bracket stays broken.
    assert!(!f.repair.is_empty());
    assert!(
        f.violations_after_repair
            .iter()
            .all(|a| matches!(a, AfterRepair::Violation(_)))
    );
    assert!(!f.violations_after_repair.is_empty());
    let v = serde_json::to_value(&report).unwrap();
    let shown: Vec<String> = f.violations.iter().map(ToString::to_string).collect();
    assert_eq!(v["violations"], json!(shown));
}
