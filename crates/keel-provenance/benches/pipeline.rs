//! Per-call overhead of provenance capture through the **real tool pipeline**: one synthetic
//! zero-I/O tool call per iteration (`run_batch` of one call, `NullHost`), with provenance off,
//! in memory, and journaled without fsync; the fsync that `tools/settled` adds by default is
//! measured separately (journal with fsync).
//!
//! `cargo bench -p keel-provenance --bench pipeline`

use async_trait::async_trait;
use criterion::{Criterion, criterion_group, criterion_main};
use keel_agent::plugin::HostBuilder;
use keel_protocol::{SessionId, ToolCallBlock, ToolSchema};
use keel_provenance::Provenance;
use keel_provenance::plugin::Fsync;
use keel_tools::{
    ExecMode, NullHost, Pipeline, PipelineHooks, SandboxMode, Tool, ToolContext, ToolEffect,
    ToolError, ToolOutput, ToolRegistry, Workspace,
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

fn pipeline(dir: &Path, hooks: PipelineHooks) -> Pipeline {
    let mut registry = ToolRegistry::new();
    if registry.register(Arc::new(Echo)).is_err() {
        panic!("cannot register the bench tool");
    }
    let ws = Workspace::new(dir, SandboxMode::WorkspaceWrite)
        .unwrap_or_else(|e| panic!("workspace: {e}"));
    Pipeline::builder(Arc::new(registry), ws)
        .hooks(hooks)
        .build()
        .unwrap_or_else(|e| panic!("pipeline: {e}"))
}

/// Hooks of a bound provenance capture (`None`: provenance off).
fn capture(dir: &Path, home: Option<(&Path, Fsync)>) -> Case {
    let p = match home {
        None => Provenance::in_memory(),
        Some((home, fsync)) => Provenance::journal(home.to_path_buf()).with_fsync(fsync),
    };
    let mut host = HostBuilder::new(dir.to_path_buf(), dir.to_path_buf());
    p.install(&mut host);
    if let Err(e) = p.bind(&SessionId("bench".into())) {
        panic!("bind: {e}");
    }
    // Provenance hooks are agent-scoped (a subagent must not write into this journal).
    (host.agent_hooks.tools, Some(p))
}

/// A case's pipeline hooks and its capture (`None`: provenance off).
type Case = (PipelineHooks, Option<Provenance>);

/// Calls per session: each bench session rebinds capture to a fresh session (journal) after
/// this many calls, outside the timed region. A long real session has hundreds of tool calls;
/// 1,000 keeps the graph realistic while the bench runs ~10^5 calls.
const SESSION_CALLS: u64 = 1_000;

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"));
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let dir = tmp.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
    // (name, hooks, capture, calls per session; 0 = one session for the whole run)
    let cases: Vec<(&str, Case, u64)> = vec![
        ("off", (PipelineHooks::new(), None), 0),
        ("memory", capture(&dir, None), SESSION_CALLS),
        (
            "journal_no_fsync",
            capture(&dir, Some((&dir.join("home-a"), Fsync::Never))),
            SESSION_CALLS,
        ),
        (
            "journal_fsync",
            capture(&dir, Some((&dir.join("home-b"), Fsync::Always))),
            SESSION_CALLS,
        ),
        // The graph grows through the whole run (~10^5 calls): cache misses and page faults
        // of a very large graph, for comparison.
        ("memory_unbounded", capture(&dir, None), 0),
    ];
    let mut group = c.benchmark_group("pipeline_call");
    for (name, (hooks, prov), per_session) in cases {
        let p = pipeline(&dir, hooks);
        // A fresh call id per call, as in a session (a repeated id is a different workload).
        let mut n = 0u64;
        let mut sessions = 0u64;
        let mut last_receipts = 0;
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = std::time::Duration::ZERO;
                let mut left = iters;
                while left > 0 {
                    let in_session = if per_session == 0 {
                        left
                    } else {
                        let used = n % per_session;
                        if used == 0
                            && n > 0
                            && let Some(prov) = &prov
                        {
                            last_receipts = prov.with_snapshot(|s| s.receipts().len()).unwrap_or(0);
                            sessions += 1;
                            let id = SessionId(format!("bench-{sessions}"));
                            if let Err(e) = prov.bind(&id) {
                                panic!("bind: {e}");
                            }
                        }
                        left.min(per_session - used)
                    };
                    let start = std::time::Instant::now();
                    for _ in 0..in_session {
                        n += 1;
                        let call = [ToolCallBlock {
                            id: format!("call_{n}"),
                            name: "echo".into(),
                            arguments: r#"{"text":"hello"}"#.into(),
                        }];
                        std::hint::black_box(rt.block_on(p.run_batch(
                            &call,
                            &NullHost,
                            CancellationToken::new(),
                        )));
                    }
                    total += start.elapsed();
                    left -= in_session;
                }
                total
            })
        });
        // The capture must really have happened: a bench of empty hooks measures nothing.
        if let (Some(prov), true) = (prov, n > 0) {
            let receipts = prov
                .with_snapshot(|s| s.receipts().len())
                .unwrap_or(0)
                .max(last_receipts);
            assert!(receipts > 0, "{name}: provenance captured nothing");
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).warm_up_time(std::time::Duration::from_secs(1))
        .measurement_time(std::time::Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
