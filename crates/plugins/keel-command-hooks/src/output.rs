//! What one command's exit status and output mean, per event (Claude Code's rules).
//!
//! - exit 0: stdout is parsed as JSON when it is a JSON object (`continue`, `stopReason`,
//!   `systemMessage`, `decision`, `reason`, `hookSpecificOutput`); otherwise it is plain text,
//!   which becomes context for `UserPromptSubmit` and `SessionStart` and is ignored elsewhere.
//! - exit 2: blocking; stderr is the message (`PreToolUse` denies the call, `PostToolUse` shows
//!   it to the model beside the result, `UserPromptSubmit` rejects the prompt, `Stop` keeps the
//!   turn going with it as input; `SessionStart` cannot block and records it only).
//! - any other exit, a signal, a timeout or a failure to start: a non-blocking error, recorded
//!   in `hook/result` and otherwise ignored.
//!
//! The result of one command is an [`Effect`]; the seam adapters combine the effects of every
//! matching command. Model-visible text is built by the named fragments at the end.

use crate::config::HookEvent;
use serde::Deserialize;
use std::time::Duration;

/// Characters of one hook's text that reach the model (Claude Code's cap).
pub(crate) const MODEL_TEXT_CAP: usize = 10_000;

/// How a command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Status {
    /// Exited with this code.
    Exited(i32),
    /// Killed by this signal.
    Signalled(i32),
    /// Ran past its timeout.
    TimedOut(Duration),
    /// The turn was cancelled.
    Cancelled,
    /// Could not be started.
    NotStarted(String),
}

/// One command's run.
#[derive(Debug, Clone)]
pub(crate) struct RunOutput {
    pub(crate) command: String,
    pub(crate) status: Status,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
    pub(crate) duration: Duration,
}

/// What one command asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Effect {
    /// `hook/result` decision: `allow`, `deny`, `ask`, `block`, `context`, `stop`, `none`,
    /// `error`, `timeout`, `cancelled`.
    pub(crate) label: &'static str,
    /// Blocking message (deny / block / exit 2).
    pub(crate) block: Option<String>,
    /// `PreToolUse` asked for approval with this reason.
    pub(crate) ask: Option<String>,
    /// Context for the model.
    pub(crate) context: Option<String>,
    /// `continue: false`: stop the session's work with this reason.
    pub(crate) halt: Option<String>,
    /// For `hook/result.message` when nothing above applies (errors, `systemMessage`).
    pub(crate) note: Option<String>,
}

impl Effect {
    fn labelled(label: &'static str) -> Effect {
        Effect {
            label,
            ..Effect::default()
        }
    }

    /// The `hook/result.message`.
    pub(crate) fn message(&self) -> Option<String> {
        [
            &self.halt,
            &self.block,
            &self.ask,
            &self.context,
            &self.note,
        ]
        .into_iter()
        .flatten()
        .next()
        .cloned()
    }
}

/// Claude Code's JSON output (unknown fields ignored).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct HookJson {
    #[serde(rename = "continue")]
    proceed: Option<bool>,
    stop_reason: Option<String>,
    system_message: Option<String>,
    decision: Option<String>,
    reason: Option<String>,
    hook_specific_output: Option<HookSpecific>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct HookSpecific {
    permission_decision: Option<String>,
    permission_decision_reason: Option<String>,
    additional_context: Option<String>,
}

/// Interpret `out` for `event`.
pub(crate) fn interpret(event: HookEvent, out: &RunOutput) -> Effect {
    match &out.status {
        Status::Exited(0) => success(event, out),
        Status::Exited(2) => blocking(event, out),
        Status::Exited(code) => error(format!("exited with code {code}{}", stderr_suffix(out))),
        Status::Signalled(sig) => error(format!("killed by signal {sig}{}", stderr_suffix(out))),
        Status::TimedOut(limit) => Effect {
            note: Some(format!(
                "timed out after {}s and was stopped",
                limit.as_secs_f64()
            )),
            ..Effect::labelled("timeout")
        },
        Status::Cancelled => Effect::labelled("cancelled"),
        Status::NotStarted(why) => error(format!("could not start: {why}")),
    }
}

fn error(note: String) -> Effect {
    Effect {
        note: Some(note),
        ..Effect::labelled("error")
    }
}

fn stderr_suffix(out: &RunOutput) -> String {
    let err = out.stderr.trim();
    if err.is_empty() {
        String::new()
    } else {
        format!(": {}", cap(err))
    }
}

fn blocking(event: HookEvent, out: &RunOutput) -> Effect {
    let err = out.stderr.trim();
    let text = if err.is_empty() {
        format!(
            "a {} hook exited with code 2 without a message",
            event.as_str()
        )
    } else {
        cap(err)
    };
    match event {
        HookEvent::SessionStart => Effect {
            note: Some(text),
            ..Effect::labelled("error")
        },
        _ => Effect {
            block: Some(text),
            ..Effect::labelled(block_label(event))
        },
    }
}

fn block_label(event: HookEvent) -> &'static str {
    if event == HookEvent::PreToolUse {
        "deny"
    } else {
        "block"
    }
}

fn success(event: HookEvent, out: &RunOutput) -> Effect {
    let stdout = out.stdout.trim();
    let json = if stdout.starts_with('{') {
        serde_json::from_str::<HookJson>(stdout).ok()
    } else {
        None
    };
    let Some(json) = json else {
        let plain_context = matches!(event, HookEvent::UserPromptSubmit | HookEvent::SessionStart)
            && !stdout.is_empty();
        return if plain_context {
            Effect {
                context: Some(cap(stdout)),
                ..Effect::labelled("context")
            }
        } else {
            Effect::labelled(if event == HookEvent::PreToolUse {
                "allow"
            } else {
                "none"
            })
        };
    };
    let specific = json.hook_specific_output.unwrap_or_default();
    let reason = json.reason.as_deref().map(cap);
    let mut effect = Effect {
        note: json.system_message.as_deref().map(cap),
        ..Effect::labelled("none")
    };
    let default_reason = || format!("a {} hook blocked this", event.as_str());
    match event {
        HookEvent::PreToolUse => {
            let why = specific
                .permission_decision_reason
                .as_deref()
                .map(cap)
                .or(reason);
            match (
                specific.permission_decision.as_deref(),
                json.decision.as_deref(),
            ) {
                (Some("deny"), _) | (None, Some("block")) => {
                    effect.block = Some(why.unwrap_or_else(default_reason));
                    effect.label = "deny";
                }
                (Some("ask"), _) => {
                    effect.ask =
                        Some(why.unwrap_or_else(|| "a PreToolUse hook asks for approval".into()));
                    effect.label = "ask";
                }
                _ => effect.label = "allow",
            }
        }
        HookEvent::PostToolUse | HookEvent::UserPromptSubmit | HookEvent::Stop => {
            if json.decision.as_deref() == Some("block") {
                effect.block = Some(reason.unwrap_or_else(default_reason));
                effect.label = "block";
            }
        }
        HookEvent::SessionStart => {}
    }
    if event != HookEvent::Stop
        && let Some(ctx) = specific
            .additional_context
            .as_deref()
            .map(str::trim)
            .filter(|c| !c.is_empty())
    {
        effect.context = Some(cap(ctx));
        if effect.label == "none" {
            effect.label = "context";
        }
    }
    if json.proceed == Some(false) {
        let why = json.stop_reason.as_deref().map(cap);
        effect.halt =
            Some(why.unwrap_or_else(|| format!("a {} hook stopped the work", event.as_str())));
        effect.label = "stop";
    }
    effect
}

/// At most [`MODEL_TEXT_CAP`] characters, with a marker when cut.
pub(crate) fn cap(text: &str) -> String {
    match text.char_indices().nth(MODEL_TEXT_CAP) {
        None => text.to_owned(),
        Some((i, _)) => format!(
            "{}\n[… hook output truncated at {MODEL_TEXT_CAP} characters]",
            &text[..i]
        ),
    }
}

/// Context a hook added for the model: an extra user message from plugin `keel/hooks`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HookContextMessage<'a> {
    pub(crate) event: HookEvent,
    pub(crate) text: &'a str,
}

impl HookContextMessage<'_> {
    pub(crate) fn render(&self) -> String {
        format!(
            "<hook-context event=\"{}\">\n{}\n</hook-context>",
            self.event.as_str(),
            cap(self.text)
        )
    }
}

/// Feedback a `PostToolUse` hook gives about a result, appended to the result's content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PostToolFeedback<'a> {
    pub(crate) blocking: bool,
    pub(crate) text: &'a str,
}

impl PostToolFeedback<'_> {
    pub(crate) fn render(&self) -> String {
        let kind = if self.blocking {
            "PostToolUse hook feedback"
        } else {
            "PostToolUse hook context"
        };
        format!("[{kind}]\n{}", cap(self.text))
    }
}

/// Why a `Stop` hook kept the turn going: the next step's input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StopHookReason<'a> {
    pub(crate) text: &'a str,
}

impl StopHookReason<'_> {
    pub(crate) fn render(&self) -> String {
        format!("A Stop hook asked you to keep working:\n{}", cap(self.text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(status: Status, stdout: &str, stderr: &str) -> RunOutput {
        RunOutput {
            command: "x".into(),
            status,
            stdout: stdout.into(),
            stderr: stderr.into(),
            duration: Duration::ZERO,
        }
    }

    #[test]
    fn pre_tool_use_decisions() {
        let deny = r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"no"}}"#;
        let e = interpret(HookEvent::PreToolUse, &run(Status::Exited(0), deny, ""));
        assert_eq!((e.label, e.block.as_deref()), ("deny", Some("no")));
        let legacy = r#"{"decision":"block","reason":"old"}"#;
        assert_eq!(
            interpret(HookEvent::PreToolUse, &run(Status::Exited(0), legacy, ""))
                .block
                .as_deref(),
            Some("old")
        );
        let ask = r#"{"hookSpecificOutput":{"permissionDecision":"ask"}}"#;
        assert_eq!(
            interpret(HookEvent::PreToolUse, &run(Status::Exited(0), ask, "")).label,
            "ask"
        );
        let e = interpret(
            HookEvent::PreToolUse,
            &run(Status::Exited(2), "", "stop it\n"),
        );
        assert_eq!(e.block.as_deref(), Some("stop it"));
        let e = interpret(HookEvent::PreToolUse, &run(Status::Exited(1), "", "oops"));
        assert_eq!((e.label, e.block.is_none()), ("error", true));
    }

    #[test]
    fn plain_stdout_is_context_only_where_claude_says_so() {
        let e = interpret(
            HookEvent::UserPromptSubmit,
            &run(Status::Exited(0), "hello\n", ""),
        );
        assert_eq!(e.context.as_deref(), Some("hello"));
        let e = interpret(
            HookEvent::PostToolUse,
            &run(Status::Exited(0), "hello\n", ""),
        );
        assert_eq!(e.context, None);
    }

    #[test]
    fn continue_false_halts_and_cap_cuts() {
        let e = interpret(
            HookEvent::PostToolUse,
            &run(
                Status::Exited(0),
                r#"{"continue":false,"stopReason":"enough"}"#,
                "",
            ),
        );
        assert_eq!((e.label, e.halt.as_deref()), ("stop", Some("enough")));
        let long = "é".repeat(MODEL_TEXT_CAP + 5);
        let c = cap(&long);
        assert!(
            c.starts_with(&"é".repeat(MODEL_TEXT_CAP)) && c.contains("truncated"),
            "{}",
            &c[c.len() - 60..]
        );
    }
}
