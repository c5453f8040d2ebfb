//! Messages wire tests: the request body against the shape DeepSeek Harness 0.2 sends, and the
//! stream translation of hand-written events from the Messages API's streaming reference.

use super::*;
use crate::assembler::{Assembled, BlockAssembler};
use crate::catalogue::ModelCatalogue;
use keel_protocol::{MessageSource, ToolResultBlock, ToolSchema};
use pretty_assertions::assert_eq;

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

fn history() -> Vec<Message> {
    vec![
        msg(Role::User, vec![ContentBlock::text("run echo hi")]),
        msg(
            Role::User,
            vec![ContentBlock::text("Current runtime context.")],
        ),
        msg(
            Role::Assistant,
            vec![
                ContentBlock::Reasoning {
                    text: "I should run it.".into(),
                    signature: Some("sig-abc".into()),
                },
                ContentBlock::ToolCall(ToolCallBlock {
                    id: "toolu_01".into(),
                    name: "bash".into(),
                    arguments: r#"{"description": "Print hi","command":"echo hi"}"#.into(),
                }),
            ],
        ),
        msg(
            Role::User,
            vec![ContentBlock::ToolResult(ToolResultBlock {
                tool_call_id: "toolu_01".into(),
                content: vec![ContentBlock::text("hi\n")],
                is_error: false,
            })],
        ),
    ]
}

fn request(messages: Vec<Message>) -> ChatRequest {
    ChatRequest {
        model: "deepseek-v4-flash".into(),
        system: "You are keel.".into(),
        messages,
        tools: vec![ToolSchema {
            name: "bash".into(),
            description: "Run a command.".into(),
            parameters: serde_json::json!({"type":"object"}),
        }],
        thinking: Some(true),
        reasoning_effort: Some("high".into()),
        ..ChatRequest::default()
    }
}

#[test]
fn the_body_has_dsh_0_2s_shape_and_replays_thinking_with_its_signature() {
    let body = body_bytes(&request(history()), &flash(), MessagesOptions::default());
    let body = String::from_utf8(body).unwrap();
    let max = flash().max_output;
    let want = format!(
        concat!(
            r#"{{"model":"deepseek-v4-flash","stream":true,"messages":["#,
            r#"{{"role":"user","content":[{{"type":"text","text":"run echo hi"}},{{"type":"text","text":"Current runtime context."}}]}},"#,
            r#"{{"role":"assistant","content":[{{"type":"thinking","thinking":"I should run it.","signature":"sig-abc"}},"#,
            r#"{{"type":"tool_use","id":"toolu_01","name":"bash","input":{{"description": "Print hi","command":"echo hi"}}}}]}},"#,
            r#"{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"toolu_01","content":[{{"type":"text","text":"hi\n"}}],"is_error":false}}]}}],"#,
            r#""max_tokens":{max},"thinking":{{"type":"enabled"}},"output_config":{{"effort":"high"}},"#,
            r#""system":"You are keel.","tools":[{{"name":"bash","description":"Run a command.","input_schema":{{"type":"object"}}}}]}}"#
        ),
        max = max
    );
    assert_eq!(body, want);
}

#[test]
fn each_body_is_a_prefix_of_the_next_and_cache_control_is_request_level() {
    let options = MessagesOptions {
        cache_control: true,
    };
    let mut messages = history();
    let first = body_bytes(&request(messages.clone()), &flash(), options);
    messages.push(msg(Role::User, vec![ContentBlock::text("and again")]));
    let second = body_bytes(&request(messages), &flash(), options);
    let cut = |b: &[u8]| {
        let s = String::from_utf8(b.to_vec()).unwrap();
        let end = s.find("],\"max_tokens\"").unwrap();
        // The messages array without its closing bracket and the last message's closing.
        s[..end - 2].to_owned()
    };
    let (a, b) = (cut(&first), cut(&second));
    assert!(b.starts_with(&a), "{a}\n{b}");
    let text = String::from_utf8(second).unwrap();
    assert_eq!(text.matches("cache_control").count(), 1, "{text}");
    assert!(
        text.contains(r#""cache_control":{"type":"ephemeral"}"#),
        "{text}"
    );
}

#[test]
fn unsigned_reasoning_is_not_sent_and_redacted_thinking_round_trips() {
    let messages = vec![
        msg(Role::User, vec![ContentBlock::text("hi")]),
        msg(
            Role::Assistant,
            vec![
                ContentBlock::reasoning("from a chat-wire session"),
                ContentBlock::Reasoning {
                    text: String::new(),
                    signature: Some("opaque".into()),
                },
                ContentBlock::text("Hello."),
            ],
        ),
        // An interrupted reply with only thinking: nothing the model can be shown.
        msg(Role::Assistant, vec![ContentBlock::reasoning("…")]),
        msg(
            Role::Assistant,
            vec![ContentBlock::ToolCall(ToolCallBlock {
                id: "t".into(),
                name: "read".into(),
                arguments: "{\"path\": tr".into(),
            })],
        ),
    ];
    let body = body_bytes(&request(messages), &flash(), MessagesOptions::default());
    let body = String::from_utf8(body).unwrap();
    assert!(!body.contains("from a chat-wire session"), "{body}");
    assert!(
        body.contains(
            r#"{"type":"redacted_thinking","data":"opaque"},{"type":"text","text":"Hello."}"#
        ),
        "{body}"
    );
    // Arguments that are not a JSON object go out as `{}`.
    assert!(body.contains(r#""name":"read","input":{}"#), "{body}");
    assert_eq!(body.matches(r#""role":"assistant""#).count(), 2, "{body}");
}

fn run(events: &[&str]) -> (Vec<StreamChunk>, Result<Progress, ModelFailure>) {
    let mut t = MessagesTranslator::new();
    let mut out = Vec::new();
    let mut last = Ok(Progress::Continue);
    for e in events {
        last = t.push(e, &mut out);
        if last.is_err() || last == Ok(Progress::Done) {
            break;
        }
    }
    (out, last)
}

fn assemble(chunks: &[StreamChunk]) -> Assembled {
    let mut asm = BlockAssembler::new();
    for c in chunks {
        asm.push(c).unwrap();
    }
    asm.finish()
}

const START: &str = r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"deepseek-v4-flash","stop_reason":null,"usage":{"input_tokens":40,"cache_creation_input_tokens":10,"cache_read_input_tokens":60,"output_tokens":1}}}"#;

#[test]
fn thinking_with_signature_text_and_a_fragmented_tool_use_assemble() {
    let (chunks, last) = run(&[
        START,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}"#,
        r#"{"type":"ping"}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Run "}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"it."}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQB"}}"#,
        r#"{"type":"content_block_stop","index":0}"#,
        r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}"#,
        r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Running."}}"#,
        r#"{"type":"content_block_stop","index":1}"#,
        r#"{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_1","name":"bash","input":{}}}"#,
        r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}"#,
        r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"command\": \"ec"}}"#,
        r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"ho hi\"}"}}"#,
        r#"{"type":"content_block_stop","index":2}"#,
        r#"{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":25}}"#,
        r#"{"type":"message_stop"}"#,
    ]);
    assert_eq!(last, Ok(Progress::Done));
    let out = assemble(&chunks);
    assert_eq!(
        out.content,
        vec![
            ContentBlock::Reasoning {
                text: "Run it.".into(),
                signature: Some("EqQB".into()),
            },
            ContentBlock::text("Running."),
            ContentBlock::ToolCall(ToolCallBlock {
                id: "toolu_1".into(),
                name: "bash".into(),
                arguments: r#"{"command": "echo hi"}"#.into(),
            }),
        ]
    );
    assert_eq!(out.finish, Some(FinishReason::ToolCalls));
    assert_eq!(
        out.usage,
        Some(TokenUsage {
            input_tokens: 50,
            output_tokens: 25,
            cache_read_tokens: 60,
            reasoning_tokens: 0,
            cache_write_tokens: 10,
        })
    );
}

#[test]
fn max_tokens_drops_the_open_tool_use_and_keeps_the_text() {
    let (chunks, last) = run(&[
        START,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Writing."}}"#,
        r#"{"type":"content_block_stop","index":0}"#,
        r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"write","input":{}}}"#,
        r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"content\": \"abc"}}"#,
        r#"{"type":"content_block_stop","index":1}"#,
        r#"{"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":8}}"#,
        r#"{"type":"message_stop"}"#,
    ]);
    assert_eq!(last, Ok(Progress::Done));
    let out = assemble(&chunks);
    assert_eq!(out.content, vec![ContentBlock::text("Writing.")]);
    assert_eq!(out.finish, Some(FinishReason::MaxTokens));
}

#[test]
fn bad_streams_fail_with_a_named_cause() {
    // A block type keel does not know.
    let (_, last) = run(&[
        START,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"hologram"}}"#,
    ]);
    let err = last.unwrap_err();
    assert_eq!(err.code, FailureCode::MalformedResponse);
    assert!(err.message.contains("\"hologram\""), "{}", err.message);
    // An overloaded error mid-stream (what a 529 looks like once the stream started).
    let (_, last) = run(&[
        START,
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
    ]);
    let err = last.unwrap_err();
    assert!(crate::retry::is_retryable(&err.code), "{err:?}");
    assert!(err.message.contains("Overloaded"), "{}", err.message);
    // A tool_use whose JSON never closes because the body ends: STREAM_CLOSED, and the
    // assembler's partial keeps the text only.
    let mut t = MessagesTranslator::new();
    let mut out = Vec::new();
    for e in [
        START,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}"#,
        r#"{"type":"content_block_stop","index":0}"#,
        r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"bash","input":{}}}"#,
        r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"comm"}}"#,
    ] {
        assert_eq!(t.push(e, &mut out), Ok(Progress::Continue));
    }
    let err = t.end_of_stream();
    assert_eq!(err.code, FailureCode::StreamClosed);
    assert!(
        err.message.contains("inside a content block"),
        "{}",
        err.message
    );
    let mut asm = BlockAssembler::new();
    for c in &out {
        asm.push(c).unwrap();
    }
    assert_eq!(asm.partial(), vec![ContentBlock::text("Hi")]);
    // Not JSON at all.
    let (_, last) = run(&["{\"type\":\"content_block_delta\",\"index\":"]);
    assert!(
        last.unwrap_err()
            .message
            .contains("not a Messages API event")
    );
    // A delta of the wrong kind for its block.
    let (_, last) = run(&[
        START,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{"}}"#,
    ]);
    assert!(last.unwrap_err().message.contains("does not match"));
}

#[test]
fn a_reply_with_nothing_in_it_is_empty() {
    let (_, last) = run(&[
        START,
        r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":0}}"#,
        r#"{"type":"message_stop"}"#,
    ]);
    assert_eq!(last.unwrap_err().code, FailureCode::EmptyResponse);
}
