//! The recording doubles through the real keel-tools pipeline: the host and the hooks log every
//! seam in order into one shared log, configured decisions are applied, and the pass-through
//! hooks change nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use async_trait::async_trait;
use keel_protocol::{ToolCallBlock, ToolSchema};
use keel_testkit::recording::{Log, PassThrough, RecordingHooks, RecordingHost};
use keel_tools::{
    NullCaller, Pipeline, PreDecision, SandboxMode, Tool, ToolContext, ToolError, ToolHooks,
    ToolOutput, ToolRegistry, Workspace,
};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Answers with its `text` argument.
struct Echo;

#[async_trait]
impl Tool for Echo {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "echo".into(),
            description: "test: echo".into(),
            parameters: json!({"type": "object", "properties": {"text": {"type": "string"}}}),
        }
    }
    async fn execute(&self, args: Value, _: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(args["text"].as_str().unwrap_or_default()))
    }
}

fn pipeline(dir: &std::path::Path, hooks: ToolHooks) -> Pipeline {
    let mut registry = ToolRegistry::new();
    registry.register(Arc::new(Echo)).unwrap();
    Pipeline::builder(
        Arc::new(registry),
        Workspace::new(dir, SandboxMode::WorkspaceWrite).unwrap(),
    )
    .hooks(hooks)
    .build()
    .unwrap()
}

fn echo(id: &str, text: &str) -> ToolCallBlock {
    ToolCallBlock {
        id: id.into(),
        name: "echo".into(),
        arguments: json!({ "text": text }).to_string(),
    }
}

#[tokio::test]
async fn host_and_hooks_log_every_seam_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::default();
    let rec = Arc::new(RecordingHooks::new(log.clone()).with_rewrite(json!({"text": "new"})));
    let p = pipeline(dir.path(), rec.hooks());
    let host = RecordingHost::new(log.clone(), false);
    let out = p
        .run_batch(&[echo("c1", "old")], &host, CancellationToken::new())
        .await;
    assert_eq!(out[0].text(), "new");
    assert_eq!(
        log.snapshot(),
        [
            "host:call_started:c1",
            "pre:c1",
            "guard:c1",
            "host:checkpoint",
            "exec:before:c1",
            "exec:after:c1",
            "post:c1",
            "settled:c1",
            "host:commit:c1",
        ]
    );
    let seen = rec.seen();
    assert_eq!(seen.len(), 6);
    assert!(
        seen.iter()
            .all(|(_, t, parent)| *t == seen[0].1 && parent.is_none())
    );
    assert_eq!(rec.post_text_lens(), [3]);
    assert_eq!(log.take().len(), 9);
    assert!(log.snapshot().is_empty());
    rec.clear_seen();
    assert!(rec.seen().is_empty());
}

#[tokio::test]
async fn an_ask_goes_to_the_host_which_answers_as_configured() {
    let dir = tempfile::tempdir().unwrap();
    for approve in [true, false] {
        let log = Log::default();
        let rec =
            Arc::new(RecordingHooks::new(log.clone()).with_pre(PreDecision::Ask("why".into())));
        let p = pipeline(dir.path(), rec.hooks());
        let host = RecordingHost::new(log.clone(), approve);
        let out = p
            .run_batch(&[echo("c1", "hi")], &host, CancellationToken::new())
            .await;
        assert_eq!(host.asked(), [("c1".to_owned(), "why".to_owned())]);
        assert!(log.snapshot().contains(&"host:ask:c1".to_owned()));
        assert_eq!(out[0].is_error, !approve, "{}", out[0].text());
        if !approve {
            assert!(out[0].text().ends_with("not now"), "{}", out[0].text());
        }
    }
}

#[tokio::test]
async fn pass_through_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let bare = pipeline(dir.path(), ToolHooks::new());
    let passed = pipeline(dir.path(), PassThrough::hooks());
    let calls = [echo("c1", "a"), echo("c2", "b")];
    let a = bare
        .run_batch(&calls, &NullCaller, CancellationToken::new())
        .await;
    let b = passed
        .run_batch(&calls, &NullCaller, CancellationToken::new())
        .await;
    let texts = |o: &[keel_tools::ToolOutcome]| o.iter().map(|x| x.text()).collect::<Vec<_>>();
    assert_eq!(texts(&a), texts(&b));
    assert_eq!(texts(&b), ["a", "b"]);
}
