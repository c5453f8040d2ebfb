//! End-to-end (the real binary, the loopback mock model): a session remembers its provider,
//! model and `--base-url` (never a key, nor a URL's credentials), and `keel resume` reuses them
//! when no flag names others. A session logged without the route resumes as before.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use pretty_assertions::assert_eq;
use support::*;

const TWO: &str = "responses:\n  - text: \"First answer.\"\n  - text: \"Second answer.\"\n";

/// The mock's URL with user info and a query holding secrets.
fn with_secrets(url: &str) -> String {
    let rest = url.strip_prefix("http://").unwrap();
    format!("http://user:pw-secret-1@{rest}?token=q-secret-2")
}

#[test]
fn resume_last_reuses_the_logged_endpoint_and_model() {
    let env = Env::new();
    let mock = Mock::start(TWO);
    let out = run(env
        .keel_bare()
        .args(["--base-url", &mock.base_url(), "--model", "m-first"])
        .args(["run", "one"]));
    assert_eq!(out.code, Some(0), "run stderr:\n{}", out.stderr);
    let session = env.only_session();

    // No flags, no key, no base URL: the logged endpoint and model.
    let out = run(env.keel_bare().args(["resume", "--last", "again"]));
    assert_eq!(out.code, Some(0), "resume stderr:\n{}", out.stderr);
    assert_eq!(out.stdout.trim(), "Second answer.");
    assert_eq!(env.only_session(), session);
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1]["model"], "m-first");
    assert_eq!(last_user_text(&requests[1]), "again");
    let wire = requests[1]["messages"].to_string();
    assert!(
        wire.contains("one") && wire.contains("First answer."),
        "{wire}"
    );
    let events = load_consistent(&session);
    let routes = of_type(&events, "model/route");
    assert_eq!(routes.len(), 1, "the route is logged once: {routes:?}");
    assert_eq!(routes[0]["data"]["baseUrl"], mock.base_url().as_str());
}

#[test]
fn a_model_named_on_resume_wins_over_the_logged_one() {
    let env = Env::new();
    let mock = Mock::start(TWO);
    let out = run(env
        .keel_bare()
        .args(["--base-url", &mock.base_url(), "--model", "m-first"])
        .args(["run", "one"]));
    assert_eq!(out.code, Some(0), "run stderr:\n{}", out.stderr);
    let out = run(env
        .keel_bare()
        .args(["--model", "m-second", "resume", "--last", "again"]));
    assert_eq!(out.code, Some(0), "resume stderr:\n{}", out.stderr);
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1]["model"], "m-second");
}

#[test]
fn a_url_is_logged_without_its_credentials() {
    let env = Env::new();
    let mock = Mock::start(TWO);
    let url = with_secrets(&mock.base_url());
    let out = run(env
        .keel_bare()
        .args(["--base-url", &url, "--model", "m-first"])
        .args(["run", "one"]));
    // The query lands where the wire path goes, so this turn may fail; the session exists.
    let _ = out;
    // The logged route holds the URL without them (the failed turn's own error text is
    // another matter: it may quote the URL it was sent to).
    let events = load_consistent(&env.only_session());
    let routes = of_type(&events, "model/route");
    assert_eq!(routes.len(), 1, "{routes:?}");
    let route = routes[0].to_string();
    assert!(
        !route.contains("pw-secret-1") && !route.contains("q-secret-2"),
        "{route}"
    );
    assert_eq!(routes[0]["data"]["baseUrl"], mock.base_url().as_str());
    let out = run(env.keel_bare().args(["resume", "--last", "again"]));
    assert_eq!(out.code, Some(0), "resume stderr:\n{}", out.stderr);
    assert_eq!(mock.requests().last().unwrap()["model"], "m-first");
}

#[test]
fn a_session_without_a_logged_route_resumes_as_before() {
    let env = Env::new();
    // A scripted run logs no route: the session's file is as an older keel wrote it.
    let script = env.root().join("script.yaml");
    std::fs::write(&script, "responses:\n  - text: \"First answer.\"\n").unwrap();
    let out = run(env
        .keel_bare()
        .args(["run", "--script"])
        .arg(&script)
        .arg("one"));
    assert_eq!(out.code, Some(0), "run stderr:\n{}", out.stderr);
    let session = env.only_session();
    assert!(of_type(&load_consistent(&session), "model/route").is_empty());

    // No flags: the configured DeepSeek endpoint, which needs a key, as before.
    let out = run(env.keel_bare().args(["resume", "--last", "again"]));
    assert_ne!(out.code, Some(0));
    assert!(out.stderr.contains("DEEPSEEK_API_KEY"), "{}", out.stderr);

    // With the flags given again, it continues.
    let mock = Mock::start("responses:\n  - text: \"Second answer.\"\n");
    let out = run(env
        .keel(&mock.base_url())
        .args(["resume", "--last", "again"]));
    assert_eq!(out.code, Some(0), "resume stderr:\n{}", out.stderr);
    assert_eq!(mock.requests().len(), 1);
}
