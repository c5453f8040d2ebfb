//! Chat-completions stream translation: SSE `data:` payloads → keel [`StreamChunk`]s.
//!
//! This is the DeepSeek/OpenAI quirk layer, kept apart from HTTP so it can be tested and
//! benchmarked alone:
//! - one block per kind in first-seen order: one reasoning block (`reasoning_content`), one text
//!   block (`content`), one block per tool call;
//! - tool-call fragments are accumulated **by `index`**; only the first fragment carries `id` and
//!   `name`; arguments stay the raw string the model sent;
//! - the finish reason and usage are held until `[DONE]`, then the blocks are closed, usage is
//!   sent, and `finish` comes last. On `length` tool calls are left unclosed (the assembler drops
//!   them). `stop` → stop, `tool_calls` → tool-calls, `length` → max-tokens, anything else →
//!   `FinishReason::Error` with the upper-cased reason; nothing streamed → `EMPTY_RESPONSE`;
//! - usage buckets are made disjoint: uncached input = prompt tokens − cache hits.

use crate::classify::{failure_from_error_value, malformed};
use keel_protocol::{
    BlockType, ContentBlock, FailureCode, FinishReason, ModelFailure, StreamChunk, TokenUsage,
    ToolCallBlock,
};
use serde::Deserialize;
use std::borrow::Cow;

/// Whether the stream goes on after a payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// More payloads are expected.
    Continue,
    /// `[DONE]` was seen and the final chunks were emitted: stop reading.
    Done,
}

#[derive(Debug)]
enum Open {
    Text(String),
    Reasoning(String),
    Tool {
        wire_index: u64,
        id: Option<String>,
        name: Option<String>,
        args: String,
    },
}

/// Translates one response's payloads. Feed each SSE `data` payload to
/// [`StreamTranslator::push`]; call [`StreamTranslator::end_of_stream`] if the body ends first.
#[derive(Debug, Default)]
pub struct StreamTranslator {
    blocks: Vec<Open>,
    text: Option<usize>,
    reasoning: Option<usize>,
    finish_reason: Option<String>,
    usage: Option<TokenUsage>,
    done: bool,
}

#[derive(Deserialize)]
struct WireChunk<'a> {
    #[serde(default, borrow)]
    choices: Option<Vec<WireChoice<'a>>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct WireChoice<'a> {
    #[serde(default, borrow)]
    delta: Option<WireDelta<'a>>,
    #[serde(default, borrow)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct WireDelta<'a> {
    #[serde(default, borrow)]
    content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    tool_calls: Option<Vec<WireToolDelta<'a>>>,
}

#[derive(Deserialize)]
struct WireToolDelta<'a> {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default, borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    function: Option<WireFunction<'a>>,
}

#[derive(Deserialize)]
struct WireFunction<'a> {
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    arguments: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    prompt_cache_hit_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
    #[serde(default)]
    completion_tokens_details: Option<CompletionDetails>,
}

#[derive(Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct CompletionDetails {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

impl WireUsage {
    fn to_usage(&self) -> TokenUsage {
        let prompt = self.prompt_tokens.unwrap_or(0);
        let hit = self
            .prompt_cache_hit_tokens
            .or_else(|| {
                self.prompt_tokens_details
                    .as_ref()
                    .and_then(|d| d.cached_tokens)
            })
            .unwrap_or(0)
            .min(prompt);
        TokenUsage {
            input_tokens: prompt - hit,
            output_tokens: self.completion_tokens.unwrap_or(0),
            cache_read_tokens: hit,
            reasoning_tokens: self
                .completion_tokens_details
                .as_ref()
                .and_then(|d| d.reasoning_tokens)
                .unwrap_or(0),
            cache_write_tokens: 0,
        }
    }
}

fn block_index(i: usize) -> u32 {
    u32::try_from(i).unwrap_or(u32::MAX)
}

impl StreamTranslator {
    /// A translator for one response.
    pub fn new() -> Self {
        Self::default()
    }

    /// True once `[DONE]` was handled.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Translates one SSE `data` payload, appending chunks to `out`.
    pub fn push(
        &mut self,
        data: &str,
        out: &mut Vec<StreamChunk>,
    ) -> Result<Progress, ModelFailure> {
        if self.done {
            return Ok(Progress::Done);
        }
        let trimmed = data.trim_ascii();
        if trimmed == "[DONE]" {
            self.finish(out)?;
            return Ok(Progress::Done);
        }
        if trimmed.is_empty() {
            return Ok(Progress::Continue);
        }
        let chunk: WireChunk<'_> = serde_json::from_str(data).map_err(|e| {
            malformed(format!(
                "stream payload is not a chat-completions chunk: {e}"
            ))
        })?;
        if let Some(error) = &chunk.error {
            return Err(failure_from_error_value(error));
        }
        if let Some(usage) = &chunk.usage {
            self.usage = Some(usage.to_usage());
        }
        let Some(choice) = chunk.choices.and_then(|c| c.into_iter().next()) else {
            return Ok(Progress::Continue);
        };
        if let Some(delta) = choice.delta {
            if let Some(r) = delta.reasoning_content.filter(|s| !s.is_empty()) {
                self.reasoning_delta(&r, out);
            }
            if let Some(t) = delta.content.filter(|s| !s.is_empty()) {
                self.text_delta(&t, out);
            }
            for (position, call) in delta.tool_calls.into_iter().flatten().enumerate() {
                self.tool_delta(position, call, out);
            }
        }
        if let Some(reason) = choice.finish_reason {
            self.finish_reason = Some(reason.into_owned());
        }
        Ok(Progress::Continue)
    }

    /// The failure for a body that ended before `[DONE]` (`STREAM_CLOSED`).
    pub fn end_of_stream(&self) -> ModelFailure {
        let detail = if self.finish_reason.is_some() {
            "the stream ended after its finish reason but before [DONE]"
        } else {
            "the stream ended before [DONE]"
        };
        ModelFailure::new(FailureCode::StreamClosed, detail)
    }

    fn reasoning_delta(&mut self, text: &str, out: &mut Vec<StreamChunk>) {
        let i = match self.reasoning {
            Some(i) => i,
            None => {
                let i = self.open(Open::Reasoning(String::new()), BlockType::Reasoning, out);
                self.reasoning = Some(i);
                i
            }
        };
        if let Some(Open::Reasoning(buf)) = self.blocks.get_mut(i) {
            buf.push_str(text);
        }
        out.push(StreamChunk::ReasoningDelta {
            index: block_index(i),
            text: text.to_owned(),
        });
    }

    fn text_delta(&mut self, text: &str, out: &mut Vec<StreamChunk>) {
        let i = match self.text {
            Some(i) => i,
            None => {
                let i = self.open(Open::Text(String::new()), BlockType::Text, out);
                self.text = Some(i);
                i
            }
        };
        if let Some(Open::Text(buf)) = self.blocks.get_mut(i) {
            buf.push_str(text);
        }
        out.push(StreamChunk::TextDelta {
            index: block_index(i),
            text: text.to_owned(),
        });
    }

    fn open(&mut self, block: Open, block_type: BlockType, out: &mut Vec<StreamChunk>) -> usize {
        let i = self.blocks.len();
        self.blocks.push(block);
        out.push(StreamChunk::BlockStart {
            index: block_index(i),
            block_type,
            id: None,
            name: None,
        });
        i
    }

    fn find_tool(&self, wire_index: u64) -> Option<usize> {
        self.blocks
            .iter()
            .rposition(|b| matches!(b, Open::Tool { wire_index: w, .. } if *w == wire_index))
    }

    fn tool_delta(&mut self, position: usize, call: WireToolDelta<'_>, out: &mut Vec<StreamChunk>) {
        let wire_index = call
            .index
            .unwrap_or_else(|| self.unindexed_tool(position, call.id.as_deref()));
        let (name, args) = match call.function {
            Some(f) => (
                f.name.filter(|n| !n.is_empty()),
                f.arguments.unwrap_or_default(),
            ),
            None => (None, Cow::Borrowed("")),
        };
        let id = call.id.filter(|s| !s.is_empty());
        let Some(i) = self.find_tool(wire_index) else {
            let i = self.blocks.len();
            let (id, name) = (id.map(Cow::into_owned), name.map(Cow::into_owned));
            out.push(StreamChunk::BlockStart {
                index: block_index(i),
                block_type: BlockType::ToolCall,
                id: id.clone(),
                name: name.clone(),
            });
            self.blocks.push(Open::Tool {
                wire_index,
                id,
                name,
                args: args.to_string(),
            });
            if !args.is_empty() {
                out.push(StreamChunk::ToolCallDelta {
                    index: block_index(i),
                    id: None,
                    name: None,
                    arguments_delta: args.into_owned(),
                });
            }
            return;
        };
        let Some(Open::Tool {
            id: known_id,
            name: known_name,
            args: buf,
            ..
        }) = self.blocks.get_mut(i)
        else {
            return;
        };
        // Later fragments normally carry neither; take them only if the first one lacked them.
        let new_id = if known_id.is_none() {
            id.map(Cow::into_owned)
        } else {
            None
        };
        let new_name = if known_name.is_none() {
            name.map(Cow::into_owned)
        } else {
            None
        };
        if new_id.is_none() && new_name.is_none() && args.is_empty() {
            return;
        }
        if new_id.is_some() {
            known_id.clone_from(&new_id);
        }
        if new_name.is_some() {
            known_name.clone_from(&new_name);
        }
        buf.push_str(&args);
        out.push(StreamChunk::ToolCallDelta {
            index: block_index(i),
            id: new_id,
            name: new_name,
            arguments_delta: args.into_owned(),
        });
    }

    /// Providers that omit `index`: a fragment with a new id starts a new call, anything else
    /// continues the last call.
    fn unindexed_tool(&self, position: usize, id: Option<&str>) -> u64 {
        let tools: Vec<(u64, Option<&str>)> = self
            .blocks
            .iter()
            .filter_map(|b| match b {
                Open::Tool { wire_index, id, .. } => Some((*wire_index, id.as_deref())),
                _ => None,
            })
            .collect();
        let fresh = 1_000_000 + tools.len() as u64 + position as u64;
        match (id, tools.last()) {
            (Some(id), _) if !id.is_empty() => tools
                .iter()
                .find(|(_, known)| *known == Some(id))
                .map_or(fresh, |(w, _)| *w),
            (_, Some((w, _))) => *w,
            (_, None) => fresh,
        }
    }

    fn finish(&mut self, out: &mut Vec<StreamChunk>) -> Result<(), ModelFailure> {
        self.done = true;
        let Some(reason) = self.finish_reason.take() else {
            return Err(malformed(
                "the stream reached [DONE] without a finish reason",
            ));
        };
        let reason = match reason.as_str() {
            "stop" => FinishReason::Stop,
            "tool_calls" | "function_call" => FinishReason::ToolCalls,
            "length" => FinishReason::MaxTokens,
            other => FinishReason::Error {
                code: other.to_ascii_uppercase(),
            },
        };
        if self.blocks.is_empty() && matches!(reason, FinishReason::Stop | FinishReason::ToolCalls)
        {
            return Err(ModelFailure::new(
                FailureCode::EmptyResponse,
                "the model finished without streaming any text, reasoning or tool call",
            ));
        }
        let close_tools = reason != FinishReason::MaxTokens;
        for (i, block) in std::mem::take(&mut self.blocks).into_iter().enumerate() {
            let block = match block {
                Open::Text(text) => ContentBlock::Text { text },
                Open::Reasoning(text) => ContentBlock::reasoning(text),
                Open::Tool { .. } if !close_tools => continue,
                Open::Tool { id, name, args, .. } => ContentBlock::ToolCall(ToolCallBlock {
                    id: id.unwrap_or_else(|| format!("call_{i}")),
                    name: name.unwrap_or_default(),
                    arguments: args,
                }),
            };
            out.push(StreamChunk::BlockEnd {
                index: block_index(i),
                block,
            });
        }
        if let Some(usage) = self.usage.take() {
            out.push(StreamChunk::Usage { usage });
        }
        out.push(StreamChunk::Finish { reason });
        Ok(())
    }
}

#[cfg(test)]
#[path = "translate_tests.rs"]
mod tests;
