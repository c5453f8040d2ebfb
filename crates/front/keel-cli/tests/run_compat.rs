//! End-to-end compatibility with OpenAI-compatible servers other than DeepSeek (llama.cpp's
//! `llama-server` first): the real `keel` binary against the loopback mock server answering
//! like those servers. Overflow in llama.cpp's words is compacted and retried; no request ever
//! carries two `user` messages in a row (compaction and resume included); `max_tokens` fits the
//! context window; a repeated failing tool call is stopped; error and reasoning settings are
//! rendered and logged once and as sent.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use pretty_assertions::assert_eq;
use serde_json::Value;
use support::*;

/// llama.cpp's `llama-server` answer to a prompt larger than its `--ctx-size`.
const LLAMA_CPP_OVERFLOW: &str = r#"{"error":{"code":400,"message":"request (12108 tokens) exceeds the available context size (6144 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":12108,"n_ctx":6144}}"#;

/// A first step reading a file, then llama.cpp's overflow, the summary, the retried step.
fn overflow_script() -> String {
    format!(
        r#"
responses:
  - text: "Reading."
    tool_calls:
      - {{ id: r1, name: read, arguments: {{ path: notes.txt }} }}
  - behaviour: context_overflow
    body: '{LLAMA_CPP_OVERFLOW}'
  - text: "SUMMARY: the user asked about notes.txt; it was read."
  - text: "notes.txt has three lines."
"#
    )
}

fn roles(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap().to_owned())
        .collect()
}

/// Panics naming the request when two `user` messages follow each other.
fn assert_no_consecutive_users(requests: &[Value], what: &str) {
    for (i, r) in requests.iter().enumerate() {
        let roles = roles(r);
        assert!(
            !roles.windows(2).any(|w| w[0] == "user" && w[1] == "user"),
            "{what}: request {i} has two user messages in a row: {roles:?}"
        );
    }
}

#[test]
fn llama_cpp_overflow_is_compacted_and_the_step_retried() {
    let env = Env::new();
    env.write("notes.txt", "one\ntwo\nthree\n");
    let mock = Mock::start(&overflow_script());
    let out = run(env.keel(&mock.base_url()).args([
        "--approval",
        "auto",
        "run",
        "what is in notes.txt?",
    ]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert_eq!(out.stdout, "notes.txt has three lines.\n");
    assert_eq!(mock.remaining(), 0);

    let events = load_consistent(&env.only_session());
    let retry = of_type(&events, "llm/retry");
    assert_eq!(retry.len(), 1);
    assert_eq!(
        retry[0]["data"]["failure"]["code"], "CONTEXT_WINDOW_EXCEEDED",
        "{}",
        retry[0]
    );
    let start = of_type(&events, "compaction/start");
    assert_eq!(start.len(), 1);
    assert_eq!(start[0]["data"]["reason"], "overflow");
    // Compaction worked to the window llama.cpp reported (6144) or less, not the model's 1M.
    let window = start[0]["data"]["contextWindow"].as_u64().unwrap();
    assert!(window <= 6144, "{}", start[0]);
    let end = of_type(&events, "compaction/end");
    assert_eq!(end[0]["data"]["outcome"], "compacted", "{}", end[0]);
    // Requests: step 1, the overflowing step 2, the summary, the retried step 2.
    let requests = mock.requests();
    assert_eq!(requests.len(), 4);
    // The prompt of the turn still reaches the model word for word after the summary.
    assert!(
        last_user_text(&requests[3]).contains("what is in notes.txt?"),
        "{}",
        requests[3]
    );
}

#[test]
fn no_request_has_two_user_messages_in_a_row_through_compaction_and_resume() {
    let env = Env::new();
    env.write("notes.txt", "one\ntwo\nthree\n");
    let mock = Mock::start(&overflow_script());
    let out = run(env.keel(&mock.base_url()).args([
        "--approval",
        "auto",
        "run",
        "what is in notes.txt?",
    ]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    let first = mock.requests();
    assert_eq!(first.len(), 4);
    // The runtime context and the prompt went out as one user message, the prompt last.
    let opening = first[0]["messages"][1]["content"].as_str().unwrap();
    assert!(
        opening.starts_with("Current runtime context.")
            && opening.ends_with("\n\nwhat is in notes.txt?"),
        "{opening}"
    );
    assert_no_consecutive_users(&first, "run");

    // A resume with other flags adds a new runtime context and a prompt: still one message.
    let again = Mock::start(
        "responses:\n  - tool_calls: [{ id: r2, name: read, arguments: { path: notes.txt } }]\n  - text: \"Still three.\"\n",
    );
    let out = run(env.keel(&again.base_url()).args([
        "--approval",
        "never",
        "resume",
        &session_id(&env.only_session()),
        "and now?",
    ]));
    assert_eq!(out.code, Some(0), "resume stderr:\n{}", out.stderr);
    let resumed = again.requests();
    assert_eq!(resumed.len(), 2);
    assert_no_consecutive_users(&resumed, "resume");
    let last = last_user_text(&resumed[0]);
    assert!(
        last.starts_with("Current runtime context.") && last.ends_with("\n\nand now?"),
        "{last}"
    );
    for r in first.iter().chain(&resumed) {
        assert_wire_valid(r);
    }
}

/// `max_tokens` of every request `keel` sent for `prompt` with `flags`.
fn sent_max_tokens(flags: &[&str], script: &str) -> Vec<u64> {
    let env = Env::new();
    env.write(
        "big.txt",
        &"a line of text that makes the prompt grow\n".repeat(400),
    );
    let mock = Mock::start(script);
    let out = run(env
        .keel(&mock.base_url())
        .args(["--approval", "auto", "--model", "local-model"])
        .args(flags)
        .args(["run", "read big.txt"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    mock.requests()
        .iter()
        .map(|r| r["max_tokens"].as_u64().unwrap())
        .collect()
}

#[test]
fn max_tokens_is_capped_by_what_the_window_leaves() {
    let two_steps = "responses:\n  - tool_calls: [{ id: b, name: read, arguments: { path: big.txt } }]\n  - text: \"Read.\"\n";
    // An unknown model: 128K window, 8K output; nothing caps it.
    assert_eq!(sent_max_tokens(&[], two_steps), [8000, 8000]);
    // A 9K window: the prompt takes some, the file read takes more.
    let capped = sent_max_tokens(&["--context-window", "9000"], two_steps);
    assert!(capped[0] < 8000, "{capped:?}");
    assert!(capped[1] < capped[0], "{capped:?}");
    // A window smaller than keel's own fixed prompt is refused before any request
    // (run_window.rs); the floor of a quarter of the window is covered by keel-agent's
    // `output_budget_is_capped_by_the_window`.
}

#[test]
fn a_repeated_failing_call_is_answered_with_a_warning_then_stopped() {
    let env = Env::new();
    let call = "  - tool_calls: [{ name: read, arguments: { path: missing.txt } }]\n";
    let mock = Mock::start(&format!("responses:\n{}", call.repeat(10)));
    let out = run(env.keel(&mock.base_url()).args([
        "--approval",
        "auto",
        "-c",
        "agent.repeat_failure_limit=2",
        "run",
        "read missing.txt",
    ]));
    assert_eq!(out.code, Some(1), "stderr:\n{}", out.stderr);
    assert_eq!(mock.requests().len(), 4, "stopped at twice the limit");
    assert!(
        out.stderr.contains(
            "ended: error REPEATED_TOOL_FAILURE: stopped: the model called `read` 4 times in a \
             row with the same arguments and it failed the same way each time:"
        ),
        "stderr:\n{}",
        out.stderr
    );
    let events = load_consistent(&env.only_session());
    let results = tool_results(&events);
    assert_eq!(results.len(), 4);
    assert!(results.iter().all(|(_, _, is_error)| *is_error));
    assert!(!results[0].1.contains("keel:"), "{}", results[0].1);
    assert!(
        results[1]
            .1
            .contains("this is the 2nd identical failing call of `read` in a row"),
        "{}",
        results[1].1
    );
    assert!(results[1].1.contains("Change course"), "{}", results[1].1);
    assert!(
        results[3].1.contains("keel stopped the turn"),
        "{}",
        results[3].1
    );
    // The warning reached the model.
    let third = &mock.requests()[2];
    assert!(
        third.to_string().contains("Change course"),
        "the model was told: {third}"
    );
}

#[test]
fn a_rejected_request_is_reported_once_by_run_and_sessions_show() {
    let env = Env::new();
    let mock = Mock::start("responses:\n  - behaviour: invalid_request\n");
    let out = run(env
        .keel(&mock.base_url())
        .args(["--approval", "auto", "run", "hello"]));
    assert_eq!(out.code, Some(1), "stderr:\n{}", out.stderr);
    let line = out
        .stderr
        .lines()
        .find(|l| l.contains("ended: error"))
        .unwrap();
    assert!(
        line.starts_with(
            "keel: turn 1 ended: error INVALID_REQUEST: the provider answered HTTP 400: Invalid \
             max_tokens value, the valid range of max_tokens is [1, 8192] [request mock-request] \
             — session "
        ),
        "{line}"
    );
    assert_eq!(line.matches("HTTP 400").count(), 1, "{line}");

    let id = session_id(&env.only_session());
    let show = run(env.keel(&mock.base_url()).args(["sessions", "show", &id]));
    assert_eq!(show.code, Some(0), "stderr:\n{}", show.stderr);
    assert_eq!(
        show.stdout.matches("INVALID_REQUEST").count(),
        1,
        "{}",
        show.stdout
    );
    assert!(
        show.stdout
            .contains("INVALID_REQUEST: the provider answered HTTP 400: Invalid max_tokens"),
        "{}",
        show.stdout
    );
    assert_eq!(
        show.stdout.matches("HTTP 400").count(),
        1,
        "{}",
        show.stdout
    );
}

#[test]
fn the_log_records_only_the_reasoning_settings_that_were_sent() {
    let env = Env::new();
    let mock = Mock::start("responses:\n  - text: \"Hi.\"\n");
    // deepseek-chat takes neither thinking nor an effort; the defaults turn both on.
    let out = run(env.keel(&mock.base_url()).args([
        "--approval",
        "auto",
        "--model",
        "deepseek-chat",
        "run",
        "hello",
    ]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    let body = &mock.requests()[0];
    assert_eq!(body.get("thinking"), None, "{body}");
    assert_eq!(body.get("reasoning_effort"), None, "{body}");
    let events = load_consistent(&env.only_session());
    let header = of_type(&events, "request/header");
    let config = &header[0]["data"]["header"]["config"];
    assert_eq!(config["thinking"], Value::Null, "{config}");
    assert_eq!(config["reasoningEffort"], Value::Null, "{config}");
    assert_eq!(config["maxTokens"], body["max_tokens"], "{config}");
}
