//! OpenAI's Responses API wire: the request body of `POST {base}/responses` and the translation
//! of its event stream into keel chunks.
//!
//! Request, keys in this order: `model, instructions (the system prompt, omitted when empty),
//! input, tools, stream, store, include, reasoning, max_output_tokens`, then `temperature` when
//! set. Nothing is stored server-side (`store: false`), so every request carries the whole
//! history; reasoning models get `include: ["reasoning.encrypted_content"]`, and their reasoning
//! items come back with the opaque `encrypted_content` keel keeps as the reasoning block's
//! `signature`. `reasoning: {effort, summary: "auto"}` goes out when [`sent_reasoning`] gives an
//! effort or thinking is on. The API has no stop sequences; [`ChatRequest::stop`] is not sent.
//!
//! Input items, in history order:
//! - a user message's text and images: one `{role: "user", content: [input_text | input_image]}`
//!   item (images only to models with vision, else the text [`IMAGE_NOT_SHOWN`]); consecutive
//!   user messages merge, parts appended, so a body's input is always a prefix of the next one's;
//! - each tool result: a `function_call_output` item (`(no output)` when it has no text); the
//!   images results returned go to a vision model as a user message after the run of results,
//!   as the chat wire does ([`crate::request`]);
//! - an assistant message: its signed reasoning as `reasoning` items (the summary text and the
//!   `encrypted_content`, replayed unchanged; reasoning without a signature — a history streamed
//!   over another wire — is not sent), its text as a `message` item of `output_text` parts, each
//!   tool call as a `function_call` item with the model's raw argument string. An assistant
//!   message with neither text nor tool calls is not sent.
//!
//! Stream: `response.output_item.added` opens a block per output item (`message` → text,
//! `reasoning` → reasoning, `function_call` → tool call; items of other types are skipped with
//! their events); `response.output_text.delta`, `response.reasoning_summary_text.delta` (summary
//! parts separated by a blank line), `response.reasoning_text.delta` and
//! `response.function_call_arguments.delta` stream into it; `response.output_item.done` closes
//! text and reasoning blocks (the reasoning's `encrypted_content` becomes its signature) and
//! holds tool calls until the end. `response.completed` closes the held calls and reports usage
//! and the finish (`tool-calls` when the reply has a function call, else `stop`);
//! `response.incomplete` finishes with `max-tokens` (held calls dropped: their JSON may be cut
//! off) or an error named after its reason; `response.failed` and `error` fail the call. Usage
//! buckets are made disjoint: uncached input = `input_tokens` − `cached_tokens`.

use crate::catalogue::ModelInfo;
use crate::classify::{failure_from_error_value, malformed};
use crate::request::{ChatRequest, IMAGE_NOT_SHOWN, NO_OUTPUT, sent_reasoning};
use crate::translate::Progress;
use keel_protocol::{
    BlockType, ContentBlock, FailureCode, FinishReason, ImageRef, Message, ModelFailure, Role,
    StreamChunk, TokenUsage, ToolCallBlock,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

/// What a model's reasoning items must carry back for a request that stores nothing.
const INCLUDE_ENCRYPTED: &[&str] = &["reasoning.encrypted_content"];

#[derive(Serialize)]
struct WireRequest<'a> {
    model: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    instructions: &'a str,
    input: Vec<Item<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    stream: bool,
    store: bool,
    #[serde(skip_serializing_if = "<[&str]>::is_empty")]
    include: &'static [&'static str],
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning: Option<Reasoning<'a>>,
    max_output_tokens: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
}

#[derive(Serialize)]
struct Reasoning<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    effort: Option<&'a str>,
    summary: &'static str,
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
    strict: bool,
}

/// One input item: a user message (no `type`, as the API's easy input message) or a typed item.
#[derive(Serialize)]
#[serde(untagged)]
enum Item<'a> {
    User {
        role: &'static str,
        content: Vec<UserPart<'a>>,
    },
    Typed(Typed<'a>),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Typed<'a> {
    Message {
        role: &'static str,
        content: Vec<OutputPart<'a>>,
    },
    Reasoning {
        summary: Vec<OutputPart<'a>>,
        encrypted_content: &'a str,
    },
    FunctionCall {
        call_id: &'a str,
        name: &'a str,
        arguments: &'a str,
    },
    FunctionCallOutput {
        call_id: &'a str,
        output: Cow<'a, str>,
    },
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum UserPart<'a> {
    InputText { text: &'a str },
    InputImage { image_url: &'a str },
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum OutputPart<'a> {
    OutputText { text: &'a str },
    SummaryText { text: &'a str },
}

/// The exact bytes of the Responses request for `request` to a model described by `info`.
pub fn body_bytes(request: &ChatRequest, info: &ModelInfo) -> Vec<u8> {
    let mut input = Vec::with_capacity(request.messages.len());
    // Images tool results returned, waiting for the end of the run of results.
    let mut tool_images = Vec::new();
    for message in &request.messages {
        map_message(message, info, &mut tool_images, &mut input);
    }
    push_user(tool_images, &mut input);
    let sent = sent_reasoning(request.thinking, request.reasoning_effort.as_deref(), info);
    let wire = WireRequest {
        model: &request.model,
        instructions: &request.system,
        input,
        tools: request
            .tools
            .iter()
            .map(|t| WireTool {
                kind: "function",
                name: &t.name,
                description: &t.description,
                parameters: &t.parameters,
                strict: false,
            })
            .collect(),
        stream: true,
        store: false,
        include: if info.reasoning {
            INCLUDE_ENCRYPTED
        } else {
            &[]
        },
        reasoning: (sent.effort.is_some() || sent.thinking == Some(true)).then_some(Reasoning {
            effort: sent.effort,
            summary: "auto",
        }),
        max_output_tokens: request
            .max_tokens
            .unwrap_or(info.max_output)
            .min(info.max_output),
        temperature: request.temperature.filter(|t| t.is_finite()),
    };
    serde_json::to_vec(&wire).unwrap_or_default()
}

fn image_part(image: &ImageRef) -> UserPart<'_> {
    UserPart::InputImage {
        image_url: &image.uri,
    }
}

fn map_message<'a>(
    message: &'a Message,
    info: &ModelInfo,
    tool_images: &mut Vec<UserPart<'a>>,
    out: &mut Vec<Item<'a>>,
) {
    match message.role {
        Role::User => {
            let mut parts = Vec::new();
            for block in &message.content {
                match block {
                    ContentBlock::ToolResult(result) => {
                        let text = result.text();
                        out.push(Item::Typed(Typed::FunctionCallOutput {
                            call_id: &result.tool_call_id,
                            output: if text.is_empty() {
                                Cow::Borrowed(NO_OUTPUT)
                            } else {
                                Cow::Owned(text)
                            },
                        }));
                        if info.vision {
                            tool_images.extend(result.content.iter().filter_map(|b| match b {
                                ContentBlock::Image(image) => Some(image_part(image)),
                                _ => None,
                            }));
                        }
                    }
                    ContentBlock::Text { text } if !text.is_empty() => {
                        parts.push(UserPart::InputText { text });
                    }
                    ContentBlock::Image(image) if info.vision => parts.push(image_part(image)),
                    ContentBlock::Image(_) => parts.push(UserPart::InputText {
                        text: IMAGE_NOT_SHOWN,
                    }),
                    _ => {}
                }
            }
            if parts.is_empty() {
                return;
            }
            push_user(std::mem::take(tool_images), out);
            push_user(parts, out);
        }
        Role::Assistant => {
            let visible = message.content.iter().any(|b| match b {
                ContentBlock::Text { text } => !text.is_empty(),
                ContentBlock::ToolCall(_) => true,
                _ => false,
            });
            if !visible {
                return; // nothing the model can be shown (e.g. an interrupted reply)
            }
            push_user(std::mem::take(tool_images), out);
            for block in &message.content {
                match block {
                    ContentBlock::Reasoning {
                        text,
                        signature: Some(signature),
                    } => out.push(Item::Typed(Typed::Reasoning {
                        summary: if text.is_empty() {
                            Vec::new()
                        } else {
                            vec![OutputPart::SummaryText { text }]
                        },
                        encrypted_content: signature,
                    })),
                    ContentBlock::Text { text } if !text.is_empty() => match out.last_mut() {
                        // Text blocks in a row are parts of one message item.
                        Some(Item::Typed(Typed::Message { content, .. })) => {
                            content.push(OutputPart::OutputText { text });
                        }
                        _ => out.push(Item::Typed(Typed::Message {
                            role: "assistant",
                            content: vec![OutputPart::OutputText { text }],
                        })),
                    },
                    ContentBlock::ToolCall(call) => {
                        out.push(Item::Typed(Typed::FunctionCall {
                            call_id: &call.id,
                            name: &call.name,
                            arguments: if call.arguments.is_empty() {
                                "{}"
                            } else {
                                &call.arguments
                            },
                        }));
                    }
                    _ => {}
                }
            }
        }
    }
}

/// Sends `parts` as a user message, appended to the last item when that is a user message (only
/// ever appending keeps every item sent before a prefix of the next body).
fn push_user<'a>(parts: Vec<UserPart<'a>>, out: &mut Vec<Item<'a>>) {
    if parts.is_empty() {
        return;
    }
    match out.last_mut() {
        Some(Item::User { content, .. }) => content.extend(parts),
        _ => out.push(Item::User {
            role: "user",
            content: parts,
        }),
    }
}

// ---- the stream ----

#[derive(Deserialize)]
#[serde(tag = "type")]
enum Event {
    #[serde(rename = "response.output_item.added")]
    ItemAdded { output_index: u64, item: WireItem },
    #[serde(rename = "response.output_item.done")]
    ItemDone { output_index: u64, item: WireItem },
    #[serde(
        rename = "response.output_text.delta",
        alias = "response.refusal.delta"
    )]
    TextDelta(DeltaEvent),
    #[serde(rename = "response.reasoning_summary_text.delta")]
    SummaryDelta(DeltaEvent),
    #[serde(rename = "response.reasoning_text.delta")]
    ReasoningDelta(DeltaEvent),
    #[serde(rename = "response.function_call_arguments.delta")]
    ArgumentsDelta(DeltaEvent),
    #[serde(rename = "response.completed")]
    Completed { response: WireResponse },
    #[serde(rename = "response.incomplete")]
    Incomplete { response: WireResponse },
    #[serde(rename = "response.failed")]
    Failed { response: WireResponse },
    #[serde(rename = "error")]
    Error {
        #[serde(default)]
        error: Option<Value>,
        #[serde(default)]
        code: Option<Value>,
        #[serde(default)]
        message: Option<String>,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireItem {
    #[serde(rename = "type")]
    kind: String,
    id: Option<String>,
    call_id: Option<String>,
    name: Option<String>,
    arguments: Option<String>,
    encrypted_content: Option<String>,
    summary: Option<Vec<WirePart>>,
    content: Option<Vec<WirePart>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WirePart {
    text: Option<String>,
    refusal: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireResponse {
    usage: Option<WireUsage>,
    incomplete_details: Option<IncompleteDetails>,
    error: Option<Value>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct IncompleteDetails {
    reason: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    input_tokens_details: Option<Details>,
    output_tokens_details: Option<Details>,
}

/// `input_tokens_details` and `output_tokens_details`.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Details {
    cached_tokens: Option<u64>,
    reasoning_tokens: Option<u64>,
}

/// A delta event: the output item, the reasoning part it belongs to (summary or content parts),
/// the text.
#[derive(Deserialize)]
struct DeltaEvent {
    output_index: u64,
    #[serde(default)]
    summary_index: u64,
    #[serde(default)]
    content_index: u64,
    delta: String,
}

impl WireUsage {
    fn to_usage(&self) -> TokenUsage {
        let input = self.input_tokens.unwrap_or(0);
        let cached = self
            .input_tokens_details
            .as_ref()
            .and_then(|d| d.cached_tokens)
            .unwrap_or(0)
            .min(input);
        TokenUsage {
            input_tokens: input - cached,
            output_tokens: self.output_tokens.unwrap_or(0),
            cache_read_tokens: cached,
            reasoning_tokens: self
                .output_tokens_details
                .as_ref()
                .and_then(|d| d.reasoning_tokens)
                .unwrap_or(0),
            cache_write_tokens: 0,
        }
    }
}

#[derive(Debug)]
enum Open {
    Text(String),
    Reasoning {
        text: String,
        /// The part the last delta belonged to (parts are separated by a blank line).
        part: Option<(Delta, u64)>,
    },
    Tool {
        id: String,
        name: String,
        args: String,
    },
}

/// Translates one Responses stream's events (see the module docs).
#[derive(Debug, Default)]
pub struct ResponsesTranslator {
    /// Open blocks by the wire's `output_index`: keel's index and the block.
    open: HashMap<u64, (u32, Open)>,
    /// Output items of types keel does not use, whose events are ignored.
    skipped: HashSet<u64>,
    /// Tool calls closed by the wire, waiting for the end of the response.
    tools: Vec<(u32, ToolCallBlock)>,
    /// Whether the reply has a function call.
    called: bool,
    next_index: u32,
    done: bool,
}

/// The texts of `parts` (`text`, or a refusal's `refusal`) joined by `separator`.
fn joined(parts: Option<Vec<WirePart>>, separator: &str) -> String {
    let texts: Vec<String> = parts
        .into_iter()
        .flatten()
        .filter_map(|p| p.text.or(p.refusal))
        .filter(|t| !t.is_empty())
        .collect();
    texts.join(separator)
}

impl ResponsesTranslator {
    /// A translator for one response.
    pub fn new() -> Self {
        Self::default()
    }

    /// True once the stream's last event (`response.completed` or `response.incomplete`) was
    /// handled.
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
        let trimmed = data.trim_ascii();
        if trimmed.is_empty() {
            return Ok(Progress::Continue);
        }
        if trimmed == "[DONE]" {
            // A compatible server's chat-style terminator, before the response ended.
            return Err(self.end_of_stream());
        }
        let event: Event = serde_json::from_str(data)
            .map_err(|e| malformed(format!("stream event is not a Responses API event: {e}")))?;
        match event {
            Event::ItemAdded { output_index, item } => self.start(output_index, item, out)?,
            Event::ItemDone { output_index, item } => self.item_done(output_index, item, out)?,
            Event::TextDelta(d) => self.delta(Delta::Text, d, out)?,
            Event::SummaryDelta(d) => self.delta(Delta::Summary, d, out)?,
            Event::ReasoningDelta(d) => self.delta(Delta::Content, d, out)?,
            Event::ArgumentsDelta(d) => self.delta(Delta::Arguments, d, out)?,
            Event::Completed { response } => {
                self.finish(false, response, out)?;
                return Ok(Progress::Done);
            }
            Event::Incomplete { response } => {
                self.finish(true, response, out)?;
                return Ok(Progress::Done);
            }
            Event::Failed { response } => {
                let error = response
                    .error
                    .unwrap_or_else(|| serde_json::json!({"message": "the response failed"}));
                return Err(failure_from_error_value(&error));
            }
            Event::Error {
                error,
                code,
                message,
            } => {
                let error = error.unwrap_or_else(
                    || serde_json::json!({"code": code, "message": message.unwrap_or_default()}),
                );
                return Err(failure_from_error_value(&error));
            }
            Event::Unknown => {}
        }
        Ok(Progress::Continue)
    }

    /// The failure for a body that ended before `response.completed` (`STREAM_CLOSED`).
    pub fn end_of_stream(&self) -> ModelFailure {
        let detail = if self.open.is_empty() {
            "the Responses stream ended before response.completed"
        } else {
            "the Responses stream ended inside an output item, before response.completed"
        };
        ModelFailure::new(FailureCode::StreamClosed, detail)
    }

    fn start(
        &mut self,
        wire: u64,
        item: WireItem,
        out: &mut Vec<StreamChunk>,
    ) -> Result<(), ModelFailure> {
        if self.open.contains_key(&wire) || self.skipped.contains(&wire) {
            return Err(malformed(format!("output item {wire} added twice")));
        }
        let index = self.next_index;
        let (open, block_type) = match item.kind.as_str() {
            "message" => (Open::Text(String::new()), BlockType::Text),
            "reasoning" => (
                Open::Reasoning {
                    text: String::new(),
                    part: None,
                },
                BlockType::Reasoning,
            ),
            "function_call" => {
                self.called = true;
                let id = item
                    .call_id
                    .or(item.id)
                    .filter(|id| !id.is_empty())
                    .unwrap_or_else(|| format!("call_{index}"));
                (
                    Open::Tool {
                        id,
                        name: item.name.unwrap_or_default(),
                        args: String::new(),
                    },
                    BlockType::ToolCall,
                )
            }
            // Built-in tool calls and other items keel does not use.
            _ => {
                self.skipped.insert(wire);
                return Ok(());
            }
        };
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
        // An added item may carry initial arguments (the API sends them empty).
        if let Some(delta) = item.arguments {
            let initial = DeltaEvent {
                output_index: wire,
                summary_index: 0,
                content_index: 0,
                delta,
            };
            self.delta(Delta::Arguments, initial, out)?;
        }
        Ok(())
    }

    fn delta(
        &mut self,
        kind: Delta,
        event: DeltaEvent,
        out: &mut Vec<StreamChunk>,
    ) -> Result<(), ModelFailure> {
        let wire = event.output_index;
        let Some((index, open)) = self.open.get_mut(&wire) else {
            if self.skipped.contains(&wire) {
                return Ok(());
            }
            return Err(malformed(format!(
                "a delta for output item {wire}, which is not open"
            )));
        };
        let (index, text) = (*index, event.delta);
        match (open, kind) {
            _ if text.is_empty() => {}
            (Open::Text(buf), Delta::Text) => {
                buf.push_str(&text);
                out.push(StreamChunk::TextDelta { index, text });
            }
            (Open::Reasoning { text: buf, part }, Delta::Summary | Delta::Content) => {
                let this = match kind {
                    Delta::Summary => (kind, event.summary_index),
                    _ => (kind, event.content_index),
                };
                let text = if *part != Some(this) && !buf.is_empty() {
                    format!("\n\n{text}")
                } else {
                    text
                };
                *part = Some(this);
                buf.push_str(&text);
                out.push(StreamChunk::ReasoningDelta { index, text });
            }
            (Open::Tool { args, .. }, Delta::Arguments) => {
                args.push_str(&text);
                out.push(StreamChunk::ToolCallDelta {
                    index,
                    id: None,
                    name: None,
                    arguments_delta: text,
                });
            }
            (_, _) => {
                return Err(malformed(format!(
                    "a delta that does not match output item {wire}'s type"
                )));
            }
        }
        Ok(())
    }

    fn item_done(
        &mut self,
        wire: u64,
        item: WireItem,
        out: &mut Vec<StreamChunk>,
    ) -> Result<(), ModelFailure> {
        if self.skipped.contains(&wire) {
            return Ok(());
        }
        let Some((index, open)) = self.open.remove(&wire) else {
            return Err(malformed(format!(
                "response.output_item.done for item {wire}, which is not open"
            )));
        };
        let block = match open {
            // The text as streamed; the item's own when nothing was.
            Open::Text(text) => ContentBlock::Text {
                text: if text.is_empty() {
                    joined(item.content, "")
                } else {
                    text
                },
            },
            Open::Reasoning { text, .. } => {
                let text = if !text.is_empty() {
                    text
                } else {
                    match joined(item.summary, "\n\n") {
                        summary if summary.is_empty() => joined(item.content, "\n\n"),
                        summary => summary,
                    }
                };
                ContentBlock::Reasoning {
                    text,
                    signature: item.encrypted_content.filter(|s| !s.is_empty()),
                }
            }
            Open::Tool { id, name, args } => {
                let args = item.arguments.filter(|a| !a.is_empty()).unwrap_or(args);
                self.tools.push((
                    index,
                    ToolCallBlock {
                        id,
                        name: item.name.filter(|n| !n.is_empty()).unwrap_or(name),
                        arguments: if args.is_empty() { "{}".into() } else { args },
                    },
                ));
                return Ok(());
            }
        };
        out.push(StreamChunk::BlockEnd { index, block });
        Ok(())
    }

    /// Ends the response (`incomplete`: a `response.incomplete`).
    fn finish(
        &mut self,
        incomplete: bool,
        response: WireResponse,
        out: &mut Vec<StreamChunk>,
    ) -> Result<(), ModelFailure> {
        self.done = true;
        let details = response.incomplete_details.and_then(|d| d.reason);
        let reason = match details.as_deref() {
            _ if !incomplete && self.called => FinishReason::ToolCalls,
            _ if !incomplete => FinishReason::Stop,
            Some("max_output_tokens") => FinishReason::MaxTokens,
            other => FinishReason::Error {
                code: other.unwrap_or("incomplete").to_ascii_uppercase(),
            },
        };
        if self.next_index == 0 && matches!(reason, FinishReason::Stop | FinishReason::ToolCalls) {
            return Err(ModelFailure::new(
                FailureCode::EmptyResponse,
                "the model finished without streaming any text, reasoning or tool call",
            ));
        }
        // Items the wire never closed: text and reasoning as streamed, tool calls with their
        // arguments so far (dropped below after max-tokens).
        let mut closing: Vec<(u32, ContentBlock)> = std::mem::take(&mut self.open)
            .into_values()
            .map(|(index, open)| {
                let block = match open {
                    Open::Text(text) => ContentBlock::Text { text },
                    Open::Reasoning { text, .. } => ContentBlock::reasoning(text),
                    Open::Tool { id, name, args } => ContentBlock::ToolCall(ToolCallBlock {
                        id,
                        name,
                        arguments: if args.is_empty() { "{}".into() } else { args },
                    }),
                };
                (index, block)
            })
            .collect();
        closing.extend(
            std::mem::take(&mut self.tools)
                .into_iter()
                .map(|(index, call)| (index, ContentBlock::ToolCall(call))),
        );
        closing.sort_by_key(|(index, _)| *index);
        for (index, block) in closing {
            if reason == FinishReason::MaxTokens && matches!(block, ContentBlock::ToolCall(_)) {
                continue;
            }
            out.push(StreamChunk::BlockEnd { index, block });
        }
        if let Some(usage) = response.usage {
            out.push(StreamChunk::Usage {
                usage: usage.to_usage(),
            });
        }
        out.push(StreamChunk::Finish { reason });
        Ok(())
    }
}

/// What a delta event streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Delta {
    Text,
    Summary,
    Content,
    Arguments,
}

#[cfg(test)]
#[path = "responses_tests.rs"]
mod tests;
