//! A hook that records every seam, with configurable decisions, and pipeline fixtures.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use super::{Fixture, Log, Probe, ProbeTool};
use async_trait::async_trait;
use keel_protocol::ContentBlock;
use keel_tools::{
    ExecMode, ExecToken, ExecuteMiddleware, GuardDecision, GuardHook, HookContext, Next, Pipeline,
    PipelineHooks, PostDecision, PostExecuteHook, PreDecision, PreExecuteHook, ResultDraft,
    SandboxMode, SettledHook, Tool, ToolError, ToolOutcome, ToolOutput,
};
use serde_json::Value;
use std::sync::{Arc, Mutex};

#[derive(Default)]
pub struct Recorder {
    pub log: Log,
    pub pre: Option<PreDecision>,
    pub guard: Option<GuardDecision>,
    pub post: Option<PostDecision>,
    pub rewrite: Option<Value>,
    pub seen: Mutex<Vec<(String, ExecToken, Option<ExecToken>)>>,
    pub post_text_len: Mutex<Vec<usize>>,
}

impl Recorder {
    fn note(&self, what: &str, ctx: &HookContext<'_>) {
        self.log.push(format!("{what}:{}", ctx.call.id));
        self.seen
            .lock()
            .unwrap()
            .push((what.to_owned(), ctx.token, ctx.parent));
    }
    pub fn hooks(self: &Arc<Self>) -> PipelineHooks {
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

pub struct Setup {
    pub f: Fixture,
    pub log: Log,
    pub probe: Arc<Probe>,
    pub rec: Arc<Recorder>,
}

pub fn setup(
    rec: Recorder,
    tools: impl FnOnce(&Arc<Probe>) -> Vec<Arc<dyn Tool>>,
) -> (Setup, Pipeline) {
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

pub fn par(probe: &Arc<Probe>) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(ProbeTool::new("probe", ExecMode::Parallel, probe)),
        Arc::new(ProbeTool::new("solo", ExecMode::Exclusive, probe)),
    ]
}

pub fn ids(out: &[ToolOutcome]) -> Vec<&str> {
    out.iter().map(|o| o.call_id.as_str()).collect()
}
