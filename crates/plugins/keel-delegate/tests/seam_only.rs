//! The tools and `/review` depend only on the seam (their source names no provider), and the six schemas are
//! small and prefix-stable.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use keel_delegate::inprocess::InProcessProvider;
use keel_delegate::reports::Reports;
use keel_delegate::tools::{self, Shared, TOOL_NAMES};
use std::path::Path;
use std::sync::Arc;

/// The dsh-consult plugin's six schemas cost this many characters per request.
const ANCHOR_SCHEMA_CHARS: usize = 5_576;

#[test]
fn the_tools_module_imports_no_provider() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let dir = src.join("tools");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    // `/review` is held to the same rule.
    paths.push(src.join("review.rs"));
    let mut files = 0;
    for path in paths {
        let text = std::fs::read_to_string(&path).unwrap();
        files += 1;
        for needle in [
            "inprocess",
            "InProcess",
            "consult",
            "keel_provider",
            "KeelProvider",
            "crate::keel",
            "provider::",
        ] {
            assert!(
                !text.contains(needle),
                "{} mentions the provider item `{needle}`: tools may use the seam only",
                path.display()
            );
        }
        for line in text
            .lines()
            .filter(|l| l.trim_start().starts_with("use crate::"))
        {
            let ok = ["use crate::seam", "use crate::render", "use crate::reports"]
                .iter()
                .any(|p| line.trim_start().starts_with(p));
            assert!(ok, "{}: `{line}` reaches past the seam", path.display());
        }
    }
    assert!(files >= 3, "read {files} files under {}", dir.display());
}

fn schemas() -> Vec<String> {
    let shared = Shared::new(
        Arc::new(InProcessProvider::new()),
        Arc::new(Reports::new(3, 16_000)),
        16_000,
    );
    tools::all(&shared)
        .iter()
        .map(|t| serde_json::to_string(&t.schema()).unwrap())
        .collect()
}

#[test]
fn six_schemas_fit_under_the_anchor_and_are_stable() {
    let a = schemas();
    let names: Vec<String> = a
        .iter()
        .map(|s| {
            serde_json::from_str::<serde_json::Value>(s).unwrap()["name"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(names, TOOL_NAMES);
    let total: usize = a.iter().map(|s| s.chars().count()).sum();
    for s in &a {
        eprintln!("{} chars: {s}", s.chars().count());
    }
    eprintln!("six schemas: {total} characters (anchor {ANCHOR_SCHEMA_CHARS})");
    assert!(total < ANCHOR_SCHEMA_CHARS, "{total} characters");
    // Prefix-stable: the same bytes every time they are built.
    assert_eq!(a, schemas());
}
