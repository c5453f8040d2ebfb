//! What goes wrong below HTTP, and why no transport could be made: neither carries the URL's
//! query or a header's value.

/// A request failed below HTTP (connect, TLS, a broken body): what `reqwest` said, with its
/// causes, and without the URL (a query string may carry credentials).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct HttpError(String);

impl From<reqwest::Error> for HttpError {
    fn from(e: reqwest::Error) -> Self {
        let e = e.without_url();
        let mut text = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            let s_text = s.to_string();
            if !text.contains(&s_text) {
                text.push_str(": ");
                text.push_str(&s_text);
            }
            source = s.source();
        }
        HttpError(text)
    }
}

/// Why no transport to a streamable HTTP server could be made ([`super::transport`]): a message fit
/// for a start failure, naming the header or the variable, never a value.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TransportError {
    /// `url` cannot be parsed.
    #[error("`url` is not a URL ({0})")]
    NotAUrl(url::ParseError),
    /// `url` is neither http nor https.
    #[error("`url` must be http:// or https://, not {0}://")]
    Scheme(String),
    /// A configured header's name is no header name.
    #[error("`headers`: {0:?} is not a header name")]
    HeaderName(String),
    /// A header the transport sets itself.
    #[error("`headers`: {0} is set by the transport itself and cannot be configured")]
    Reserved(String),
    /// A configured header's value is no header value.
    #[error("`headers`: the value of {0} is not a valid header value")]
    HeaderValue(String),
    /// Both a token variable and an Authorization header.
    #[error(
        "both `bearer_token_env_var` ({0}) and an Authorization header are configured; give one"
    )]
    TwoAuthorizations(String),
    /// The token variable is empty.
    #[error("bearer_token_env_var: the variable {0} is empty")]
    TokenEmpty(String),
    /// The token variable is not set.
    #[error("bearer_token_env_var: the variable {0} is not set")]
    TokenUnset(String),
    /// The token variable is not UTF-8.
    #[error("bearer_token_env_var: the variable {0} is not valid UTF-8")]
    TokenNotUnicode(String),
    /// The token cannot be a header value.
    #[error("bearer_token_env_var: the value of {0} cannot be sent in a header")]
    TokenUnsendable(String),
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client: {0}")]
    Client(HttpError),
}
