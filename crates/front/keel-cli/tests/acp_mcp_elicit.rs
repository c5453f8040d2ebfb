//! An MCP server's elicitation reaching the editor over ACP: `keel acp` driven by the
//! TypeScript ACP SDK's client (`crates/front/keel-acp/tests/node/mcp_elicit_client.mjs`),
//! which declares form elicitation; the MCP server is `oauth-server.mjs` without auth, whose
//! `ask` tool elicits a form and echoes the answer. The model is the loopback mock.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod support;

use serde_json::{Value, json};
use std::io::BufRead as _;
use std::process::{Command, Stdio};
use support::{Env, Mock, ensure_acp_node_modules, ensure_node_modules, load_consistent};

/// Killed on drop, a failing test included.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn an_mcp_elicitation_is_an_acp_form_whose_answers_reach_the_server() {
    let env = Env::new();
    let mut server = Command::new("node")
        .arg(ensure_node_modules().join("oauth-server.mjs"))
        .env("MODE", "open")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = server.stdout.take().unwrap();
    let _server = Killed(server);
    let mut first = String::new();
    std::io::BufReader::new(stdout)
        .read_line(&mut first)
        .unwrap();
    let url = serde_json::from_str::<Value>(&first).unwrap()["url"]
        .as_str()
        .unwrap()
        .to_owned();
    // The user's own configuration (a project's would wait for trust).
    std::fs::write(
        env.home.join("config.toml"),
        format!("[mcp_servers.form]\nurl = {url:?}\n"),
    )
    .unwrap();
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "ask me" }
    tool_calls:
      - { id: e1, name: mcp__form__ask, arguments: {} }
  - match: { last_tool_result_contains: "action=accept" }
    text: "The server heard you."
"#,
    );
    let args = vec![
        "--cwd".to_owned(),
        env.ws.display().to_string(),
        "--base-url".to_owned(),
        mock.base_url(),
        "acp".to_owned(),
    ];
    let mut cmd = Command::new("node");
    cmd.arg(ensure_acp_node_modules().join("mcp_elicit_client.mjs"))
        .current_dir(&env.ws)
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
    assert_eq!(out.code, Some(0), "{out:?}");
    let report: Value = serde_json::from_str(out.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(report["stopReason"], "end_turn", "{report}");
    assert_eq!(report["text"], "The server heard you.", "{report}");
    let forms = report["forms"].as_array().unwrap();
    assert_eq!(forms.len(), 1, "{report}");
    let props = &forms[0]["requestedSchema"]["properties"];
    assert_eq!(props["color"]["enum"], json!(["red", "green"]), "{report}");
    assert_eq!(props["name"]["type"], "string", "{report}");
    let events = load_consistent(&env.only_session());
    let results = support::tool_results(&events);
    assert!(
        results[0]
            .1
            .contains(r#"action=accept content={"name":"Ada","color":"green"}"#),
        "{results:?}"
    );
}
