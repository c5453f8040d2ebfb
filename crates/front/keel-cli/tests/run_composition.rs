//! Subagents and background jobs through the real binary and the loopback mock model: a
//! foreground child with its own session file and lineage, and a background `bash` job whose
//! completion wakes the idle agent for a follow-up turn.
#![allow(clippy::unwrap_used)]

mod support;

use serde_json::Value;
use support::*;

fn user_texts(events: &[Value]) -> Vec<String> {
    of_type(events, "user/message")
        .iter()
        .map(|e| {
            e["data"]["content"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

#[test]
fn a_foreground_subagent_runs_in_its_own_session_and_answers_the_parent() {
    let env = Env::new();
    // Foreground delegation is sequential: parent step 1, the child's only step, parent step 2.
    let mock = Mock::start(
        r#"
responses:
  - tool_calls:
      - {id: call_sub, name: subagent, arguments: {description: "count files", prompt: "CHILD-TASK: say how many files there are.\nExactly."}}
  - text: "CHILD-ANSWER: there are 0 files."
  - text: "The child says there are 0 files."
"#,
    );
    let out =
        run(env
            .keel(&mock.base_url())
            .args(["--approval", "auto", "run", "delegate the count"]));
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert!(
        out.stdout.contains("The child says there are 0 files."),
        "{}",
        out.stdout
    );

    let files = env.session_files();
    assert_eq!(files.len(), 2, "parent and child sessions: {files:?}");
    let mut parent = None;
    let mut child = None;
    for f in &files {
        let loaded = keel_session::Store::load(f).unwrap();
        if loaded.session.header().parent_session.is_some() {
            child = Some(loaded);
        } else {
            parent = Some(loaded);
        }
    }
    let (parent, child) = (parent.unwrap(), child.unwrap());
    let ch = child.session.header();
    assert_eq!(
        ch.parent_session.as_ref(),
        Some(&parent.session.header().id)
    );
    assert_eq!(ch.origin.as_deref(), Some("subagent"));
    assert_eq!(ch.delegation_depth, 1);
    child.session.check_invariants().unwrap();
    let child_events = to_values(&child.session);
    // The child's first user messages: its runtime context, continuity's projection (the
    // parent's prompt and the lineage), then the prompt byte for byte.
    let child_texts = user_texts(&child_events);
    assert!(child_texts[0].starts_with("Current runtime context."));
    assert!(
        child_texts[1].starts_with("Continuity (spawn")
            && child_texts[1].contains("delegate the count"),
        "{}",
        child_texts[1]
    );
    assert_eq!(
        child_texts[2],
        "CHILD-TASK: say how many files there are.\nExactly."
    );
    let parent_events = to_values(&parent.session);
    assert_eq!(of_type(&parent_events, "subagent/descriptor").len(), 1);
    let results = tool_results(&parent_events);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].0, "call_sub");
    assert!(
        results[0].1.contains("CHILD-ANSWER: there are 0 files."),
        "{}",
        results[0].1
    );
    assert!(!results[0].2);
}

#[test]
fn a_background_job_wakes_the_idle_agent_with_a_follow_up_turn() {
    let env = Env::new();
    let mock = Mock::start(
        r#"
responses:
  - tool_calls:
      - {id: call_bg, name: bash, arguments: {command: "sleep 0.3; echo BG-DONE-MARKER", run_in_background: true}}
  - text: "Started it in the background."
  - text: "The background job finished."
"#,
    );
    let out =
        run(env
            .keel(&mock.base_url())
            .args(["--approval", "auto", "run", "start the slow job"]));
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert!(
        out.stdout.contains("The background job finished."),
        "{}",
        out.stdout
    );

    let events = load_consistent(&env.only_session());
    let ends = turn_end_reasons(&events);
    assert_eq!(
        ends.len(),
        2,
        "the job's completion woke a second turn: {ends:?}"
    );
    // The second turn's input is the job notice carrying the job's output, from the jobs plugin.
    let notices: Vec<&Value> = of_type(&events, "user/message")
        .into_iter()
        .filter(|e| e["data"]["source"]["plugin"] == "keel/jobs")
        .collect();
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert!(notices[0].to_string().contains("BG-DONE-MARKER"));
    // The last request the model saw carried the notice.
    let last = mock.requests().last().cloned().unwrap();
    assert!(last.to_string().contains("BG-DONE-MARKER"));
}

#[test]
fn the_depth_limit_from_a_plugin_row_refuses_delegation() {
    let env = Env::new();
    std::fs::create_dir_all(env.ws.join(".keel")).unwrap();
    env.write(
        ".keel/config.toml",
        "[[plugins]]\nid = \"subagent\"\n[plugins.config]\nmax_depth = 0\n",
    );
    let mock = Mock::start(
        r#"
responses:
  - tool_calls:
      - {id: call_sub, name: subagent, arguments: {description: "nested", prompt: "do it"}}
  - text: "Could not delegate."
"#,
    );
    let out = run(env
        .keel(&mock.base_url())
        .args(["--approval", "auto", "run", "delegate"]));
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert_eq!(
        env.session_files().len(),
        1,
        "no child session may be created"
    );
    let results = tool_results(&load_consistent(&env.only_session()));
    assert!(results[0].2, "the subagent call must fail: {results:?}");
    assert!(
        results[0].1.to_lowercase().contains("depth"),
        "{}",
        results[0].1
    );
}

#[test]
fn claude_settings_hooks_deny_a_tool_call_and_add_context() {
    let env = Env::new();
    std::fs::create_dir_all(env.ws.join(".claude")).unwrap();
    env.write(
        ".claude/settings.json",
        r#"{"hooks": {
  "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "cat > pre.json; echo 'no shell today' >&2; exit 2"}]}],
  "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "echo HOOK-CONTEXT-LINE"}]}]
}}"#,
    );
    let mock = Mock::start(
        r#"
responses:
  - tool_calls:
      - {id: call_sh, name: bash, arguments: {command: "echo ran > ran.txt"}}
  - text: "The hook refused the command."
"#,
    );
    let out = run(env
        .keel(&mock.base_url())
        .args(["--approval", "auto", "run", "run something"]));
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert!(
        !env.ws.join("ran.txt").exists(),
        "the denied command must not run"
    );
    // The hook saw Claude Code's payload on stdin.
    let payload: Value = serde_json::from_str(&env.read("pre.json")).unwrap();
    assert_eq!(payload["hook_event_name"], "PreToolUse");
    assert_eq!(payload["tool_name"], "Bash");
    assert_eq!(payload["tool_input"]["command"], "echo ran > ran.txt");
    assert!(
        payload["transcript_path"]
            .as_str()
            .unwrap()
            .ends_with("session.jsonl")
    );
    let events = load_consistent(&env.only_session());
    let results = tool_results(&events);
    assert!(
        results[0].2 && results[0].1.contains("no shell today"),
        "{results:?}"
    );
    assert!(of_type(&events, "hook/invoked").len() >= 2);
    assert!(of_type(&events, "hook/result").len() >= 2);
    // UserPromptSubmit's stdout reached the model as context.
    assert!(mock.requests()[0].to_string().contains("HOOK-CONTEXT-LINE"));
}
