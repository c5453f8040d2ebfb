//! The core and the front ends know no plugin's words (issue 45): a plugin's event names (its
//! `…_EVENT` string constants under `crates/plugins/`) appear as string literals nowhere in
//! `crates/core/*/src` or `crates/front/*/src`, inline tests included — a front end shows a
//! plugin's events only through the items the plugin's presenter gives
//! (`keel_protocol::present`). And the libraries of the front ends (the terminal UI, ACP, the
//! MCP server) depend on no plugin crate: the host wires the plugins, the binary dispatches.

use super::{Layer, graph, layer, sources};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The event names a plugin declares: `const X_EVENT: &str = "a/b";` (one per line, as rustfmt
/// writes them), by name, with the file that declares each.
fn declared_events(files: &[PathBuf]) -> BTreeMap<String, PathBuf> {
    let mut names = BTreeMap::new();
    for file in files {
        let text = std::fs::read_to_string(file).unwrap();
        for line in text.lines() {
            let line = line.trim_start();
            let Some(rest) = line
                .strip_prefix("pub const ")
                .or(line.strip_prefix("const "))
            else {
                continue;
            };
            let Some((ident, value)) = rest.split_once(": &str = \"") else {
                continue;
            };
            if !ident.ends_with("_EVENT") {
                continue;
            }
            if let Some((name, _)) = value.split_once('"')
                && name.contains('/')
            {
                names.insert(name.to_owned(), file.clone());
            }
        }
    }
    names
}

/// `(file, line number, event name)` of every string literal `"<name>"` in `files` naming one of
/// `names`.
fn mentions(
    root: &Path,
    files: &[PathBuf],
    names: &BTreeMap<String, PathBuf>,
) -> Vec<(String, usize, String)> {
    let mut found = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            for name in names.keys() {
                if line.contains(&format!("\"{name}\"")) {
                    let rel = file.strip_prefix(root).unwrap_or(file);
                    found.push((rel.display().to_string(), n + 1, name.clone()));
                }
            }
        }
    }
    found
}

/// Sources of every crate of `group` (`core`, `plugins`, `front` …).
fn group_sources(crates: &Path, group: &str) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for krate in std::fs::read_dir(crates.join(group)).unwrap() {
        sources(&krate.unwrap().path().join("src"), &mut files);
    }
    files
}

#[test]
fn no_plugin_event_name_is_spelled_in_the_core_or_a_front_end() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap();
    let root = crates.parent().unwrap();
    let names = declared_events(&group_sources(crates, "plugins"));
    // The scan sees the plugins' events (a parse that finds none would pass vacuously).
    for known in [
        "mcp/server",
        "schedule/fired",
        "skills/warning",
        "workflow/agent",
        "goal/set",
    ] {
        assert!(names.contains_key(known), "{known} not found in {names:?}");
    }
    let mut files = group_sources(crates, "core");
    files.extend(group_sources(crates, "front"));
    let found = mentions(root, &files, &names);
    assert!(
        found.is_empty(),
        "plugins' event names in the core or a front end (show them through the plugin's \
         presenter, keel_protocol::present):\n{}",
        found
            .iter()
            .map(|(f, n, name)| format!(
                "{f}:{n}: \"{name}\" (declared in {})",
                names[name].display()
            ))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn the_word_check_finds_a_spelled_event_name() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = dir.path().join("plugin.rs");
    std::fs::write(
        &plugin,
        "/// x\npub const FIRED_EVENT: &str = \"sched/fired\";\nconst NOT_AN_EVENT_NAME: &str = \"a/b\";\n",
    )
    .unwrap();
    let front = dir.path().join("front.rs");
    std::fs::write(
        &front,
        "let a = \"a/b\";\nif o.type_name == \"sched/fired\" {}\nlet c = \"sched/fired-not\";\n",
    )
    .unwrap();
    let names = declared_events(&[plugin]);
    assert_eq!(names.keys().collect::<Vec<_>>(), ["sched/fired"]);
    assert_eq!(
        mentions(dir.path(), &[front], &names),
        [("front.rs".to_owned(), 2, "sched/fired".to_owned())]
    );
}

/// Front-end libraries that may depend on no plugin crate: the binary (`keel-cli`) is where
/// commands are dispatched, and still names some (issue 45's note says which and why).
const PLUGIN_FREE_FRONT_ENDS: &[&str] = &["keel-tui", "keel-acp", "keel-mcp-server", "keel-serve"];

#[test]
fn front_end_libraries_depend_on_no_plugin_crate() {
    let graph = graph();
    let plugins: BTreeSet<&str> = graph
        .iter()
        .filter(|(_, n)| layer(&n.group) == Some(Layer::Plugin))
        .map(|(name, _)| name.as_str())
        .collect();
    assert!(plugins.len() > 8, "{plugins:?}");
    let mut wrong = Vec::new();
    for front in PLUGIN_FREE_FRONT_ENDS {
        let node = graph
            .get(*front)
            .unwrap_or_else(|| panic!("{front} not in the workspace"));
        assert_eq!(layer(&node.group), Some(Layer::FrontEnd), "{front}");
        for dep in node.deps.iter().filter(|d| plugins.contains(d.as_str())) {
            wrong.push(format!("{front} depends on the plugin crate {dep}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
