//! Per-call overhead of provenance capture through the **real tool pipeline**: one synthetic
//! zero-I/O tool call per iteration (`run_batch` of one call, `NullCaller`), with provenance off,
//! in memory, and journaled without fsync; the fsync that `tools/settled` adds by default is
//! measured separately (journal with fsync).
//!
//! `cargo bench -p keel-provenance --bench pipeline`

#[path = "support/echo_pipeline.rs"]
mod echo_pipeline;

use criterion::{Criterion, criterion_group, criterion_main};
use echo_pipeline::{call, capture_hooks, pipeline, runtime};
use keel_protocol::SessionId;
use keel_provenance::Provenance;
use keel_provenance::plugin::Fsync;
use keel_tools::ToolHooks;
use std::path::Path;

/// Hooks of a bound provenance capture in memory, or journaled under `home`.
fn capture(dir: &Path, home: Option<(&Path, Fsync)>) -> Case {
    let p = match home {
        None => Provenance::in_memory(),
        Some((home, fsync)) => Provenance::journal(home.to_path_buf()).with_fsync(fsync),
    };
    (capture_hooks(dir, &p), Some(p))
}

/// A case's pipeline hooks and its capture (`None`: provenance off).
type Case = (ToolHooks, Option<Provenance>);

/// Calls per session: each bench session rebinds capture to a fresh session (journal) after
/// this many calls, outside the timed region. A long real session has hundreds of tool calls;
/// 1,000 keeps the graph realistic while the bench runs ~10^5 calls.
const SESSION_CALLS: u64 = 1_000;

fn bench(c: &mut Criterion) {
    let rt = runtime();
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let dir = tmp.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
    // (name, hooks, capture, calls per session; 0 = one session for the whole run)
    let cases: Vec<(&str, Case, u64)> = vec![
        ("off", (ToolHooks::new(), None), 0),
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
                        call(&rt, &p, n);
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
