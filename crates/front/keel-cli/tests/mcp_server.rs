//! `keel mcp-server` driven by a real MCP client nobody here wrote: the official TypeScript
//! SDK's `Client` over `StdioClientTransport` (crates/plugins/keel-mcp/tests/node, pinned in its
//! package-lock.json), scripted by `keel_server_client.mjs`. The model is the loopback mock;
//! files, sessions and the keel binary are real.
//!
//! Needs `node` and `npm`: the node modules are installed once (`npm ci`) when missing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use support::{Env, Mock, ensure_node_modules, load_consistent, of_type, turn_end_reasons};

/// Run the node client's `scenario` against `keel --cwd WS <global> mcp-server <own>` in
/// `env`; returns its JSON report.
fn client(env: &Env, scenario: &str, global: &[String], own: &[String]) -> Value {
    let dir = ensure_node_modules();
    let mut args: Vec<String> = vec!["--cwd".into(), env.ws.display().to_string()];
    args.extend(global.iter().cloned());
    args.push("mcp-server".into());
    args.extend(own.iter().cloned());
    let mut cmd = Command::new("node");
    cmd.arg(dir.join("keel_server_client.mjs"))
        .arg(scenario)
        .current_dir(&env.ws)
        .env("KEEL_MCP_COMMAND", env!("CARGO_BIN_EXE_keel"))
        .env("KEEL_MCP_ARGS", serde_json::to_string(&args).unwrap())
        .env("KEEL_HOME", &env.home)
        .env("HOME", env.root())
        .env("TMPDIR", env.root().join("tmp"))
        .env("DEEPSEEK_API_KEY", support::API_KEY)
        .env_remove("DEEPSEEK_BASE_URL")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null());
    let out = support::run(&mut cmd);
    assert_eq!(
        out.code,
        Some(0),
        "the node client failed\nstdout:\n{}\nstderr:\n{}",
        out.stdout,
        out.stderr
    );
    let line = out.stdout.lines().last().unwrap_or_default();
    let report: Value = serde_json::from_str(line).unwrap_or_else(|e| {
        panic!(
            "the node client's report is not JSON ({e})\nstdout:\n{}\nstderr:\n{}",
            out.stdout, out.stderr
        )
    });
    // keel's stdout held nothing but protocol messages.
    assert_eq!(
        report["transportErrors"],
        serde_json::json!([]),
        "stderr:\n{}",
        out.stderr
    );
    report
}

fn text(call: &Value, i: usize) -> &str {
    call["result"]["content"][i]["text"]
        .as_str()
        .unwrap_or_default()
}

/// The session file of `id`.
fn session_file(env: &Env, id: &str) -> PathBuf {
    env.session_files()
        .into_iter()
        .find(|p| support::session_id(p) == id)
        .unwrap_or_else(|| panic!("no session file for {id}"))
}

/// Texts of the `user/message` events a human typed, in order.
fn user_texts(events: &[Value]) -> Vec<String> {
    of_type(events, "user/message")
        .iter()
        .filter(|e| e["data"]["source"]["kind"] == "user")
        .filter_map(|e| {
            e["data"]["content"]
                .as_array()
                .and_then(|c| c.iter().find_map(|b| b["text"].as_str()))
                .map(str::to_owned)
        })
        .collect()
}

const SCRIPT: &str = r#"
responses:
  - match: { last_user_contains: "write hello" }
    text: "Writing the file."
    tool_calls:
      - { name: write, arguments: { path: hello.txt, content: "hello from keel\n" } }
  - match: { last_user_contains: "write hello" }
    text: "I wrote hello.txt."
  - match: { last_user_contains: "second question" }
    text: "The second answer."
  - match: { last_user_contains: "stall please" }
    behaviour: stall
    text: "I am thinking about this for a very long time, and then some more."
  - match: { last_user_contains: "concurrent task" }
    text: "Concurrent answer."
  - match: { last_user_contains: "after cancel" }
    text: "Still serving."
"#;

/// Tools and schemas; a task with a tool call; a reply in its session; progress; a stalled
/// call cancelled while a concurrent call is answered; the server still serving afterwards.
#[test]
fn a_real_mcp_client_delegates_replies_and_cancels() {
    let env = Env::new();
    let mock = Mock::start(SCRIPT);
    let report = client(&env, "main", &["--base-url".into(), mock.base_url()], &[]);

    // The two tools and their schemas.
    let tools = report["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, ["keel", "keel_reply"]);
    let keel = &tools[0];
    assert_eq!(
        keel["inputSchema"]["required"],
        serde_json::json!(["prompt"])
    );
    let props: Vec<&String> = keel["inputSchema"]["properties"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    for p in ["prompt", "cwd", "sandbox", "approval", "model"] {
        assert!(props.iter().any(|k| *k == p), "keel lacks {p}: {props:?}");
    }
    assert_eq!(
        keel["inputSchema"]["properties"]["sandbox"]["enum"],
        serde_json::json!(["read-only", "workspace-write", "full-access"])
    );
    assert!(
        keel["description"]
            .as_str()
            .unwrap()
            .contains("Approval cannot be asked for over MCP")
    );
    assert_eq!(
        tools[1]["inputSchema"]["required"],
        serde_json::json!(["session_id", "prompt"])
    );
    for t in tools {
        assert_eq!(
            t["outputSchema"]["required"],
            serde_json::json!(["sessionId", "finalText", "turnEnd"])
        );
    }
    assert_eq!(report["serverVersion"]["name"], "keel");

    // The task ran: the tool call wrote the file, the answer names the session.
    let first = &report["first"];
    assert_eq!(first["result"]["isError"], false, "{first}");
    assert_eq!(text(first, 0), "I wrote hello.txt.");
    let sid = first["result"]["structuredContent"]["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        first["result"]["structuredContent"],
        serde_json::json!({"sessionId": sid, "finalText": "I wrote hello.txt.", "turnEnd": "completed"})
    );
    assert!(text(first, 1).contains(&sid), "{first}");
    assert_eq!(
        std::fs::read_to_string(env.ws.join("hello.txt"))
            .ok()
            .as_deref(),
        Some("hello from keel\n"),
        "{first}"
    );
    let progress: Vec<&str> = first["progress"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        progress.first(),
        Some(&format!("session {sid} started").as_str())
    );
    for expected in ["turn 1 step 1", "turn 1 step 2", "turn ended: completed"] {
        assert!(
            progress.contains(&expected),
            "{expected:?} not in {progress:?}"
        );
    }
    assert!(
        progress.iter().any(|m| m.starts_with("→ write ")),
        "{progress:?}"
    );
    assert!(progress.iter().any(|m| m.starts_with("✓ ")), "{progress:?}");

    // The reply continued the same session: its log has both turns.
    let reply = &report["reply"];
    assert_eq!(reply["result"]["isError"], false, "{reply}");
    assert_eq!(text(reply, 0), "The second answer.");
    assert_eq!(reply["result"]["structuredContent"]["sessionId"], sid);
    assert!(!reply["progress"].as_array().unwrap().is_empty());
    let events = load_consistent(&session_file(&env, &sid));
    assert_eq!(
        turn_end_reasons(&events),
        [
            serde_json::json!({"kind": "completed"}),
            serde_json::json!({"kind": "completed"})
        ]
    );
    assert_eq!(
        user_texts(&events),
        ["write hello into hello.txt", "second question"]
    );

    // A concurrent call was answered in its own session while the stalled one ran.
    let concurrent = &report["concurrent"];
    assert_eq!(text(concurrent, 0), "Concurrent answer.", "{concurrent}");
    let stalled = report["cancelledSession"].as_str().unwrap();
    assert_ne!(
        concurrent["result"]["structuredContent"]["sessionId"],
        stalled
    );
    assert_ne!(stalled, sid);

    // The cancelled call: the client gave up on it, keel ended its turn aborted, and the same
    // session took the next call.
    let cancelled = &report["cancelled"];
    assert!(cancelled["error"].is_object(), "{cancelled}");
    let after = &report["afterCancel"];
    assert_eq!(after["result"]["isError"], false, "{after}");
    assert_eq!(text(after, 0), "Still serving.");
    assert_eq!(after["result"]["structuredContent"]["sessionId"], stalled);
    let events = load_consistent(&session_file(&env, stalled));
    let reasons = turn_end_reasons(&events);
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    assert_eq!(reasons[0]["kind"], "aborted", "{reasons:?}");
    assert_eq!(reasons[1]["kind"], "completed", "{reasons:?}");
    assert_eq!(user_texts(&events), ["stall please", "after cancel"]);
    assert_eq!(mock.remaining(), 0);
}

/// An unknown session, arguments that do not fit the schema and a missing cwd are error results
/// with a clear message; an unknown tool is an MCP error (-32602).
#[test]
fn bad_input_is_refused_clearly() {
    let env = Env::new();
    let mock = Mock::start("responses: []");
    let report = client(
        &env,
        "bad-input",
        &["--base-url".into(), mock.base_url()],
        &[],
    );
    assert_eq!(report["tools"], serde_json::json!(["keel", "keel_reply"]));

    let unknown = &report["unknownSession"];
    assert_eq!(unknown["result"]["isError"], true, "{unknown}");
    let message = text(unknown, 0);
    assert!(
        message.contains("no session \"00000000-no-such-session\"")
            && message.contains("sessionId of an earlier keel answer"),
        "{message}"
    );

    // Arguments that do not fit the schema are error results (MCP 2025-11-25: the calling
    // model reads them and corrects itself), naming the argument.
    for (case, needle) in [
        ("missingPrompt", "missing required argument \"prompt\""),
        ("badSandbox", "unknown sandbox \"yolo\""),
        ("wrongType", "\"session_id\" must be a string"),
    ] {
        let call = &report[case];
        assert!(call.get("error").is_none(), "{case}: {call}");
        assert_eq!(call["result"]["isError"], true, "{case}: {call}");
        let message = text(call, 0);
        assert!(message.contains(needle), "{case}: {message}");
    }
    // An unknown tool stays a protocol error.
    let call = &report["unknownTool"];
    assert_eq!(call["error"]["code"], -32602, "{call}");
    let message = call["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("unknown tool \"no_such_tool\""),
        "{message}"
    );

    let bad_cwd = &report["badCwd"];
    assert_eq!(bad_cwd["result"]["isError"], true, "{bad_cwd}");
    assert!(text(bad_cwd, 0).contains("cwd"), "{bad_cwd}");
    // Nothing ran, and no session was left behind.
    assert!(mock.requests().is_empty());
    assert!(env.session_files().is_empty(), "{:?}", env.session_files());
}

/// Every optional argument of `keel`: the session runs in `cwd` with the sandbox, approval
/// and model asked for; the model is a script (`mcp-server --script`).
#[test]
fn a_call_runs_with_its_own_cwd_sandbox_approval_and_model() {
    let env = Env::new();
    env.write("sub/marker.txt", "here\n");
    let script = env.root().join("script.yaml");
    std::fs::write(
        &script,
        "responses:\n  - match: { last_user_contains: \"where are you\" }\n    text: \"In sub.\"\n",
    )
    .unwrap();
    let report = client(
        &env,
        "options",
        &[],
        &["--script".into(), script.display().to_string()],
    );
    let call = &report["call"];
    assert_eq!(call["result"]["isError"], false, "{call}");
    assert_eq!(text(call, 0), "In sub.");
    let sid = call["result"]["structuredContent"]["sessionId"]
        .as_str()
        .unwrap();
    let path = session_file(&env, sid);
    let header: Value = serde_json::from_str(
        std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(header["cwd"], env.ws.join("sub").display().to_string());
    assert_eq!(header["origin"], "mcp");
    let events = load_consistent(&path);
    let data = |t: &str| of_type(&events, t).last().map(|e| e["data"].clone());
    assert_eq!(data("sandbox/mode").unwrap()["mode"], "read-only");
    assert_eq!(data("approval/policy").unwrap()["policy"], "deny");
    assert_eq!(data("request/context").unwrap()["model"], "other-model");
}

/// A client that sends `protocolVersion` as a number gets an error answer at once (not a hang,
/// not a crash) and can initialize properly afterwards; a 2026-07-28 client is answered by
/// `server/discover`.
#[test]
fn a_bad_protocol_version_is_refused_at_once_and_discovery_answers() {
    use std::io::{BufRead, BufReader, Write};
    let env = Env::new();
    let script = env.root().join("script.yaml");
    std::fs::write(&script, "responses: []\n").unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_keel"))
        .arg("--cwd")
        .arg(&env.ws)
        .args(["mcp-server", "--script"])
        .arg(&script)
        .env("KEEL_HOME", &env.home)
        .env("HOME", env.root())
        .env("DEEPSEEK_API_KEY", support::API_KEY)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut ask = |msg: Value| -> Value {
        writeln!(stdin, "{msg}").unwrap();
        serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap()
    };
    let client = serde_json::json!({"name": "bad-client", "version": "1"});
    let bad = ask(
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": 2025, "capabilities": {}, "clientInfo": client}}),
    );
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    assert_eq!(bad["id"], 1, "{bad}");
    assert_eq!(
        bad["error"]["message"],
        "initialize: protocolVersion must be a version string such as \"2025-11-25\"; client \"bad-client\" sent 2025",
        "{bad}"
    );
    let meta = serde_json::json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": client,
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    let discover = ask(
        serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "server/discover",
        "params": {"_meta": meta}}),
    );
    let versions = discover["result"]["supportedVersions"].as_array().unwrap();
    assert!(versions.contains(&"2026-07-28".into()), "{discover}");
    let ok = ask(
        serde_json::json!({"jsonrpc": "2.0", "id": 3, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": client}}),
    );
    assert_eq!(ok["result"]["protocolVersion"], "2025-11-25", "{ok}");
    drop(stdin);
    let _ = child.wait();
}
