//! The Messages API wire (DeepSeek's Anthropic-compatible endpoint, Anthropic): the request body
//! of `POST {base}/v1/messages` and the translation of its event stream into keel chunks.
//!
//! Request, keys in the order DeepSeek Harness 0.2 sends them: `model, stream, messages,
//! max_tokens, thinking, output_config, system, tools`, then `cache_control`, `temperature` and
//! `stop_sequences` when set. Every message's content is an array of blocks:
//! - a user message's text and images; its tool results become `tool_result` blocks (text and
//!   image blocks inside, `is_error` always written), placed first as the API requires;
//! - an assistant message's reasoning becomes a `thinking` block with its `signature`, replayed
//!   unchanged (the API checks it); a reasoning block with a signature and no text is a
//!   `redacted_thinking` block (its `data` is the signature); reasoning without a signature (a
//!   history streamed over the chat wire) is not sent, the API would refuse it. Tool calls become
//!   `tool_use` blocks whose `input` is the model's raw argument string when that is a JSON object
//!   (so the bytes never change), else `{}`.
//!
//! Consecutive user messages merge into one (their blocks appended), so a body is always a
//! byte-prefix of the next one's messages. Prompt caching: DeepSeek caches by itself (dsh sends
//! no `cache_control`); for Anthropic, [`MessagesOptions::cache_control`] adds the request-level
//! `cache_control` (automatic caching: the breakpoint is the last cacheable block), the same bytes
//! in every request, so no per-block marker moves between requests.
//!
//! Stream: `message_start` (input usage), `content_block_start` / `_delta` / `_stop` per block
//! (`text_delta`, `thinking_delta`, `signature_delta`, `input_json_delta`), `message_delta` (stop
//! reason, output usage), `message_stop`; `ping` is skipped, `error` fails the call. Text and
//! thinking blocks close at their `content_block_stop`; tool calls close at `message_stop`, and
//! not at all when the reply hit `max_tokens` (their JSON may be cut off; the assembler drops
//! them). Usage buckets are disjoint: uncached input = `input_tokens` +
//! `cache_creation_input_tokens`, of which `cache_write_tokens` were written to the cache.

use crate::catalogue::ModelInfo;
use crate::classify::{failure_from_error_value, malformed};
use crate::request::{ChatRequest, IMAGE_NOT_SHOWN, NO_OUTPUT, sent_reasoning};
use crate::translate::Progress;
use keel_protocol::{
    BlockType, ContentBlock, FailureCode, FinishReason, ImageRef, Message, ModelFailure, Role,
    StreamChunk, TokenUsage, ToolCallBlock,
};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::collections::HashMap;

/// The `anthropic-version` header every Messages request carries.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Provider-level choices of the Messages wire.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MessagesOptions {
    /// Send the request-level `cache_control: {type: ephemeral}` (Anthropic's automatic prompt
    /// caching). DeepSeek needs none.
    pub cache_control: bool,
}

#[derive(Serialize)]
struct WireRequest<'a> {
    model: &'a str,
    stream: bool,
    messages: Vec<WireMessage<'a>>,
    max_tokens: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<Thinking>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_config: Option<OutputConfig<'a>>,
    #[serde(skip_serializing_if = "str::is_empty")]
    system: &'a str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<Kind>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    stop_sequences: &'a [String],
}

#[derive(Serialize)]
struct Kind {
    #[serde(rename = "type")]
    kind: &'static str,
}

/// `thinking`: `{type}`, with `budget_tokens` for a model that needs one (Anthropic's).
#[derive(Serialize)]
struct Thinking {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    budget_tokens: Option<u64>,
}

#[derive(Serialize)]
struct OutputConfig<'a> {
    effort: &'a str,
}

#[derive(Serialize)]
struct WireTool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a serde_json::Value,
}

#[derive(Serialize)]
struct WireMessage<'a> {
    role: &'static str,
    content: Vec<Block<'a>>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block<'a> {
    Text {
        text: &'a str,
    },
    Image {
        source: ImageSource<'a>,
    },
    Thinking {
        thinking: &'a str,
        signature: &'a str,
    },
    RedactedThinking {
        data: &'a str,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: Input<'a>,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: Vec<Block<'a>>,
        is_error: bool,
    },
}

/// A `tool_use` block's `input`: the model's arguments byte for byte, or `{}`.
#[derive(Serialize)]
#[serde(untagged)]
enum Input<'a> {
    Raw(&'a RawValue),
    Empty {},
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ImageSource<'a> {
    Base64 { media_type: &'a str, data: &'a str },
    Url { url: &'a str },
}

/// The exact bytes of the Messages request for `request` to a model described by `info`.
pub fn body_bytes(request: &ChatRequest, info: &ModelInfo, options: MessagesOptions) -> Vec<u8> {
    let mut messages: Vec<WireMessage<'_>> = Vec::with_capacity(request.messages.len());
    for message in &request.messages {
        map_message(message, info, &mut messages);
    }
    let sent = sent_reasoning(request.thinking, request.reasoning_effort.as_deref(), info);
    let max_tokens = request
        .max_tokens
        .unwrap_or(info.max_output)
        .min(info.max_output);
    let wire = WireRequest {
        model: &request.model,
        stream: true,
        messages,
        max_tokens,
        // The budget must stay under max_tokens (the API refuses it otherwise).
        thinking: sent.thinking.map(|on| Thinking {
            kind: if on { "enabled" } else { "disabled" },
            budget_tokens: info
                .thinking_budget
                .filter(|_| on)
                .map(|b| b.min(max_tokens.saturating_sub(1))),
        }),
        output_config: sent.effort.map(|effort| OutputConfig { effort }),
        system: &request.system,
        tools: request
            .tools
            .iter()
            .map(|t| WireTool {
                name: &t.name,
                description: &t.description,
                input_schema: &t.parameters,
            })
            .collect(),
        cache_control: options.cache_control.then_some(Kind { kind: "ephemeral" }),
        temperature: request.temperature.filter(|t| t.is_finite()),
        stop_sequences: &request.stop,
    };
    serde_json::to_vec(&wire).unwrap_or_default()
}

/// The model's raw arguments when they are one JSON object, byte for byte; else `{}`.
fn tool_input(arguments: &str) -> Input<'_> {
    let trimmed = arguments.trim();
    match serde_json::from_str::<&RawValue>(trimmed) {
        Ok(raw) if trimmed.starts_with('{') => Input::Raw(raw),
        _ => Input::Empty {},
    }
}

fn image_block(image: &ImageRef) -> Block<'_> {
    let source = match image.uri.strip_prefix("data:").and_then(|rest| {
        let (head, data) = rest.split_once(',')?;
        let media_type = head.strip_suffix(";base64")?;
        Some((media_type, data))
    }) {
        Some((media_type, data)) => ImageSource::Base64 { media_type, data },
        None => ImageSource::Url { url: &image.uri },
    };
    Block::Image { source }
}

fn map_message<'a>(message: &'a Message, info: &ModelInfo, out: &mut Vec<WireMessage<'a>>) {
    match message.role {
        Role::User => {
            let mut results = Vec::new();
            let mut rest = Vec::new();
            for block in &message.content {
                match block {
                    ContentBlock::ToolResult(result) => {
                        let mut content = Vec::new();
                        for part in &result.content {
                            match part {
                                ContentBlock::Text { text } if !text.is_empty() => {
                                    content.push(Block::Text { text });
                                }
                                ContentBlock::Image(image) if info.vision => {
                                    content.push(image_block(image));
                                }
                                _ => {}
                            }
                        }
                        if content.is_empty() {
                            content.push(Block::Text { text: NO_OUTPUT });
                        }
                        results.push(Block::ToolResult {
                            tool_use_id: &result.tool_call_id,
                            content,
                            is_error: result.is_error,
                        });
                    }
                    ContentBlock::Text { text } if !text.is_empty() => {
                        rest.push(Block::Text { text });
                    }
                    ContentBlock::Image(image) if info.vision => rest.push(image_block(image)),
                    ContentBlock::Image(_) => rest.push(Block::Text {
                        text: IMAGE_NOT_SHOWN,
                    }),
                    _ => {}
                }
            }
            results.extend(rest);
            if results.is_empty() {
                return;
            }
            // Consecutive user messages go out as one, blocks appended (never rewritten).
            match out.last_mut() {
                Some(last) if last.role == "user" => last.content.extend(results),
                _ => out.push(WireMessage {
                    role: "user",
                    content: results,
                }),
            }
        }
        Role::Assistant => {
            let mut content = Vec::new();
            let mut visible = false;
            for block in &message.content {
                match block {
                    ContentBlock::Reasoning {
                        text,
                        signature: Some(signature),
                    } => content.push(if text.is_empty() {
                        Block::RedactedThinking { data: signature }
                    } else {
                        Block::Thinking {
                            thinking: text,
                            signature,
                        }
                    }),
                    ContentBlock::Text { text } if !text.is_empty() => {
                        visible = true;
                        content.push(Block::Text { text });
                    }
                    ContentBlock::ToolCall(call) => {
                        visible = true;
                        content.push(Block::ToolUse {
                            id: &call.id,
                            name: &call.name,
                            input: tool_input(&call.arguments),
                        });
                    }
                    _ => {}
                }
            }
            if visible {
                out.push(WireMessage {
                    role: "assistant",
                    content,
                });
            }
        }
    }
}

// ---- the stream ----

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Event {
    MessageStart {
        message: StartMessage,
    },
    ContentBlockStart {
        index: u64,
        content_block: StartBlock,
    },
    ContentBlockDelta {
        index: u64,
        delta: Delta,
    },
    ContentBlockStop {
        index: u64,
    },
    MessageDelta {
        #[serde(default)]
        delta: MessageDelta,
        #[serde(default)]
        usage: Option<WireUsage>,
    },
    MessageStop,
    Ping,
    Error {
        error: serde_json::Value,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Deserialize)]
struct StartMessage {
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct StartBlock {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    thinking: Option<String>,
    #[serde(default)]
    signature: Option<String>,
    #[serde(default)]
    data: Option<String>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    name: Option<String>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Delta {
    #[serde(rename = "text_delta")]
    Text { text: String },
    #[serde(rename = "thinking_delta")]
    Thinking { thinking: String },
    #[serde(rename = "signature_delta")]
    Signature { signature: String },
    #[serde(rename = "input_json_delta")]
    InputJson { partial_json: String },
    #[serde(other)]
    Other,
}

#[derive(Deserialize, Default)]
struct MessageDelta {
    #[serde(default)]
    stop_reason: Option<String>,
}

#[derive(Debug, Deserialize, Default, Clone, Copy)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
}

#[derive(Debug)]
enum Open {
    Text(String),
    Thinking {
        text: String,
        signature: String,
    },
    Redacted(String),
    Tool {
        id: String,
        name: String,
        args: String,
    },
}

/// Translates one Messages response's events (see the module docs).
#[derive(Debug, Default)]
pub struct MessagesTranslator {
    /// Open blocks by the wire's index: keel's index and the block.
    open: HashMap<u64, (u32, Open)>,
    /// Tool calls closed by the wire, waiting for the stop reason.
    tools: Vec<(u32, ToolCallBlock)>,
    next_index: u32,
    stop_reason: Option<String>,
    /// The latest usage counts (`message_delta` repeats cumulative ones).
    usage: Option<WireUsage>,
    done: bool,
}

impl MessagesTranslator {
    /// A translator for one response.
    pub fn new() -> Self {
        Self::default()
    }

    /// True once `message_stop` was handled.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Translates one event's `data`, appending chunks to `out`.
    pub fn push(
        &mut self,
        data: &str,
        out: &mut Vec<StreamChunk>,
    ) -> Result<Progress, ModelFailure> {
        if self.done {
            return Ok(Progress::Done);
        }
        if data.trim_ascii().is_empty() {
            return Ok(Progress::Continue);
        }
        let event: Event = serde_json::from_str(data)
            .map_err(|e| malformed(format!("stream event is not a Messages API event: {e}")))?;
        match event {
            Event::MessageStart { message } => {
                if let Some(u) = message.usage {
                    self.add_usage(u);
                }
            }
            Event::ContentBlockStart {
                index,
                content_block,
            } => self.start(index, content_block, out)?,
            Event::ContentBlockDelta { index, delta } => self.delta(index, delta, out)?,
            Event::ContentBlockStop { index } => self.stop(index, out)?,
            Event::MessageDelta { delta, usage } => {
                if delta.stop_reason.is_some() {
                    self.stop_reason = delta.stop_reason;
                }
                if let Some(u) = usage {
                    self.add_usage(u);
                }
            }
            Event::MessageStop => {
                self.finish(out)?;
                return Ok(Progress::Done);
            }
            Event::Ping | Event::Unknown => {}
            Event::Error { error } => return Err(failure_from_error_value(&error)),
        }
        Ok(Progress::Continue)
    }

    /// The failure for a body that ended before `message_stop` (`STREAM_CLOSED`).
    pub fn end_of_stream(&self) -> ModelFailure {
        let detail = if self.open.is_empty() {
            "the Messages stream ended before message_stop"
        } else {
            "the Messages stream ended inside a content block, before message_stop"
        };
        ModelFailure::new(FailureCode::StreamClosed, detail)
    }

    fn add_usage(&mut self, u: WireUsage) {
        let seen = self.usage.get_or_insert_default();
        let latest = |new: Option<u64>, old: Option<u64>| new.or(old);
        *seen = WireUsage {
            input_tokens: latest(u.input_tokens, seen.input_tokens),
            output_tokens: latest(u.output_tokens, seen.output_tokens),
            cache_read_input_tokens: latest(
                u.cache_read_input_tokens,
                seen.cache_read_input_tokens,
            ),
            cache_creation_input_tokens: latest(
                u.cache_creation_input_tokens,
                seen.cache_creation_input_tokens,
            ),
        };
    }

    fn start(
        &mut self,
        wire: u64,
        block: StartBlock,
        out: &mut Vec<StreamChunk>,
    ) -> Result<(), ModelFailure> {
        if self.open.contains_key(&wire) {
            return Err(malformed(format!("content block {wire} started twice")));
        }
        let (open, block_type) = match block.kind.as_str() {
            "text" => (Open::Text(String::new()), BlockType::Text),
            "thinking" => (
                Open::Thinking {
                    text: String::new(),
                    signature: block.signature.unwrap_or_default(),
                },
                BlockType::Reasoning,
            ),
            "redacted_thinking" => (
                Open::Redacted(block.data.unwrap_or_default()),
                BlockType::Reasoning,
            ),
            "tool_use" | "server_tool_use" => (
                Open::Tool {
                    id: block.id.unwrap_or_default(),
                    name: block.name.unwrap_or_default(),
                    args: String::new(),
                },
                BlockType::ToolCall,
            ),
            other => {
                return Err(malformed(format!(
                    "the Messages stream sent a content block of unknown type {other:?}"
                )));
            }
        };
        let index = self.next_index;
        self.next_index += 1;
        let (id, name) = match &open {
            Open::Tool { id, name, .. } => (Some(id.clone()), Some(name.clone())),
            _ => (None, None),
        };
        out.push(StreamChunk::BlockStart {
            index,
            block_type,
            id,
            name,
        });
        self.open.insert(wire, (index, open));
        // A start block may carry initial text (the API sends it empty today).
        if let Some(text) = block.text.filter(|t| !t.is_empty()) {
            self.delta(wire, Delta::Text { text }, out)?;
        }
        if let Some(thinking) = block.thinking.filter(|t| !t.is_empty()) {
            self.delta(wire, Delta::Thinking { thinking }, out)?;
        }
        Ok(())
    }

    fn delta(
        &mut self,
        wire: u64,
        delta: Delta,
        out: &mut Vec<StreamChunk>,
    ) -> Result<(), ModelFailure> {
        let Some((index, open)) = self.open.get_mut(&wire) else {
            return Err(malformed(format!(
                "a delta for content block {wire}, which is not open"
            )));
        };
        let index = *index;
        match (open, delta) {
            (Open::Text(buf), Delta::Text { text }) => {
                buf.push_str(&text);
                out.push(StreamChunk::TextDelta { index, text });
            }
            (Open::Thinking { text: buf, .. }, Delta::Thinking { thinking }) => {
                buf.push_str(&thinking);
                out.push(StreamChunk::ReasoningDelta {
                    index,
                    text: thinking,
                });
            }
            (Open::Thinking { signature: buf, .. }, Delta::Signature { signature }) => {
                buf.push_str(&signature);
            }
            (Open::Tool { args, .. }, Delta::InputJson { partial_json }) => {
                if !partial_json.is_empty() {
                    args.push_str(&partial_json);
                    out.push(StreamChunk::ToolCallDelta {
                        index,
                        id: None,
                        name: None,
                        arguments_delta: partial_json,
                    });
                }
            }
            // Citations and deltas of kinds keel does not use change nothing it keeps.
            (_, Delta::Other) => {}
            (_, _) => {
                return Err(malformed(format!(
                    "a delta that does not match content block {wire}'s type"
                )));
            }
        }
        Ok(())
    }

    fn stop(&mut self, wire: u64, out: &mut Vec<StreamChunk>) -> Result<(), ModelFailure> {
        let Some((index, open)) = self.open.remove(&wire) else {
            return Err(malformed(format!(
                "content_block_stop for block {wire}, which is not open"
            )));
        };
        let block = match open {
            Open::Text(text) => ContentBlock::Text { text },
            Open::Thinking { text, signature } => ContentBlock::Reasoning {
                text,
                signature: (!signature.is_empty()).then_some(signature),
            },
            Open::Redacted(data) => ContentBlock::Reasoning {
                text: String::new(),
                signature: Some(data),
            },
            Open::Tool { id, name, args } => {
                self.tools.push((
                    index,
                    ToolCallBlock {
                        id,
                        name,
                        arguments: if args.is_empty() { "{}".into() } else { args },
                    },
                ));
                return Ok(());
            }
        };
        out.push(StreamChunk::BlockEnd { index, block });
        Ok(())
    }

    fn finish(&mut self, out: &mut Vec<StreamChunk>) -> Result<(), ModelFailure> {
        self.done = true;
        let reason = match self.stop_reason.as_deref() {
            Some("end_turn" | "stop_sequence") => FinishReason::Stop,
            Some("tool_use") => FinishReason::ToolCalls,
            Some("max_tokens" | "model_context_window_exceeded") => FinishReason::MaxTokens,
            Some(other) => FinishReason::Error {
                code: other.to_ascii_uppercase(),
            },
            None => {
                return Err(malformed(
                    "the Messages stream stopped without a stop_reason",
                ));
            }
        };
        if self.next_index == 0 && matches!(reason, FinishReason::Stop | FinishReason::ToolCalls) {
            return Err(ModelFailure::new(
                FailureCode::EmptyResponse,
                "the model finished without streaming any text, thinking or tool call",
            ));
        }
        if reason != FinishReason::MaxTokens {
            for (index, call) in std::mem::take(&mut self.tools) {
                out.push(StreamChunk::BlockEnd {
                    index,
                    block: ContentBlock::ToolCall(call),
                });
            }
        }
        if let Some(u) = self.usage {
            let written = u.cache_creation_input_tokens.unwrap_or(0);
            let usage = TokenUsage {
                input_tokens: u.input_tokens.unwrap_or(0) + written,
                output_tokens: u.output_tokens.unwrap_or(0),
                cache_read_tokens: u.cache_read_input_tokens.unwrap_or(0),
                reasoning_tokens: 0,
                cache_write_tokens: written,
            };
            out.push(StreamChunk::Usage { usage });
        }
        out.push(StreamChunk::Finish { reason });
        Ok(())
    }
}

#[cfg(test)]
#[path = "messages_tests.rs"]
mod tests;
