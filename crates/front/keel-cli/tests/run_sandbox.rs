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

/// Run `keel run` with `flags` against a model that calls `bash` once per command, in order,
/// then answers; the run must succeed. Returns its output and the session's events.
fn run_commands(env: &Env, flags: &[&str], commands: &[&str]) -> (Output, Vec<Value>) {
    let mut script = String::from("responses:\n");
    for (i, command) in commands.iter().enumerate() {
        script.push_str(&format!(
            "  - tool_calls: [{{ id: c{i}, name: bash, arguments: {{ command: {command:?} }} }}]\n"
        ));
    }
    script.push_str("  - text: \"done\"\n");
    let mock = Mock::start(&script);
    let out = run(env
        .keel(&mock.base_url())
        .args(["--approval", "auto"])
        .args(flags)
        .args(["run", "run the commands"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    let events = load_consistent(&env.only_session());
    (out, events)
}

fn landlock(event: &Value) -> bool {
    event["enforcement"]
        .as_str()
        .is_some_and(|e| e.starts_with("landlock"))
}

#[test]
fn workspace_write_confines_bash_and_logs_the_enforcement() {
    let env = Env::new();
    let escape = format!("echo x > {}/escaped", env.outside.display());
    let (out, events) = run_commands(
        &env,
        &[],
        &[&escape, "echo y > inside.txt && cat inside.txt"],
    );
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
    let escape = format!("echo x > {}/escaped", env.outside.display());
    let (_, events) = run_commands(&env, &["--sandbox", "full-access"], &[&escape]);
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
    let connect = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
    let (out, events) = run_commands(&env, &["-c", "sandbox.network=false"], &[&connect]);
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

/// Headless, nobody can approve a call that asks to leave the sandbox: it is refused naming
/// `sandbox_permissions`, even under `--approval auto` (which answers for the user on
/// ordinary approvals, never on escalations), the turn goes on, and the log records the ask.
#[test]
fn a_headless_run_refuses_an_escalation_naming_the_flag() {
    for approval in ["ask", "auto"] {
        let env = Env::new();
        let target = env.outside.join("escalated");
        let script = format!(
            "responses:\n  - tool_calls: [{{ id: c1, name: bash, arguments: {{ command: \"touch {}\", \
             sandbox_permissions: danger-full-access, justification: \"needs the outside dir\" }} }}]\n  \
             - text: \"done\"\n",
            target.display()
        );
        let mock = Mock::start(&script);
        let out = run(env
            .keel(&mock.base_url())
            .args(["--approval", approval])
            .args(["run", "touch it"]));
        assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
        assert!(
            !target.exists(),
            "ran unconfined under --approval {approval}"
        );
        let events = load_consistent(&env.only_session());
        let result = &of_type(&events, "tool/result")[0]["data"];
        let text = result["message"]["content"][0]["content"][0]["text"]
            .as_str()
            .unwrap();
        assert!(
            text.starts_with("DENIED: 'sandbox_permissions' needs a person"),
            "{text}"
        );
        let asked = &of_type(&events, "approval/asked")[0]["data"];
        assert!(
            asked["reason"]
                .as_str()
                .unwrap()
                .contains("needs the outside dir"),
            "{asked}"
        );
        let decided = &of_type(&events, "approval/decided")[0]["data"];
        assert_eq!(decided["approved"], false);
        assert_eq!(decided["by"], "headless", "{decided}");
        assert!(out.stdout.contains("done"), "{}", out.stdout);
    }
}
