//! Every `git` keel starts for itself goes through `keel_tools::git` (issue 44): a scan of every
//! crate's `src/**/*.rs` (beside the layering test, which reads the same tree) for a `git`
//! started any other way — `Command::new("git")` (std or tokio, however it is qualified) or an
//! argv whose first element is `"git"` (`vec!["git", …]`, `["git", …]`, handed to the
//! subprocess service). Only the helper itself (`keel-tools/src/git.rs` and its tests) and the
//! test support crate may start `git` directly. Comment lines are not read.

use super::sources;
use std::path::Path;

/// Files allowed to start `git` directly, relative to `crates/`.
const ALLOWED: &[&str] = &["core/keel-tools/src/git.rs", "core/keel-tools/src/git/"];

/// Crate folders not scanned (test support).
const SKIPPED_CRATES: &[&str] = &["support/"];

/// The places in `text` that start `git` without the helper, as `line: text` (1-based).
fn bypasses(text: &str) -> Vec<String> {
    // Comment lines blanked (kept as empty lines so numbers stay right).
    let code: String = text
        .lines()
        .map(|l| {
            if l.trim_start().starts_with("//") {
                ""
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find("\"git\"") {
        let at = from + at;
        from = at + 5;
        let before = code[..at].trim_end();
        let after = code[at + 5..].trim_start();
        let program = before.ends_with("Command::new(");
        // The first element of an array or vec!: `["git", …]` or `["git"]`.
        let argv = before.ends_with('[') && (after.starts_with(',') || after.starts_with(']'));
        if program || argv {
            let line = code[..at].matches('\n').count() + 1;
            let shown = text.lines().nth(line - 1).unwrap_or("").trim();
            found.push(format!("{line}: {shown}"));
        }
    }
    found
}

#[test]
fn every_git_keel_runs_goes_through_the_hardened_helper() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap();
    let mut files = Vec::new();
    for group in std::fs::read_dir(crates).unwrap() {
        for krate in std::fs::read_dir(group.unwrap().path()).unwrap() {
            sources(&krate.unwrap().path().join("src"), &mut files);
        }
    }
    assert!(files.len() > 100, "read {} source files", files.len());
    let mut wrong = Vec::new();
    for file in &files {
        let rel = file.strip_prefix(crates).unwrap().to_string_lossy();
        if ALLOWED.iter().any(|a| rel.starts_with(a))
            || SKIPPED_CRATES.iter().any(|s| rel.starts_with(s))
        {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        for hit in bypasses(&text) {
            wrong.push(format!("crates/{rel}:{hit}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "git started without keel_tools::git::Git (the repository's hooks, fsmonitor and \
         drivers would run):\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_scan_finds_the_call_sites_issue_44_found() {
    // The four call sites as they were before the helper.
    let batch = r#"
fn git(cwd: Option<&Path>, args: &[&str]) -> Result<(), String> {
    let mut cmd = Command::new("git");
"#;
    let tui = r#"
    let out = tokio::process::Command::new("git")
        .args(["diff", "--no-color", "--no-ext-diff"])
"#;
    let delegate = r#"
    let mut argv = vec![
        "git",
        "-c",
        "user.name=keel",
    ];
"#;
    let service = r#"let spec = CommandSpec::new(["git", "status"]);"#;
    let spaced = "std::process::Command::new(\n    \"git\"\n)";
    assert_eq!(bypasses(batch), ["3: let mut cmd = Command::new(\"git\");"]);
    assert_eq!(
        bypasses(tui),
        ["2: let out = tokio::process::Command::new(\"git\")"]
    );
    assert_eq!(bypasses(delegate), ["3: \"git\","]);
    assert_eq!(bypasses(service).len(), 1);
    assert_eq!(bypasses(spaced), ["2: \"git\""]);
    // Not a git being started: a key, a match arm, a comment, a later argument.
    let fine = r#"
        if !matches!(key.as_str(), "dir" | "git" | "ref") {}
        match (map.get("dir"), map.get("git")) {}
        // Command::new("git") is what this module replaces
        let argv = ["-c", "git", "x"];
"#;
    assert_eq!(bypasses(fine), Vec::<String>::new());
}
