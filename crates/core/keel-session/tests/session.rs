//! Append validation, invariants, derive, fork and lineage, and the serde round trip of every
//! event type.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::{B, header};
use keel_protocol::*;
use keel_session::*;
use pretty_assertions::assert_eq;
use serde_json::json;

fn ev(seq: u64, body: EventBody) -> SessionEvent {
    SessionEvent::new(Seq(seq), 5, body)
}

#[test]
fn append_refuses_gaps_and_misplaced_surface_ops() {
    let mut s = Session::new(header("s"));
    let e = s
        .append(ev(
            1,
            EventBody::TurnStart(TurnStart {
                turn: keel_protocol::TurnNo(1),
            }),
        ))
        .unwrap_err();
    assert!(
        matches!(
            e,
            AppendError::SeqGap {
                expected: Seq(0),
                got: Seq(1)
            }
        ),
        "{e}"
    );
    let mut bad = ev(
        0,
        EventBody::TurnStart(TurnStart {
            turn: keel_protocol::TurnNo(1),
        }),
    );
    bad.surface_op = Some(SurfaceOp::Append);
    assert!(matches!(
        s.append(bad).unwrap_err(),
        AppendError::SurfaceOpOnNonSurface { .. }
    ));
    let m = Message::user_text("hi", MessageSource::user(), "m");
    let e = s
        .append(ev(0, EventBody::UserMessage(Box::new(m))))
        .unwrap_err();
    assert!(matches!(e, AppendError::MissingSurfaceOp { .. }), "{e}");
    let other = EventBody::Other(Box::new(OtherEvent {
        type_name: "x/y".into(),
        data: json!({}),
    }));
    assert!(matches!(
        s.append(ev(0, other.clone())).unwrap_err(),
        AppendError::UnknownRequiredType { .. }
    ));
    let mut ign = ev(0, other);
    ign.ignorable = true;
    s.append(ign).unwrap();
    assert_eq!(s.len(), 1, "refused events left no trace");
}

fn summary(text: &str) -> EventBody {
    EventBody::UserMessage(Box::new(Message::user_text(
        text,
        MessageSource::plugin("keel/compaction"),
        "sum",
    )))
}

#[test]
fn replace_spans_are_validated_against_the_current_surface() {
    let mut b = B::new();
    b.full_turn(1);
    let nodes = b.s.surface().nodes().to_vec(); // user, assistant, result, assistant
    assert_eq!(nodes.len(), 4);
    let (a, c) = (nodes[0], nodes[2]);
    let s = &mut b.s;
    let e = s
        .push_surface(
            summary("x"),
            SurfaceOp::Replace {
                start: Seq(1),
                end: c,
            },
            vec![Seq(1), c],
        )
        .unwrap_err();
    assert!(
        matches!(
            e,
            AppendError::SpanNotOnSurface {
                missing: Seq(1),
                ..
            }
        ),
        "{e}"
    );
    let e = s
        .push_surface(
            summary("x"),
            SurfaceOp::Replace { start: c, end: a },
            vec![a, c],
        )
        .unwrap_err();
    assert!(matches!(e, AppendError::SpanOutOfOrder { .. }), "{e}");
    let e = s
        .push_surface(
            summary("x"),
            SurfaceOp::Replace { start: a, end: c },
            vec![a, c],
        )
        .unwrap_err();
    assert!(
        matches!(e, AppendError::ShadowedSeqNotCited { shadowed, .. } if shadowed == nodes[1]),
        "{e}"
    );
    let gen0 = s.surface().generation();
    let before = s.derive_messages().len();
    let seq = s
        .push_surface(
            summary("summary"),
            SurfaceOp::Replace { start: a, end: c },
            nodes[..3].to_vec(),
        )
        .unwrap();
    assert_eq!(s.surface().nodes(), &[seq, nodes[3]]);
    assert_eq!(s.surface().generation(), gen0 + 1);
    assert_eq!(s.derived_message_count(), 2);
    let derived = s.derive_messages();
    assert_eq!(before, 4);
    assert_eq!(derived.len(), 2);
    assert_eq!(derived[0].message.text(), "summary");
    // The shadowed nodes are gone from the surface: replacing them again is refused.
    let e = s
        .push_surface(
            summary("y"),
            SurfaceOp::Replace { start: a, end: a },
            vec![a],
        )
        .unwrap_err();
    assert!(matches!(e, AppendError::SpanNotOnSurface { .. }), "{e}");
}

#[test]
fn a_replacing_tool_result_may_change_only_content() {
    let mut b = B::new();
    b.full_turn(1);
    let result = b.s.surface().nodes()[2];
    let op = SurfaceOp::Replace {
        start: result,
        end: result,
    };
    let cases = [
        (
            B::result_body(1, 1, "c1", "pruned", "other-id"),
            "message id",
        ),
        (B::result_body(1, 1, "zz", "pruned", "r-c1"), "source"),
        (B::result_body(1, 2, "c1", "pruned", "r-c1"), "turn/step"),
    ];
    for (body, what) in cases {
        let e = b.s.push_surface(body, op, vec![result]).unwrap_err();
        assert!(
            matches!(&e, AppendError::ToolResultReplacement { .. }),
            "{e}"
        );
        assert!(e.to_string().contains(what), "{e} / {what}");
    }
    let mut err = B::result_body(1, 1, "c1", "pruned", "r-c1");
    if let EventBody::ToolResult(r) = &mut err
        && let ContentBlock::ToolResult(b) = &mut r.message.content[0]
    {
        b.is_error = true;
    }
    assert!(
        b.s.push_surface(err, op, vec![result])
            .unwrap_err()
            .to_string()
            .contains("isError")
    );
    // A tool/result may not shadow a user message.
    let user = b.s.surface().nodes()[0];
    let e =
        b.s.push_surface(
            B::result_body(1, 1, "c1", "p", "r-c1"),
            SurfaceOp::Replace {
                start: user,
                end: user,
            },
            vec![user],
        )
        .unwrap_err();
    assert!(e.to_string().contains("not a tool/result"), "{e}");
    let seq =
        b.s.push_surface(
            B::result_body(1, 1, "c1", "pruned", "r-c1"),
            op,
            vec![result],
        )
        .unwrap();
    assert_eq!(b.s.surface().nodes()[2], seq);
    assert_eq!(
        b.s.derive_messages()[2]
            .message
            .tool_results()
            .next()
            .unwrap()
            .text(),
        "pruned"
    );
    assert_eq!(b.s.check_invariants(), Ok(()));
}

#[test]
fn derive_is_incremental_and_skips_empty_assistant_messages() {
    let mut b = B::new();
    b.turn_start(1);
    b.step_start(1, 1);
    b.user("hello");
    assert_eq!(b.s.derive_messages().len(), 1);
    b.assistant(1, 1, "", &[]);
    assert_eq!(
        b.s.derive_messages().len(),
        1,
        "empty assistant message skipped"
    );
    assert_eq!(b.s.derived_message_count(), 1);
    b.user("again");
    let d = b.s.derive_messages();
    assert_eq!(
        d.iter().map(|m| m.message.text()).collect::<Vec<_>>(),
        ["hello", "again"]
    );
    assert_eq!(d[1].seq, Seq(4));
}

#[test]
fn invariant_violations_are_typed() {
    let mut s = Session::new(header("s"));
    let push = |s: &mut Session, body| s.push(body).unwrap();
    push(
        &mut s,
        EventBody::StepStart(StepRef {
            turn: keel_protocol::TurnNo(1),
            step: keel_protocol::StepNo(1),
        }),
    );
    push(
        &mut s,
        EventBody::TurnStart(TurnStart {
            turn: keel_protocol::TurnNo(1),
        }),
    );
    push(
        &mut s,
        EventBody::TurnStart(TurnStart {
            turn: keel_protocol::TurnNo(2),
        }),
    );
    push(
        &mut s,
        EventBody::TurnEnd(TurnEnd {
            turn: keel_protocol::TurnNo(5),
            reason: TurnEndReason::Completed,
        }),
    );
    push(
        &mut s,
        EventBody::TurnStart(TurnStart {
            turn: keel_protocol::TurnNo(2),
        }),
    );
    push(
        &mut s,
        EventBody::StepStart(StepRef {
            turn: keel_protocol::TurnNo(2),
            step: keel_protocol::StepNo(1),
        }),
    );
    let c = AssistantChunk {
        turn: keel_protocol::TurnNo(2),
        step: keel_protocol::StepNo(9),
        chunk: StreamChunk::TextDelta {
            index: 0,
            text: "x".into(),
        },
    };
    push(&mut s, EventBody::AssistantChunk(Box::new(c)));
    push(
        &mut s,
        EventBody::ToolCall(Box::new(ToolCallEvent {
            turn: keel_protocol::TurnNo(2),
            step: keel_protocol::StepNo(1),
            call_id: "nope".into(),
            name: "bash".into(),
            arguments: "{}".into(),
        })),
    );
    push(
        &mut s,
        EventBody::TurnEnd(TurnEnd {
            turn: keel_protocol::TurnNo(2),
            reason: TurnEndReason::Completed,
        }),
    );
    let v = s.check_invariants().unwrap_err();
    let st = StepRef {
        turn: keel_protocol::TurnNo(2),
        step: keel_protocol::StepNo(1),
    };
    assert_eq!(
        v,
        vec![
            InvariantViolation::StepStartMisplaced {
                seq: Seq(0),
                step: StepRef {
                    turn: keel_protocol::TurnNo(1),
                    step: keel_protocol::StepNo(1)
                },
                why: "its turn is not open"
            },
            InvariantViolation::TurnStartWhileOpen {
                seq: Seq(2),
                turn: keel_protocol::TurnNo(2),
                open: keel_protocol::TurnNo(1)
            },
            InvariantViolation::TurnEndMismatch {
                seq: Seq(3),
                turn: keel_protocol::TurnNo(5),
                open: Some(keel_protocol::TurnNo(2))
            },
            InvariantViolation::TurnNotIncreasing {
                seq: Seq(4),
                turn: keel_protocol::TurnNo(2),
                last: keel_protocol::TurnNo(2)
            },
            InvariantViolation::OutsideStep {
                seq: Seq(6),
                type_name: "assistant/chunk",
                step: StepRef {
                    turn: keel_protocol::TurnNo(2),
                    step: keel_protocol::StepNo(9)
                },
                open: Some(st)
            },
            InvariantViolation::UnknownCall {
                seq: Seq(7),
                type_name: "tool/call",
                call_id: "nope".into()
            },
            InvariantViolation::TurnEndWithOpenStep {
                seq: Seq(8),
                turn: keel_protocol::TurnNo(2),
                step: st
            },
        ]
    );
    assert!(v[0].to_string().contains("seq 0"));
}

#[test]
fn unanswered_calls_and_duplicate_results_are_violations() {
    let mut b = B::new();
    b.turn_start(1);
    b.step_start(1, 1);
    b.assistant(1, 1, "", &[("a", "bash"), ("b", "bash")]);
    b.tool_result(1, 1, "a", "ok");
    b.tool_result(1, 1, "a", "again");
    b.step_end(1, 1);
    let v = b.s.check_invariants().unwrap_err();
    assert_eq!(
        v,
        vec![
            InvariantViolation::DuplicateResult {
                seq: Seq(4),
                call_id: "a".into()
            },
            InvariantViolation::StepEndWithUnansweredCalls {
                seq: Seq(5),
                step: StepRef {
                    turn: keel_protocol::TurnNo(1),
                    step: keel_protocol::StepNo(1)
                },
                call_ids: vec!["b".into()]
            },
        ]
    );
}

#[test]
fn fork_seeds_a_child_with_lineage_and_end_seed() {
    let mut b = B::new();
    b.full_turn(1);
    let boundary = b.s.next_seq();
    b.full_turn(2);
    b.turn_start(3);
    let parent = b.s;
    let e = parent
        .fork(Seq(boundary.0 + 1), SessionId("child".into()))
        .unwrap_err();
    assert!(
        matches!(
            e,
            ForkError::InsideOpenTurn {
                turn: keel_protocol::TurnNo(2),
                ..
            }
        ),
        "{e}"
    );
    let e = parent
        .fork(parent.next_seq(), SessionId("child".into()))
        .unwrap_err();
    assert!(
        matches!(
            e,
            ForkError::InsideOpenTurn {
                turn: keel_protocol::TurnNo(3),
                ..
            }
        ),
        "{e}"
    );
    assert!(matches!(
        parent.fork(Seq(999), SessionId("c".into())),
        Err(ForkError::BeyondEnd { .. })
    ));
    let mut child = parent.fork(boundary, SessionId("child".into())).unwrap();
    let h = child.header();
    assert_eq!(h.parent_session, Some(SessionId("session-test".into())));
    assert_eq!(h.seed_length, Some(boundary.0));
    assert_eq!(h.origin.as_deref(), Some("fork"));
    assert_eq!(child.len(), boundary.0 + 1);
    let EventBody::SessionEndSeed(es) = &child.event(boundary).unwrap().body else {
        panic!()
    };
    assert_eq!(
        (es.parent_session.as_str(), es.seed_length),
        ("session-test", boundary.0)
    );
    for seq in 0..boundary.0 {
        assert_eq!(
            child.event(Seq(seq)).unwrap(),
            parent.event(Seq(seq)).unwrap()
        );
    }
    assert_eq!(child.check_invariants(), Ok(()));
    assert_eq!(child.derive_messages().len(), 4);
    assert_eq!(child.turn_state().last_turn.0, 1);
    // A fork of the fork keeps its own end-seed check straight.
    let mut cb = B { s: child };
    cb.full_turn(2);
    let grandchild = cb.s.fork(cb.s.next_seq(), SessionId("g".into())).unwrap();
    assert_eq!(grandchild.check_invariants(), Ok(()));
    // A seeded header without its end-seed is a violation.
    let mut seeded = header("s2");
    seeded.seed_length = Some(0);
    let mut s = Session::new(seeded);
    s.push(EventBody::TurnStart(TurnStart {
        turn: keel_protocol::TurnNo(1),
    }))
    .unwrap();
    assert!(matches!(
        s.check_invariants().unwrap_err()[0],
        InvariantViolation::EndSeedMisplaced {
            seed_length: 0,
            found: None
        }
    ));
}

#[test]
fn repair_of_a_turn_without_open_step_only_ends_the_turn() {
    let mut b = B::new();
    b.turn_start(1);
    let (plan, report) = b.s.plan_repair();
    assert_eq!(plan.len(), 1);
    assert_eq!(report.closed_step, None);
    b.s.repair().unwrap();
    assert_eq!(b.s.check_invariants(), Ok(()));
    let mut clean = B::new();
    clean.full_turn(1);
    assert!(clean.s.plan_repair().0.is_empty());
}

/// One event of every modelled type, and their JSON round trip.
fn one_of_each() -> Vec<EventBody> {
    let m = Message::user_text("hi", MessageSource::user(), "m1");
    let failure = ModelFailure::new(FailureCode::RateLimit, "slow down");
    let span = CompactionSpan {
        shadowed_range: SeqSpan {
            start: Seq(1),
            end: Seq(2),
        },
        shadowed_seqs: vec![Seq(1), Seq(2)],
        shadowed_token_count: 9,
    };
    let v: Vec<EventBody> = vec![
        EventBody::TurnStart(TurnStart {
            turn: keel_protocol::TurnNo(1),
        }),
        EventBody::TurnEnd(TurnEnd {
            turn: keel_protocol::TurnNo(1),
            reason: TurnEndReason::Error {
                code: "SERVER".into(),
                message: "x".into(),
            },
        }),
        EventBody::StepStart(StepRef {
            turn: keel_protocol::TurnNo(1),
            step: keel_protocol::StepNo(1),
        }),
        EventBody::StepEnd(StepRef {
            turn: keel_protocol::TurnNo(1),
            step: keel_protocol::StepNo(1),
        }),
        EventBody::UserMessage(Box::new(m.clone())),
        EventBody::AssistantChunk(Box::new(AssistantChunk {
            turn: keel_protocol::TurnNo(1),
            step: keel_protocol::StepNo(1),
            chunk: StreamChunk::Usage {
                usage: TokenUsage::default(),
            },
        })),
        EventBody::AssistantMessage(Box::new(AssistantMessageEvent {
            turn: keel_protocol::TurnNo(1),
            step: keel_protocol::StepNo(1),
            message: m.clone(),
            usage: None,
            finish: Some(FinishReason::Stop),
            interrupted: true,
        })),
        EventBody::ToolCall(Box::new(ToolCallEvent {
            turn: keel_protocol::TurnNo(1),
            step: keel_protocol::StepNo(1),
            call_id: "c".into(),
            name: "n".into(),
            arguments: "{".into(),
        })),
        B::result_body(1, 1, "c", "out", "r"),
        EventBody::TodoWrite(Box::new(TodoWrite {
            todos: vec![TodoItem {
                content: "a".into(),
                status: TodoStatus::InProgress,
                active_form: Some("A".into()),
            }],
        })),
        EventBody::PlanMode(Box::new(PlanModeEvent {
            active: false,
            plan: Some("p".into()),
            approved: Some(true),
        })),
        EventBody::RequestHeader(Box::new(RequestHeader {
            header: json!({"system": "s"}),
            extra: Default::default(),
        })),
        EventBody::RequestContext(Box::new(RequestContext {
            provider: "p".into(),
            model: "m".into(),
            context_window: 1,
            max_output: Some(2),
        })),
        EventBody::SessionEndSeed(Box::new(SessionEndSeed {
            parent_session: SessionId("p".into()),
            seed_length: 3,
        })),
        EventBody::InboxSpliced(Box::new(InboxSpliced {
            target: InboxTarget::NextStep,
            start: 0,
            removed_count: 1,
            inserted: vec![m],
        })),
        EventBody::LlmRetry(Box::new(LlmRetry {
            turn: keel_protocol::TurnNo(1),
            step: keel_protocol::StepNo(1),
            attempt: 1,
            delay_ms: 5,
            failure,
        })),
        EventBody::CompactionStart(Box::new(CompactionStart {
            reason: "manual".into(),
            estimated_tokens: 1,
            context_window: 2,
        })),
        EventBody::CompactionSummary(Box::new(span.clone())),
        EventBody::CompactionPrune(Box::new(span)),
        EventBody::CompactionEnd(Box::new(CompactionEnd {
            outcome: "failed".into(),
            before_tokens: 1,
            after_tokens: 1,
            error: Some("e".into()),
        })),
        EventBody::ApprovalAsked(Box::new(ApprovalAsked {
            call_id: "c".into(),
            tool: "bash".into(),
            reason: "r".into(),
        })),
        EventBody::ApprovalDecided(Box::new(ApprovalDecided {
            call_id: "c".into(),
            approved: false,
            by: "user".into(),
            reason: None,
        })),
        EventBody::QuestionAsked(Box::new(QuestionAsked {
            call_id: "q".into(),
            questions: vec![Question {
                id: "lang".into(),
                question: "Which language?".into(),
                header: Some("Language".into()),
                options: vec![QuestionOption {
                    label: "Rust".into(),
                    description: None,
                }],
                multi_select: true,
            }],
        })),
        EventBody::QuestionAnswered(Box::new(QuestionAnswered {
            call_id: "q".into(),
            by: "user".into(),
            answers: [("lang".to_owned(), QuestionAnswer::Many(vec!["Rust".into()]))]
                .into_iter()
                .collect(),
            reason: None,
        })),
        EventBody::SubagentDescriptor(Box::new(SubagentDescriptor {
            child_session: SessionId("c".into()),
            description: "d".into(),
            mode: "spawn".into(),
            background: true,
            call_id: None,
            delegation_depth: 1,
            via: None,
        })),
        EventBody::HookInvoked(Box::new(HookInvoked {
            hook_event: "Stop".into(),
            command: "x".into(),
            tool_name: None,
        })),
        EventBody::HookResult(Box::new(HookResult {
            hook_event: "Stop".into(),
            command: "x".into(),
            exit_code: Some(2),
            decision: "block".into(),
            message: None,
            duration_ms: 3,
        })),
        EventBody::ContextProjection(Box::new(ContextProjection {
            turn: keel_protocol::TurnNo(1),
            step: keel_protocol::StepNo(1),
            surface_generation: 0,
            policy: "p".into(),
            revision: None,
            include: keel_protocol::SeqRuns(vec![[0, 1]]),
            omitted_count: 1,
            max_tokens: None,
        })),
        EventBody::SandboxMode(Box::new(SandboxModeEvent {
            mode: "m".into(),
            enforcement: None,
        })),
        EventBody::ApprovalPolicy(Box::new(ApprovalPolicyEvent {
            policy: "never".into(),
        })),
        EventBody::PermissionPreset(Box::new(PermissionPresetEvent { preset: "p".into() })),
        EventBody::SessionTitle(Box::new(SessionTitle {
            title: "t".into(),
            message_seqs: vec![Seq(1)],
            source: None,
        })),
        EventBody::SurfaceRewind(Box::new(SurfaceRewind {
            to_seq: Seq(0),
            turn: Some(TurnNo(1)),
            reason: Some("rewind".into()),
        })),
    ];
    let names: Vec<&str> = v.iter().map(|b| b.type_name()).collect();
    assert_eq!(
        names, KNOWN_EVENT_TYPES,
        "one body per modelled type, in order"
    );
    v
}

#[test]
fn every_event_type_round_trips_through_json_and_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Session::new(header("rt"));
    let mut originals = vec![];
    for (i, body) in one_of_each().into_iter().enumerate() {
        let mut e = SessionEvent::new(Seq(i as u64), 100 + i as i64, body);
        if e.body.is_surface_eligible() {
            e.surface_op = Some(SurfaceOp::Append);
            e.source_event_seqs = vec![Seq(0)];
        }
        let line = e.to_json().unwrap();
        let LogRecord::Event(back) = keel_session::store::parse_record(&line).unwrap() else {
            panic!("{line}")
        };
        assert_eq!(back, e, "{line}");
        s.append(e.clone()).unwrap();
        originals.push(e);
    }
    let p = dir.path().join("session.jsonl");
    Store::create_at(&p, &s, WriterOptions::default())
        .unwrap()
        .close()
        .unwrap();
    let loaded = Store::load(&p).unwrap().session;
    let back: Vec<SessionEvent> = loaded.events().map(|e| e.into_owned()).collect();
    assert_eq!(back, originals);
}

#[test]
fn a_conversation_rewind_only_comes_between_turns_and_points_between_turns() {
    let mut s = Session::new(header("rw"));
    let rewind = |to: u64| {
        EventBody::SurfaceRewind(Box::new(SurfaceRewind {
            to_seq: Seq(to),
            turn: None,
            reason: None,
        }))
    };
    let user = |t: &str| {
        EventBody::UserMessage(Box::new(Message::user_text(t, MessageSource::user(), "m")))
    };
    // Turn 1 at seqs 0..=2, turn 2 at seqs 3..=5.
    for (turn, text) in [(1, "one"), (2, "two")] {
        s.push(EventBody::TurnStart(TurnStart { turn: TurnNo(turn) }))
            .unwrap();
        s.push_surface(user(text), SurfaceOp::Append, vec![])
            .unwrap();
        s.push(EventBody::TurnEnd(TurnEnd {
            turn: TurnNo(turn),
            reason: TurnEndReason::Completed,
        }))
        .unwrap();
    }
    let e = s.push(rewind(1)).unwrap_err();
    assert!(
        matches!(&e, AppendError::RewindInsideTurn { what, .. } if what == "seq 1 is inside turn 1"),
        "{e}"
    );
    let e = s.push(rewind(6)).unwrap_err();
    assert!(matches!(e, AppendError::RewindNotBefore { .. }), "{e}");
    let generation = s.surface().generation();
    let at = s.push(rewind(3)).unwrap();
    assert_eq!(s.surface().nodes(), &[Seq(1)]);
    assert_eq!(s.surface().generation(), generation + 1);
    let texts: Vec<String> = s
        .derive_messages()
        .iter()
        .map(|d| d.message.text())
        .collect();
    assert_eq!(texts, ["one"]);
    // The rewind of the rewind returns to what was there just before it.
    s.push(rewind(at.0)).unwrap();
    assert_eq!(s.surface().nodes(), &[Seq(1), Seq(4)]);
    // Not while a turn is open.
    s.push(EventBody::TurnStart(TurnStart { turn: TurnNo(3) }))
        .unwrap();
    let e = s.push(rewind(0)).unwrap_err();
    assert!(
        matches!(&e, AppendError::RewindInsideTurn { what, .. } if what == "turn 3 is open"),
        "{e}"
    );
    // The transcript keeps the rewound message, marked.
    let mut s2 = Session::new(header("rw2"));
    for ev in s.events().take(at.0 as usize + 1) {
        s2.append(ev.into_owned()).unwrap();
    }
    let t = keel_session::view::Transcript::build(&s2, &Default::default());
    let json = serde_json::to_string(&t).unwrap();
    assert!(
        json.contains(r#""shadowedBy":{"seq":6,"how":"rewound"}"#),
        "{json}"
    );
}
