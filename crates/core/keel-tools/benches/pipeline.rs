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
use keel_testkit::recording::PassThrough;
use keel_tools::{
    ExecMode, NullCaller, Pipeline, SandboxMode, Tool, ToolContext, ToolEffect, ToolError,
    ToolOutput, ToolRegistry, Workspace, default_tool_schemas_bytes,
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

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let mut reg = ToolRegistry::new();
    reg.register(Arc::new(Noop)).unwrap();
    // One hook per seam that changes nothing: the seams' own cost.
    let hooks = PassThrough::hooks();
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
        b.iter(|| rt.block_on(pipeline.run_batch(&one, &NullCaller, CancellationToken::new())))
    });
    c.bench_function("pipeline/8 parallel no-op calls, all phases", |b| {
        b.iter(|| rt.block_on(pipeline.run_batch(&eight, &NullCaller, CancellationToken::new())))
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
