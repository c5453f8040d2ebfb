//! End-to-end: the OS sandbox of `bash` with the real binary. Under `workspace-write` a
//! command's write outside the workspace fails with the OS error in the tool result; the
//! session's `sandbox/mode` event says what the kernel enforces; `full-access` is unconfined;
//! `-c sandbox.network=false` closes TCP.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::Value;
use support::*;

fn sandbox_event(events: &[Value]) -> Value {
    of_type(events, "sandbox/mode")[0]["data"].clone()
}

fn landlock(event: &Value) -> bool {
    event["enforcement"]
        .as_str()
        .is_some_and(|e| e.starts_with("landlock"))
}

#[test]
fn workspace_write_confines_bash_and_logs_the_enforcement() {
    let env = Env::new();
    let outside = env.outside.display().to_string();
    let mock = Mock::start(&format!(
        r#"
responses:
  - tool_calls: [{{ id: esc, name: bash, arguments: {{ command: "echo x > {outside}/escaped" }} }}]
  - tool_calls: [{{ id: ins, name: bash, arguments: {{ command: "echo y > inside.txt && cat inside.txt" }} }}]
  - text: "done"
"#
    ));
    let out = run(env
        .keel(&mock.base_url())
        .args(["--approval", "auto", "run", "try both"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    let events = load_consistent(&env.only_session());
    let mode = sandbox_event(&events);
    assert_eq!(mode["mode"], "workspace-write");
    if !landlock(&mode) {
        // No Landlock here: keel must say so, at start and in the log.
        assert!(
            out.stderr.contains("sandbox workspace-write: none"),
            "{}",
            out.stderr
        );
        return;
    }
    assert!(!out.stderr.contains("warning: sandbox"), "{}", out.stderr);
    let results = tool_results(&events);
    assert!(
        results[0].1.contains("Permission denied"),
        "the OS error reaches the model: {results:?}"
    );
    assert!(!env.outside.join("escaped").exists());
    assert!(results[1].1.starts_with("y\n"), "{results:?}");
}

#[test]
fn full_access_leaves_bash_unconfined() {
    let env = Env::new();
    let outside = env.outside.display().to_string();
    let mock = Mock::start(&format!(
        r#"
responses:
  - tool_calls: [{{ id: esc, name: bash, arguments: {{ command: "echo x > {outside}/escaped" }} }}]
  - text: "done"
"#
    ));
    let out = run(env.keel(&mock.base_url()).args([
        "--approval",
        "auto",
        "--sandbox",
        "full-access",
        "run",
        "write outside",
    ]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    let events = load_consistent(&env.only_session());
    assert_eq!(sandbox_event(&events)["enforcement"], "none (full-access)");
    assert_eq!(
        std::fs::read_to_string(env.outside.join("escaped")).unwrap(),
        "x\n"
    );
}

#[test]
fn a_closed_network_is_enforced_or_reported() {
    let env = Env::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let mock = Mock::start(&format!(
        r#"
responses:
  - tool_calls: [{{ id: net, name: bash, arguments: {{ command: "exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected" }} }}]
  - text: "done"
"#
    ));
    let out = run(env.keel(&mock.base_url()).args([
        "--approval",
        "auto",
        "-c",
        "sandbox.network=false",
        "run",
        "connect",
    ]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    let events = load_consistent(&env.only_session());
    let mode = sandbox_event(&events);
    let enforcement = mode["enforcement"].as_str().unwrap();
    if enforcement.contains("TCP closed") {
        let results = tool_results(&events);
        assert!(
            results[0].1.contains("Permission denied") && !results[0].1.contains("connected"),
            "{results:?}"
        );
    } else {
        assert!(out.stderr.contains("warning: sandbox"), "{}", out.stderr);
    }
}
