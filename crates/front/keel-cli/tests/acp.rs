//! `keel acp` driven by ACP clients nobody here wrote: the official TypeScript SDK
//! (crates/front/keel-acp/tests/node, pinned in its package-lock.json, scripted by
//! `keel_acp_client.mjs`), the Python SDK (`agent-client-protocol` from PyPI, pinned, in a
//! venv) and acpx, a headless ACP command line (crates/front/keel-acp/tests/acpx, pinned). Bad input
//! is sent as raw JSON-RPC lines. The model is the loopback mock; files,
//! sessions, child processes and the keel binary are real.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};
use support::{Env, Mock, ensure_acp_node_modules, load_consistent, of_type, turn_end_reasons};

const SCRIPT: &str = r#"
responses:
  - match: { last_user_contains: "fix the greeting" }
    reasoning: "The user wants the greeting fixed."
    text: "Let me read the file."
    tool_calls:
      - { name: read, arguments: { path: notes.txt } }
  - match: { last_user_contains: "fix the greeting" }
    text: "Here is my plan."
    tool_calls:
      - { name: exit_plan_mode, arguments: { plan: "Replace helo with hello in notes.txt" } }
  - match: { last_user_contains: "fix the greeting" }
    tool_calls:
      - { name: todo_write, arguments: { todos: [ { content: "Fix the greeting", status: in_progress, activeForm: "Fixing the greeting" } ] } }
      - { name: edit, arguments: { path: notes.txt, old_string: "helo world", new_string: "hello world" } }
  - match: { last_user_contains: "fix the greeting" }
    text: "Fixed the greeting."
  - match: { last_user_contains: "slow command" }
    text: "Running it."
    tool_calls:
      - { name: bash, arguments: { command: "sleep 30" } }
  - match: { last_user_contains: "slow command" }
    text: "should not be reached"
"#;

/// Run an SDK client program (`cmd`, its script and arguments set) against
/// `keel --cwd WS --base-url URL acp`, which it starts itself; its report, the JSON of its last
/// stdout line. `who` names the client in failures.
fn sdk_client(env: &Env, base_url: &str, mut cmd: Command, who: &str) -> Value {
    let args = vec![
        "--cwd".to_owned(),
        env.ws.display().to_string(),
        "--base-url".to_owned(),
        base_url.to_owned(),
        "acp".to_owned(),
    ];
    cmd.current_dir(&env.ws)
        .env("KEEL_ACP_COMMAND", env!("CARGO_BIN_EXE_keel"))
        .env("KEEL_ACP_ARGS", serde_json::to_string(&args).unwrap())
        .env("WORKSPACE", &env.ws)
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
        "the {who} client failed\nstdout:\n{}\nstderr:\n{}",
        out.stdout,
        out.stderr
    );
    let line = out.stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| {
        panic!(
            "the {who} client's report is not JSON ({e})\nstdout:\n{}\nstderr:\n{}",
            out.stdout, out.stderr
        )
    })
}

/// `node keel_acp_client.mjs SCENARIO` against `keel --cwd WS --base-url URL acp`.
fn node_client(env: &Env, base_url: &str, scenario: &str) -> Value {
    let dir = ensure_acp_node_modules();
    let mut cmd = Command::new("node");
    cmd.arg(dir.join("keel_acp_client.mjs"))
        .arg(scenario)
        .env("MCP_EVERYTHING", support::node_bin("mcp-server-everything"));
    sdk_client(env, base_url, cmd, "node")
}

/// The kinds of `updates`, without the command list (sent once, after `session/new`, by a
/// thread of its own: it may land anywhere in the first turn).
fn kinds(updates: &Value) -> Vec<String> {
    updates
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["kind"].as_str().unwrap().to_owned())
        .filter(|k| k != "available_commands_update")
        .collect()
}

/// Joined text of the updates of `kind`.
fn text_of(updates: &Value, kind: &str) -> String {
    updates
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["kind"] == kind)
        .filter_map(|u| u["text"].as_str())
        .collect()
}

/// Consecutive duplicates of `v` folded (streamed chunks arrive as many updates).
fn runs(v: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for k in v {
        if out.last() != Some(k) {
            out.push(k.clone());
        }
    }
    out
}

/// The TypeScript SDK's client: initialize, new session, plan mode, a prompt that reads and
/// edits a file after the client approves the plan, a prompt cancelled mid-`bash`, then the
/// session loaded in a second process with its history replayed.
#[test]
fn the_typescript_sdk_drives_keel_acp() {
    let env = Env::new();
    env.write("notes.txt", "helo world\n");
    let mock = Mock::start(SCRIPT);
    let report = node_client(&env, &mock.base_url(), "main");

    // initialize: truthful capabilities.
    let init = &report["initialize"];
    assert_eq!(init["protocolVersion"], 1, "{init}");
    let caps = &init["agentCapabilities"];
    assert_eq!(caps["loadSession"], true, "{caps}");
    assert_eq!(caps["promptCapabilities"]["image"], false, "{caps}");
    assert_eq!(caps["promptCapabilities"]["audio"], false, "{caps}");
    assert_eq!(
        caps["promptCapabilities"]["embeddedContext"], true,
        "{caps}"
    );
    assert_eq!(init["agentInfo"]["name"], "keel");

    // session/new: the keel session id and the modes.
    let new = &report["newSession"];
    let id = new["sessionId"].as_str().unwrap();
    assert_eq!(new["modes"]["currentModeId"], "default", "{new}");
    let modes: Vec<&str> = new["modes"]["availableModes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(modes, ["default", "read-only", "auto", "plan"]);

    // The edit turn: streamed updates in order.
    let edit = &report["edit"];
    assert_eq!(edit["stopReason"], "end_turn", "{edit}");
    let updates = &edit["updates"];
    let order = runs(&kinds(updates));
    assert_eq!(
        order,
        [
            "agent_thought_chunk",
            "agent_message_chunk",
            "tool_call",        // read
            "tool_call_update", // read done
            "agent_message_chunk",
            "tool_call",            // exit_plan_mode
            "current_mode_update",  // approved: plan mode off
            "config_option_update", // … and so the `mode` option
            "tool_call_update",
            "tool_call", // todo_write
            "plan",
            "tool_call_update",
            "tool_call", // edit
            "tool_call_update",
            "agent_message_chunk",
        ],
        "{updates:#}"
    );
    assert_eq!(
        text_of(updates, "agent_thought_chunk"),
        "The user wants the greeting fixed."
    );
    assert_eq!(
        text_of(updates, "agent_message_chunk"),
        "Let me read the file.Here is my plan.Fixed the greeting."
    );
    let calls: Vec<&Value> = updates
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["kind"] == "tool_call")
        .collect();
    let notes = env.ws.join("notes.txt").display().to_string();
    assert_eq!(calls[0]["title"], "read notes.txt");
    assert_eq!(calls[0]["toolKind"], "read");
    assert_eq!(calls[0]["locations"], json!([notes]));
    assert_eq!(calls[1]["toolKind"], "switch_mode");
    assert_eq!(calls[2]["toolKind"], "think");
    assert_eq!(calls[3]["title"], "edit notes.txt");
    assert_eq!(calls[3]["toolKind"], "edit");
    assert_eq!(
        calls[3]["content"],
        json!([{"type": "diff", "path": notes, "oldText": "helo world", "newText": "hello world"}])
    );
    let read_done = updates
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["kind"] == "tool_call_update" && u["id"] == calls[0]["id"])
        .unwrap();
    assert_eq!(read_done["status"], "completed");
    assert!(
        read_done["text"].as_str().unwrap().contains("helo world"),
        "{read_done}"
    );
    let plan = updates
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["kind"] == "plan")
        .unwrap();
    assert_eq!(plan["entries"][0]["content"], "Fix the greeting");
    assert_eq!(plan["entries"][0]["status"], "in_progress");
    // The one permission request: the plan, answered "allow once" by the client.
    let perms = edit["permissions"].as_array().unwrap();
    assert_eq!(perms.len(), 1, "{perms:?}");
    assert_eq!(perms[0]["title"], "Approve the plan and start working");
    assert_eq!(perms[0]["toolKind"], "switch_mode");
    assert_eq!(
        perms[0]["content"][0]["content"]["text"],
        "Replace helo with hello in notes.txt"
    );
    assert_eq!(
        perms[0]["options"],
        json!([["allow_once", "allow_once"], ["reject", "reject_once"]])
    );
    assert_eq!(env.read("notes.txt"), "hello world\n");

    // The cancelled turn: the bash call was announced, then the prompt answered `cancelled`
    // long before `sleep 30` would have ended.
    let cancel = &report["cancel"];
    assert_eq!(cancel["stopReason"], "cancelled", "{cancel}");
    assert!(cancel["seconds"].as_f64().unwrap() < 20.0, "{cancel}");
    let bash = cancel["updates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["kind"] == "tool_call")
        .unwrap();
    assert_eq!(bash["title"], "bash sleep 30");
    assert_eq!(bash["toolKind"], "execute");
    assert_eq!(report["firstExit"]["code"], 0, "{}", report["stderr"]);

    // The session log: approval asked and decided by the user, the cancelled turn aborted.
    let path = env
        .session_files()
        .into_iter()
        .find(|p| support::session_id(p) == id)
        .unwrap();
    let events = load_consistent(&path);
    let decided = of_type(&events, "approval/decided");
    assert_eq!(decided.len(), 1, "{decided:?}");
    assert_eq!(decided[0]["data"]["approved"], true);
    assert_eq!(decided[0]["data"]["by"], "user");
    let ends = turn_end_reasons(&events);
    assert_eq!(ends.len(), 2, "{ends:?}");
    assert_eq!(ends[0]["kind"], "completed");
    assert_eq!(ends[1]["kind"], "aborted", "{ends:?}");

    // session/load in a second process: the history replayed as updates.
    let load = &report["load"];
    assert_eq!(load["response"]["modes"]["currentModeId"], "default");
    let replay = &load["updates"];
    let order = runs(&kinds(replay));
    // The mode the client set before the first prompt, then the first prompt.
    assert_eq!(
        order[..2],
        ["current_mode_update", "user_message_chunk"],
        "{replay:#}"
    );
    assert_eq!(
        text_of(replay, "user_message_chunk"),
        "please fix the greeting in notes.txtrun the slow command"
    );
    assert_eq!(
        text_of(replay, "agent_message_chunk"),
        "Let me read the file.Here is my plan.Fixed the greeting.Running it."
    );
    let replayed_calls: Vec<&str> = replay
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["kind"] == "tool_call")
        .map(|u| u["title"].as_str().unwrap())
        .collect();
    assert_eq!(
        replayed_calls,
        [
            "read notes.txt",
            "exit_plan_mode",
            "todo_write 1 item(s)",
            "edit notes.txt",
            "bash sleep 30"
        ]
    );
    // The cancelled bash call shows as failed.
    let bash_end = replay
        .as_array()
        .unwrap()
        .iter()
        .rfind(|u| u["kind"] == "tool_call_update")
        .unwrap();
    assert_eq!(bash_end["status"], "failed", "{bash_end}");

    // A missing session and an image prompt (the default model has no vision): JSON-RPC
    // errors a person can act on.
    let missing = &report["missing"]["error"];
    assert_eq!(missing["code"], -32002, "{missing}");
    assert!(
        missing["message"]
            .as_str()
            .unwrap()
            .contains("no session \"no-such-session-0000\""),
        "{missing}"
    );
    let image = &report["image"]["error"];
    assert_eq!(image["code"], -32602, "{image}");
    assert!(
        image["message"]
            .as_str()
            .unwrap()
            .contains("model deepseek-v4-flash does not read images"),
        "{image}"
    );
    assert_eq!(report["secondExit"]["code"], 0);
}

const EDITOR_SCRIPT: &str = r#"
responses:
  - match: { last_user_contains: "tidy notes" }
    tool_calls:
      - { name: read, arguments: { path: notes.txt } }
  - match: { last_user_contains: "tidy notes" }
    tool_calls:
      - { name: edit, arguments: { path: notes.txt, old_string: "unsaved draft", new_string: "tidied draft" } }
      - { name: write, arguments: { path: made/new.txt, content: "made by keel\n" } }
      - { name: mcp__scratch__echo, arguments: { message: "from the session's server" } }
  - match: { last_user_contains: "tidy notes" }
    text: "Tidied."
  - match: { last_user_contains: "look around" }
    tool_calls:
      - { name: write, arguments: { path: blocked.txt, content: "x" } }
      - { name: bash, arguments: { command: "echo looked" } }
  - match: { last_user_contains: "look around" }
    tool_calls:
      - { name: bash, arguments: { command: "echo looked" } }
  - match: { last_user_contains: "look around" }
    text: "Looked."
"#;

/// An editor client: its file system (unsaved buffers win over the disk; writes go through
/// it), an MCP server of its own in `session/new`, and the session modes for the sandbox
/// (read-only: writes refused, commands asked, "allow always" remembered) and approvals
/// (auto), each logged; a reload in a new process does not restore the looser `auto` from the
/// log (a resumed session never loosens: keel_agent::session_modes) and comes back `default`.
#[test]
fn an_editor_client_lends_its_files_servers_and_modes() {
    let env = Env::new();
    env.write("notes.txt", "a saved draft\n");
    let mock = Mock::start(EDITOR_SCRIPT);
    let report = node_client(&env, &mock.base_url(), "editor");
    assert_eq!(
        report["initialize"]["agentCapabilities"]["mcpCapabilities"]["http"], true,
        "{}",
        report["initialize"]
    );
    let ws = env.ws.display().to_string();
    let notes = format!("{ws}/notes.txt");

    // The read saw the unsaved buffer; the edit applied to it; both writes went through the
    // client (which saved them).
    let tidy = &report["tidy"];
    assert_eq!(tidy["stopReason"], "end_turn", "{tidy}");
    let results: Vec<&Value> = tidy["updates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["kind"] == "tool_call_update")
        .collect();
    assert!(
        results[0]["text"]
            .as_str()
            .unwrap()
            .contains("1: an unsaved draft"),
        "{results:?}"
    );
    assert_eq!(
        report["reads"],
        json!([notes.clone(), notes.clone()]),
        "{report}"
    );
    assert_eq!(
        report["writes"],
        json!([
            {"path": notes, "content": "an tidied draft\n"},
            {"path": format!("{ws}/made/new.txt"), "content": "made by keel\n"},
        ])
    );
    assert_eq!(env.read("notes.txt"), "an tidied draft\n");
    assert_eq!(env.read("made/new.txt"), "made by keel\n");
    // The session's own MCP server answered.
    let echo = results
        .iter()
        .find(|u| {
            u["text"]
                .as_str()
                .unwrap()
                .contains("from the session's server")
        })
        .unwrap_or_else(|| panic!("{results:?}"));
    assert_eq!(echo["status"], "completed", "{echo}");

    // Read-only: the write refused without asking, the command asked once ("allow always"),
    // then run again without asking.
    let look = &report["look"];
    assert_eq!(look["stopReason"], "end_turn", "{look}");
    assert_eq!(look["permissions"], json!(["bash echo looked"]), "{look}");
    let failed: Vec<&str> = look["updates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["kind"] == "tool_call_update" && u["status"] == "failed")
        .map(|u| u["text"].as_str().unwrap())
        .collect();
    assert_eq!(failed.len(), 1, "{look}");
    assert!(failed[0].contains("read-only"), "{failed:?}");
    assert!(!env.ws.join("blocked.txt").exists());

    // Modes: an unknown one is an error naming the known ones; the client's changes are not
    // echoed back as updates.
    let bad = &report["badMode"]["error"];
    assert_eq!(bad["code"], -32602, "{bad}");
    assert!(
        bad["message"].as_str().unwrap().contains("\"read-only\""),
        "{bad}"
    );
    assert_eq!(report["modeUpdates"], json!([]), "{report}");

    // The log tells each change; a reload keeps the last mode set.
    let path = env.only_session();
    let events = load_consistent(&path);
    let sandbox: Vec<&str> = of_type(&events, "sandbox/mode")
        .iter()
        .map(|e| e["data"]["mode"].as_str().unwrap())
        .collect();
    assert_eq!(sandbox, ["workspace-write", "read-only", "workspace-write"]);
    let policy: Vec<&str> = of_type(&events, "approval/policy")
        .iter()
        .map(|e| e["data"]["policy"].as_str().unwrap())
        .collect();
    assert_eq!(policy, ["ask", "allow"]);
    // Both commands are approved by the person: the second by the "allow always" of the
    // first, without a second request to the client.
    let decided = of_type(&events, "approval/decided");
    assert_eq!(decided.len(), 2, "{decided:?}");
    assert!(
        decided
            .iter()
            .all(|d| d["data"]["approved"] == true && d["data"]["by"] == "user"),
        "{decided:?}"
    );
    assert_eq!(
        report["load"]["modes"]["currentModeId"], "default",
        "{report}"
    );
    assert_eq!(report["firstExit"]["code"], 0, "{}", report["stderr"]);
    assert_eq!(report["secondExit"]["code"], 0, "{}", report["stderr"]);
}

/// A model that runs `touch ran.txt` when asked to check the build, twice over.
const CHECK_SCRIPT: &str = r#"
responses:
  - match: { last_user_contains: "check the build" }
    text: "Running the check."
    tool_calls:
      - { name: bash, arguments: { command: "touch ran.txt && echo ran" } }
  - match: { last_user_contains: "check the build" }
    text: "Checked."
  - match: { last_user_contains: "check it again" }
    tool_calls:
      - { name: bash, arguments: { command: "touch ran.txt && echo ran" } }
  - match: { last_user_contains: "check it again" }
    text: "Checked again."
"#;

/// The title keel gives CHECK_SCRIPT's command.
const CHECK_COMMAND: &str = "bash touch ran.txt && echo ran";

/// The `sandbox/mode` changes of `events`, and the `approval/decided` answers as
/// (approved, by).
fn modes_and_decisions(events: &[Value]) -> (Vec<String>, Vec<(bool, String)>) {
    let modes = of_type(events, "sandbox/mode")
        .iter()
        .map(|e| e["data"]["mode"].as_str().unwrap().to_owned())
        .collect();
    let decided = of_type(events, "approval/decided")
        .iter()
        .map(|e| {
            (
                e["data"]["approved"].as_bool().unwrap(),
                e["data"]["by"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    (modes, decided)
}

/// A session mode is the session's (docs/acp.md, "Session modes"): `read-only` set by the
/// TypeScript SDK's client in one `keel acp`, killed right after (SIGKILL), holds when a new
/// process loads the session — the load reports it and the model's command is put to the
/// client (who rejects it) instead of running — and when `keel resume` continues it headless
/// (nobody to ask: refused).
#[test]
fn a_mode_set_in_one_process_holds_in_the_next() {
    let env = Env::new();
    let mock = Mock::start(CHECK_SCRIPT);
    let report = node_client(&env, &mock.base_url(), "reload");
    assert_eq!(
        report["newSession"]["modes"]["currentModeId"], "default",
        "{report}"
    );
    assert_eq!(report["firstExit"]["signal"], "SIGKILL", "{report}");
    assert_eq!(
        report["load"]["modes"]["currentModeId"], "read-only",
        "{report}"
    );
    let prompt = &report["prompt"];
    assert_eq!(prompt["stopReason"], "end_turn", "{prompt}");
    assert_eq!(
        prompt["permissions"],
        json!([{"title": CHECK_COMMAND, "toolKind": "execute"}]),
        "{prompt}"
    );
    assert!(!env.ws.join("ran.txt").exists(), "the command ran");
    let stderr = report["stderr"].as_str().unwrap();
    // Seq 1 is the header's, seq 2 the session's model route (`model/route`).
    assert!(
        stderr.contains("keeps the read-only sandbox set during it (sandbox/mode at seq 3)"),
        "{stderr}"
    );
    assert_eq!(report["secondExit"]["code"], 0, "{stderr}");
    // The change was logged once (on disk before the answer: the kill did not lose it); the
    // load logged nothing; the person refused.
    let path = env.only_session();
    let (modes, decided) = modes_and_decisions(&load_consistent(&path));
    assert_eq!(modes, ["workspace-write", "read-only"]);
    assert_eq!(decided, [(false, "user".to_owned())]);

    // `keel resume` keeps it too.
    let id = support::session_id(&path);
    let out = support::run(
        env.keel(&mock.base_url())
            .args(["resume", &id, "check it again"]),
    );
    assert!(
        out.stderr
            .contains("keeps the read-only sandbox set during it"),
        "{}",
        out.stderr
    );
    assert!(!env.ws.join("ran.txt").exists(), "the command ran");
    let (modes, decided) = modes_and_decisions(&load_consistent(&path));
    assert_eq!(modes, ["workspace-write", "read-only"]);
    assert_eq!(decided.len(), 2, "{decided:?}");
    assert!(!decided[1].0, "{decided:?}");
    assert_eq!(mock.remaining(), 0, "{}", out.stderr);
}

/// The agent command acpx starts: this `keel acp` in the test's workspace, on `base_url`.
fn acpx_agent(env: &Env, base_url: &str) -> String {
    let keel = env!("CARGO_BIN_EXE_keel");
    let ws = env.ws.display().to_string();
    assert!(!keel.contains('\'') && !ws.contains('\''), "{keel} {ws}");
    format!("'{keel}' --cwd '{ws}' --base-url '{base_url}' acp")
}

/// `acpx --agent AGENT ARGS…` in the workspace, its state (`~/.acpx`) in the test's root.
fn acpx(env: &Env, agent: &str, args: &[&str]) -> support::Output {
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
    support::run(&mut cmd)
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

/// acpx (npm, pinned) against `keel acp`: `acpx set-mode read-only`, then a prompt, each in a
/// `keel acp` process of its own. acpx re-sends a mode only when it had to create a new
/// session; on a `session/resume` (which it prefers to `session/load` once keel offers it) it
/// leaves the mode to the agent, so keel must keep it: the resume reports `read-only`, the
/// command is asked about (acpx, without a terminal to ask in, rejects it and exits 5) and
/// does not run.
#[test]
fn acpx_set_mode_holds_in_the_next_process() {
    let env = Env::new();
    let mock = Mock::start(CHECK_SCRIPT);
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
    assert_eq!(support::session_id(&env.only_session()), id, "{new:?}");

    let set = acpx(&env, &agent, &["set-mode", "read-only"]);
    assert_eq!(set.code, Some(0), "{set:?}");
    assert_eq!(set.stdout.trim(), "mode set: read-only", "{set:?}");

    let asked = acpx(
        &env,
        &agent,
        &["--ttl", "1", "--format", "json", "check the build"],
    );
    let messages = wire(&asked.stdout);
    let request = |method: &str| {
        messages
            .iter()
            .find(|m| m["method"] == method && m.get("id").is_some())
            .unwrap_or_else(|| panic!("no {method} request: {asked:?}"))
    };
    let answer = |to: &Value| {
        messages
            .iter()
            .find(|m| m["id"] == to["id"] && m.get("method").is_none())
            .unwrap_or_else(|| panic!("no answer to {to}: {asked:?}"))
    };
    // A new connection (keel acp serves one per process): initialize, then the resume.
    answer(request("initialize"));
    let loaded = answer(request("session/resume"));
    assert_eq!(
        loaded["result"]["modes"]["currentModeId"], "read-only",
        "{loaded}"
    );
    let permission = request("session/request_permission");
    assert_eq!(
        permission["params"]["toolCall"]["title"], CHECK_COMMAND,
        "{permission}"
    );
    assert_eq!(
        answer(permission)["result"]["outcome"]["optionId"],
        "reject",
        "{asked:?}"
    );
    assert_eq!(
        answer(request("session/prompt"))["result"]["stopReason"],
        "end_turn",
        "{asked:?}"
    );
    // acpx's exit code for "a permission was asked and denied".
    assert_eq!(asked.code, Some(5), "{asked:?}");
    assert!(!env.ws.join("ran.txt").exists(), "the command ran");

    // acpx's queue owner (and the keel acp it holds) ends after the one-second TTL.
    let queues = env.root().join(".acpx/queues");
    let deadline = Instant::now() + support::HANG_GUARD;
    while std::fs::read_dir(&queues).is_ok_and(|mut d| d.next().is_some()) {
        assert!(Instant::now() < deadline, "acpx's queue owner never ended");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (modes, decided) = modes_and_decisions(&load_consistent(&env.only_session()));
    assert_eq!(modes, ["workspace-write", "read-only"]);
    assert_eq!(decided, [(false, "user".to_owned())]);
}

/// acpx (npm, pinned) sends `/tidy src` to `keel acp`: keel offered the user's skill as a
/// command, and the prompt the model gets is the skill's body with the arguments.
#[test]
fn acpx_runs_a_skill_as_a_slash_command() {
    let env = Env::new();
    let dir = env.root().join(".agents/skills/tidy");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        "---\nname: tidy\ndescription: Tidy a directory\n---\nTIDY-BODY: sort the imports in $ARGUMENTS.\n",
    )
    .unwrap();
    let mock = Mock::start(
        "responses:\n  - match: { last_user_contains: \"TIDY-BODY\" }\n    text: \"tidied\"\n",
    );
    let agent = acpx_agent(&env, &mock.base_url());
    let out = acpx(
        &env,
        &agent,
        &["--ttl", "1", "--format", "json", "exec", "/tidy src"],
    );
    assert_eq!(out.code, Some(0), "{out:?}");
    let messages = wire(&out.stdout);
    let offered = messages.iter().any(|m| {
        m["params"]["update"]["sessionUpdate"] == "available_commands_update"
            && m["params"]["update"]["availableCommands"]
                .as_array()
                .is_some_and(|c| c.iter().any(|c| c["name"] == "tidy"))
    });
    assert!(offered, "{out:?}");
    let asked = mock.requests();
    assert_eq!(asked.len(), 1, "{asked:?}");
    let last = asked[0]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .to_string();
    assert!(
        last.contains("TIDY-BODY: sort the imports in src."),
        "{last}"
    );
    assert!(out.stdout.contains("tidied"), "{out:?}");
}

/// acpx (npm, pinned), which has no terminal to ask in, against a write that asks to leave the
/// sandbox: keel asks it with the model's reason and only "allow once" or "reject"; acpx
/// rejects (its exit code 5) and nothing lands outside the workspace.
#[test]
fn acpx_is_asked_about_an_escalated_write_and_its_rejection_holds() {
    let env = Env::new();
    let target = env.outside.join("escalated.txt");
    let mock = Mock::start(&format!(
        "responses:\n  - tool_calls: [{{ id: w1, name: write, arguments: {{ file_path: {:?}, content: \"x\", \
         sandbox_permissions: danger-full-access, justification: \"the report goes beside the repo\" }} }}]\n  \
         - text: \"gave up\"\n",
        target.display().to_string()
    ));
    let agent = acpx_agent(&env, &mock.base_url());
    let out = acpx(
        &env,
        &agent,
        &["--ttl", "1", "--format", "json", "exec", "write the report"],
    );
    assert_eq!(out.code, Some(5), "{out:?}");
    let messages = wire(&out.stdout);
    let asked = messages
        .iter()
        .find(|m| m["method"] == "session/request_permission")
        .unwrap_or_else(|| panic!("no permission request: {out:?}"));
    let title = asked["params"]["toolCall"]["title"].as_str().unwrap();
    assert!(title.starts_with("Outside the sandbox: "), "{asked}");
    assert!(
        asked["params"]["toolCall"]["content"]
            .to_string()
            .contains("the report goes beside the repo"),
        "{asked}"
    );
    let options: Vec<&str> = asked["params"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["optionId"].as_str().unwrap())
        .collect();
    assert_eq!(options, ["allow_once", "reject"], "{asked}");
    assert!(!target.exists(), "the rejected write landed");
}

/// acpx runs `/goal --max-rounds 2 …`: keel answers with two rounds and spends the budget.
#[test]
fn acpx_runs_a_goal_to_its_budget() {
    let env = Env::new();
    let mock = Mock::start("responses:\n  - text: \"round one\"\n  - text: \"round two\"\n");
    let agent = acpx_agent(&env, &mock.base_url());
    let out = acpx(
        &env,
        &agent,
        &[
            "--ttl",
            "1",
            "--format",
            "json",
            "exec",
            "/goal --max-rounds 2 tidy up",
        ],
    );
    assert_eq!(out.code, Some(0), "{out:?}");
    let offered = wire(&out.stdout).iter().any(|m| {
        m["params"]["update"]["availableCommands"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["name"] == "goal"))
    });
    assert!(offered, "{out:?}");
    assert_eq!(mock.requests().len(), 2);
    assert!(out.stdout.contains("round two"), "{out:?}");
    let events = load_consistent(&env.only_session());
    let statuses: Vec<&str> = of_type(&events, "goal/set")
        .iter()
        .map(|e| e["data"]["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["active", "budget-spent"]);
}

/// A mode keel cannot read back fails closed: a `sandbox/mode` naming an unknown mode loads
/// read-only (the load says so, the replay ends in it) and stderr says why.
#[test]
fn an_unknown_mode_in_the_log_fails_closed() {
    let env = Env::new();
    let mock = Mock::start("responses: []");
    let mut acp = Raw::start(&env, &mock.base_url());
    acp.init();
    let new = acp.request(2, "session/new", json!({"cwd": env.ws, "mcpServers": []}));
    let sid = new["result"]["sessionId"].as_str().unwrap().to_owned();
    let mode = acp.request(
        3,
        "session/set_mode",
        json!({"sessionId": sid, "modeId": "read-only"}),
    );
    assert!(mode.get("error").is_none(), "{mode}");
    assert_eq!(acp.close_and_wait().0, Some(0));
    // Another writer's spelling (or damage) where keel logged `read-only`.
    let path = env.only_session();
    let log = std::fs::read_to_string(&path).unwrap();
    assert_eq!(log.matches(r#""mode":"read-only""#).count(), 1, "{log}");
    std::fs::write(
        &path,
        log.replace(r#""mode":"read-only""#, r#""mode":"read-0nly""#),
    )
    .unwrap();

    let mut acp = Raw::start(&env, &mock.base_url());
    acp.init();
    acp.send_line(
        &json!({"jsonrpc": "2.0", "id": 2, "method": "session/load",
                "params": {"sessionId": sid, "cwd": env.ws, "mcpServers": []}})
        .to_string(),
    );
    let mut announced = Vec::new();
    let loaded = loop {
        let v = acp.wait_for(|v| v["id"] == 2 || v["method"] == "session/update");
        if v["id"] == 2 {
            break v;
        }
        if v["params"]["update"]["sessionUpdate"] == "current_mode_update" {
            announced.push(v["params"]["update"]["currentModeId"].clone());
        }
    };
    assert_eq!(
        loaded["result"]["modes"]["currentModeId"], "read-only",
        "{loaded}"
    );
    assert_eq!(announced.last(), Some(&json!("read-only")), "{announced:?}");
    let (code, stderr) = acp.close_and_stderr();
    assert_eq!(code, Some(0));
    assert!(
        stderr.contains(&format!(
            "keel: session {sid} has a sandbox/mode keel does not know at seq 3 (\"read-0nly\"): \
             failing closed, its sandbox is narrowed to read-only"
        )),
        "{stderr}"
    );
}

/// `keel acp` spoken to line by line.
struct Raw {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl Raw {
    fn start(env: &Env, base_url: &str) -> Raw {
        Raw::start_with(env, base_url, &[])
    }

    /// `keel GLOBAL_ARGS… acp`.
    fn start_with(env: &Env, base_url: &str, global: &[&str]) -> Raw {
        let mut cmd = env.keel(base_url);
        cmd.args(global)
            .arg("acp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
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

    fn send_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send_line(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string(),
        );
        self.response(id)
    }

    /// The next message answering `id` (notifications before it are skipped).
    fn response(&mut self, id: u64) -> Value {
        let deadline = Instant::now() + support::HANG_GUARD;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
                        panic!("keel wrote a line that is not JSON ({e}): {line}")
                    });
                    if v["id"] == id && v.get("method").is_none() {
                        return v;
                    }
                }
                Err(RecvTimeoutError::Timeout) => panic!("no answer to request {id}"),
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("keel closed stdout before answering {id}")
                }
            }
        }
    }

    /// The next message with an `error` and a null id (an answer to a line that had none).
    fn error_without_id(&mut self) -> Value {
        loop {
            let line = self.lines.recv_timeout(support::HANG_GUARD).unwrap();
            let v: Value = serde_json::from_str(&line).unwrap();
            if v.get("error").is_some() {
                return v;
            }
        }
    }

    fn wait_for(&mut self, pred: impl Fn(&Value) -> bool) -> Value {
        loop {
            let line = self.lines.recv_timeout(support::HANG_GUARD).unwrap();
            let v: Value = serde_json::from_str(&line).unwrap();
            if pred(&v) {
                return v;
            }
        }
    }

    fn close_and_wait(mut self) -> (Option<i32>, Duration) {
        drop(self.stdin.take());
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return (status.code(), started.elapsed());
            }
            if started.elapsed() > support::HANG_GUARD {
                let _ = self.child.kill();
                panic!("keel acp did not exit after stdin closed");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// [`Raw::close_and_wait`], then what keel wrote to stderr.
    fn close_and_stderr(mut self) -> (Option<i32>, String) {
        let stderr = self.child.stderr.take();
        let (code, _) = self.close_and_wait();
        let mut text = String::new();
        if let Some(mut stderr) = stderr {
            use std::io::Read;
            stderr.read_to_string(&mut text).unwrap();
        }
        (code, text)
    }

    fn init(&mut self) {
        let init = self.request(
            1,
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        );
        assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
    }
}

/// Malformed JSON-RPC, unknown methods, unsupported prompts, unknown and corrupt sessions:
/// each a JSON-RPC error with a message a person can act on, and the agent keeps serving.
#[test]
fn bad_input_gets_json_rpc_errors() {
    let env = Env::new();
    let mock = Mock::start("responses: []");
    // A corrupt session in the store: a header, then a line that is not JSON, then more.
    let corrupt_id = "0123456789abcdef-corrupt";
    let dir = env
        .home
        .join("sessions")
        .join("--corrupt--")
        .join(corrupt_id);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("session.jsonl"),
        format!(
            "{}\n{{not json\n{}\n",
            json!({"type":"session","version":0,"id":corrupt_id,"createdAt":"2026-01-01T00:00:00Z","delegationDepth":0}),
            json!({"type":"turn/start","seq":1,"time":1,"data":{"turn":1}})
        ),
    )
    .unwrap();

    let mut acp = Raw::start(&env, &mock.base_url());
    acp.init();

    acp.send_line("{this is not json");
    let parse = acp.error_without_id();
    assert_eq!(parse["error"]["code"], -32700, "{parse}");

    let unknown = acp.request(2, "session/teleport", json!({}));
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");

    let new = acp.request(3, "session/new", json!({"cwd": env.ws, "mcpServers": []}));
    let sid = new["result"]["sessionId"].as_str().unwrap().to_owned();

    let audio = acp.request(
        4,
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "audio", "mimeType": "audio/wav", "data": "UklGRg=="}]}),
    );
    assert_eq!(audio["error"]["code"], -32602, "{audio}");
    assert!(
        audio["error"]["message"]
            .as_str()
            .unwrap()
            .contains("audio"),
        "{audio}"
    );

    let nobody = acp.request(
        5,
        "session/prompt",
        json!({"sessionId": "no-such", "prompt": [{"type": "text", "text": "hi"}]}),
    );
    assert_eq!(nobody["error"]["code"], -32002, "{nobody}");
    assert!(
        nobody["error"]["message"]
            .as_str()
            .unwrap()
            .contains("session/new"),
        "{nobody}"
    );

    let relative = acp.request(
        6,
        "session/new",
        json!({"cwd": "not/absolute", "mcpServers": []}),
    );
    assert_eq!(relative["error"]["code"], -32602, "{relative}");

    let corrupt = acp.request(
        7,
        "session/load",
        json!({"sessionId": corrupt_id, "cwd": env.ws, "mcpServers": []}),
    );
    assert_eq!(corrupt["error"]["code"], -32602, "{corrupt}");
    let message = corrupt["error"]["message"].as_str().unwrap();
    assert!(message.contains(corrupt_id), "{message}");

    let mode = acp.request(
        8,
        "session/set_mode",
        json!({"sessionId": sid, "modeId": "yolo"}),
    );
    assert_eq!(mode["error"]["code"], -32602, "{mode}");

    // Loading a session this process has open replays it from the open agent.
    let reload = acp.request(
        10,
        "session/load",
        json!({"sessionId": sid, "cwd": env.ws, "mcpServers": []}),
    );
    assert_eq!(
        reload["result"]["modes"]["currentModeId"], "default",
        "{reload}"
    );

    // Still serving.
    let again = acp.request(9, "session/new", json!({"cwd": env.ws, "mcpServers": []}));
    assert!(again["result"]["sessionId"].is_string(), "{again}");
    let (code, _) = acp.close_and_wait();
    assert_eq!(code, Some(0));
}

/// The client disappears mid-turn: the turn is cancelled, the session log ends consistent
/// (the turn closed `aborted`) and the process exits.
#[test]
fn stdin_closed_mid_turn_cancels_and_exits() {
    let env = Env::new();
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "take forever" }
    behaviour: stall
    text: "never arrives"
"#,
    );
    let mut acp = Raw::start(&env, &mock.base_url());
    acp.init();
    let new = acp.request(2, "session/new", json!({"cwd": env.ws, "mcpServers": []}));
    let sid = new["result"]["sessionId"].as_str().unwrap().to_owned();
    acp.send_line(
        &json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
                "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "take forever"}]}})
        .to_string(),
    );
    // The turn is running once the model was asked.
    let deadline = Instant::now() + support::HANG_GUARD;
    while mock.requests().is_empty() {
        assert!(Instant::now() < deadline, "the model was never asked");
        std::thread::sleep(Duration::from_millis(20));
    }
    let (code, took) = acp.close_and_wait();
    assert_eq!(code, Some(0));
    assert!(took < Duration::from_secs(15), "exit took {took:?}");
    let events = load_consistent(&env.only_session());
    let ends = turn_end_reasons(&events);
    assert_eq!(ends.len(), 1, "{ends:?}");
    assert_eq!(ends[0]["kind"], "aborted", "{ends:?}");
}

/// A live prompt's updates over raw JSON-RPC: the prompt's response comes after its updates,
/// and session/cancel without a running prompt changes nothing.
#[test]
fn updates_precede_the_prompt_answer() {
    let env = Env::new();
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "say hi" }
    text: "Hi there, from keel."
"#,
    );
    let mut acp = Raw::start(&env, &mock.base_url());
    acp.init();
    let new = acp.request(2, "session/new", json!({"cwd": env.ws, "mcpServers": []}));
    let sid = new["result"]["sessionId"].as_str().unwrap().to_owned();
    acp.send_line(
        &json!({"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId": sid}}).to_string(),
    );
    acp.send_line(
        &json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
        "params": {"sessionId": sid, "prompt": [
            {"type": "text", "text": "say hi"},
            {"type": "resource", "resource": {"uri": "file:///x.txt", "text": "context text"}}
        ]}})
        .to_string(),
    );
    let mut text = String::new();
    let answer = acp.wait_for(|v| v["id"] == 3 || v["method"] == "session/update");
    let mut next = answer;
    loop {
        if next["id"] == 3 {
            break;
        }
        if next["params"]["update"]["sessionUpdate"] == "agent_message_chunk" {
            text.push_str(
                next["params"]["update"]["content"]["text"]
                    .as_str()
                    .unwrap(),
            );
        }
        next = acp.wait_for(|v| v["id"] == 3 || v["method"] == "session/update");
    }
    assert_eq!(next["result"]["stopReason"], "end_turn", "{next}");
    assert_eq!(text, "Hi there, from keel.");
    // The embedded resource reached the model inline.
    let last = support::last_user_text(&mock.requests()[0]);
    assert!(
        last.contains("say hi") && last.contains("context text"),
        "{last}"
    );
    let (code, _) = acp.close_and_wait();
    assert_eq!(code, Some(0));
}

/// The Python SDK's venv (crates/front/keel-acp/tests/python/.venv, the pinned
/// requirements.txt), made once when missing; `None` without a Python 3.
fn python_venv() -> Option<std::path::PathBuf> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../keel-acp/tests/python");
    let python = dir.join(".venv/bin/python");
    let marker = dir.join(".venv/installed");
    if marker.exists() {
        return Some(python);
    }
    let have_python = Command::new("python3")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !have_python {
        return None;
    }
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(".venv-install.lock"))
        .unwrap();
    {
        use std::os::fd::AsRawFd;
        // SAFETY: flock on a descriptor we own; released when `lock` is closed.
        let rc = unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) };
        assert_eq!(rc, 0);
    }
    if !marker.exists() {
        let status = Command::new("python3")
            .args(["-m", "venv"])
            .arg(dir.join(".venv"))
            .status()
            .unwrap();
        assert!(status.success(), "python3 -m venv failed");
        let status = Command::new(&python)
            .args(["-m", "pip", "install", "-q", "-r"])
            .arg(dir.join("requirements.txt"))
            .status()
            .unwrap();
        assert!(status.success(), "pip install -r requirements.txt failed");
        std::fs::write(&marker, "").unwrap();
    }
    drop(lock);
    Some(python)
}

/// One round trip with the Python SDK's `ClientSideConnection`: initialize, new session, a
/// prompt streamed back and answered `end_turn`.
#[test]
fn the_python_sdk_round_trips() {
    let Some(python) = python_venv() else {
        eprintln!("SKIPPED the_python_sdk_round_trips: no python3 on this machine");
        return;
    };
    let env = Env::new();
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "hello from python" }
    text: "Hello, Python client."
"#,
    );
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../keel-acp/tests/python/keel_acp_client.py");
    let mut cmd = Command::new(python);
    cmd.arg(script);
    let report = sdk_client(&env, &mock.base_url(), cmd, "python");
    assert_eq!(
        report["initialize"]["agentCapabilities"]["loadSession"], true,
        "{report}"
    );
    assert_eq!(report["stopReason"], "end_turn", "{report}");
    let text: String = report["updates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert_eq!(text, "Hello, Python client.");
    let id = report["sessionId"].as_str().unwrap();
    assert_eq!(support::session_id(&env.only_session()), id);
}

/// `/init` in an editor: keel's prompt asking the model to write `AGENTS.md`, with what follows
/// it, as in the terminal UI.
#[test]
fn init_asks_the_model_to_write_agents_md() {
    let env = Env::new();
    let mock = Mock::start("responses:\n  - text: \"I wrote AGENTS.md.\"\n");
    let mut acp = Raw::start(&env, &mock.base_url());
    acp.init();
    let new = acp.request(2, "session/new", json!({"cwd": env.ws, "mcpServers": []}));
    let sid = new["result"]["sessionId"].as_str().unwrap().to_owned();
    let answer = acp.request(
        3,
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "/init mind the CLI"}]}),
    );
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let asked = support::last_user_text(&mock.requests()[0]);
    assert!(
        asked.contains("write an AGENTS.md file") && asked.ends_with("mind the CLI"),
        "{asked}"
    );
    let (code, _) = acp.close_and_wait();
    assert_eq!(code, Some(0));
}

/// An MCP server's prompts, the workspace's custom commands (Markdown files) and `/compact`
/// are offered as slash commands (`available_commands_update`); a prompt `/name args` is
/// expanded to the command's text before the model sees it, and `/compact` compacts.
#[test]
fn slash_commands_are_offered_and_expanded() {
    let env = Env::new();
    env.write(
        ".claude/commands/greet.md",
        "---\ndescription: Greet someone\nargument-hint: NAME\n---\nSay hello to $ARGUMENTS, warmly.\n",
    );
    env.write(
        ".keel/config.toml",
        &format!(
            "[mcp_servers.everything]\ncommand = {:?}\nargs = [\"stdio\"]\n",
            support::node_bin("mcp-server-everything")
                .display()
                .to_string()
        ),
    );
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "weather in Paris, France" }
    text: "Sunny in Paris."
  - match: { last_user_contains: "Say hello to Ada, warmly." }
    text: "Hello, Ada!"
  - match: { last_message_contains: "Context compaction" }
    text: "The person asked about the weather in Paris and greeted Ada."
"#,
    );
    let mut acp = Raw::start(&env, &mock.base_url());
    acp.init();
    let new = acp.request(2, "session/new", json!({"cwd": env.ws, "mcpServers": []}));
    let sid = new["result"]["sessionId"].as_str().unwrap().to_owned();
    let offered =
        acp.wait_for(|v| v["params"]["update"]["sessionUpdate"] == "available_commands_update");
    assert_eq!(offered["params"]["sessionId"], sid.as_str());
    let commands = offered["params"]["update"]["availableCommands"]
        .as_array()
        .unwrap();
    let args_prompt = commands
        .iter()
        .find(|c| c["name"] == "mcp__everything__args-prompt")
        .unwrap_or_else(|| panic!("{offered}"));
    assert!(args_prompt["input"]["hint"].is_string(), "{args_prompt}");
    let greet = commands
        .iter()
        .find(|c| c["name"] == "greet")
        .unwrap_or_else(|| panic!("{offered}"));
    assert_eq!(greet["description"], "Greet someone");
    assert_eq!(greet["input"]["hint"], "NAME");
    assert!(commands.iter().any(|c| c["name"] == "compact"), "{offered}");
    assert!(commands.iter().any(|c| c["name"] == "init"), "{offered}");
    let answer = acp.request(
        3,
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "/mcp__everything__args-prompt Paris France"}]}),
    );
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let asked = support::last_user_text(&mock.requests()[0]);
    assert!(
        asked.contains("What's weather in Paris, France?"),
        "{asked}"
    );
    let answer = acp.request(
        4,
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "/greet Ada"}]}),
    );
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(
        support::last_user_text(&mock.requests()[1]),
        "Say hello to Ada, warmly."
    );
    // `/compact`: the summary request is the only one, and the outcome is the answer.
    acp.send_line(
        &json!({"jsonrpc": "2.0", "id": 5, "method": "session/prompt",
                "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "/compact"}]}})
        .to_string(),
    );
    let said = acp.wait_for(|v| v["params"]["update"]["sessionUpdate"] == "agent_message_chunk");
    let said = said["params"]["update"]["content"]["text"]
        .as_str()
        .unwrap();
    assert!(said.starts_with("Compacted the conversation"), "{said}");
    assert_eq!(acp.response(5)["result"]["stopReason"], "end_turn");
    assert_eq!(mock.requests().len(), 3, "one summary request");
    let (code, _) = acp.close_and_wait();
    assert_eq!(code, Some(0));
    let events = load_consistent(&env.only_session());
    assert_eq!(of_type(&events, "compaction/end").len(), 1);
}

/// Code Mode over ACP: a program's sub-call shows as a tool call of its own, and the approval
/// it needs (a command under the read-only mode) is put to the client naming that call; the
/// answer reaches the program, which goes on.
#[test]
fn an_approval_inside_a_program_is_asked_of_the_client() {
    let env = Env::new();
    let mock = Mock::start(support::PROGRAM_RUNS_A_COMMAND);
    let mut acp = Raw::start_with(&env, &mock.base_url(), &["--tools-mode", "code"]);
    acp.init();
    let new = acp.request(2, "session/new", json!({"cwd": env.ws, "mcpServers": []}));
    let sid = new["result"]["sessionId"].as_str().unwrap().to_owned();
    let mode = acp.request(
        3,
        "session/set_mode",
        json!({"sessionId": sid, "modeId": "read-only"}),
    );
    assert!(mode.get("error").is_none(), "{mode}");
    acp.send_line(
        &json!({"jsonrpc": "2.0", "id": 4, "method": "session/prompt",
                "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "run the program"}]}})
        .to_string(),
    );
    let seen = std::cell::RefCell::new(Vec::new());
    let asked = acp.wait_for(|v| {
        seen.borrow_mut().push(v.clone());
        v["method"] == "session/request_permission"
    });
    let sub = support::PROGRAM_COMMAND_CALL;
    assert_eq!(asked["params"]["toolCall"]["toolCallId"], sub, "{asked}");
    let announced = seen.borrow().iter().any(|v| {
        v["params"]["update"]["sessionUpdate"] == "tool_call"
            && v["params"]["update"]["toolCallId"] == sub
            && v["params"]["update"]["title"] == "bash echo from-the-program"
    });
    assert!(
        announced,
        "the sub-call was announced first: {:#?}",
        seen.borrow()
    );
    acp.send_line(
        &json!({"jsonrpc": "2.0", "id": asked["id"],
                "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}}})
        .to_string(),
    );
    let answer = acp.response(4);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let (code, _) = acp.close_and_wait();
    assert_eq!(code, Some(0));
    support::assert_program_command_approved(&load_consistent(&env.only_session()));
}

/// A call asking to run outside the sandbox (`sandbox_permissions` + `justification`) is asked
/// of the client with the model's reason and only "allow once" or "reject"; the write lands
/// outside the workspace only when allowed, and the log records both decisions.
#[test]
fn an_escalated_write_is_asked_of_the_client_and_lands_only_when_allowed() {
    let env = Env::new();
    let allowed = env.outside.join("allowed.txt");
    let rejected = env.outside.join("rejected.txt");
    let call = |id: &str, path: &std::path::Path| {
        format!(
            "  - tool_calls: [{{ id: {id}, name: write, arguments: {{ file_path: {:?}, content: \"x\", \
             sandbox_permissions: danger-full-access, justification: \"the fixture lives outside\" }} }}]\n",
            path.display().to_string()
        )
    };
    let script = format!(
        "responses:\n{}{}  - text: \"done\"\n",
        call("w1", &allowed),
        call("w2", &rejected)
    );
    let mock = Mock::start(&script);
    let mut acp = Raw::start(&env, &mock.base_url());
    acp.init();
    let new = acp.request(2, "session/new", json!({"cwd": env.ws, "mcpServers": []}));
    let sid = new["result"]["sessionId"].as_str().unwrap().to_owned();
    acp.send_line(
        &json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
                "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "write them"}]}})
        .to_string(),
    );
    for (call_id, option) in [("w1", "allow_once"), ("w2", "reject")] {
        let asked = acp.wait_for(|v| v["method"] == "session/request_permission");
        let params = &asked["params"];
        assert_eq!(params["toolCall"]["toolCallId"], call_id, "{asked}");
        let title = params["toolCall"]["title"].as_str().unwrap();
        assert!(title.starts_with("Outside the sandbox: "), "{asked}");
        let shown = params["toolCall"]["content"].to_string();
        assert!(shown.contains("the fixture lives outside"), "{asked}");
        let options: Vec<&str> = params["options"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["optionId"].as_str().unwrap())
            .collect();
        assert_eq!(options, ["allow_once", "reject"], "{asked}");
        acp.send_line(
            &json!({"jsonrpc": "2.0", "id": asked["id"],
                    "result": {"outcome": {"outcome": "selected", "optionId": option}}})
            .to_string(),
        );
    }
    let answer = acp.response(3);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let (code, _) = acp.close_and_wait();
    assert_eq!(code, Some(0));
    assert_eq!(std::fs::read_to_string(&allowed).unwrap(), "x");
    assert!(!rejected.exists());
    let events = load_consistent(&env.only_session());
    let decided: Vec<bool> = of_type(&events, "approval/decided")
        .iter()
        .map(|e| e["data"]["approved"].as_bool().unwrap())
        .collect();
    assert_eq!(decided, [true, false]);
    let results = of_type(&events, "tool/result");
    assert_eq!(
        results[0]["data"]["meta"]["sandboxEscalated"], "danger-full-access",
        "{}",
        results[0]
    );
    assert_eq!(
        results[1]["data"]["meta"]["code"], "DENIED",
        "{}",
        results[1]
    );
}

/// `keel acp` in a workspace the user has not trusted: the project's `.claude/settings.json`
/// hook does not run, the session says so (an agent message naming the file and `/trust`),
/// `/trust` is offered and answered without the model; `/trust yes` records the decision, and
/// a session opened next runs the hook.
#[test]
fn an_untrusted_workspace_is_said_in_the_session_and_trust_is_given_with_slash_trust() {
    let env = Env::untrusted();
    let marker = env.outside.join("hook-ran");
    let settings = json!({"hooks": {"UserPromptSubmit": [{"hooks": [
        {"type": "command", "command": format!("touch {}", marker.display())}
    ]}]}});
    env.write(".claude/settings.json", &settings.to_string());
    // Only prompts reach the model: `/trust` answers on its own.
    let mock = Mock::start(
        "responses:\n  - match: { last_user_contains: \"hello\" }\n    text: \"hi\"\n  - match: { last_user_contains: \"again\" }\n    text: \"hi again\"\n",
    );
    let mut acp = Raw::start(&env, &mock.base_url());
    acp.init();
    let new = acp.request(2, "session/new", json!({"cwd": env.ws, "mcpServers": []}));
    let sid = new["result"]["sessionId"].as_str().unwrap().to_owned();
    let said = acp.wait_for(|v| v["params"]["update"]["sessionUpdate"] == "agent_message_chunk");
    let text = said["params"]["update"]["content"]["text"]
        .as_str()
        .unwrap();
    assert!(
        text.contains("is not trusted") && text.contains(".claude/settings.json"),
        "{text}"
    );
    assert!(text.contains("/trust"), "{text}");
    let offered =
        acp.wait_for(|v| v["params"]["update"]["sessionUpdate"] == "available_commands_update");
    let commands = offered["params"]["update"]["availableCommands"]
        .as_array()
        .unwrap();
    assert!(commands.iter().any(|c| c["name"] == "trust"), "{offered}");

    let prompt = |acp: &mut Raw, id: u64, sid: &str, text: &str| {
        acp.request(
            id,
            "session/prompt",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": text}]}),
        )
    };
    let done = prompt(&mut acp, 3, &sid, "hello");
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    assert!(!marker.exists(), "the untrusted hook ran");

    let done = prompt(&mut acp, 4, &sid, "/trust");
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    let done = prompt(&mut acp, 5, &sid, "/trust yes");
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    let config = std::fs::read_to_string(env.home.join("config.toml")).unwrap();
    assert!(
        config.contains(&format!("[projects.{:?}]", env.ws.display().to_string()))
            && config.contains("trust_level = \"trusted\""),
        "{config}"
    );
    assert_eq!(mock.requests().len(), 1, "/trust reached the model");

    // A session opened now runs the project's hook.
    let new = acp.request(6, "session/new", json!({"cwd": env.ws, "mcpServers": []}));
    let sid = new["result"]["sessionId"].as_str().unwrap().to_owned();
    let mock_done = prompt(&mut acp, 7, &sid, "hello again");
    assert_eq!(mock_done["result"]["stopReason"], "end_turn", "{mock_done}");
    assert!(marker.exists(), "the trusted hook did not run");
    let (code, _) = acp.close_and_wait();
    assert_eq!(code, Some(0));
}

/// Image content blocks: a session whose model reads images (declared with `vision = true`)
/// is offered `promptCapabilities.image`, stores the image under `$KEEL_HOME/attachments` and
/// sends it to the model as an `image_url` part; bytes that are not an image are refused
/// naming the block. A model without vision is not offered images and refuses them naming
/// the model, before any request.
#[test]
fn images_reach_a_vision_model_and_are_refused_for_a_text_model() {
    // "GIF89a!" is enough of a GIF for keel's check.
    const GIF_B64: &str = "R0lGODlhIQ==";
    let env = Env::new();
    std::fs::write(
        env.home.join("config.toml"),
        "[models.\"seeing-model\"]\nvision = true\n",
    )
    .unwrap();
    let mock = Mock::start("responses:\n  - text: \"A tiny GIF.\"\n");

    let mut acp = Raw::start_with(&env, &mock.base_url(), &["--model", "seeing-model"]);
    let init = acp.request(
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    assert_eq!(
        init["result"]["agentCapabilities"]["promptCapabilities"]["image"], true,
        "{init}"
    );
    let new = acp.request(2, "session/new", json!({"cwd": env.ws, "mcpServers": []}));
    let sid = new["result"]["sessionId"].as_str().unwrap().to_owned();
    let bad = acp.request(
        3,
        "session/prompt",
        json!({"sessionId": sid, "prompt": [
            {"type": "text", "text": "what is this?"},
            {"type": "image", "mimeType": "image/png", "data": "aGVsbG8=", "uri": "file:///w/x.png"}
        ]}),
    );
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    let message = bad["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("file:///w/x.png is not an image"),
        "{message}"
    );
    assert_eq!(mock.requests().len(), 0);
    let answer = acp.request(
        4,
        "session/prompt",
        json!({"sessionId": sid, "prompt": [
            {"type": "text", "text": "what is this?"},
            {"type": "image", "mimeType": "image/gif", "data": GIF_B64}
        ]}),
    );
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let requests = mock.requests();
    assert_eq!(requests.len(), 1);
    let user = requests[0]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .unwrap()
        .clone();
    let urls: Vec<&str> = user["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["image_url"]["url"].as_str())
        .collect();
    assert_eq!(
        urls,
        vec![format!("data:image/gif;base64,{GIF_B64}")],
        "{user}"
    );
    let stored: Vec<_> = std::fs::read_dir(env.home.join("attachments"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(stored.len(), 1);
    let (code, _) = acp.close_and_wait();
    assert_eq!(code, Some(0));

    // The default model has no vision: no image capability, and an image is refused.
    let mut acp = Raw::start(&env, &mock.base_url());
    let init = acp.request(
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    assert_ne!(
        init["result"]["agentCapabilities"]["promptCapabilities"]["image"], true,
        "{init}"
    );
    let new = acp.request(2, "session/new", json!({"cwd": env.ws, "mcpServers": []}));
    let sid = new["result"]["sessionId"].as_str().unwrap().to_owned();
    let refused = acp.request(
        3,
        "session/prompt",
        json!({"sessionId": sid, "prompt": [
            {"type": "image", "mimeType": "image/gif", "data": GIF_B64}
        ]}),
    );
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("model deepseek-v4-flash does not read images"),
        "{message}"
    );
    assert_eq!(mock.requests().len(), 1, "a request was sent");
    let (code, _) = acp.close_and_wait();
    assert_eq!(code, Some(0));
}

const ASK_SCRIPT: &str = r#"
responses:
  - match: { last_user_contains: "ask with a form" }
    tool_calls:
      - id: form1
        name: ask_user_question
        arguments:
          questions: &questions
            - { id: lang, header: Language, question: "Which language?", options: [ { label: Rust, description: "fast" }, { label: Go } ] }
            - { id: features, question: "Which features?", multi_select: true, options: [ { label: auth }, { label: logging }, { label: metrics } ] }
            - { id: name, question: "What is the project called?" }
  - match: { last_tool_result_contains: "features: auth, metrics" }
    text: "FORM DONE"
  - match: { last_user_contains: "ask by permission" }
    tool_calls:
      - { id: perm1, name: ask_user_question, arguments: { questions: *questions } }
  - match: { last_tool_result_contains: "name: (no answer)" }
    text: "PERMISSION DONE"
"#;

/// `ask_user_question` over ACP with the TypeScript SDK's client: a client with form
/// elicitation answers one `elicitation/create` form; one without is asked each question that
/// has options as a `session/request_permission` (one option per label, then Skip), and the
/// free-text question goes unanswered.
#[test]
fn ask_user_question_is_a_form_or_a_permission_choice() {
    let env = Env::new();
    let mock = Mock::start(ASK_SCRIPT);
    let report = node_client(&env, &mock.base_url(), "ask");
    let form = &report["form"];
    assert_eq!(form["stopReason"], "end_turn", "{report}");
    assert_eq!(form["text"], "FORM DONE", "{report}");
    assert_eq!(form["permissions"], 0, "{report}");
    let forms = form["forms"].as_array().unwrap();
    assert_eq!(forms.len(), 1, "{report}");
    assert_eq!(forms[0]["mode"], "form");
    assert_eq!(forms[0]["toolCallId"], "form1");
    assert_eq!(forms[0]["sessionId"], form["sessionId"]);
    let props = &forms[0]["requestedSchema"]["properties"];
    assert_eq!(props["lang"]["enum"], json!(["Rust", "Go"]), "{report}");
    assert_eq!(props["lang"]["title"], "Language: Which language?");
    assert_eq!(props["lang"]["description"], "Rust: fast");
    assert_eq!(props["features"]["type"], "array");
    assert_eq!(
        props["features"]["items"]["enum"],
        json!(["auth", "logging", "metrics"])
    );
    assert_eq!(props["name"]["type"], "string");

    let perm = &report["permission"];
    assert_eq!(perm["stopReason"], "end_turn", "{report}");
    assert_eq!(perm["text"], "PERMISSION DONE", "{report}");
    assert_eq!(
        perm["permissions"],
        json!([
            {"title": "Language: Which language?", "options": [
                ["option-0", "Rust", "allow_once"], ["option-1", "Go", "allow_once"], ["skip", "Skip", "reject_once"]
            ]},
            {"title": "Which features?", "options": [
                ["option-0", "auth", "allow_once"], ["option-1", "logging", "allow_once"],
                ["option-2", "metrics", "allow_once"], ["skip", "Skip", "reject_once"]
            ]}
        ]),
        "{report}"
    );

    // Both sessions log the question and what came back.
    let mut answered: Vec<Value> = env
        .session_files()
        .iter()
        .flat_map(|p| {
            of_type(&load_consistent(p), "question/answered")
                .into_iter()
                .map(|e| e["data"].clone())
                .collect::<Vec<_>>()
        })
        .collect();
    answered.sort_by_key(|d| d["callId"].as_str().unwrap().to_owned());
    assert_eq!(
        answered,
        vec![
            json!({"callId": "form1", "by": "user",
                   "answers": {"lang": "Go", "features": ["auth", "metrics"], "name": "keelboat"}}),
            json!({"callId": "perm1", "by": "user",
                   "answers": {"lang": "Go", "features": ["auth"]}}),
        ]
    );
}

/// The TypeScript SDK client: a prompt's `bash` changes a file, `/rewind 1` puts it back and
/// `/rewind undo` returns the change, each answered as an agent message.
#[test]
fn rewind_over_acp_puts_the_files_back_and_undo_returns_them() {
    let env = Env::new();
    env.write("notes.txt", "original\n");
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "change the notes" }
    tool_calls: [{ id: b1, name: bash, arguments: { command: "echo changed > notes.txt", description: "change" } }]
  - match: { last_tool_result_contains: "" }
    text: "Notes changed."
"#,
    );
    let report = node_client(&env, &mock.base_url(), "rewind");
    assert_eq!(report["afterChange"], "changed\n", "{report}");
    assert_eq!(report["afterRewind"], "original\n", "{report}");
    assert_eq!(report["afterUndo"], "changed\n", "{report}");
    let said = report["rewind"]["text"].as_str().unwrap();
    assert!(
        said.contains("Rewound the files to before turn 1"),
        "{report}"
    );
    assert!(
        report["undo"]["text"]
            .as_str()
            .unwrap()
            .contains("before the last rewind"),
        "{report}"
    );
    assert!(
        report["commands"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c == "rewind"),
        "{report}"
    );
    // Only the first prompt went to the model.
    assert_eq!(mock.requests().len(), 2);
}
