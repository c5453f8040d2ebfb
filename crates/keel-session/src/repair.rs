//! Crash repair: closing what a crash left open, by appending (never truncating).
//!
//! For the open step's last assistant message, every tool call without a `tool/result` gets an
//! error result: `TOOL_OUTCOME_UNKNOWN` when a `tool/call` event shows it entered the pipeline
//! (it may have had effects), `TOOL_NOT_STARTED` otherwise. Then `step/end` if a step is open,
//! then `turn/end{interrupted}` if a turn is open. [`Session::plan_repair`] computes these
//! events without mutating; [`Session::repair`] appends them.

use crate::error::RepairError;
use crate::session::{Session, now_ms};
use keel_protocol::{
    ContentBlock, EventBody, Message, MessageSource, Role, Seq, SessionEvent, StepRef, SurfaceOp,
    ToolErrorCode, ToolResultBlock, ToolResultEvent, TurnEnd, TurnEndReason,
};

/// What [`Session::repair`] appended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RepairReport {
    /// Calls closed with `TOOL_OUTCOME_UNKNOWN` (call ids).
    pub outcome_unknown: Vec<String>,
    /// Calls closed with `TOOL_NOT_STARTED` (call ids).
    pub not_started: Vec<String>,
    /// The step closed, if one was open.
    pub closed_step: Option<StepRef>,
    /// The turn closed as interrupted, if one was open.
    pub closed_turn: Option<u32>,
    /// Seqs of the appended events.
    pub appended: Vec<Seq>,
}

impl RepairReport {
    /// True when nothing needed closing.
    pub fn is_noop(&self) -> bool {
        self.appended.is_empty()
    }
}

/// One sentence for a person: what crash repair closed, naming the turn, the step and the
/// call ids, e.g. `closed turn 2 as interrupted (it stopped in step 3); the outcome of 1 tool
/// call is unknown (call_7): it may or may not have taken effect`.
impl std::fmt::Display for RepairReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        match (self.closed_turn, self.closed_step) {
            (Some(turn), Some(step)) => parts.push(format!(
                "closed turn {turn} as interrupted (it stopped in step {})",
                step.step
            )),
            (Some(turn), None) => parts.push(format!("closed turn {turn} as interrupted")),
            (None, Some(step)) => {
                parts.push(format!("closed step {} of turn {}", step.step, step.turn))
            }
            (None, None) => {}
        }
        let calls = |n: usize| {
            if n == 1 {
                "1 tool call".to_owned()
            } else {
                format!("{n} tool calls")
            }
        };
        if !self.outcome_unknown.is_empty() {
            let n = self.outcome_unknown.len();
            parts.push(format!(
                "the outcome of {} is unknown ({}): {} may or may not have taken effect",
                calls(n),
                self.outcome_unknown.join(", "),
                if n == 1 { "it" } else { "they" }
            ));
        }
        if !self.not_started.is_empty() {
            parts.push(format!(
                "{} never started ({})",
                calls(self.not_started.len()),
                self.not_started.join(", ")
            ));
        }
        if parts.is_empty() {
            f.write_str("nothing to repair")
        } else {
            f.write_str(&parts.join("; "))
        }
    }
}

/// The model-visible text of a synthesised crash-repair result: `CODE: explanation`, the same
/// shape as every other tool error result, so the model sees the code.
fn repair_text(code: ToolErrorCode, name: &str) -> String {
    match code {
        ToolErrorCode::ToolOutcomeUnknown => format!(
            "{}: the session stopped (crash or kill) while this `{name}` call was running, so its outcome is \
             unknown: it may or may not have taken effect. Check the current state before retrying it.",
            code.as_str()
        ),
        _ => format!(
            "{}: the session stopped (crash or kill) before this `{name}` call was started: it did not run \
             and had no effect.",
            code.as_str()
        ),
    }
}

impl Session {
    /// The events crash repair would append now, with their seqs and the current time; nothing
    /// is mutated. Empty when no turn is open.
    pub fn plan_repair(&self) -> (Vec<SessionEvent>, RepairReport) {
        let mut out = Vec::new();
        let mut report = RepairReport::default();
        let time = now_ms();
        let mut seq = self.next_seq();
        let state = self.tracker.state;
        if let Some(step) = state.open_step {
            for call in self.tracker.calls.iter().filter(|c| !c.answered) {
                let code = if call.started.is_some() {
                    report.outcome_unknown.push(call.id.clone());
                    ToolErrorCode::ToolOutcomeUnknown
                } else {
                    report.not_started.push(call.id.clone());
                    ToolErrorCode::ToolNotStarted
                };
                let message = Message {
                    role: Role::User,
                    content: vec![ContentBlock::ToolResult(ToolResultBlock {
                        tool_call_id: call.id.clone(),
                        content: vec![ContentBlock::text(repair_text(code, &call.name))],
                        is_error: true,
                    })],
                    source: MessageSource::tool(call.id.clone()),
                    id: uuid::Uuid::new_v4().to_string(),
                };
                let body = EventBody::ToolResult(Box::new(ToolResultEvent {
                    turn: step.turn,
                    step: step.step,
                    message,
                    meta: Some(serde_json::json!({ "code": code.as_str() })),
                }));
                let mut ev = SessionEvent::new(seq, time, body);
                ev.surface_op = Some(SurfaceOp::Append);
                ev.source_event_seqs = call
                    .started
                    .or(self.tracker.assistant_seq)
                    .into_iter()
                    .collect();
                out.push(ev);
                seq = seq.next();
            }
            out.push(SessionEvent::new(seq, time, EventBody::StepEnd(step)));
            report.closed_step = Some(step);
            seq = seq.next();
        }
        if let Some(turn) = state.open_turn {
            out.push(SessionEvent::new(
                seq,
                time,
                EventBody::TurnEnd(TurnEnd {
                    turn,
                    reason: TurnEndReason::Interrupted,
                }),
            ));
            report.closed_turn = Some(turn);
        }
        report.appended = out.iter().map(|e| e.seq).collect();
        (out, report)
    }

    /// Append the crash-repair closers (see [`Session::plan_repair`]). Returns what was closed and
    /// the appended seqs; the events are then available through [`Session::event`] for writing.
    pub fn repair(&mut self) -> Result<RepairReport, RepairError> {
        let (events, report) = self.plan_repair();
        for ev in events {
            self.append(ev)?;
        }
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn a_repair_report_reads_as_a_sentence() {
        let report = RepairReport {
            outcome_unknown: vec!["call_7".into()],
            not_started: vec!["call_8".into(), "call_9".into()],
            closed_step: Some(StepRef { turn: 2, step: 3 }),
            closed_turn: Some(2),
            appended: vec![Seq(10), Seq(11)],
        };
        assert_eq!(
            report.to_string(),
            "closed turn 2 as interrupted (it stopped in step 3); the outcome of 1 tool call is \
             unknown (call_7): it may or may not have taken effect; 2 tool calls never started \
             (call_8, call_9)"
        );
        let step_only = RepairReport {
            closed_step: Some(StepRef { turn: 1, step: 1 }),
            ..RepairReport::default()
        };
        assert_eq!(step_only.to_string(), "closed step 1 of turn 1");
        assert_eq!(RepairReport::default().to_string(), "nothing to repair");
    }
}
