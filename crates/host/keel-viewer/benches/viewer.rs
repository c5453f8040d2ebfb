//! Criterion bench: the HTML page of a 100,000-event synthetic session (keel-session's
//! generator: streamed chunks, reasoning, a `bash` call per step, usage on every answer), in
//! two mixes: the realistic one (about 96% `assistant/chunk`s, which the page skips) and a
//! dense one (few deltas per step, so about six times more messages, calls and results per
//! event). The page size of each is printed once to stderr. `bench/viewer.sh` measures the
//! same through the real `keel` binary and a headless browser.
#![allow(
    clippy::print_stderr,
    clippy::unwrap_used,
    clippy::expect_used,
    missing_docs
)]

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use keel_session::synth::{self, SynthOptions};
use keel_viewer::{HtmlOptions, render_html};
use std::time::Duration;

fn events_target() -> u64 {
    std::env::var("KEEL_BENCH_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000)
}

fn export(c: &mut Criterion) {
    let mut g = c.benchmark_group("export_html");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    for (name, reasoning_deltas) in [("realistic", 90), ("dense", 4)] {
        let session = synth::generate(&SynthOptions {
            events: events_target(),
            reasoning_deltas,
            ..SynthOptions::default()
        })
        .unwrap();
        let page = render_html(&session, &HtmlOptions::default());
        eprintln!(
            "{name}: {} events, page {} bytes",
            session.len(),
            page.len()
        );
        g.throughput(Throughput::Elements(session.len()));
        g.bench_function(name, |b| {
            b.iter(|| render_html(std::hint::black_box(&session), &HtmlOptions::default()))
        });
    }
    g.finish();
}

criterion_group!(benches, export);
criterion_main!(benches);
