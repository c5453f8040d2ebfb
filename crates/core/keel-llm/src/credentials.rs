//! Credentials and configuration errors: the API key type that never shows itself, and what can
//! be wrong with a provider's configuration before any request is sent.

use std::fmt;

/// A provider configuration problem, found before any request is sent. Surface it to the user
/// as is: the message names the variable or value to fix.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The API key variable is unset or empty.
    #[error("no API key: set the environment variable {var}")]
    MissingApiKey {
        /// The variable that was read.
        var: String,
    },
    /// The API key variable holds something that cannot be an API key.
    #[error("the API key in {var} is malformed: it {reason}")]
    MalformedApiKey {
        /// The variable that was read.
        var: String,
        /// What is wrong (never the key itself).
        reason: &'static str,
    },
    /// The base URL is not an http(s) URL.
    #[error("invalid base URL {url:?}: {reason}")]
    InvalidBaseUrl {
        /// The URL as configured.
        url: String,
        /// What is wrong.
        reason: String,
    },
    /// The HTTP client could not be built (e.g. the TLS backend failed to initialise).
    #[error("could not build the HTTP client: {0}")]
    Client(#[source] reqwest::Error),
}

/// An API key. `Debug` and `Display` never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Validates a key read from `source` (a variable or config key, named in errors).
    /// Surrounding whitespace (e.g. a trailing newline) is trimmed.
    pub fn new(value: &str, source: &str) -> Result<Self, ConfigError> {
        let key = value.trim();
        let reason = if key.is_empty() {
            return Err(ConfigError::MissingApiKey {
                var: source.to_owned(),
            });
        } else if !key.is_ascii() {
            Some("contains non-ASCII characters")
        } else if key
            .bytes()
            .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
        {
            Some("contains whitespace or control characters")
        } else {
            None
        };
        match reason {
            Some(reason) => Err(ConfigError::MalformedApiKey {
                var: source.to_owned(),
                reason,
            }),
            None => Ok(ApiKey(key.to_owned())),
        }
    }

    /// Reads and validates the key in environment variable `var`.
    pub fn from_env(var: &str) -> Result<Self, ConfigError> {
        match std::env::var(var) {
            Ok(value) => ApiKey::new(&value, var),
            Err(std::env::VarError::NotPresent) => Err(ConfigError::MissingApiKey {
                var: var.to_owned(),
            }),
            Err(std::env::VarError::NotUnicode(_)) => Err(ConfigError::MalformedApiKey {
                var: var.to_owned(),
                reason: "is not valid Unicode",
            }),
        }
    }

    /// The key itself, for building a request header. Never log it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}
