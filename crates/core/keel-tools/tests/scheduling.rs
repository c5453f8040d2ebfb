//! Scheduling (parallel, exclusive, bounded, model order), spill, cancellation, timeouts.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use async_trait::async_trait;
use common::{Fixture, Probe, ProbeTool, call, ids, par, setup};
use keel_protocol::ContentBlock;
use keel_testkit::recording::{Log, RecordingHooks, RecordingHost};
use keel_tools::{ExecMode, SandboxMode, Tool, ToolError, ToolOutcome, ToolOutput};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn parallel_calls_overlap_and_commit_in_model_order() {
    let log = Log::default();
    let (s, p) = setup(RecordingHooks::new(log.clone()), par);
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
        .filter(|e| e.starts_with("host:commit"))
        .collect();
    assert_eq!(
        settled,
        vec!["host:commit:a", "host:commit:b", "host:commit:c"]
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
        .run_batch(&calls, &keel_tools::NullCaller, CancellationToken::new())
        .await;
    assert_eq!(ids(&out), vec!["0", "1", "2", "3", "4"]);
    assert_eq!(probe.max_running.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn exclusive_calls_run_alone() {
    let log = Log::default();
    let (s, p) = setup(RecordingHooks::new(log.clone()), par);
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
    let (s, p) = setup(RecordingHooks::default(), par);
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
        s.rec.post_text_lens(),
        vec![big.len()],
        "post-execute saw the full text"
    );
    assert!(path.starts_with(&s.f.spill.display().to_string()));
}

#[tokio::test]
async fn cancellation_before_dispatch_runs_no_body() {
    let log = Log::default();
    let (s, p) = setup(RecordingHooks::new(log.clone()), par);
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
        events.contains(&"host:commit:b".to_owned())
            && !events.iter().any(|e| e == "host:checkpoint"),
        "{events:?}"
    );
}

#[tokio::test]
async fn cancellation_during_a_body_aborts_it_and_stops_later_calls() {
    let (s, p) = setup(RecordingHooks::default(), par);
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
    let (s, p) = setup(RecordingHooks::default(), |probe| {
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
    let (_s, p) = setup(RecordingHooks::default(), |probe| {
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
    let (_s, p) = setup(RecordingHooks::default(), |_| vec![Arc::new(BadOutput)]);
    let out = p
        .run_batch(
            &[call("a", "bad", json!({}))],
            &keel_tools::NullCaller,
            CancellationToken::new(),
        )
        .await;
    assert_eq!(out[0].code(), Some("INVALID_TOOL_OUTPUT"));
}
