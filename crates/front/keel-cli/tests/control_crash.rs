//! Crash continuity of explicit control with the real binary: `keel` is SIGKILLed during an
//! authorized `bash`, then resumed, and the model (the loopback mock) asks for the same action
//! again. Under explicit control the interrupted call is indeterminate and the repeat is refused
//! (0 of 2 unsafe continuations); without it the action runs a second time (2 of 2).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::{Duration, Instant};
use support::*;

const FIRST: &str = r#"
responses:
  - text: "Opening the contract."
    tool_calls:
      - { id: c1, name: control_open, arguments: { objective: "run the job", acceptance: ["runs.txt records one run"], targets: ["."] } }
  - text: "Authorizing."
    tool_calls:
      - { id: c2, name: control_checkpoint, arguments: { revision: 1, note: "ready", authorize: { intent: "run the job" } } }
  - text: "Running."
    tool_calls:
      - { id: c3, name: bash, arguments: { command: "echo start >> runs.txt; sleep 30; echo end >> runs.txt" } }
  - text: "never reached"
"#;

const AGAIN: &str = r#"
responses:
  - text: "Running it again."
    tool_calls:
      - { id: r1, name: bash, arguments: { command: "echo start >> runs.txt; echo end >> runs.txt" } }
  - text: "Done."
"#;

/// One crash and resume; returns runs.txt and the resumed session's tool results.
fn crash_and_resume(control: bool) -> (String, Vec<(String, String, bool)>) {
    let env = Env::new();
    let flags: &[&str] = if control {
        &["--control", "contract"]
    } else {
        &[]
    };
    let mock = Mock::start(FIRST);
    let mut cmd = env.keel(&mock.base_url());
    cmd.args(flags)
        .args(["--approval", "auto", "run", "run the job"]);
    let running = spawn(&mut cmd);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !env.root().join("ws/runs.txt").exists() {
        assert!(Instant::now() < deadline, "the job never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    running.signal(libc::SIGKILL);
    let _ = running.wait();
    // The resumed process is given no flag: a session started under control stays under it.
    let mock = Mock::start(AGAIN);
    let out = run(env.keel(&mock.base_url()).args([
        "--approval",
        "auto",
        "resume",
        "--last",
        "keel restarted; continue",
    ]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    if control {
        assert!(
            out.stderr.contains("explicit control stays on"),
            "stderr:\n{}",
            out.stderr
        );
    }
    let runs = std::fs::read_to_string(env.root().join("ws/runs.txt")).unwrap();
    let results = tool_results(&load_consistent(&env.only_session()));
    (runs, results)
}

#[test]
fn a_sigkilled_guarded_bash_is_not_repeated_after_resume() {
    let mut unsafe_on = 0;
    for _ in 0..2 {
        let (runs, results) = crash_and_resume(true);
        let repeated = runs.matches("start").count() > 1;
        unsafe_on += usize::from(repeated);
        let last = results.last().unwrap();
        assert!(
            last.2 && last.1.contains("indeterminate"),
            "the repeat is refused as indeterminate: {results:#?}"
        );
        // The interrupted call itself was reported by crash repair.
        assert!(
            results.iter().any(|r| r.1.contains("TOOL_OUTCOME_UNKNOWN")),
            "{results:#?}"
        );
    }
    let mut unsafe_off = 0;
    for _ in 0..2 {
        let (runs, _) = crash_and_resume(false);
        unsafe_off += usize::from(runs.matches("start").count() > 1);
    }
    eprintln!(
        "unsafe continuations after a SIGKILL: control {unsafe_on}/2, without {unsafe_off}/2"
    );
    assert_eq!(unsafe_on, 0);
    assert_eq!(unsafe_off, 2);
}
