//! Request-mapping tests, including a round trip through dsh's recorded request bodies.

use super::*;
use crate::catalogue::ModelCatalogue;
use keel_protocol::{MessageSource, ToolCallBlock, ToolResultBlock};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

const DSH_REQUESTS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../testdata/dsh-sessions/multi-step/requests.jsonl"
);

fn msg(role: Role, content: Vec<ContentBlock>) -> Message {
    Message {
        role,
        content,
        source: MessageSource::user(),
        id: "m".into(),
    }
}

fn flash() -> ModelInfo {
    ModelCatalogue::default().lookup("deepseek-v4-flash")
}

/// Test-only inverse of the mapping: a dsh wire body back to a [`ChatRequest`].
fn from_wire(body: &Value) -> ChatRequest {
    let mut req = ChatRequest {
        model: body["model"].as_str().unwrap_or_default().to_owned(),
        max_tokens: body["max_tokens"].as_u64(),
        thinking: body["thinking"]["type"].as_str().map(|t| t == "enabled"),
        reasoning_effort: body["reasoning_effort"].as_str().map(str::to_owned),
        ..ChatRequest::default()
    };
    for tool in body["tools"].as_array().into_iter().flatten() {
        let f = &tool["function"];
        req.tools.push(ToolSchema {
            name: f["name"].as_str().unwrap_or_default().into(),
            description: f["description"].as_str().unwrap_or_default().into(),
            parameters: f["parameters"].clone(),
        });
    }
    for m in body["messages"].as_array().into_iter().flatten() {
        let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        match m["role"].as_str() {
            Some("system") => req.system = text(&m["content"]),
            Some("user") => req.messages.push(msg(
                Role::User,
                vec![ContentBlock::text(text(&m["content"]))],
            )),
            Some("assistant") => {
                let mut blocks = vec![ContentBlock::Reasoning {
                    text: text(&m["reasoning_content"]),
                }];
                blocks.push(ContentBlock::text(text(&m["content"])));
                for c in m["tool_calls"].as_array().into_iter().flatten() {
                    blocks.push(ContentBlock::ToolCall(ToolCallBlock {
                        id: text(&c["id"]),
                        name: text(&c["function"]["name"]),
                        arguments: text(&c["function"]["arguments"]),
                    }));
                }
                req.messages.push(msg(Role::Assistant, blocks));
            }
            Some("tool") => req.messages.push(msg(
                Role::User,
                vec![ContentBlock::ToolResult(ToolResultBlock {
                    tool_call_id: text(&m["tool_call_id"]),
                    content: vec![ContentBlock::text(text(&m["content"]))],
                    is_error: false,
                })],
            )),
            other => panic!("unexpected role {other:?}"),
        }
    }
    req
}

#[test]
fn dsh_request_bodies_round_trip_exactly() {
    let text = std::fs::read_to_string(DSH_REQUESTS).unwrap();
    let mut checked = 0;
    for line in text.lines() {
        let recorded: Value = serde_json::from_str(line).unwrap();
        let body = &recorded["body"];
        let req = from_wire(body);
        assert_eq!(
            &request_body(&req, &flash()),
            body,
            "request {}",
            recorded["n"]
        );
        checked += 1;
    }
    assert_eq!(checked, 8);
}

#[test]
fn key_order_and_bytes_follow_dsh_and_are_deterministic() {
    let text = std::fs::read_to_string(DSH_REQUESTS).unwrap();
    let recorded: Value = serde_json::from_str(text.lines().nth(2).unwrap()).unwrap();
    let req = from_wire(&recorded["body"]);
    let bytes = request_body_bytes(&req, &flash());
    let s = String::from_utf8(bytes.clone()).unwrap();
    assert!(
        s.starts_with(r#"{"model":"deepseek-v4-flash","messages":[{"role":"system","content":"#)
    );
    assert!(s.contains(r#"],"stream":true,"stream_options":{"include_usage":true},"thinking":{"type":"enabled"},"reasoning_effort":"high","tools":[{"type":"function","function":{"name":"bash","description":"#));
    assert!(s.ends_with(r#"],"max_tokens":256000}"#));
    assert!(s.contains(
        r#"{"role":"assistant","content":"I'll plan the work.","reasoning_content":"The user wants"#
    ));
    assert!(s.contains(r#"{"role":"tool","tool_call_id":"call_mock_1_0","content":"Updated"#));
    assert_eq!(request_body_bytes(&req.clone(), &flash()), bytes);
}

#[test]
fn model_capabilities_gate_thinking_effort_and_reasoning_content() {
    let req = ChatRequest {
        model: "deepseek-chat".into(),
        messages: vec![
            msg(Role::User, vec![ContentBlock::text("hi")]),
            msg(
                Role::Assistant,
                vec![
                    ContentBlock::Reasoning {
                        text: "think".into(),
                    },
                    ContentBlock::ToolCall(ToolCallBlock {
                        id: "c1".into(),
                        name: "read".into(),
                        arguments: String::new(),
                    }),
                ],
            ),
            msg(
                Role::User,
                vec![
                    ContentBlock::ToolResult(ToolResultBlock {
                        tool_call_id: "c1".into(),
                        content: vec![],
                        is_error: false,
                    }),
                    ContentBlock::text("and also"),
                    ContentBlock::text(" this"),
                ],
            ),
            msg(
                Role::Assistant,
                vec![ContentBlock::Reasoning {
                    text: "only thought".into(),
                }],
            ),
            msg(
                Role::Assistant,
                vec![
                    ContentBlock::Reasoning { text: "r".into() },
                    ContentBlock::text("done"),
                ],
            ),
        ],
        max_tokens: Some(1_000_000),
        thinking: Some(true),
        reasoning_effort: Some("high".into()),
        temperature: Some(0.5),
        stop: vec!["END".into()],
        ..ChatRequest::default()
    };
    let expected = json!({
        "model": "deepseek-chat",
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "(no output)"},
            {"role": "user", "content": [{"type": "text", "text": "and also"}, {"type": "text", "text": " this"}]},
            {"role": "assistant", "content": "done"}
        ],
        "stream": true,
        "stream_options": {"include_usage": true},
        "max_tokens": 8000,
        "temperature": 0.5,
        "stop": ["END"]
    });
    assert_eq!(
        request_body(&req, &ModelCatalogue::default().lookup("deepseek-chat")),
        expected
    );

    // A reasoning model gets thinking, effort and reasoning_content on the tool-call message only.
    let flash_req = ChatRequest {
        model: "deepseek-v4-flash".into(),
        ..req.clone()
    };
    let body = request_body(&flash_req, &flash());
    assert_eq!(body["thinking"], json!({"type": "enabled"}));
    assert_eq!(body["reasoning_effort"], json!("high"));
    assert_eq!(body["max_tokens"], json!(256_000));
    assert_eq!(body["messages"][1]["reasoning_content"], json!("think"));
    assert_eq!(body["messages"][4].get("reasoning_content"), None);

    // Thinking off: no effort.
    let off = ChatRequest {
        thinking: Some(false),
        ..flash_req
    };
    let body = request_body(&off, &flash());
    assert_eq!(body["thinking"], json!({"type": "disabled"}));
    assert_eq!(body.get("reasoning_effort"), None);
}
