//! Memory store figures: `memory_search` over 100,000 records (the tool body: argument
//! checks, the index lookups, the ranking, the record reads, the rendering and the frame), and
//! `memory_write` of one record on a real disk (with its fsync) and on tmpfs (`/dev/shm`,
//! where fsync costs next to nothing: the CPU part).
//!
//! `CARGO_TARGET_DIR=… cargo bench -p keel-memory --bench memory`
//! (`KEEL_MEMORY_BENCH_RECORDS=N` changes the store size).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use criterion::{Criterion, criterion_group, criterion_main};
use keel_memory::store::tools::{Shared, call};
use keel_memory::store::{Identity, Kind, MemoryStore, NewRecord, Scope};
use serde_json::json;
use std::path::Path;
use std::time::Duration;

const VOCAB: u64 = 5000;

/// A deterministic generator (splitmix64).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// A word index skewed towards small ones (a rough Zipf).
    fn word(&mut self) -> u64 {
        let a = self.next() % VOCAB + 1;
        let b = self.next() % VOCAB + 1;
        (a * b) / VOCAB
    }
}

fn sentence(rng: &mut Rng) -> String {
    let n = 10 + rng.next() % 20;
    (0..n)
        .map(|_| format!("w{}", rng.word()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A store of `n` records spread over the caller's four scopes (plus another session's).
fn populate(path: &Path, who: &Identity, n: usize) {
    let store = MemoryStore::open(path).unwrap().with_global_writes(true);
    let other = Identity::new("other-session", Path::new("/elsewhere"), "main");
    let mut rng = Rng(42);
    let now = keel_memory::store::records::now_ms();
    let batch = 5000;
    for start in (0..n).step_by(batch) {
        let scope = Scope::ALL[(start / batch) % 4];
        let w = if start / batch % 5 == 4 { &other } else { who };
        let news = (start..(start + batch).min(n))
            .map(|i| NewRecord {
                kind: Kind::Semantic,
                content: sentence(&mut rng),
                tags: vec![format!("t{}", i % 50)],
                importance: Some((rng.next() % 101) as f64 / 100.0),
                confidence: None,
                expires_at: None,
            })
            .collect();
        store
            .write_batch(w, scope, news, now - (n - start) as i64 * 1000)
            .unwrap();
    }
}

fn bench(c: &mut Criterion) {
    let n: usize = std::env::var("KEEL_MEMORY_BENCH_RECORDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100_000);
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let who = Identity::new("bench-session", &work, "main");
    let path = dir.path().join("memory").join("memory.sqlite3");
    let t = std::time::Instant::now();
    populate(&path, &who, n);
    eprintln!(
        "populated {n} records in {:?}; file {} MB",
        t.elapsed(),
        std::fs::metadata(&path).map_or(0, |m| m.len()) / 1_000_000
    );
    let shared = Shared::new(path.clone(), false);
    let now = keel_memory::store::records::now_ms();
    let mut g = c.benchmark_group("memory");
    g.measurement_time(Duration::from_secs(5));
    for (label, query) in [
        ("search_3_words", "w140 w911 w2300"),
        ("search_common_word", "w3 w450"),
        ("search_rare_words", "w4100 w4800 w4999 t7"),
    ] {
        let out = call(
            &shared,
            "memory_search",
            &json!({"query": query}),
            &who,
            1,
            now,
        )
        .unwrap();
        eprintln!(
            "{label}: {} ids",
            out.value.as_ref().unwrap()["ids"].as_array().unwrap().len()
        );
        g.bench_function(format!("{label}_{n}"), |b| {
            b.iter(|| {
                call(
                    &shared,
                    "memory_search",
                    &json!({"query": query}),
                    &who,
                    1,
                    now,
                )
                .unwrap()
            })
        });
    }
    let mut rng = Rng(7);
    g.bench_function(format!("write_disk_fsync_{n}"), |b| {
        b.iter(|| {
            let content = sentence(&mut rng);
            call(
                &shared,
                "memory_write",
                &json!({"scope": "project", "kind": "semantic", "content": content}),
                &who,
                1,
                now,
            )
            .unwrap()
        })
    });
    if Path::new("/dev/shm").is_dir() {
        let shm = tempfile::tempdir_in("/dev/shm").unwrap();
        let shm_shared = Shared::new(shm.path().join("memory.sqlite3"), false);
        g.bench_function("write_tmpfs", |b| {
            b.iter(|| {
                let content = sentence(&mut rng);
                call(
                    &shm_shared,
                    "memory_write",
                    &json!({"scope": "project", "kind": "semantic", "content": content}),
                    &who,
                    1,
                    now,
                )
                .unwrap()
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
