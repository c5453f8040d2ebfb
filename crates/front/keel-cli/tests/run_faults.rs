//! End-to-end: every fault of the mock model server against the real `keel` binary. Transient
//! faults followed by a success end in a logged retry and a completed turn; the others end in
//! exit code 1, a clear message on stderr and a log that closes the turn with `turn/end{error}`
//! and stays consistent (it loads, keeps its invariants and can be resumed).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::*;

/// Retries in these tests wait ~10 ms instead of the default 0.5 s.
const FAST_RETRY: &str = "agent.retry_base_ms=10";

/// Run one `keel run` with `--approval auto` and a fast retry policy.
fn run_keel(env: &Env, mock: &Mock, extra: &[&str]) -> Output {
    let mut cmd = env.keel(&mock.base_url());
    cmd.args(["--approval", "auto", "-c", FAST_RETRY]);
    cmd.args(extra);
    cmd.args(["run", "say hello"]);
    run(&mut cmd)
}

/// A transient fault, then a success: the run completes after one logged retry, and the
/// retried request is the same as the failed one.
fn retried(fault: &str, code: &str, extra: &[&str]) -> Vec<Value> {
    let env = Env::new();
    let mock = Mock::start(&format!(
        r#"
responses:
  - {fault}
  - text: "Hello after a retry."
"#
    ));
    let out = run_keel(&env, &mock, extra);
    assert_eq!(out.code, Some(0), "{fault}: stderr:\n{}", out.stderr);
    assert_eq!(out.stdout, "Hello after a retry.\n");
    assert!(
        out.stderr
            .contains(&format!("model call failed ({code}), retry 1")),
        "{fault}: stderr:\n{}",
        out.stderr
    );

    let events = load_consistent(&env.only_session());
    let retries = of_type(&events, "llm/retry");
    assert_eq!(retries.len(), 1, "{fault}: {retries:?}");
    assert_eq!(
        retries[0]["data"]["failure"]["code"], code,
        "{fault}: {}",
        retries[0]
    );
    assert_eq!(retries[0]["data"]["attempt"], 1);
    assert_eq!(
        (
            retries[0]["data"]["turn"].clone(),
            retries[0]["data"]["step"].clone()
        ),
        (json!(1), json!(1))
    );
    // One step, one complete answer: the failed attempt left no message on the surface.
    assert_eq!(of_type(&events, "step/start").len(), 1);
    let messages = of_type(&events, "assistant/message");
    assert_eq!(messages.len(), 1);
    assert_eq!(
        messages[0]["data"]["interrupted"]
            .as_bool()
            .unwrap_or(false),
        false
    );
    assert_eq!(
        messages[0]["data"]["message"]["content"],
        json!([{"type": "text", "text": "Hello after a retry."}])
    );
    assert_eq!(
        turn_end_reasons(&events),
        vec![json!({"kind": "completed"})]
    );
    assert_eq!(ty(last(&events)), "turn/end");

    let requests = mock.requests();
    assert_eq!(requests.len(), 2, "{fault}");
    assert_eq!(
        requests[1], requests[0],
        "{fault}: the retry sends the same request"
    );
    assert_eq!(mock.remaining(), 0);
    retries.into_iter().cloned().collect()
}

#[test]
fn rate_limit_is_retried_after_the_servers_retry_after() {
    let retries = retried(
        "{ behaviour: rate_limit, retry_after: 0.05 }",
        "RATE_LIMIT",
        &[],
    );
    assert_eq!(
        retries[0]["data"]["delayMs"], 50,
        "Retry-After: 0.05 is honoured: {}",
        retries[0]
    );
}

#[test]
fn server_error_is_retried() {
    retried("{ behaviour: server_error }", "SERVER", &[]);
}

#[test]
fn connection_reset_is_retried() {
    retried("{ behaviour: connection_reset }", "TRANSPORT", &[]);
}

#[test]
fn stream_disconnect_is_retried_and_the_partial_answer_is_dropped() {
    let retries = retried(
        r#"{ behaviour: stream_disconnect, text: "This partial answer is cut off halfway through the stream.", tool_calls: [{ name: bash, arguments: { command: "touch ran.txt" } }] }"#,
        "STREAM_CLOSED",
        &[],
    );
    assert_eq!(retries.len(), 1);
}

#[test]
fn a_stalled_stream_times_out_and_is_retried() {
    retried(
        r#"{ behaviour: stall, text: "Stalling forever after half of this text." }"#,
        "TIMEOUT",
        &["-c", "providers.deepseek.idle_timeout_secs=1"],
    );
}

#[test]
fn retries_run_out_with_a_clear_error() {
    let env = Env::new();
    let mock = Mock::start(
        r#"
responses:
  - { behaviour: server_error }
  - { behaviour: server_error }
  - { behaviour: server_error }
  - text: "never reached"
"#,
    );
    let out = run_keel(&env, &mock, &["-c", "agent.retry_max=2"]);
    assert_eq!(out.code, Some(1), "stderr:\n{}", out.stderr);
    assert!(
        out.stderr.contains("error SERVER"),
        "stderr:\n{}",
        out.stderr
    );
    let events = load_consistent(&env.only_session());
    assert_eq!(of_type(&events, "llm/retry").len(), 2);
    assert_eq!(turn_end_reasons(&events)[0]["code"], "SERVER");
    assert_eq!(mock.requests().len(), 3);
    assert_eq!(mock.remaining(), 1);
}

/// A fault that is not retried: exit 1, the code on stderr with the session, the turn closed
/// with `turn/end{error}`, and the session resumes into a valid request.
fn gives_up(fault: &str, code: &str) {
    let env = Env::new();
    let mock = Mock::start(&format!(
        "responses:\n  - {fault}\n  - text: \"never reached\"\n"
    ));
    let out = run_keel(&env, &mock, &[]);
    assert_eq!(out.code, Some(1), "{fault}: stderr:\n{}", out.stderr);
    assert_eq!(out.stdout, "", "{fault}");
    let path = env.only_session();
    let id = session_id(&path);
    assert!(
        out.stderr.contains(&format!("ended: error {code}")),
        "{fault}: stderr:\n{}",
        out.stderr
    );
    assert!(
        !out.stderr.contains(&format!("{code}: {code}")),
        "{fault}: the code is said once:\n{}",
        out.stderr
    );
    assert!(
        out.stderr.contains(&id),
        "{fault}: stderr names the session:\n{}",
        out.stderr
    );

    let events = load_consistent(&path);
    assert_eq!(
        of_type(&events, "llm/retry").len(),
        0,
        "{fault} must not be retried"
    );
    assert_eq!(mock.requests().len(), 1, "{fault}");
    assert_eq!(ty(last(&events)), "turn/end", "{fault}");
    let reasons = turn_end_reasons(&events);
    assert_eq!(reasons.len(), 1);
    assert_eq!(reasons[0]["kind"], "error", "{fault}: {}", reasons[0]);
    assert_eq!(reasons[0]["code"], code, "{fault}: {}", reasons[0]);
    assert!(
        reasons[0]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{fault}: {}",
        reasons[0]
    );
    assert!(
        of_type(&events, "assistant/message").is_empty(),
        "{fault}: no half answer on the surface"
    );
    let types: Vec<&str> = events
        .iter()
        .map(ty)
        .filter(|t| *t != "assistant/chunk")
        .collect();
    assert_eq!(
        &types[types.len() - 2..],
        ["step/end", "turn/end"],
        "{fault}"
    );

    // The session goes on: a resumed turn sends a valid request with the new prompt.
    let again = Mock::start("responses:\n  - text: \"Back.\"\n");
    let out = run(env.keel(&again.base_url()).args([
        "--approval",
        "auto",
        "-c",
        FAST_RETRY,
        "resume",
        &id,
        "try again",
    ]));
    assert_eq!(out.code, Some(0), "{fault}: resume stderr:\n{}", out.stderr);
    assert_eq!(out.stdout, "Back.\n");
    let request = &again.requests()[0];
    assert_wire_valid(request);
    // The failed turn got no answer, so its prompt and the new one go out as one user message;
    // same flags: no new runtime context between them.
    let text = last_user_text(request);
    assert!(
        text.ends_with("\n\nsay hello\n\ntry again"),
        "{fault}: {text}"
    );
    let events = load_consistent(&path);
    assert_eq!(
        turn_end_reasons(&events)[1],
        json!({"kind": "completed"}),
        "{fault}"
    );
}

#[test]
fn auth_error_gives_up() {
    gives_up("{ behaviour: auth_error }", "AUTH");
}

#[test]
fn quota_exceeded_gives_up() {
    gives_up("{ behaviour: quota_exceeded }", "QUOTA");
}

#[test]
fn context_overflow_gives_up_without_a_compaction_plugin() {
    gives_up("{ behaviour: context_overflow }", "CONTEXT_WINDOW_EXCEEDED");
}

#[test]
fn malformed_json_gives_up() {
    gives_up(
        r#"{ behaviour: malformed_json, text: "Some text before the garbage." }"#,
        "MALFORMED_RESPONSE",
    );
}

#[test]
fn an_empty_response_gives_up() {
    gives_up("{ behaviour: empty }", "EMPTY_RESPONSE");
}

#[test]
fn max_tokens_ends_the_turn_with_the_partial_text_and_no_half_tool_call() {
    let env = Env::new();
    let mock = Mock::start(
        r#"
responses:
  - behaviour: max_tokens
    text: "An answer that ran out of output budget"
    tool_calls: [{ name: bash, arguments: { command: "touch ran.txt" } }]
"#,
    );
    let out = run_keel(&env, &mock, &[]);
    assert_eq!(out.code, Some(1), "stderr:\n{}", out.stderr);
    assert!(out.stderr.contains("max-tokens"), "stderr:\n{}", out.stderr);
    assert!(
        !env.ws.join("ran.txt").exists(),
        "a cut tool call must not run"
    );
    let events = load_consistent(&env.only_session());
    assert_eq!(
        turn_end_reasons(&events),
        vec![json!({"kind": "max-tokens"})]
    );
    assert!(tool_calls(&events).is_empty());
    let messages = of_type(&events, "assistant/message");
    assert_eq!(messages.len(), 1);
    assert_eq!(
        messages[0]["data"]["message"]["content"],
        json!([{"type": "text", "text": "An answer that ran out of output budget"}])
    );
    assert_eq!(mock.requests().len(), 1);
}
