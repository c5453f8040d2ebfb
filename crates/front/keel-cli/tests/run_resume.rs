//! End-to-end: `keel resume --last [PROMPT]` (the real binary) against the loopback mock model:
//! the latest session of the directory continues with the new prompt, and a lone argument that
//! names no session is refused with a hint at `--last`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use pretty_assertions::assert_eq;
use support::*;

#[test]
fn resume_last_continues_the_latest_session_with_a_new_prompt() {
    let env = Env::new();
    let first = Mock::start("responses:\n  - text: \"First answer.\"\n");
    let out = run(env.keel(&first.base_url()).args(["run", "first prompt"]));
    assert_eq!(out.code, Some(0), "run stderr:\n{}", out.stderr);
    let session = env.only_session();

    let second = Mock::start(
        "responses:\n  - match: { last_user_contains: \"next prompt\" }\n    text: \"Second answer.\"\n",
    );
    let out = run(env
        .keel(&second.base_url())
        .args(["resume", "--last", "next prompt"]));
    assert_eq!(out.code, Some(0), "resume stderr:\n{}", out.stderr);
    assert_eq!(out.stdout.trim(), "Second answer.");

    // The same session continued: one file, two completed turns, and the second request
    // carries the first turn's history before the new prompt.
    assert_eq!(env.only_session(), session);
    let events = load_consistent(&session);
    assert_eq!(
        turn_end_reasons(&events),
        vec![
            serde_json::json!({"kind": "completed"}),
            serde_json::json!({"kind": "completed"})
        ]
    );
    let requests = second.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(last_user_text(&requests[0]), "next prompt");
    let wire = requests[0]["messages"].to_string();
    assert!(
        wire.contains("first prompt") && wire.contains("First answer."),
        "the resumed request lacks the first turn: {wire}"
    );
}

#[test]
fn a_lone_argument_that_is_no_session_suggests_resume_last() {
    let env = Env::new();
    let mock = Mock::start("responses:\n  - text: \"First answer.\"\n");
    let out = run(env.keel(&mock.base_url()).args(["run", "first prompt"]));
    assert_eq!(out.code, Some(0), "run stderr:\n{}", out.stderr);

    let out = run(env.keel(&mock.base_url()).args(["resume", "Continue."]));
    assert_eq!(out.code, Some(2), "stderr:\n{}", out.stderr);
    assert!(
        out.stderr.contains("no session matches \"Continue.\"")
            && out.stderr.contains("keel resume --last \"Continue.\""),
        "stderr:\n{}",
        out.stderr
    );
    assert_eq!(mock.requests().len(), 1, "the failed resume sent a request");

    // Two arguments with --last are refused too, naming the flag.
    let out = run(env
        .keel(&mock.base_url())
        .args(["resume", "--last", "a", "b"]));
    assert_eq!(out.code, Some(2), "stderr:\n{}", out.stderr);
    assert!(
        out.stderr.contains("--last takes at most one argument"),
        "stderr:\n{}",
        out.stderr
    );
}
