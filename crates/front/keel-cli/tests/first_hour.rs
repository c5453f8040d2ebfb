//! End-to-end: what a newcomer trips over in the first hour (the real binary against the
//! loopback mock model). A mistyped subcommand is refused, not sent as a paid prompt; the
//! habits of other agents' CLIs work: `keel exec` (Codex), `keel --continue` (Claude Code),
//! `--full-auto` (Codex).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use pretty_assertions::assert_eq;
use serde_json::Value;
use support::*;

const ANSWER: &str = "responses:\n  - text: \"The answer.\"\n";

#[test]
fn a_mistyped_subcommand_is_refused_not_sent() {
    let env = Env::new();
    let mock = Mock::start(ANSWER);
    for typo in ["sesions", "sesion", "confg", "trsut", "resmue"] {
        let out = run(env.keel(&mock.base_url()).arg(typo));
        assert_eq!(out.code, Some(2), "{typo}: stderr:\n{}", out.stderr);
        assert!(
            out.stderr
                .contains(&format!("unrecognized subcommand '{typo}'")),
            "{typo}: {}",
            out.stderr
        );
        assert!(out.stderr.contains("similar subcommand"), "{}", out.stderr);
        assert!(
            out.stderr.contains(&format!("keel run {typo}")),
            "{}",
            out.stderr
        );
    }
    let out = run(env.keel(&mock.base_url()).arg("sesions"));
    assert!(
        out.stderr
            .contains("tip: a similar subcommand exists: 'sessions'"),
        "{}",
        out.stderr
    );
    assert!(mock.requests().is_empty(), "a typo was sent to the model");
    assert!(env.session_files().is_empty(), "{:?}", env.session_files());
}

#[test]
fn a_one_word_prompt_is_sent() {
    let env = Env::new();
    let mock = Mock::start(ANSWER);
    let out = run(env.keel(&mock.base_url()).arg("refactor"));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert_eq!(out.stdout.trim(), "The answer.");
    let requests = mock.requests();
    assert_eq!(requests.len(), 1);
    let text = last_user_text(&requests[0]);
    assert!(text.trim_end().ends_with("refactor"), "{text}");
}

#[test]
fn keel_run_sends_a_word_that_looks_like_a_subcommand() {
    let env = Env::new();
    let mock = Mock::start(ANSWER);
    let out = run(env.keel(&mock.base_url()).args(["run", "sesions"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    let requests = mock.requests();
    assert_eq!(requests.len(), 1);
    let text = last_user_text(&requests[0]);
    assert!(text.trim_end().ends_with("sesions"), "{text}");
}

#[test]
fn a_mistyped_subcommand_with_arguments_names_the_one_meant() {
    let env = Env::new();
    let mock = Mock::start(ANSWER);
    let out = run(env.keel(&mock.base_url()).args(["runn", "hi"]));
    assert_eq!(out.code, Some(2), "stderr:\n{}", out.stderr);
    assert!(
        out.stderr.contains("unrecognized subcommand 'runn'")
            && out.stderr.contains("a similar subcommand exists: 'run'"),
        "{}",
        out.stderr
    );
    assert!(mock.requests().is_empty());
}

#[test]
fn exec_is_run() {
    let env = Env::new();
    let mock = Mock::start(ANSWER);
    let out = run(env.keel(&mock.base_url()).args(["exec", "hi"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert_eq!(out.stdout, "The answer.\n");
    let text = last_user_text(&mock.requests()[0]);
    assert!(text.trim_end().ends_with("hi"), "{text}");
}

#[test]
fn continue_resumes_the_latest_session() {
    let env = Env::new();
    let mock = Mock::start(
        "responses:\n  - text: \"First answer.\"\n  - match: { last_user_contains: \"again\" }\n    text: \"Second answer.\"\n",
    );
    let out = run(env.keel(&mock.base_url()).args(["run", "first prompt"]));
    assert_eq!(out.code, Some(0), "run stderr:\n{}", out.stderr);
    let session = env.only_session();

    let out = run(env.keel(&mock.base_url()).args(["--continue", "again"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert_eq!(out.stdout.trim(), "Second answer.");
    assert_eq!(env.only_session(), session);
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(last_user_text(&requests[1]), "again");
    let wire = requests[1]["messages"].to_string();
    assert!(
        wire.contains("first prompt") && wire.contains("First answer."),
        "the continued request lacks the first turn: {wire}"
    );

    // It is the top level's: with a command it is refused.
    let out = run(env.keel(&mock.base_url()).args(["--continue", "run", "x"]));
    assert_eq!(out.code, Some(2), "stderr:\n{}", out.stderr);
    assert!(out.stderr.contains("keel resume --last"), "{}", out.stderr);
    assert_eq!(mock.requests().len(), 2);
}

/// The sandbox mode and approval policy the session at `path` started with.
fn modes(path: &std::path::Path) -> (String, String) {
    let events = load_consistent(path);
    let first = |t: &str, key: &str| -> String {
        let all: Vec<&Value> = of_type(&events, t);
        all.first()
            .map(|e| e["data"][key].as_str().unwrap_or_default().to_owned())
            .unwrap_or_default()
    };
    (
        first("sandbox/mode", "mode"),
        first("approval/policy", "policy"),
    )
}

#[test]
fn full_auto_runs_inside_the_workspace_without_asking() {
    let env = Env::new();
    let mock = Mock::start(
        r#"
responses:
  - tool_calls:
      - { id: call_bash, name: bash, arguments: { command: "echo made > out.txt", description: "write a file" } }
  - text: "Done."
"#,
    );
    let out = run(env
        .keel(&mock.base_url())
        .args(["run", "--full-auto", "make out.txt"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert_eq!(env.read("out.txt"), "made\n");
    let session = env.only_session();
    assert_eq!(
        modes(&session),
        ("workspace-write".into(), "allow".into()),
        "{:?}",
        load_consistent(&session)
    );
    let events = load_consistent(&session);
    for decided in of_type(&events, "approval/decided") {
        assert_ne!(decided["data"]["by"], "headless", "{decided}");
    }
}

#[test]
fn an_explicit_flag_wins_over_full_auto_and_permission_modes_conflict() {
    let env = Env::new();
    let mock = Mock::start(ANSWER);
    let out = run(env.keel(&mock.base_url()).args([
        "--sandbox",
        "read-only",
        "run",
        "--full-auto",
        "hi",
    ]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert_eq!(
        modes(&env.only_session()),
        ("read-only".into(), "allow".into())
    );

    let out = run(env.keel(&mock.base_url()).args([
        "run",
        "--full-auto",
        "--permission-mode",
        "acceptEdits",
        "hi",
    ]));
    assert_eq!(out.code, Some(2), "stderr:\n{}", out.stderr);
    assert!(out.stderr.contains("cannot be used with"), "{}", out.stderr);
    assert_eq!(mock.requests().len(), 1);
}
