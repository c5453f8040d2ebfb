//! The one streaming primitive every provider produces, and what a model call can end with.

use crate::message::ContentBlock;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Kind of a streamed content block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BlockType {
    /// Visible text.
    Text,
    /// Reasoning.
    Reasoning,
    /// A tool call.
    ToolCall,
}

/// One chunk of a model stream. Invariants (checked by the block assembler): a block's deltas
/// come between its `block-start` and `block-end`; `usage` comes before `finish`; nothing comes
/// after `finish`; tool arguments stay raw strings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum StreamChunk {
    /// A new block begins at `index`.
    #[serde(rename_all = "camelCase")]
    BlockStart {
        /// Block index in the message.
        index: u32,
        /// Kind of block.
        block_type: BlockType,
        /// Tool call id (tool-call blocks, when known at start).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// Tool name (tool-call blocks, when known at start).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
    /// Text appended to a text block.
    TextDelta {
        /// Block index.
        index: u32,
        /// Appended text.
        text: String,
    },
    /// Text appended to a reasoning block.
    ReasoningDelta {
        /// Block index.
        index: u32,
        /// Appended text.
        text: String,
    },
    /// A fragment of a tool call's raw argument string.
    #[serde(rename_all = "camelCase")]
    ToolCallDelta {
        /// Block index.
        index: u32,
        /// Call id (first fragment only, if not given at block start).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// Tool name (first fragment only, if not given at block start).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        /// Raw argument fragment.
        #[serde(default)]
        arguments_delta: String,
    },
    /// A block is complete; `block` is its final value.
    BlockEnd {
        /// Block index.
        index: u32,
        /// The assembled block.
        block: ContentBlock,
    },
    /// Token usage of the call.
    Usage {
        /// Usage figures.
        usage: TokenUsage,
    },
    /// The stream is finished.
    Finish {
        /// Why.
        reason: FinishReason,
    },
}

/// Why a model response ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum FinishReason {
    /// Natural end of the answer.
    Stop,
    /// The model asked for tool calls.
    ToolCalls,
    /// The output token limit was hit (incomplete tool calls are dropped).
    MaxTokens,
    /// The provider ended the response with another reason.
    Error {
        /// Upper-cased provider reason, e.g. `CONTENT_FILTER`.
        code: String,
    },
}

/// Token usage with disjoint buckets: `input_tokens` excludes cache hits, which are in
/// `cache_read_tokens`; `reasoning_tokens` is part of the output the provider reported separately.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenUsage {
    /// Uncached prompt tokens.
    #[serde(default)]
    pub input_tokens: u64,
    /// Output tokens (visible + reasoning, as the provider counts them).
    #[serde(default)]
    pub output_tokens: u64,
    /// Prompt tokens served from the provider's cache.
    #[serde(default)]
    pub cache_read_tokens: u64,
    /// Reasoning tokens, when the provider reports them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reasoning_tokens: u64,
    /// Of the uncached prompt tokens, those written to the provider's cache (the Messages API's
    /// `cache_creation_input_tokens`), when it reports them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl TokenUsage {
    /// Total prompt tokens (uncached + cached).
    pub fn prompt_tokens(&self) -> u64 {
        self.input_tokens + self.cache_read_tokens
    }
}

/// Classified cause of a failed model call.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FailureCode {
    /// 401/403: bad or missing credentials. Never retried.
    Auth,
    /// Balance or quota exhausted. Never retried.
    Quota,
    /// 429 other than quota. Retried.
    RateLimit,
    /// The request does not fit the model's context window. Compaction may help.
    ContextWindowExceeded,
    /// Other 400/413. Never retried.
    InvalidRequest,
    /// 5xx. Retried.
    Server,
    /// Connection failure. Retried.
    Transport,
    /// The stream stayed idle too long. Retried.
    Timeout,
    /// The stream ended without `[DONE]`. Retried.
    StreamClosed,
    /// The provider sent JSON keel cannot read.
    MalformedResponse,
    /// `stop` with nothing streamed.
    EmptyResponse,
    /// The caller cancelled.
    Aborted,
    /// Any other provider finish reason, upper-cased.
    Other(String),
}

impl FailureCode {
    /// Wire/log spelling, e.g. `RATE_LIMIT`.
    pub fn as_str(&self) -> &str {
        match self {
            FailureCode::Auth => "AUTH",
            FailureCode::Quota => "QUOTA",
            FailureCode::RateLimit => "RATE_LIMIT",
            FailureCode::ContextWindowExceeded => "CONTEXT_WINDOW_EXCEEDED",
            FailureCode::InvalidRequest => "INVALID_REQUEST",
            FailureCode::Server => "SERVER",
            FailureCode::Transport => "TRANSPORT",
            FailureCode::Timeout => "TIMEOUT",
            FailureCode::StreamClosed => "STREAM_CLOSED",
            FailureCode::MalformedResponse => "MALFORMED_RESPONSE",
            FailureCode::EmptyResponse => "EMPTY_RESPONSE",
            FailureCode::Aborted => "ABORTED",
            FailureCode::Other(s) => s,
        }
    }

    /// Parse a spelling produced by [`FailureCode::as_str`]; unknown spellings become `Other`.
    pub fn parse(s: &str) -> FailureCode {
        match s {
            "AUTH" => FailureCode::Auth,
            "QUOTA" => FailureCode::Quota,
            "RATE_LIMIT" => FailureCode::RateLimit,
            "CONTEXT_WINDOW_EXCEEDED" => FailureCode::ContextWindowExceeded,
            "INVALID_REQUEST" => FailureCode::InvalidRequest,
            "SERVER" => FailureCode::Server,
            "TRANSPORT" => FailureCode::Transport,
            "TIMEOUT" => FailureCode::Timeout,
            "STREAM_CLOSED" => FailureCode::StreamClosed,
            "MALFORMED_RESPONSE" => FailureCode::MalformedResponse,
            "EMPTY_RESPONSE" => FailureCode::EmptyResponse,
            "ABORTED" => FailureCode::Aborted,
            other => FailureCode::Other(other.to_owned()),
        }
    }
}

impl fmt::Display for FailureCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for FailureCode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for FailureCode {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = std::borrow::Cow::<'de, str>::deserialize(d)?;
        Ok(FailureCode::parse(&s))
    }
}

/// A failed model call, as logged and as returned by providers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelFailure {
    /// Classification.
    pub code: FailureCode,
    /// Human-readable detail (never contains credentials).
    pub message: String,
    /// HTTP status, when there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Server-requested delay before retrying, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
    /// Provider request id, for support.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

impl ModelFailure {
    /// A failure with a code and message.
    pub fn new(code: FailureCode, message: impl Into<String>) -> Self {
        ModelFailure {
            code,
            message: message.into(),
            status: None,
            retry_after_ms: None,
            request_id: None,
        }
    }
}

impl ModelFailure {
    /// The message without the code: the HTTP status when the message does not already name it
    /// (`(HTTP 400)`), then the provider's request id. This is what a `turn/end` error records
    /// beside its code.
    pub fn detail(&self) -> String {
        let mut out = self.message.clone();
        if let Some(status) = self.status
            && !self.message.contains(&format!("HTTP {status}"))
        {
            out.push_str(&format!(" (HTTP {status})"));
        }
        if let Some(id) = &self.request_id {
            out.push_str(&format!(" [request {id}]"));
        }
        out
    }
}

impl fmt::Display for ModelFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.detail())
    }
}

impl std::error::Error for ModelFailure {}
