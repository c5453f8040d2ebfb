//! Capture: full stage chains, dispositions, concurrency, aliases, redaction, failures, joins.

mod common;

use common::*;
use keel_protocol::ToolErrorCode;
use keel_provenance::node::NodeKind;
use keel_provenance::{
    ChildLink, Direction, Dispatch, ExecuteResult, Payload, PostDecision, PreDecision, QueryScope,
    Recorder, Snapshot, Stage, TraceFormat, get_node, render, trace, trace_in,
};
use pretty_assertions::assert_eq;
use serde_json::json;

fn stages(s: &Snapshot) -> Vec<&'static str> {
    s.receipts().iter().map(|r| r.stage.as_str()).collect()
}

/// Stages of the occurrences a backward trace reached, in path order.
fn traced_stages(s: &Snapshot, target: &str) -> Vec<String> {
    let t = trace(s, target, Direction::Backward, 64).unwrap_or_else(|e| panic!("{e}"));
    t.nodes
        .iter()
        .filter_map(|n| n.stage.as_deref().map(str::to_owned))
        .collect()
}

fn categories(s: &Snapshot) -> Vec<&'static str> {
    s.nodes()
        .iter()
        .filter_map(|n| n.category.map(|c| c.as_str()))
        .collect()
}

#[test]
fn read_call_records_every_stage_and_traces_back_to_the_message() {
    let mut rec = Recorder::new("run-1");
    assistant(
        &mut rec,
        "ev-1",
        &[("call_a", "read", r#"{"path":"src/main.rs"}"#)],
    );
    read_call(&mut rec, "call_a", "tok-a");
    let s = rec.snapshot();
    assert_eq!(
        stages(s),
        [
            "assistant/message",
            "assistant/tool-call",
            "tool/call",
            "tools/pre-execute:enter",
            "tools/pre-execute",
            "tools/execute:enter",
            "tools/execute",
            "tools/post-execute",
            "tools/settled",
            "tool/result"
        ]
    );
    assert!(s.complete());
    assert_eq!(categories(s), Vec::<&str>::new());
    let mut expected: Vec<String> = stages(s).iter().rev().map(|s| (*s).to_owned()).collect();
    assert_eq!(traced_stages(s, "result:call_a"), expected);
    // Every alias form reaches the same node; default depth covers the whole chain.
    let by_call = trace(s, "call_a", Direction::Backward, 32).unwrap_or_else(|e| panic!("{e}"));
    let by_event =
        trace(s, "ev-result-call_a", Direction::Backward, 32).unwrap_or_else(|e| panic!("{e}"));
    let by_node =
        trace(s, &by_call.target, Direction::Backward, 32).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(by_call, by_event);
    assert_eq!(by_call, by_node);
    assert!(!by_call.truncated);
    // Forward from the message reaches the result.
    let msg = s
        .nodes()
        .iter()
        .find(|n| n.kind == NodeKind::Outcome)
        .map(|n| n.id.clone())
        .unwrap_or_default();
    let fwd = trace(s, &msg, Direction::Forward, 64).unwrap_or_else(|e| panic!("{e}"));
    assert!(fwd.nodes.iter().any(|n| n.id == by_call.target));
    expected.reverse();
    // Depth limit truncates.
    let short = trace(s, "call_a", Direction::Backward, 2).unwrap_or_else(|e| panic!("{e}"));
    assert!(short.truncated);
    assert!(short.formation_path.iter().all(|p| p.depth <= 2));
    assert_eq!(short.nodes.iter().filter(|n| n.stage.is_some()).count(), 3);
}

#[test]
fn denial_has_no_execute_receipts_and_category_denied() {
    let mut rec = Recorder::new("run-1");
    assistant(&mut rec, "ev-1", &[("call_b", "bash", "{}")]);
    until_decision(&mut rec, "call_b", PreDecision::Deny { reason: "policy" });
    finish(
        &mut rec,
        "call_b",
        &json!({"error": "denied"}),
        Some(ToolErrorCode::Denied),
    );
    let s = rec.snapshot();
    assert_eq!(
        s.receipts()
            .iter()
            .filter(|r| matches!(r.stage, Stage::ExecuteEnter | Stage::Execute))
            .count(),
        0
    );
    assert_eq!(categories(s), ["denied"]);
    let t = trace(s, "result:call_b", Direction::Backward, 32).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        t.nodes
            .iter()
            .any(|n| n.category.as_deref() == Some("denied"))
    );
    // An approval refused is a denial too.
    let mut rec = Recorder::new("run-2");
    assistant(&mut rec, "ev-1", &[("c", "write", "{}")]);
    until_decision(
        &mut rec,
        "c",
        PreDecision::Ask(keel_provenance::Approval::Denied),
    );
    finish(&mut rec, "c", &json!(null), Some(ToolErrorCode::Denied));
    assert_eq!(categories(rec.snapshot()), ["denied"]);
}

#[test]
fn guard_rejection_and_unobserved_failures_are_classified_conservatively() {
    let mut rec = Recorder::new("run-1");
    assistant(
        &mut rec,
        "ev-1",
        &[
            ("g", "bash", "{}"),
            ("u", "read", "{}"),
            ("x", "read", "{}"),
            ("t", "read", "{}"),
        ],
    );
    // A guard denies after pre-execute allowed: denied, even though the error code is generic.
    until_decision(&mut rec, "g", PreDecision::Allow);
    rec.guard_denial("g", "control-mode", "not in contract");
    finish(&mut rec, "g", &json!(null), Some(ToolErrorCode::ToolFailed));
    // An error with no execute observed and no known class.
    until_decision(&mut rec, "u", PreDecision::Allow);
    finish(
        &mut rec,
        "u",
        &json!(null),
        Some(ToolErrorCode::ToolTimeout),
    );
    // The same code after an observed execute: execution failed.
    until_decision(&mut rec, "x", PreDecision::Allow);
    rec.execute_enter(
        "x",
        Dispatch {
            token: "tok-x",
            parent_token: None,
            arguments: Payload::Null,
        },
    );
    rec.execute_result(
        "tok-x",
        ExecuteResult::Error {
            code: Some(ToolErrorCode::ToolTimeout),
            message: "timed out",
        },
    );
    finish(
        &mut rec,
        "x",
        &json!(null),
        Some(ToolErrorCode::ToolTimeout),
    );
    // Post-execute blocked an executed result: suppressed.
    until_decision(&mut rec, "t", PreDecision::Allow);
    execute(&mut rec, "t", "tok-t", &json!("ok"));
    rec.post_execute(
        "t",
        Payload::Str("ok"),
        PostDecision::Block { reason: "hook" },
    );
    finish(&mut rec, "t", &json!(null), None);
    assert_eq!(
        categories(rec.snapshot()),
        [
            "denied",
            "policy_or_pre_dispatch_unobserved",
            "execution_failed",
            "suppressed"
        ]
    );
}

#[test]
fn classify_table() {
    use keel_provenance::Disposition as D;
    use keel_provenance::recorder::{CallFacts, classify};
    let none = CallFacts::default();
    let ran = CallFacts {
        executed: true,
        ..CallFacts::default()
    };
    let cases = [
        (none, true, Some(ToolErrorCode::Aborted), Some(D::Cancelled)),
        (ran, true, Some(ToolErrorCode::Aborted), Some(D::Cancelled)),
        (
            none,
            true,
            Some(ToolErrorCode::AbortedBeforeDispatch),
            Some(D::Cancelled),
        ),
        (
            none,
            true,
            Some(ToolErrorCode::UnknownTool),
            Some(D::NotExecuted),
        ),
        (
            none,
            true,
            Some(ToolErrorCode::ToolNotStarted),
            Some(D::NotExecuted),
        ),
        (
            none,
            true,
            Some(ToolErrorCode::InvalidArgs),
            Some(D::NotExecuted),
        ),
        (
            none,
            true,
            Some(ToolErrorCode::ToolOutcomeUnknown),
            Some(D::OutcomeUnobserved),
        ),
        (none, true, Some(ToolErrorCode::Denied), Some(D::Denied)),
        (
            none,
            true,
            Some(ToolErrorCode::InvalidToolOutput),
            Some(D::PolicyOrPreDispatchUnobserved),
        ),
        (
            ran,
            true,
            Some(ToolErrorCode::ToolFailed),
            Some(D::ExecutionFailed),
        ),
        (ran, true, None, Some(D::ExecutionFailed)),
        (none, false, None, Some(D::PolicyOrPreDispatchUnobserved)),
        (ran, false, None, None),
    ];
    for (facts, is_error, code, want) in cases {
        assert_eq!(
            classify(&facts, is_error, code),
            want,
            "{facts:?} {is_error} {code:?}"
        );
    }
}

#[test]
fn interleaved_calls_keep_independent_chains() {
    let mut rec = Recorder::new("run-1");
    assistant(
        &mut rec,
        "ev-1",
        &[("a", "read", "{}"), ("b", "read", "{}")],
    );
    let v = json!({"content": "x"});
    for call in ["a", "b"] {
        rec.tool_call_event(call, &format!("ev-call-{call}"), Payload::Null);
    }
    for call in ["b", "a"] {
        rec.pre_execute_enter(call, Payload::Null);
    }
    for call in ["a", "b"] {
        rec.pre_execute_decision(call, PreDecision::Allow);
    }
    rec.execute_enter(
        "b",
        Dispatch {
            token: "tb",
            parent_token: None,
            arguments: Payload::Null,
        },
    );
    rec.execute_enter(
        "a",
        Dispatch {
            token: "ta",
            parent_token: None,
            arguments: Payload::Null,
        },
    );
    rec.execute_result("ta", ExecuteResult::Value(Payload::Value(&v)));
    rec.execute_result("tb", ExecuteResult::Value(Payload::Value(&v)));
    for call in ["b", "a"] {
        rec.post_execute(call, Payload::Value(&v), PostDecision::Accept);
    }
    for call in ["a", "b"] {
        finish(&mut rec, call, &v, None);
    }
    let s = rec.snapshot();
    for (call, token, other, other_token) in [("a", "ta", "b", "tb"), ("b", "tb", "a", "ta")] {
        let t = trace(s, &format!("result:{call}"), Direction::Backward, 64)
            .unwrap_or_else(|e| panic!("{e}"));
        let natives: Vec<String> = t
            .nodes
            .iter()
            .filter_map(|n| s.node(&n.id)?.native_id.as_deref().map(str::to_owned))
            .collect();
        assert!(
            natives.iter().all(|n| n != other && n != other_token),
            "{call}: {natives:?}"
        );
        assert_eq!(
            natives.iter().filter(|n| *n == call).count(),
            7,
            "{call}: {natives:?}"
        );
        assert_eq!(
            natives.iter().filter(|n| *n == token).count(),
            2,
            "{call}: {natives:?}"
        );
        assert_eq!(natives.last().map(String::as_str), Some("ev-1"));
    }
}

#[test]
fn repeated_call_ids_are_ambiguous() {
    let mut rec = Recorder::new("run-1");
    assistant(&mut rec, "ev-1", &[("dup", "read", "{}")]);
    read_call(&mut rec, "dup", "t1");
    assistant(&mut rec, "ev-2", &[("dup", "read", "{}")]);
    until_decision(&mut rec, "dup", PreDecision::Allow);
    execute(&mut rec, "dup", "t2", &json!(2));
    rec.post_execute("dup", Payload::Null, PostDecision::Accept);
    let v = json!(2);
    let content = "2";
    rec.settled(
        "dup",
        keel_provenance::SettledResult {
            value: Payload::Value(&v),
            content: Payload::Str(content),
            is_error: false,
            error_code: None,
        },
    );
    rec.tool_result_event("dup", "ev-result-2", Payload::Null);
    let s = rec.snapshot();
    for target in ["dup", "result:dup"] {
        match trace(s, target, Direction::Backward, 32) {
            Err(e) => {
                assert_eq!(e.code(), "AMBIGUOUS_TARGET");
                let keel_provenance::QueryError::AmbiguousTarget { candidates, .. } = e else {
                    panic!()
                };
                assert_eq!(candidates.len(), 2);
                for c in candidates {
                    assert!(trace(s, &c, Direction::Backward, 32).is_ok());
                }
            }
            Ok(t) => panic!("expected AMBIGUOUS_TARGET, got {}", t.target),
        }
        assert_eq!(
            get_node(s, target).map_err(|e| e.code()),
            Err("AMBIGUOUS_TARGET")
        );
    }
    // The event ids still name one result each; the second chain starts at its own message.
    assert_eq!(
        traced_stages(s, "ev-result-2").last().map(String::as_str),
        Some("assistant/message")
    );
    assert_eq!(
        trace(s, "nope", Direction::Backward, 32).map_err(|e| e.code()),
        Err("UNKNOWN_TARGET")
    );
    assert_eq!(
        trace(s, "dup", Direction::Backward, 257).map_err(|e| e.code()),
        Err("INVALID_ARGUMENT")
    );
}

#[test]
fn redaction_never_leaks_through_queries() {
    const SECRET: &str = "sk-live-4242-SECRET";
    let mut rec = Recorder::new("run-1");
    assistant(&mut rec, "ev-1", &[("r", "read", "{}")]);
    until_decision(&mut rec, "r", PreDecision::Allow);
    let original = json!({"content": format!("API_KEY={SECRET}")});
    let redacted = json!({"content": "API_KEY=[redacted]"});
    execute(&mut rec, "r", "tok", &original);
    rec.post_execute(
        "r",
        Payload::Value(&original),
        PostDecision::ReplaceValue(Payload::Value(&redacted)),
    );
    finish(&mut rec, "r", &redacted, None);
    let s = rec.snapshot();
    // The journal keeps the original.
    assert!(rec.pending_lines().iter().any(|l| l.contains(SECRET)));
    // No query answer or rendering shows it.
    for dir in [Direction::Backward, Direction::Forward] {
        for n in s.nodes() {
            let t = trace(s, &n.id, dir, 256).unwrap_or_else(|e| panic!("{e}"));
            for f in [TraceFormat::Text, TraceFormat::Json, TraceFormat::Dot] {
                assert!(!render(&t, f).contains(SECRET));
            }
            let v = get_node(s, &n.id).unwrap_or_else(|e| panic!("{e}"));
            assert!(
                !serde_json::to_string(&v)
                    .unwrap_or_default()
                    .contains(SECRET)
            );
        }
    }
    // And the post-execute occurrence says what happened, structurally.
    let t = trace(s, "result:r", Direction::Backward, 32).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        t.nodes
            .iter()
            .any(|n| n.stage.as_deref() == Some("tools/post-execute")
                && n.transform.as_deref() == Some("replace_value"))
    );
}

#[test]
fn uncanonicalizable_payload_marks_the_graph_incomplete() {
    let mut rec = Recorder::new("run-1");
    // An unrelated call first: its answers stay complete.
    assistant(&mut rec, "ev-0", &[("d", "read", "{}")]);
    read_call(&mut rec, "d", "t-d");
    assistant(&mut rec, "ev-1", &[("c", "read", "{}")]);
    until_decision(&mut rec, "c", PreDecision::Allow);
    rec.execute_enter(
        "c",
        Dispatch {
            token: "t",
            parent_token: None,
            arguments: Payload::Null,
        },
    );
    rec.execute_result(
        "t",
        ExecuteResult::Value(Payload::RawJson(r#"{"text":"\ud800"}"#)),
    );
    rec.post_execute("c", Payload::F64(f64::NAN), PostDecision::Accept);
    finish(&mut rec, "c", &json!("x"), None);
    let s = rec.snapshot();
    assert!(!s.complete());
    let reasons: Vec<&str> = s.failures().iter().map(|f| f.reason.as_str()).collect();
    assert_eq!(reasons, ["payload_not_canonical", "payload_not_canonical"]);
    assert_eq!(
        trace(s, "result:c", Direction::Backward, 32).map_err(|e| e.code()),
        Err("CAPTURE_INCOMPLETE")
    );
    assert_eq!(
        get_node(s, "c").map_err(|e| e.code()),
        Err("CAPTURE_INCOMPLETE")
    );
    // Only the walks through the failed call: the other call's chain answers, complete.
    let other = trace(s, "result:d", Direction::Backward, 32).unwrap();
    assert!(other.complete && other.nodes.len() > 10, "{other:?}");
    assert!(get_node(s, "d").is_ok());
    // The chain still continued past the failed stages.
    assert_eq!(
        s.receipts().last().map(|r| r.stage),
        Some(Stage::ToolResult)
    );
}

#[test]
fn subagent_join_reaches_into_the_child_chain() {
    let mut child = Recorder::new("child-1");
    assistant(&mut child, "c-ev-1", &[("c_call", "read", "{}")]);
    read_call(&mut child, "c_call", "c-tok");
    let child_graph_id = child.snapshot().graph_id();

    let mut parent = Recorder::new("parent-1");
    assistant(
        &mut parent,
        "ev-1",
        &[("spawn", "subagent", r#"{"task":"look"}"#)],
    );
    until_decision(&mut parent, "spawn", PreDecision::Allow);
    parent.execute_enter(
        "spawn",
        Dispatch {
            token: "p-tok",
            parent_token: None,
            arguments: Payload::Null,
        },
    );
    let link = ChildLink::last_outcome_of(child.snapshot(), &child_graph_id)
        .unwrap_or_else(|| panic!("child has no outcome"));
    parent.subagent_join("spawn", link);
    parent.execute_result("p-tok", ExecuteResult::Value(Payload::Str("child said hi")));
    parent.post_execute("spawn", Payload::Null, PostDecision::Accept);
    finish(&mut parent, "spawn", &json!("child said hi"), None);

    let scope = QueryScope::new(parent.snapshot()).with_child(child.snapshot());
    let t = trace_in(&scope, "result:spawn", Direction::Backward, 256)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(t.complete);
    let in_child: Vec<&str> = t
        .nodes
        .iter()
        .filter(|n| child.snapshot().node(&n.id).is_some())
        .filter_map(|n| n.stage.as_deref())
        .collect();
    assert_eq!(in_child.first(), Some(&"tool/result"));
    assert_eq!(in_child.last(), Some(&"assistant/message"));
    assert_eq!(in_child.len(), 10);
    // Without the child in scope the walk stops at the boundary and says so.
    let alone = trace(parent.snapshot(), "result:spawn", Direction::Backward, 256)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!alone.complete);
    assert!(
        alone
            .nodes
            .iter()
            .all(|n| child.snapshot().node(&n.id).is_none())
    );
}

#[test]
fn nested_dispatch_binds_to_the_parent_token() {
    let mut rec = Recorder::new("run-1");
    assistant(&mut rec, "ev-1", &[("outer", "batch", "{}")]);
    until_decision(&mut rec, "outer", PreDecision::Allow);
    rec.execute_enter(
        "outer",
        Dispatch {
            token: "t-outer",
            parent_token: None,
            arguments: Payload::Null,
        },
    );
    // The outer tool dispatches an inner call.
    rec.pre_execute_enter("inner", Payload::Null);
    rec.execute_enter(
        "inner",
        Dispatch {
            token: "t-inner",
            parent_token: Some("t-outer"),
            arguments: Payload::Null,
        },
    );
    rec.execute_result("t-inner", ExecuteResult::Value(Payload::U64(1)));
    let s = rec.snapshot();
    let inner_exec = s
        .nodes()
        .iter()
        .find(|n| n.native_id.as_deref() == Some("t-inner"))
        .map(|n| n.id.to_string())
        .unwrap_or_default();
    let roles: Vec<String> = s
        .nodes()
        .iter()
        .filter(|n| {
            n.occurrence_id.as_deref() == Some(inner_exec.as_str()) && n.kind == NodeKind::Fact
        })
        .filter_map(|n| n.relation_role.as_deref().map(str::to_owned))
        .collect();
    assert_eq!(roles, ["dispatches", "nested_in"]);
    let t = trace(s, &inner_exec, Direction::Backward, 64).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        t.nodes
            .iter()
            .any(|n| n.stage.as_deref() == Some("assistant/message"))
    );

    // When the outer call settles, the inner call's result is bound to it, so a trace of the
    // outer result reaches the inner dispatch.
    let settled = |is_error| keel_provenance::SettledResult {
        value: Payload::Null,
        content: Payload::Null,
        is_error,
        error_code: None,
    };
    rec.settled("inner", settled(false));
    rec.execute_result("t-outer", ExecuteResult::Value(Payload::U64(2)));
    rec.settled("outer", settled(false));
    let s = rec.snapshot();
    let roles: Vec<String> = s
        .nodes()
        .iter()
        .filter_map(|n| n.relation_role.as_deref().map(str::to_owned))
        .collect();
    assert!(
        roles.iter().any(|r| r == "incorporates_nested"),
        "{roles:?}"
    );
    let outer_settled = s
        .nodes()
        .iter()
        .rfind(|n| n.kind == NodeKind::Outcome)
        .map(|n| n.id.to_string())
        .unwrap_or_default();
    let t = trace(s, &outer_settled, Direction::Backward, 64).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        t.nodes.iter().any(|n| n.id.to_string() == inner_exec),
        "the outer result's trace reaches the inner dispatch"
    );
}
