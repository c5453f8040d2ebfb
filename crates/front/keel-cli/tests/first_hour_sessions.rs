//! End-to-end (the real binary): more of what a newcomer meets in the first hour. A session
//! without a turn (the UI opened and left without a prompt) is not what `keel resume --last`
//! continues, and the UI keeps none; a run without an API key says how to get going, with one
//! `keel:` prefix.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use pretty_assertions::assert_eq;
use support::tmux::{Tmux, have_tmux};
use support::*;

#[test]
fn resume_last_skips_a_newer_session_without_a_turn() {
    let env = Env::new();
    let first = Mock::start("responses:\n  - text: \"First answer.\"\n");
    let out = run(env.keel(&first.base_url()).args(["run", "first prompt"]));
    assert_eq!(out.code, Some(0), "run stderr:\n{}", out.stderr);
    let real = env.only_session();

    // A newer session with only its header: what an opened-and-quit UI used to leave.
    let empty = empty_copy(&real);
    let header = std::fs::read_to_string(&empty).unwrap();
    assert_eq!(env.session_files().len(), 2);
    assert_eq!(
        keel_session::Store::load(&empty)
            .unwrap()
            .session
            .turn_count(),
        0
    );

    let second = Mock::start(
        "responses:\n  - match: { last_user_contains: \"again\" }\n    text: \"Second answer.\"\n",
    );
    let out = run(env
        .keel(&second.base_url())
        .args(["resume", "--last", "again"]));
    assert_eq!(out.code, Some(0), "resume stderr:\n{}", out.stderr);
    assert_eq!(out.stdout.trim(), "Second answer.");
    let requests = second.requests();
    assert_eq!(requests.len(), 1);
    let wire = requests[0]["messages"].to_string();
    assert!(
        wire.contains("first prompt") && wire.contains("First answer."),
        "the resumed request lacks the real session's history: {wire}"
    );
    assert_eq!(of_type(&load_consistent(&real), "turn/start").len(), 2);
    // The empty session is left as it was.
    assert_eq!(std::fs::read_to_string(&empty).unwrap(), header);
}

#[test]
fn the_ui_left_without_a_prompt_keeps_no_session() {
    if !have_tmux() {
        return;
    }
    let env = Env::new();
    let mock = Mock::start("responses:\n  - text: \"Never asked.\"\n");
    let t = Tmux::start(env.root(), &env.keel(&mock.base_url()));
    t.wait_for("approval ask");
    t.keys(&["C-d"]);
    assert_eq!(t.wait_exit(), "EXIT=0");
    assert_eq!(env.session_files(), Vec::<std::path::PathBuf>::new());
    assert!(!t.history().contains("keel resume"), "{}", t.history());
    assert_eq!(mock.requests().len(), 0);
}

#[test]
fn a_run_without_a_key_shows_the_first_steps_with_one_prefix() {
    let env = Env::new();
    let out = run(env.keel_bare().args(["run", "hi"]));
    assert_ne!(out.code, Some(0), "stderr:\n{}", out.stderr);
    let stderr = &out.stderr;
    assert!(stderr.starts_with("keel: "), "{stderr}");
    assert_eq!(stderr.matches("keel:").count(), 1, "{stderr}");
    assert!(stderr.contains("no API key for deepseek"), "{stderr}");
    for step in ["keel login deepseek", "keel --base-url URL", "keel demo"] {
        assert!(stderr.contains(step), "no {step:?} in:\n{stderr}");
    }
    assert!(stderr.contains("DEEPSEEK_API_KEY"), "{stderr}");
    assert!(env.session_files().is_empty(), "{:?}", env.session_files());
}
