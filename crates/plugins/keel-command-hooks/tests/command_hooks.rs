//! Command hooks end to end: a project's `.claude/settings.json` naming real `sh` scripts, a
//! real agent (real tools on a temp workspace, a real session file), a scripted model.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use keel_agent::{Agent, HookRegistry, ToolSetup};
use keel_command_hooks::{self as command_hooks, CommandHooks, HooksConfigError, HooksOptions};
use keel_llm::{ChatRequest, ModelCatalogue, Provider, ScriptFormat, ScriptedProvider};
use keel_protocol::{EventBody, HookResult, Message, SessionHeader, TurnEndReason};
use keel_session::{PersistentSession, Session, Store, WriterOptions, new_session_id, now_ms};
use keel_testkit::agent::{FIXTURE_MODEL, write_file};
use keel_tools::subprocess::{SubprocessConfig, SubprocessService};
use keel_tools::{BuiltinConfig, SandboxMode, ToolRegistry, Workspace};
use pretty_assertions::assert_eq;
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;

struct Hooked {
    _home: tempfile::TempDir,
    _work: tempfile::TempDir,
    cwd: PathBuf,
    agent: Agent,
    provider: Arc<ScriptedProvider>,
    session_path: PathBuf,
    _hooks: CommandHooks,
}

/// Write `files` (relative to the workspace; `.sh` files made executable), load the project's
/// hook settings and build an agent with them installed, run by a subprocess service whose
/// environment holds a credential-named variable (to see it scrubbed).
fn hooked(
    script_yaml: &str,
    files: &[(&str, &str)],
    edit: impl FnOnce(&mut HooksOptions),
) -> Hooked {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let cwd = work.path().canonicalize().unwrap();
    for (rel, text) in files {
        write_file(&cwd, rel, text);
    }
    let config = command_hooks::load_project_settings(&cwd)
        .unwrap()
        .expect("settings with hooks");
    let mut sub = SubprocessConfig::from_process_env(home.path().join("spill"));
    sub.base_env
        .push(("KEEL_TEST_SECRET_TOKEN".into(), "hunter2".into()));
    let mut options = HooksOptions::new(&cwd);
    edit(&mut options);
    let mut hooks = HookRegistry::default();
    let handle = command_hooks::install(&mut hooks, config, SubprocessService::new(sub), options);

    let provider = Arc::new(
        ScriptedProvider::from_str(script_yaml, ScriptFormat::Yaml)
            .unwrap()
            .with_name("scripted"),
    );
    let store = Store::new(home.path().to_path_buf());
    let header = SessionHeader::new(new_session_id(), now_ms(), Some(cwd.display().to_string()));
    let log =
        PersistentSession::create(&store, &cwd, Session::new(header), WriterOptions::default())
            .unwrap();
    let session_path = log.writer().path().to_path_buf();
    let tools = ToolSetup::new(
        ToolRegistry::with_builtins(&BuiltinConfig::default()),
        Workspace::new(&cwd, SandboxMode::WorkspaceWrite).unwrap(),
    );
    let info = ModelCatalogue::default().lookup(FIXTURE_MODEL);
    let mut config = keel_agent::AgentConfig::new("scripted", FIXTURE_MODEL, info, cwd.clone());
    config.retry = keel_llm::RetryPolicy::seeded(7);
    let agent = Agent::builder(config, provider.clone() as Arc<dyn Provider>, tools, log)
        .hooks(hooks)
        .build()
        .unwrap();
    Hooked {
        _home: home,
        _work: work,
        cwd,
        agent,
        provider,
        session_path,
        _hooks: handle,
    }
}

/// A script that appends its stdin payload as one line to `.claude/<name>.jsonl`, then runs `body`.
fn recording(name: &str, body: &str) -> String {
    format!(
        "#!/bin/sh\ninput=$(cat)\nprintf '%s\\n' \"$input\" >> \"$CLAUDE_PROJECT_DIR/.claude/{name}.jsonl\"\n{body}\n"
    )
}

fn payloads(h: &Hooked, name: &str) -> Vec<Value> {
    let text =
        std::fs::read_to_string(h.cwd.join(format!(".claude/{name}.jsonl"))).unwrap_or_default();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn hook_results(h: &Hooked) -> Vec<HookResult> {
    let log = h.agent.log();
    log.session()
        .events()
        .filter_map(|e| match &e.body {
            EventBody::HookResult(r) => Some((**r).clone()),
            _ => None,
        })
        .collect()
}

fn invoked_events(h: &Hooked) -> Vec<String> {
    let log = h.agent.log();
    log.session()
        .events()
        .filter_map(|e| match &e.body {
            EventBody::HookInvoked(i) => Some(i.hook_event.clone()),
            _ => None,
        })
        .collect()
}

fn tool_results(h: &Hooked) -> Vec<(String, bool)> {
    let log = h.agent.log();
    log.session()
        .events()
        .filter_map(|e| match &e.body {
            EventBody::ToolResult(r) => r
                .message
                .tool_results()
                .next()
                .map(|b| (b.text(), b.is_error)),
            _ => None,
        })
        .collect()
}

fn hook_messages(request: &ChatRequest) -> Vec<&Message> {
    request
        .messages
        .iter()
        .filter(|m| m.source.plugin_id() == Some(keel_command_hooks::ID.source()))
        .collect()
}

async fn run(h: &Hooked, prompt: &str) -> keel_agent::TurnOutcome {
    h.agent.followup(prompt).unwrap();
    h.agent.run_pending().await.unwrap().unwrap()
}

fn settings(event: &str, matcher: Option<&str>, command: &str, timeout: Option<u32>) -> String {
    let mut cmd = serde_json::json!({"type": "command", "command": command});
    if let Some(t) = timeout {
        cmd["timeout"] = t.into();
    }
    let mut group = serde_json::json!({"hooks": [cmd]});
    if let Some(m) = matcher {
        group["matcher"] = m.into();
    }
    serde_json::json!({"hooks": {event: [group]}}).to_string()
}

const PRE_GUARD: &str = r#"case "$input" in *'rm -rf'*) echo "rm -rf is not allowed here" >&2; exit 2;; esac
echo "secret=${KEEL_TEST_SECRET_TOKEN:-absent}" > "$CLAUDE_PROJECT_DIR/.claude/env.txt"
exit 0"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pre_tool_use_allows_denies_with_exit_2_and_with_json_and_sees_claude_payload() {
    let settings = r#"{"permissions": {"allow": []}, "hooks": {"PreToolUse": [
        {"matcher": "Bash", "hooks": [{"type": "command", "command": "\"$CLAUDE_PROJECT_DIR\"/.claude/hooks/guard.sh"}]},
        {"matcher": "Write|Edit", "hooks": [{"type": "command", "command": "\"$CLAUDE_PROJECT_DIR\"/.claude/hooks/review.sh", "timeout": 30}]}
    ]}}"#;
    let review = recording(
        "review",
        r#"echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "writes are reviewed first"}}'"#,
    );
    let script = r#"
responses:
  - tool_calls:
      - {id: c1, name: bash, arguments: {command: "echo ok > ran.txt"}}
      - {id: c2, name: bash, arguments: {command: "rm -rf victim"}}
      - {id: c3, name: write, arguments: {path: "new.txt", content: "x"}}
      - {id: c4, name: read, arguments: {path: "victim/keep.txt"}}
  - text: "done"
"#;
    let h = hooked(
        script,
        &[
            (".claude/settings.json", settings),
            (".claude/hooks/guard.sh", &recording("guard", PRE_GUARD)),
            (".claude/hooks/review.sh", &review),
            ("victim/keep.txt", "still here"),
        ],
        |_| {},
    );
    let outcome = run(&h, "tidy up").await;
    assert_eq!(outcome.reason, TurnEndReason::Completed);

    // Allowed ran, denied did not.
    assert!(h.cwd.join("ran.txt").exists());
    assert!(h.cwd.join("victim/keep.txt").exists());
    assert!(!h.cwd.join("new.txt").exists());
    let results = tool_results(&h);
    assert_eq!(results.len(), 4);
    assert!(!results[0].1, "{:?}", results[0]);
    assert!(
        results[1].1
            && results[1].0.contains("DENIED")
            && results[1].0.contains("rm -rf is not allowed here"),
        "{:?}",
        results[1]
    );
    assert!(
        results[2].1 && results[2].0.contains("writes are reviewed first"),
        "{:?}",
        results[2]
    );
    assert!(
        !results[3].1 && results[3].0.contains("still here"),
        "read matches no hook: {:?}",
        results[3]
    );

    // The payload is Claude Code's.
    let guard = payloads(&h, "guard");
    assert_eq!(guard.len(), 2);
    let p = &guard[0];
    assert_eq!(p["hook_event_name"], "PreToolUse");
    assert_eq!(p["tool_name"], "Bash");
    assert_eq!(p["keel_tool_name"], "bash");
    assert_eq!(p["tool_input"]["command"], "echo ok > ran.txt");
    assert_eq!(p["session_id"], h.agent.session_id().as_str());
    assert_eq!(p["transcript_path"], h.session_path.display().to_string());
    assert_eq!(p["cwd"], h.cwd.display().to_string());
    let review = payloads(&h, "review");
    assert_eq!(review.len(), 1);
    assert_eq!(
        (
            review[0]["tool_name"].as_str(),
            review[0]["tool_input"]["file_path"].as_str()
        ),
        (Some("Write"), Some("new.txt"))
    );

    // The credential scrub applies to hooks.
    let env = std::fs::read_to_string(h.cwd.join(".claude/env.txt")).unwrap();
    assert_eq!(env.trim(), "secret=absent");

    // Logged.
    assert_eq!(invoked_events(&h), ["PreToolUse"; 3]);
    let mut got: Vec<(Option<i32>, String)> = hook_results(&h)
        .into_iter()
        .map(|r| (r.exit_code, r.decision))
        .collect();
    got.sort();
    assert_eq!(
        got,
        [
            (Some(0), "allow".to_owned()),
            (Some(0), "deny".to_owned()),
            (Some(2), "deny".to_owned())
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_tool_use_adds_context_and_shows_exit_2_stderr_to_the_model() {
    let body = r#"case "$input" in *fail-me*) echo "lint failed: fix the style" >&2; exit 2;; esac
echo '{"hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": "remember to run the tests"}}'"#;
    let script = r#"
responses:
  - tool_calls:
      - {id: c1, name: bash, arguments: {command: "echo hello"}}
      - {id: c2, name: bash, arguments: {command: "echo fail-me"}}
  - text: "done"
"#;
    let h = hooked(
        script,
        &[
            (
                ".claude/settings.json",
                &settings(
                    "PostToolUse",
                    Some("Bash"),
                    "sh .claude/hooks/post.sh",
                    None,
                ),
            ),
            (".claude/hooks/post.sh", &recording("post", body)),
        ],
        |_| {},
    );
    let outcome = run(&h, "go").await;
    assert_eq!(outcome.reason, TurnEndReason::Completed);
    let results = tool_results(&h);
    assert!(
        results[0].0.contains("hello") && results[0].0.contains("remember to run the tests"),
        "{:?}",
        results[0]
    );
    assert!(!results[0].1);
    assert!(
        results[1].0.contains("fail-me") && results[1].0.contains("lint failed: fix the style"),
        "{:?}",
        results[1]
    );
    // The model saw both in the next request.
    let second = &h.provider.requests()[1];
    let seen = keel_llm::scripted::last_tool_result_text(&second.messages).unwrap();
    assert!(seen.contains("lint failed"), "{seen}");
    let p = payloads(&h, "post");
    assert_eq!(p[0]["hook_event_name"], "PostToolUse");
    assert_eq!(p[0]["tool_response"]["success"], true);
    assert!(
        p[0]["tool_response"]["output"]
            .as_str()
            .unwrap()
            .contains("hello"),
        "{}",
        p[0]
    );
    let decisions: Vec<String> = hook_results(&h).into_iter().map(|r| r.decision).collect();
    assert_eq!(decisions.len(), 2);
    assert!(
        decisions.contains(&"context".to_owned()) && decisions.contains(&"block".to_owned()),
        "{decisions:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_prompt_submit_adds_plain_stdout_as_context_and_exit_2_blocks_the_prompt() {
    let body = r#"case "$input" in *forbidden*) echo "prompts about forbidden things are blocked" >&2; exit 2;; esac
echo "Current branch: main""#;
    let h = hooked(
        "responses:\n  - text: \"ok\"\n",
        &[
            (
                ".claude/settings.json",
                &settings("UserPromptSubmit", None, ".claude/hooks/ups.sh", None),
            ),
            (".claude/hooks/ups.sh", &recording("ups", body)),
        ],
        |_| {},
    );
    let first = run(&h, "hello there").await;
    assert_eq!(first.reason, TurnEndReason::Completed);
    let requests = h.provider.requests();
    assert_eq!(requests.len(), 1);
    let texts: Vec<String> = requests[0].messages.iter().map(Message::text).collect();
    let prompt_at = texts.iter().position(|t| t == "hello there").unwrap();
    assert!(
        texts[prompt_at + 1].contains("Current branch: main"),
        "context follows the prompt: {texts:?}"
    );
    assert_eq!(hook_messages(&requests[0]).len(), 1);

    let second = run(&h, "tell me something forbidden").await;
    match &second.reason {
        TurnEndReason::Blocked { reason: Some(r) } => assert!(
            r.contains("prompts about forbidden things are blocked"),
            "{r}"
        ),
        other => panic!("expected blocked, got {other:?}"),
    }
    assert_eq!(
        h.provider.requests().len(),
        1,
        "a blocked prompt never reaches the model"
    );
    let p = payloads(&h, "ups");
    assert_eq!(
        p.iter()
            .map(|p| p["prompt"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["hello there", "tell me something forbidden"]
    );
    assert_eq!(p[0]["hook_event_name"], "UserPromptSubmit");
    let decisions: Vec<(Option<i32>, String)> = hook_results(&h)
        .into_iter()
        .map(|r| (r.exit_code, r.decision))
        .collect();
    assert_eq!(
        decisions,
        [
            (Some(0), "context".to_owned()),
            (Some(2), "block".to_owned())
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_hook_keeps_the_turn_going_until_stop_hook_active() {
    let body = r#"case "$input" in *'"stop_hook_active":true'*) exit 0;; esac
echo "run the test suite before finishing" >&2
exit 2"#;
    let h = hooked(
        "responses:\n  - text: \"done\"\n  - text: \"tests pass\"\n",
        &[
            (
                ".claude/settings.json",
                &settings("Stop", None, ".claude/hooks/stop.sh", None),
            ),
            (".claude/hooks/stop.sh", &recording("stop", body)),
        ],
        |_| {},
    );
    let outcome = run(&h, "finish the work").await;
    assert_eq!(outcome.reason, TurnEndReason::Completed);
    assert_eq!(outcome.final_text, "tests pass");
    let requests = h.provider.requests();
    assert_eq!(requests.len(), 2);
    let injected = hook_messages(&requests[1]);
    assert_eq!(injected.len(), 1);
    assert!(
        injected[0]
            .text()
            .contains("run the test suite before finishing"),
        "{}",
        injected[0].text()
    );
    let active: Vec<Value> = payloads(&h, "stop")
        .iter()
        .map(|p| p["stop_hook_active"].clone())
        .collect();
    assert_eq!(active, [Value::Bool(false), Value::Bool(true)]);
    // The log on disk is valid with hook events around turn-stopping.
    h.agent
        .flush(keel_agent::seams::FlushPoint::TurnBoundary)
        .await
        .unwrap();
    let loaded = Store::load(&h.session_path).unwrap();
    loaded.session.check_invariants().unwrap();
    assert_eq!(invoked_events(&h), ["Stop", "Stop"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_hook_that_always_blocks_is_cut_off_by_the_loop_guard() {
    let body = r#"echo '{"decision": "block", "reason": "not yet"}'"#;
    let h = hooked(
        "responses:\n  - text: \"a\"\n  - text: \"b\"\n  - text: \"c\"\n  - text: \"d\"\n",
        &[
            (
                ".claude/settings.json",
                &settings("Stop", None, ".claude/hooks/stop.sh", None),
            ),
            (".claude/hooks/stop.sh", &recording("stop", body)),
        ],
        |o| o.max_stop_continuations = 2,
    );
    let outcome = run(&h, "go").await;
    assert_eq!(outcome.reason, TurnEndReason::Completed);
    assert_eq!(outcome.final_text, "c");
    assert_eq!(h.provider.requests().len(), 3);
    assert!(
        hook_messages(&h.provider.requests()[2])[1]
            .text()
            .contains("not yet")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_start_adds_context_once() {
    let body = r#"echo '{"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "This project indents with tabs."}}'"#;
    let h = hooked(
        "responses:\n  - text: \"one\"\n  - text: \"two\"\n",
        &[
            (
                ".claude/settings.json",
                &settings("SessionStart", Some("startup"), ".claude/hooks/ss.sh", None),
            ),
            (".claude/hooks/ss.sh", &recording("ss", body)),
        ],
        |_| {},
    );
    run(&h, "first").await;
    run(&h, "second").await;
    let requests = h.provider.requests();
    let first = hook_messages(&requests[0]);
    assert_eq!(first.len(), 1);
    assert!(first[0].text().contains("This project indents with tabs."));
    let order: Vec<String> = requests[0].messages.iter().map(Message::text).collect();
    let at = |needle: &str| order.iter().position(|t| t.contains(needle)).unwrap();
    assert!(
        at("indents with tabs") < at("first"),
        "session context precedes the first prompt: {order:?}"
    );
    assert_eq!(
        hook_messages(&requests[1]).len(),
        1,
        "the context stays in history, not repeated"
    );
    let p = payloads(&h, "ss");
    assert_eq!(p.len(), 1);
    assert_eq!(
        (p[0]["hook_event_name"].as_str(), p[0]["source"].as_str()),
        (Some("SessionStart"), Some("startup"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_and_other_exit_codes_do_not_block() {
    let settings = r#"{"hooks": {"PreToolUse": [{"hooks": [
        {"type": "command", "command": "exec sleep 30", "timeout": 1},
        {"type": "command", "command": "echo broken >&2; exit 1"}
    ]}]}}"#;
    let script = r#"
responses:
  - tool_calls:
      - {id: c1, name: bash, arguments: {command: "echo ok > ran.txt"}}
  - text: "done"
"#;
    let h = hooked(script, &[(".claude/settings.json", settings)], |_| {});
    let outcome = run(&h, "go").await;
    assert_eq!(outcome.reason, TurnEndReason::Completed);
    assert!(h.cwd.join("ran.txt").exists());
    let got: Vec<(Option<i32>, String, Option<String>)> = hook_results(&h)
        .into_iter()
        .map(|r| (r.exit_code, r.decision, r.message))
        .collect();
    assert_eq!(got[0].0, None);
    assert_eq!(got[0].1, "timeout");
    assert_eq!((got[1].0, got[1].1.as_str()), (Some(1), "error"));
    assert!(
        got[1].2.as_deref().unwrap_or("").contains("broken"),
        "{got:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continue_false_from_a_tool_hook_stops_the_turn() {
    let body = r#"echo '{"continue": false, "stopReason": "budget exhausted"}'"#;
    let script = r#"
responses:
  - tool_calls:
      - {id: c1, name: bash, arguments: {command: "echo ok > ran.txt"}}
  - text: "never sent"
"#;
    let h = hooked(
        script,
        &[
            (
                ".claude/settings.json",
                &settings("PostToolUse", None, ".claude/hooks/post.sh", None),
            ),
            (".claude/hooks/post.sh", &recording("post", body)),
        ],
        |_| {},
    );
    let outcome = run(&h, "go").await;
    assert_eq!(
        outcome.reason,
        TurnEndReason::Blocked {
            reason: Some("budget exhausted".into())
        }
    );
    assert!(h.cwd.join("ran.txt").exists(), "the call itself ran");
    assert_eq!(h.provider.requests().len(), 1);
}

fn load_error(files: &[(&str, &str)]) -> HooksConfigError {
    let dir = tempfile::tempdir().unwrap();
    for (rel, text) in files {
        let path = dir.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    command_hooks::load_project_settings(dir.path()).unwrap_err()
}

#[test]
fn broken_settings_files_give_clear_errors() {
    // Bad JSON: file, line and column.
    let err = load_error(&[(
        ".claude/settings.json",
        "{\n  \"hooks\": {\n    \"Stop\": [\n      {\"hooks\": [}\n    ]\n  }\n}\n",
    )]);
    let HooksConfigError::Parse {
        path, line, column, ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert!(path.ends_with(".claude/settings.json"));
    assert_eq!((*line, *column), (4, 18));
    let text = err.to_string();
    assert!(text.contains("settings.json:4:18: "), "{text}");

    // A valid settings.json and a local file with a bad matcher: the local file is named.
    let ok = settings("Stop", None, "true", None);
    let err = load_error(&[
        (".claude/settings.json", &ok),
        (
            ".claude/settings.local.json",
            r#"{"hooks": {"PreToolUse": [{"matcher": "Bash(", "hooks": []}]}}"#,
        ),
    ]);
    let text = err.to_string();
    assert!(
        text.contains("settings.local.json:")
            && text.contains("PreToolUse[0]: matcher \"Bash(\" is not a valid regex"),
        "{text}"
    );

    // Misspelt event, unknown hook type, unknown field.
    let text =
        load_error(&[(".claude/settings.json", r#"{"hooks": {"PreTooluse": []}}"#)]).to_string();
    assert!(text.contains("unknown hook event \"PreTooluse\""), "{text}");
    let text = load_error(&[(
        ".claude/settings.json",
        r#"{"hooks": {"Stop": [{"hooks": [{"type": "prompt", "command": "x"}]}]}}"#,
    )])
    .to_string();
    assert!(
        text.contains("Stop[0].hooks[0]: hook type \"prompt\" is not supported"),
        "{text}"
    );
    let text = load_error(&[(
        ".claude/settings.json",
        r#"{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "x", "timout": 5}]}]}}"#,
    )])
    .to_string();
    assert!(text.contains("unknown field `timout`"), "{text}");
}

#[test]
fn settings_files_merge_and_absent_files_are_none() {
    let dir = tempfile::tempdir().unwrap();
    assert!(
        command_hooks::load_project_settings(dir.path())
            .unwrap()
            .is_none()
    );
    std::fs::create_dir_all(dir.path().join(".claude")).unwrap();
    std::fs::write(
        dir.path().join(".claude/settings.json"),
        r#"{"model": "x"}"#,
    )
    .unwrap();
    assert!(
        command_hooks::load_project_settings(dir.path())
            .unwrap()
            .is_none(),
        "no hooks key"
    );
    std::fs::write(
        dir.path().join(".claude/settings.json"),
        settings("PreToolUse", Some("Bash"), "a", None),
    )
    .unwrap();
    std::fs::write(
        dir.path().join(".claude/settings.local.json"),
        settings("PreToolUse", None, "b", Some(5)),
    )
    .unwrap();
    let config = command_hooks::load_project_settings(dir.path())
        .unwrap()
        .unwrap();
    let names = |tool: &str| -> Vec<String> {
        config
            .commands(
                command_hooks::HookEvent::PreToolUse,
                &command_hooks::names::claude_name(tool).map_or(vec![tool], |c| vec![tool, c]),
            )
            .into_iter()
            .map(|c| c.command)
            .collect()
    };
    assert_eq!(names("bash"), ["a", "b"]);
    assert_eq!(names("read"), ["b"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pre_tool_use_ask_goes_through_the_approval_policy() {
    let body = r#"echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "ask", "permissionDecisionReason": "confirm network access"}}'"#;
    let script = r#"
responses:
  - tool_calls:
      - {id: c1, name: bash, arguments: {command: "echo ok > ran.txt"}}
  - text: "done"
"#;
    let h = hooked(
        script,
        &[
            (
                ".claude/settings.json",
                &settings("PreToolUse", Some("Bash"), ".claude/hooks/ask.sh", None),
            ),
            (".claude/hooks/ask.sh", &recording("ask", body)),
        ],
        |_| {},
    );
    run(&h, "go").await;
    // The fixture's agent has no approver, so `ask` is refused as in a headless run.
    assert!(!h.cwd.join("ran.txt").exists());
    let asked: Vec<String> = {
        let log = h.agent.log();
        log.session()
            .events()
            .filter_map(|e| match &e.body {
                EventBody::ApprovalAsked(a) => Some(a.reason.clone()),
                _ => None,
            })
            .collect()
    };
    assert_eq!(asked, ["confirm network access"]);
    let results = tool_results(&h);
    assert!(
        results[0].1 && results[0].0.contains("confirm network access"),
        "{:?}",
        results[0]
    );
    assert_eq!(hook_results(&h)[0].decision, "ask");
}

#[test]
fn settings_linked_out_of_the_workspace_or_a_fifo_are_never_read() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(ws.join(".claude")).unwrap();
    std::fs::write(
        tmp.path().join("outside.json"),
        r#"{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "echo MARKER"}]}]}}"#,
    )
    .unwrap();
    std::os::unix::fs::symlink("../../outside.json", ws.join(".claude/settings.json")).unwrap();
    let err = command_hooks::load_project_settings(&ws).unwrap_err();
    let said = err.to_string();
    assert!(matches!(err, HooksConfigError::NotRead { .. }), "{said}");
    assert!(said.contains(".claude/settings.json") && said.contains("outside the workspace"));
    assert!(!said.contains("MARKER"), "{said}");

    std::fs::remove_file(ws.join(".claude/settings.json")).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(ws.join(".claude/settings.local.json"))
        .status()
        .unwrap();
    assert!(made.success());
    // Returns at once (a FIFO is not opened for a writer to come).
    let err = command_hooks::load_project_settings(&ws).unwrap_err();
    assert!(err.to_string().contains("settings.local.json"), "{err}");
    assert!(err.to_string().contains("a FIFO"), "{err}");
}
