//! Pipeline phases and seams, argument errors, plan mode and todo_write.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Fixture, call, ids, par, raw_call, setup};
use keel_protocol::{ContentBlock, EventBody, PlanModeEvent, TodoStatus};
use keel_testkit::recording::{Log, RecordingHooks, RecordingHost};
use keel_tools::builtins::PLAN_HANDED_OFF;
use keel_tools::{
    ApprovalOutcome, BatchOptions, GuardDecision, Handoff, PLAN_AWAITS_APPROVAL, PostDecision,
    PreDecision, SandboxMode, ToolOutcome, enter_plan_mode,
};
use pretty_assertions::assert_eq;
use serde_json::json;
use std::sync::atomic::Ordering;
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn phases_run_in_order_with_one_token_and_effective_args() {
    let log = Log::default();
    let (s, p) = setup(
        RecordingHooks::new(log.clone()).with_rewrite(json!({"text":"rewritten"})),
        par,
    );
    let host = RecordingHost::new(log.clone(), false);
    let out = p
        .run_batch(
            &[call("c1", "probe", json!({"text":"orig"}))],
            &host,
            CancellationToken::new(),
        )
        .await;
    assert_eq!(out[0].text(), "rewritten");
    assert_eq!(out[0].meta, Some(json!({"probe":"c1"})));
    assert_eq!(
        s.log.take(),
        vec![
            "host:call_started:c1",
            "pre:c1",
            "guard:c1",
            "host:checkpoint",
            "exec:before:c1",
            "body:start:c1",
            "body:end:c1",
            "exec:after:c1",
            "post:c1",
            "settled:c1",
            "host:commit:c1",
        ]
    );
    let seen = s.rec.seen();
    let token = seen[0].1;
    assert!(
        seen.iter()
            .all(|(_, t, parent)| *t == token && parent.is_none()),
        "{seen:?}"
    );

    // A nested batch carries its parent's token to the hooks; its own token is fresh.
    s.rec.clear_seen();
    let opts = BatchOptions {
        cancel: CancellationToken::new(),
        parent: Some(token),
    };
    p.run_batch_with(&[call("c2", "probe", json!({}))], &host, opts)
        .await;
    let seen = s.rec.seen();
    assert!(
        seen.iter()
            .all(|(_, t, parent)| *t != token && *parent == Some(token)),
        "{seen:?}"
    );
}

#[tokio::test]
async fn pre_execute_deny_means_no_body_and_no_guard() {
    let log = Log::default();
    let rec = RecordingHooks::new(log.clone()).with_pre(PreDecision::Deny("not today".into()));
    let (s, p) = setup(rec, par);
    let host = RecordingHost::new(log.clone(), true);
    let out = p
        .run_batch(
            &[call("c1", "probe", json!({}))],
            &host,
            CancellationToken::new(),
        )
        .await;
    assert_eq!(out[0].text(), "DENIED: not today");
    assert!(out[0].is_error);
    assert_eq!(out[0].meta, Some(json!({"code":"DENIED"})));
    assert_eq!(s.probe.bodies.load(Ordering::SeqCst), 0);
    assert_eq!(
        s.log.take(),
        vec![
            "host:call_started:c1",
            "pre:c1",
            "settled:c1",
            "host:commit:c1"
        ]
    );
}

#[tokio::test]
async fn pre_execute_ask_goes_to_the_host() {
    for approve in [true, false] {
        let log = Log::default();
        let rec = RecordingHooks::new(log.clone()).with_pre(PreDecision::Ask("risky".into()));
        let (s, p) = setup(rec, par);
        let host = RecordingHost::new(log.clone(), approve);
        let out = p
            .run_batch(
                &[call("c1", "probe", json!({}))],
                &host,
                CancellationToken::new(),
            )
            .await;
        assert_eq!(host.asked(), vec![("c1".to_owned(), "risky".to_owned())]);
        if approve {
            assert_eq!(out[0].text(), "ok");
            assert_eq!(s.probe.bodies.load(Ordering::SeqCst), 1);
        } else {
            assert_eq!(
                out[0].text(),
                "DENIED: the user did not approve 'probe' (risky): not now"
            );
            assert_eq!(s.probe.bodies.load(Ordering::SeqCst), 0);
        }
    }
}

#[tokio::test]
async fn guard_denial_stops_the_call_before_checkpoint() {
    let log = Log::default();
    let rec =
        RecordingHooks::new(log.clone()).with_guard(GuardDecision::Deny("contract says no".into()));
    let (s, p) = setup(rec, par);
    let host = RecordingHost::new(log.clone(), true);
    let out = p
        .run_batch(
            &[call("c1", "probe", json!({}))],
            &host,
            CancellationToken::new(),
        )
        .await;
    assert_eq!(out[0].text(), "DENIED: contract says no");
    assert_eq!(s.probe.bodies.load(Ordering::SeqCst), 0);
    assert_eq!(
        s.log.take(),
        vec![
            "host:call_started:c1",
            "pre:c1",
            "guard:c1",
            "settled:c1",
            "host:commit:c1"
        ]
    );
}

#[tokio::test]
async fn post_execute_replaces_or_blocks() {
    let cases = [
        (
            PostDecision::ReplaceContent(vec![ContentBlock::text("new content")]),
            "new content",
            false,
            json!({"probe":"c1"}),
        ),
        (
            PostDecision::ReplaceValue(json!({"v":1})),
            "ok",
            false,
            json!({"v":1}),
        ),
        (
            PostDecision::Block("leaks a secret".into()),
            "DENIED: leaks a secret",
            true,
            json!({"code":"DENIED"}),
        ),
    ];
    for (decision, text, is_error, meta) in cases {
        let (_s, p) = setup(RecordingHooks::default().with_post(decision), par);
        let host = RecordingHost::new(Log::default(), false);
        let out = p
            .run_batch(
                &[call("c1", "probe", json!({}))],
                &host,
                CancellationToken::new(),
            )
            .await;
        assert_eq!(
            (out[0].text().as_str(), out[0].is_error, out[0].meta.clone()),
            (text, is_error, Some(meta))
        );
    }
}

#[tokio::test]
async fn bad_arguments_and_unknown_tools_are_error_results() {
    let (s, p) = setup(RecordingHooks::default(), par);
    let host = RecordingHost::new(Log::default(), false);
    let calls = [
        raw_call("1", "probe", "{\"ms\": 1,"),
        raw_call("2", "probe", "{\"ms\": \"soon\"}"),
        raw_call("3", "probe", "[1,2]"),
        raw_call("4", "nope", "{}"),
        raw_call("5", "probe", ""),
        raw_call("6", "read", "{}"),
    ];
    let out = p.run_batch(&calls, &host, CancellationToken::new()).await;
    let codes: Vec<Option<&str>> = out.iter().map(ToolOutcome::code).collect();
    assert_eq!(
        codes,
        vec![
            Some("INVALID_ARGS"),
            Some("INVALID_ARGS"),
            Some("INVALID_ARGS"),
            Some("UNKNOWN_TOOL"),
            None,
            Some("INVALID_ARGS")
        ]
    );
    assert!(
        out[0]
            .text()
            .starts_with("INVALID_ARGS: arguments for 'probe' are not valid JSON ("),
        "{}",
        out[0].text()
    );
    assert_eq!(
        out[1].text(),
        "INVALID_ARGS: arguments for 'probe' do not match its parameters: /ms: expected integer, got string"
    );
    assert_eq!(
        out[2].text(),
        "INVALID_ARGS: arguments for 'probe' do not match its parameters: arguments: expected object, got array"
    );
    assert!(out[3].text().starts_with("UNKNOWN_TOOL: no tool named 'nope'. Available tools: read, write, edit, glob, grep, bash, working_directory, todo_write, exit_plan_mode, ask_user_question, probe, solo"), "{}", out[3].text());
    assert_eq!(out[4].text(), "ok");
    assert_eq!(
        out[5].text(),
        "INVALID_ARGS: arguments for 'read' do not match its parameters: arguments: missing required property 'file_path'"
    );
    assert_eq!(s.probe.bodies.load(Ordering::SeqCst), 1);
    assert_eq!(ids(&out), vec!["1", "2", "3", "4", "5", "6"]);
}

#[tokio::test]
async fn plan_mode_blocks_changes_until_a_plan_is_approved() {
    let f = Fixture::new();
    f.write("a.txt", "a");
    let p = f.pipeline(SandboxMode::WorkspaceWrite);
    let plan = p.plan_state().clone();
    let log = Log::default();
    let refuse = RecordingHost::new(log.clone(), false);
    enter_plan_mode(&plan, &refuse).await;
    assert!(plan.is_active());
    assert!(
        plan.prompt_section()
            .is_some_and(|s| s.text().contains("exit_plan_mode"))
    );

    let calls = [
        call("1", "write", json!({"path":"a.txt","content":"b"})),
        call("2", "bash", json!({"command":"touch b.txt"})),
        call("3", "read", json!({"path":"a.txt"})),
        call("4", "exit_plan_mode", json!({"plan":"1. change a.txt"})),
    ];
    let out = p.run_batch(&calls, &refuse, CancellationToken::new()).await;
    assert!(
        out[0]
            .text()
            .starts_with("DENIED: plan mode is active: 'write'"),
        "{}",
        out[0].text()
    );
    assert_eq!(out[1].code(), Some("DENIED"));
    assert!(out[2].text().contains("\n1: a\n"), "{}", out[2].text());
    assert!(
        out[3]
            .text()
            .starts_with("The user did not approve the plan (not now)"),
        "{}",
        out[3].text()
    );
    assert!(plan.is_active());
    assert!(!f.ws.join("b.txt").exists());

    let approve = RecordingHost::new(log.clone(), true);
    let out = p
        .run_batch(
            &[
                call("5", "exit_plan_mode", json!({"plan":"1. change a.txt"})),
                call("6", "write", json!({"path":"a.txt","content":"b"})),
            ],
            &approve,
            CancellationToken::new(),
        )
        .await;
    assert!(
        out[0].text().starts_with("The user approved the plan"),
        "{}",
        out[0].text()
    );
    assert!(!out[1].is_error, "{}", out[1].text());
    assert!(!plan.is_active());
    assert_eq!(f.read("a.txt"), "b");

    let plan_events = |h: &RecordingHost| -> Vec<PlanModeEvent> {
        h.emitted()
            .into_iter()
            .filter_map(|e| match e {
                EventBody::PlanMode(m) => Some(*m),
                _ => None,
            })
            .collect()
    };
    assert_eq!(
        plan_events(&refuse),
        vec![
            PlanModeEvent {
                active: true,
                plan: None,
                approved: None
            },
            PlanModeEvent {
                active: true,
                plan: Some("1. change a.txt".into()),
                approved: Some(false)
            },
        ]
    );
    assert_eq!(
        plan_events(&approve),
        vec![PlanModeEvent {
            active: false,
            plan: Some("1. change a.txt".into()),
            approved: Some(true)
        }]
    );

    let again = p
        .run_batch(
            &[call("7", "exit_plan_mode", json!({"plan":"x"}))],
            &approve,
            CancellationToken::new(),
        )
        .await;
    assert_eq!(again[0].code(), Some("TOOL_FAILED"));
}

/// Nobody can answer (headless): `exit_plan_mode` hands the plan to the user instead of being
/// refused — plan mode stays on, the plan is logged unapproved, the host is asked to end the
/// turn with the plan as its answer — while an ordinary call needing approval is refused.
#[tokio::test]
async fn an_unanswered_plan_is_handed_to_the_user() {
    let f = Fixture::new();
    let p = f.pipeline(SandboxMode::WorkspaceWrite);
    let plan = p.plan_state().clone();
    let log = Log::default();
    let headless = RecordingHost::answering(
        log.clone(),
        ApprovalOutcome::Unanswered {
            reason: Some("nobody here".into()),
        },
    );
    enter_plan_mode(&plan, &headless).await;
    let out = p
        .run_batch(
            &[
                call("1", "write", json!({"path":"a.txt","content":"b"})),
                call("2", "exit_plan_mode", json!({"plan":"1. change a.txt"})),
            ],
            &headless,
            CancellationToken::new(),
        )
        .await;
    assert_eq!(out[0].code(), Some("DENIED"));
    assert!(!out[1].is_error, "{}", out[1].text());
    assert_eq!(out[1].text(), PLAN_HANDED_OFF);
    assert_eq!(
        out[1].meta,
        Some(json!({"approved": false, "handedOff": true}))
    );
    assert!(plan.is_active());
    assert!(!f.ws.join("a.txt").exists());
    assert_eq!(
        headless.handoffs(),
        vec![Handoff {
            reason: PLAN_AWAITS_APPROVAL.to_owned(),
            answer: "1. change a.txt".to_owned(),
        }]
    );
    let last = headless.emitted().into_iter().rev().find_map(|e| match e {
        EventBody::PlanMode(m) => Some(*m),
        _ => None,
    });
    assert_eq!(
        last,
        Some(PlanModeEvent {
            active: true,
            plan: Some("1. change a.txt".into()),
            approved: Some(false),
        })
    );

    // Outside plan mode, a call needing approval is refused with the host's reason.
    let rec = RecordingHooks::new(log.clone()).with_pre(PreDecision::Ask("risky".into()));
    let (s, p) = setup(rec, par);
    let out = p
        .run_batch(
            &[call("3", "probe", json!({}))],
            &headless,
            CancellationToken::new(),
        )
        .await;
    assert_eq!(
        out[0].text(),
        "DENIED: the user did not approve 'probe' (risky): nobody here"
    );
    assert_eq!(s.probe.bodies.load(Ordering::SeqCst), 0);
    assert_eq!(
        headless.handoffs().len(),
        1,
        "only exit_plan_mode hands off"
    );
}

#[tokio::test]
async fn todo_write_logs_the_whole_list() {
    let f = Fixture::new();
    let p = f.pipeline(SandboxMode::WorkspaceWrite);
    let host = RecordingHost::new(Log::default(), false);
    let todos = json!({"todos":[
        {"content":"read code","status":"completed"},
        {"content":"fix bug","status":"in_progress","activeForm":"Fixing bug"},
        {"content":"test","status":"pending"}
    ]});
    let out = p
        .run_batch(
            &[call("1", "todo_write", todos)],
            &host,
            CancellationToken::new(),
        )
        .await;
    assert_eq!(
        out[0].text(),
        "Todo list saved: 3 items (1 completed, 1 in progress, 1 pending)."
    );
    let EventBody::TodoWrite(list) = &host.emitted()[0] else {
        panic!("expected todo/write")
    };
    assert_eq!(list.todos.len(), 3);
    assert_eq!(list.todos[1].status, TodoStatus::InProgress);
    assert_eq!(list.todos[1].active_form.as_deref(), Some("Fixing bug"));
    let bad = p
        .run_batch(
            &[call(
                "2",
                "todo_write",
                json!({"todos":[{"content":"x","status":"doing"}]}),
            )],
            &host,
            CancellationToken::new(),
        )
        .await;
    assert_eq!(bad[0].code(), Some("INVALID_ARGS"));
}

/// Hides every tool but `glob` from the model (what Code Mode's `code` mode does with
/// everything but `run_code`).
struct OnlyGlob;
impl keel_tools::ExposeHook for OnlyGlob {
    fn hidden(&self, name: &str) -> Option<String> {
        (name != "glob").then(|| "reach it from inside glob".to_owned())
    }
}

/// Keeps the token of the last call it saw (a parent for a nested batch).
#[derive(Default)]
struct GrabToken(std::sync::Mutex<Option<keel_tools::ExecToken>>);
#[async_trait::async_trait]
impl keel_tools::PreExecuteHook for GrabToken {
    async fn pre_execute(
        &self,
        ctx: &keel_tools::HookContext<'_>,
        _args: &serde_json::Value,
    ) -> PreDecision {
        *self.0.lock().unwrap() = Some(ctx.token);
        PreDecision::Allow
    }
}

#[tokio::test]
async fn an_expose_hook_hides_tools_from_requests_and_direct_calls_but_not_nested_ones() {
    let f = Fixture::new();
    f.write("a.txt", "alpha\n");
    let grab = std::sync::Arc::new(GrabToken::default());
    let hooks = keel_tools::ToolHooks::new()
        .expose(std::sync::Arc::new(OnlyGlob))
        .pre_execute(grab.clone());
    let p = f.pipeline_with(SandboxMode::WorkspaceWrite, f.registry(vec![]), hooks);
    let offered: Vec<String> = p.offered_schemas().into_iter().map(|s| s.name).collect();
    assert_eq!(offered, vec!["glob"]);
    // The registry itself still has them all.
    assert!(p.registry().get("read").is_some());

    let host = keel_tools::NullCaller;
    let direct = p
        .run_batch(
            &[
                call("c1", "read", json!({"path": "a.txt"})),
                call("c2", "nope", json!({})),
            ],
            &host,
            CancellationToken::new(),
        )
        .await;
    assert_eq!(direct[0].code(), Some("UNKNOWN_TOOL"));
    assert_eq!(
        direct[0].text(),
        "UNKNOWN_TOOL: 'read' cannot be called directly: reach it from inside glob"
    );
    // A hidden tool is not advertised as available either.
    assert_eq!(
        direct[1].text(),
        "UNKNOWN_TOOL: no tool named 'nope'. Available tools: glob"
    );

    let token = p
        .run_batch(
            &[call("c3", "glob", json!({"pattern": "*.txt"}))],
            &host,
            CancellationToken::new(),
        )
        .await;
    assert!(!token[0].is_error, "{token:?}");
    let parent = *grab.0.lock().unwrap();
    assert!(parent.is_some());
    let nested = p
        .run_batch_with(
            &[call("c4", "read", json!({"path": "a.txt"}))],
            &host,
            BatchOptions {
                cancel: CancellationToken::new(),
                parent,
            },
        )
        .await;
    assert!(!nested[0].is_error, "{nested:?}");
    assert!(nested[0].text().contains("alpha"), "{nested:?}");
}

#[tokio::test]
async fn unknown_properties_are_refused_by_name_and_earlier_names_are_read_as_the_new_ones() {
    let f = Fixture::new();
    f.write("a.txt", "a");
    let p = f.pipeline(SandboxMode::WorkspaceWrite);
    let host = RecordingHost::new(Log::default(), true);
    let calls = [
        call("1", "read", json!({"file_path":"a.txt","encoding":"utf8"})),
        call("2", "grep", json!({"pattern":"a","exclude":"*.md"})),
        call("3", "read", json!({"path":"a.txt"})),
        call("4", "read", json!({"path":"a.txt","file_path":"a.txt"})),
        call("5", "bash", json!({"command":"true","timeout_ms":5000})),
    ];
    let out = p.run_batch(&calls, &host, CancellationToken::new()).await;
    assert_eq!(
        out[0].text(),
        "INVALID_ARGS: arguments for 'read' do not match its parameters: /encoding: unknown property (allowed: file_path, limit, offset)"
    );
    assert!(
        out[1].text().contains("/exclude: unknown property (allowed: case_insensitive, context, include, output_mode, path, pattern)"),
        "{}",
        out[1].text()
    );
    assert!(!out[2].is_error, "{}", out[2].text());
    assert!(
        out[2].text().starts_with("<path>a.txt</path>"),
        "{}",
        out[2].text()
    );
    assert_eq!(
        out[3].text(),
        "INVALID_ARGS: arguments for 'read' do not match its parameters: /path: 'path' is the earlier name of 'file_path'; send 'file_path' only"
    );
    assert!(!out[4].is_error, "{}", out[4].text());
}
