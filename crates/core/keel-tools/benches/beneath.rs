//! Cost of opening a workspace file beneath the root (issue 44: ≤ 5 µs per file operation):
//! reading a small file three directories deep through `openat2(RESOLVE_BENEATH)`, through the
//! `O_NOFOLLOW` walk kernels without `openat2` use, and by plain path (`std::fs::read`, what the
//! file tools did before); and replacing a file by temp-and-rename in the parent's descriptor
//! against `std::fs::write`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use criterion::{Criterion, criterion_group, criterion_main};
use keel_tools::beneath::{Beneath, Resolver};
use std::ffi::OsStr;
use std::path::Path;

fn bench(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    std::fs::create_dir_all(root.join("src/a/b")).unwrap();
    std::fs::write(root.join("src/a/b/file.rs"), "fn main() {}\n".repeat(20)).unwrap();
    let rel = Path::new("src/a/b/file.rs");
    let full = root.join(rel);

    let mut g = c.benchmark_group("read a file 4 components deep");
    for resolver in [Resolver::Openat2, Resolver::Walk] {
        g.bench_function(format!("{resolver:?}: open root + read_regular"), |b| {
            b.iter(|| {
                let beneath = Beneath::open_with(root, resolver).unwrap();
                beneath.read_regular(rel, 1 << 20).unwrap()
            });
        });
        let beneath = Beneath::open_with(root, resolver).unwrap();
        g.bench_function(format!("{resolver:?}: read_regular (root open)"), |b| {
            b.iter(|| beneath.read_regular(rel, 1 << 20).unwrap());
        });
    }
    g.bench_function("std::fs::read by path (before)", |b| {
        b.iter(|| std::fs::read(&full).unwrap());
    });
    g.finish();

    let mut g = c.benchmark_group("replace a file");
    let dir = Beneath::open(root)
        .unwrap()
        .open_dir(Path::new("src/a/b"))
        .unwrap();
    let body = "fn main() {}\n".repeat(20);
    g.bench_function("Beneath::replace (temp + renameat in the parent fd)", |b| {
        b.iter(|| {
            dir.replace(OsStr::new("out.rs"), body.as_bytes(), None)
                .unwrap()
        });
    });
    g.bench_function("std::fs::write by path (before)", |b| {
        b.iter(|| std::fs::write(root.join("src/a/b/out2.rs"), &body).unwrap());
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
