//! keel reads the real DeepSeek Harness logs: plain and zstd, validates them, derives the
//! messages dsh sent, and crash-repairs the interrupted one.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::testdata;
use keel_protocol::*;
use keel_session::{Format, Store};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

fn load(dir: &str, file: &str) -> keel_session::Loaded {
    let p = testdata().join(dir).join(file);
    Store::load(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Every event, as JSON values (chunks rebuilt from compact storage).
fn values(s: &keel_session::Session) -> Vec<Value> {
    s.events()
        .map(|e| serde_json::to_value(&*e).unwrap())
        .collect()
}

/// The events a file stands for, line by line with the store's line parser (not the loader),
/// expanding packed rows.
fn expected_events(dir: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(testdata().join(dir).join("session.plain.jsonl")).unwrap();
    let mut out = vec![];
    for line in text.lines().skip(1) {
        match keel_session::store::parse_record(line).unwrap() {
            LogRecord::Event(e) => out.push(serde_json::to_value(&e).unwrap()),
            LogRecord::Packed(p) => {
                out.extend(p.expand().map(|e| serde_json::to_value(&e).unwrap()))
            }
            LogRecord::Header(_) => panic!("second header"),
        }
    }
    out
}

#[test]
fn plain_and_zstd_load_the_same_events_as_the_file_holds() {
    for dir in ["read-file", "multi-step", "interrupted", "compaction-prune"] {
        let plain = load(dir, "session.plain.jsonl");
        let zstd = load(dir, "session.jsonl.zstd");
        assert_eq!(zstd.report.format, Format::Zstd);
        assert_eq!(plain.report.torn, None, "{dir}");
        assert_eq!(zstd.report.torn, None, "{dir}");
        let expected = expected_events(dir);
        assert_eq!(values(&plain.session), expected, "{dir} plain");
        assert_eq!(values(&zstd.session), expected, "{dir} zstd");
        assert_eq!(plain.session.header(), zstd.session.header());
        assert_eq!(plain.session.check_invariants(), Ok(()), "{dir}");
    }
    let ms = load("multi-step-plain", "session.jsonl");
    assert_eq!(ms.session.len(), 174);
    assert_eq!(ms.session.turn_count(), 1);
}

/// A derived message in chat-completions wire form (what dsh sent), possibly several (one per
/// tool result).
fn wire(m: &Message) -> Vec<Value> {
    let mut out = vec![];
    match m.role {
        Role::Assistant => {
            let reasoning: String = m
                .content
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::Reasoning { text, .. } => Some(text.as_str()),
                    _ => None,
                })
                .collect();
            let mut v = json!({"role": "assistant", "content": m.text()});
            if !reasoning.is_empty() {
                v["reasoning_content"] = json!(reasoning);
            }
            let calls: Vec<Value> = m.tool_calls().map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}})).collect();
            if !calls.is_empty() {
                v["tool_calls"] = json!(calls);
            }
            out.push(v);
        }
        Role::User if m.tool_results().next().is_some() => {
            for r in m.tool_results() {
                out.push(
                    json!({"role": "tool", "tool_call_id": r.tool_call_id, "content": r.text()}),
                );
            }
        }
        Role::User => out.push(json!({"role": "user", "content": m.text()})),
    }
    out
}

fn project(v: &Value) -> Value {
    let mut o = serde_json::Map::new();
    for k in [
        "role",
        "content",
        "reasoning_content",
        "tool_calls",
        "tool_call_id",
    ] {
        if let Some(x) = v.get(k) {
            o.insert(k.into(), x.clone());
        }
    }
    Value::Object(o)
}

fn check_against_requests(dir: &str, file: &str) {
    let mut loaded = load(dir, file);
    let count = loaded.session.derived_message_count();
    assert_eq!(count, loaded.session.derive_messages().len());
    let derived: Vec<Value> = loaded
        .session
        .derive_messages()
        .iter()
        .flat_map(|d| wire(&d.message))
        .collect();
    let reqs: Vec<Value> = std::fs::read_to_string(testdata().join(dir).join("requests.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let last = reqs
        .iter()
        .rev()
        .find(|r| r["body"].get("tools").is_some())
        .unwrap();
    let sent: Vec<Value> = last["body"]["messages"].as_array().unwrap()[1..]
        .iter()
        .map(project)
        .collect();
    assert!(sent.len() >= 4, "{dir}: {} messages", sent.len());
    // The session continues after the last request (the final answer): the request is a prefix.
    assert!(derived.len() > sent.len(), "{dir}");
    assert_eq!(&derived[..sent.len()], &sent[..], "{dir}");
}

#[test]
fn derived_messages_match_what_dsh_sent() {
    check_against_requests("multi-step", "session.jsonl.zstd");
    check_against_requests("multi-step", "session.plain.jsonl");
    check_against_requests("read-file", "session.jsonl.zstd");
}

#[test]
fn every_request_is_a_prefix_of_the_derived_history() {
    let mut loaded = load("multi-step", "session.plain.jsonl");
    let derived: Vec<Value> = loaded
        .session
        .derive_messages()
        .iter()
        .flat_map(|d| wire(&d.message))
        .collect();
    for line in std::fs::read_to_string(testdata().join("multi-step/requests.jsonl"))
        .unwrap()
        .lines()
    {
        let r: Value = serde_json::from_str(line).unwrap();
        if r["body"].get("tools").is_none() {
            continue; // the title request
        }
        let sent: Vec<Value> = r["body"]["messages"].as_array().unwrap()[1..]
            .iter()
            .map(project)
            .collect();
        assert_eq!(&derived[..sent.len()], &sent[..]);
    }
}

#[test]
fn interrupted_session_repairs_with_outcome_unknown_then_step_end_then_turn_end() {
    for file in ["session.plain.jsonl", "session.jsonl.zstd"] {
        let mut loaded = load("interrupted", file);
        let s = &mut loaded.session;
        assert_eq!(s.len(), 35);
        let state = s.turn_state();
        assert_eq!(state.open_turn, Some(keel_protocol::TurnNo(1)));
        assert_eq!(
            state.open_step,
            Some(StepRef {
                turn: keel_protocol::TurnNo(1),
                step: keel_protocol::StepNo(1)
            })
        );
        let (plan, _) = s.plan_repair();
        assert_eq!(s.len(), 35, "plan_repair does not mutate");
        let report = s.repair().unwrap();
        assert_eq!(report.outcome_unknown, vec!["call_mock_1_0".to_owned()]);
        assert!(report.not_started.is_empty());
        assert_eq!(report.appended, vec![Seq(35), Seq(36), Seq(37)]);
        let types: Vec<String> = plan.iter().map(|e| e.type_name().to_owned()).collect();
        assert_eq!(types, ["tool/result", "step/end", "turn/end"]);
        let result = s.event(Seq(35)).unwrap().into_owned();
        assert_eq!(
            result.source_event_seqs,
            vec![Seq(33)],
            "cites the tool/call"
        );
        let EventBody::ToolResult(r) = &result.body else {
            panic!()
        };
        assert_eq!(r.meta, Some(json!({"code": "TOOL_OUTCOME_UNKNOWN"})));
        let block = r.message.tool_results().next().unwrap();
        assert!(block.is_error);
        assert_eq!(block.tool_call_id, "call_mock_1_0");
        assert!(block.text().contains("outcome is"), "{}", block.text());
        let EventBody::TurnEnd(end) = &s.event(Seq(37)).unwrap().body else {
            panic!()
        };
        assert_eq!(end.reason, TurnEndReason::Interrupted);
        assert_eq!(s.check_invariants(), Ok(()));
        assert_eq!(s.turn_state().open_turn, None);
        assert!(s.repair().unwrap().is_noop());
        // Every tool call in the derived history is followed by its result.
        let msgs: Vec<_> = s
            .derive_messages()
            .iter()
            .map(|d| d.message.clone())
            .collect();
        let last = msgs.last().unwrap();
        assert_eq!(
            last.tool_results().next().unwrap().tool_call_id,
            "call_mock_1_0"
        );
    }
}

#[test]
fn compaction_prune_replaces_the_tool_result_on_the_surface() {
    let mut loaded = load("compaction-prune", "session.jsonl.zstd");
    let s = &mut loaded.session;
    assert_eq!(s.surface().generation(), 1);
    let nodes = s.surface().nodes().to_vec();
    assert!(
        nodes.contains(&Seq(36)) && !nodes.contains(&Seq(33)),
        "{nodes:?}"
    );
    assert_eq!(nodes[..4], [Seq(7), Seq(8), Seq(30), Seq(36)]);
    let count = s.derived_message_count();
    let derived = s.derive_messages();
    assert_eq!(derived.len(), count);
    assert_eq!(derived[3].seq, Seq(36));
    assert_eq!(s.check_invariants(), Ok(()));
}
