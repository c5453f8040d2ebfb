//! The provider-neutral request ([`ChatRequest`]) and its exact chat-completions wire body.
//!
//! The body mirrors DeepSeek Harness's requests field for field and in the same key order:
//! `model, messages, stream, stream_options, thinking, reasoning_effort, tools, max_tokens`, then
//! `temperature` and `stop` when set. Serialisation is deterministic (same request and model info
//! → same bytes), which keeps prompts prefix-stable for DeepSeek's prompt cache and lets callers
//! snapshot bodies.
//!
//! Message mapping: the system prompt becomes a `system` message; a user message with a single
//! text block is sent as a plain string (several blocks as content parts); each tool result
//! becomes its own `tool` message (`(no output)` when empty), placed before any text of the same
//! message; an assistant message sends its text as `content` (`""` when none), its tool calls as
//! `tool_calls` with raw argument strings, and — when it has tool calls and the model reasons —
//! its reasoning as `reasoning_content`, which DeepSeek requires back inside a tool-call loop.
//!
//! Images go out as `image_url` parts of a user message, and only to models whose catalogue
//! entry has vision ([`ModelInfo::vision`]); for other models an image in a user message is sent
//! as the text [`IMAGE_NOT_SHOWN`]. The LLM layer does no file I/O: an [`ImageRef`]'s `uri` is
//! sent as it is, so the caller resolves references to `data:` URLs before sending (keel-agent
//! does). OpenAI's `tool` messages are text only, so an image a tool returned follows the
//! run of `tool` messages it belongs to (a step's results are separate messages, and nothing may
//! come between them) as an image part of a `user` message, which the next user text joins; the
//! result's text says what the image is. To a model without vision it is not sent at all.
//!
//! No two `user` messages are ever sent in a row: a user message that follows another (the
//! runtime context and the prompt, a compaction summary and the next prompt) is appended to it,
//! texts joined by a blank line ([`USER_JOIN`]), parts concatenated. Strict chat templates
//! (Gemma's "Conversation roles must alternate") reject consecutive user turns. Since history
//! only grows at the end and merging only appends to the last user message, a message once sent
//! keeps its bytes as a prefix in every later body (only a text message later joined by an image
//! changes form, from a string to parts).
//!
//! Reasoning settings go out only to models that take them ([`sent_reasoning`]): `thinking` to
//! reasoning models, `reasoning_effort` to models with effort levels and not with thinking off.

use crate::catalogue::ModelInfo;
use keel_protocol::{ContentBlock, ImageRef, Message, Role, ToolSchema};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// Text sent for a tool result with no text content.
pub const NO_OUTPUT: &str = "(no output)";

/// What a model without vision is sent in place of an image of a user message.
pub const IMAGE_NOT_SHOWN: &str = "[image not shown: this model does not read images]";

/// What separates the texts of consecutive user messages merged into one wire message.
pub const USER_JOIN: &str = "\n\n";

/// One model call, independent of any provider's wire format.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ChatRequest {
    /// Model name, e.g. `deepseek-v4-flash`.
    pub model: String,
    /// System prompt (omitted from the body when empty).
    pub system: String,
    /// History, oldest first.
    pub messages: Vec<Message>,
    /// Tools offered to the model, in the order given.
    pub tools: Vec<ToolSchema>,
    /// Output budget; the model's default when `None`, and never above the model's maximum.
    pub max_tokens: Option<u64>,
    /// Thinking on/off, sent only to models that support it.
    pub thinking: Option<bool>,
    /// Reasoning effort (`low`, `medium`, `high`…), sent only to models that support it and only
    /// when thinking is not switched off.
    pub reasoning_effort: Option<String>,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Stop sequences.
    pub stop: Vec<String>,
}

/// The reasoning settings a request carries on the wire for a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SentReasoning<'a> {
    /// `thinking`: sent to reasoning models only.
    pub thinking: Option<bool>,
    /// `reasoning_effort`: sent to models with effort levels, unless thinking is off.
    pub effort: Option<&'a str>,
}

/// What of `thinking` and `effort` goes out to a model described by `info` (what the session
/// log's `request/header` records, too).
pub fn sent_reasoning<'a>(
    thinking: Option<bool>,
    effort: Option<&'a str>,
    info: &ModelInfo,
) -> SentReasoning<'a> {
    SentReasoning {
        thinking: thinking.filter(|_| info.reasoning),
        effort: effort.filter(|e| info.effort && thinking != Some(false) && !e.is_empty()),
    }
}

#[derive(Serialize)]
struct WireRequest<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    stream: bool,
    stream_options: StreamOptions,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<Thinking>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_effort: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    max_tokens: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    stop: &'a [String],
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
struct Thinking {
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum WireMessage<'a> {
    System {
        content: &'a str,
    },
    User {
        content: UserContent<'a>,
    },
    Assistant {
        content: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        reasoning_content: Option<String>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireToolCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: String,
    },
}

#[derive(Serialize)]
#[serde(untagged)]
enum UserContent<'a> {
    Text(Cow<'a, str>),
    Parts(Vec<ContentPart<'a>>),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ContentPart<'a> {
    Text { text: Cow<'a, str> },
    ImageUrl { image_url: ImageUrl<'a> },
}

#[derive(Serialize)]
struct ImageUrl<'a> {
    url: &'a str,
}

#[derive(Serialize)]
struct WireToolCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunctionCall<'a>,
}

#[derive(Serialize)]
struct WireFunctionCall<'a> {
    name: &'a str,
    arguments: &'a str,
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a serde_json::Value,
}

/// The exact JSON body keel sends for `request` to a model described by `info`.
pub fn request_body(request: &ChatRequest, info: &ModelInfo) -> serde_json::Value {
    // A `WireRequest` holds only strings, numbers, bools and already-valid JSON values, so
    // conversion cannot fail; `Null` is an unreachable fallback rather than a panic.
    serde_json::to_value(wire_request(request, info)).unwrap_or(serde_json::Value::Null)
}

/// The exact bytes keel sends for `request` to a model described by `info` (same content as
/// [`request_body`], keys in dsh's order).
pub fn request_body_bytes(request: &ChatRequest, info: &ModelInfo) -> Vec<u8> {
    serde_json::to_vec(&wire_request(request, info)).unwrap_or_default()
}

fn wire_request<'a>(request: &'a ChatRequest, info: &ModelInfo) -> WireRequest<'a> {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if !request.system.is_empty() {
        messages.push(WireMessage::System {
            content: &request.system,
        });
    }
    // Images tool results returned, waiting for the end of the run of `tool` messages.
    let mut tool_images = Vec::new();
    for message in &request.messages {
        map_message(message, info, &mut tool_images, &mut messages);
    }
    push_user(tool_images, &mut messages);
    let sent = sent_reasoning(request.thinking, request.reasoning_effort.as_deref(), info);
    let thinking = sent.thinking.map(|on| Thinking {
        kind: if on { "enabled" } else { "disabled" },
    });
    let reasoning_effort = sent.effort;
    let max_tokens = request
        .max_tokens
        .unwrap_or(info.max_output)
        .min(info.max_output);
    WireRequest {
        model: &request.model,
        messages,
        stream: true,
        stream_options: StreamOptions {
            include_usage: true,
        },
        thinking,
        reasoning_effort,
        tools: request
            .tools
            .iter()
            .map(|t| WireTool {
                kind: "function",
                function: WireFunction {
                    name: &t.name,
                    description: &t.description,
                    parameters: &t.parameters,
                },
            })
            .collect(),
        max_tokens,
        temperature: request.temperature.filter(|t| t.is_finite()),
        stop: &request.stop,
    }
}

fn map_message<'a>(
    message: &'a Message,
    info: &ModelInfo,
    tool_images: &mut Vec<ContentPart<'a>>,
    out: &mut Vec<WireMessage<'a>>,
) {
    match message.role {
        Role::User => map_user(message, info, tool_images, out),
        Role::Assistant => {
            let mut content = String::new();
            let mut reasoning = String::new();
            let mut tool_calls = Vec::new();
            for block in &message.content {
                match block {
                    ContentBlock::Text { text } => content.push_str(text),
                    ContentBlock::Reasoning { text, .. } => reasoning.push_str(text),
                    ContentBlock::ToolCall(call) => tool_calls.push(WireToolCall {
                        id: &call.id,
                        kind: "function",
                        function: WireFunctionCall {
                            name: &call.name,
                            arguments: if call.arguments.is_empty() {
                                "{}"
                            } else {
                                &call.arguments
                            },
                        },
                    }),
                    ContentBlock::Image(_) | ContentBlock::ToolResult(_) => {}
                }
            }
            if content.is_empty() && tool_calls.is_empty() {
                return; // nothing the model can be shown (e.g. an interrupted reply)
            }
            push_user(std::mem::take(tool_images), out);
            let reasoning_content =
                (info.reasoning && !tool_calls.is_empty() && !reasoning.is_empty())
                    .then_some(reasoning);
            out.push(WireMessage::Assistant {
                content,
                reasoning_content,
                tool_calls,
            });
        }
    }
}

fn image_part<'a>(image: &'a ImageRef) -> ContentPart<'a> {
    ContentPart::ImageUrl {
        image_url: ImageUrl { url: &image.uri },
    }
}

/// Maps a user message: its tool results to `tool` messages (their images wait in
/// `tool_images` until the run of `tool` messages ends: several results of one step are
/// separate messages, and no `user` message may come between them), the rest to a user message.
fn map_user<'a>(
    message: &'a Message,
    info: &ModelInfo,
    tool_images: &mut Vec<ContentPart<'a>>,
    out: &mut Vec<WireMessage<'a>>,
) {
    let mut parts = Vec::new();
    for block in &message.content {
        match block {
            ContentBlock::ToolResult(result) => {
                let text = result.text();
                out.push(WireMessage::Tool {
                    tool_call_id: &result.tool_call_id,
                    content: if text.is_empty() {
                        NO_OUTPUT.to_owned()
                    } else {
                        text
                    },
                });
                if info.vision {
                    tool_images.extend(result.content.iter().filter_map(|b| match b {
                        ContentBlock::Image(image) => Some(image_part(image)),
                        _ => None,
                    }));
                }
            }
            ContentBlock::Text { text } => parts.push(ContentPart::Text {
                text: Cow::Borrowed(text),
            }),
            ContentBlock::Image(image) if info.vision => parts.push(image_part(image)),
            ContentBlock::Image(_) => parts.push(ContentPart::Text {
                text: Cow::Borrowed(IMAGE_NOT_SHOWN),
            }),
            ContentBlock::Reasoning { .. } | ContentBlock::ToolCall(_) => {}
        }
    }
    if parts.is_empty() {
        return;
    }
    push_user(std::mem::take(tool_images), out);
    push_user(parts, out);
}

/// Sends `parts` as a user message, appended to the last message when that is a user message.
fn push_user<'a>(parts: Vec<ContentPart<'a>>, out: &mut Vec<WireMessage<'a>>) {
    if parts.is_empty() {
        return;
    }
    // Two user messages in a row (the runtime context and the prompt, a compaction summary and
    // the next prompt, queued inputs) go out as one: strict chat templates reject consecutive
    // user turns. Only ever appending to the last user message keeps every byte sent before.
    if let Some(WireMessage::User { content: previous }) = out.last_mut() {
        let joined = match std::mem::replace(previous, UserContent::Parts(Vec::new())) {
            UserContent::Text(before) => match parts.as_slice() {
                [ContentPart::Text { text }] => {
                    UserContent::Text(Cow::Owned(format!("{before}{USER_JOIN}{text}")))
                }
                _ => {
                    let mut all = vec![ContentPart::Text { text: before }];
                    all.extend(parts);
                    UserContent::Parts(all)
                }
            },
            UserContent::Parts(mut all) => {
                all.extend(parts);
                UserContent::Parts(all)
            }
        };
        *previous = joined;
        return;
    }
    let content = match <[ContentPart<'_>; 1]>::try_from(parts) {
        Ok([ContentPart::Text { text }]) => UserContent::Text(text),
        Ok([part]) => UserContent::Parts(vec![part]),
        Err(parts) => UserContent::Parts(parts),
    };
    out.push(WireMessage::User { content });
}

#[cfg(test)]
#[path = "request_tests.rs"]
mod tests;
