//! The Python SDK (`sdk/python`, package `keel-sdk`) judged against this build: its pytest
//! suite (`sdk/python/tests`) runs the real `keel` (this test's binary, `KEEL_BIN`) against
//! `keel-mock-server` (`KEEL_MOCK_SERVER`): runs, streams, resumes, approvals and questions
//! answered by callbacks, cancelled runs, the server gone after `close()` and after the
//! interpreter exits, and every example of the SDK's README. The venv is made by `.ci/run`
//! (`sdk/python/.venv`, pytest pinned in `requirements-dev.txt`, the SDK installed); a missing
//! venv fails the test with how to make it: it is never skipped.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // pytest's report

use std::path::{Path, PathBuf};
use std::process::Command;

const KEEL: &str = env!("CARGO_BIN_EXE_keel");

fn sdk_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../sdk/python")
}

/// The venv's Python; panics with how to make the venv when it is missing.
fn python() -> PathBuf {
    let dir = sdk_dir();
    let python = dir.join(".venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run .ci/run, or create the venv:\n  python3 -m venv {venv}\n  {venv}/bin/pip install -r {req} -e {sdk}",
        python.display(),
        venv = dir.join(".venv").display(),
        req = dir.join("requirements-dev.txt").display(),
        sdk = dir.display(),
    );
    python
}

/// `keel-mock-server`: `$KEEL_MOCK_SERVER`, else beside `keel` (a workspace build puts it
/// there), else built now into the same target dir and profile.
fn mock_server() -> PathBuf {
    if let Some(path) = std::env::var_os("KEEL_MOCK_SERVER") {
        return PathBuf::from(path);
    }
    let keel = Path::new(KEEL);
    let beside = keel.with_file_name(format!("keel-mock-server{}", std::env::consts::EXE_SUFFIX));
    if beside.is_file() {
        return beside;
    }
    let profile_dir = keel.parent().unwrap();
    let target_dir = profile_dir.parent().unwrap();
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.args([
        "build",
        "--quiet",
        "-p",
        "keel-testkit",
        "--bin",
        "keel-mock-server",
    ])
    .arg("--target-dir")
    .arg(target_dir);
    match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("release") => {
            cmd.arg("--release");
        }
        Some("debug") | None => {}
        Some(other) => {
            cmd.args(["--profile", other]);
        }
    }
    let out = cmd.output().expect("run cargo to build keel-mock-server");
    assert!(
        out.status.success() && beside.is_file(),
        "keel-mock-server not found beside {} and `cargo build -p keel-testkit --bin keel-mock-server` failed:\n{}",
        keel.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    beside
}

#[test]
fn the_python_sdk_passes_its_tests() {
    let python = python();
    let sdk = sdk_dir();
    let out = Command::new(&python)
        .args(["-m", "pytest", "tests", "-q", "-p", "no:cacheprovider"])
        .current_dir(&sdk)
        .env("KEEL_BIN", KEEL)
        .env("KEEL_MOCK_SERVER", mock_server())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("run pytest");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    print!("{stdout}");
    assert!(
        out.status.success(),
        "pytest of sdk/python failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
    assert!(
        stdout.contains(" passed") && !stdout.contains(" failed"),
        "{stdout}"
    );
}
