//! Code Mode's engine costs: a run's fixed cost (engine thread, runtime, context, prelude,
//! evaluation of a trivial program) and the bridge's cost per sub-call (a no-op tool, so what
//! is measured is the engine ↔ driver round trip and the promise plumbing, not a tool's own
//! pipeline cost). `cargo bench -p keel-codemode --bench engine`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use async_trait::async_trait;
use criterion::{Criterion, criterion_group, criterion_main};
use keel_codemode::engine::{self, Bridge, Limits, SubCall, SubResult};
use keel_tools::ExecMode;
use tokio_util::sync::CancellationToken;

struct Noop;

#[async_trait]
impl Bridge for Noop {
    fn mode(&self, _name: &str) -> ExecMode {
        ExecMode::Parallel
    }
    async fn call(&self, _call: SubCall, _cancel: CancellationToken) -> SubResult {
        SubResult {
            ok: true,
            text: "ok".into(),
            code: None,
        }
    }
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let names: Vec<String> = ["glob", "grep", "noop", "read"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let limits = Limits::default();
    let cancel = CancellationToken::new();
    let run = |code: &str| {
        rt.block_on(engine::run(code, &names, &limits, &Noop, &cancel))
            .unwrap()
    };
    c.bench_function("run: engine start + context + trivial program", |b| {
        b.iter(|| run("return 1;"))
    });
    c.bench_function("run: 100 sequential no-op sub-calls", |b| {
        b.iter(|| run("for (let i = 0; i < 100; i++) await tools.noop({i}); return 1;"))
    });
    c.bench_function("run: 100 parallel no-op sub-calls", |b| {
        b.iter(|| {
            run(
                "const ps = []; for (let i = 0; i < 100; i++) ps.push(tools.noop({i})); \
                 await Promise.all(ps); return 1;",
            )
        })
    });
    println!(
        "idle engine: JavaScript heap after start = {} bytes",
        engine::idle_heap_bytes().unwrap_or(0)
    );
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30);
    targets = bench
}
criterion_main!(benches);
