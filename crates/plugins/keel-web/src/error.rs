//! What can go wrong on the way to the web, each naming the endpoint or address involved.

use keel_tools::ToolError;

/// A failure of `web_search` or `web_fetch`.
#[derive(Debug, thiserror::Error)]
pub enum WebError {
    /// The tool cannot run in this configuration (no key, no search endpoint, network off).
    #[error("{0}")]
    Unavailable(String),
    /// Policy refused the address (private, loopback, not http(s), too many redirects).
    #[error("{0}")]
    Refused(String),
    /// The arguments make no sense (a URL that does not parse, no query).
    #[error("{0}")]
    BadArgs(String),
    /// The server answered with an error status.
    #[error("{endpoint} answered HTTP {status}{}", detail_suffix(.detail))]
    Status {
        /// The URL called.
        endpoint: String,
        /// The HTTP status code.
        status: u16,
        /// The start of the body, when there was one.
        detail: String,
    },
    /// No answer within the time limit.
    #[error("{endpoint} did not answer within {secs} s")]
    Timeout {
        /// The URL called.
        endpoint: String,
        /// The limit, in seconds (may be fractional in tests).
        secs: f64,
    },
    /// The request could not be made or its body not read.
    #[error("{endpoint}: {message}")]
    Transport {
        /// The URL called.
        endpoint: String,
        /// What failed.
        message: String,
    },
    /// The answer was not what the API promises (not JSON, wrong shape).
    #[error("{endpoint} answered something that is not a Messages API response: {message}")]
    BadAnswer {
        /// The URL called.
        endpoint: String,
        /// What was wrong.
        message: String,
    },
}

/// Why `web_search` cannot run in this configuration ([`crate::plugin::resolve_search`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SearchUnavailable {
    /// The user's search base URL (from `from`: the variable or the row's key) is not http(s).
    #[error("{from} = {url:?} is not an http(s) URL")]
    BadBase {
        /// Where it was set.
        from: &'static str,
        /// The URL as given.
        url: String,
    },
    /// The model endpoint is not DeepSeek's, and the user named no search endpoint.
    #[error(
        "web search runs on DeepSeek's API and the model endpoint {model} is not DeepSeek's; set {} to a search endpoint to use it",
        crate::plugin::SEARCH_BASE_URL_ENV
    )]
    NotDeepSeek {
        /// The model endpoint's base URL.
        model: String,
    },
    /// The model is not reached over HTTP, and the user named no search endpoint.
    #[error(
        "web search runs on DeepSeek's API and this model is not reached over it; set {} to a search endpoint to use it",
        crate::plugin::SEARCH_BASE_URL_ENV
    )]
    NoModelEndpoint,
    /// No API key.
    #[error(
        "web search needs a DeepSeek API key and {} is not set",
        crate::plugin::API_KEY_ENV
    )]
    NoKey,
}

/// A Messages API response without its `content` list ([`crate::search::parse_answer`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("no `content` list")]
pub struct NoContent;

fn detail_suffix(detail: &str) -> String {
    if detail.is_empty() {
        String::new()
    } else {
        format!(": {detail}")
    }
}

impl From<WebError> for ToolError {
    fn from(e: WebError) -> ToolError {
        match e {
            WebError::Refused(m) | WebError::Unavailable(m) => ToolError::Denied(m),
            WebError::BadArgs(m) => ToolError::InvalidArgs(m),
            other => ToolError::Failed(other.to_string()),
        }
    }
}

/// A transport error from reqwest as a [`WebError`] for `endpoint` (timeouts told apart).
pub(crate) fn transport(endpoint: &str, secs: f64, e: &reqwest::Error) -> WebError {
    if e.is_timeout() {
        return WebError::Timeout {
            endpoint: endpoint.to_owned(),
            secs,
        };
    }
    // With the causes, which say more than the top line.
    let mut message = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        source = s.source();
    }
    WebError::Transport {
        endpoint: endpoint.to_owned(),
        message,
    }
}

/// At most `max` bytes of `text` (cut on a character boundary), with `…` when cut.
pub(crate) fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    format!("{}…", &text[..text.floor_char_boundary(max)])
}
