//! The crate graph keeps its direction: protocol ← jcs ← session ← llm/tools ← agent ← plugins
//! ← host ← front ends. No plugin crate depends on another plugin crate, the core depends on no
//! plugin, the host on no front end. Read from every crate's `Cargo.toml` `[dependencies]`
//! (dev-dependencies may reach up: test support is built on the host); a crate this test does
//! not know fails it, so a new crate must be placed in a layer here.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Layer {
    Core,
    Plugin,
    Host,
    FrontEnd,
    TestSupport,
}

fn layer(name: &str) -> Option<Layer> {
    use Layer::*;
    Some(match name {
        "keel-protocol" | "keel-jcs" | "keel-session" | "keel-llm" | "keel-tools"
        | "keel-agent" => Core,
        "keel-provenance" | "keel-jobs" | "keel-command-hooks" | "keel-continuity"
        | "keel-memory" | "keel-delegate" | "keel-mcp" | "keel-codemode" => Plugin,
        // The viewer reads session logs and provenance journals (a plugin's files) for people;
        // it is no plugin and installs nothing, so it sits beside the host, below the front ends.
        "keel-host" | "keel-viewer" => Host,
        "keel-cli" | "keel-tui" | "keel-acp" => FrontEnd,
        "keel-testkit" => TestSupport,
        _ => return None,
    })
}

/// Every workspace crate and its keel dependencies (`[dependencies]` only).
fn graph() -> BTreeMap<String, Vec<String>> {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut graph = BTreeMap::new();
    for entry in std::fs::read_dir(crates).unwrap() {
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
        graph.insert(name, deps);
    }
    graph
}

/// Edges of `graph` against the layering, one line each.
fn violations(graph: &BTreeMap<String, Vec<String>>) -> Vec<String> {
    let mut wrong = Vec::new();
    for (name, deps) in graph {
        let Some(from) = layer(name) else {
            wrong.push(format!(
                "{name}: not placed in a layer (add it to tests/layering.rs)"
            ));
            continue;
        };
        for dep in deps {
            let Some(to) = layer(dep) else {
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
    let wrong = violations(&graph);
    assert!(
        wrong.is_empty(),
        "dependencies against the layering:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_check_refuses_plugin_to_plugin_core_to_plugin_and_unplaced_crates() {
    let edges = |list: &[(&str, &[&str])]| -> BTreeMap<String, Vec<String>> {
        list.iter()
            .map(|(n, d)| ((*n).to_owned(), d.iter().map(|s| (*s).to_owned()).collect()))
            .collect()
    };
    let bad = edges(&[
        ("keel-jobs", &["keel-agent", "keel-provenance"]),
        ("keel-agent", &["keel-jobs"]),
        ("keel-host", &["keel-cli"]),
        ("keel-new", &[]),
    ]);
    assert_eq!(
        violations(&bad),
        [
            "keel-agent (Core) -> keel-jobs (Plugin)",
            "keel-host (Host) -> keel-cli (FrontEnd)",
            "keel-jobs (Plugin) -> keel-provenance (Plugin)",
            "keel-new: not placed in a layer (add it to tests/layering.rs)",
        ]
    );
    let good = edges(&[
        ("keel-jobs", &["keel-agent"]),
        ("keel-host", &["keel-jobs"]),
    ]);
    assert!(violations(&good).is_empty());
}
