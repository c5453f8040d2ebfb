//! Failure classification: HTTP statuses, error bodies and transport errors → [`FailureCode`].
//!
//! 401/403 → `AUTH`; 402 or any status whose error talks about balance or quota → `QUOTA`; other
//! 429 → `RATE_LIMIT`; any other 4xx/5xx whose error says the prompt does not fit the context
//! window (a structured code such as OpenAI's `context_length_exceeded` or llama.cpp's
//! `exceed_context_size_error`, or the phrasing of DeepSeek, OpenAI, llama.cpp, vLLM, Ollama or LM
//! Studio; see [`says_context_overflow`]) → `CONTEXT_WINDOW_EXCEEDED`; other 4xx →
//! `INVALID_REQUEST`; 5xx → `SERVER`. The message is the
//! provider's own error message when the body has one, else the (bounded) body text.

use keel_protocol::{FailureCode, ModelFailure};
use serde_json::Value;

/// Longest provider error text kept in a [`ModelFailure`] message.
const MAX_DETAIL: usize = 1000;

fn lower_contains_any(haystack: &str, needles: &[&str]) -> bool {
    let lower = haystack.to_ascii_lowercase();
    needles.iter().any(|n| lower.contains(n))
}

fn says_quota(text: &str) -> bool {
    lower_contains_any(
        text,
        &[
            "insufficient balance",
            "insufficient_quota",
            "quota",
            "balance",
            "billing",
        ],
    )
}

/// Structured error `code`/`type` values that mean "the prompt does not fit the context window".
///
/// - `context_length_exceeded`: OpenAI (`error.code`), also DeepSeek and OpenAI-compatible proxies;
/// - `exceed_context_size_error`: llama.cpp's `llama-server` (`error.type`);
/// - `context_window_exceeded`, `context_length_error`: OpenRouter-style and LiteLLM-style proxies.
const OVERFLOW_CODES: &[&str] = &[
    "context_length_exceeded",
    "exceed_context_size_error",
    "context_window_exceeded",
    "context_length_error",
];

/// Phrases (lower case) servers use when the prompt does not fit the context window, with the
/// server each one comes from. Matched anywhere in the body.
const OVERFLOW_PHRASES: &[&str] = &[
    // DeepSeek, OpenAI, vLLM: "This model's maximum context length is 131072 tokens. However, …"
    "maximum context length",
    // OpenAI (code), Ollama "the input length exceeds the context length", "prompt too long;
    // exceeded max context length by 4 tokens", LM Studio "… is greater than the context
    // length (n_keep: 10247 >= n_ctx: 4096)", vLLM "is longer than the model's context length".
    "context length",
    "context_length",
    // OpenAI Responses API: "Your input exceeds the context window of this model."
    "context window",
    // llama.cpp: "request (12108 tokens) exceeds the available context size (6144 tokens)",
    // older llama.cpp "the request exceeds the available context size, try increasing the context
    // size or enable context shift", LM Studio MLX "Context size has been exceeded".
    "context size",
    // vLLM: "The decoder prompt (length 5000) is longer than the maximum model length of 4096."
    "maximum model length",
    // LM Studio: "Trying to keep the first 15857 tokens when context the overflows."
    "context the overflows",
    "context overflow",
    // Generic phrasings (Anthropic-compatible proxies, older OpenAI-compatible servers).
    "too many tokens",
    "prompt is too long",
    "reduce the length",
];

/// Whether an error body (JSON or text) says the request does not fit the context window: a
/// structured `code`/`type` from [`OVERFLOW_CODES`] or a phrase from [`OVERFLOW_PHRASES`].
pub fn says_context_overflow(body: &str) -> bool {
    if let Ok(value) = serde_json::from_str::<Value>(body) {
        let error = value.get("error").unwrap_or(&value);
        let structured = ["code", "type"].iter().any(|field| {
            error
                .get(field)
                .and_then(Value::as_str)
                .is_some_and(|v| OVERFLOW_CODES.contains(&v.to_ascii_lowercase().as_str()))
        });
        if structured {
            return true;
        }
    }
    lower_contains_any(body, OVERFLOW_CODES) || lower_contains_any(body, OVERFLOW_PHRASES)
}

/// Phrases (lower case) after which an overflow message states the server's context window.
const WINDOW_ANCHORS: &[&str] = &[
    // DeepSeek, OpenAI, vLLM: "maximum context length is 131072 tokens"
    "maximum context length is ",
    // llama.cpp: "exceeds the available context size (6144 tokens)"
    "available context size (",
    // LM Studio: "loaded with context length of only 4096 tokens", "(n_keep: 10247 >= n_ctx: 4096)"
    "context length of only ",
    "n_ctx: ",
    // vLLM: "longer than the maximum model length of 4096", "the model's context length (4096)"
    "maximum model length of ",
    "model's context length (",
];

/// The context window an overflow message states, in tokens (e.g. 6144 from llama.cpp's
/// "request (12108 tokens) exceeds the available context size (6144 tokens)"), if it states one.
pub fn reported_context_window(message: &str) -> Option<u64> {
    let lower = message.to_ascii_lowercase();
    WINDOW_ANCHORS.iter().find_map(|anchor| {
        let at = lower.find(anchor)? + anchor.len();
        let digits: String = lower[at..]
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == ',')
            .filter(char::is_ascii_digit)
            .collect();
        digits.parse().ok().filter(|&n: &u64| n > 0)
    })
}

/// The provider's error message from a JSON error body (`{"error":{"message"}}`,
/// `{"error":"…"}` or `{"message"}`), else the body itself, bounded.
pub fn error_detail(body: &str) -> String {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let from_json = parsed.as_ref().and_then(|v| {
        let e = v.get("error").unwrap_or(v);
        e.get("message")
            .and_then(Value::as_str)
            .or_else(|| e.as_str())
            .map(str::to_owned)
    });
    truncate(from_json.unwrap_or_else(|| body.trim().to_owned()))
}

fn truncate(mut s: String) -> String {
    if s.len() > MAX_DETAIL {
        s.truncate(s.floor_char_boundary(MAX_DETAIL));
        s.push('…');
    }
    s
}

/// Classifies an HTTP error response from its status and body.
pub fn classify_status(status: u16, body: &str) -> FailureCode {
    match status {
        401 | 403 => FailureCode::Auth,
        402 => FailureCode::Quota,
        429 if says_quota(body) => FailureCode::Quota,
        429 => FailureCode::RateLimit,
        // llama.cpp before 2025 answered overflow with a 500; 422 is vLLM's validation status.
        400..=599 if says_context_overflow(body) => FailureCode::ContextWindowExceeded,
        500..=599 => FailureCode::Server,
        _ if says_quota(body) && status != 400 => FailureCode::Quota,
        _ => FailureCode::InvalidRequest,
    }
}

/// A failure for an HTTP error response.
pub fn http_failure(
    status: u16,
    body: &str,
    retry_after_ms: Option<u64>,
    request_id: Option<String>,
) -> ModelFailure {
    let code = classify_status(status, body);
    let detail = error_detail(body);
    let message = if detail.is_empty() {
        format!("the provider answered HTTP {status}")
    } else {
        format!("the provider answered HTTP {status}: {detail}")
    };
    ModelFailure {
        code,
        message,
        status: Some(status),
        retry_after_ms,
        request_id,
    }
}

/// A `MALFORMED_RESPONSE` failure: the provider sent something its wire format does not allow.
pub(crate) fn malformed(detail: impl Into<String>) -> ModelFailure {
    ModelFailure::new(FailureCode::MalformedResponse, detail)
}

/// A failure for an `{"error": …}` object sent inside the event stream.
pub fn failure_from_error_value(error: &Value) -> ModelFailure {
    let text = error.to_string();
    let detail = error_detail(&serde_json::json!({ "error": error }).to_string());
    let status = error
        .get("code")
        .and_then(|c| {
            c.as_u64()
                .or_else(|| c.as_str().and_then(|s| s.parse().ok()))
        })
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| (400..=599).contains(c));
    let code = match status {
        Some(status) => classify_status(status, &text),
        None if says_context_overflow(&text) => FailureCode::ContextWindowExceeded,
        None if says_quota(&text) => FailureCode::Quota,
        None => FailureCode::Server,
    };
    ModelFailure {
        code,
        message: format!("the provider reported an error mid-stream: {detail}"),
        status,
        retry_after_ms: None,
        request_id: None,
    }
}

/// `Retry-After` as milliseconds: delta-seconds (integer or decimal). HTTP-dates are not
/// understood and yield `None` (the retry policy's own backoff applies).
pub fn parse_retry_after(value: &str) -> Option<u64> {
    let secs: f64 = value.trim().parse().ok()?;
    if !secs.is_finite() || secs < 0.0 {
        return None;
    }
    // Bounded: a day is far beyond any delay keel would wait.
    Some((secs.min(86_400.0) * 1000.0).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn statuses_and_bodies_classify() {
        let cases = [
            (401, "{}", FailureCode::Auth),
            (403, "", FailureCode::Auth),
            (
                402,
                r#"{"error":{"message":"Insufficient Balance"}}"#,
                FailureCode::Quota,
            ),
            (
                429,
                r#"{"error":{"type":"insufficient_quota"}}"#,
                FailureCode::Quota,
            ),
            (429, "slow down", FailureCode::RateLimit),
            (
                400,
                "This model's maximum context length is 131072 tokens",
                FailureCode::ContextWindowExceeded,
            ),
            (
                413,
                "prompt is too long",
                FailureCode::ContextWindowExceeded,
            ),
            (400, "bad field", FailureCode::InvalidRequest),
            (413, "", FailureCode::InvalidRequest),
            (422, "Invalid max_tokens", FailureCode::InvalidRequest),
            (500, "", FailureCode::Server),
            (503, "Server overloaded", FailureCode::Server),
        ];
        for (status, body, code) in cases {
            assert_eq!(classify_status(status, body), code, "{status} {body}");
        }
    }

    /// Overflow answers as each server sends them (status, body).
    const OVERFLOW_BODIES: &[(&str, u16, &str)] = &[
        (
            "DeepSeek",
            400,
            r#"{"error":{"message":"This model's maximum context length is 131072 tokens. However, you requested 140000 tokens (132000 in the messages, 8000 in the completion). Please reduce the length of the messages or completion.","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}"#,
        ),
        (
            "OpenAI chat",
            400,
            r#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
        ),
        (
            "OpenAI by code only",
            400,
            r#"{"error":{"message":"Request rejected.","type":"invalid_request_error","code":"context_length_exceeded"}}"#,
        ),
        (
            "OpenAI Responses",
            400,
            r#"{"error":{"message":"Your input exceeds the context window of this model. Please adjust your input and try again.","type":"invalid_request_error","code":"context_length_exceeded"}}"#,
        ),
        (
            "llama.cpp",
            400,
            r#"{"error":{"code":400,"message":"request (12108 tokens) exceeds the available context size (6144 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":12108,"n_ctx":6144}}"#,
        ),
        (
            "llama.cpp by type only",
            400,
            r#"{"error":{"code":400,"message":"request rejected","type":"exceed_context_size_error"}}"#,
        ),
        (
            "llama.cpp before 2025 (HTTP 500)",
            500,
            r#"{"error":{"code":500,"message":"the request exceeds the available context size, try increasing the context size or enable context shift","type":"server_error"}}"#,
        ),
        (
            "vLLM",
            400,
            r#"{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}"#,
        ),
        (
            "vLLM prompt longer than the context length",
            400,
            r#"{"object":"error","message":"The prompt (total length 5000) is longer than the model's context length (4096).","type":"BadRequestError","code":400}"#,
        ),
        (
            "vLLM v1 engine",
            400,
            r#"{"object":"error","message":"The decoder prompt (length 5000) is longer than the maximum model length of 4096. Make sure that `max_model_len` is no smaller than the number of text tokens.","type":"BadRequestError","code":400}"#,
        ),
        (
            "Ollama",
            400,
            r#"{"error":{"message":"the input length exceeds the context length","type":"api_error","param":null,"code":null}}"#,
        ),
        (
            "Ollama truncate off",
            400,
            r#"{"error":"prompt too long; exceeded max context length by 4 tokens"}"#,
        ),
        (
            "LM Studio n_keep",
            400,
            r#"{"error":"The number of tokens to keep from the initial prompt is greater than the context length (n_keep: 10247 >= n_ctx: 4096). Try to load the model with a larger context length, or provide a shorter prompt."}"#,
        ),
        (
            "LM Studio overflow policy",
            400,
            r#"{"error":"Trying to keep the first 15857 tokens when context the overflows. However, the model is loaded with context length of only 4096 tokens, which is not enough. Try to load the model with a larger context length, or provide a shorter input"}"#,
        ),
        (
            "LM Studio MLX",
            400,
            r#"{"error":"Context size has been exceeded."}"#,
        ),
        ("plain text 413", 413, "prompt is too long"),
    ];

    #[test]
    fn overflow_is_recognised_from_every_server() {
        for (server, status, body) in OVERFLOW_BODIES {
            assert_eq!(
                classify_status(*status, body),
                FailureCode::ContextWindowExceeded,
                "{server}: {body}"
            );
        }
    }

    #[test]
    fn overflow_sent_mid_stream_is_recognised() {
        let error = serde_json::json!({
            "code": 400,
            "message": "request (12108 tokens) exceeds the available context size (6144 tokens), try increasing it",
            "type": "exceed_context_size_error",
        });
        let f = failure_from_error_value(&error);
        assert_eq!(
            (f.code, f.status),
            (FailureCode::ContextWindowExceeded, Some(400))
        );
        let f = failure_from_error_value(&serde_json::json!({"type": "exceed_context_size_error"}));
        assert_eq!(f.code, FailureCode::ContextWindowExceeded);
    }

    #[test]
    fn the_window_an_overflow_states_is_read() {
        let windows: Vec<Option<u64>> = OVERFLOW_BODIES
            .iter()
            .map(|(_, _, body)| reported_context_window(&error_detail(body)))
            .collect();
        assert_eq!(
            windows,
            [
                Some(131_072),
                Some(8192),
                None,
                None,
                Some(6144),
                None,
                None,
                Some(4096),
                Some(4096),
                Some(4096),
                None,
                None,
                Some(4096),
                Some(4096),
                None,
                None,
            ]
        );
        assert_eq!(
            reported_context_window("maximum context length is 1,048,576 tokens"),
            Some(1_048_576)
        );
        assert_eq!(
            reported_context_window("maximum context length is tokens"),
            None
        );
    }

    #[test]
    fn other_errors_are_not_overflow() {
        let cases = [
            (
                400,
                r#"{"error":{"message":"Invalid 'messages[1].role': unknown role 'bot'","type":"invalid_request_error","code":"invalid_value"}}"#,
                FailureCode::InvalidRequest,
            ),
            (
                400,
                r#"{"error":{"code":400,"message":"Conversation roles must alternate user/assistant/user/assistant/...","type":"invalid_request_error"}}"#,
                FailureCode::InvalidRequest,
            ),
            (
                503,
                r#"{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}"#,
                FailureCode::Server,
            ),
            (
                429,
                r#"{"error":{"message":"Rate limit reached: too many tokens per minute"}}"#,
                FailureCode::RateLimit,
            ),
        ];
        for (status, body, code) in cases {
            assert_eq!(classify_status(status, body), code, "{status} {body}");
        }
    }

    #[test]
    fn details_and_retry_after() {
        assert_eq!(
            error_detail(r#"{"error":{"message":"nope","type":"x"}}"#),
            "nope"
        );
        assert_eq!(error_detail(r#"{"error":"flat"}"#), "flat");
        assert_eq!(error_detail("  plain text \n"), "plain text");
        assert_eq!(error_detail(&"é".repeat(2000)).chars().count(), 501);
        assert_eq!(parse_retry_after("2"), Some(2000));
        assert_eq!(parse_retry_after(" 0.25 "), Some(250));
        assert_eq!(parse_retry_after("-1"), None);
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
        assert_eq!(parse_retry_after("1e300"), Some(86_400_000));
    }

    #[test]
    fn mid_stream_errors() {
        let f =
            failure_from_error_value(&serde_json::json!({"message": "overloaded", "code": 503}));
        assert_eq!((f.code, f.status), (FailureCode::Server, Some(503)));
        let f = failure_from_error_value(
            &serde_json::json!({"message": "maximum context length exceeded"}),
        );
        assert_eq!(f.code, FailureCode::ContextWindowExceeded);
        assert!(f.message.contains("maximum context length exceeded"));
    }
}
