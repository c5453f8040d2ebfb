//! `keel acp`'s session methods beyond new/load — `session/list`, `session/resume`,
//! `session/close`, the unstable `session/fork` — its config options (the model selector,
//! the mode again), and a refused call's single `failed` update: driven by raw JSON-RPC lines
//! and by acpx (npm, pinned in crates/front/keel-acp/tests/acpx), a client nobody here wrote.
//! The model is the loopback mock; sessions, files and the keel binary are real.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};
use support::{Env, Mock, load_consistent, of_type};

/// `keel acp` spoken to line by line.
struct Raw {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl Raw {
    /// `keel acp`, initialized.
    fn start(env: &Env, base_url: &str) -> Raw {
        let mut raw = Raw::spawn(env, base_url);
        let init = raw.request(
            0,
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        );
        assert!(init.get("result").is_some(), "{init}");
        raw
    }

    /// `keel acp`, not yet initialized.
    fn spawn(env: &Env, base_url: &str) -> Raw {
        let mut child = env
            .keel(base_url)
            .arg("acp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Raw {
            child,
            stdin,
            lines,
        }
    }

    fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(message.to_string().as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.exchange(id, method, params, |_| None).1
    }

    /// Send request `id`; until its answer, collect what else keel sends and answer keel's
    /// own requests with `answer` (no answer: left unanswered). Returns the notifications and
    /// requests seen, and the answer.
    fn exchange(
        &mut self,
        id: u64,
        method: &str,
        params: Value,
        mut answer: impl FnMut(&Value) -> Option<Value>,
    ) -> (Vec<Value>, Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let deadline = Instant::now() + support::HANG_GUARD;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
                        panic!("keel wrote a line that is not JSON ({e}): {line}")
                    });
                    if v["id"] == id && v.get("method").is_none() {
                        return (seen, v);
                    }
                    if v.get("method").is_some()
                        && v.get("id").is_some()
                        && let Some(result) = answer(&v)
                    {
                        self.send(&json!({"jsonrpc": "2.0", "id": v["id"], "result": result}));
                    }
                    seen.push(v);
                }
                Err(RecvTimeoutError::Timeout) => panic!("no answer to {method} ({id})"),
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("keel closed stdout before answering {method} ({id})")
                }
            }
        }
    }

    fn new_session(&mut self, id: u64, env: &Env) -> (String, Value) {
        let new = self.request(id, "session/new", json!({"cwd": env.ws, "mcpServers": []}));
        let sid = new["result"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("{new}"))
            .to_owned();
        (sid, new["result"].clone())
    }

    fn prompt(&mut self, id: u64, session: &str, text: &str) -> Value {
        let answer = self.request(
            id,
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
        );
        assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
        answer
    }

    fn close(mut self) {
        drop(self.stdin.take());
        let started = Instant::now();
        while self.child.try_wait().unwrap().is_none() {
            if started.elapsed() > support::HANG_GUARD {
                let _ = self.child.kill();
                panic!("keel acp did not exit after stdin closed");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The config option `id` of an answer's `configOptions`.
fn option<'a>(result: &'a Value, id: &str) -> &'a Value {
    result["configOptions"]
        .as_array()
        .unwrap_or_else(|| panic!("no configOptions: {result}"))
        .iter()
        .find(|o| o["id"] == id)
        .unwrap_or_else(|| panic!("no config option {id}: {result}"))
}

fn error_of(answer: &Value) -> (i64, String) {
    (
        answer["error"]["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("not an error: {answer}")),
        answer["error"]["message"].as_str().unwrap().to_owned(),
    )
}

/// The session file of `id`.
fn session_file(env: &Env, id: &str) -> std::path::PathBuf {
    env.session_files()
        .into_iter()
        .find(|p| support::session_id(p) == id)
        .unwrap_or_else(|| panic!("no session file of {id}"))
}

const CHECK_SCRIPT: &str = r#"
responses:
  - match: { last_user_contains: "check the build" }
    tool_calls:
      - { name: bash, arguments: { command: "touch ran.txt && echo ran" } }
  - match: { last_user_contains: "check the build" }
    text: "Checked."
"#;

/// A call the person refuses settles with one `failed` update (the refusal's), not a second
/// one for the result that tells the model; and the command did not run.
#[test]
fn a_refused_call_sends_one_failed_update() {
    let env = Env::new();
    let mock = Mock::start(CHECK_SCRIPT);
    let mut acp = Raw::start(&env, &mock.base_url());
    let (sid, _) = acp.new_session(1, &env);
    let mode = acp.request(
        2,
        "session/set_mode",
        json!({"sessionId": sid, "modeId": "read-only"}),
    );
    assert!(mode.get("result").is_some(), "{mode}");
    let (seen, answer) = acp.exchange(
        3,
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "check the build"}]}),
        |req| {
            (req["method"] == "session/request_permission")
                .then(|| json!({"outcome": {"outcome": "selected", "optionId": "reject"}}))
        },
    );
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let asked = seen
        .iter()
        .find(|m| m["method"] == "session/request_permission")
        .unwrap_or_else(|| panic!("no permission request: {seen:?}"));
    let call = asked["params"]["toolCall"]["toolCallId"].clone();
    let failed: Vec<&Value> = seen
        .iter()
        .filter(|m| {
            m["params"]["update"]["sessionUpdate"] == "tool_call_update"
                && m["params"]["update"]["toolCallId"] == call
                && m["params"]["update"]["status"] == "failed"
        })
        .collect();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(
        failed[0].to_string().contains("not approved"),
        "{}",
        failed[0]
    );
    assert!(!env.ws.join("ran.txt").exists(), "the refused command ran");
    acp.close();
}

/// `session/list`: keel's sessions of the directory, newest first, titled by their first
/// prompt, with an ISO 8601 `updatedAt`; another directory has none; a cursor keel did not
/// give and a relative `cwd` are JSON-RPC errors naming them.
#[test]
fn session_list_names_the_directory_s_sessions_newest_first() {
    let env = Env::new();
    let mock = Mock::start("responses:\n  - text: \"one\"\n  - text: \"two\"\n");
    let mut acp = Raw::start(&env, &mock.base_url());
    let init = acp.request(
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    let caps = &init["result"]["agentCapabilities"]["sessionCapabilities"];
    for cap in ["list", "resume", "close", "fork"] {
        assert!(caps[cap].is_object(), "{cap}: {init}");
    }
    let (first, _) = acp.new_session(2, &env);
    acp.prompt(3, &first, "first task");
    std::thread::sleep(Duration::from_millis(20));
    let (second, _) = acp.new_session(4, &env);
    acp.prompt(5, &second, "second task");

    let list = acp.request(6, "session/list", json!({}));
    let sessions = list["result"]["sessions"].as_array().unwrap();
    let ids: Vec<&str> = sessions
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [second.as_str(), first.as_str()], "{list}");
    assert_eq!(sessions[0]["title"], "second task", "{list}");
    assert_eq!(sessions[1]["title"], "first task", "{list}");
    for s in sessions {
        assert_eq!(s["cwd"], env.ws.display().to_string(), "{s}");
        let at = s["updatedAt"].as_str().unwrap();
        assert_eq!(at.len(), 24, "{at}");
        assert!(at.ends_with('Z') && at.as_bytes()[10] == b'T', "{at}");
    }
    assert!(list["result"].get("nextCursor").is_none(), "{list}");

    let same = acp.request(7, "session/list", json!({"cwd": env.ws}));
    assert_eq!(same["result"]["sessions"], list["result"]["sessions"]);
    let elsewhere = acp.request(8, "session/list", json!({"cwd": env.outside}));
    assert_eq!(elsewhere["result"]["sessions"], json!([]), "{elsewhere}");

    let (code, message) = error_of(&acp.request(9, "session/list", json!({"cursor": "page-2"})));
    assert_eq!(code, -32602);
    assert!(message.contains("\"page-2\""), "{message}");
    let (code, message) = error_of(&acp.request(10, "session/list", json!({"cwd": "rel/dir"})));
    assert_eq!(code, -32602);
    assert!(message.contains("rel/dir"), "{message}");
    acp.close();
}

/// The model selector: the configured model and DeepSeek's known models are offered as the
/// `model` config option; a change is logged, on disk before the answer, used by the next
/// request, and kept when the session is loaded in a new process. The `mode` option sets the
/// mode as `session/set_mode` does. Wrong values are JSON-RPC errors naming them.
#[test]
fn the_model_selector_switches_and_a_reload_keeps_it() {
    let env = Env::new();
    let mock =
        Mock::start("responses:\n  - text: \"one\"\n  - text: \"two\"\n  - text: \"three\"\n");
    let mut acp = Raw::start(&env, &mock.base_url());
    let (sid, new) = acp.new_session(1, &env);
    let model = option(&new, "model");
    assert_eq!(model["category"], "model", "{model}");
    assert_eq!(model["type"], "select", "{model}");
    assert_eq!(model["currentValue"], "deepseek-v4-flash", "{model}");
    let offered: Vec<&str> = model["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["value"].as_str().unwrap())
        .collect();
    assert_eq!(offered[0], "deepseek-v4-flash", "{offered:?}");
    for m in ["deepseek-v4-pro", "deepseek-chat", "deepseek-reasoner"] {
        assert!(offered.contains(&m), "{m}: {offered:?}");
    }
    assert_eq!(option(&new, "mode")["currentValue"], "default", "{new}");

    let set = acp.request(
        2,
        "session/set_config_option",
        json!({"sessionId": sid, "configId": "model", "value": "deepseek-chat"}),
    );
    assert_eq!(
        option(&set["result"], "model")["currentValue"],
        "deepseek-chat",
        "{set}"
    );
    // Logged and on disk before the answer.
    let events = load_consistent(&session_file(&env, &sid));
    let logged: Vec<&Value> = of_type(&events, "model/selected");
    assert_eq!(logged.len(), 1, "{events:?}");
    assert_eq!(logged[0]["data"]["model"], "deepseek-chat");

    acp.prompt(3, &sid, "hello");
    assert_eq!(mock.requests()[0]["model"], "deepseek-chat");

    // The mode option is the session mode.
    let mode = acp.request(
        4,
        "session/set_config_option",
        json!({"sessionId": sid, "configId": "mode", "value": "read-only"}),
    );
    assert_eq!(
        option(&mode["result"], "mode")["currentValue"],
        "read-only",
        "{mode}"
    );
    assert_eq!(
        option(&mode["result"], "model")["currentValue"],
        "deepseek-chat",
        "{mode}"
    );

    // Bad input: an unknown model, a boolean value, an unknown option, an unknown session.
    let (code, message) = error_of(&acp.request(
        5,
        "session/set_config_option",
        json!({"sessionId": sid, "configId": "model", "value": "gpt-9"}),
    ));
    assert_eq!(code, -32602);
    assert!(
        message.contains("\"gpt-9\"") && message.contains("deepseek-chat"),
        "{message}"
    );
    let (code, message) = error_of(&acp.request(
        6,
        "session/set_config_option",
        json!({"sessionId": sid, "configId": "model", "type": "boolean", "value": true}),
    ));
    assert_eq!(code, -32602);
    assert!(message.contains("true"), "{message}");
    let (code, message) = error_of(&acp.request(
        7,
        "session/set_config_option",
        json!({"sessionId": sid, "configId": "temperature", "value": "hot"}),
    ));
    assert_eq!(code, -32602);
    assert!(message.contains("\"temperature\""), "{message}");
    let (code, message) = error_of(&acp.request(
        8,
        "session/set_config_option",
        json!({"sessionId": "no-such-session", "configId": "model", "value": "deepseek-chat"}),
    ));
    assert_eq!(code, -32002);
    assert!(message.contains("no-such-session"), "{message}");
    acp.close();

    // A new process: the load reports the kept model and mode, and the next request uses it.
    let mut acp = Raw::start(&env, &mock.base_url());
    let loaded = acp.request(
        1,
        "session/load",
        json!({"sessionId": sid, "cwd": env.ws, "mcpServers": []}),
    );
    assert_eq!(
        option(&loaded["result"], "model")["currentValue"],
        "deepseek-chat",
        "{loaded}"
    );
    assert_eq!(loaded["result"]["modes"]["currentModeId"], "read-only");
    acp.prompt(2, &sid, "again");
    assert_eq!(mock.requests()[1]["model"], "deepseek-chat");
    acp.close();

    // `keel resume` (and `--model` given to it) keeps it too: the session's model wins.
    let out = support::run(env.keel(&mock.base_url()).args([
        "--model",
        "deepseek-v4-pro",
        "resume",
        &sid,
        "once more",
    ]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(mock.requests()[2]["model"], "deepseek-chat");
}

/// `session/fork` seeds a new session with the parent's turns (the model sees them), leaving
/// the parent as it was; `session/resume` opens a session without replaying it;
/// `session/close` drops it (a prompt then finds no open session). Unknown ids are errors
/// naming them.
#[test]
fn fork_resume_and_close() {
    let env = Env::new();
    let mock = Mock::start(
        "responses:\n  - match: { last_user_contains: \"remember\" }\n    text: \"noted\"\n  \
         - match: { last_user_contains: \"which word\" }\n    text: \"banana\"\n",
    );
    let mut acp = Raw::start(&env, &mock.base_url());
    let (parent, _) = acp.new_session(1, &env);
    acp.prompt(2, &parent, "remember the word banana");
    let fork = acp.request(
        3,
        "session/fork",
        json!({"sessionId": parent, "cwd": env.ws, "mcpServers": []}),
    );
    let child = fork["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("{fork}"))
        .to_owned();
    assert_ne!(child, parent);
    assert!(fork["result"]["modes"].is_object(), "{fork}");
    assert!(fork["result"]["configOptions"].is_array(), "{fork}");
    acp.prompt(4, &child, "which word was it?");
    let asked = &mock.requests()[1];
    assert!(
        asked["messages"]
            .to_string()
            .contains("remember the word banana"),
        "{asked}"
    );
    let header: Value = serde_json::from_str(
        std::fs::read_to_string(session_file(&env, &child))
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(header["parentSession"], parent.as_str(), "{header}");
    let parent_events = load_consistent(&session_file(&env, &parent));
    assert_eq!(of_type(&parent_events, "turn/end").len(), 1);

    let (code, message) = error_of(&acp.request(
        5,
        "session/fork",
        json!({"sessionId": "no-such-session", "cwd": env.ws, "mcpServers": []}),
    ));
    assert_eq!(code, -32002);
    assert!(message.contains("no-such-session"), "{message}");
    acp.close();

    // A new process resumes the fork: no history replayed, its mode and options answered.
    let mut acp = Raw::start(&env, &mock.base_url());
    let (seen, resumed) = acp.exchange(
        1,
        "session/resume",
        json!({"sessionId": child, "cwd": env.ws, "mcpServers": []}),
        |_| None,
    );
    assert_eq!(
        resumed["result"]["modes"]["currentModeId"], "default",
        "{resumed}"
    );
    let replayed: Vec<&Value> = seen
        .iter()
        .filter(|m| {
            matches!(
                m["params"]["update"]["sessionUpdate"].as_str(),
                Some("user_message_chunk" | "agent_message_chunk")
            )
        })
        .collect();
    assert!(replayed.is_empty(), "{replayed:?}");
    let (code, message) = error_of(&acp.request(
        2,
        "session/resume",
        json!({"sessionId": "no-such-session", "cwd": env.ws, "mcpServers": []}),
    ));
    assert_eq!(code, -32002);
    assert!(message.contains("no-such-session"), "{message}");

    let closed = acp.request(3, "session/close", json!({"sessionId": child}));
    assert_eq!(closed["result"], json!({}), "{closed}");
    let (code, _) = error_of(&acp.request(
        4,
        "session/prompt",
        json!({"sessionId": child, "prompt": [{"type": "text", "text": "hi"}]}),
    ));
    assert_eq!(code, -32002);
    let (code, message) = error_of(&acp.request(5, "session/close", json!({"sessionId": child})));
    assert_eq!(code, -32002);
    assert!(message.contains(&child), "{message}");
    acp.close();
}

/// A client that sends the wrong type gets a JSON-RPC error naming what it sent, and keel
/// keeps serving.
#[test]
fn wrong_types_are_json_rpc_errors() {
    let env = Env::new();
    let mock = Mock::start("responses: []");
    let mut acp = Raw::spawn(&env, &mock.base_url());
    let init = acp.request(
        1,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "clientCapabilities": {}}),
    );
    let (code, message) = error_of(&init);
    assert_eq!(code, -32602, "{init}");
    assert!(
        message.contains("protocolVersion") && message.contains("\"2025-11-25\""),
        "{message}"
    );
    let init = acp.request(
        2,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    assert!(init.get("result").is_some(), "{init}");
    let list = acp.request(3, "session/list", json!({"cwd": 42}));
    // The SDK's answer: its data holds the reason and what was sent.
    let (code, _) = error_of(&list);
    assert_eq!(code, -32602, "{list}");
    assert!(list["error"]["data"].to_string().contains("42"), "{list}");
    let (sid, _) = acp.new_session(4, &env);
    assert!(!sid.is_empty());
    acp.close();
}

/// The agent command acpx starts: this `keel acp` in the test's workspace, on `base_url`.
fn acpx_agent(env: &Env, base_url: &str) -> String {
    let keel = env!("CARGO_BIN_EXE_keel");
    let ws = env.ws.display().to_string();
    assert!(!keel.contains('\'') && !ws.contains('\''), "{keel} {ws}");
    format!("'{keel}' --cwd '{ws}' --trust-project --base-url '{base_url}' acp")
}

/// `acpx --agent AGENT ARGS…` in the workspace, its state (`~/.acpx`) in the test's root.
fn acpx_cmd(env: &Env, agent: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(support::acpx_bin());
    cmd.arg("--agent")
        .arg(agent)
        .args(args)
        .current_dir(&env.ws)
        .env("HOME", env.root())
        .env("KEEL_HOME", &env.home)
        .env("TMPDIR", env.root().join("tmp"))
        .env("DEEPSEEK_API_KEY", support::API_KEY)
        .env_remove("DEEPSEEK_BASE_URL")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null());
    cmd
}

fn acpx(env: &Env, agent: &str, args: &[&str]) -> support::Output {
    support::run(&mut acpx_cmd(env, agent, args))
}

/// The JSON-RPC messages of acpx's `--format json` output (a line may carry trailing text of
/// acpx's own after its message).
fn wire(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .filter_map(|l| {
            serde_json::Deserializer::from_str(l)
                .into_iter::<Value>()
                .next()
                .and_then(Result::ok)
        })
        .collect()
}

/// The answer to the first request of `method` in `messages`.
fn answer_to<'a>(messages: &'a [Value], method: &str) -> &'a Value {
    let request = messages
        .iter()
        .find(|m| m["method"] == method && m.get("id").is_some())
        .unwrap_or_else(|| panic!("no {method} request: {messages:?}"));
    messages
        .iter()
        .find(|m| m["id"] == request["id"] && m.get("method").is_none())
        .unwrap_or_else(|| panic!("no answer to {request}"))
}

/// Wait until acpx's queue owner (and the keel acp it holds) ended.
fn wait_for_queue_owner(env: &Env) {
    let queues = env.root().join(".acpx/queues");
    let deadline = Instant::now() + support::HANG_GUARD;
    while std::fs::read_dir(&queues).is_ok_and(|mut d| d.next().is_some()) {
        assert!(Instant::now() < deadline, "acpx's queue owner never ended");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// acpx (pinned) drives keel's session list, model selector and resume, each command a
/// `keel acp` of its own: `sessions list` shows keel's sessions; `set model` goes through
/// `session/set_config_option`; the next prompt's `session/resume` (acpx prefers it to
/// `session/load` once keel offers it) already reports the chosen model — before acpx
/// re-sends any choice of its own — and the model gets the request; `--approve-all`
/// approves the command a read-only session asks about.
#[test]
fn acpx_lists_switches_the_model_and_resumes() {
    let env = Env::new();
    let mock = Mock::start(
        "responses:\n  - match: { last_user_contains: \"say hi\" }\n    text: \"hi\"\n  \
         - match: { last_user_contains: \"check the build\" }\n    tool_calls:\n      \
         - { name: bash, arguments: { command: \"touch ran.txt && echo ran\" } }\n  \
         - match: { last_user_contains: \"check the build\" }\n    text: \"Checked.\"\n",
    );
    let agent = acpx_agent(&env, &mock.base_url());
    let new = acpx(&env, &agent, &["sessions", "new"]);
    assert_eq!(new.code, Some(0), "{new:?}");
    let id = new
        .stdout
        .lines()
        .last()
        .unwrap_or_default()
        .trim()
        .to_owned();
    let hi = acpx(&env, &agent, &["--ttl", "1", "say hi"]);
    assert_eq!(hi.code, Some(0), "{hi:?}");
    wait_for_queue_owner(&env);

    let list = acpx(&env, &agent, &["--format", "json", "sessions", "list"]);
    assert_eq!(list.code, Some(0), "{list:?}");
    let listed: Value = serde_json::from_str(list.stdout.lines().last().unwrap())
        .unwrap_or_else(|e| panic!("{e}: {list:?}"));
    assert_eq!(listed["source"], "agent", "{listed}");
    assert_eq!(listed["sessions"][0]["sessionId"], id.as_str(), "{listed}");
    assert_eq!(listed["sessions"][0]["title"], "say hi", "{listed}");

    let set = acpx(&env, &agent, &["set", "model", "deepseek-reasoner"]);
    assert_eq!(set.code, Some(0), "{set:?}");
    let bad = acpx(&env, &agent, &["set", "model", "gpt-9"]);
    assert_ne!(bad.code, Some(0), "{bad:?}");
    assert!(
        format!("{}{}", bad.stdout, bad.stderr).contains("gpt-9"),
        "{bad:?}"
    );
    let mode = acpx(&env, &agent, &["set-mode", "read-only"]);
    assert_eq!(mode.code, Some(0), "{mode:?}");

    let asked = acpx(
        &env,
        &agent,
        &[
            "--approve-all",
            "--ttl",
            "1",
            "--format",
            "json",
            "check the build",
        ],
    );
    assert_eq!(asked.code, Some(0), "{asked:?}");
    let messages = wire(&asked.stdout);
    let resumed = answer_to(&messages, "session/resume");
    assert_eq!(
        option(&resumed["result"], "model")["currentValue"],
        "deepseek-reasoner",
        "{resumed}"
    );
    assert_eq!(resumed["result"]["modes"]["currentModeId"], "read-only");
    assert_eq!(
        answer_to(&messages, "session/request_permission")["result"]["outcome"]["outcome"],
        "selected",
        "{asked:?}"
    );
    assert!(
        env.ws.join("ran.txt").exists(),
        "the approved command did not run"
    );
    let requests = mock.requests();
    assert_eq!(requests[0]["model"], "deepseek-v4-flash");
    assert_eq!(requests.last().unwrap()["model"], "deepseek-reasoner");
    wait_for_queue_owner(&env);
    let events = load_consistent(&env.only_session());
    let models: Vec<&str> = of_type(&events, "model/selected")
        .iter()
        .map(|e| e["data"]["model"].as_str().unwrap())
        .collect();
    assert_eq!(models, ["deepseek-reasoner"]);
}

/// `acpx cancel` while a prompt runs a slow command: keel cancels the turn (the command is
/// stopped, the prompt answers `cancelled`) and the log ends the turn consistently.
#[test]
fn acpx_cancels_a_running_prompt() {
    let env = Env::new();
    let mock = Mock::start(
        "responses:\n  - tool_calls: [{ name: bash, arguments: { command: \"sleep 30\" } }]\n  \
         - text: \"should not be reached\"\n",
    );
    let agent = acpx_agent(&env, &mock.base_url());
    let new = acpx(&env, &agent, &["sessions", "new"]);
    assert_eq!(new.code, Some(0), "{new:?}");
    let started = Instant::now();
    let running = support::spawn(&mut acpx_cmd(
        &env,
        &agent,
        &["--ttl", "1", "--format", "json", "run the slow command"],
    ));
    env.wait_for_log("the bash call", |events| {
        !of_type(events, "tool/call").is_empty()
    });
    let cancel = acpx(&env, &agent, &["cancel"]);
    assert_eq!(cancel.code, Some(0), "{cancel:?}");
    let out = running.wait();
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "the command was not stopped"
    );
    let messages = wire(&out.stdout);
    assert_eq!(
        answer_to(&messages, "session/prompt")["result"]["stopReason"],
        "cancelled",
        "{out:?}"
    );
    wait_for_queue_owner(&env);
    let events = load_consistent(&env.only_session());
    let ends = support::turn_end_reasons(&events);
    assert_eq!(ends.len(), 1, "{ends:?}");
    assert_ne!(ends[0], json!("completed"), "{ends:?}");
    assert_eq!(mock.requests().len(), 1);
}
