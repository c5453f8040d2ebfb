//! End-to-end: a context window too small for keel's fixed prompt (system prompt and tool
//! schemas) plus the answer reserve is refused at start by the real `keel` binary, before any
//! request reaches the loopback mock model and without leaving a session behind.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use pretty_assertions::assert_eq;
use support::*;

const ONE_ANSWER: &str = "responses:\n  - text: \"Hello.\"\n";

#[test]
fn a_window_too_small_for_the_fixed_prompt_fails_before_any_request() {
    let env = Env::new();
    let mock = Mock::start(ONE_ANSWER);
    let out = run(env
        .keel(&mock.base_url())
        .args(["--context-window", "512", "run", "hi"]));
    assert_eq!(out.code, Some(2), "stderr:\n{}", out.stderr);
    let err = &out.stderr;
    assert!(
        err.contains("the context window of model deepseek-v4-flash is 512 tokens")
            && err.contains("the system prompt and tool schemas take about")
            && err.contains("--context-window N")
            && err.contains("[models.\"deepseek-v4-flash\"]"),
        "stderr:\n{err}"
    );
    assert_eq!(mock.requests().len(), 0, "a request was sent");
    assert_eq!(env.session_files(), Vec::<std::path::PathBuf>::new());
    let spill: Vec<_> = std::fs::read_dir(env.home.join("spill"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert_eq!(spill, Vec::<std::path::PathBuf>::new(), "spill left behind");

    // A window that holds the fixed prompt and the reserve runs.
    let out = run(env
        .keel(&mock.base_url())
        .args(["--context-window", "16384", "run", "hi"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert_eq!(mock.requests().len(), 1);
}
