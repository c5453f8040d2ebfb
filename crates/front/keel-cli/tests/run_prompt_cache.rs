//! End-to-end prompt-cache stability: across a 10-step scripted task (and a cold resume after
//! it), every request `keel` sends is the previous request plus new messages, byte for byte,
//! and everything but `messages` (system prompt position, tools, model, call config) is
//! identical. Request bodies are captured byte for byte by a loopback tap in front of the mock
//! server and snapshotted (first request whole, then each request's new messages), with temp
//! paths redacted.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use pretty_assertions::assert_eq;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use support::*;

const TEN_STEPS: &str = r##"
responses:
  - reasoning: "Start by looking around the project."
    text: "Let me look at the project."
    tool_calls:
      - { id: s1_glob, name: glob, arguments: { pattern: "**/*" } }
  - tool_calls:
      - { id: s2_read_a, name: read, arguments: { file_path: src/a.txt } }
      - { id: s2_read_b, name: read, arguments: { path: src/b.txt } }
  - reasoning: "Search for the marker across files."
    tool_calls:
      - { id: s3_grep, name: grep, arguments: { pattern: "TODO" } }
  - tool_calls:
      - { id: s4_bash, name: bash, arguments: { command: "grep -c . src/a.txt src/b.txt", description: "count lines" } }
  - text: "Writing the notes file."
    tool_calls:
      - { id: s5_write, name: write, arguments: { path: notes.md, content: "# Notes\n\n- a has a TODO\n" } }
  - tool_calls:
      - { id: s6_edit, name: edit, arguments: { path: src/a.txt, old_string: "TODO fix", new_string: "fixed" } }
  - tool_calls:
      - { id: s7_todo, name: todo_write, arguments: { todos: [{ content: "Fix a", status: completed }, { content: "Check b", status: in_progress }] } }
  - reasoning: "Check b with an offset read."
    tool_calls:
      - { id: s8_read, name: read, arguments: { file_path: src/b.txt, offset: 2, limit: 1 } }
  - tool_calls:
      - { id: s9_bash, name: bash, arguments: { command: "printf 'line one\\nline two\\n'; echo done >&2" } }
  - text: "All done: a is fixed, notes written."
"##;

/// Redact the temp directory so snapshots are stable.
fn redact(value: &Value, env: &Env) -> Value {
    let text = serde_json::to_string(value).unwrap();
    let text = text
        .replace(&env.ws.display().to_string(), "[WS]")
        .replace(&env.root().display().to_string(), "[ROOT]");
    let root_canon = env.root().canonicalize().unwrap().display().to_string();
    let text = text.replace(&root_canon, "[ROOT]");
    serde_json::from_str(&text).unwrap()
}

/// A request body split into its top-level fields and its messages, all as the raw bytes
/// `keel` sent.
struct RawRequest<'a> {
    fields: BTreeMap<&'a str, &'a RawValue>,
    messages: Vec<&'a RawValue>,
}

fn split(body: &[u8]) -> RawRequest<'_> {
    let text = std::str::from_utf8(body).unwrap();
    let fields: BTreeMap<&str, &RawValue> = serde_json::from_str(text).unwrap();
    let messages: Vec<&RawValue> = serde_json::from_str(fields["messages"].get()).unwrap();
    RawRequest { fields, messages }
}

/// Request `i` extends request `i - 1`: same bytes for every field but `messages`, and the
/// previous `messages` array is a byte prefix of this one. Returns the new messages.
fn assert_extends(prev: &RawRequest<'_>, cur: &RawRequest<'_>, i: usize) -> Vec<Value> {
    let keys = |r: &RawRequest<'_>| {
        r.fields
            .keys()
            .map(|k| k.to_string())
            .collect::<Vec<String>>()
    };
    assert_eq!(
        keys(cur),
        keys(prev),
        "request {i}: top-level fields changed"
    );
    for (key, raw) in &cur.fields {
        if *key != "messages" {
            assert_eq!(
                raw.get(),
                prev.fields[key].get(),
                "request {i}: `{key}` changed"
            );
        }
    }
    assert!(
        cur.messages.len() > prev.messages.len(),
        "request {i} adds no message"
    );
    for (j, (a, b)) in prev.messages.iter().zip(&cur.messages).enumerate() {
        assert_eq!(
            b.get(),
            a.get(),
            "request {i}: message {j} differs from the previous request's"
        );
    }
    let (p, c) = (prev.fields["messages"].get(), cur.fields["messages"].get());
    let open = &p[..p.len() - 1];
    assert!(
        c.starts_with(open) && c[open.len()..].starts_with(','),
        "request {i}: messages are not a byte prefix extension"
    );
    cur.messages[prev.messages.len()..]
        .iter()
        .map(|m| serde_json::from_str(m.get()).unwrap())
        .collect()
}

#[test]
fn every_request_extends_the_previous_one_byte_for_byte() {
    let env = Env::new();
    env.write("src/a.txt", "alpha\nTODO fix this\n");
    env.write("src/b.txt", "beta\nsecond\nthird\n");
    // glob lists newest first: make the order not depend on the clock's granularity.
    let older = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
    std::fs::File::options()
        .write(true)
        .open(env.ws.join("src/a.txt"))
        .unwrap()
        .set_modified(older)
        .unwrap();
    let mock = Mock::start_tapped(TEN_STEPS);
    let out =
        run(env
            .keel(&mock.base_url())
            .args(["--approval", "auto", "run", "tidy up the project"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert_eq!(out.stdout, "All done: a is fixed, notes written.\n");
    assert_eq!(mock.remaining(), 0);

    let raw = mock.raw_requests();
    assert_eq!(raw.len(), 10, "ten steps, ten requests");
    // The tap saw exactly what the mock parsed.
    let parsed: Vec<Value> = raw
        .iter()
        .map(|b| serde_json::from_slice(b).unwrap())
        .collect();
    assert_eq!(parsed, mock.requests());

    let requests: Vec<RawRequest<'_>> = raw.iter().map(|b| split(b)).collect();
    let mut deltas = Vec::new();
    for i in 1..requests.len() {
        let added = assert_extends(&requests[i - 1], &requests[i], i);
        deltas.push(json!({"request": i, "new_messages": added}));
    }
    assert_eq!(parsed[0]["messages"][0]["role"], "system");
    for p in &parsed {
        assert_wire_valid(p);
    }

    // The log agrees: the header was logged once, and the mock's prompt-cache simulation saw a
    // shared prefix on every later request.
    let events = load_consistent(&env.only_session());
    assert_eq!(
        of_type(&events, "request/header").len(),
        1,
        "system prompt and tools never changed"
    );
    let usage: Vec<u64> = of_type(&events, "assistant/message")
        .iter()
        .map(|m| m["data"]["usage"]["cacheReadTokens"].as_u64().unwrap_or(0))
        .collect();
    assert_eq!(usage.len(), 10);
    assert!(
        usage[1..].iter().all(|&hit| hit > 0),
        "cache hits per step: {usage:?}"
    );

    insta::assert_json_snapshot!(
        "ten_step_requests",
        json!({ "first_request": redact(&parsed[0], &env), "later_requests": redact(&Value::Array(deltas), &env) })
    );

    // A cold resume rebuilds the next request from the log: still a byte-prefix extension of
    // the last request of the first process (plus the final answer and the new prompt).
    let again = Mock::start_tapped("responses:\n  - text: \"Nothing more to do.\"\n");
    let out = run(env.keel(&again.base_url()).args([
        "--approval",
        "auto",
        "resume",
        &session_id(&env.only_session()),
        "anything else?",
    ]));
    assert_eq!(out.code, Some(0), "resume stderr:\n{}", out.stderr);
    let resumed = again.raw_requests();
    assert_eq!(resumed.len(), 1);
    let added = assert_extends(&requests[9], &split(&resumed[0]), 10);
    assert_eq!(
        added,
        vec![
            json!({"role": "assistant", "content": "All done: a is fixed, notes written."}),
            json!({"role": "user", "content": "anything else?"}),
        ]
    );
}

/// The tools dsh 0.2.1-rc.2 offers by default (its first request, headless), but `read_image`,
/// which keel offers to a model that reads images only: keel offers every one of them from the
/// first request, when what they need is there (`web_search` a search endpoint, `skill` a skill).
const DSH_0_2_DEFAULT_TOOLS: [&str; 24] = [
    "read",
    "write",
    "edit",
    "glob",
    "grep",
    "bash",
    "working_directory",
    "todo_write",
    "exit_plan_mode",
    "job_output",
    "job_list",
    "job_kill",
    "subagent",
    "subagent_fork",
    "send_message",
    "list_agents",
    "interrupt_agent",
    "workflow",
    "skill",
    "web_fetch",
    "web_search",
    "create_goal",
    "get_goal",
    "update_goal",
];

/// The fixed part of every request (system prompt + tool schemas) with dsh 0.2's whole default
/// tool set offered stays under 12 KB (dsh 0.2: 22.3 KB), and the tool list is the same in the
/// second request as in the first (nothing appears mid-session: the byte-prefix holds).
#[test]
fn the_default_request_offers_dsh_0_2s_tools_in_under_12_kb() {
    let env = Env::new();
    let mock = Mock::start(
        r#"
responses:
  - tool_calls: [{ id: l1, name: list_agents, arguments: {} }]
  - text: "No agents."
"#,
    );
    // As against DeepSeek's own endpoint: web_search has its endpoint, web_fetch is on.
    std::fs::write(
        env.home.join("config.toml"),
        format!(
            "[[plugins]]\nid = \"web\"\n[plugins.config]\nsearch_base_url = \"{}\"\nfetch = true\n",
            mock.base_url()
        ),
    )
    .unwrap();
    let skill = env.home.join("skills/release-notes");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: release-notes\ndescription: Write release notes from the git log.\n---\nRead the log.\n",
    )
    .unwrap();
    let out = run(env.keel(&mock.base_url()).args(["run", "who is working?"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0]["tools"], requests[1]["tools"]);

    let tools = &requests[0]["tools"];
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    for name in DSH_0_2_DEFAULT_TOOLS {
        assert!(names.contains(&name), "{name} is not offered: {names:?}");
    }
    let system = &requests[0]["messages"][0];
    assert_eq!(system["role"], "system");
    let bytes = serde_json::to_string(&system["content"]).unwrap().len()
        + serde_json::to_string(tools).unwrap().len();
    assert!(
        bytes <= 12_000,
        "system prompt + schemas: {bytes} B over 12,000"
    );
    insta::assert_json_snapshot!("default_tools", redact(tools, &env));
}
