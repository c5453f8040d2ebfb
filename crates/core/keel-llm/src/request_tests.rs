//! Request-mapping tests, including a round trip through dsh's recorded request bodies.

use super::*;
use crate::catalogue::ModelCatalogue;
use keel_protocol::{MessageSource, ToolCallBlock, ToolResultBlock};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

const DSH_REQUESTS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../testdata/dsh-sessions/multi-step/requests.jsonl"
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

fn seeing() -> ModelInfo {
    ModelInfo {
        vision: true,
        ..flash()
    }
}

fn png(uri: &str) -> ContentBlock {
    ContentBlock::Image(keel_protocol::ImageRef {
        uri: uri.into(),
        media_type: Some("image/png".into()),
    })
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
                let mut blocks = vec![ContentBlock::reasoning(text(&m["reasoning_content"]))];
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

/// dsh's body with consecutive `user` messages joined the way keel sends them (dsh sends its
/// runtime context as a second user message; keel never sends two in a row).
fn users_joined(body: &Value) -> Value {
    let mut out = body.clone();
    let mut messages: Vec<Value> = Vec::new();
    for m in body["messages"].as_array().into_iter().flatten() {
        match messages.last_mut() {
            Some(prev) if prev["role"] == "user" && m["role"] == "user" => {
                let joined = format!(
                    "{}{USER_JOIN}{}",
                    prev["content"].as_str().unwrap(),
                    m["content"].as_str().unwrap()
                );
                prev["content"] = json!(joined);
            }
            _ => messages.push(m.clone()),
        }
    }
    out["messages"] = json!(messages);
    out
}

#[test]
fn dsh_request_bodies_round_trip_exactly() {
    let text = std::fs::read_to_string(DSH_REQUESTS).unwrap();
    let mut checked = 0;
    let mut joined = 0;
    for line in text.lines() {
        let recorded: Value = serde_json::from_str(line).unwrap();
        let body = &recorded["body"];
        let req = from_wire(body);
        let expected = users_joined(body);
        if &expected != body {
            joined += 1;
        }
        assert_eq!(
            request_body(&req, &flash()),
            expected,
            "request {}",
            recorded["n"]
        );
        checked += 1;
    }
    assert_eq!(checked, 8);
    assert!(
        joined > 0,
        "dsh's prompt + runtime context pairs are joined"
    );
}

fn user(text: &str) -> Message {
    msg(Role::User, vec![ContentBlock::text(text)])
}

fn roles(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn consecutive_user_messages_go_out_as_one_and_keep_their_bytes() {
    let answer = msg(Role::Assistant, vec![ContentBlock::text("ok")]);
    let first = ChatRequest {
        model: "m".into(),
        system: "sys".into(),
        messages: vec![user("Current runtime context."), user("fix a.rs")],
        ..ChatRequest::default()
    };
    let body = request_body(&first, &flash());
    assert_eq!(roles(&body), ["system", "user"]);
    assert_eq!(
        body["messages"][1]["content"],
        json!("Current runtime context.\n\nfix a.rs")
    );
    // The turn failed unanswered; the next prompt and a summary-like user message follow.
    let mut later = first.clone();
    later.messages.push(user("try again"));
    later.messages.push(answer.clone());
    later.messages.push(user("[summary]"));
    later.messages.push(user("next"));
    let body2 = request_body(&later, &flash());
    assert_eq!(roles(&body2), ["system", "user", "assistant", "user"]);
    assert_eq!(body2["messages"][3]["content"], json!("[summary]\n\nnext"));
    // Every byte of the first body's messages up to its last content's end is sent again.
    let (b1, b2) = (
        String::from_utf8(request_body_bytes(&first, &flash())).unwrap(),
        String::from_utf8(request_body_bytes(&later, &flash())).unwrap(),
    );
    let cut = b1.find("fix a.rs").unwrap() + "fix a.rs".len();
    assert_eq!(&b2[..cut], &b1[..cut]);

    // Parts (an image) join as parts; tool messages between users keep them apart.
    let image = msg(
        Role::User,
        vec![ContentBlock::Image(keel_protocol::ImageRef {
            uri: "data:image/png;base64,AA".into(),
            media_type: None,
        })],
    );
    let mixed = ChatRequest {
        messages: vec![user("look"), image],
        ..ChatRequest::default()
    };
    let body = request_body(&mixed, &seeing());
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": [
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}
        ]}])
    );
}

#[test]
fn a_model_without_vision_is_sent_no_image() {
    let req = ChatRequest {
        messages: vec![msg(
            Role::User,
            vec![ContentBlock::text("look"), png("data:image/png;base64,AA")],
        )],
        ..ChatRequest::default()
    };
    assert_eq!(
        request_body(&req, &flash())["messages"],
        json!([{"role": "user", "content": [
            {"type": "text", "text": "look"},
            {"type": "text", "text": IMAGE_NOT_SHOWN}
        ]}])
    );
}

#[test]
fn a_tool_result_image_follows_the_tool_messages_as_a_user_image_part() {
    let call = |id: &str| {
        ContentBlock::ToolCall(ToolCallBlock {
            id: id.into(),
            name: "read_image".into(),
            arguments: "{}".into(),
        })
    };
    let result = |id: &str, content: Vec<ContentBlock>| {
        ContentBlock::ToolResult(ToolResultBlock {
            tool_call_id: id.into(),
            content,
            is_error: false,
        })
    };
    let req = ChatRequest {
        messages: vec![
            msg(Role::Assistant, vec![call("c1"), call("c2")]),
            // One message per result, as the agent logs them.
            msg(
                Role::User,
                vec![result(
                    "c1",
                    vec![ContentBlock::text("a.png: image/png"), png("data:A")],
                )],
            ),
            msg(
                Role::User,
                vec![result(
                    "c2",
                    vec![ContentBlock::text("b.txt is not an image")],
                )],
            ),
            msg(Role::User, vec![ContentBlock::text("go on")]),
        ],
        ..ChatRequest::default()
    };
    let messages = request_body(&req, &seeing())["messages"].clone();
    assert_eq!(
        messages.as_array().unwrap()[1..],
        json!([
            {"role": "tool", "tool_call_id": "c1", "content": "a.png: image/png"},
            {"role": "tool", "tool_call_id": "c2", "content": "b.txt is not an image"},
            {"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": "data:A"}},
                {"type": "text", "text": "go on"}
            ]}
        ])
        .as_array()
        .unwrap()[..]
    );
    // Without vision the image is left out; the tool's text still says what it was.
    let messages = request_body(&req, &flash())["messages"].clone();
    assert_eq!(
        messages.as_array().unwrap()[1..],
        json!([
            {"role": "tool", "tool_call_id": "c1", "content": "a.png: image/png"},
            {"role": "tool", "tool_call_id": "c2", "content": "b.txt is not an image"},
            {"role": "user", "content": "go on"}
        ])
        .as_array()
        .unwrap()[..]
    );
}

#[test]
fn only_reasoning_settings_a_model_takes_are_sent() {
    let cat = ModelCatalogue::default();
    let chat = cat.lookup("deepseek-chat");
    let cases = [
        (&flash(), Some(true), Some("high"), Some(true), Some("high")),
        (&flash(), Some(false), Some("high"), Some(false), None),
        (&flash(), None, Some(""), None, None),
        (&chat, Some(true), Some("high"), None, None),
    ];
    for (info, thinking, effort, want_thinking, want_effort) in cases {
        assert_eq!(
            sent_reasoning(thinking, effort, info),
            SentReasoning {
                thinking: want_thinking,
                effort: want_effort
            },
            "{thinking:?} {effort:?}"
        );
    }
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
                    ContentBlock::reasoning("think"),
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
                vec![ContentBlock::reasoning("only thought")],
            ),
            msg(
                Role::Assistant,
                vec![ContentBlock::reasoning("r"), ContentBlock::text("done")],
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
