//! The official Python SDKs judge `keel-mock-server`'s three wires: `anthropic` streams a reply
//! from `/v1/messages`, `openai` from `/v1/responses` and `/v1/chat/completions`
//! (`tests/sdk/judge.py`; the SDKs pinned in `tests/sdk/requirements.txt`, installed by
//! `.ci/run` into `tests/sdk/.venv`). The judge prints the script it expects (reasoning, text, a
//! tool call with JSON arguments, fixed usage), the mock serves it, and the judge checks every
//! raw event against the SDK's event types and the SDK's accumulated message / response /
//! completion against the script. A missing venv fails the test: it is never skipped.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // what the judge checked

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_keel-mock-server");

/// Kills the server when the test ends, pass or fail.
struct Server(std::process::Child);
impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn sdk_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sdk")
}

/// The venv's Python; panics with how to make the venv when it is missing.
fn python() -> PathBuf {
    let dir = sdk_dir();
    let python = dir.join(".venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run .ci/run, or create the venv:\n  python3 -m venv {venv}\n  {venv}/bin/pip install -r {req}",
        python.display(),
        venv = dir.join(".venv").display(),
        req = dir.join("requirements.txt").display(),
    );
    python
}

fn judge(args: &[&str]) -> std::process::Output {
    Command::new(python())
        .arg(sdk_dir().join("judge.py"))
        .args(args)
        .output()
        .expect("run tests/sdk/judge.py")
}

/// Serves the judge's script with `keel-mock-server` and runs the judge's `check` against it.
fn run_check(check: &str) {
    let out = judge(&["script"]);
    assert!(
        out.status.success(),
        "judge.py script failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    std::fs::write(&script, &out.stdout).unwrap();

    let mut server = Server(
        Command::new(BIN)
            .args(["--script", script.to_str().unwrap()])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut first = String::new();
    BufReader::new(server.0.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let base = first.trim().to_owned();
    assert!(
        base.starts_with("http://127.0.0.1:"),
        "first line: {base:?}"
    );

    let out = judge(&[&base, check]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success(),
        "the {check} judge failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
    print!("{stdout}");
}

#[test]
fn anthropic_sdk_reads_the_messages_stream() {
    run_check("messages");
}

#[test]
fn openai_sdk_reads_the_responses_stream() {
    run_check("responses");
}

#[test]
fn openai_sdk_reads_the_chat_completions_stream() {
    run_check("chat");
}
