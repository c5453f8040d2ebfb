//! End-to-end (the real binary): more of what a newcomer meets in the first hour. A session
//! without a turn (the UI opened and left without a prompt) is not what `keel resume --last`
//! continues, and the UI keeps none; a run without an API key says how to get going, with one
//! `keel:` prefix.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use pretty_assertions::assert_eq;
use support::tmux::{Tmux, have_tmux};
use support::*;

/// The session id of `path`'s header line.
fn header_id(path: &std::path::Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let header: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    header["id"]
        .as_str()
        .or_else(|| header["data"]["id"].as_str())
        .expect("a header id")
        .to_owned()
}

#[test]
fn resume_last_skips_a_newer_session_without_a_turn() {
    let env = Env::new();
    let first = Mock::start("responses:\n  - text: \"First answer.\"\n");
    let out = run(env.keel(&first.base_url()).args(["run", "first prompt"]));
    assert_eq!(out.code, Some(0), "run stderr:\n{}", out.stderr);
    let real = env.only_session();

    // A newer session with only its header: what an opened-and-quit UI used to leave.
    std::thread::sleep(std::time::Duration::from_millis(50));
    let id = header_id(&real);
    // Another last hex digit (an id may end in 0).
    let last = if id.ends_with('0') { '1' } else { '0' };
    let empty_id = format!("{}{last}", &id[..id.len() - 1]);
    assert_ne!(empty_id, id);
    let header = std::fs::read_to_string(&real)
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .replace(&id, &empty_id);
    let dir = real.parent().unwrap().with_file_name(&empty_id);
    std::fs::create_dir_all(&dir).unwrap();
    let empty = dir.join(real.file_name().unwrap());
    std::fs::write(&empty, format!("{header}\n")).unwrap();
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
    assert_eq!(
        std::fs::read_to_string(&empty).unwrap(),
        format!("{header}\n")
    );
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
