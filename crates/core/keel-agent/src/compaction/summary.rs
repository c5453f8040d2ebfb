//! The summary request and the model-visible text compaction injects.
//!
//! The summary request reuses the normal request's prefix so the provider's prompt cache hits:
//! the same system prompt, the **same tools** (DeepSeek's cache key covers the whole prompt
//! prefix, tools included, so dropping them would miss the cache), the same model and call
//! settings, and the surface messages of the span being summarised, followed by one user message
//! ([`SummaryInstruction`]) asking for the summary. The instruction forbids tool calls; if the
//! model makes some anyway they are ignored and only its text counts. Nothing of this call is
//! logged except the resulting [`SummaryMessage`] (it is not part of a step).

use crate::agent::Agent;
use keel_llm::ChatRequest;
use keel_protocol::{ContentBlock, KnownSource, Message, MessageSource, Role};
use serde_json::{Map, json};
use tokio_util::sync::CancellationToken;

/// Plugin id written in the source of compaction summaries.
pub(crate) const COMPACTION_PLUGIN: &str = super::ID.source();

/// The user message that closes the summary request.
#[derive(Debug, Clone, Copy)]
pub struct SummaryInstruction;

impl SummaryInstruction {
    /// Its text.
    pub const TEXT: &'static str = "Context compaction: the conversation above is about to be \
replaced by your summary of it, and work will continue from that summary alone. Write the \
summary now. Include: the user's goals and requests (quote their exact words where they \
matter); the current state of the task; decisions taken and why; files read, created or changed \
(with paths) and commands run, with the results that matter; errors met and how they were \
resolved; open items and the next steps. Be specific and concise. Do not call any tool; answer \
with the summary text only.";

    /// As a message (never logged).
    pub fn message() -> Message {
        Message::user_text(
            Self::TEXT,
            MessageSource::plugin(COMPACTION_PLUGIN),
            uuid::Uuid::new_v4().to_string(),
        )
    }
}

/// The summary that replaces a span on the surface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryMessage {
    text: String,
}

impl SummaryMessage {
    /// First line of every summary.
    pub const PREAMBLE: &'static str = "[Compacted history] The earlier part of this \
conversation was replaced by this summary to save context:";
    /// Appended when the summary was cut to its cap.
    pub const TRUNCATED: &'static str = "\n[summary truncated]";

    /// A summary of at most `max_bytes` bytes of `summary` (cut on a character boundary).
    pub fn new(summary: &str, max_bytes: usize) -> SummaryMessage {
        let summary = summary.trim();
        let mut text = format!("{}\n\n", Self::PREAMBLE);
        if summary.len() <= max_bytes {
            text.push_str(summary);
        } else {
            let cut = summary.floor_char_boundary(max_bytes);
            text.push_str(&summary[..cut]);
            text.push_str(Self::TRUNCATED);
        }
        SummaryMessage { text }
    }

    /// Heading of the current turn's prompts carried word for word by a summary that had to
    /// cover them.
    pub const KEPT: &'static str = "The user's request in the current turn, word for word:";

    /// This summary followed by `prompts` (the current turn's human messages it replaces),
    /// verbatim: a prompt is never summarised away. No prompts, no change.
    pub fn keeping(mut self, prompts: &[String]) -> SummaryMessage {
        if prompts.is_empty() {
            return self;
        }
        self.text.push_str("\n\n");
        self.text.push_str(Self::KEPT);
        for p in prompts {
            self.text.push_str("\n\n");
            self.text.push_str(p);
        }
        self
    }

    /// The text the model will see.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The `user/message` to log (source plugin `keel/compaction`, form `summary`).
    pub fn into_message(self) -> Message {
        let mut extra = Map::new();
        extra.insert("form".into(), json!("summary"));
        Message {
            role: Role::User,
            content: vec![ContentBlock::text(self.text)],
            source: MessageSource::Known(KnownSource::Plugin {
                plugin: COMPACTION_PLUGIN.into(),
                extra,
            }),
            id: uuid::Uuid::new_v4().to_string(),
        }
    }
}

/// The summary request for `prefix` (the span's messages, in surface order).
pub(crate) fn summary_request(agent: &Agent, prefix: Vec<Message>, max_tokens: u64) -> ChatRequest {
    let cfg = agent.config();
    let mut messages = prefix;
    messages.push(SummaryInstruction::message());
    ChatRequest {
        model: cfg.model.clone(),
        system: agent.system_prompt(),
        messages,
        tools: agent.pipeline().offered_schemas(),
        max_tokens: Some(max_tokens),
        thinking: cfg.thinking,
        reasoning_effort: cfg.reasoning_effort.clone(),
        temperature: cfg.temperature,
        stop: Vec::new(),
    }
}

/// Why a summary request gave no summary.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SummaryError {
    /// The model answered without text.
    #[error("the summary response had no text")]
    NoText,
    /// The model call failed.
    #[error("{0}")]
    Model(keel_protocol::ModelFailure),
}

/// Send the summary request on the agent's provider; the summary text, or why there is none.
pub(crate) async fn request_summary(
    agent: &Agent,
    mut request: ChatRequest,
) -> Result<String, SummaryError> {
    let info = agent.config().model_info;
    crate::images::resolve_images(&mut request, &info, agent.attachments().as_ref());
    let stream = agent.provider().stream(request, CancellationToken::new());
    match keel_llm::assemble(stream, |_| {}).await {
        Ok(assembled) => {
            let text = keel_protocol::text_of(&assembled.content);
            if text.trim().is_empty() {
                Err(SummaryError::NoText)
            } else {
                Ok(text)
            }
        }
        Err(interrupted) => Err(SummaryError::Model(interrupted.failure)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_is_capped_on_a_char_boundary() {
        let s = SummaryMessage::new("  ééé  ", 3);
        let expected = format!(
            "{}\n\né{}",
            SummaryMessage::PREAMBLE,
            SummaryMessage::TRUNCATED
        );
        assert_eq!(s.text(), expected);
        let m = SummaryMessage::new("state: done", 100).into_message();
        assert_eq!(m.source.plugin_id(), Some(COMPACTION_PLUGIN));
        assert!(m.text().ends_with("\n\nstate: done"));
    }

    #[test]
    fn a_summary_keeps_the_turns_prompts_word_for_word() {
        let s = SummaryMessage::new("did things", 100).keeping(&["fix the bug in a.rs".into()]);
        assert_eq!(
            s.text(),
            format!(
                "{}\n\ndid things\n\n{}\n\nfix the bug in a.rs",
                SummaryMessage::PREAMBLE,
                SummaryMessage::KEPT
            )
        );
        assert_eq!(
            SummaryMessage::new("x", 100).keeping(&[]),
            SummaryMessage::new("x", 100)
        );
    }
}
