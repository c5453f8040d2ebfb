//! The token meter: a fast estimate of a request's prompt tokens, calibrated by what the
//! provider last reported.
//!
//! The raw estimate counts bytes (about four per token for English and code) with a small
//! per-message and per-tool-block overhead for the wire framing, and only the parts the wire
//! carries: text, tool calls, tool results, and reasoning only on assistant messages with tool
//! calls (DeepSeek gets `reasoning_content` back inside a tool-call loop only). It never walks a
//! string's characters, so it costs O(blocks).
//!
//! A [`Calibration`] turns raw estimates into tokens: the factor is the prompt tokens the
//! provider reported for a request (uncached + cache-read, from the `usage` of the
//! `assistant/message` it produced) divided by the raw estimate of that same request, clamped
//! to [`Calibration::MIN`]..=[`Calibration::MAX`].

use keel_llm::ChatRequest;
use keel_protocol::{ContentBlock, Message, Role, ToolSchema};

/// Bytes per token of the raw estimate.
pub const BYTES_PER_TOKEN: u64 = 4;
/// Wire framing of one message (role, braces), in bytes.
const MESSAGE_OVERHEAD_BYTES: u64 = 16;
/// Wire framing of one tool call or tool result (ids, type tags), in bytes.
const TOOL_BLOCK_OVERHEAD_BYTES: u64 = 32;
/// Raw tokens counted for an image reference.
const IMAGE_TOKENS: u64 = 1_000;

/// Raw tokens of `text`.
pub fn text_tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(BYTES_PER_TOKEN)
}

/// Raw tokens of one message as the wire carries it.
pub fn message_tokens(message: &Message) -> u64 {
    let mut bytes = MESSAGE_OVERHEAD_BYTES;
    let mut images = 0u64;
    let send_reasoning =
        message.role == Role::Assistant && message.content.iter().any(is_tool_call);
    for block in &message.content {
        match block {
            ContentBlock::Text { text } => bytes += text.len() as u64,
            ContentBlock::Reasoning { text, .. } if send_reasoning => bytes += text.len() as u64,
            ContentBlock::Reasoning { .. } => {}
            ContentBlock::Image(_) => images += 1,
            ContentBlock::ToolCall(c) => {
                bytes += TOOL_BLOCK_OVERHEAD_BYTES
                    + (c.id.len() + c.name.len() + c.arguments.len()) as u64;
            }
            ContentBlock::ToolResult(r) => {
                bytes += TOOL_BLOCK_OVERHEAD_BYTES + r.tool_call_id.len() as u64;
                for inner in &r.content {
                    match inner {
                        ContentBlock::Text { text } | ContentBlock::Reasoning { text, .. } => {
                            bytes += text.len() as u64
                        }
                        ContentBlock::Image(_) => images += 1,
                        _ => bytes += TOOL_BLOCK_OVERHEAD_BYTES,
                    }
                }
            }
        }
    }
    bytes.div_ceil(BYTES_PER_TOKEN) + images * IMAGE_TOKENS
}

fn is_tool_call(b: &ContentBlock) -> bool {
    matches!(b, ContentBlock::ToolCall(_))
}

/// Raw tokens of the tool schemas as serialised in a request.
pub fn tools_tokens(tools: &[ToolSchema]) -> u64 {
    let bytes = serde_json::to_vec(tools).map(|v| v.len()).unwrap_or(0) as u64;
    bytes.div_ceil(BYTES_PER_TOKEN)
}

/// Raw tokens of the parts of a request that are not history: system prompt and tools.
pub fn base_tokens(system: &str, tools: &[ToolSchema]) -> u64 {
    text_tokens(system) + tools_tokens(tools)
}

/// Raw tokens of a whole request.
pub fn request_tokens(request: &ChatRequest) -> u64 {
    base_tokens(&request.system, &request.tools)
        + request.messages.iter().map(message_tokens).sum::<u64>()
}

/// Converts raw estimates to calibrated tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Calibration {
    /// Provider tokens per raw token.
    pub factor: f64,
}

impl Default for Calibration {
    fn default() -> Self {
        Calibration::IDENTITY
    }
}

impl Calibration {
    /// No correction (nothing reported yet).
    pub const IDENTITY: Calibration = Calibration { factor: 1.0 };
    /// Smallest factor accepted.
    pub const MIN: f64 = 0.5;
    /// Largest factor accepted.
    pub const MAX: f64 = 3.0;

    /// The factor for a request whose raw estimate was `raw` and for which the provider
    /// reported `reported` prompt tokens; identity when either is zero.
    pub fn from_report(reported: u64, raw: u64) -> Calibration {
        if reported == 0 || raw == 0 {
            return Calibration::IDENTITY;
        }
        Calibration {
            factor: (reported as f64 / raw as f64).clamp(Self::MIN, Self::MAX),
        }
    }

    /// Calibrated tokens of a raw estimate.
    pub fn tokens(self, raw: u64) -> u64 {
        (raw as f64 * self.factor).ceil() as u64
    }

    /// The raw estimate that calibrates to `tokens`.
    pub fn raw(self, tokens: u64) -> u64 {
        (tokens as f64 / self.factor).floor() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_protocol::{MessageSource, ToolCallBlock};

    #[test]
    fn counts_what_the_wire_carries() {
        let text = Message::user_text("x".repeat(400), MessageSource::user(), "u");
        assert_eq!(message_tokens(&text), 104);
        let reasoning_only = Message {
            role: Role::Assistant,
            content: vec![
                ContentBlock::reasoning("r".repeat(4000)),
                ContentBlock::text("ok"),
            ],
            source: MessageSource::model("p", "m"),
            id: "a".into(),
        };
        assert_eq!(message_tokens(&reasoning_only), 5);
        let mut with_call = reasoning_only.clone();
        with_call
            .content
            .push(ContentBlock::ToolCall(ToolCallBlock {
                id: "c".into(),
                name: "read".into(),
                arguments: "{}".into(),
            }));
        assert_eq!(
            message_tokens(&with_call),
            (16 + 4000 + 2 + 32 + 1 + 4 + 2u64).div_ceil(4)
        );
    }

    #[test]
    fn calibration_is_clamped() {
        assert_eq!(Calibration::from_report(1200, 1000).tokens(1000), 1200);
        assert_eq!(
            Calibration::from_report(100_000, 1000).factor,
            Calibration::MAX
        );
        assert_eq!(Calibration::from_report(1, 1000).factor, Calibration::MIN);
        assert_eq!(Calibration::from_report(0, 1000), Calibration::IDENTITY);
        let c = Calibration::from_report(2000, 1000);
        assert_eq!(c.raw(c.tokens(777)), 777);
    }
}
