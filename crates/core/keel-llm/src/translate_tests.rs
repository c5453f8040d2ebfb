//! Stream translation tests over hand-written chat-completions payloads.

use super::*;
use crate::assembler::BlockAssembler;
use pretty_assertions::assert_eq;

fn run(payloads: &[&str]) -> (Vec<StreamChunk>, Result<Progress, ModelFailure>) {
    let mut t = StreamTranslator::new();
    let mut out = Vec::new();
    let mut last = Ok(Progress::Continue);
    for p in payloads {
        last = t.push(p, &mut out);
        if last.is_err() || last == Ok(Progress::Done) {
            break;
        }
    }
    (out, last)
}

fn assemble(chunks: &[StreamChunk]) -> crate::assembler::Assembled {
    let mut asm = BlockAssembler::new();
    for c in chunks {
        asm.push(c).unwrap();
    }
    asm.finish()
}

const USAGE: &str = r#"{"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":20,"prompt_cache_hit_tokens":60,"prompt_cache_miss_tokens":40,"completion_tokens_details":{"reasoning_tokens":7}}}"#;

#[test]
fn tool_calls_accumulate_by_index_with_id_only_in_first_fragment() {
    let (chunks, last) = run(&[
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null,"reasoning_content":"plan"}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"Reading."}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"read","arguments":""}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"glob","arguments":"{\"pat"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"file_path\":"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"tern\":\"*\"}"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"a.txt\"}"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
        USAGE,
        "[DONE]",
    ]);
    assert_eq!(last, Ok(Progress::Done));
    // block-start for call_a carries id and name; no later delta repeats them.
    assert_eq!(
        chunks[4],
        StreamChunk::BlockStart {
            index: 2,
            block_type: BlockType::ToolCall,
            id: Some("call_a".into()),
            name: Some("read".into())
        }
    );
    assert!(
        chunks
            .iter()
            .all(|c| !matches!(c, StreamChunk::ToolCallDelta { id: Some(_), .. }))
    );
    let out = assemble(&chunks);
    assert_eq!(
        out.content,
        vec![
            ContentBlock::reasoning("plan"),
            ContentBlock::text("Reading."),
            ContentBlock::ToolCall(ToolCallBlock {
                id: "call_a".into(),
                name: "read".into(),
                arguments: r#"{"file_path":"a.txt"}"#.into()
            }),
            ContentBlock::ToolCall(ToolCallBlock {
                id: "call_b".into(),
                name: "glob".into(),
                arguments: r#"{"pattern":"*"}"#.into()
            }),
        ]
    );
    assert_eq!(out.finish, Some(FinishReason::ToolCalls));
    assert_eq!(
        out.usage,
        Some(TokenUsage {
            input_tokens: 40,
            output_tokens: 20,
            cache_read_tokens: 60,
            reasoning_tokens: 7,
            cache_write_tokens: 0
        })
    );
    // usage comes right before finish, which is last.
    let n = chunks.len();
    assert!(matches!(chunks[n - 2], StreamChunk::Usage { .. }));
    assert!(matches!(chunks[n - 1], StreamChunk::Finish { .. }));
}

#[test]
fn finish_reasons_map() {
    let text = r#"{"choices":[{"delta":{"content":"x"}}]}"#;
    let fin = |r: &str| format!(r#"{{"choices":[{{"delta":{{}},"finish_reason":"{r}"}}]}}"#);
    for (reason, expected) in [
        ("stop", FinishReason::Stop),
        ("length", FinishReason::MaxTokens),
        (
            "content_filter",
            FinishReason::Error {
                code: "CONTENT_FILTER".into(),
            },
        ),
        (
            "insufficient_system_resource",
            FinishReason::Error {
                code: "INSUFFICIENT_SYSTEM_RESOURCE".into(),
            },
        ),
    ] {
        let f = fin(reason);
        let (chunks, last) = run(&[text, &f, "[DONE]"]);
        assert_eq!(last, Ok(Progress::Done));
        assert_eq!(
            chunks.last(),
            Some(&StreamChunk::Finish { reason: expected })
        );
    }
}

#[test]
fn length_leaves_tool_calls_open_so_the_assembler_drops_them() {
    let (chunks, _) = run(&[
        r#"{"choices":[{"delta":{"content":"Writing"}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"write","arguments":"{\"content\":\"abc"}}]}}]}"#,
        r#"{"choices":[{"delta":{},"finish_reason":"length"}]}"#,
        "[DONE]",
    ]);
    let out = assemble(&chunks);
    assert_eq!(out.content, vec![ContentBlock::text("Writing")]);
    assert_eq!(out.finish, Some(FinishReason::MaxTokens));
}

#[test]
fn stream_failures() {
    let (_, last) = run(&[
        r#"{"choices":[{"delta":{"role":"assistant"}}]}"#,
        r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#,
        USAGE,
        "[DONE]",
    ]);
    assert_eq!(last.map_err(|f| f.code), Err(FailureCode::EmptyResponse));

    let (_, last) = run(&[r#"{"choices":[{"delta":{"content":"x"}}]}"#, "{not json"]);
    assert_eq!(
        last.map_err(|f| f.code),
        Err(FailureCode::MalformedResponse)
    );

    let (_, last) = run(&[r#"{"choices":[{"delta":{"content":"x"}}]}"#, "[DONE]"]);
    assert_eq!(
        last.map_err(|f| f.code),
        Err(FailureCode::MalformedResponse)
    );

    let (_, last) = run(&[r#"{"error":{"message":"Server overloaded","code":503}}"#]);
    assert_eq!(last.map_err(|f| f.code), Err(FailureCode::Server));

    let mut t = StreamTranslator::new();
    assert_eq!(t.end_of_stream().code, FailureCode::StreamClosed);
    assert!(!t.is_done());
    let mut out = Vec::new();
    assert_eq!(
        t.push(": ignored blank", &mut out).map_err(|f| f.code),
        Err(FailureCode::MalformedResponse)
    );
}

#[test]
fn usage_from_openai_cached_tokens_and_unindexed_tool_calls() {
    let (chunks, _) = run(&[
        r#"{"choices":[{"delta":{"tool_calls":[{"id":"x1","function":{"name":"a","arguments":"{"}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"}"}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"id":"x2","function":{"name":"b","arguments":"{}"}}]}}]}"#,
        r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":10,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":50}}}"#,
        "[DONE]",
    ]);
    let out = assemble(&chunks);
    let names: Vec<String> = out
        .content
        .iter()
        .map(|b| match b {
            ContentBlock::ToolCall(c) => format!("{}:{}:{}", c.id, c.name, c.arguments),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(names, vec!["x1:a:{}", "x2:b:{}"]);
    // Cache hits above the prompt count are clamped, never underflow.
    assert_eq!(
        out.usage,
        Some(TokenUsage {
            input_tokens: 0,
            output_tokens: 2,
            cache_read_tokens: 10,
            reasoning_tokens: 0,
            cache_write_tokens: 0
        })
    );
}
