//! Per-call overhead of the pipeline for a no-op tool through every phase (parse, validate,
//! built-in policy, one hook per seam, checkpoint, execute chain, spill check, settled), and
//! the size of the default tool schemas.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stderr,
    missing_docs
)]

use async_trait::async_trait;
use criterion::{Criterion, criterion_group, criterion_main};
use keel_protocol::{ToolCallBlock, ToolSchema};
use keel_tools::{
    ExecMode, ExecuteMiddleware, GuardDecision, GuardHook, HookContext, Next, NullHost, Pipeline,
    PipelineHooks, PostDecision, PostExecuteHook, PreDecision, PreExecuteHook, ResultDraft,
    SandboxMode, SettledHook, Tool, ToolContext, ToolEffect, ToolError, ToolOutcome, ToolOutput,
    ToolRegistry, Workspace, default_tool_schemas_bytes,
};
use serde_json::{Value, json};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

struct Noop;

#[async_trait]
impl Tool for Noop {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "noop".into(),
            description: "does nothing".into(),
            parameters: json!({"type":"object","properties":{
                "path":{"type":"string"},"n":{"type":"integer","minimum":0}},"required":["path"]}),
        }
    }
    fn mode(&self) -> ExecMode {
        ExecMode::Parallel
    }
    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }
    async fn execute(&self, _args: Value, _ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text("ok"))
    }
}

struct PassAll;

#[async_trait]
impl PreExecuteHook for PassAll {
    async fn pre_execute(&self, _c: &HookContext<'_>, _a: &Value) -> PreDecision {
        PreDecision::Allow
    }
}
#[async_trait]
impl GuardHook for PassAll {
    async fn check(&self, _c: &HookContext<'_>, _a: &Value) -> GuardDecision {
        GuardDecision::Pass
    }
}
#[async_trait]
impl ExecuteMiddleware for PassAll {
    async fn around(
        &self,
        _c: &HookContext<'_>,
        a: Value,
        next: Next<'_>,
    ) -> Result<ToolOutput, ToolError> {
        next.run(a).await
    }
}
#[async_trait]
impl PostExecuteHook for PassAll {
    async fn post_execute(&self, _c: &HookContext<'_>, _r: &ResultDraft) -> PostDecision {
        PostDecision::Accept
    }
}
#[async_trait]
impl SettledHook for PassAll {
    async fn settled(&self, _c: &HookContext<'_>, _o: &ToolOutcome) {}
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let mut reg = ToolRegistry::new();
    reg.register(Arc::new(Noop)).unwrap();
    let pass = Arc::new(PassAll);
    let hooks = PipelineHooks::new()
        .pre_execute(pass.clone())
        .guard(pass.clone())
        .execute(pass.clone())
        .post_execute(pass.clone())
        .settled(pass);
    let pipeline = Pipeline::builder(
        Arc::new(reg),
        Workspace::new(dir.path(), SandboxMode::WorkspaceWrite).unwrap(),
    )
    .hooks(hooks)
    .spill(keel_tools::spill::SpillConfig::new(
        dir.path().join("spill"),
    ))
    .build()
    .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let one = [ToolCallBlock {
        id: "call_1".into(),
        name: "noop".into(),
        arguments: r#"{"path":"src/main.rs","n":3}"#.into(),
    }];
    let eight: Vec<ToolCallBlock> = (0..8)
        .map(|i| ToolCallBlock {
            id: format!("call_{i}"),
            ..one[0].clone()
        })
        .collect();

    c.bench_function("pipeline/1 no-op call, all phases", |b| {
        b.iter(|| rt.block_on(pipeline.run_batch(&one, &NullHost, CancellationToken::new())))
    });
    c.bench_function("pipeline/8 parallel no-op calls, all phases", |b| {
        b.iter(|| rt.block_on(pipeline.run_batch(&eight, &NullHost, CancellationToken::new())))
    });
    c.bench_function("default_tool_schemas_bytes", |b| {
        b.iter(default_tool_schemas_bytes)
    });
    // Reported, not asserted (see tests/schemas.rs for the budget check).
    eprintln!(
        "default tool schemas: {} bytes",
        default_tool_schemas_bytes()
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
