//! Turn/step bracket invariants, tracked incrementally as events are appended.
//!
//! The [`Tracker`] sees every event once (deltas only by turn and step) and keeps the current
//! [`TurnState`], the tool calls the open step still owes results for (what crash repair needs),
//! and every [`InvariantViolation`] found so far. Violations do not stop an append: the log is the
//! truth, the checker reports on it ([`crate::Session::check_invariants`]).
//!
//! Rules: turns open and close in strictly increasing order, one at a time; steps open and close
//! inside their turn, one at a time, numbered upwards; `assistant/chunk`, `assistant/message` and
//! `tool/call` belong to the open step with the same turn/step; an appended `tool/result` belongs
//! to the open step and answers one call of the step's last assistant message, once; a step
//! does not end while calls are unanswered; a turn does not end while a step is open; a seeded
//! session has its `session/end-seed` exactly at `seedLength`. Replacing `tool/result`s
//! (compaction) are exempt from step rules.

use keel_protocol::{ContentBlock, EventBody, Seq, SessionEvent, StepRef, SurfaceOp};
use keel_protocol::{StepNo, TurnNo};

/// Where the session is in its turn/step structure.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TurnState {
    /// The highest turn number opened so far (0 when none).
    pub last_turn: TurnNo,
    /// The open turn, if any.
    pub open_turn: Option<TurnNo>,
    /// The open step, if any.
    pub open_step: Option<StepRef>,
}

/// A broken turn/step bracket rule, found by [`crate::Session::check_invariants`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvariantViolation {
    /// A `turn/start` while another turn is open.
    #[error("seq {seq}: turn/start {turn} while turn {open} is open")]
    TurnStartWhileOpen {
        /// The event.
        seq: Seq,
        /// Turn being opened.
        turn: TurnNo,
        /// Turn already open.
        open: TurnNo,
    },
    /// A `turn/start` whose number does not increase.
    #[error("seq {seq}: turn/start {turn} after turn {last}")]
    TurnNotIncreasing {
        /// The event.
        seq: Seq,
        /// Turn being opened.
        turn: TurnNo,
        /// Highest turn so far.
        last: TurnNo,
    },
    /// A `turn/end` that does not close the open turn.
    #[error("seq {seq}: turn/end {turn} but the open turn is {open:?}")]
    TurnEndMismatch {
        /// The event.
        seq: Seq,
        /// Turn named.
        turn: TurnNo,
        /// The open turn.
        open: Option<TurnNo>,
    },
    /// A `turn/end` while a step is open.
    #[error("seq {seq}: turn/end {turn} while step {}.{} is open", .step.turn, .step.step)]
    TurnEndWithOpenStep {
        /// The event.
        seq: Seq,
        /// Turn named.
        turn: TurnNo,
        /// The open step.
        step: StepRef,
    },
    /// A `step/start` outside its turn, while another step is open, or not numbered upwards.
    #[error("seq {seq}: step/start {}.{} is misplaced: {why}", .step.turn, .step.step)]
    StepStartMisplaced {
        /// The event.
        seq: Seq,
        /// The step named.
        step: StepRef,
        /// What is wrong.
        why: &'static str,
    },
    /// A `step/end` that does not close the open step.
    #[error("seq {seq}: step/end {}.{} but the open step is {}", .step.turn, .step.step, fmt_step(.open))]
    StepEndMismatch {
        /// The event.
        seq: Seq,
        /// The step named.
        step: StepRef,
        /// The open step.
        open: Option<StepRef>,
    },
    /// A `step/end` while tool calls of the step have no result.
    #[error("seq {seq}: step/end {}.{} while calls {call_ids:?} have no tool/result", .step.turn, .step.step)]
    StepEndWithUnansweredCalls {
        /// The event.
        seq: Seq,
        /// The step.
        step: StepRef,
        /// The unanswered call ids.
        call_ids: Vec<String>,
    },
    /// A step-scoped event (`assistant/chunk`, `assistant/message`, `tool/call`, appended
    /// `tool/result`) outside the open step it names.
    #[error("seq {seq}: {type_name} for step {}.{} but the open step is {}", .step.turn, .step.step, fmt_step(.open))]
    OutsideStep {
        /// The event.
        seq: Seq,
        /// Its type.
        type_name: &'static str,
        /// The step it names.
        step: StepRef,
        /// The open step.
        open: Option<StepRef>,
    },
    /// A `tool/call` or `tool/result` for a call id the step's last assistant message did not
    /// propose.
    #[error("seq {seq}: {type_name} for unknown call {call_id:?}")]
    UnknownCall {
        /// The event.
        seq: Seq,
        /// Its type.
        type_name: &'static str,
        /// The call id.
        call_id: String,
    },
    /// A second appended `tool/result` for one call.
    #[error("seq {seq}: second tool/result for call {call_id:?}")]
    DuplicateResult {
        /// The event.
        seq: Seq,
        /// The call id.
        call_id: String,
    },
    /// A seeded session whose `session/end-seed` is missing or not at `seedLength`.
    #[error("seeded session (seedLength {seed_length}): session/end-seed {}", match .found { Some(s) => format!("found at seq {s}"), None => "missing".to_owned() })]
    EndSeedMisplaced {
        /// The header's seed length.
        seed_length: u64,
        /// Where a `session/end-seed` was found.
        found: Option<Seq>,
    },
}

fn fmt_step(s: &Option<StepRef>) -> String {
    match s {
        Some(s) => format!("{}.{}", s.turn, s.step),
        None => "none".to_owned(),
    }
}

/// A tool call of the open step's last assistant message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PendingCall {
    pub(crate) id: String,
    pub(crate) name: String,
    /// Seq of its `tool/call` event, when the call entered the pipeline.
    pub(crate) started: Option<Seq>,
    pub(crate) answered: bool,
}

/// Incremental checker state.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tracker {
    pub(crate) state: TurnState,
    last_step: StepNo,
    /// Seq of the open step's last assistant message.
    pub(crate) assistant_seq: Option<Seq>,
    pub(crate) calls: Vec<PendingCall>,
    seed_length: Option<u64>,
    end_seed_at: Option<Seq>,
    pub(crate) violations: Vec<InvariantViolation>,
    /// Seq of the last `turn/end`.
    pub(crate) last_turn_end: Option<Seq>,
    pub(crate) turns: u64,
}

impl Tracker {
    pub(crate) fn new(seed_length: Option<u64>) -> Tracker {
        Tracker {
            seed_length,
            ..Tracker::default()
        }
    }

    fn in_step(&mut self, seq: Seq, type_name: &'static str, step: StepRef) -> bool {
        if self.state.open_step == Some(step) {
            true
        } else {
            self.violations.push(InvariantViolation::OutsideStep {
                seq,
                type_name,
                step,
                open: self.state.open_step,
            });
            false
        }
    }

    /// A delta chunk (the only thing a delta contributes is its step).
    pub(crate) fn observe_chunk(&mut self, seq: Seq, turn: TurnNo, step: StepNo) {
        self.in_step(seq, "assistant/chunk", StepRef { turn, step });
    }

    /// `n` delta chunks of one step from `seq0` on (a packed row).
    pub(crate) fn observe_chunks(&mut self, seq0: Seq, n: u64, turn: TurnNo, step: StepNo) {
        let step = StepRef { turn, step };
        if self.state.open_step != Some(step) {
            let open = self.state.open_step;
            self.violations
                .extend((0..n).map(|i| InvariantViolation::OutsideStep {
                    seq: Seq(seq0.0 + i),
                    type_name: "assistant/chunk",
                    step,
                    open,
                }));
        }
    }

    pub(crate) fn observe(&mut self, ev: &SessionEvent) {
        let seq = ev.seq;
        match &ev.body {
            EventBody::TurnStart(t) => {
                if let Some(open) = self.state.open_turn {
                    self.violations
                        .push(InvariantViolation::TurnStartWhileOpen {
                            seq,
                            turn: t.turn,
                            open,
                        });
                } else if t.turn <= self.state.last_turn {
                    self.violations.push(InvariantViolation::TurnNotIncreasing {
                        seq,
                        turn: t.turn,
                        last: self.state.last_turn,
                    });
                }
                self.state.open_turn = Some(t.turn);
                self.state.open_step = None;
                self.state.last_turn = self.state.last_turn.max(t.turn);
                self.last_step = StepNo(0);
                self.turns += 1;
            }
            EventBody::TurnEnd(t) => {
                if self.state.open_turn != Some(t.turn) {
                    self.violations.push(InvariantViolation::TurnEndMismatch {
                        seq,
                        turn: t.turn,
                        open: self.state.open_turn,
                    });
                }
                if let Some(step) = self.state.open_step {
                    self.violations
                        .push(InvariantViolation::TurnEndWithOpenStep {
                            seq,
                            turn: t.turn,
                            step,
                        });
                }
                self.state.open_turn = None;
                self.state.open_step = None;
                self.last_turn_end = Some(seq);
            }
            EventBody::StepStart(s) => {
                let why = if self.state.open_turn != Some(s.turn) {
                    Some("its turn is not open")
                } else if self.state.open_step.is_some() {
                    Some("another step is open")
                } else if s.step <= self.last_step {
                    Some("step numbers must increase within a turn")
                } else {
                    None
                };
                if let Some(why) = why {
                    self.violations
                        .push(InvariantViolation::StepStartMisplaced { seq, step: *s, why });
                }
                self.state.open_step = Some(*s);
                self.last_step = self.last_step.max(s.step);
                self.assistant_seq = None;
                self.calls.clear();
            }
            EventBody::StepEnd(s) => {
                if self.state.open_step != Some(*s) {
                    self.violations.push(InvariantViolation::StepEndMismatch {
                        seq,
                        step: *s,
                        open: self.state.open_step,
                    });
                } else {
                    let call_ids: Vec<String> = self
                        .calls
                        .iter()
                        .filter(|c| !c.answered)
                        .map(|c| c.id.clone())
                        .collect();
                    if !call_ids.is_empty() {
                        self.violations
                            .push(InvariantViolation::StepEndWithUnansweredCalls {
                                seq,
                                step: *s,
                                call_ids,
                            });
                    }
                }
                self.state.open_step = None;
                self.assistant_seq = None;
                self.calls.clear();
            }
            EventBody::AssistantChunk(c) => self.observe_chunk(seq, c.turn, c.step),
            EventBody::AssistantMessage(m)
                if self.in_step(
                    seq,
                    "assistant/message",
                    StepRef {
                        turn: m.turn,
                        step: m.step,
                    },
                ) =>
            {
                self.assistant_seq = Some(seq);
                self.calls = m
                    .message
                    .tool_calls()
                    .map(|c| PendingCall {
                        id: c.id.clone(),
                        name: c.name.clone(),
                        started: None,
                        answered: false,
                    })
                    .collect();
            }
            EventBody::ToolCall(c)
                if self.in_step(
                    seq,
                    "tool/call",
                    StepRef {
                        turn: c.turn,
                        step: c.step,
                    },
                ) =>
            {
                match self.calls.iter_mut().find(|p| p.id == c.call_id) {
                    Some(p) => p.started = p.started.or(Some(seq)),
                    None => self.violations.push(InvariantViolation::UnknownCall {
                        seq,
                        type_name: "tool/call",
                        call_id: c.call_id.clone(),
                    }),
                }
            }
            EventBody::ToolResult(r) => {
                if matches!(ev.surface_op, Some(SurfaceOp::Replace { .. })) {
                    return;
                }
                if !self.in_step(
                    seq,
                    "tool/result",
                    StepRef {
                        turn: r.turn,
                        step: r.step,
                    },
                ) {
                    return;
                }
                for block in &r.message.content {
                    let ContentBlock::ToolResult(b) = block else {
                        continue;
                    };
                    match self.calls.iter_mut().find(|p| p.id == b.tool_call_id) {
                        Some(p) if p.answered => {
                            self.violations.push(InvariantViolation::DuplicateResult {
                                seq,
                                call_id: b.tool_call_id.clone(),
                            })
                        }
                        Some(p) => p.answered = true,
                        None => self.violations.push(InvariantViolation::UnknownCall {
                            seq,
                            type_name: "tool/result",
                            call_id: b.tool_call_id.clone(),
                        }),
                    }
                }
            }
            // A fork of a fork inherits its parent's end-seed too: keep the one at our seed
            // length if there is one, else the last seen.
            EventBody::SessionEndSeed(_)
                if self
                    .end_seed_at
                    .is_none_or(|s| Some(s.0) != self.seed_length) =>
            {
                self.end_seed_at = Some(seq);
            }
            _ => {}
        }
    }

    /// Violations so far plus end-of-log checks (seeded sessions).
    pub(crate) fn report(&self, len: u64) -> Vec<InvariantViolation> {
        let mut out = self.violations.clone();
        if let Some(seed_length) = self.seed_length {
            let ok = match self.end_seed_at {
                Some(s) => s.0 == seed_length,
                None => len <= seed_length,
            };
            if !ok {
                out.push(InvariantViolation::EndSeedMisplaced {
                    seed_length,
                    found: self.end_seed_at,
                });
            }
        }
        out
    }
}
