//! Criterion benches: cold load + repair plan + derive of a 1.3M-event synthetic session (plain
//! and zstd), and append throughput through a `PersistentSession` with a durable flush at every
//! step end. File sizes per event are printed once to stderr.
#![allow(
    clippy::print_stderr,
    clippy::unwrap_used,
    clippy::expect_used,
    missing_docs
)]

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use keel_protocol::{EventBody, SurfaceOp};
use keel_session::synth::{self, SynthOptions};
use keel_session::{Format, PersistentSession, Session, Store, WriterOptions};
use std::time::Duration;

fn events_target() -> u64 {
    std::env::var("KEEL_BENCH_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_300_000)
}

fn load_benches(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let options = SynthOptions {
        events: events_target(),
        ..SynthOptions::default()
    };
    let mut g = c.benchmark_group("cold_load_repair_derive");
    g.sample_size(10).measurement_time(Duration::from_secs(20));
    for name in ["session.jsonl", "session.jsonl.zst"] {
        let path = dir.path().join(name);
        let n = synth::write_file(&path, &options, 4096).unwrap();
        let bytes = std::fs::metadata(&path).unwrap().len();
        eprintln!(
            "{name}: {n} events, {bytes} bytes, {:.2} bytes/event",
            bytes as f64 / n as f64
        );
        g.throughput(Throughput::Elements(n));
        g.bench_function(name, |b| {
            b.iter(|| {
                let mut loaded = Store::load(&path).unwrap();
                let (repair, _) = loaded.session.plan_repair();
                let derived = loaded.session.derive_messages().len();
                (repair.len(), derived)
            })
        });
    }
    g.finish();
}

fn append_benches(c: &mut Criterion) {
    const N: u64 = 20_000;
    let options = SynthOptions {
        events: N,
        ..SynthOptions::default()
    };
    let mut events = Vec::new();
    synth::generate_into::<()>(&options, &mut |e| {
        events.push(e);
        Ok(())
    })
    .unwrap();
    let mut g = c.benchmark_group("append_flush_every_step");
    g.sample_size(10)
        .throughput(Throughput::Elements(events.len() as u64));
    for format in [Format::Plain, Format::Zstd] {
        g.bench_function(format!("{format:?}"), |b| {
            b.iter_with_setup(
                || tempfile::tempdir().unwrap(),
                |dir| {
                    let session = Session::new(synth::header());
                    let wo = WriterOptions {
                        format,
                        ..WriterOptions::default()
                    };
                    let mut ps = PersistentSession::create(
                        &Store::new(dir.path().to_owned()),
                        dir.path(),
                        session,
                        wo,
                    )
                    .unwrap();
                    for e in &events {
                        let step_end = matches!(e.body, EventBody::StepEnd(_));
                        match e.surface_op {
                            Some(op @ (SurfaceOp::Append | SurfaceOp::Replace { .. })) => {
                                ps.push_surface(e.body.clone(), op, e.source_event_seqs.clone())
                                    .unwrap();
                            }
                            None => {
                                ps.push(e.body.clone()).unwrap();
                            }
                        }
                        if step_end {
                            ps.flush().unwrap();
                        }
                    }
                    ps.close().unwrap();
                    dir
                },
            )
        });
    }
    g.finish();
}

criterion_group!(benches, append_benches, load_benches);
criterion_main!(benches);
