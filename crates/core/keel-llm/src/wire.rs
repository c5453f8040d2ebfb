//! The wire formats keel speaks, and the per-format pieces the one HTTP client switches on: the
//! path appended to a base URL, the request body, and the stream translator.
//!
//! - [`WireApi::Chat`]: chat completions (`POST {base}/chat/completions`), DeepSeek's native API
//!   and every OpenAI-compatible server ([`crate::request`], [`crate::translate`]);
//! - [`WireApi::Messages`]: the Messages API (`POST {base}/v1/messages`), DeepSeek's
//!   Anthropic-compatible endpoint and Anthropic ([`crate::messages`]);
//! - [`WireApi::Responses`]: OpenAI's Responses API (`POST {base}/responses`)
//!   ([`crate::responses`]).

use crate::catalogue::ModelInfo;
use crate::messages::{self, MessagesOptions, MessagesTranslator};
use crate::request::{ChatRequest, request_body_bytes};
use crate::responses::{self, ResponsesTranslator};
use crate::translate::{Progress, StreamTranslator};
use keel_protocol::{ModelFailure, StreamChunk};
use std::fmt;
use std::str::FromStr;

/// A wire format (`api = "chat" | "messages" | "responses"` in a provider's table).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum WireApi {
    /// OpenAI-compatible chat completions.
    #[default]
    Chat,
    /// The Messages API (Anthropic-compatible).
    Messages,
    /// OpenAI's Responses API.
    Responses,
}

/// A wire format name keel does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown API {0:?}: expected \"chat\", \"messages\" or \"responses\"")]
pub struct UnknownApi(pub String);

impl FromStr for WireApi {
    type Err = UnknownApi;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "chat" => Ok(WireApi::Chat),
            "messages" => Ok(WireApi::Messages),
            "responses" => Ok(WireApi::Responses),
            other => Err(UnknownApi(other.to_owned())),
        }
    }
}

impl fmt::Display for WireApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl WireApi {
    /// The name written in configuration.
    pub fn name(self) -> &'static str {
        match self {
            WireApi::Chat => "chat",
            WireApi::Messages => "messages",
            WireApi::Responses => "responses",
        }
    }

    /// The full endpoint for a base URL: the format's path appended unless the URL already ends
    /// with it (`/chat/completions`, `/v1/messages` — `/messages` after a base ending in `/v1` —,
    /// `/responses`). A query (`?api-version=…`, a gateway's `?token=…`) stays after the path.
    pub fn endpoint(self, base: &str) -> String {
        let base = base.trim();
        let (base, query) = base.split_at(base.find(['?', '#']).unwrap_or(base.len()));
        let trimmed = base.trim_end_matches('/');
        let suffix = match self {
            WireApi::Chat => "/chat/completions",
            WireApi::Messages if trimmed.ends_with("/v1") => "/messages",
            WireApi::Messages => "/v1/messages",
            WireApi::Responses => "/responses",
        };
        let done = match self {
            WireApi::Messages => trimmed.ends_with("/messages"),
            _ => trimmed.ends_with(suffix),
        };
        if done {
            format!("{trimmed}{query}")
        } else {
            format!("{trimmed}{suffix}{query}")
        }
    }

    /// The exact request bytes for `request` to a model described by `info`.
    pub fn body(self, request: &ChatRequest, info: &ModelInfo, options: WireOptions) -> Vec<u8> {
        match self {
            WireApi::Chat => request_body_bytes(request, info),
            WireApi::Messages => messages::body_bytes(request, info, options.messages),
            WireApi::Responses => responses::body_bytes(request, info),
        }
    }

    /// A fresh translator for one response of this format.
    pub fn translator(self) -> Translator {
        match self {
            WireApi::Chat => Translator::Chat(StreamTranslator::new()),
            WireApi::Messages => Translator::Messages(MessagesTranslator::new()),
            WireApi::Responses => Translator::Responses(ResponsesTranslator::new()),
        }
    }
}

/// Provider-level choices that shape request bodies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WireOptions {
    /// Messages-wire choices.
    pub messages: MessagesOptions,
}

/// One response's stream translator, whatever the format.
#[derive(Debug)]
pub enum Translator {
    /// Chat completions.
    Chat(StreamTranslator),
    /// The Messages API.
    Messages(MessagesTranslator),
    /// The Responses API.
    Responses(ResponsesTranslator),
}

impl Translator {
    /// Translates one SSE event's `data`, appending chunks to `out`.
    pub fn push(
        &mut self,
        data: &str,
        out: &mut Vec<StreamChunk>,
    ) -> Result<Progress, ModelFailure> {
        match self {
            Translator::Chat(t) => t.push(data, out),
            Translator::Messages(t) => t.push(data, out),
            Translator::Responses(t) => t.push(data, out),
        }
    }

    /// True once the stream's last event was handled.
    pub fn is_done(&self) -> bool {
        match self {
            Translator::Chat(t) => t.is_done(),
            Translator::Messages(t) => t.is_done(),
            Translator::Responses(t) => t.is_done(),
        }
    }

    /// The failure for a body that ended before the stream's last event.
    pub fn end_of_stream(&self) -> ModelFailure {
        match self {
            Translator::Chat(t) => t.end_of_stream(),
            Translator::Messages(t) => t.end_of_stream(),
            Translator::Responses(t) => t.end_of_stream(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_append_the_format_path_once() {
        let cases = [
            (
                WireApi::Chat,
                "https://api.deepseek.com",
                "https://api.deepseek.com/chat/completions",
            ),
            (
                WireApi::Chat,
                "http://h/v1/chat/completions/",
                "http://h/v1/chat/completions",
            ),
            (
                WireApi::Chat,
                "http://h/v1/?api-version=2&token=t",
                "http://h/v1/chat/completions?api-version=2&token=t",
            ),
            (
                WireApi::Messages,
                "http://h/v1/messages?token=t",
                "http://h/v1/messages?token=t",
            ),
            (
                WireApi::Messages,
                "https://api.deepseek.com/anthropic",
                "https://api.deepseek.com/anthropic/v1/messages",
            ),
            (
                WireApi::Messages,
                "https://api.anthropic.com/v1",
                "https://api.anthropic.com/v1/messages",
            ),
            (
                WireApi::Messages,
                "http://h/v1/messages",
                "http://h/v1/messages",
            ),
            (
                WireApi::Responses,
                "https://api.openai.com/v1",
                "https://api.openai.com/v1/responses",
            ),
            (
                WireApi::Responses,
                "http://h/v1/responses",
                "http://h/v1/responses",
            ),
        ];
        for (api, base, want) in cases {
            assert_eq!(api.endpoint(base), want, "{api} {base}");
        }
        assert_eq!("messages".parse::<WireApi>(), Ok(WireApi::Messages));
        let err = "anthropic".parse::<WireApi>().unwrap_err();
        assert!(err.to_string().contains("\"anthropic\""), "{err}");
    }
}
