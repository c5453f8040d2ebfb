//! The read-like tool call recorded stage by stage, shared by the `provenance` criterion bench
//! and the `callgrind` example (so both measure the same workload).

use keel_provenance::{
    Dispatch, ExecuteResult, Payload, PostDecision, PreDecision, Recorder, SettledResult,
};
use serde_json::{Value, json};

/// The native ids of call number `i`.
pub struct Ids {
    pub event: String,
    pub call: String,
    pub call_event: String,
    pub token: String,
    pub result_event: String,
}

pub fn ids(i: usize) -> Ids {
    Ids {
        event: format!("ev-{i}"),
        call: format!("call_{i}"),
        call_event: format!("ev-call-{i}"),
        token: format!("tok-{i}"),
        result_event: format!("ev-result-{i}"),
    }
}

pub struct Material {
    pub message: Value,
    pub tool_call: Value,
    pub view: Value,
    pub args: Value,
    pub value: Value,
    pub result_event: Value,
}

pub fn material() -> Material {
    Material {
        message: json!({"role": "assistant", "content": [{"type": "text", "text": "Reading the file."},
            {"type": "tool-call", "id": "call_x", "name": "read", "arguments": "{\"path\":\"src/main.rs\"}"}]}),
        tool_call: json!({"turn": 1, "step": 1, "callId": "call_x", "name": "read", "arguments": "{\"path\":\"src/main.rs\"}"}),
        view: json!({"name": "read", "args": {"path": "src/main.rs"}}),
        args: json!({"path": "src/main.rs", "offset": 0, "limit": 2000}),
        value: json!({"path": "src/main.rs", "content": "fn main() {\n    println!(\"hello\");\n}\n", "lines": 3, "truncated": false}),
        result_event: json!({"turn": 1, "step": 1, "message": {"role": "user", "content": [{"type": "tool-result", "toolCallId": "call_x"}]}}),
    }
}

/// Every stage of one read-like call, including its assistant message.
pub fn one_call(rec: &mut Recorder, m: &Material, id: &Ids) {
    rec.assistant_message(&id.event, Payload::Value(&m.message));
    rec.assistant_tool_call(&id.event, &id.call, "read", "{\"path\":\"src/main.rs\"}");
    rec.tool_call_event(&id.call, &id.call_event, Payload::Value(&m.tool_call));
    rec.pre_execute_enter(&id.call, Payload::Value(&m.view));
    rec.pre_execute_decision(&id.call, PreDecision::Allow);
    rec.execute_enter(
        &id.call,
        Dispatch {
            token: &id.token,
            parent_token: None,
            arguments: Payload::Value(&m.args),
        },
    );
    rec.execute_result(&id.token, ExecuteResult::Value(Payload::Value(&m.value)));
    rec.post_execute(&id.call, Payload::Value(&m.value), PostDecision::Accept);
    rec.settled(
        &id.call,
        SettledResult {
            value: Payload::Value(&m.value),
            content: Payload::Str("fn main() {}"),
            is_error: false,
            error_code: None,
        },
    );
    rec.tool_result_event(&id.call, &id.result_event, Payload::Value(&m.result_event));
}
