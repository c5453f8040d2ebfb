//! End-to-end: a whole tool-using session over each wire format keel speaks — chat completions,
//! the Messages API (`--provider anthropic`, whose built-in table says `api = "messages"`) and
//! OpenAI's Responses API (`--provider openai`) — against the loopback mock model server, which
//! streams each format's events. The second request must carry the first reply's reasoning back
//! the way its API requires (chat: `reasoning_content`; Messages: the `thinking` block with its
//! signature; Responses: the `reasoning` item with its encrypted content), the key must travel in
//! the format's header, and the log must hold the usage the stream reported.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::Value;
use support::*;

const TOOL_THEN_ANSWER: &str = r#"
responses:
  - match: { last_user_contains: "say hi" }
    reasoning: "I will run echo."
    tool_calls: [{ id: call_1, name: bash, arguments: { command: "echo hi-from-bash", description: "say hi" } }]
  - match: { last_tool_result_contains: "hi-from-bash" }
    reasoning: "It printed."
    text: "Done: it printed hi."
"#;

fn run_on(provider: &str, script: &str) -> (Env, Mock, Output) {
    let env = Env::new();
    let mock = Mock::start(script);
    let out = run(env
        .keel_bare()
        .env("MY_KEY", "sk-wire-test")
        .args(["--provider", provider, "--base-url", &mock.base_url()])
        .args(["--api-key-env", "MY_KEY", "--approval", "auto"])
        .args(["-c", "agent.retry_base_ms=10"])
        .args(["run", "say hi"]));
    (env, mock, out)
}

fn header(mock: &Mock, i: usize, name: &str) -> Option<String> {
    mock.request_headers()[i].get(name).map(str::to_owned)
}

/// The usage of every `assistant/message` in the session's log.
fn usages(env: &Env) -> Vec<Value> {
    let events = load_consistent(&env.only_session());
    of_type(&events, "assistant/message")
        .iter()
        .map(|m| m["data"]["usage"].clone())
        .collect()
}

#[test]
fn a_tool_using_session_over_chat_completions_replays_reasoning_content() {
    let (env, mock, out) = run_on("deepseek", TOOL_THEN_ANSWER);
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert_eq!(out.stdout.trim(), "Done: it printed hi.");
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    let assistant = &requests[1]["messages"][2];
    assert_eq!(assistant["reasoning_content"], "I will run echo.");
    assert_eq!(
        header(&mock, 0, "authorization").as_deref(),
        Some("Bearer sk-wire-test")
    );
    assert!(usages(&env)[1]["cacheReadTokens"].as_u64().unwrap() > 0);
}

#[test]
fn a_tool_using_session_over_the_messages_api_replays_signed_thinking() {
    let (env, mock, out) = run_on("anthropic", TOOL_THEN_ANSWER);
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert_eq!(out.stdout.trim(), "Done: it printed hi.");
    let requests = mock.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    // The key travels as x-api-key with the API version; no bearer token.
    assert_eq!(
        header(&mock, 0, "x-api-key").as_deref(),
        Some("sk-wire-test")
    );
    assert_eq!(
        header(&mock, 0, "anthropic-version").as_deref(),
        Some("2023-06-01")
    );
    assert_eq!(header(&mock, 0, "authorization"), None);
    let first = &requests[0];
    assert!(first["system"].as_str().unwrap().len() > 100, "{first}");
    assert_eq!(first["tools"][0]["input_schema"]["type"], "object");
    // Anthropic's table turns on automatic prompt caching: one request-level marker.
    assert_eq!(first["cache_control"]["type"], "ephemeral");
    // The thinking block comes back with the signature the stream gave it, then the call.
    let assistant = &requests[1]["messages"][1];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(assistant["content"][0]["type"], "thinking");
    assert_eq!(assistant["content"][0]["thinking"], "I will run echo.");
    assert_eq!(assistant["content"][0]["signature"], "sig-mock-1-0");
    assert_eq!(assistant["content"][1]["type"], "tool_use");
    assert_eq!(
        assistant["content"][1]["input"]["command"],
        "echo hi-from-bash"
    );
    let result = &requests[1]["messages"][2]["content"][0];
    assert_eq!(result["type"], "tool_result");
    assert_eq!(result["tool_use_id"], "call_1");
    assert_eq!(result["is_error"], false);
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("hi-from-bash"),
        "{result}"
    );
    // The session log keeps the signature, and the usage the stream reported.
    let events = load_consistent(&env.only_session());
    let logged = &of_type(&events, "assistant/message")[0]["data"]["message"]["content"][0];
    assert_eq!(logged["signature"], "sig-mock-1-0", "{logged}");
    let usage = usages(&env);
    assert!(
        usage[1]["cacheReadTokens"].as_u64().unwrap() > 0,
        "{usage:?}"
    );
    assert!(usage[1]["inputTokens"].as_u64().unwrap() > 0, "{usage:?}");
}

#[test]
fn a_tool_using_session_over_the_responses_api_replays_encrypted_reasoning() {
    let (env, mock, out) = run_on("openai", TOOL_THEN_ANSWER);
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert_eq!(out.stdout.trim(), "Done: it printed hi.");
    let requests = mock.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert_eq!(
        header(&mock, 0, "authorization").as_deref(),
        Some("Bearer sk-wire-test")
    );
    let first = &requests[0];
    assert_eq!(first["store"], false);
    assert!(first["instructions"].as_str().unwrap().len() > 100);
    let input = requests[1]["input"].as_array().unwrap();
    let kinds: Vec<&str> = input
        .iter()
        .map(|i| i["type"].as_str().or(i["role"].as_str()).unwrap_or("?"))
        .collect();
    let reasoning = input.iter().find(|i| i["type"] == "reasoning").unwrap();
    assert_eq!(reasoning["encrypted_content"], "enc-mock-1-0", "{kinds:?}");
    let call = input.iter().find(|i| i["type"] == "function_call").unwrap();
    assert_eq!(call["call_id"], "call_1");
    let output = input
        .iter()
        .find(|i| i["type"] == "function_call_output")
        .unwrap();
    assert!(
        output["output"].as_str().unwrap().contains("hi-from-bash"),
        "{output}"
    );
    assert!(usages(&env)[1]["cacheReadTokens"].as_u64().unwrap() > 0);
}

#[test]
fn the_messages_api_busy_529_and_rate_limited_429_are_retried() {
    let script = r#"
responses:
  - behaviour: overloaded
  - behaviour: rate_limit
    retry_after: 0.05
  - text: "Answered after two retries."
"#;
    let (_env, mock, out) = run_on("anthropic", script);
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert_eq!(out.stdout.trim(), "Answered after two retries.");
    assert_eq!(mock.requests().len(), 3);
}

#[test]
fn a_messages_stream_cut_inside_a_tool_use_block_is_retried_and_the_run_goes_on() {
    let script = r#"
responses:
  - behaviour: stream_disconnect
    text: "Let me look at the notes file now."
    tool_calls: [{ id: call_9, name: bash, arguments: { command: "cat notes.txt", description: "read" } }]
  - text: "Recovered."
"#;
    let (_env, mock, out) = run_on("anthropic", script);
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert_eq!(out.stdout.trim(), "Recovered.");
    assert_eq!(mock.requests().len(), 2);
}

#[test]
fn api_chooses_the_wire_of_a_base_url_server_and_config_dump_says_it() {
    let env = Env::new();
    let mock = Mock::start("responses:\n  - text: \"Over the Messages API.\"\n");
    let out = run(env
        .keel_bare()
        .args(["--base-url", &mock.base_url(), "--api", "messages"])
        .args(["run", "hi"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert_eq!(out.stdout.trim(), "Over the Messages API.");
    let body = &mock.requests()[0];
    // The Messages shape: the system prompt at the top level, content as blocks, no
    // chat-completions `stream_options`.
    assert!(body["system"].is_string(), "{body}");
    assert!(body.get("stream_options").is_none(), "{body}");
    assert_eq!(body["messages"][0]["content"][0]["type"], "text");
    assert_eq!(
        header(&mock, 0, "anthropic-version").as_deref(),
        Some("2023-06-01")
    );
    let dump = run(env
        .keel_bare()
        .args(["--base-url", "http://127.0.0.1:9", "--api", "responses"])
        .args(["config", "dump"]));
    assert!(
        dump.stdout.contains(
            "endpoint.api = \"responses\"  # requests go to http://127.0.0.1:9/responses"
        ),
        "{}",
        dump.stdout
    );
    // An unknown wire is refused by name before anything runs.
    let bad = run(env.keel_bare().args(["--api", "grpc", "run", "hi"]));
    assert_eq!(bad.code, Some(2), "{}", bad.stderr);
    assert!(bad.stderr.contains("grpc"), "{}", bad.stderr);
}

/// Anthropic's own models: `[models.NAME] reasoning = true` with a `thinking_budget` sends
/// `thinking {type: enabled, budget_tokens}` (kept under max_tokens); an unknown model without
/// them sends no `thinking`, and DeepSeek's models send none of the budget.
#[test]
fn a_claude_model_thinks_with_the_budget_its_table_gives() {
    let env = Env::new();
    std::fs::write(
        env.home.join("config.toml"),
        "[models.\"claude-test\"]\nreasoning = true\nthinking_budget = 2048\nmax_output = 16000\n\
         [models.\"claude-small\"]\nreasoning = true\nthinking_budget = 9000\nmax_output = 4096\n",
    )
    .unwrap();
    let turn = |model: &str| {
        let mock = Mock::start("responses:\n  - text: \"ok\"\n");
        let out = run(env
            .keel_bare()
            .env("MY_KEY", "sk-wire-test")
            .args(["--provider", "anthropic", "--base-url", &mock.base_url()])
            .args(["--api-key-env", "MY_KEY", "--model", model])
            .args(["run", "hi"]));
        assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
        mock.requests()[0].clone()
    };
    let body = turn("claude-test");
    assert_eq!(
        body["thinking"],
        serde_json::json!({"type": "enabled", "budget_tokens": 2048}),
        "{body}"
    );
    assert_eq!(body["max_tokens"], 16000);
    let body = turn("claude-small");
    assert_eq!(body["thinking"]["budget_tokens"], 4095, "{body}");
    let body = turn("claude-unknown");
    assert!(body.get("thinking").is_none(), "{body}");
    let body = turn("deepseek-v4-flash");
    assert_eq!(
        body["thinking"],
        serde_json::json!({"type": "enabled"}),
        "{body}"
    );
}
