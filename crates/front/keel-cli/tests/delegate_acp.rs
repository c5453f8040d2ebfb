//! The ACP delegation provider end to end through two real processes: a supervisor `keel run`
//! (the `delegate` row with `provider = "acp"`) starts `keel acp` — the binary under test — as
//! an Agent Client Protocol agent and drives one prompt turn as its client: the answer comes
//! back framed as untrusted data, the delegate's updates become the job's log, permission
//! requests are answered by the authority grant, and bad agent commands fail with a message
//! naming the command.
//!
//! One mock model serves both processes; responses are told apart by what each request ends
//! with.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use support::{Env, Mock, git, load_consistent, of_type, run};

const KEY: &str = "secret-route-key-acp";
const ADD: &str = "#!/bin/sh\necho $(( $1 - $2 ))\n";

/// A git workspace with a buggy add.sh committed and the delegate row on with `provider =
/// "acp"` and `extra` config lines (default command: the keel under test with `acp`).
fn project(extra: &str) -> Env {
    let env = Env::new();
    env.write("add.sh", ADD);
    let keel = env!("CARGO_BIN_EXE_keel");
    let command = if extra.contains("acp_command") {
        String::new()
    } else {
        format!("acp_command = [\"{keel}\", \"acp\"]\n")
    };
    env.write(
        ".keel/config.toml",
        &format!(
            "[[plugins]]\nid = \"delegate\"\nenabled = true\n[plugins.config]\nprovider = \"acp\"\n{command}{extra}"
        ),
    );
    git(&env.ws, &["init", "-q"]);
    git(&env.ws, &["add", "-A"]);
    git(&env.ws, &["commit", "-qm", "start"]);
    env
}

/// `keel` on the mock with the key in MY_ROUTE_KEY, named by --api-key-env.
fn keel(env: &Env, mock: &Mock) -> Command {
    let mut cmd = env.keel(&mock.base_url());
    cmd.env("MY_ROUTE_KEY", KEY)
        .args(["--api-key-env", "MY_ROUTE_KEY", "--approval", "auto"]);
    cmd
}

fn texts(events: &[Value]) -> String {
    events
        .iter()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

fn header(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    serde_json::from_str(text.lines().next().unwrap()).unwrap()
}

/// The supervisor's session and the delegate's (`origin: "acp"`).
fn sessions(env: &Env) -> (PathBuf, PathBuf) {
    let sup = env.only_session_where(|h| h["origin"] != "acp");
    let delegate = env.only_session_where(|h| h["origin"] == "acp");
    (sup, delegate)
}

fn job_dir(env: &Env, sup: &Path, job: &str) -> PathBuf {
    env.home
        .join("delegations")
        .join(support::session_id(sup))
        .join(job)
}

#[test]
fn a_supervisor_delegates_to_keel_acp_and_gets_its_answer() {
    let env = project("");
    let mock = Mock::start(
        r#"
responses:
  - match: { last_message_contains: "SUPERVISE" }
    tool_calls:
      - { id: s1, name: delegate, arguments: { prompt: "DELEGATED: why does add.sh not add?", label: look } }
  - match: { last_message_contains: "DELEGATED" }
    tool_calls:
      - { id: d0, name: todo_write, arguments: { todos: [ { content: "read add.sh", status: in_progress } ] } }
      - { id: d1, name: read, arguments: { path: add.sh } }
  - match: { last_tool_result_contains: "$1 - $2" }
    text: "DELEGATE-ANSWER: add.sh subtracts; it should say $1 + $2"
  # The supervisor's next requests, in order: the end of its first turn, then the turn the
  # job's completion opens. The plan report joins one of them, or — when it arrives while
  # the first turn still runs — adds a step to it: then there is one request more.
  - match: { last_tool_result_contains: "Started delegation delegate-1" }
    text: "waiting for the delegate"
  - match: { last_tool_result_contains: "Started delegation delegate-1" }
    text: "SUPERVISOR-DONE"
  - match: { last_tool_result_contains: "Started delegation delegate-1" }
    text: "SUPERVISOR-DONE"
"#,
    );
    let out = run(keel(&env, &mock).args(["run", "SUPERVISE the look"]));
    if out.code != Some(0) {
        for f in env.session_files() {
            eprintln!("{}", std::fs::read_to_string(f).unwrap());
        }
    }
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("SUPERVISOR-DONE"), "{out:?}");
    assert_eq!(env.read("add.sh"), ADD);

    let (sup, delegate) = sessions(&env);
    let all = texts(&load_consistent(&sup));
    assert!(
        all.contains("<untrusted-delegate-output job=\\\"delegate-1\\\">"),
        "{all}"
    );
    assert!(all.contains("DELEGATE-ANSWER: add.sh subtracts"), "{all}");

    // The delegate is keel acp's own session in the workspace, run read-only, on the same
    // model route with the key passed explicitly.
    let child = load_consistent(&delegate);
    let lineage = header(&delegate);
    assert_eq!(lineage["cwd"], env.ws.display().to_string());
    assert_eq!(
        lineage["parentSession"],
        support::session_id(&sup),
        "{lineage}"
    );
    assert_eq!(lineage["delegationDepth"], 1, "{lineage}");
    let calls = support::tool_calls(&child);
    assert_eq!(
        calls,
        vec![
            ("d0".to_owned(), "todo_write".to_owned()),
            ("d1".to_owned(), "read".to_owned())
        ]
    );
    let auth: Vec<String> = mock
        .request_headers()
        .iter()
        .map(|h| h.get("authorization").unwrap_or("").to_owned())
        .collect();
    assert!(matches!(auth.len(), 5 | 6), "{auth:?}");
    assert!(
        auth.iter().all(|a| a == &format!("Bearer {KEY}")),
        "{auth:?}"
    );
    assert_eq!(
        of_type(&child, "sandbox/mode")[0]["data"]["mode"],
        "read-only",
        "a read-only delegation runs keel acp under --sandbox read-only"
    );

    // The job: completed, its answer, the ACP session as its chain, its log.
    let dir = job_dir(&env, &sup, "acp-1");
    let record: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("job.json")).unwrap()).unwrap();
    assert_eq!(record["job"]["status"], "completed", "{record}");
    assert_eq!(record["job"]["mode"], "read-only", "{record}");
    assert_eq!(
        record["final_text"],
        "DELEGATE-ANSWER: add.sh subtracts; it should say $1 + $2"
    );
    assert_eq!(
        record["lineage"]["chain_id"],
        support::session_id(&delegate),
        "{record}"
    );
    let log = std::fs::read_to_string(dir.join("log.txt")).unwrap();
    assert!(log.contains("→ read read add.sh"), "{log}");
    assert!(log.contains("← read add.sh ok"), "{log}");
    assert!(
        log.contains("assistant: DELEGATE-ANSWER: add.sh subtracts"),
        "{log}"
    );
    // Its plan update was a progress report: it reached the supervisor as untrusted data.
    assert!(log.contains("plan: [>] read add.sh"), "{log}");
    let notices: Vec<String> = of_type(&load_consistent(&sup), "user/message")
        .iter()
        .map(|e| e.to_string())
        .filter(|t| t.contains("plan: [>] read add.sh"))
        .collect();
    assert_eq!(notices.len(), 1, "{all}");
    assert!(notices[0].contains("progress"), "{}", notices[0]);
}

#[test]
fn a_read_only_delegate_is_refused_a_write_and_says_so() {
    let env = project("");
    let mock = Mock::start(
        r#"
responses:
  - match: { last_message_contains: "SUPERVISE" }
    tool_calls:
      - { id: s1, name: delegate, arguments: { prompt: "DELEGATED: fix add.sh" } }
  - match: { last_message_contains: "DELEGATE-ANSWER" }
    text: "SUPERVISOR-DONE"
  - match: { last_tool_result_contains: "Started delegation delegate-1" }
    text: "waiting for the delegate"
  - match: { last_message_contains: "DELEGATED" }
    tool_calls:
      - { id: d1, name: edit, arguments: { path: add.sh, old_string: "$1 - $2", new_string: "$1 + $2" } }
  - match: { last_tool_result_contains: "read-only" }
    tool_calls:
      - { id: d2, name: bash, arguments: { command: "echo pwned > add.sh" } }
  - match: { last_tool_result_contains: "rejected" }
    text: "DELEGATE-ANSWER: I was not allowed to change add.sh (the write was rejected)"
"#,
    );
    let out = run(keel(&env, &mock).args(["run", "SUPERVISE the fix"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("SUPERVISOR-DONE"), "{out:?}");
    // Neither the edit nor the command changed anything.
    assert_eq!(env.read("add.sh"), ADD);

    let (sup, delegate) = sessions(&env);
    let child = load_consistent(&delegate);
    // keel's read-only sandbox refused the edit itself; the command was put to the client
    // (session/request_permission) and the provider rejected it.
    let results = support::tool_results(&child);
    assert!(
        results[0].2 && results[0].1.contains("read-only"),
        "{results:?}"
    );
    assert!(results[1].2, "{results:?}");
    let decided = of_type(&child, "approval/decided");
    assert_eq!(decided.len(), 1, "{decided:?}");
    assert_eq!(decided[0]["data"]["approved"], false, "{decided:?}");
    assert_eq!(decided[0]["data"]["callId"], "d2", "{decided:?}");

    let dir = job_dir(&env, &sup, "acp-1");
    let log = std::fs::read_to_string(dir.join("log.txt")).unwrap();
    assert!(
        log.contains("permission rejected (read-only authority): execute bash echo pwned > add.sh"),
        "{log}"
    );
    assert!(!log.contains("permission allowed"), "{log}");
    let all = texts(&load_consistent(&sup));
    assert!(
        all.contains("DELEGATE-ANSWER: I was not allowed to change add.sh"),
        "{all}"
    );
}

#[test]
fn a_write_delegate_is_allowed_inside_its_worktree_and_returns_a_patch() {
    let env = project("");
    let mock = Mock::start(
        r#"
responses:
  - match: { last_message_contains: "SUPERVISE" }
    tool_calls:
      - { id: s1, name: delegate, arguments: { prompt: "DELEGATED: fix add.sh", mode: write } }
  - match: { last_message_contains: "DELEGATE-ANSWER" }
    text: "SUPERVISOR-DONE"
  - match: { last_tool_result_contains: "Started delegation delegate-1" }
    text: "waiting for the delegate"
  - match: { last_message_contains: "DELEGATED" }
    tool_calls:
      - { id: d0, name: read, arguments: { file_path: add.sh } }
  - match: { last_tool_result_contains: "<path>add.sh</path>" }
    tool_calls:
      - { id: d1, name: edit, arguments: { path: add.sh, old_string: "$1 - $2", new_string: "$1 + $2" } }
  - match: { last_tool_result_contains: "Edited add.sh" }
    text: "DELEGATE-ANSWER: fixed"
"#,
    );
    let out = run(keel(&env, &mock).args(["run", "SUPERVISE the fix"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("SUPERVISOR-DONE"), "{out:?}");
    // The workspace is untouched: the change is a patch from the isolated worktree.
    assert_eq!(env.read("add.sh"), ADD);
    let (sup, delegate) = sessions(&env);
    assert!(
        header(&delegate)["cwd"]
            .as_str()
            .unwrap()
            .ends_with("acp-1/worktree"),
        "{}",
        header(&delegate)
    );
    assert_eq!(
        of_type(&load_consistent(&delegate), "sandbox/mode")[0]["data"]["mode"],
        "workspace-write"
    );
    let patch = job_dir(&env, &sup, "acp-1").join("changes.patch");
    let diff = std::fs::read_to_string(&patch).unwrap();
    assert!(diff.contains("+echo $(( $1 + $2 ))"), "{diff}");
    let all = texts(&load_consistent(&sup));
    assert!(all.contains(&patch.display().to_string()), "{all}");
    let worktrees = git(&env.ws, &["worktree", "list"]);
    assert_eq!(worktrees.lines().count(), 1, "{worktrees}");
}

/// The supervisor's one `delegate` call against a broken agent command: its tool result.
fn delegate_result(extra: &str) -> String {
    let env = project(extra);
    let mock = Mock::start(
        r#"
responses:
  - match: { last_message_contains: "SUPERVISE" }
    tool_calls:
      - { id: s1, name: delegate, arguments: { prompt: "DELEGATED: anything" } }
  - text: "SUPERVISOR-DONE"
"#,
    );
    let out = run(keel(&env, &mock).args(["run", "SUPERVISE it"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("SUPERVISOR-DONE"), "{out:?}");
    let sup = env.only_session();
    let results = support::tool_results(&load_consistent(&sup));
    results[0].1.clone()
}

#[test]
fn broken_agent_commands_fail_with_a_message_naming_the_command() {
    let missing = delegate_result("acp_command = [\"/nonexistent/acp-agent\", \"--stdio\"]\n");
    assert!(missing.contains("[not-ready]"), "{missing}");
    assert!(
        missing.contains("`/nonexistent/acp-agent --stdio` cannot be run"),
        "{missing}"
    );

    let exits = delegate_result("acp_command = [\"sh\", \"-c\", \"echo dying >&2; exit 3\"]\n");
    assert!(exits.contains("[delegate-failed]"), "{exits}");
    assert!(
        exits.contains("the ACP agent `sh -c echo dying >&2; exit 3` exited 3 during initialize"),
        "{exits}"
    );
    assert!(exits.contains("dying"), "stderr is quoted: {exits}");

    let garbage = delegate_result(
        "acp_command = [\"sh\", \"-c\", \"echo 'Welcome to my agent'; sleep 30\"]\nacp_handshake_sec = 2\n",
    );
    assert!(garbage.contains("[delegate-failed]"), "{garbage}");
    assert!(garbage.contains("initialize"), "{garbage}");
    assert!(
        garbage.contains("not JSON-RPC") && garbage.contains("Welcome to my agent"),
        "{garbage}"
    );
}

#[test]
fn job_kill_cancels_the_acp_turn_and_ends_the_agent() {
    let env = project("");
    let mock = Mock::start(
        r#"
responses:
  - match: { last_message_contains: "SUPERVISE" }
    tool_calls:
      - { id: s1, name: delegate, arguments: { prompt: "DELEGATED: a long job", mode: write } }
  - match: { last_tool_result_contains: "Started delegation delegate-1" }
    behaviour: stall
    stall_ms: 1500
    tool_calls:
      - { id: s2, name: job_kill, arguments: { job_id: delegate-1 } }
  - match: { last_tool_result_contains: "Killed job delegate-1" }
    behaviour: stall
    stall_ms: 3000
    tool_calls:
      - { id: s3, name: delegate_result, arguments: { job_id: delegate-1 } }
  - match: { last_tool_result_contains: "[cancelled]" }
    text: "SUITE-DONE"
  - match: { last_message_contains: "DELEGATED" }
    tool_calls:
      - { id: d1, name: bash, arguments: { command: "sleep 30" } }
"#,
    );
    let started = std::time::Instant::now();
    let out = run(keel(&env, &mock).args(["run", "SUPERVISE it"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("SUITE-DONE"), "{out:?}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(25),
        "the delegate's sleep was not waited out"
    );
    let (sup, delegate) = sessions(&env);
    let results = support::tool_results(&load_consistent(&sup));
    let s3 = &results.iter().find(|r| r.0 == "s3").unwrap().1;
    assert!(s3.contains("delegate-1 [cancelled]"), "{s3}");
    // keel acp took session/cancel: its turn ended aborted, its log is consistent.
    let child = load_consistent(&delegate);
    let ends = support::turn_end_reasons(&child);
    assert_eq!(ends.last().unwrap()["kind"], "aborted", "{ends:?}");
    let log = std::fs::read_to_string(job_dir(&env, &sup, "acp-1").join("log.txt")).unwrap();
    assert!(log.contains("cancelled: session/cancel sent"), "{log}");
}

#[test]
fn a_steer_cancels_the_turn_and_prompts_the_same_session_with_the_guidance() {
    let env = project("");
    let mock = Mock::start(
        r#"
responses:
  - match: { last_message_contains: "SUPERVISE" }
    tool_calls:
      - { id: s1, name: delegate, arguments: { prompt: "DELEGATED: look around", mode: write } }
  - match: { last_tool_result_contains: "Started delegation delegate-1" }
    behaviour: stall
    stall_ms: 1500
    tool_calls:
      - { id: s2, name: delegate_steer, arguments: { job_id: delegate-1, guidance: "GUIDANCE-XYZ: check add.sh" } }
  - match: { last_message_contains: "DELEGATE-ANSWER" }
    text: "SUPERVISOR-DONE"
  - match: { last_tool_result_contains: "ccepted" }
    text: "steered; waiting"
  - match: { last_user_contains: "GUIDANCE-XYZ" }
    text: "DELEGATE-ANSWER: steered to add.sh"
  - match: { last_message_contains: "DELEGATED" }
    tool_calls:
      - { id: d1, name: bash, arguments: { command: "sleep 20; echo slept" } }
  - match: { last_tool_result_contains: "slept" }
    text: "DELEGATE-ANSWER: never steered"
"#,
    );
    let out = run(keel(&env, &mock).args(["run", "SUPERVISE a look"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("SUPERVISOR-DONE"), "{out:?}");
    let (sup, delegate) = sessions(&env);
    let all = texts(&load_consistent(&sup));
    assert!(
        all.contains("Guidance delivered to delegate-1 (accepted)"),
        "{all}"
    );
    assert!(all.contains("DELEGATE-ANSWER: steered to add.sh"), "{all}");
    assert!(!all.contains("never steered"), "{all}");
    // One ACP session, two turns: the first aborted by session/cancel, the second the
    // guidance as the person's next message.
    let child = load_consistent(&delegate);
    let ends: Vec<Value> = support::turn_end_reasons(&child)
        .iter()
        .map(|r| r["kind"].clone())
        .collect();
    assert_eq!(ends, vec!["aborted", "completed"], "{ends:?}");
    let users: Vec<String> = of_type(&child, "user/message")
        .iter()
        .map(|e| e.to_string())
        .collect();
    assert!(
        users.last().unwrap().contains("GUIDANCE-XYZ: check add.sh"),
        "{users:?}"
    );
}
