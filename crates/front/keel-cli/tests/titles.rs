//! End-to-end: titles by the model. After the first prompt, `keel run` sends one small request
//! beside the turn — no tools, thinking off, a few hundred bytes — and logs its sanitized answer
//! as `session/title`, which `keel sessions list` shows. A `--base-url` server gets none unless
//! `titles = true` is set; a failing title request changes nothing about the run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::Value;
use support::*;

const TITLE_MARK: &str = "Generate the session title";

fn script(title: &str) -> String {
    format!(
        r#"
responses:
  - match: {{ last_user_contains: "{TITLE_MARK}" }}
    {title}
  - match: {{ last_user_contains: "run echo hi" }}
    tool_calls: [{{ id: call_1, name: bash, arguments: {{ command: "echo hi-from-bash" }} }}]
  - match: {{ last_tool_result_contains: "hi-from-bash" }}
    text: "It printed hi."
"#
    )
}

fn title_requests(mock: &Mock) -> Vec<Value> {
    mock.requests()
        .into_iter()
        .filter(|r| last_user_text(r).contains(TITLE_MARK))
        .collect()
}

fn run_with(env: &Env, mock: &Mock, extra: &[&str]) -> Output {
    run(env
        .keel(&mock.base_url())
        .args(["--approval", "auto"])
        .args(extra)
        .args(["run", "run echo hi"]))
}

fn titles_logged(env: &Env) -> Vec<Value> {
    let events = load_consistent(&env.only_session());
    of_type(&events, "session/title")
        .into_iter()
        .cloned()
        .collect()
}

#[test]
fn the_first_prompt_gets_a_title_by_one_small_request() {
    let env = Env::new();
    let mock = Mock::start_tapped(&script(
        "text: \"**\\\"Echo a greeting\\\"**\\nThe user wants to run echo.\"",
    ));
    let out = run_with(&env, &mock, &["-c", "titles=true"]);
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert_eq!(out.stdout.trim(), "It printed hi.");

    let titles = title_requests(&mock);
    assert_eq!(titles.len(), 1, "{:?}", mock.requests());
    let req = &titles[0];
    assert!(req.get("tools").is_none(), "{req}");
    assert_eq!(req["thinking"]["type"], "disabled", "{req}");
    assert_eq!(req["model"], "deepseek-v4-flash");
    assert_eq!(req["max_tokens"], 64);
    assert!(
        last_user_text(req).contains(r#"[{"seq":"#) && last_user_text(req).contains("run echo hi"),
        "{req}"
    );
    assert!(
        req["messages"][0]["content"]
            .as_str()
            .unwrap()
            .starts_with("Create a concise title")
    );
    let raw = mock
        .raw_requests()
        .into_iter()
        .find(|b| String::from_utf8_lossy(b).contains(TITLE_MARK))
        .unwrap();
    assert!(raw.len() < 2048, "title request of {} bytes", raw.len());
    // The agent's own requests were answered as usual.
    assert_eq!(mock.requests().len(), 3);

    let logged = titles_logged(&env);
    assert_eq!(logged.len(), 1, "{logged:?}");
    assert_eq!(logged[0]["data"]["title"], "Echo a greeting");
    assert_eq!(logged[0]["data"]["source"]["kind"], "provider");

    let list = run(env.keel_bare().args(["sessions", "list"]));
    assert_eq!(list.code, Some(0), "stderr:\n{}", list.stderr);
    assert!(list.stdout.contains("Echo a greeting"), "{}", list.stdout);
}

#[test]
fn a_base_url_server_gets_no_title_request_by_default() {
    let env = Env::new();
    let mock = Mock::start(&script("text: \"Never asked\""));
    let out = run_with(&env, &mock, &[]);
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert!(title_requests(&mock).is_empty(), "{:?}", mock.requests());
    assert_eq!(mock.requests().len(), 2);
    assert!(titles_logged(&env).is_empty());
}

#[test]
fn titles_false_turns_them_off_whatever_the_endpoint() {
    let env = Env::new();
    env.write(".keel/config.toml", "titles = true\n");
    let mock = Mock::start(&script("text: \"Never asked\""));
    let out = run_with(&env, &mock, &["-c", "titles=false"]);
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert!(title_requests(&mock).is_empty(), "{:?}", mock.requests());
    assert!(titles_logged(&env).is_empty());
}

#[test]
fn a_failing_title_request_leaves_the_run_alone() {
    let env = Env::new();
    let mock = Mock::start(&script("behaviour: server_error"));
    let out = run_with(&env, &mock, &["-c", "titles=true"]);
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert_eq!(out.stdout.trim(), "It printed hi.");
    assert_eq!(title_requests(&mock).len(), 1);
    assert!(titles_logged(&env).is_empty());
    let events = load_consistent(&env.only_session());
    assert_eq!(
        turn_end_reasons(&events),
        vec![serde_json::json!({"kind": "completed"})]
    );
}
