//! Failure classification: HTTP statuses, error bodies and transport errors → [`FailureCode`].
//!
//! 401/403 → `AUTH`; 402 or any status whose error talks about balance or quota → `QUOTA`; other
//! 429 → `RATE_LIMIT`; 400/413 whose error says the context is too long →
//! `CONTEXT_WINDOW_EXCEEDED`; other 4xx → `INVALID_REQUEST`; 5xx → `SERVER`. The message is the
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

fn says_context_too_long(text: &str) -> bool {
    lower_contains_any(
        text,
        &[
            "context length",
            "context_length",
            "context window",
            "maximum context",
            "too many tokens",
            "prompt is too long",
            "reduce the length",
        ],
    )
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
        let mut cut = MAX_DETAIL;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
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
        400 | 413 if says_context_too_long(body) => FailureCode::ContextWindowExceeded,
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
        None if says_context_too_long(&text) => FailureCode::ContextWindowExceeded,
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
