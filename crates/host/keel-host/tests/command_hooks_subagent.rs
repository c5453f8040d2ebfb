//! Command hooks with a child agent: the child inherits the registry, so its tool calls run
//! `PreToolUse` (logged in the parent's session), but it runs neither `UserPromptSubmit` nor
//! `Stop` (Claude Code's `SubagentStop` is not supported).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use keel_agent::HookRegistry;
use keel_command_hooks::{self as command_hooks, HooksConfig, HooksOptions};
use keel_protocol::EventBody;
use keel_tools::subprocess::{SubprocessConfig, SubprocessService};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use support::*;

fn recorder(dir: &Path, name: &str) -> String {
    let path = dir.join(format!("{name}.sh"));
    let log = dir.join(format!("{name}.jsonl"));
    let text = format!(
        "#!/bin/sh\ninput=$(cat)\nprintf '%s\\n' \"$input\" >> '{}'\n",
        log.display()
    );
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

fn payloads(dir: &Path, name: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(dir.join(format!("{name}.jsonl"))).unwrap_or_default();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_agent_runs_tool_hooks_but_not_prompt_or_stop_hooks() {
    let scripts = tempfile::tempdir().unwrap();
    let dir = scripts.path();
    let cmd =
        |name: &str| json!([{"hooks": [{"type": "command", "command": recorder(dir, name)}]}]);
    let config = HooksConfig::from_value(
        json!({"UserPromptSubmit": cmd("ups"), "PreToolUse": cmd("pre"), "Stop": cmd("stop")}),
        "test",
    )
    .unwrap();
    let mut hooks = HookRegistry::default();
    let runner = SubprocessService::new(SubprocessConfig::from_process_env(dir.join("spill")));
    command_hooks::install(&mut hooks, config, runner, HooksOptions::new(dir));

    let script = r#"
responses:
  - tool_calls:
      - {id: call_sub, name: subagent, arguments: {description: "write a file", prompt: "Write child.txt."}}
  - tool_calls:
      - {id: child_1, name: bash, arguments: {command: "echo child > child.txt"}}
  - text: "child done"
  - text: "parent done"
"#;
    let rig = rig(
        script,
        Options {
            hooks,
            ..Options::default()
        },
    );
    rig.agent.followup("Delegate it.").unwrap();
    let outcome = guarded(rig.agent.run_until_idle()).await.unwrap().unwrap();
    assert_eq!(outcome.final_text, "parent done");
    assert!(rig.fixture.work.path().join("child.txt").exists());

    let parent = rig.agent.session_id().as_str().to_owned();
    let ups = payloads(dir, "ups");
    assert_eq!(
        ups.iter().map(|p| p["prompt"].clone()).collect::<Vec<_>>(),
        [json!("Delegate it.")]
    );
    let stop = payloads(dir, "stop");
    assert_eq!(stop.len(), 1, "only the parent's turn runs Stop");
    assert_eq!(stop[0]["session_id"], json!(parent));
    let pre = payloads(dir, "pre");
    let tools: Vec<(Value, Value)> = pre
        .iter()
        .map(|p| (p["tool_name"].clone(), p["session_id"].clone()))
        .collect();
    assert_eq!(
        tools,
        [
            (json!("Task"), json!(parent)),
            (json!("Bash"), json!(parent))
        ]
    );

    let invoked: Vec<String> = events_of(&rig.agent)
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::HookInvoked(i) => Some(i.hook_event.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        invoked,
        ["UserPromptSubmit", "PreToolUse", "PreToolUse", "Stop"]
    );
}
