//! Search over many sessions: 1,000 synthetic session logs of at least 1,300 events each (~1.7 M
//! events, `keel_session::synth`: realistic turns, 96% streamed chunks). Prints the time of
//! the first index build once, then measures a warm search (the refresh that stats every file
//! and finds nothing new, plus the query) with criterion. `KEEL_SEARCH_BENCH_SESSIONS` changes
//! the session count.
//!
//! `cargo bench -p keel-search --bench search`

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use criterion::{Criterion, criterion_group, criterion_main};
use keel_search::Index;
use keel_session::Store;
use keel_session::synth::{SynthOptions, write_file};
use std::path::Path;
use std::time::Instant;

fn setup(home: &Path, sessions: u64) -> u64 {
    let project = home
        .join("sessions")
        .join(Store::project_key(Path::new("/home/user/project")));
    let mut events = 0;
    for i in 0..sessions {
        let dir = project.join(format!("session-{i:05}"));
        std::fs::create_dir_all(&dir).unwrap();
        let options = SynthOptions {
            events: 1_300,
            seed: 7 + i,
            ..SynthOptions::default()
        };
        events += write_file(&dir.join("session.jsonl"), &options, 4096).unwrap();
    }
    events
}

fn bench(c: &mut Criterion) {
    let sessions = std::env::var("KEEL_SEARCH_BENCH_SESSIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000);
    let home = tempfile::tempdir().unwrap();
    let t = Instant::now();
    let events = setup(home.path(), sessions);
    eprintln!(
        "generated {sessions} sessions, {events} events in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let store = Store::new(home.path().to_path_buf());
    let mut index = Index::open(home.path()).unwrap();
    let t = Instant::now();
    let first = index.refresh(&store).unwrap();
    let size = std::fs::metadata(keel_search::index_path(home.path()))
        .map(|m| m.len())
        .unwrap_or(0);
    eprintln!(
        "index build: {} files, {} events in {:.2} s; index file {:.1} MiB",
        first.indexed,
        first.events,
        t.elapsed().as_secs_f64(),
        size as f64 / (1 << 20) as f64
    );
    let mut group = c.benchmark_group("search");
    group.sample_size(20);
    group.bench_function("warm: refresh + query, 1,000 sessions", |b| {
        b.iter(|| {
            let r = index.refresh(&store).unwrap();
            assert_eq!(r.indexed, 0);
            let hits = index.search("failing test module 2", None, 20).unwrap();
            assert!(!hits.is_empty());
            hits
        })
    });
    group.bench_function("query only", |b| {
        b.iter(|| index.search("explain the cause", None, 20).unwrap())
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
