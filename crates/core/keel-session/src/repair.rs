//! Crash repair: closing what a crash left open, by appending (never truncating).
//!
//! For the open step's last assistant message, every tool call without a `tool/result` gets an
//! error result: `TOOL_OUTCOME_UNKNOWN` when a `tool/call` event shows it entered the pipeline
//! (it may have had effects; for a `run_code` call the result lists the sub-calls its program
//! had started, from the `tool/code-dispatch*` events, none of which is re-run),
//! `TOOL_NOT_STARTED` otherwise. Then `step/end` if a step is open,
//! then `turn/end{interrupted}` if a turn is open. [`Session::plan_repair`] computes these
//! events without mutating; [`Session::repair`] appends them.

use crate::error::RepairError;
use crate::session::{Session, now_ms};
use keel_protocol::{
    CODE_DISPATCH_EVENT, CODE_DISPATCH_START_EVENT, ContentBlock, EventBody, Message,
    MessageSource, Role, Seq, SessionEvent, StepRef, SurfaceOp, ToolErrorCode, ToolResultBlock,
    ToolResultEvent, TurnEnd, TurnEndReason,
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
    pub closed_turn: Option<keel_protocol::TurnNo>,
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

/// The sub-calls a program running inside call `parent` had started, in order: `(sub-call id,
/// tool, settled)`. Empty for calls that run no program.
fn sub_calls<'a>(
    events: impl Iterator<Item = &'a SessionEvent>,
    parent: &str,
) -> Vec<(String, String, bool)> {
    let mut out: Vec<(String, String, bool)> = Vec::new();
    for e in events {
        let EventBody::Other(o) = &e.body else {
            continue;
        };
        let ty = o.type_name.as_str();
        if (ty != CODE_DISPATCH_START_EVENT && ty != CODE_DISPATCH_EVENT)
            || o.data.get("parentCallId").and_then(|v| v.as_str()) != Some(parent)
        {
            continue;
        }
        let field = |k: &str| {
            o.data
                .get(k)
                .and_then(|v| v.as_str())
                .unwrap_or_default()
                .to_owned()
        };
        let id = field("subCallId");
        if ty == CODE_DISPATCH_START_EVENT {
            out.push((id, field("name"), false));
        } else if let Some(started) = out.iter_mut().find(|s| s.0 == id) {
            started.2 = true;
        }
    }
    out
}

/// What the model reads about a program's sub-calls in a `TOOL_OUTCOME_UNKNOWN` result.
fn sub_call_text(subs: &[(String, String, bool)]) -> String {
    let listed: Vec<String> = subs
        .iter()
        .map(|(id, name, settled)| {
            let state = if *settled {
                "finished"
            } else {
                "outcome unknown"
            };
            format!("{name} ({id}, {state})")
        })
        .collect();
    format!(
        " Inside it, these tool calls of the program had started: {}. None will be run again.",
        listed.join(", ")
    )
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
                let mut text = repair_text(code, &call.name);
                if let Some(started) = call.started {
                    let after = self.whole_event_iter().skip_while(|e| e.seq < started);
                    let subs = sub_calls(after, &call.id);
                    if !subs.is_empty() {
                        text.push_str(&sub_call_text(&subs));
                    }
                }
                let message = Message {
                    role: Role::User,
                    content: vec![ContentBlock::ToolResult(ToolResultBlock {
                        tool_call_id: call.id.clone(),
                        content: vec![ContentBlock::text(text)],
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
    fn a_programs_started_sub_calls_are_listed_with_their_state() {
        let other = |seq: u64, ty: &str, data: serde_json::Value| {
            SessionEvent::new(
                Seq(seq),
                0,
                EventBody::Other(Box::new(keel_protocol::OtherEvent {
                    type_name: ty.into(),
                    data,
                })),
            )
        };
        let ids = |sub: &str, name: &str, parent: &str| serde_json::json!({"rootCallId": parent, "parentCallId": parent, "subCallId": sub, "name": name});
        let events = [
            other(1, CODE_DISPATCH_START_EVENT, ids("c:code:1", "read", "c")),
            other(2, CODE_DISPATCH_START_EVENT, ids("c:code:2", "bash", "c")),
            other(3, CODE_DISPATCH_EVENT, ids("c:code:1", "read", "c")),
            other(4, CODE_DISPATCH_START_EVENT, ids("d:code:1", "read", "d")),
        ];
        let subs = sub_calls(events.iter(), "c");
        assert_eq!(
            subs,
            vec![
                ("c:code:1".to_owned(), "read".to_owned(), true),
                ("c:code:2".to_owned(), "bash".to_owned(), false)
            ]
        );
        assert_eq!(
            sub_call_text(&subs),
            " Inside it, these tool calls of the program had started: read (c:code:1, finished), \
             bash (c:code:2, outcome unknown). None will be run again."
        );
    }

    #[test]
    fn a_repair_report_reads_as_a_sentence() {
        let report = RepairReport {
            outcome_unknown: vec!["call_7".into()],
            not_started: vec!["call_8".into(), "call_9".into()],
            closed_step: Some(StepRef {
                turn: keel_protocol::TurnNo(2),
                step: keel_protocol::StepNo(3),
            }),
            closed_turn: Some(keel_protocol::TurnNo(2)),
            appended: vec![Seq(10), Seq(11)],
        };
        assert_eq!(
            report.to_string(),
            "closed turn 2 as interrupted (it stopped in step 3); the outcome of 1 tool call is \
             unknown (call_7): it may or may not have taken effect; 2 tool calls never started \
             (call_8, call_9)"
        );
        let step_only = RepairReport {
            closed_step: Some(StepRef {
                turn: keel_protocol::TurnNo(1),
                step: keel_protocol::StepNo(1),
            }),
            ..RepairReport::default()
        };
        assert_eq!(step_only.to_string(), "closed step 1 of turn 1");
        assert_eq!(RepairReport::default().to_string(), "nothing to repair");
    }
}
