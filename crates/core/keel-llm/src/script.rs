//! Model scripts: the one format shared by the [`crate::ScriptedProvider`] and keel-testkit's
//! mock chat-completions server (documented for users in `docs/scripts.md`).
//!
//! A [`Script`] is a list of [`ScriptedResponse`]s, written as JSON or YAML, either as
//! `{responses: [...]}` or as a bare list. Each request takes the first not-yet-used response
//! whose optional `match` holds for the request's last user message / last tool result; an
//! exhausted or unmatched script is an error naming what was asked, never a hang. How a
//! response goes on the wire is decided in [`crate::script_render`].

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// A script problem: unreadable file, bad syntax, or no response left for a request. Surface
/// it to whoever wrote the script; it is never retried.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    /// The script file could not be read.
    #[error("cannot read script {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The text is not a valid script.
    #[error("invalid script{}: {message}", origin.as_ref().map(|p| format!(" {}", p.display())).unwrap_or_default())]
    Parse {
        /// The file, when parsed from one.
        origin: Option<PathBuf>,
        /// The parser's or validator's message (with line/column when known).
        message: String,
    },
    /// Every response was used.
    #[error("the model script is exhausted: all {total} responses were used")]
    Exhausted {
        /// Number of responses in the script.
        total: usize,
    },
    /// Responses remain but none matches the request.
    #[error(
        "no unused script response matches the request ({remaining} left; last user message: {last_user:?}; last tool result: {last_tool:?})"
    )]
    NoMatch {
        /// Unused responses.
        remaining: usize,
        /// Start of the request's last user message.
        last_user: Option<String>,
        /// Start of the request's last tool result.
        last_tool: Option<String>,
    },
}

/// Text format of a script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScriptFormat {
    /// JSON.
    Json,
    /// YAML (a superset of JSON).
    Yaml,
}

/// A list of scripted model responses.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// Responses, used first to last.
    pub responses: Vec<ScriptedResponse>,
}

/// Fault or outcome a response stands for. Content-carrying behaviours stream the response's
/// `reasoning`, `text` and `tool_calls`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Behaviour {
    /// Stream the content, finish normally (the default).
    #[default]
    Success,
    /// Same as `success`; names a response that carries reasoning.
    ReasoningSuccess,
    /// Same as `success`; names a response that carries tool calls.
    ToolCallSuccess,
    /// Stream the content, finish with `length`; tool-call arguments are cut in half.
    MaxTokens,
    /// Finish with `stop` after streaming nothing.
    Empty,
    /// Close the connection without answering (`TRANSPORT`).
    ConnectionReset,
    /// Stream half of the content, then drop the connection (`STREAM_CLOSED`).
    StreamDisconnect,
    /// Stream half of the content, then go silent for `stall_ms` (forever when unset).
    Stall,
    /// Stream one chunk, then a payload that is not JSON (`MALFORMED_RESPONSE`).
    MalformedJson,
    /// HTTP 429 with `Retry-After: retry_after` (default 1 s).
    RateLimit,
    /// HTTP 500.
    ServerError,
    /// HTTP 529 "Overloaded", the Messages API's answer when it is busy.
    Overloaded,
    /// HTTP 400 saying the context is too long.
    ContextOverflow,
    /// HTTP 400 rejecting the request for another reason.
    InvalidRequest,
    /// HTTP 402 "Insufficient Balance".
    QuotaExceeded,
    /// HTTP 401.
    AuthError,
}

/// Only use a response for requests that satisfy every set condition.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptMatch {
    /// The request's last user message (the human's, else any user text) contains this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_user_contains: Option<String>,
    /// The request's last tool result contains this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_tool_result_contains: Option<String>,
    /// The request's very last message (any role; its text) contains this: tells a
    /// compaction's summary request (it ends with the summary instruction) from a step's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_message_contains: Option<String>,
}

/// What a request offers to [`ScriptMatch`]: its last user text, last tool result and last
/// message's text.
#[derive(Debug, Clone, Copy, Default)]
pub struct MatchInput<'a> {
    /// The last user message (the human's, else any user text).
    pub last_user: Option<&'a str>,
    /// The last tool result.
    pub last_tool: Option<&'a str>,
    /// The last message's text.
    pub last_message: Option<&'a str>,
}

impl ScriptMatch {
    /// True when every set condition holds.
    pub fn matches(&self, input: MatchInput<'_>) -> bool {
        let holds = |needle: &Option<String>, hay: Option<&str>| match needle {
            None => true,
            Some(n) => hay.is_some_and(|h| h.contains(n.as_str())),
        };
        holds(&self.last_user_contains, input.last_user)
            && holds(&self.last_tool_result_contains, input.last_tool)
            && holds(&self.last_message_contains, input.last_message)
    }
}

/// A tool call's arguments: a JSON value (serialised compactly) or a raw string sent as is
/// (which may be invalid JSON, for tests).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ScriptedArguments {
    /// Sent byte for byte.
    Raw(String),
    /// Serialised with `serde_json`.
    Json(serde_json::Value),
}

impl Default for ScriptedArguments {
    fn default() -> Self {
        ScriptedArguments::Json(serde_json::Value::Object(Default::default()))
    }
}

impl ScriptedArguments {
    /// The raw argument string the model "sends".
    pub fn to_raw(&self) -> String {
        match self {
            ScriptedArguments::Raw(s) => s.clone(),
            ScriptedArguments::Json(v) => v.to_string(),
        }
    }
}

/// One scripted tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedToolCall {
    /// Call id; `call_<response>_<position>` when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Tool name.
    pub name: String,
    /// Arguments.
    #[serde(default)]
    pub arguments: ScriptedArguments,
}

/// Usage figures to report (missing ones are estimated).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedUsage {
    /// `prompt_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<u64>,
    /// `completion_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion: Option<u64>,
    /// `prompt_cache_hit_tokens` (and `prompt_tokens_details.cached_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_hit: Option<u64>,
    /// `completion_tokens_details.reasoning_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<u64>,
}

/// One scripted model response. See `docs/scripts.md`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ScriptedResponse {
    /// Only use this response for matching requests.
    #[serde(rename = "match", skip_serializing_if = "Option::is_none")]
    pub matcher: Option<ScriptMatch>,
    /// Outcome or fault (default `success`).
    #[serde(alias = "behavior")]
    pub behaviour: Behaviour,
    /// Reasoning to stream first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    /// Visible text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Tool calls, streamed in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ScriptedToolCall>,
    /// Finish reason on the wire (`stop`, `tool_calls`, `length` or any other string); by default
    /// `tool_calls` when there are tool calls, else `stop` (`length` for `max_tokens`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finish: Option<String>,
    /// Usage to report.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<ScriptedUsage>,
    /// How long a `stall` lasts, in milliseconds (forever when unset).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stall_ms: Option<u64>,
    /// A pause before every streamed chunk, in milliseconds: a model streaming at a steady
    /// rate (with `chunk_size`, the rate in characters per second).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pace_ms: Option<u64>,
    /// `Retry-After` seconds for `rate_limit` (default 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<f64>,
    /// Error message for HTTP-error behaviours (a realistic default otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The whole HTTP error body of an HTTP-error behaviour, sent byte for byte (overrides
    /// `message`), e.g. another server's error JSON.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// Characters per streamed text/reasoning delta and per tool-argument fragment (default 16
    /// and 8).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunk_size: Option<usize>,
    /// Mock server only: bytes per network write (each flushed separately), to split events and
    /// UTF-8 sequences across reads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub write_size: Option<usize>,
    /// Mock server only: end SSE lines with CRLF.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub crlf: bool,
    /// Mock server only: interleave `: keep-alive` comment lines.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub comments: bool,
}

impl Script {
    /// Parses a script.
    pub fn from_str(text: &str, format: ScriptFormat) -> Result<Script, ScriptError> {
        Script::parse(text, format, None)
    }

    /// Reads a script file; `.json` is JSON, anything else YAML (which also reads JSON).
    pub fn from_path(path: &Path) -> Result<Script, ScriptError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScriptError::Io {
            path: path.to_owned(),
            source,
        })?;
        let format = match path.extension().and_then(|e| e.to_str()) {
            Some("json") => ScriptFormat::Json,
            _ => ScriptFormat::Yaml,
        };
        Script::parse(&text, format, Some(path))
    }

    fn parse(
        text: &str,
        format: ScriptFormat,
        origin: Option<&Path>,
    ) -> Result<Script, ScriptError> {
        let err = |message: String| ScriptError::Parse {
            origin: origin.map(Path::to_owned),
            message,
        };
        // Decide the form up front so that errors name the offending field and line.
        let is_list = text
            .lines()
            .map(str::trim_start)
            .find(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with("---"))
            .is_some_and(|l| l.starts_with('[') || l.starts_with('-'));
        let script = match (format, is_list) {
            (ScriptFormat::Json, true) => Script {
                responses: serde_json::from_str(text).map_err(|e| err(e.to_string()))?,
            },
            (ScriptFormat::Json, false) => {
                serde_json::from_str(text).map_err(|e| err(e.to_string()))?
            }
            (ScriptFormat::Yaml, true) => Script {
                responses: serde_yaml::from_str(text).map_err(|e| err(e.to_string()))?,
            },
            (ScriptFormat::Yaml, false) => {
                serde_yaml::from_str(text).map_err(|e| err(e.to_string()))?
            }
        };
        for (n, response) in script.responses.iter().enumerate() {
            if let Some(i) = response.tool_calls.iter().position(|c| c.name.is_empty()) {
                return Err(err(format!(
                    "response {}: tool call {} has an empty name",
                    n + 1,
                    i + 1
                )));
            }
            if response.chunk_size == Some(0) || response.write_size == Some(0) {
                return Err(err(format!(
                    "response {}: chunk_size and write_size must be at least 1",
                    n + 1
                )));
            }
            if response
                .retry_after
                .is_some_and(|r| !r.is_finite() || r < 0.0)
            {
                return Err(err(format!(
                    "response {}: retry_after must be a non-negative number",
                    n + 1
                )));
            }
        }
        Ok(script)
    }
}

fn excerpt(s: Option<&str>) -> Option<String> {
    s.map(|s| s.chars().take(80).collect())
}

/// Hands out a script's responses: the first unused response whose `match` holds.
#[derive(Debug, Clone)]
pub struct ScriptCursor {
    responses: Vec<ScriptedResponse>,
    used: Vec<bool>,
}

impl ScriptCursor {
    /// A cursor at the start of `script`.
    pub fn new(script: Script) -> Self {
        let used = vec![false; script.responses.len()];
        ScriptCursor {
            responses: script.responses,
            used,
        }
    }

    /// Takes the next response for a request; returns its 1-based position in the script.
    pub fn take(
        &mut self,
        input: MatchInput<'_>,
    ) -> Result<(usize, ScriptedResponse), ScriptError> {
        let remaining = self.used.iter().filter(|u| !**u).count();
        if remaining == 0 {
            return Err(ScriptError::Exhausted {
                total: self.responses.len(),
            });
        }
        let found = self.responses.iter().enumerate().position(|(i, r)| {
            !self.used[i] && r.matcher.as_ref().is_none_or(|m| m.matches(input))
        });
        match found {
            Some(i) => {
                self.used[i] = true;
                Ok((i + 1, self.responses[i].clone()))
            }
            None => Err(ScriptError::NoMatch {
                remaining,
                last_user: excerpt(input.last_user),
                last_tool: excerpt(input.last_tool),
            }),
        }
    }

    /// Responses not used yet.
    pub fn remaining(&self) -> usize {
        self.used.iter().filter(|u| !**u).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn yaml_and_json_forms_parse_to_the_same_script() {
        let yaml = r#"
responses:
  - match: { last_user_contains: hello }
    reasoning: think
    text: Hi
  - tool_calls:
      - { id: c1, name: read, arguments: { file_path: a.txt } }
      - { name: bash, arguments: '{"command": "ls"' }
  - behaviour: rate_limit
    retry_after: 2
"#;
        let json = r#"[
  {"match": {"last_user_contains": "hello"}, "reasoning": "think", "text": "Hi"},
  {"tool_calls": [{"id": "c1", "name": "read", "arguments": {"file_path": "a.txt"}},
                  {"name": "bash", "arguments": "{\"command\": \"ls\""}]},
  {"behavior": "rate_limit", "retry_after": 2}
]"#;
        let a = Script::from_str(yaml, ScriptFormat::Yaml).unwrap();
        let b = Script::from_str(json, ScriptFormat::Json).unwrap();
        assert_eq!(a, b);
        assert_eq!(
            a.responses[1].tool_calls[0].arguments.to_raw(),
            r#"{"file_path":"a.txt"}"#
        );
        assert_eq!(
            a.responses[1].tool_calls[1].arguments.to_raw(),
            r#"{"command": "ls""#
        );
        assert_eq!(a.responses[2].behaviour, Behaviour::RateLimit);
    }

    #[test]
    fn bad_scripts_are_clear_errors() {
        let e = Script::from_str("responses: [{ txet: hi }]", ScriptFormat::Yaml).unwrap_err();
        assert!(e.to_string().starts_with("invalid script: "), "{e}");
        let e =
            Script::from_str(r#"[{"tool_calls":[{"name":""}]}]"#, ScriptFormat::Json).unwrap_err();
        assert!(
            e.to_string()
                .contains("response 1: tool call 1 has an empty name"),
            "{e}"
        );
        let e = Script::from_path(Path::new("/nonexistent/script.yaml")).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/script.yaml"), "{e}");
    }

    fn input<'a>(user: Option<&'a str>, tool: Option<&'a str>) -> MatchInput<'a> {
        MatchInput {
            last_user: user,
            last_tool: tool,
            last_message: user,
        }
    }

    #[test]
    fn cursor_takes_first_unused_match_and_reports_exhaustion() {
        let script = Script::from_str(
            r#"[{"match":{"last_tool_result_contains":"42"},"text":"tool saw 42"},{"text":"first"},{"match":{"last_user_contains":"bye"},"text":"bye"}]"#,
            ScriptFormat::Json,
        )
        .unwrap();
        let mut cursor = ScriptCursor::new(script);
        assert_eq!(cursor.take(input(Some("hello"), None)).unwrap().0, 2);
        assert!(matches!(
            cursor.take(input(Some("hello"), None)),
            Err(ScriptError::NoMatch { remaining: 2, .. })
        ));
        assert_eq!(
            cursor
                .take(input(Some("hello"), Some("answer is 42")))
                .unwrap()
                .0,
            1
        );
        assert_eq!(
            cursor
                .take(input(Some("bye now"), None))
                .unwrap()
                .1
                .text
                .as_deref(),
            Some("bye")
        );
        assert_eq!(cursor.remaining(), 0);
        let e = cursor.take(input(None, None)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the model script is exhausted: all 3 responses were used"
        );
    }

    #[test]
    fn last_message_tells_a_summary_request_from_a_step() {
        let script = Script::from_str(
            r#"[{"match":{"last_message_contains":"Context compaction"},"text":"summary"},{"match":{"last_user_contains":"task"},"text":"step"}]"#,
            ScriptFormat::Json,
        )
        .unwrap();
        let mut cursor = ScriptCursor::new(script);
        let step = MatchInput {
            last_user: Some("the task"),
            last_tool: None,
            last_message: Some("file contents"),
        };
        assert_eq!(cursor.take(step).unwrap().1.text.as_deref(), Some("step"));
        let summary = MatchInput {
            last_message: Some("Context compaction: the conversation above"),
            ..step
        };
        assert_eq!(
            cursor.take(summary).unwrap().1.text.as_deref(),
            Some("summary")
        );
    }
}
