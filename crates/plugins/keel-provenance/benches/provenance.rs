//! Capture overhead per tool call (off, in-memory, journal without fsync, fsync alone), `trace` on
//! a 3,000-fact graph, and offline verification of that graph.
//!
//! `off` is the floor: the same stage material handed to no recorder (provenance disabled: the
//! pipeline makes no capture call), so the other figures read as added cost per call.
//!
//! `cargo bench -p keel-provenance --bench provenance`
#![allow(clippy::print_stderr)] // the bench reports the graph size it measured

#[path = "support/read_call.rs"]
mod read_call;

use criterion::{Criterion, criterion_group, criterion_main};
use keel_provenance::{Direction, Journal, Recorder, trace, verify};
use read_call::{Ids, Material, ids, material, one_call};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// The same call with capture off: the stage material exists, nothing records it.
fn one_call_off(m: &Material, id: &Ids) {
    black_box((
        &id.event,
        &id.call,
        &id.call_event,
        &id.token,
        &id.result_event,
    ));
    black_box((
        &m.message,
        &m.tool_call,
        &m.view,
        &m.args,
        &m.value,
        &m.result_event,
    ));
}

const RESET_EVERY: usize = 2_000;

fn capture(c: &mut Criterion) {
    let m = material();
    let all: Vec<Ids> = (0..RESET_EVERY).map(ids).collect();
    let mut g = c.benchmark_group("capture_per_call");
    g.bench_function("off", |b| {
        let mut i = 0usize;
        b.iter(|| {
            one_call_off(&m, &all[i % RESET_EVERY]);
            i += 1;
        })
    });
    g.bench_function("in_memory", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            // As the plugin's memory mode: receipts hashed and chained, no journal lines kept.
            let mut rec = Recorder::new("bench").without_lines();
            for i in 0..iters as usize {
                if i % RESET_EVERY == 0 && i > 0 {
                    rec = Recorder::new("bench").without_lines();
                }
                let t = Instant::now();
                one_call(&mut rec, &m, &all[i % RESET_EVERY]);
                total += t.elapsed();
            }
            total
        })
    });
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir_path = dir.path().to_owned();
    let mut fresh = 0usize;
    let mut next_dir = move || {
        fresh += 1;
        dir_path.join(format!("j{fresh}"))
    };
    g.bench_function("journal_no_fsync", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut j = Journal::open(&next_dir(), "bench").unwrap_or_else(|e| panic!("{e}"));
            for i in 0..iters as usize {
                if i % RESET_EVERY == 0 && i > 0 {
                    j = Journal::open(&next_dir(), "bench").unwrap_or_else(|e| panic!("{e}"));
                }
                let t = Instant::now();
                one_call(j.recorder_mut(), &m, &all[i % RESET_EVERY]);
                black_box(j.flush().unwrap_or(0));
                total += t.elapsed();
            }
            total
        })
    });
    g.sample_size(10);
    g.bench_function("fsync_only", |b| {
        let mut j =
            Journal::open(&dir.path().join("sync"), "bench").unwrap_or_else(|e| panic!("{e}"));
        let mut i = 0;
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                one_call(j.recorder_mut(), &m, &all[i % RESET_EVERY]);
                i += 1;
                let _ = j.flush();
                let t = Instant::now();
                j.sync().unwrap_or_else(|e| panic!("{e}"));
                total += t.elapsed();
            }
            total
        })
    });
    g.finish();
}

/// A graph of about 3,000 facts (11 facts per call).
fn graph_3000(m: &Material) -> Recorder {
    let mut rec = Recorder::new("bench");
    let mut i = 0;
    while rec.snapshot().fact_count() < 3_000 {
        one_call(&mut rec, m, &ids(i));
        i += 1;
    }
    rec
}

fn queries(c: &mut Criterion) {
    let m = material();
    let rec = graph_3000(&m);
    let s = rec.snapshot();
    eprintln!(
        "graph: {} facts, {} nodes, {} edges, {} receipts",
        s.fact_count(),
        s.nodes().len(),
        s.edges().len(),
        s.receipts().len()
    );
    let mut g = c.benchmark_group("query_3000_facts");
    g.bench_function("trace_backward_result_depth32", |b| {
        b.iter(|| {
            black_box(trace(
                s,
                black_box("result:call_137"),
                Direction::Backward,
                32,
            ))
        })
    });
    // Forward from the assistant message outcome of call 137 (no alias names it: find it).
    let occurrence = s
        .nodes()
        .iter()
        .find(|n| n.native_id.as_deref() == Some("ev-137"))
        .map(|n| n.id.clone());
    let message = s
        .nodes()
        .iter()
        .find(|n| n.occurrence_id.is_some() && n.occurrence_id == occurrence && n.fact_id.is_none())
        .map(|n| n.id.to_string())
        .unwrap_or_default();
    g.bench_function("trace_forward_message_depth32", |b| {
        b.iter(|| black_box(trace(s, black_box(&message), Direction::Forward, 32)))
    });
    g.finish();

    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let jdir = dir.path().join("v");
    let mut j = Journal::open(&jdir, "bench").unwrap_or_else(|e| panic!("{e}"));
    let mut i = 0;
    while j.snapshot().fact_count() < 3_000 {
        one_call(j.recorder_mut(), &m, &ids(i));
        i += 1;
    }
    let _ = j.flush();
    let _ = j.write_graph();
    let mut g = c.benchmark_group("verify_3000_facts");
    g.sample_size(20);
    g.bench_function("verify_offline", |b| {
        b.iter(|| black_box(verify(&jdir).unwrap_or_else(|e| panic!("{e}"))))
    });
    g.bench_function("write_graph", |b| {
        b.iter(|| black_box(j.write_graph().unwrap_or_default()))
    });
    g.bench_function("replay_open", |b| {
        b.iter(|| black_box(Journal::open(&jdir, "bench").map(|j| j.snapshot().fact_count())))
    });
    g.finish();
}

criterion_group!(benches, capture, queries);
criterion_main!(benches);
