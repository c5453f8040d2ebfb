//! MCP servers' tools through the real `keel` binary and the loopback mock model, against the
//! real `@modelcontextprotocol/server-everything` from npm (pinned in
//! `crates/plugins/keel-mcp/tests/node/package.json`, installed by `.ci/run` with `npm ci`, or by the
//! first test that needs it), plus a small
//! misbehaving server for the bad-input cases.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod support;

use serde_json::Value;
use std::path::PathBuf;
use support::{Env, Mock, load_consistent, node_bin, of_type, run, tool_results};

fn everything() -> String {
    node_bin("mcp-server-everything").display().to_string()
}

/// The misbehaving server of the bad-input tests (`tests/node/bad-server.mjs`).
fn bad_server() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../plugins/keel-mcp/tests/node/bad-server.mjs")
        .canonicalize()
        .unwrap()
        .display()
        .to_string()
}

fn config(env: &Env, toml: &str) {
    env.write(".keel/config.toml", toml);
}

fn tools_of(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|ts| {
            ts.iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn result_of(events: &[Value], id: &str) -> (String, bool) {
    let r = tool_results(events)
        .into_iter()
        .find(|r| r.0 == id)
        .unwrap_or_else(|| panic!("no result for {id}"));
    (r.1, r.2)
}

#[test]
fn a_task_calls_mcp_tools_and_gets_text_structured_image_and_link_results() {
    let env = Env::new();
    config(
        &env,
        &format!(
            "[mcp_servers.everything]\ncommand = {:?}\nargs = [\"stdio\"]\n",
            everything()
        ),
    );
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "GO" }
    tool_calls:
      - { id: c1, name: mcp__everything__echo, arguments: { message: "hello over mcp" } }
      - { id: c2, name: mcp__everything__get-sum, arguments: { a: 2, b: 40 } }
  - match: { last_tool_result_contains: "42" }
    tool_calls:
      - { id: c3, name: mcp__everything__get-structured-content, arguments: { location: "New York" } }
      - { id: c4, name: mcp__everything__get-tiny-image, arguments: {} }
      - { id: c5, name: mcp__everything__get-resource-links, arguments: { count: 2 } }
  - text: "DONE"
"#,
    );
    let out = run(env.keel(&mock.base_url()).args(["run", "GO"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    let events = load_consistent(&env.only_session());
    let servers = of_type(&events, "mcp/server");
    assert_eq!(servers.len(), 1);
    assert_eq!(servers[0]["data"]["status"], "ready");
    let (echo, err) = result_of(&events, "c1");
    assert!(!err && echo.contains("hello over mcp"), "{echo}");
    let (sum, _) = result_of(&events, "c2");
    assert!(sum.contains("42"), "{sum}");
    let (structured, _) = result_of(&events, "c3");
    assert!(structured.contains("temperature"), "{structured}");
    let (image, _) = result_of(&events, "c4");
    assert!(image.contains("[image image/png saved to "), "{image}");
    let saved = image
        .split("saved to ")
        .nth(1)
        .unwrap()
        .split(']')
        .next()
        .unwrap();
    let bytes = std::fs::read(saved).unwrap();
    assert_eq!(
        &bytes[1..4],
        b"PNG",
        "a real PNG on disk, not inline in the log"
    );
    let (links, _) = result_of(&events, "c5");
    assert!(links.contains("[resource link "), "{links}");
    // Every request offered the same tools in the same order (prefix-stable).
    let requests = mock.requests();
    assert_eq!(requests.len(), 3);
    let first = tools_of(&requests[0]);
    assert!(first.contains(&"mcp__everything__echo".to_owned()));
    let mcp: Vec<&String> = first.iter().filter(|n| n.starts_with("mcp__")).collect();
    let mut sorted = mcp.clone();
    sorted.sort();
    assert_eq!(mcp, sorted, "sorted by name");
    for r in &requests[1..] {
        assert_eq!(tools_of(r), first);
        assert_eq!(
            r["tools"], requests[0]["tools"],
            "byte-identical tool schemas"
        );
    }
}

#[test]
fn secrets_stay_out_of_a_stdio_server_unless_its_env_names_them() {
    let env = Env::new();
    config(
        &env,
        &format!(
            "[mcp_servers.everything]\ncommand = {:?}\nargs = [\"stdio\"]\nenv = {{ FORWARDED_TOKEN = \"given-on-purpose\" }}\n",
            everything()
        ),
    );
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "GO" }
    tool_calls:
      - { id: c1, name: mcp__everything__get-env, arguments: {} }
  - text: "DONE"
"#,
    );
    let out = run(env
        .keel(&mock.base_url())
        .env("MY_SECRET_TOKEN", "leak-me-not")
        .env("PLAIN_SETTING", "visible")
        .args(["run", "GO"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    let (envs, _) = result_of(&load_consistent(&env.only_session()), "c1");
    assert!(envs.contains("PLAIN_SETTING"), "{envs}");
    assert!(
        envs.contains("given-on-purpose"),
        "explicit env reaches it: {envs}"
    );
    assert!(!envs.contains("leak-me-not"), "{envs}");
    assert!(!envs.contains("DEEPSEEK_API_KEY"), "{envs}");
}

#[test]
fn a_server_that_never_answers_initialize_times_out_and_the_run_completes() {
    let env = Env::new();
    config(
        &env,
        &format!(
            "[mcp_servers.mute]\ncommand = \"sh\"\nargs = [\"-c\", \"echo starting up >&2; exec sleep 60\"]\nstartup_timeout_sec = 1\n\n[mcp_servers.everything]\ncommand = {:?}\nargs = [\"stdio\"]\n",
            everything()
        ),
    );
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "GO" }
    tool_calls:
      - { id: c1, name: mcp__everything__echo, arguments: { message: "still works" } }
  - text: "DONE"
"#,
    );
    let started = std::time::Instant::now();
    let out = run(env.keel(&mock.base_url()).args(["run", "GO"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        out.stderr.contains("MCP server 'mute'") && out.stderr.contains("startup_timeout_sec"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("starting up"),
        "stderr tail: {}",
        out.stderr
    );
    assert_eq!(
        out.stderr.matches("MCP server 'mute'").count(),
        1,
        "said once"
    );
    // Not a speed assertion: a hang guard that it did not wait for the 60 s sleep.
    assert!(started.elapsed() < std::time::Duration::from_secs(50));
    let events = load_consistent(&env.only_session());
    let (echo, _) = result_of(&events, "c1");
    assert!(echo.contains("still works"));
    assert!(
        !tools_of(&mock.requests()[0])
            .iter()
            .any(|t| t.starts_with("mcp__mute__"))
    );
}

#[test]
fn a_tools_list_changed_takes_effect_at_the_next_turn_boundary_as_a_header_change() {
    let env = Env::new();
    let server = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../plugins/keel-mcp/tests/node/dynamic-server.mjs")
        .canonicalize()
        .unwrap();
    support::ensure_node_modules();
    config(
        &env,
        &format!(
            "[mcp_servers.dyn]\ncommand = \"node\"\nargs = [{:?}]\n",
            server.display()
        ),
    );
    // Turn 1 calls `unlock` (the server registers `secret` and notifies mid-turn); its answer
    // stalls a little so the re-list is surely done before the turn ends. Turn 2 (a follow-up
    // from stdin) sees and calls `secret`.
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "FIRST" }
    tool_calls:
      - { id: u1, name: mcp__dyn__unlock, arguments: {} }
  - match: { last_tool_result_contains: "unlocked" }
    text: "turn one done"
    behaviour: stall
    stall_ms: 500
  - match: { last_user_contains: "SECOND" }
    tool_calls:
      - { id: s1, name: mcp__dyn__secret, arguments: {} }
  - match: { last_tool_result_contains: "7421" }
    text: "DONE"
"#,
    );
    let mut running = support::spawn(
        env.keel(&mock.base_url())
            .args(["run", "--inbox-stdin", "FIRST"])
            .stdin(std::process::Stdio::piped()),
    );
    {
        use std::io::Write;
        let mut stdin = running.take_stdin();
        writeln!(stdin, r#"{{"followup": "SECOND"}}"#).unwrap();
    }
    let out = running.wait();
    assert_eq!(out.code, Some(0), "{out:?}");
    let requests = mock.requests();
    assert_eq!(requests.len(), 4, "{out:?}");
    let secret = "mcp__dyn__secret".to_owned();
    // Mid-turn: the notification arrived during turn 1, whose requests keep their tools.
    assert_eq!(tools_of(&requests[0]), tools_of(&requests[1]));
    assert!(!tools_of(&requests[1]).contains(&secret));
    for r in &requests[2..] {
        assert!(tools_of(r).contains(&secret), "{:?}", tools_of(r));
    }
    let events = load_consistent(&env.only_session());
    let (answer, failed) = result_of(&events, "s1");
    assert!(!failed && answer.contains("the secret is 7421"), "{answer}");
    // Logged: a second request header, after the second turn's start, and the change.
    let turns: Vec<u64> = of_type(&events, "turn/start")
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    let headers = of_type(&events, "request/header");
    assert_eq!(headers.len(), 2, "one header per tool set");
    assert!(headers[1]["seq"].as_u64().unwrap() > turns[1]);
    let names = |h: &Value| -> Vec<String> {
        h["data"]["header"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert!(!names(headers[0]).contains(&secret));
    assert!(names(headers[1]).contains(&secret));
    let changes: Vec<&Value> = of_type(&events, "mcp/server")
        .into_iter()
        .filter(|e| e["data"]["status"] == "tools-changed")
        .collect();
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!(changes[0]["data"]["server"], "dyn");
    assert_eq!(changes[0]["data"]["tools"], 2);
}

#[test]
fn a_server_that_dies_mid_call_errors_that_call_and_is_restarted_for_the_next() {
    let env = Env::new();
    let marker = env.root().join("marker");
    // The wrapper records its pid so the test can kill the server mid-call.
    config(
        &env,
        &format!(
            "[mcp_servers.everything]\ncommand = \"sh\"\nargs = [\"-c\", \"echo $$ >> {}; exec {} stdio\"]\n",
            marker.display(),
            everything()
        ),
    );
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "GO" }
    tool_calls:
      - { id: c1, name: mcp__everything__trigger-long-running-operation, arguments: { duration: 30, steps: 3 } }
  - match: { last_tool_result_contains: "MCP server 'everything'" }
    tool_calls:
      - { id: c2, name: mcp__everything__echo, arguments: { message: "back again" } }
  - text: "DONE"
"#,
    );
    let running = support::spawn(env.keel(&mock.base_url()).args(["run", "GO"]));
    // Wait for the call to be under way, then kill the server.
    let deadline = std::time::Instant::now() + support::HANG_GUARD;
    loop {
        let started = env
            .session_files()
            .first()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .is_some_and(|t| t.contains("trigger-long-running-operation\",\"arguments"));
        if started && marker.exists() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the call never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let pid: i32 = std::fs::read_to_string(&marker)
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // SAFETY: kill(2) on a pid this test's server wrapper wrote.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    let out = running.wait();
    assert_eq!(out.code, Some(0), "{out:?}");
    let events = load_consistent(&env.only_session());
    let (first, failed) = result_of(&events, "c1");
    assert!(failed, "{first}");
    assert!(first.contains("MCP server 'everything'"), "{first}");
    let (second, failed) = result_of(&events, "c2");
    assert!(!failed && second.contains("back again"), "{second}");
    let starts = std::fs::read_to_string(&marker).unwrap().lines().count();
    assert_eq!(starts, 2, "restarted once");
}

#[test]
fn mcp_json_servers_expand_variables_and_a_bad_entry_is_named_and_skipped() {
    let env = Env::new();
    env.write(
        ".mcp.json",
        r#"{"mcpServers": {
                "everything": {"command": "${EVERYTHING_BIN}", "args": ["stdio"]},
                "legacy": {"type": "sse", "url": "http://127.0.0.1:9/sse"}
            }}"#,
    );
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "GO" }
    tool_calls:
      - { id: c1, name: mcp__everything__echo, arguments: { message: "from mcp.json" } }
  - text: "DONE"
"#,
    );
    let out = run(env
        .keel(&mock.base_url())
        .env("EVERYTHING_BIN", everything())
        .args(["run", "GO"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        out.stderr.contains("MCP server 'legacy'")
            && out.stderr.contains("unknown transport type 'sse'"),
        "{}",
        out.stderr
    );
    let (echo, _) = result_of(&load_consistent(&env.only_session()), "c1");
    assert!(echo.contains("from mcp.json"));
}

#[test]
fn bad_servers_get_clear_errors_and_the_session_continues() {
    let env = Env::new();
    config(
        &env,
        &format!(
            "[mcp_servers.bad]\ncommand = \"node\"\nargs = [{:?}]\n",
            bad_server()
        ),
    );
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "GO" }
    tool_calls:
      - { id: c1, name: mcp__bad__huge, arguments: {} }
  - match: { last_tool_result_contains: "HUGE-START" }
    tool_calls:
      - { id: c2, name: mcp__bad__garbage, arguments: {} }
  - match: { last_tool_result_contains: "MCP server 'bad'" }
    tool_calls:
      - { id: c3, name: mcp__bad__ok, arguments: {} }
  - text: "DONE"
"#,
    );
    let out = run(env.keel(&mock.base_url()).args(["run", "GO"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    // Skipped tools are named once: one with a schema keel cannot offer.
    assert!(
        out.stderr.contains("tool 'bad schema' is not offered")
            || out.stderr.contains("tool 'bad_schema' is not offered"),
        "{}",
        out.stderr
    );
    let names = tools_of(&mock.requests()[0]);
    let mcp: Vec<&String> = names
        .iter()
        .filter(|n| n.starts_with("mcp__bad__"))
        .collect();
    assert!(
        mcp.iter().all(|n| n.len() <= 64 && !n.contains(' ')),
        "{mcp:?}"
    );
    assert!(
        mcp.iter().any(|n| n.starts_with("mcp__bad__with_spaces")),
        "{mcp:?}"
    );
    assert!(
        mcp.iter().any(|n| n.len() == 64),
        "the 200-character name is bounded: {mcp:?}"
    );
    let events = load_consistent(&env.only_session());
    // 50 MB of text is spilled to a file, not put in the log.
    let (huge, _) = result_of(&events, "c1");
    assert!(huge.len() < 200_000, "{}", huge.len());
    let log_size = std::fs::metadata(env.only_session()).unwrap().len();
    assert!(log_size < 5_000_000, "{log_size}");
    // Garbage on stdout breaks only that call; the server is restarted for the next.
    let (garbage, failed) = result_of(&events, "c2");
    assert!(failed && garbage.contains("MCP server 'bad'"), "{garbage}");
    let (ok, failed) = result_of(&events, "c3");
    assert!(!failed && ok.contains("fine"), "{ok}");
}

#[test]
fn resources_are_listed_and_read_through_two_tools() {
    let env = Env::new();
    config(
        &env,
        &format!(
            "[mcp_servers.everything]\ncommand = {:?}\nargs = [\"stdio\"]\n",
            everything()
        ),
    );
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "GO" }
    tool_calls:
      - { id: r1, name: mcp_resources, arguments: {} }
      - { id: r2, name: mcp_read_resource, arguments: { server: everything, uri: "demo://resource/static/document/features.md" } }
      - { id: r3, name: mcp_read_resource, arguments: { server: nobody, uri: "x://y" } }
  - text: "DONE"
"#,
    );
    let out = run(env.keel(&mock.base_url()).args(["run", "GO"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    let names = tools_of(&mock.requests()[0]);
    assert!(
        names.contains(&"mcp_resources".to_owned())
            && names.contains(&"mcp_read_resource".to_owned())
    );
    let events = load_consistent(&env.only_session());
    let (list, _) = result_of(&events, "r1");
    assert!(
        list.contains("demo://resource/static/document/features.md"),
        "{list}"
    );
    let (doc, failed) = result_of(&events, "r2");
    assert!(!failed, "{doc}");
    let expected = std::fs::read_to_string(
        support::node_dir()
            .join("node_modules/@modelcontextprotocol/server-everything/dist/docs/features.md"),
    )
    .unwrap();
    let first_line = expected.lines().find(|l| !l.trim().is_empty()).unwrap();
    assert!(doc.contains(first_line), "{doc}");
    let (none, failed) = result_of(&events, "r3");
    assert!(
        failed && none.contains("no MCP server 'nobody' offers resources"),
        "{none}"
    );
}

/// The real filesystem server answers `read_text_file` with the file as text and again as
/// `structuredContent: {content}`: the model gets the text once, and a large result's
/// structured copy goes to a spill file, not whole into the session log.
#[test]
fn a_structured_result_reaches_the_model_once_and_a_large_one_stays_out_of_the_log() {
    let env = Env::new();
    env.write("small.txt", "alpha beta gamma\n");
    let big: String = (0..20_000)
        .map(|i| format!("line {i} of a big file\n"))
        .collect();
    env.write("big.txt", &big);
    config(
        &env,
        &format!(
            "[mcp_servers.files]\ncommand = {:?}\nargs = [{:?}]\n",
            node_bin("mcp-server-filesystem").display().to_string(),
            env.ws.display().to_string()
        ),
    );
    let small_path = env.ws.join("small.txt").display().to_string();
    let big_path = env.ws.join("big.txt").display().to_string();
    let mock = Mock::start(&format!(
        r#"
responses:
  - match: {{ last_user_contains: "GO" }}
    tool_calls:
      - {{ id: c1, name: mcp__files__read_text_file, arguments: {{ path: {small_path:?} }} }}
  - match: {{ last_tool_result_contains: "alpha" }}
    tool_calls:
      - {{ id: c2, name: mcp__files__read_text_file, arguments: {{ path: {big_path:?} }} }}
  - text: "DONE"
"#
    ));
    let out = run(env.keel(&mock.base_url()).args(["run", "GO"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    let requests = mock.requests();
    assert_eq!(requests.len(), 3);
    // What the model got for the small file: the text the server sent, once.
    let sent = support::assert_wire_valid(&requests[2]);
    let small = &sent.iter().find(|(id, _)| id == "c1").unwrap().1;
    assert_eq!(small.trim_end(), "alpha beta gamma", "{small}");
    // The big one is spilled like any long text: its preview ends in the file's own text.
    let large = &sent.iter().find(|(id, _)| id == "c2").unwrap().1;
    assert!(large.len() < 40_000, "{} bytes", large.len());
    assert!(!large.contains("structuredContent"), "{large}");
    assert_eq!(
        large.matches("line 19999 of a big file").count(),
        1,
        "{large}"
    );

    let session = env.only_session();
    let events = load_consistent(&session);
    let results = of_type(&events, "tool/result");
    let meta = |id: &str| {
        results
            .iter()
            .find(|e| e["data"]["message"]["content"][0]["toolCallId"] == id)
            .map(|e| e["data"]["meta"].clone())
            .unwrap()
    };
    // A small structured result stays in the log's meta; a large one is a spill file.
    assert_eq!(
        meta("c1")["structuredContent"]["content"],
        "alpha beta gamma\n"
    );
    let m = meta("c2");
    assert!(m.get("structuredContent").is_none(), "{m}");
    let file = m["structuredContentFile"].as_str().unwrap();
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    assert_eq!(saved["content"], big.as_str());
    assert!(m["structuredContentBytes"].as_u64().unwrap() > big.len() as u64);
    // No log line holds the big file (twice it was 2 x 500 KB).
    let longest = std::fs::read_to_string(&session)
        .unwrap()
        .lines()
        .map(str::len)
        .max()
        .unwrap();
    assert!(longest < 100_000, "a {longest}-byte log line");
}

/// A server that crashes on every call is restarted 3 times, and each message says what comes
/// next: the 4th failure says it is disabled, the 5th call is refused. A reply line over
/// 64 MiB fails its call at once (not at the tool timeout), naming the limit.
#[test]
fn crashes_are_counted_right_and_an_oversized_reply_fails_its_call_at_once() {
    let env = Env::new();
    config(
        &env,
        &format!(
            "[mcp_servers.crashy]\ncommand = \"node\"\nargs = [{0:?}]\n\n\
             [mcp_servers.big]\ncommand = \"node\"\nargs = [{0:?}]\ntool_timeout_sec = 120\n",
            bad_server()
        ),
    );
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "GO" }
    tool_calls:
      - { id: big, name: mcp__big__oversized, arguments: {} }
      - { id: c1, name: mcp__crashy__crash, arguments: {} }
      - { id: c2, name: mcp__crashy__crash, arguments: {} }
      - { id: c3, name: mcp__crashy__crash, arguments: {} }
      - { id: c4, name: mcp__crashy__crash, arguments: {} }
      - { id: c5, name: mcp__crashy__crash, arguments: {} }
  - text: "DONE"
"#,
    );
    let began = std::time::Instant::now();
    let out = run(env.keel(&mock.base_url()).args(["run", "GO"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        began.elapsed() < std::time::Duration::from_secs(100),
        "the oversized reply waited for the tool timeout"
    );
    let events = load_consistent(&env.only_session());
    let (big, failed) = result_of(&events, "big");
    assert!(failed && big.contains("over 64 MiB"), "{big}");
    for (id, needle) in [
        ("c1", "restarted on the next call (at most 3 more restarts)"),
        ("c2", "restarted on the next call (at most 2 more restarts)"),
        ("c3", "restarted on the next call (at most 1 more restart)"),
        (
            "c4",
            "broke 4 times (restarted 3 times); it is disabled for this session",
        ),
        ("c5", "is not available: its connection broke 4 times"),
    ] {
        let (text, failed) = result_of(&events, id);
        assert!(failed && text.contains(needle), "{id}: {text}");
    }
}
