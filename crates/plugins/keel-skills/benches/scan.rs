//! Scanning 200 skills (target: at most 5 ms), and the per-turn check that no
//! root changed.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use criterion::{Criterion, criterion_group, criterion_main};
use keel_skills::{Root, Scope, SkillSet};
use std::hint::black_box;

fn setup() -> (tempfile::TempDir, Vec<Root>) {
    let t = tempfile::tempdir().unwrap();
    let mut roots = Vec::new();
    for r in 0..4 {
        let dir = t.path().join(format!("root{r}"));
        for i in 0..50 {
            let name = format!("skill-{r}-{i:02}");
            let folder = dir.join(&name);
            std::fs::create_dir_all(folder.join("scripts")).unwrap();
            std::fs::write(folder.join("scripts/run.sh"), "echo hi\n").unwrap();
            std::fs::write(
                folder.join("SKILL.md"),
                format!(
                    "---\nname: {name}\ndescription: >\n  Does one particular thing for the {name} \
                     family of tasks,\n  in a few careful steps.\nwhenToUse: the user asks for {name}\n\
                     metadata:\n  version: 1\n---\n# {name}\n\n{}",
                    "Step by step instructions for the task.\n".repeat(80)
                ),
            )
            .unwrap();
        }
        roots.push(Root {
            dir,
            scope: Scope::Home,
            bundle: None,
        });
    }
    (t, roots)
}

fn bench(c: &mut Criterion) {
    let (_t, roots) = setup();
    let cat = SkillSet::scan(&roots);
    assert_eq!(cat.skills.len(), 200);
    assert!(cat.warnings.is_empty());
    c.bench_function("scan 200 skills", |b| {
        b.iter(|| black_box(SkillSet::scan(black_box(&roots))))
    });
    c.bench_function("skill list of 200 skills", |b| {
        b.iter(|| black_box(cat.prompt()))
    });
    c.bench_function("turn-start check of 200 skills", |b| {
        b.iter(|| black_box(cat.fingerprint()))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
