//! The web app in a real browser: `web/app_test.py` (Playwright, pinned in
//! `web/requirements.txt`, installed by `.ci/run` into `web/.venv`) drives Debian's Chromium
//! against a real `keel serve` and the loopback mock model: without the token the page gets no
//! data; with it, a session is created in a workspace, a prompt's answer streams in, a `bash`
//! call is approved in the dialog and its card shows the output, two tabs on the session stay
//! in step, and a page reloaded mid-turn goes on with the stream. This side then checks the
//! server's log for what the browser did. Screenshots go to `web/artifacts/`. Without
//! Playwright or Chromium the test is skipped, except under CI, where it fails.

use crate::client::{Server, wait_idle};
use crate::support::{Env, Mock, load_consistent};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const SCRIPT: &str = r#"
responses:
  - match: { last_user_contains: "say hello" }
    text: "Hello from the browser."
  - match: { last_user_contains: "run the check" }
    tool_calls:
      - { id: b1, name: bash, arguments: { command: "echo checked-by-keel" } }
  - match: { last_user_contains: "run the check" }
    text: "The check ran."
  - match: { last_user_contains: "from the second tab" }
    text: "Answered in both tabs."
  - match: { last_user_contains: "take your time" }
    behaviour: stall
    stall_ms: 3000
    text: "Slow but complete."
"#;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/serve/web")
}

/// The venv's Python and the browser, when both are there.
fn tools() -> Option<(PathBuf, PathBuf)> {
    let python = dir().join(".venv/bin/python");
    let chromium = std::env::var_os("KEEL_TEST_CHROMIUM")
        .map_or_else(|| PathBuf::from("/usr/bin/chromium"), PathBuf::from);
    (python.exists() && chromium.exists()).then_some((python, chromium))
}

#[test]
fn the_web_app_creates_a_session_streams_approves_and_stays_in_step_across_tabs() {
    let Some((python, chromium)) = tools() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "Playwright (tests/serve/web/.venv) or Chromium is missing: .ci/run installs them"
        );
        eprintln!("skipped: Playwright (tests/serve/web/.venv) or /usr/bin/chromium is missing");
        return;
    };
    let env = Env::new();
    let mock = Mock::start(SCRIPT);
    let server = Server::start_with(
        &env,
        &mock,
        &["--sandbox", "read-only", "--approval", "ask"],
    );
    let artifacts = dir().join("artifacts");
    // This run's screenshots only.
    let _ = std::fs::remove_dir_all(&artifacts);
    let out = Command::new(python)
        .arg(dir().join("app_test.py"))
        .arg(&server.url)
        .arg(&env.ws)
        .arg(&artifacts)
        .env("KEEL_TEST_CHROMIUM", chromium)
        .env("HOME", env.root())
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}\n{stdout}");
    let shown: Value = serde_json::from_str(stdout.trim()).unwrap();
    let id = shown["session"].as_str().unwrap();
    wait_idle(&server, id);

    // The server's log holds what the browser did: in the workspace it named, the prompts of
    // both tabs, the approval it gave and the command's output.
    let file = env
        .session_files()
        .into_iter()
        .find(|f| f.to_string_lossy().contains(id))
        .unwrap_or_else(|| panic!("no session file for {id}"));
    let events = load_consistent(&file);
    let of = |ty: &str| -> Vec<&Value> { events.iter().filter(|e| e["type"] == ty).collect() };
    let prompts: Vec<String> = of("user/message")
        .iter()
        .filter(|e| e["data"]["source"]["kind"] == "user")
        .map(|e| {
            e["data"]["content"][0]["text"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .collect();
    assert_eq!(
        prompts,
        [
            "say hello",
            "run the check",
            "from the second tab",
            "take your time"
        ]
    );
    let decided = of("approval/decided");
    assert_eq!(decided.len(), 1, "{decided:?}");
    assert_eq!(decided[0]["data"]["approved"], true);
    assert!(
        of("tool/result")
            .iter()
            .any(|e| e.to_string().contains("checked-by-keel")),
        "the approved command ran"
    );
    for shot in ["answer", "approval", "session"] {
        let png = artifacts.join(format!("{shot}.png"));
        let bytes = std::fs::read(&png).unwrap_or_default();
        assert!(
            bytes.starts_with(b"\x89PNG"),
            "{} is no screenshot",
            png.display()
        );
    }
}
