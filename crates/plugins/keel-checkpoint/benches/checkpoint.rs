//! A checkpoint of a workspace of 5,000 files where one file changed (target ≤ 30 ms wall),
//! one where nothing changed, and, printed once, the same in a workspace of 50,000 files with
//! the disk the shadow repository takes per checkpoint.
//!
//! `cargo bench -p keel-checkpoint --bench checkpoint`

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use criterion::{Criterion, criterion_group, criterion_main};
use keel_checkpoint::{Caps, Shadow};
use std::path::Path;
use std::time::Instant;

fn workspace(root: &Path, files: usize) {
    for i in 0..files {
        let dir = root.join(format!("src/m{:03}", i / 50));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join(format!("f{i}.rs")),
            format!("// file {i}\npub fn f{i}() -> usize {{ {i} }}\n").repeat(20),
        )
        .unwrap();
    }
}

fn du(path: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![path.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let m = e.metadata().unwrap();
            if m.is_dir() {
                stack.push(e.path());
            } else {
                total += m.len();
            }
        }
    }
    total
}

fn bench(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    workspace(&ws, 5_000);
    let git = tmp.path().join("shadow");
    let mut shadow = Shadow::open(&git, &ws, Caps::default()).unwrap();
    let t = Instant::now();
    shadow.snapshot("first").unwrap();
    eprintln!(
        "5,000 files: first checkpoint {:.0} ms",
        t.elapsed().as_secs_f64() * 1e3
    );
    let mut group = c.benchmark_group("checkpoint");
    group.sample_size(30);
    let mut n = 0u64;
    group.bench_function("5,000 files, one changed", |b| {
        b.iter(|| {
            n += 1;
            std::fs::write(ws.join("src/m000/f0.rs"), format!("changed {n}\n")).unwrap();
            shadow.snapshot("one changed").unwrap()
        })
    });
    // A checkpoint that is written out at once (the first of a turn, or a turn's end).
    group.bench_function("5,000 files, one changed, written out", |b| {
        let mut n = 0u64;
        b.iter(|| {
            n += 1;
            std::fs::write(ws.join("src/m000/f0.rs"), format!("out {n}\n")).unwrap();
            let s = shadow.snapshot("one changed").unwrap();
            shadow.publish().unwrap();
            s
        })
    });
    group.bench_function("5,000 files, none changed", |b| {
        b.iter(|| shadow.snapshot("unchanged").unwrap())
    });
    group.finish();

    // 50,000 files: printed once.
    let big = tmp.path().join("big");
    workspace(&big, 50_000);
    let git = tmp.path().join("shadow-big");
    let mut shadow = Shadow::open(&git, &big, Caps::default()).unwrap();
    let t = Instant::now();
    shadow.snapshot("first").unwrap();
    let first = t.elapsed();
    let before = du(&git);
    let mut times = Vec::new();
    for i in 0..5 {
        std::fs::write(big.join("src/m000/f0.rs"), format!("changed {i}\n")).unwrap();
        let t = Instant::now();
        shadow.snapshot("one changed").unwrap();
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    // Written out (one pack for the five), as a turn's end does.
    shadow.publish().unwrap();
    times.sort_by(f64::total_cmp);
    eprintln!(
        "50,000 files: first checkpoint {:.0} ms; one file changed: median {:.1} ms; disk per such checkpoint {} bytes",
        first.as_secs_f64() * 1e3,
        times[2],
        (du(&git) - before) / 5
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
