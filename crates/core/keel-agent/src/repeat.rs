//! The repeated-failure breaker: a model that calls the same tool with the same arguments and
//! gets the same failure again and again is told to change course, then stopped.
//!
//! Every committed tool result of a turn goes through [`RepeatedFailures::observe`], in commit
//! order. A failure is an error result, or a `bash` result with a non-zero `exitCode`; two
//! failures are the same when the tool name, the arguments (compared as JSON values, so
//! whitespace does not matter) and the result text are equal. Any other result breaks the run.
//! At `limit` identical failures in a row the result carries a [`RepeatNotice`] telling the
//! model to stop repeating the call; at twice `limit` the notice says the turn was stopped and
//! the loop ends the turn after the step (`REPEATED_TOOL_FAILURE`). A `limit` of 0 turns the
//! breaker off.

use keel_protocol::TurnNo;
use keel_protocol::{ContentBlock, ToolCallBlock};
use keel_tools::ToolOutcome;
use serde_json::Value;

/// `turn/end` error code of a turn stopped by the breaker.
pub const REPEATED_TOOL_FAILURE: &str = "REPEATED_TOOL_FAILURE";

/// Longest error text quoted in a notice or a turn-end message.
const MAX_QUOTED: usize = 500;

/// What the breaker says about one committed result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Commit the result as it is.
    Pass,
    /// The `count`-th identical failure: add the notice to the result.
    Warn(RepeatNotice),
    /// The last identical failure allowed: add the notice and stop the turn after the step.
    Stop(RepeatNotice),
}

/// The model-visible text appended to a repeated failure's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepeatNotice {
    /// The tool called.
    pub tool: String,
    /// Identical failures in a row, this one included.
    pub count: u32,
    /// The failure's text (bounded).
    pub error: String,
    /// Whether the turn is stopped after this step.
    pub stops: bool,
}

impl RepeatNotice {
    /// The text appended to the result.
    pub fn text(&self) -> String {
        if self.stops {
            format!(
                "keel: this is the {} identical failing call of `{}` in a row (same arguments, same \
                 error); keel stopped the turn. Tell the user what blocked you instead of repeating \
                 the call.",
                ordinal(self.count),
                self.tool
            )
        } else {
            format!(
                "keel: this is the {} identical failing call of `{}` in a row (same arguments, same \
                 error). Repeating it will fail the same way. Change course: fix the arguments, use \
                 another tool or approach, or tell the user what is blocking you. keel stops the turn \
                 if the same call keeps failing.",
                ordinal(self.count),
                self.tool
            )
        }
    }

    /// The `turn/end` message of a turn the breaker stopped, naming the tool and the error.
    pub fn stop_message(&self) -> String {
        format!(
            "stopped: the model called `{}` {} times in a row with the same arguments and it failed \
             the same way each time: {}",
            self.tool, self.count, self.error
        )
    }

    /// `outcome` with the notice appended as a text block.
    pub fn apply(&self, outcome: &ToolOutcome) -> ToolOutcome {
        let mut out = outcome.clone();
        out.content
            .push(ContentBlock::text(format!("\n\n{}", self.text())));
        out
    }
}

fn ordinal(n: u32) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// One failure, as compared with the next.
#[derive(Debug, Clone, PartialEq)]
struct Failure {
    tool: String,
    arguments: Value,
    error: String,
}

/// The run of identical failures of the current turn.
#[derive(Debug, Default)]
pub(crate) struct RepeatedFailures {
    turn: TurnNo,
    last: Option<Failure>,
    count: u32,
}

impl RepeatedFailures {
    /// Note the result of `call` in `turn` with a breaker at `limit` (0 = off).
    pub(crate) fn observe(
        &mut self,
        limit: u32,
        turn: TurnNo,
        call: &ToolCallBlock,
        outcome: &ToolOutcome,
    ) -> Verdict {
        if self.turn != turn {
            *self = RepeatedFailures {
                turn,
                ..RepeatedFailures::default()
            };
        }
        if limit == 0 || !failed(outcome) {
            self.last = None;
            self.count = 0;
            return Verdict::Pass;
        }
        let failure = Failure {
            tool: call.name.clone(),
            arguments: serde_json::from_str(&call.arguments)
                .unwrap_or_else(|_| Value::String(call.arguments.clone())),
            error: outcome.text(),
        };
        if self.last.as_ref() == Some(&failure) {
            self.count += 1;
        } else {
            self.count = 1;
        }
        let count = self.count;
        let notice = |stops| RepeatNotice {
            tool: failure.tool.clone(),
            count,
            error: bounded(&failure.error),
            stops,
        };
        let verdict = if count >= limit.saturating_mul(2) {
            Verdict::Stop(notice(true))
        } else if count >= limit {
            Verdict::Warn(notice(false))
        } else {
            Verdict::Pass
        };
        self.last = Some(failure);
        verdict
    }
}

/// An error result, or a command that exited non-zero.
fn failed(outcome: &ToolOutcome) -> bool {
    outcome.is_error
        || outcome
            .meta
            .as_ref()
            .and_then(|m| m.get("exitCode"))
            .and_then(Value::as_i64)
            .is_some_and(|c| c != 0)
}

fn bounded(text: &str) -> String {
    let text = text.trim();
    if text.len() <= MAX_QUOTED {
        return text.to_owned();
    }
    let cut = text.floor_char_boundary(MAX_QUOTED);
    format!("{}…", &text[..cut])
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_protocol::ToolErrorCode;
    use pretty_assertions::assert_eq;

    fn call(name: &str, args: &str) -> ToolCallBlock {
        ToolCallBlock {
            id: "c".into(),
            name: name.into(),
            arguments: args.into(),
        }
    }

    fn fail(text: &str) -> ToolOutcome {
        ToolOutcome::error("c", ToolErrorCode::InvalidArgs, text)
    }

    fn kinds(verdicts: &[Verdict]) -> Vec<&'static str> {
        verdicts
            .iter()
            .map(|v| match v {
                Verdict::Pass => "pass",
                Verdict::Warn(_) => "warn",
                Verdict::Stop(_) => "stop",
            })
            .collect()
    }

    #[test]
    fn identical_failures_warn_at_the_limit_and_stop_at_twice_it() {
        let mut r = RepeatedFailures::default();
        let c = call("read", r#"{"path": "nope.txt"}"#);
        let same = call("read", r#"{"path":"nope.txt"}"#);
        let verdicts: Vec<Verdict> = (0..6)
            .map(|i| {
                let c = if i % 2 == 0 { &c } else { &same };
                r.observe(3, keel_protocol::TurnNo(1), c, &fail("no such file"))
            })
            .collect();
        assert_eq!(
            kinds(&verdicts),
            ["pass", "pass", "warn", "warn", "warn", "stop"]
        );
        let Verdict::Stop(notice) = &verdicts[5] else {
            unreachable!()
        };
        assert_eq!(notice.count, 6);
        assert_eq!(
            notice.stop_message(),
            "stopped: the model called `read` 6 times in a row with the same arguments and it \
             failed the same way each time: INVALID_ARGS: no such file"
        );
        let Verdict::Warn(warn) = &verdicts[2] else {
            unreachable!()
        };
        assert!(warn.text().contains("3rd identical failing call of `read`"));
        assert!(warn.text().contains("Change course"));
    }

    #[test]
    fn a_different_call_error_success_or_turn_breaks_the_run() {
        let mut r = RepeatedFailures::default();
        let a = call("read", r#"{"path":"a"}"#);
        let b = call("read", r#"{"path":"b"}"#);
        let ok = ToolOutcome {
            call_id: "c".into(),
            content: vec![ContentBlock::text("fine")],
            is_error: false,
            meta: None,
        };
        let seq = [
            r.observe(2, keel_protocol::TurnNo(1), &a, &fail("x")),
            r.observe(2, keel_protocol::TurnNo(1), &b, &fail("x")),
            r.observe(2, keel_protocol::TurnNo(1), &b, &fail("y")),
            r.observe(2, keel_protocol::TurnNo(1), &b, &ok),
            r.observe(2, keel_protocol::TurnNo(1), &b, &fail("y")),
            r.observe(2, keel_protocol::TurnNo(2), &b, &fail("y")),
            r.observe(2, keel_protocol::TurnNo(2), &b, &fail("y")),
        ];
        assert_eq!(
            kinds(&seq),
            ["pass", "pass", "pass", "pass", "pass", "pass", "warn"]
        );
        // Off.
        let mut off = RepeatedFailures::default();
        for _ in 0..10 {
            assert_eq!(
                off.observe(0, keel_protocol::TurnNo(1), &a, &fail("x")),
                Verdict::Pass
            );
        }
    }

    #[test]
    fn a_command_exiting_non_zero_is_a_failure() {
        let mut r = RepeatedFailures::default();
        let c = call("bash", r#"{"command":"make"}"#);
        let exited = ToolOutcome {
            call_id: "c".into(),
            content: vec![ContentBlock::text("error\n[exit code: 2]")],
            is_error: false,
            meta: Some(serde_json::json!({"exitCode": 2})),
        };
        assert!(matches!(
            r.observe(1, keel_protocol::TurnNo(1), &c, &exited),
            Verdict::Warn(_)
        ));
    }
}
