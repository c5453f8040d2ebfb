//! Responses wire tests: request bodies, and streams written after OpenAI's streaming reference.

use super::*;
use crate::assembler::{Assembled, BlockAssembler};
use keel_protocol::{MessageSource, ToolResultBlock, ToolSchema};
use pretty_assertions::assert_eq;
use serde_json::json;

fn msg(role: Role, content: Vec<ContentBlock>) -> Message {
    Message {
        role,
        content,
        source: MessageSource::user(),
        id: "m".into(),
    }
}

fn reasoner() -> ModelInfo {
    ModelInfo {
        context_window: 400_000,
        max_output: 128_000,
        reasoning: true,
        effort: true,
        vision: true,
        thinking_budget: None,
    }
}

fn run(events: &[&str]) -> (Vec<StreamChunk>, Result<Progress, ModelFailure>, bool) {
    let mut t = ResponsesTranslator::new();
    let mut out = Vec::new();
    let mut last = Ok(Progress::Continue);
    for e in events {
        last = t.push(e, &mut out);
        if last.is_err() || last == Ok(Progress::Done) {
            break;
        }
    }
    (out, last, t.is_done())
}

fn assemble(chunks: &[StreamChunk]) -> Assembled {
    let mut asm = BlockAssembler::new();
    for c in chunks {
        asm.push(c).unwrap();
    }
    asm.finish()
}

fn body(request: &ChatRequest, info: &ModelInfo) -> Value {
    serde_json::from_slice(&body_bytes(request, info)).unwrap()
}

const CREATED: &str = r#"{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[],"usage":null}}"#;
const IN_PROGRESS: &str = r#"{"type":"response.in_progress","sequence_number":1,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[],"usage":null}}"#;

#[test]
fn a_small_request_has_exact_bytes() {
    let request = ChatRequest {
        model: "gpt-5".into(),
        system: "Be brief.".into(),
        messages: vec![msg(Role::User, vec![ContentBlock::text("hi")])],
        tools: vec![ToolSchema {
            name: "read".into(),
            description: "Read a file".into(),
            parameters: json!({"type": "object"}),
        }],
        max_tokens: Some(500_000),
        reasoning_effort: Some("low".into()),
        temperature: Some(0.5),
        stop: vec!["END".into()],
        ..ChatRequest::default()
    };
    let bytes = body_bytes(&request, &reasoner());
    assert_eq!(
        String::from_utf8(bytes).unwrap(),
        concat!(
            r#"{"model":"gpt-5","instructions":"Be brief.","#,
            r#""input":[{"role":"user","content":[{"type":"input_text","text":"hi"}]}],"#,
            r#""tools":[{"type":"function","name":"read","description":"Read a file","#,
            r#""parameters":{"type":"object"},"strict":false}],"#,
            r#""stream":true,"store":false,"include":["reasoning.encrypted_content"],"#,
            r#""reasoning":{"effort":"low","summary":"auto"},"max_output_tokens":128000,"#,
            r#""temperature":0.5}"#,
        )
    );
    // A model that neither reasons nor takes an effort: no include, no reasoning, no
    // instructions when there is no system prompt, no tools when none are offered.
    let plain = ChatRequest {
        model: "m".into(),
        messages: vec![msg(Role::User, vec![ContentBlock::text("hi")])],
        reasoning_effort: Some("high".into()),
        thinking: Some(true),
        ..ChatRequest::default()
    };
    assert_eq!(
        String::from_utf8(body_bytes(&plain, &ModelInfo::UNKNOWN)).unwrap(),
        r#"{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"hi"}]}],"stream":true,"store":false,"max_output_tokens":8000}"#
    );
    // Thinking on without an effort: a summary is asked for, no effort is named.
    let thinking = ChatRequest {
        thinking: Some(true),
        reasoning_effort: None,
        ..plain
    };
    let info = ModelInfo {
        effort: false,
        ..reasoner()
    };
    assert_eq!(
        body(&thinking, &info)["reasoning"],
        json!({"summary": "auto"})
    );
}

#[test]
fn user_messages_merge_and_images_follow_vision() {
    let png = |uri: &str| {
        ContentBlock::Image(ImageRef {
            uri: uri.into(),
            media_type: Some("image/png".into()),
        })
    };
    let request = ChatRequest {
        model: "m".into(),
        messages: vec![
            msg(Role::User, vec![ContentBlock::text("context")]),
            msg(
                Role::User,
                vec![ContentBlock::text("look"), png("data:image/png;base64,AA")],
            ),
            msg(
                Role::Assistant,
                vec![ContentBlock::ToolCall(ToolCallBlock {
                    id: "call_1".into(),
                    name: "shot".into(),
                    arguments: String::new(),
                })],
            ),
            msg(
                Role::User,
                vec![ContentBlock::ToolResult(ToolResultBlock {
                    tool_call_id: "call_1".into(),
                    content: vec![png("https://x/s.png")],
                    is_error: false,
                })],
            ),
        ],
        ..ChatRequest::default()
    };
    let seeing = body(&request, &reasoner());
    assert_eq!(
        seeing["input"],
        json!([
            {"role": "user", "content": [
                {"type": "input_text", "text": "context"},
                {"type": "input_text", "text": "look"},
                {"type": "input_image", "image_url": "data:image/png;base64,AA"},
            ]},
            {"type": "function_call", "call_id": "call_1", "name": "shot", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_1", "output": NO_OUTPUT},
            {"role": "user", "content": [{"type": "input_image", "image_url": "https://x/s.png"}]},
        ])
    );
    let blind = body(&request, &ModelInfo::UNKNOWN);
    assert_eq!(
        blind["input"][0]["content"][2],
        json!({"type": "input_text", "text": IMAGE_NOT_SHOWN})
    );
    assert_eq!(blind["input"].as_array().unwrap().len(), 3, "{blind}");
}

#[test]
fn reasoning_and_text_stream_with_cached_usage() {
    let (chunks, last, done) = run(&[
        CREATED,
        IN_PROGRESS,
        r#"{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[]}}"#,
        r#"{"type":"response.reasoning_summary_part.added","sequence_number":3,"item_id":"rs_1","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":""}}"#,
        r#"{"type":"response.reasoning_summary_text.delta","sequence_number":4,"item_id":"rs_1","output_index":0,"summary_index":0,"delta":"**Plan** "}"#,
        r#"{"type":"response.reasoning_summary_text.delta","sequence_number":5,"item_id":"rs_1","output_index":0,"summary_index":0,"delta":"greet"}"#,
        r#"{"type":"response.reasoning_summary_text.delta","sequence_number":6,"item_id":"rs_1","output_index":0,"summary_index":1,"delta":"then stop"}"#,
        r#"{"type":"response.output_item.done","sequence_number":7,"output_index":0,"item":{"id":"rs_1","type":"reasoning","encrypted_content":"gAAAA-enc","summary":[{"type":"summary_text","text":"**Plan** greet"},{"type":"summary_text","text":"then stop"}]}}"#,
        r#"{"type":"response.output_item.added","sequence_number":8,"output_index":1,"item":{"id":"msg_1","type":"message","status":"in_progress","role":"assistant","content":[]}}"#,
        r#"{"type":"response.content_part.added","sequence_number":9,"item_id":"msg_1","output_index":1,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}}"#,
        r#"{"type":"response.output_text.delta","sequence_number":10,"item_id":"msg_1","output_index":1,"content_index":0,"delta":"Hello, "}"#,
        r#"{"type":"response.output_text.delta","sequence_number":11,"item_id":"msg_1","output_index":1,"content_index":0,"delta":"héllo 🌍"}"#,
        r#"{"type":"response.output_text.done","sequence_number":12,"item_id":"msg_1","output_index":1,"content_index":0,"text":"Hello, héllo 🌍"}"#,
        r#"{"type":"response.output_item.done","sequence_number":13,"output_index":1,"item":{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hello, héllo 🌍","annotations":[]}]}}"#,
        r#"{"type":"response.completed","sequence_number":14,"response":{"id":"resp_1","status":"completed","output":[],"usage":{"input_tokens":1000,"input_tokens_details":{"cached_tokens":640},"output_tokens":50,"output_tokens_details":{"reasoning_tokens":12},"total_tokens":1050}}}"#,
        r#"{"type":"response.output_text.delta","output_index":1,"delta":"ignored after the end"}"#,
    ]);
    assert_eq!(last, Ok(Progress::Done));
    assert!(done);
    assert_eq!(
        chunks[..4],
        [
            StreamChunk::BlockStart {
                index: 0,
                block_type: BlockType::Reasoning,
                id: None,
                name: None
            },
            StreamChunk::ReasoningDelta {
                index: 0,
                text: "**Plan** ".into()
            },
            StreamChunk::ReasoningDelta {
                index: 0,
                text: "greet".into()
            },
            StreamChunk::ReasoningDelta {
                index: 0,
                text: "\n\nthen stop".into()
            },
        ]
    );
    let out = assemble(&chunks);
    assert_eq!(
        out,
        Assembled {
            content: vec![
                ContentBlock::Reasoning {
                    text: "**Plan** greet\n\nthen stop".into(),
                    signature: Some("gAAAA-enc".into()),
                },
                ContentBlock::text("Hello, héllo 🌍"),
            ],
            usage: Some(TokenUsage {
                input_tokens: 360,
                output_tokens: 50,
                cache_read_tokens: 640,
                reasoning_tokens: 12,
                cache_write_tokens: 0,
            }),
            finish: Some(FinishReason::Stop),
        }
    );
}

const CALL_STREAM: &[&str] = &[
    CREATED,
    r#"{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"rs_2","type":"reasoning","summary":[]}}"#,
    r#"{"type":"response.output_item.done","sequence_number":2,"output_index":0,"item":{"id":"rs_2","type":"reasoning","summary":[],"encrypted_content":"gAAAA-secret"}}"#,
    r#"{"type":"response.output_item.added","sequence_number":3,"output_index":1,"item":{"id":"fc_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_abc","name":"read"}}"#,
    r#"{"type":"response.function_call_arguments.delta","sequence_number":4,"item_id":"fc_1","output_index":1,"delta":"{\"file_"}"#,
    r#"{"type":"response.function_call_arguments.delta","sequence_number":5,"item_id":"fc_1","output_index":1,"delta":"path\":\"a.txt\"}"}"#,
    r#"{"type":"response.function_call_arguments.done","sequence_number":6,"item_id":"fc_1","output_index":1,"arguments":"{\"file_path\":\"a.txt\"}"}"#,
    r#"{"type":"response.output_item.done","sequence_number":7,"output_index":1,"item":{"id":"fc_1","type":"function_call","status":"completed","arguments":"{\"file_path\":\"a.txt\"}","call_id":"call_abc","name":"read"}}"#,
    r#"{"type":"response.completed","sequence_number":8,"response":{"id":"resp_2","status":"completed","usage":{"input_tokens":80,"input_tokens_details":{"cached_tokens":0},"output_tokens":30,"output_tokens_details":{"reasoning_tokens":20},"total_tokens":110}}}"#,
];

#[test]
fn a_function_call_in_fragments_is_replayed_in_the_next_body() {
    let (chunks, last, _) = run(CALL_STREAM);
    assert_eq!(last, Ok(Progress::Done));
    assert_eq!(
        chunks[2],
        StreamChunk::BlockStart {
            index: 1,
            block_type: BlockType::ToolCall,
            id: Some("call_abc".into()),
            name: Some("read".into())
        }
    );
    // The call closes at the end of the response, before usage and finish.
    let tail: Vec<&str> = chunks[chunks.len() - 3..]
        .iter()
        .map(|c| match c {
            StreamChunk::BlockEnd { .. } => "end",
            StreamChunk::Usage { .. } => "usage",
            StreamChunk::Finish { .. } => "finish",
            _ => "other",
        })
        .collect();
    assert_eq!(tail, ["end", "usage", "finish"]);
    let out = assemble(&chunks);
    assert_eq!(out.finish, Some(FinishReason::ToolCalls));
    let call = ToolCallBlock {
        id: "call_abc".into(),
        name: "read".into(),
        arguments: r#"{"file_path":"a.txt"}"#.into(),
    };
    assert_eq!(
        out.content,
        vec![
            ContentBlock::Reasoning {
                text: String::new(),
                signature: Some("gAAAA-secret".into()),
            },
            ContentBlock::ToolCall(call.clone()),
        ]
    );

    let first = ChatRequest {
        model: "gpt-5".into(),
        system: "sys".into(),
        messages: vec![msg(Role::User, vec![ContentBlock::text("read a.txt")])],
        reasoning_effort: Some("medium".into()),
        ..ChatRequest::default()
    };
    let mut second = first.clone();
    second.messages.push(msg(Role::Assistant, out.content));
    second.messages.push(msg(
        Role::User,
        vec![ContentBlock::ToolResult(ToolResultBlock {
            tool_call_id: "call_abc".into(),
            content: vec![ContentBlock::text("hello")],
            is_error: false,
        })],
    ));
    let info = reasoner();
    let input = &body(&second, &info)["input"];
    assert_eq!(
        input.as_array().unwrap()[1..],
        [
            json!({"type": "reasoning", "summary": [], "encrypted_content": "gAAAA-secret"}),
            json!({"type": "function_call", "call_id": "call_abc", "name": "read",
                   "arguments": "{\"file_path\":\"a.txt\"}"}),
            json!({"type": "function_call_output", "call_id": "call_abc", "output": "hello"}),
        ]
    );
    // The first body's input items are a byte prefix of the second's.
    let (a, b) = (body_bytes(&first, &info), body_bytes(&second, &info));
    let (a, b) = (String::from_utf8(a).unwrap(), String::from_utf8(b).unwrap());
    let items = |s: &str| s[s.find("\"input\":[").unwrap()..].to_owned();
    let first_items = items(&a);
    let first_items = &first_items[..first_items.find("}]}]").unwrap() + 3];
    assert!(items(&b).starts_with(first_items), "{a}\n{b}");
}

#[test]
fn assistant_history_maps_reasoning_text_and_calls_in_order() {
    let request = ChatRequest {
        model: "m".into(),
        messages: vec![
            msg(Role::User, vec![ContentBlock::text("go")]),
            msg(
                Role::Assistant,
                vec![
                    ContentBlock::reasoning("unsigned, from another wire"),
                    ContentBlock::Reasoning {
                        text: "thought".into(),
                        signature: Some("enc".into()),
                    },
                    ContentBlock::text("Done."),
                ],
            ),
            // Reasoning only (an interrupted reply): not sent.
            msg(
                Role::Assistant,
                vec![ContentBlock::Reasoning {
                    text: "x".into(),
                    signature: Some("y".into()),
                }],
            ),
        ],
        ..ChatRequest::default()
    };
    assert_eq!(
        body(&request, &reasoner())["input"],
        json!([
            {"role": "user", "content": [{"type": "input_text", "text": "go"}]},
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": "thought"}],
             "encrypted_content": "enc"},
            {"type": "message", "role": "assistant",
             "content": [{"type": "output_text", "text": "Done."}]},
        ])
    );
}

#[test]
fn incomplete_for_max_output_tokens_drops_the_open_call() {
    let (chunks, last, done) = run(&[
        CREATED,
        r#"{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"msg_1","type":"message","role":"assistant","content":[]}}"#,
        r#"{"type":"response.output_text.delta","sequence_number":2,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Writing"}"#,
        r#"{"type":"response.output_item.done","sequence_number":3,"output_index":0,"item":{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"output_text","text":"Writing"}]}}"#,
        r#"{"type":"response.output_item.added","sequence_number":4,"output_index":1,"item":{"id":"fc_1","type":"function_call","arguments":"","call_id":"call_w","name":"write"}}"#,
        r#"{"type":"response.function_call_arguments.delta","sequence_number":5,"item_id":"fc_1","output_index":1,"delta":"{\"content\":\"abc"}"#,
        r#"{"type":"response.incomplete","sequence_number":6,"response":{"id":"resp_3","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"usage":{"input_tokens":10,"output_tokens":64}}}"#,
    ]);
    assert_eq!(last, Ok(Progress::Done));
    assert!(done);
    let out = assemble(&chunks);
    assert_eq!(out.content, vec![ContentBlock::text("Writing")]);
    assert_eq!(out.finish, Some(FinishReason::MaxTokens));
    assert_eq!(out.usage.unwrap().output_tokens, 64);
    assert!(
        !chunks.iter().any(|c| matches!(
            c,
            StreamChunk::BlockEnd {
                block: ContentBlock::ToolCall(_),
                ..
            }
        )),
        "{chunks:?}"
    );

    // Any other reason finishes with an error named after it.
    let (chunks, _, _) = run(&[
        r#"{"type":"response.output_item.added","output_index":0,"item":{"type":"message","id":"m"}}"#,
        r#"{"type":"response.output_text.delta","output_index":0,"delta":"Hm"}"#,
        r#"{"type":"response.incomplete","response":{"incomplete_details":{"reason":"content_filter"}}}"#,
    ]);
    assert_eq!(
        assemble(&chunks).finish,
        Some(FinishReason::Error {
            code: "CONTENT_FILTER".into()
        })
    );
}

#[test]
fn failed_responses_and_error_events_fail_the_call() {
    let (_, last, done) = run(&[
        CREATED,
        r#"{"type":"response.failed","sequence_number":1,"response":{"id":"resp_4","status":"failed","error":{"code":"server_error","message":"The model is overloaded."}}}"#,
    ]);
    let failure = last.unwrap_err();
    assert_eq!(failure.code, FailureCode::Server);
    assert!(
        failure.message.contains("The model is overloaded."),
        "{failure:?}"
    );
    assert!(!done);

    let (_, last, _) = run(&[
        r#"{"type":"error","sequence_number":1,"code":"context_length_exceeded","message":"Your input exceeds the context window of this model.","param":"input"}"#,
    ]);
    let failure = last.unwrap_err();
    assert_eq!(failure.code, FailureCode::ContextWindowExceeded);
    assert!(
        failure.message.contains("exceeds the context window"),
        "{failure:?}"
    );
}

#[test]
fn a_body_without_response_completed_is_a_closed_stream() {
    let mut t = ResponsesTranslator::new();
    let mut out = Vec::new();
    for e in &CALL_STREAM[..5] {
        assert_eq!(t.push(e, &mut out), Ok(Progress::Continue));
    }
    assert!(!t.is_done());
    let failure = t.end_of_stream();
    assert_eq!(failure.code, FailureCode::StreamClosed);
    assert!(
        failure.message.contains("response.completed"),
        "{failure:?}"
    );
    // A chat-style terminator does not end a Responses stream.
    assert_eq!(
        t.push("[DONE]", &mut out).unwrap_err().code,
        FailureCode::StreamClosed
    );
}

#[test]
fn malformed_empty_and_unknown_events() {
    let (_, last, _) = run(&["{not json"]);
    let failure = last.unwrap_err();
    assert_eq!(failure.code, FailureCode::MalformedResponse);
    assert!(failure.message.contains("Responses"), "{failure:?}");

    let completed = r#"{"type":"response.completed","response":{"usage":{"input_tokens":5,"output_tokens":0}}}"#;
    let (_, last, _) = run(&[CREATED, completed]);
    assert_eq!(last.unwrap_err().code, FailureCode::EmptyResponse);

    // A built-in tool item is skipped with its events; unknown event types are ignored.
    let (chunks, last, _) = run(&[
        r#"{"type":"response.output_item.added","output_index":0,"item":{"type":"web_search_call","id":"ws_1","status":"in_progress"}}"#,
        r#"{"type":"response.web_search_call.searching","output_index":0,"item_id":"ws_1"}"#,
        r#"{"type":"response.output_item.done","output_index":0,"item":{"type":"web_search_call","id":"ws_1","status":"completed"}}"#,
        r#"{"type":"response.output_item.added","output_index":1,"item":{"type":"message","id":"m"}}"#,
        r#"{"type":"response.output_text.delta","output_index":1,"delta":"ok"}"#,
        r#"{"type":"response.output_item.done","output_index":1,"item":{"type":"message","id":"m","content":[{"type":"output_text","text":"ok"}]}}"#,
        completed,
    ]);
    assert_eq!(last, Ok(Progress::Done));
    let out = assemble(&chunks);
    assert_eq!(out.content, vec![ContentBlock::text("ok")]);
    assert_eq!(out.finish, Some(FinishReason::Stop));

    // A delta for an item never added breaks the stream.
    let (_, last, _) =
        run(&[r#"{"type":"response.output_text.delta","output_index":3,"delta":"x"}"#]);
    assert_eq!(last.unwrap_err().code, FailureCode::MalformedResponse);
}

#[test]
fn reasoning_text_parts_refusals_and_unstreamed_items() {
    let (chunks, last, _) = run(&[
        r#"{"type":"response.output_item.added","output_index":0,"item":{"type":"reasoning","id":"rs","summary":[],"content":null}}"#,
        r#"{"type":"response.reasoning_text.delta","output_index":0,"content_index":0,"delta":"one"}"#,
        r#"{"type":"response.reasoning_text.delta","output_index":0,"content_index":1,"delta":"two"}"#,
        r#"{"type":"response.output_item.done","output_index":0,"item":{"type":"reasoning","id":"rs","summary":[],"encrypted_content":null}}"#,
        r#"{"type":"response.output_item.added","output_index":1,"item":{"type":"message","id":"m1"}}"#,
        r#"{"type":"response.refusal.delta","output_index":1,"content_index":0,"delta":"I can't."}"#,
        r#"{"type":"response.output_item.done","output_index":1,"item":{"type":"message","id":"m1","content":[{"type":"refusal","refusal":"I can't."}]}}"#,
        r#"{"type":"response.output_item.added","output_index":2,"item":{"type":"message","id":"m2"}}"#,
        r#"{"type":"response.output_item.done","output_index":2,"item":{"type":"message","id":"m2","content":[{"type":"output_text","text":"whole"}]}}"#,
        r#"{"type":"response.completed","response":{"usage":null}}"#,
    ]);
    assert_eq!(last, Ok(Progress::Done));
    let out = assemble(&chunks);
    assert_eq!(
        out.content,
        vec![
            ContentBlock::reasoning("one\n\ntwo"),
            ContentBlock::text("I can't."),
            ContentBlock::text("whole"),
        ]
    );
    assert_eq!((out.usage, out.finish), (None, Some(FinishReason::Stop)));
}
