//! The zero-I/O tool-call workload shared by the `pipeline` criterion bench and the
//! `callgrind` example: a tool that only answers, the real pipeline around it, provenance
//! capture bound to a session, and one call per `run_batch`.

use async_trait::async_trait;
use keel_agent::plugin::InstallContext;
use keel_protocol::{SessionId, ToolCallBlock, ToolSchema};
use keel_provenance::Provenance;
use keel_tools::{
    ExecMode, NullCaller, Pipeline, SandboxMode, Tool, ToolContext, ToolEffect, ToolError,
    ToolHooks, ToolOutput, ToolRegistry, Workspace,
};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// A tool that does nothing but answer.
struct Echo;

#[async_trait]
impl Tool for Echo {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "echo".into(),
            description: "bench: echo".into(),
            parameters: json!({"type": "object", "properties": {"text": {"type": "string"}}}),
        }
    }
    fn mode(&self) -> ExecMode {
        ExecMode::Parallel
    }
    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }
    async fn execute(&self, args: Value, _: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let text = args["text"].as_str().unwrap_or_default().to_owned();
        Ok(ToolOutput::text(text).with_value(json!({"bytes": 5})))
    }
}

/// The real pipeline with only the echo tool, in workspace `dir`.
pub fn pipeline(dir: &Path, hooks: ToolHooks) -> Pipeline {
    let mut registry = ToolRegistry::new();
    if let Err(e) = registry.register(Arc::new(Echo)) {
        panic!("cannot register the bench tool: {e}");
    }
    let ws = Workspace::new(dir, SandboxMode::WorkspaceWrite)
        .unwrap_or_else(|e| panic!("workspace: {e}"));
    Pipeline::builder(Arc::new(registry), ws)
        .hooks(hooks)
        .build()
        .unwrap_or_else(|e| panic!("pipeline: {e}"))
}

/// The tool hooks of `p` installed and bound to a session (provenance hooks are agent-scoped).
pub fn capture_hooks(dir: &Path, p: &Provenance) -> ToolHooks {
    let subprocess = keel_tools::subprocess::SubprocessService::new(
        keel_tools::subprocess::SubprocessConfig::from_process_env(dir.join("spill")),
    );
    let mut host = InstallContext::new(dir.to_path_buf(), dir.to_path_buf(), subprocess);
    p.install(&mut host);
    if let Err(e) = p.bind(&SessionId("bench".into())) {
        panic!("bind: {e}");
    }
    host.agent_hooks.tools
}

/// One echo call with id `call_<n>` (a fresh id per call, as in a session).
pub fn call(rt: &tokio::runtime::Runtime, p: &Pipeline, n: u64) {
    let call = [ToolCallBlock {
        id: format!("call_{n}"),
        name: "echo".into(),
        arguments: r#"{"text":"hello"}"#.into(),
    }];
    std::hint::black_box(rt.block_on(p.run_batch(&call, &NullCaller, CancellationToken::new())));
}

/// A single-threaded runtime, as the bench drives one call at a time.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"))
}
