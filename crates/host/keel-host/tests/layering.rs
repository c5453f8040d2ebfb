//! The crate graph keeps its direction: protocol ← jcs ← session ← llm/tools ← agent ← plugins
//! ← host ← front ends; protocol clients stand in the core beside llm (keel-acp-client, the ACP
//! client the delegate plugin runs outside agents with, is built on protocol and tools and knows
//! no plugin). A crate's layer is the folder it stands in — `crates/core/`,
//! `crates/plugins/`, `crates/host/`, `crates/front/`, `crates/support/` — so `ls crates` shows
//! what this test enforces. No plugin crate depends on another plugin crate, the core depends
//! on no plugin, the host on no front end. Read from every crate's `Cargo.toml`
//! `[dependencies]` (dev-dependencies may reach up: test support is built on the host); a crate
//! in a folder this test does not know fails it.
//!
//! Plugins' words are checked here too ([`plugin_words`]), and module size (issue 45): no `crates/*/*/src/**/*.rs` file outside the test
//! support crate (`keel-testkit`) may pass [`MAX_SOURCE_LINES`] lines; one failure lists every
//! file over it with its count.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// keel's own `git` calls all go through its hardened helper (a source scan of the same tree).
#[path = "layering/git_calls.rs"]
mod git_calls;

/// The core and the front ends spell no plugin's event names; front-end libraries import no
/// plugin crate.
#[path = "layering/plugin_words.rs"]
mod plugin_words;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Layer {
    Core,
    Plugin,
    Host,
    FrontEnd,
    TestSupport,
}

/// The layer of a crate folder's group (`crates/<group>/<crate>`).
fn layer(group: &str) -> Option<Layer> {
    use Layer::*;
    Some(match group {
        "core" => Core,
        "plugins" => Plugin,
        // The viewer reads session logs and provenance journals (a plugin's files) for people;
        // it is no plugin and installs nothing, so it sits beside the host, below the front ends.
        "host" => Host,
        "front" => FrontEnd,
        "support" => TestSupport,
        _ => return None,
    })
}

/// One workspace crate: the group folder it stands in and its keel dependencies.
#[derive(Debug, Clone)]
struct Node {
    group: String,
    deps: Vec<String>,
}

/// Every workspace crate (`crates/<group>/<crate>/Cargo.toml`) by package name.
fn graph() -> BTreeMap<String, Node> {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap();
    let mut graph = BTreeMap::new();
    for group in std::fs::read_dir(crates).unwrap() {
        let group = group.unwrap();
        let group_name = group.file_name().to_string_lossy().into_owned();
        for entry in std::fs::read_dir(group.path()).unwrap() {
            let manifest = entry.unwrap().path().join("Cargo.toml");
            let Ok(text) = std::fs::read_to_string(&manifest) else {
                continue;
            };
            let doc: toml::Table = toml::from_str(&text).unwrap();
            let name = doc["package"]["name"].as_str().unwrap().to_owned();
            let deps = doc
                .get("dependencies")
                .and_then(|d| d.as_table())
                .map(|t| {
                    t.keys()
                        .filter(|k| k.starts_with("keel-"))
                        .cloned()
                        .collect()
                })
                .unwrap_or_default();
            let node = Node {
                group: group_name.clone(),
                deps,
            };
            graph.insert(name, node);
        }
    }
    graph
}

/// Edges of `graph` against the layering, one line each.
fn violations(graph: &BTreeMap<String, Node>) -> Vec<String> {
    let layer_of = |name: &str| graph.get(name).and_then(|n| layer(&n.group));
    let mut wrong = Vec::new();
    for (name, node) in graph {
        let Some(from) = layer_of(name) else {
            wrong.push(format!(
                "{name}: crates/{}/ is no layer (core, plugins, host, front, support)",
                node.group
            ));
            continue;
        };
        for dep in &node.deps {
            let Some(to) = layer_of(dep) else {
                wrong.push(format!("{name} -> {dep}: {dep} is not placed in a layer"));
                continue;
            };
            // The `keel` binary is where the front ends meet: it opens the terminal UI (and
            // will serve ACP) besides its headless commands, so it may use front-end crates.
            let binary_uses_front_end = name == "keel-cli" && to == Layer::FrontEnd;
            let allowed = binary_uses_front_end
                || match (from, to) {
                    (_, Layer::TestSupport) => false,
                    (Layer::Core | Layer::Plugin, to) => to == Layer::Core,
                    (Layer::Host, to) => to <= Layer::Plugin,
                    (Layer::FrontEnd | Layer::TestSupport, to) => to <= Layer::Host,
                };
            if !allowed {
                wrong.push(format!("{name} ({from:?}) -> {dep} ({to:?})"));
            }
        }
    }
    wrong
}

#[test]
fn dependencies_point_down_and_plugins_stand_alone() {
    let graph = graph();
    assert!(graph.len() >= 10, "read {} crates: {graph:?}", graph.len());
    // The built-in plugins stand in the plugin layer (a new plugin crate is added here).
    for plugin in [
        "keel-jobs",
        "keel-command-hooks",
        "keel-provenance",
        "keel-continuity",
        "keel-memory",
        "keel-delegate",
        "keel-mcp",
        "keel-codemode",
        "keel-skills",
    ] {
        let group = graph.get(plugin).map(|n| n.group.as_str());
        assert_eq!(group, Some("plugins"), "{plugin}");
    }
    let wrong = violations(&graph);
    assert!(
        wrong.is_empty(),
        "dependencies against the layering:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_check_refuses_plugin_to_plugin_core_to_plugin_and_unplaced_crates() {
    let edges = |list: &[(&str, &str, &[&str])]| -> BTreeMap<String, Node> {
        list.iter()
            .map(|(n, g, d)| {
                let node = Node {
                    group: (*g).to_owned(),
                    deps: d.iter().map(|s| (*s).to_owned()).collect(),
                };
                ((*n).to_owned(), node)
            })
            .collect()
    };
    let bad = edges(&[
        ("keel-jobs", "plugins", &["keel-agent", "keel-provenance"]),
        ("keel-provenance", "plugins", &[]),
        ("keel-agent", "core", &["keel-jobs"]),
        ("keel-host", "host", &["keel-cli"]),
        ("keel-cli", "front", &[]),
        ("keel-new", "misc", &[]),
    ]);
    assert_eq!(
        violations(&bad),
        [
            "keel-agent (Core) -> keel-jobs (Plugin)",
            "keel-host (Host) -> keel-cli (FrontEnd)",
            "keel-jobs (Plugin) -> keel-provenance (Plugin)",
            "keel-new: crates/misc/ is no layer (core, plugins, host, front, support)",
        ]
    );
    let good = edges(&[
        ("keel-jobs", "plugins", &["keel-agent"]),
        ("keel-agent", "core", &[]),
        ("keel-host", "host", &["keel-jobs"]),
    ]);
    assert!(violations(&good).is_empty());
}

/// The most lines a source file may have (STYLE.md: aim under ~500, split past ~800).
const MAX_SOURCE_LINES: usize = 800;

/// Crates whose sources are not held to [`MAX_SOURCE_LINES`] (test support).
const UNLIMITED_CRATES: &[&str] = &["keel-testkit"];

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `(path, lines)` of every file in `files` with more than `max` lines, `path` shown relative
/// to `root`, largest first.
fn oversized(root: &Path, files: &[PathBuf], max: usize) -> Vec<(String, usize)> {
    let mut over: Vec<(String, usize)> = files
        .iter()
        .filter_map(|file| {
            let lines = std::fs::read_to_string(file).unwrap().lines().count();
            let rel = file.strip_prefix(root).unwrap_or(file);
            (lines > max).then(|| (rel.display().to_string(), lines))
        })
        .collect();
    over.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    over
}

#[test]
fn no_source_file_is_over_800_lines() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap();
    let root = crates.parent().unwrap();
    let mut files = Vec::new();
    for group in std::fs::read_dir(crates).unwrap() {
        for krate in std::fs::read_dir(group.unwrap().path()).unwrap() {
            let krate = krate.unwrap().path();
            let name = krate.file_name().unwrap().to_string_lossy().into_owned();
            if UNLIMITED_CRATES.contains(&name.as_str()) {
                continue;
            }
            sources(&krate.join("src"), &mut files);
        }
    }
    assert!(files.len() > 100, "read {} source files", files.len());
    let over = oversized(root, &files, MAX_SOURCE_LINES);
    assert!(
        over.is_empty(),
        "source files over {MAX_SOURCE_LINES} lines (split them by concern):\n{}",
        over.iter()
            .map(|(path, lines)| format!("{path}: {lines} lines"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn the_size_check_lists_every_file_over_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, lines: usize| {
        let path = dir.path().join(name);
        std::fs::write(&path, "x\n".repeat(lines)).unwrap();
        path
    };
    let files = [
        write("small.rs", 3),
        write("exact.rs", 4),
        write("big.rs", 5),
        write("bigger.rs", 9),
    ];
    assert_eq!(
        oversized(dir.path(), &files, 4),
        [("bigger.rs".to_owned(), 9), ("big.rs".to_owned(), 5)]
    );
}

/// Every library crate documents its public items: its `src/lib.rs` says
/// `#![deny(missing_docs)]` (issue 45), so an undocumented public item fails the build.
#[test]
fn every_library_crate_denies_missing_docs() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap();
    let mut libs = 0;
    let mut missing = Vec::new();
    for group in std::fs::read_dir(crates).unwrap() {
        for krate in std::fs::read_dir(group.unwrap().path()).unwrap() {
            let lib = krate.unwrap().path().join("src/lib.rs");
            let Ok(text) = std::fs::read_to_string(&lib) else {
                continue; // a binary-only crate
            };
            libs += 1;
            if !text.lines().any(|l| l.trim() == "#![deny(missing_docs)]") {
                missing.push(lib.strip_prefix(crates).unwrap().display().to_string());
            }
        }
    }
    assert!(libs > 20, "read {libs} library crates");
    assert!(
        missing.is_empty(),
        "library crates without #![deny(missing_docs)]:\n{}",
        missing.join("\n")
    );
}
