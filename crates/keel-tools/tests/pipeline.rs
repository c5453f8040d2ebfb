//! The pipeline: phases and their order, seams, error codes, scheduling, spill, cancellation.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use async_trait::async_trait;
use common::{Fixture, Log, Probe, ProbeTool, RecordingHost, call, raw_call};
use keel_protocol::{ContentBlock, EventBody, PlanModeEvent, TodoStatus};
use keel_tools::{
    BatchOptions, ExecMode, ExecToken, ExecuteMiddleware, GuardDecision, GuardHook, HookContext,
    Next, PipelineHooks, PostDecision, PostExecuteHook, PreDecision, PreExecuteHook, ResultDraft,
    SandboxMode, SettledHook, Tool, ToolError, ToolOutcome, ToolOutput, enter_plan_mode,
};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Records every seam; behaviour configurable per seam.
#[derive(Default)]
struct Recorder {
    log: Log,
    pre: Option<PreDecision>,
    guard: Option<GuardDecision>,
    post: Option<PostDecision>,
    rewrite: Option<Value>,
    seen: Mutex<Vec<(String, ExecToken, Option<ExecToken>)>>,
    post_text_len: Mutex<Vec<usize>>,
}

impl Recorder {
    fn note(&self, what: &str, ctx: &HookContext<'_>) {
        self.log.push(format!("{what}:{}", ctx.call.id));
        self.seen
            .lock()
            .unwrap()
            .push((what.to_owned(), ctx.token, ctx.parent));
    }
    fn hooks(self: &Arc<Self>) -> PipelineHooks {
        PipelineHooks::new()
            .pre_execute(self.clone())
            .guard(self.clone())
            .execute(self.clone())
            .post_execute(self.clone())
            .settled(self.clone())
    }
}

#[async_trait]
impl PreExecuteHook for Recorder {
    async fn pre_execute(&self, ctx: &HookContext<'_>, args: &Value) -> PreDecision {
        assert!(args.is_object());
        self.note("pre", ctx);
        self.pre.clone().unwrap_or(PreDecision::Allow)
    }
}

#[async_trait]
impl GuardHook for Recorder {
    async fn check(&self, ctx: &HookContext<'_>, _args: &Value) -> GuardDecision {
        self.note("guard", ctx);
        self.guard.clone().unwrap_or(GuardDecision::Pass)
    }
}

#[async_trait]
impl ExecuteMiddleware for Recorder {
    async fn around(
        &self,
        ctx: &HookContext<'_>,
        args: Value,
        next: Next<'_>,
    ) -> Result<ToolOutput, ToolError> {
        self.note("exec:before", ctx);
        let args = self.rewrite.clone().unwrap_or(args);
        let out = next.run(args).await;
        self.note("exec:after", ctx);
        out
    }
}

#[async_trait]
impl PostExecuteHook for Recorder {
    async fn post_execute(&self, ctx: &HookContext<'_>, result: &ResultDraft) -> PostDecision {
        self.note("post", ctx);
        let len = result.content.iter().map(|b| match b {
            ContentBlock::Text { text } => text.len(),
            _ => 0,
        });
        self.post_text_len.lock().unwrap().push(len.sum());
        self.post.clone().unwrap_or(PostDecision::Accept)
    }
}

#[async_trait]
impl SettledHook for Recorder {
    async fn settled(&self, ctx: &HookContext<'_>, outcome: &ToolOutcome) {
        assert_eq!(outcome.call_id, ctx.call.id);
        self.note("settled", ctx);
    }
}

struct Setup {
    f: Fixture,
    log: Log,
    probe: Arc<Probe>,
    rec: Arc<Recorder>,
}

fn setup(
    rec: Recorder,
    tools: impl FnOnce(&Arc<Probe>) -> Vec<Arc<dyn Tool>>,
) -> (Setup, keel_tools::Pipeline) {
    let f = Fixture::new();
    let log = rec.log.clone();
    let probe = Arc::new(Probe {
        log: log.clone(),
        ..Probe::default()
    });
    let rec = Arc::new(rec);
    let reg = f.registry(tools(&probe));
    let p = f.pipeline_with(SandboxMode::WorkspaceWrite, reg, rec.hooks());
    (Setup { f, log, probe, rec }, p)
}

fn par(probe: &Arc<Probe>) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(ProbeTool::new("probe", ExecMode::Parallel, probe)),
        Arc::new(ProbeTool::new("solo", ExecMode::Exclusive, probe)),
    ]
}

fn ids(out: &[ToolOutcome]) -> Vec<&str> {
    out.iter().map(|o| o.call_id.as_str()).collect()
}

#[tokio::test]
async fn phases_run_in_order_with_one_token_and_effective_args() {
    let log = Log::default();
    let (s, p) = setup(
        Recorder {
            log: log.clone(),
            rewrite: Some(json!({"text":"rewritten"})),
            ..Default::default()
        },
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
            "host:settled:c1",
        ]
    );
    let seen = s.rec.seen.lock().unwrap().clone();
    let token = seen[0].1;
    assert!(
        seen.iter()
            .all(|(_, t, parent)| *t == token && parent.is_none()),
        "{seen:?}"
    );

    // A nested batch carries its parent's token to the hooks; its own token is fresh.
    s.rec.seen.lock().unwrap().clear();
    let opts = BatchOptions {
        cancel: CancellationToken::new(),
        parent: Some(token),
    };
    p.run_batch_with(&[call("c2", "probe", json!({}))], &host, opts)
        .await;
    let seen = s.rec.seen.lock().unwrap().clone();
    assert!(
        seen.iter()
            .all(|(_, t, parent)| *t != token && *parent == Some(token)),
        "{seen:?}"
    );
}

#[tokio::test]
async fn pre_execute_deny_means_no_body_and_no_guard() {
    let log = Log::default();
    let rec = Recorder {
        log: log.clone(),
        pre: Some(PreDecision::Deny("not today".into())),
        ..Default::default()
    };
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
            "host:settled:c1"
        ]
    );
}

#[tokio::test]
async fn pre_execute_ask_goes_to_the_host() {
    for approve in [true, false] {
        let log = Log::default();
        let rec = Recorder {
            log: log.clone(),
            pre: Some(PreDecision::Ask("risky".into())),
            ..Default::default()
        };
        let (s, p) = setup(rec, par);
        let host = RecordingHost::new(log.clone(), approve);
        let out = p
            .run_batch(
                &[call("c1", "probe", json!({}))],
                &host,
                CancellationToken::new(),
            )
            .await;
        assert_eq!(
            host.asked.lock().unwrap().clone(),
            vec![("c1".to_owned(), "risky".to_owned())]
        );
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
    let rec = Recorder {
        log: log.clone(),
        guard: Some(GuardDecision::Deny("contract says no".into())),
        ..Default::default()
    };
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
            "host:settled:c1"
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
        let (_s, p) = setup(
            Recorder {
                post: Some(decision),
                ..Default::default()
            },
            par,
        );
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
    let (s, p) = setup(Recorder::default(), par);
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
    assert!(out[3].text().starts_with("UNKNOWN_TOOL: no tool named 'nope'. Available tools: read, write, edit, glob, grep, bash, todo_write, exit_plan_mode, probe, solo"), "{}", out[3].text());
    assert_eq!(out[4].text(), "ok");
    assert_eq!(
        out[5].text(),
        "INVALID_ARGS: arguments for 'read' do not match its parameters: arguments: missing required property 'path'"
    );
    assert_eq!(s.probe.bodies.load(Ordering::SeqCst), 1);
    assert_eq!(ids(&out), vec!["1", "2", "3", "4", "5", "6"]);
}

#[tokio::test]
async fn parallel_calls_overlap_and_commit_in_model_order() {
    let log = Log::default();
    let (s, p) = setup(
        Recorder {
            log: log.clone(),
            ..Default::default()
        },
        par,
    );
    let host = RecordingHost::new(log.clone(), false);
    let calls = [
        call("a", "probe", json!({"ms":600,"text":"A"})),
        call("b", "probe", json!({"ms":20,"text":"B"})),
        call("c", "probe", json!({"ms":200,"text":"C"})),
    ];
    let out = p.run_batch(&calls, &host, CancellationToken::new()).await;
    assert_eq!(
        s.probe.max_running.load(Ordering::SeqCst),
        3,
        "bodies did not overlap"
    );
    assert_eq!(ids(&out), vec!["a", "b", "c"]);
    assert_eq!(
        out.iter().map(ToolOutcome::text).collect::<Vec<_>>(),
        vec!["A", "B", "C"]
    );
    let events = s.log.take();
    let settled: Vec<&String> = events
        .iter()
        .filter(|e| e.starts_with("host:settled"))
        .collect();
    assert_eq!(
        settled,
        vec!["host:settled:a", "host:settled:b", "host:settled:c"]
    );
    let ends: Vec<&String> = events
        .iter()
        .filter(|e| e.starts_with("body:end"))
        .collect();
    assert_eq!(
        ends,
        vec!["body:end:b", "body:end:c", "body:end:a"],
        "b and c finished first"
    );
}

#[tokio::test]
async fn parallelism_is_bounded() {
    let f = Fixture::new();
    let probe = Arc::new(Probe::default());
    let reg = f.registry(par(&probe));
    let p = keel_tools::Pipeline::builder(
        reg,
        keel_tools::Workspace::new(&f.ws, SandboxMode::WorkspaceWrite).unwrap(),
    )
    .spill(keel_tools::spill::SpillConfig::new(&f.spill))
    .max_parallel(2)
    .build()
    .unwrap();
    let calls: Vec<_> = (0..5)
        .map(|i| call(&i.to_string(), "probe", json!({"ms":80})))
        .collect();
    let out = p
        .run_batch(&calls, &keel_tools::NullHost, CancellationToken::new())
        .await;
    assert_eq!(ids(&out), vec!["0", "1", "2", "3", "4"]);
    assert_eq!(probe.max_running.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn exclusive_calls_run_alone() {
    let log = Log::default();
    let (s, p) = setup(
        Recorder {
            log: log.clone(),
            ..Default::default()
        },
        par,
    );
    let host = RecordingHost::new(log.clone(), false);
    let calls = [
        call("p1", "probe", json!({"ms":100})),
        call("p2", "probe", json!({"ms":60})),
        call("x", "solo", json!({"ms":50})),
        call("p3", "probe", json!({"ms":10})),
        call("p4", "probe", json!({"ms":10})),
    ];
    let out = p.run_batch(&calls, &host, CancellationToken::new()).await;
    assert_eq!(ids(&out), vec!["p1", "p2", "x", "p3", "p4"]);
    let body: Vec<String> = s
        .log
        .take()
        .into_iter()
        .filter(|e| e.starts_with("body:"))
        .collect();
    let pos = |e: &str| body.iter().position(|b| b == e).unwrap();
    assert!(
        pos("body:end:p1") < pos("body:start:x") && pos("body:end:p2") < pos("body:start:x"),
        "{body:?}"
    );
    assert_eq!(
        pos("body:end:x"),
        pos("body:start:x") + 1,
        "nothing ran beside x: {body:?}"
    );
    assert!(pos("body:end:x") < pos("body:start:p3"), "{body:?}");
    assert_eq!(s.probe.max_running.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn large_text_results_are_spilled_after_post_execute() {
    let (s, p) = setup(Recorder::default(), par);
    let host = RecordingHost::new(Log::default(), false);
    let big = format!("HEAD{}TAIL", "z".repeat(60_000));
    let out = p
        .run_batch(
            &[call("c1", "probe", json!({"text": big}))],
            &host,
            CancellationToken::new(),
        )
        .await;
    let text = out[0].text();
    assert!(text.len() < 20_000, "{}", text.len());
    assert!(text.starts_with("HEAD") && text.ends_with("TAIL"));
    let path = out[0].meta.as_ref().unwrap()["spill"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(text.contains(&path));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), big);
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(
        s.rec.post_text_len.lock().unwrap().clone(),
        vec![big.len()],
        "post-execute saw the full text"
    );
    assert!(path.starts_with(&s.f.spill.display().to_string()));
}

#[tokio::test]
async fn cancellation_before_dispatch_runs_no_body() {
    let log = Log::default();
    let (s, p) = setup(
        Recorder {
            log: log.clone(),
            ..Default::default()
        },
        par,
    );
    let host = RecordingHost::new(log.clone(), false);
    let cancel = CancellationToken::new();
    cancel.cancel();
    let out = p
        .run_batch(
            &[call("a", "probe", json!({})), call("b", "solo", json!({}))],
            &host,
            cancel,
        )
        .await;
    assert_eq!(
        out.iter().map(ToolOutcome::code).collect::<Vec<_>>(),
        vec![Some("ABORTED_BEFORE_DISPATCH"); 2]
    );
    assert_eq!(s.probe.bodies.load(Ordering::SeqCst), 0);
    let events = s.log.take();
    assert!(
        events.contains(&"host:settled:b".to_owned())
            && !events.iter().any(|e| e == "host:checkpoint"),
        "{events:?}"
    );
}

#[tokio::test]
async fn cancellation_during_a_body_aborts_it_and_stops_later_calls() {
    let (s, p) = setup(Recorder::default(), par);
    let host = RecordingHost::new(Log::default(), false);
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(150)).await;
        trigger.cancel();
    });
    let calls = [
        call("a", "solo", json!({"ms":10_000})),
        call("b", "probe", json!({})),
    ];
    let out = p.run_batch(&calls, &host, cancel).await;
    assert_eq!(
        out.iter().map(ToolOutcome::code).collect::<Vec<_>>(),
        vec![Some("ABORTED"), Some("ABORTED_BEFORE_DISPATCH")]
    );
    assert_eq!(s.probe.bodies.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_body_ignoring_cancellation_is_abandoned_after_the_grace() {
    let (s, p) = setup(Recorder::default(), |probe| {
        let mut t = ProbeTool::new("stubborn", ExecMode::Exclusive, probe);
        t.stubborn = true;
        vec![Arc::new(t)]
    });
    let host = RecordingHost::new(Log::default(), false);
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        trigger.cancel();
    });
    let out = p
        .run_batch(
            &[call("a", "stubborn", json!({"ms":20_000}))],
            &host,
            cancel,
        )
        .await;
    assert_eq!(out[0].code(), Some("ABORTED"));
    assert_eq!(
        out[0].text(),
        "ABORTED: 'stubborn' was cancelled while running and was stopped"
    );
    assert_eq!(
        s.probe.running.load(Ordering::SeqCst),
        1,
        "the body was dropped mid-flight"
    );
}

#[tokio::test]
async fn tool_timeouts_and_failures_have_codes() {
    let (_s, p) = setup(Recorder::default(), |probe| {
        let mut t = ProbeTool::new("slow", ExecMode::Parallel, probe);
        t.timeout = Some(Duration::from_millis(100));
        vec![
            Arc::new(t),
            Arc::new(ProbeTool::new("probe", ExecMode::Parallel, probe)),
        ]
    });
    let host = RecordingHost::new(Log::default(), false);
    let calls = [
        call("a", "slow", json!({"ms":10_000})),
        call("b", "probe", json!({"fail":true})),
    ];
    let out = p.run_batch(&calls, &host, CancellationToken::new()).await;
    assert_eq!(
        out[0].text(),
        "TOOL_TIMEOUT: 'slow' did not finish within 0.1s and was stopped"
    );
    assert_eq!(out[1].text(), "TOOL_FAILED: probe failed on purpose");
    assert_eq!(out[1].meta, Some(json!({"code":"TOOL_FAILED"})));
}

struct BadOutput;

#[async_trait]
impl Tool for BadOutput {
    fn schema(&self) -> keel_protocol::ToolSchema {
        keel_protocol::ToolSchema {
            name: "bad".into(),
            description: "d".into(),
            parameters: json!({"type":"object"}),
        }
    }
    async fn execute(
        &self,
        _a: Value,
        _c: &keel_tools::ToolContext<'_>,
    ) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput {
            content: vec![ContentBlock::ToolCall(keel_protocol::ToolCallBlock {
                id: "x".into(),
                name: "y".into(),
                arguments: "{}".into(),
            })],
            value: None,
        })
    }
}

#[tokio::test]
async fn non_result_content_is_invalid_tool_output() {
    let (_s, p) = setup(Recorder::default(), |_| vec![Arc::new(BadOutput)]);
    let out = p
        .run_batch(
            &[call("a", "bad", json!({}))],
            &keel_tools::NullHost,
            CancellationToken::new(),
        )
        .await;
    assert_eq!(out[0].code(), Some("INVALID_TOOL_OUTPUT"));
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
    assert_eq!(out[2].text(), "1: a");
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
