//! How a [`ScriptedResponse`] goes on the wire: a [`Delivery`] plan of chat-completions stream
//! payloads (or an HTTP error, or a reset), plus a small prompt-cache simulation for usage.
//!
//! The mock server writes each payload as an SSE `data:` event; the scripted provider feeds the
//! same payloads straight to the client's [`crate::translate::StreamTranslator`], so both
//! behave exactly like the real client on the same script.

use crate::script::{Behaviour, ScriptedResponse};
use serde_json::{Value, json};
use std::time::Duration;

/// What to send for one request.
#[derive(Debug, Clone, PartialEq)]
pub enum Delivery {
    /// HTTP 200 with an event stream.
    Stream(StreamPlan),
    /// An HTTP error response.
    HttpError {
        /// Status code.
        status: u16,
        /// JSON error body.
        body: String,
        /// `Retry-After` in seconds.
        retry_after: Option<f64>,
    },
    /// Drop the connection without answering.
    ConnectionReset,
}

/// The payloads of a streamed response and how the stream misbehaves, if it does.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamPlan {
    /// `data:` payloads in order (the last is `[DONE]` for a complete stream).
    pub payloads: Vec<String>,
    /// Go silent before payload `after` for `duration` (forever when `None`).
    pub stall: Option<Stall>,
    /// After the payloads, drop the connection instead of ending the body cleanly.
    pub disconnect: bool,
    /// A pause before every payload (a model streaming at a steady rate), when set.
    pub pace: Option<Duration>,
}

/// A pause in a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stall {
    /// Index of the payload the pause comes before.
    pub after: usize,
    /// Length of the pause; `None` = until the connection is dropped.
    pub duration: Option<Duration>,
}

/// Prompt sizes for usage: tokens estimated as bytes / 4, cache hits as the common prefix with
/// the previous request in 64-token units (as DeepSeek's cache reports them).
#[derive(Debug, Clone, Default)]
pub struct PromptCacheSim {
    previous: Vec<u8>,
}

impl PromptCacheSim {
    /// Records a request body; returns `(prompt_tokens, cache_hit_tokens)`.
    pub fn observe(&mut self, body: &[u8]) -> (u64, u64) {
        let common = self
            .previous
            .iter()
            .zip(body)
            .take_while(|(a, b)| a == b)
            .count() as u64;
        self.previous.clear();
        self.previous.extend_from_slice(body);
        let prompt = (body.len() as u64).div_ceil(4);
        (prompt, (common / 4) / 64 * 64)
    }
}

fn split_chars(s: &str, size: usize) -> Vec<&str> {
    let size = size.max(1);
    let mut out = Vec::new();
    let mut start = 0;
    let mut count = 0;
    for (i, _) in s.char_indices() {
        if count == size {
            out.push(&s[start..i]);
            start = i;
            count = 0;
        }
        count += 1;
    }
    if start < s.len() {
        out.push(&s[start..]);
    }
    out
}

fn chunk(model: &str, n: usize, delta: Value, finish: Option<&str>) -> String {
    json!({
        "id": format!("mock-{n}"),
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    })
    .to_string()
}

fn error_body(message: &str, kind: &str) -> String {
    json!({"error": {"message": message, "type": kind, "param": null, "code": null}}).to_string()
}

/// Plans the delivery of `response`, the `n`-th (1-based) of its script, for a request to
/// `model` whose prompt is `(prompt_tokens, cache_hit_tokens)` unless the script says otherwise.
pub fn plan(response: &ScriptedResponse, n: usize, model: &str, prompt: (u64, u64)) -> Delivery {
    let message = |default: &str| {
        response
            .message
            .clone()
            .unwrap_or_else(|| default.to_owned())
    };
    let http = |status: u16, body: String| Delivery::HttpError {
        status,
        body: response.body.clone().unwrap_or(body),
        retry_after: None,
    };
    match response.behaviour {
        Behaviour::ConnectionReset => return Delivery::ConnectionReset,
        Behaviour::RateLimit => {
            return Delivery::HttpError {
                status: 429,
                body: response.body.clone().unwrap_or_else(|| {
                    error_body(
                        &message("Rate limit reached for requests"),
                        "rate_limit_error",
                    )
                }),
                retry_after: Some(response.retry_after.unwrap_or(1.0)),
            };
        }
        Behaviour::ServerError => {
            return http(
                500,
                error_body(&message("Internal server error"), "server_error"),
            );
        }
        Behaviour::Overloaded => {
            let body = json!({"type": "error", "error": {"type": "overloaded_error", "message": message("Overloaded")}});
            return http(529, body.to_string());
        }
        Behaviour::ContextOverflow => {
            return http(
                400,
                error_body(
                    &message(
                        "This model's maximum context length is 131072 tokens. However, you requested 140000 tokens (139000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.",
                    ),
                    "invalid_request_error",
                ),
            );
        }
        Behaviour::InvalidRequest => {
            return http(
                400,
                error_body(
                    &message(
                        "Invalid max_tokens value, the valid range of max_tokens is [1, 8192]",
                    ),
                    "invalid_request_error",
                ),
            );
        }
        Behaviour::QuotaExceeded => {
            return http(
                402,
                error_body(&message("Insufficient Balance"), "unknown_error"),
            );
        }
        Behaviour::AuthError => {
            return http(
                401,
                error_body(
                    &message("Authentication Fails, Your api key: ****test is invalid"),
                    "authentication_error",
                ),
            );
        }
        _ => {}
    }
    let size = response.chunk_size.unwrap_or(16);
    let arg_size = response.chunk_size.unwrap_or(8);
    let empty = response.behaviour == Behaviour::Empty;
    let mut content = Vec::new();
    let mut streamed_chars = 0usize;
    if !empty {
        for piece in split_chars(response.reasoning.as_deref().unwrap_or(""), size) {
            streamed_chars += piece.len();
            content.push(chunk(model, n, json!({"reasoning_content": piece}), None));
        }
        for piece in split_chars(response.text.as_deref().unwrap_or(""), size) {
            streamed_chars += piece.len();
            content.push(chunk(model, n, json!({"content": piece}), None));
        }
        for (i, call) in response.tool_calls.iter().enumerate() {
            let mut args = call.arguments.to_raw();
            if response.behaviour == Behaviour::MaxTokens {
                args.truncate(args.floor_char_boundary(args.len() / 2));
            }
            streamed_chars += args.len();
            let id = call.id.clone().unwrap_or_else(|| format!("call_{n}_{i}"));
            // The first fragment carries id, type and name; later ones only `index` + arguments.
            content.push(chunk(
                model,
                n,
                json!({"tool_calls": [{"index": i, "id": id, "type": "function", "function": {"name": call.name, "arguments": ""}}]}),
                None,
            ));
            for piece in split_chars(&args, arg_size) {
                content.push(chunk(
                    model,
                    n,
                    json!({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}),
                    None,
                ));
            }
        }
    }
    let finish = match (&response.finish, response.behaviour) {
        (Some(f), _) => f.clone(),
        (None, Behaviour::MaxTokens) => "length".to_owned(),
        (None, _) if !empty && !response.tool_calls.is_empty() => "tool_calls".to_owned(),
        (None, _) => "stop".to_owned(),
    };
    let usage = response.usage.unwrap_or_default();
    let prompt_tokens = usage.prompt.unwrap_or(prompt.0);
    let cache_hit = usage.cache_hit.unwrap_or(prompt.1).min(prompt_tokens);
    let reasoning_tokens = usage.reasoning.unwrap_or_else(|| {
        response
            .reasoning
            .as_deref()
            .map_or(0, |r| r.len().div_ceil(4) as u64)
    });
    let completion = usage
        .completion
        .unwrap_or((streamed_chars as u64).div_ceil(4) + 1);
    let usage_payload = json!({
        "id": format!("mock-{n}"),
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": [],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion,
            "total_tokens": prompt_tokens + completion,
            "prompt_cache_hit_tokens": cache_hit,
            "prompt_cache_miss_tokens": prompt_tokens - cache_hit,
            "prompt_tokens_details": {"cached_tokens": cache_hit},
            "completion_tokens_details": {"reasoning_tokens": reasoning_tokens},
        },
    })
    .to_string();

    let mut payloads = vec![chunk(
        model,
        n,
        json!({"role": "assistant", "content": ""}),
        None,
    )];
    let half = 1 + content.len() / 2;
    payloads.extend(content);
    let (mut stall, mut disconnect) = (None, false);
    match response.behaviour {
        Behaviour::StreamDisconnect => {
            payloads.truncate(half);
            disconnect = true;
        }
        Behaviour::MalformedJson => {
            payloads.truncate(2);
            payloads.push("{\"choices\":[{\"delta\":{\"content\":\"broken".to_owned());
        }
        Behaviour::Stall => {
            stall = Some(Stall {
                after: half,
                duration: response.stall_ms.map(Duration::from_millis),
            });
        }
        _ => {}
    }
    if !matches!(
        response.behaviour,
        Behaviour::StreamDisconnect | Behaviour::MalformedJson
    ) {
        payloads.push(chunk(model, n, json!({}), Some(&finish)));
        payloads.push(usage_payload);
        payloads.push("[DONE]".to_owned());
    }
    Delivery::Stream(StreamPlan {
        payloads,
        stall,
        disconnect,
        pace: response.pace_ms.map(Duration::from_millis),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn split_respects_char_boundaries() {
        assert_eq!(split_chars("héllo🌍x", 2), vec!["hé", "ll", "o🌍", "x"]);
        assert_eq!(split_chars("", 3), Vec::<&str>::new());
    }

    #[test]
    fn cache_sim_counts_common_prefix_in_64_token_units() {
        let mut sim = PromptCacheSim::default();
        let a = vec![b'a'; 1000];
        let mut b = a.clone();
        b.extend_from_slice(&[b'b'; 400]);
        assert_eq!(sim.observe(&a), (250, 0));
        assert_eq!(sim.observe(&b), (350, 192));
    }
}
