//! The smaller first-hour items of issue 50 in the interactive UI (the real `keel` binary in a
//! `tmux` pane, against the loopback mock model): a denied call says DENIED once and the exit
//! hint is a `keel resume` command that works (`/rewind` naming the files it put back is
//! checked by `tui.rs`'s rewind test).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod support;

use support::tmux::{Tmux, have_tmux, words};
use support::{Env, Mock, run};

#[test]
fn a_denied_call_says_denied_once() {
    if !have_tmux() {
        return;
    }
    let env = Env::new();
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "run it" }
    tool_calls: [{ id: b1, name: bash, arguments: { command: "echo never-ran", description: "echo" } }]
  - text: "Not run, fine."
"#,
    );
    let mut cmd = env.keel(&mock.base_url());
    // Read-only: bash needs an answer.
    cmd.args(["--sandbox", "read-only"]);
    let t = Tmux::start(env.root(), &cmd);
    t.wait_for_words("Welcome to keel");
    t.submit("run it");
    t.wait_for("bash?");
    // Esc: the last option, deny.
    t.keys(&["Escape"]);
    let screen = t.wait_for("Not run, fine.");
    assert_eq!(screen.matches("DENIED").count(), 1, "{screen}");
    t.keys(&["C-d"]);
    assert_eq!(t.wait_exit(), "EXIT=0");
    assert_eq!(t.history().matches("DENIED").count(), 1, "{}", t.history());
}

#[test]
fn the_exit_hint_carries_the_key_variable_and_works() {
    if !have_tmux() {
        return;
    }
    let env = Env::new();
    let mock = Mock::start(
        "responses:\n  - match: { last_user_contains: \"hello\" }\n    text: \"Hello there.\"\n  - match: { last_user_contains: \"again\" }\n    text: \"Again there.\"\n",
    );
    let mut cmd = env.keel(&mock.base_url());
    cmd.args(["--api-key-env", "MY_KEEL_KEY"])
        .env("MY_KEEL_KEY", "sk-mine");
    let t = Tmux::start(env.root(), &cmd);
    t.wait_for_words("Welcome to keel");
    t.submit("hello");
    t.wait_for("Hello there.");
    t.keys(&["C-d"]);
    assert_eq!(t.wait_exit(), "EXIT=0");
    let id = support::session_id(&env.only_session());
    // Wrapped lines joined (-J): the hint is longer than the pane is wide.
    let history = words(&t.tmux(&["capture-pane", "-t", "0", "-p", "-J", "-S", "-"]));
    let hint = format!("keel resume {id} --api-key-env MY_KEEL_KEY");
    assert!(history.contains(&hint), "no {hint:?} in:\n{history}");

    // The hint, run as printed (in the same directory, the key in the same variable), reaches
    // the same server with the same key.
    let tail = history
        .split("continue it with: keel ")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .take(4)
        .collect::<Vec<_>>();
    assert_eq!(tail, ["resume", &id, "--api-key-env", "MY_KEEL_KEY"]);
    let out = run(env
        .keel_bare()
        .env("MY_KEEL_KEY", "sk-mine")
        .args(&tail)
        .arg("again"));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert_eq!(out.stdout.trim(), "Again there.");
    let headers = mock.request_headers();
    assert_eq!(headers.len(), 2);
    for h in &headers {
        assert_eq!(h.get("authorization"), Some("Bearer sk-mine"));
    }
}
