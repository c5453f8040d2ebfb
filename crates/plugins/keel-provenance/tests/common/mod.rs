//! Shared workload for the integration tests: the stages of realistic tool calls.
#![allow(dead_code)]

use keel_provenance::{
    Dispatch, ExecuteResult, Payload, PostDecision, PreDecision, Recorder, SettledResult,
};
use serde_json::{Value, json};

/// The committed assistant event proposing `calls` (call id, tool name, raw args).
pub fn assistant(rec: &mut Recorder, event_id: &str, calls: &[(&str, &str, &str)]) {
    let blocks: Vec<Value> =
        calls.iter().map(|(id, name, args)| json!({"type": "tool-call", "id": id, "name": name, "arguments": args})).collect();
    let event = json!({"type": "assistant/message", "data": {"message": {"role": "assistant", "content": blocks}}});
    rec.assistant_message(event_id, Payload::Value(&event));
    for (id, name, args) in calls {
        rec.assistant_tool_call(event_id, id, name, args);
    }
}

/// Stages up to and including the pre-execute decision.
pub fn until_decision(rec: &mut Recorder, call_id: &str, decision: PreDecision<'_>) {
    let ev = json!({"type": "tool/call", "callId": call_id});
    rec.tool_call_event(call_id, &format!("ev-call-{call_id}"), Payload::Value(&ev));
    let view = json!({"callId": call_id, "args": {"path": "src/main.rs"}});
    rec.pre_execute_enter(call_id, Payload::Value(&view));
    rec.pre_execute_decision(call_id, decision);
}

/// Dispatch and return of a read-like body.
pub fn execute(rec: &mut Recorder, call_id: &str, token: &str, value: &Value) {
    let args = json!({"path": "src/main.rs"});
    rec.execute_enter(
        call_id,
        Dispatch {
            token,
            parent_token: None,
            arguments: Payload::Value(&args),
        },
    );
    rec.execute_result(token, ExecuteResult::Value(Payload::Value(value)));
}

/// Settle and commit a result.
pub fn finish(
    rec: &mut Recorder,
    call_id: &str,
    value: &Value,
    error_code: Option<keel_protocol::ToolErrorCode>,
) {
    let content = value.to_string();
    rec.settled(
        call_id,
        SettledResult {
            value: Payload::Value(value),
            content: Payload::Str(&content),
            is_error: error_code.is_some(),
            error_code,
        },
    );
    let ev = json!({"type": "tool/result", "callId": call_id});
    rec.tool_result_event(
        call_id,
        &format!("ev-result-{call_id}"),
        Payload::Value(&ev),
    );
}

/// A whole read-like call (every stage), after its assistant message.
pub fn read_call(rec: &mut Recorder, call_id: &str, token: &str) {
    until_decision(rec, call_id, PreDecision::Allow);
    let value = json!({"content": "fn main() {}\n", "lines": 1});
    execute(rec, call_id, token, &value);
    rec.post_execute(call_id, Payload::Value(&value), PostDecision::Accept);
    finish(rec, call_id, &value, None);
}

/// A deterministic workload: one message with two calls (one read, one denied).
pub fn workload(rec: &mut Recorder) {
    assistant(
        rec,
        "ev-1",
        &[
            ("call_a", "read", r#"{"path":"src/main.rs"}"#),
            ("call_b", "bash", r#"{"cmd":"rm -rf /"}"#),
        ],
    );
    read_call(rec, "call_a", "tok-a");
    until_decision(
        rec,
        "call_b",
        PreDecision::Deny {
            reason: "destructive command",
        },
    );
    finish(
        rec,
        "call_b",
        &json!({"error": "denied"}),
        Some(keel_protocol::ToolErrorCode::Denied),
    );
}
