//! Messages and their content blocks, as they appear in the session log and in derived history.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Who speaks a message. Tool results travel as `user` messages holding `tool-result` blocks,
/// exactly as in DeepSeek Harness's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The human, the host (runtime context, summaries) or a tool result.
    User,
    /// The model.
    Assistant,
}

/// One message of history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Speaker.
    pub role: Role,
    /// Ordered content blocks.
    pub content: Vec<ContentBlock>,
    /// Where the message came from.
    pub source: MessageSource,
    /// Stable message id (a UUID for messages keel creates).
    pub id: String,
}

impl Message {
    /// A user message with one text block.
    pub fn user_text(
        text: impl Into<String>,
        source: MessageSource,
        id: impl Into<String>,
    ) -> Self {
        Message {
            role: Role::User,
            content: vec![ContentBlock::Text { text: text.into() }],
            source,
            id: id.into(),
        }
    }

    /// Concatenated text of the `text` blocks (reasoning and tool blocks excluded).
    pub fn text(&self) -> String {
        text_of(&self.content)
    }

    /// Concatenated text of the `reasoning` blocks.
    pub fn reasoning(&self) -> String {
        let mut out = String::new();
        for block in &self.content {
            if let ContentBlock::Reasoning { text, .. } = block {
                out.push_str(text);
            }
        }
        out
    }

    /// The tool calls this message proposes, in order.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCallBlock> {
        self.content.iter().filter_map(|b| match b {
            ContentBlock::ToolCall(c) => Some(c),
            _ => None,
        })
    }

    /// The tool results this message carries, in order.
    pub fn tool_results(&self) -> impl Iterator<Item = &ToolResultBlock> {
        self.content.iter().filter_map(|b| match b {
            ContentBlock::ToolResult(r) => Some(r),
            _ => None,
        })
    }

    /// True when the message has no content worth sending (an assistant message that streamed
    /// nothing). Such messages are skipped by `derive_messages`.
    pub fn is_empty(&self) -> bool {
        self.content.iter().all(|b| match b {
            ContentBlock::Text { text } => text.is_empty(),
            ContentBlock::Reasoning { text, signature } => text.is_empty() && signature.is_none(),
            _ => false,
        })
    }
}

/// A content block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum ContentBlock {
    /// Visible text.
    Text {
        /// The text.
        text: String,
    },
    /// Model reasoning (`reasoning_content` on the chat wire, a `thinking` block on the Messages
    /// wire, a `reasoning` item on the Responses wire).
    Reasoning {
        /// The reasoning text.
        text: String,
        /// What the provider requires back with the reasoning, unchanged: the Messages API's
        /// thinking `signature`, the Responses API's `encrypted_content`. Absent on the chat wire.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    /// A reference to an image (by path or URL), never inline bytes in the log.
    Image(ImageRef),
    /// A tool call proposed by the model.
    ToolCall(ToolCallBlock),
    /// The result of a tool call.
    ToolResult(ToolResultBlock),
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text { text: text.into() }
    }

    /// A reasoning block without a signature (what the chat wire streams).
    pub fn reasoning(text: impl Into<String>) -> Self {
        ContentBlock::Reasoning {
            text: text.into(),
            signature: None,
        }
    }
}

/// The concatenated text of the text blocks of `content` (other blocks are skipped).
pub fn text_of(content: &[ContentBlock]) -> String {
    let mut out = String::new();
    for block in content {
        if let ContentBlock::Text { text } = block {
            out.push_str(text);
        }
    }
    out
}

/// An image reference.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageRef {
    /// A file path or URL.
    pub uri: String,
    /// MIME type, e.g. `image/png`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
}

/// A tool call: the model's raw argument string is kept byte for byte.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCallBlock {
    /// Provider call id.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Raw JSON argument string as the model sent it (may be invalid JSON).
    pub arguments: String,
}

/// The result of one tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultBlock {
    /// The call this answers.
    pub tool_call_id: String,
    /// Model-facing content (text and image blocks).
    pub content: Vec<ContentBlock>,
    /// Whether the call failed.
    #[serde(default)]
    pub is_error: bool,
}

impl ToolResultBlock {
    /// Concatenated text of the result's text blocks.
    pub fn text(&self) -> String {
        text_of(&self.content)
    }
}

/// Where a message came from. Sources keel does not know are kept verbatim in [`MessageSource::Other`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MessageSource {
    /// A known source kind.
    Known(KnownSource),
    /// Any other source object, kept as written.
    Other(Value),
}

/// The source kinds keel writes and interprets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum KnownSource {
    /// Typed by the human.
    User,
    /// Produced by a model.
    Model {
        /// Provider name.
        provider: String,
        /// Model name.
        model: String,
    },
    /// A tool result for a call.
    Tool {
        /// The call id.
        #[serde(rename = "callId")]
        call_id: String,
    },
    /// Written by a host component or plugin (runtime context, compaction summary, hooks…).
    Plugin {
        /// Plugin id, e.g. `keel/runtime-context`.
        plugin: String,
        /// Any further fields (form, sections…), kept as written.
        #[serde(flatten)]
        extra: Map<String, Value>,
    },
}

impl MessageSource {
    /// `{"kind":"user"}`.
    pub fn user() -> Self {
        MessageSource::Known(KnownSource::User)
    }
    /// `{"kind":"model", provider, model}`.
    pub fn model(provider: impl Into<String>, model: impl Into<String>) -> Self {
        MessageSource::Known(KnownSource::Model {
            provider: provider.into(),
            model: model.into(),
        })
    }
    /// `{"kind":"tool","callId"}`.
    pub fn tool(call_id: impl Into<String>) -> Self {
        MessageSource::Known(KnownSource::Tool {
            call_id: call_id.into(),
        })
    }
    /// `{"kind":"plugin","plugin"}`.
    pub fn plugin(plugin: impl Into<String>) -> Self {
        MessageSource::Known(KnownSource::Plugin {
            plugin: plugin.into(),
            extra: Map::new(),
        })
    }
    /// True for messages a human typed.
    pub fn is_user(&self) -> bool {
        matches!(self, MessageSource::Known(KnownSource::User))
    }
    /// The plugin id for plugin-sourced messages.
    pub fn plugin_id(&self) -> Option<&str> {
        match self {
            MessageSource::Known(KnownSource::Plugin { plugin, .. }) => Some(plugin),
            _ => None,
        }
    }
}
