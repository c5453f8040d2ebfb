//! Block assembler tests: invariants, max-tokens, partial results.

use super::*;
use pretty_assertions::assert_eq;

fn start(index: u32, block_type: BlockType) -> StreamChunk {
    StreamChunk::BlockStart {
        index,
        block_type,
        id: None,
        name: None,
    }
}

fn text(index: u32, t: &str) -> StreamChunk {
    StreamChunk::TextDelta {
        index,
        text: t.into(),
    }
}

fn args(index: u32, a: &str) -> StreamChunk {
    StreamChunk::ToolCallDelta {
        index,
        id: None,
        name: None,
        arguments_delta: a.into(),
    }
}

fn call(id: &str, name: &str, arguments: &str) -> ContentBlock {
    ContentBlock::ToolCall(ToolCallBlock {
        id: id.into(),
        name: name.into(),
        arguments: arguments.into(),
    })
}

fn feed(chunks: &[StreamChunk]) -> Result<BlockAssembler, AssemblyError> {
    let mut asm = BlockAssembler::new();
    for c in chunks {
        asm.push(c)?;
    }
    Ok(asm)
}

#[test]
fn assembles_reasoning_text_and_tool_calls_in_start_order() {
    let usage = TokenUsage {
        input_tokens: 3,
        output_tokens: 4,
        cache_read_tokens: 5,
        reasoning_tokens: 1,
        cache_write_tokens: 0,
    };
    let chunks = vec![
        start(0, BlockType::Reasoning),
        StreamChunk::ReasoningDelta {
            index: 0,
            text: "think".into(),
        },
        start(1, BlockType::Text),
        text(1, "hel"),
        text(1, "lo"),
        StreamChunk::BlockStart {
            index: 2,
            block_type: BlockType::ToolCall,
            id: Some("c1".into()),
            name: Some("read".into()),
        },
        args(2, "{\"a\":"),
        args(2, "1}"),
        StreamChunk::BlockEnd {
            index: 0,
            block: ContentBlock::reasoning("think"),
        },
        StreamChunk::BlockEnd {
            index: 1,
            block: ContentBlock::text("hello"),
        },
        StreamChunk::BlockEnd {
            index: 2,
            block: call("c1", "read", "{\"a\":1}"),
        },
        StreamChunk::Usage { usage },
        StreamChunk::Finish {
            reason: FinishReason::ToolCalls,
        },
    ];
    let asm = feed(&chunks).unwrap();
    assert!(asm.is_finished());
    assert_eq!(
        asm.finish(),
        Assembled {
            content: vec![
                ContentBlock::reasoning("think"),
                ContentBlock::text("hello"),
                call("c1", "read", "{\"a\":1}"),
            ],
            usage: Some(usage),
            finish: Some(FinishReason::ToolCalls),
        }
    );
}

#[test]
fn max_tokens_drops_unclosed_tool_calls_but_keeps_text() {
    let chunks = vec![
        start(0, BlockType::Text),
        text(0, "partial answer"),
        StreamChunk::ToolCallDelta {
            index: 1,
            id: None,
            name: None,
            arguments_delta: String::new(),
        },
    ];
    // A delta before its block-start is an error.
    assert_eq!(
        feed(&chunks).err(),
        Some(AssemblyError::NotOpen { index: 1 })
    );

    let chunks = vec![
        start(0, BlockType::Text),
        text(0, "partial answer"),
        StreamChunk::BlockStart {
            index: 1,
            block_type: BlockType::ToolCall,
            id: None,
            name: None,
        },
        StreamChunk::ToolCallDelta {
            index: 1,
            id: Some("c".into()),
            name: Some("write".into()),
            arguments_delta: "{\"content\":\"abc".into(),
        },
        StreamChunk::BlockEnd {
            index: 0,
            block: ContentBlock::text("partial answer"),
        },
        StreamChunk::Finish {
            reason: FinishReason::MaxTokens,
        },
    ];
    let out = feed(&chunks).unwrap().finish();
    assert_eq!(out.content, vec![ContentBlock::text("partial answer")]);
    assert_eq!(out.finish, Some(FinishReason::MaxTokens));
    assert_eq!(out.usage, None);
}

#[test]
fn unclosed_tool_call_is_kept_on_a_normal_finish_with_ids_from_deltas() {
    let chunks = vec![
        start(0, BlockType::ToolCall),
        StreamChunk::ToolCallDelta {
            index: 0,
            id: Some("c9".into()),
            name: Some("bash".into()),
            arguments_delta: "{}".into(),
        },
        StreamChunk::Finish {
            reason: FinishReason::ToolCalls,
        },
    ];
    assert_eq!(
        feed(&chunks).unwrap().finish().content,
        vec![call("c9", "bash", "{}")]
    );
}

#[test]
fn partial_keeps_streamed_text_and_drops_incomplete_tool_calls() {
    let chunks = vec![
        start(0, BlockType::Reasoning),
        StreamChunk::ReasoningDelta {
            index: 0,
            text: "hmm".into(),
        },
        start(1, BlockType::Text),
        start(2, BlockType::Text),
        text(2, "so far"),
        start(3, BlockType::ToolCall),
        args(3, "{\"pa"),
    ];
    let asm = feed(&chunks).unwrap();
    assert_eq!(
        asm.partial(),
        vec![ContentBlock::reasoning("hmm"), ContentBlock::text("so far")]
    );
    assert!(!asm.is_finished());
    let out = asm.finish();
    assert_eq!(out.finish, None);
    assert_eq!(out.content.len(), 2);
}

#[test]
fn invariant_violations_are_errors() {
    let fin = StreamChunk::Finish {
        reason: FinishReason::Stop,
    };
    let usage = StreamChunk::Usage {
        usage: TokenUsage::default(),
    };
    let cases: Vec<(Vec<StreamChunk>, AssemblyError)> = vec![
        (
            vec![fin.clone(), usage.clone()],
            AssemblyError::AfterFinish { got: "usage" },
        ),
        (
            vec![fin.clone(), fin.clone()],
            AssemblyError::AfterFinish { got: "finish" },
        ),
        (
            vec![usage.clone(), usage.clone()],
            AssemblyError::DuplicateUsage,
        ),
        (
            vec![start(0, BlockType::Text), start(0, BlockType::Text)],
            AssemblyError::DuplicateStart { index: 0 },
        ),
        (vec![text(4, "x")], AssemblyError::NotOpen { index: 4 }),
        (
            vec![start(0, BlockType::Text), args(0, "x")],
            AssemblyError::KindMismatch {
                index: 0,
                expected: BlockType::Text,
                got: "tool-call-delta",
            },
        ),
        (
            vec![
                start(0, BlockType::Text),
                StreamChunk::BlockEnd {
                    index: 0,
                    block: call("a", "b", ""),
                },
            ],
            AssemblyError::KindMismatch {
                index: 0,
                expected: BlockType::Text,
                got: "block-end",
            },
        ),
        (
            vec![
                start(0, BlockType::Text),
                StreamChunk::BlockEnd {
                    index: 0,
                    block: ContentBlock::text(""),
                },
                text(0, "late"),
            ],
            AssemblyError::NotOpen { index: 0 },
        ),
    ];
    for (chunks, expected) in cases {
        assert_eq!(feed(&chunks).err(), Some(expected), "{chunks:?}");
    }
}
