//! Hooks of installed plugin bundles end to end: the `hooks` plugin installed into a context
//! naming bundles (real folders), a real agent on an untrusted temp workspace, a scripted model.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use keel_agent::plugin::{Bundle, InstallContext, Plugin};
use keel_agent::{Agent, ToolSetup};
use keel_command_hooks::{CommandHooksPlugin, WARNING_EVENT};
use keel_llm::{ModelCatalogue, Provider, ScriptFormat, ScriptedProvider};
use keel_protocol::{EventBody, SessionHeader, TurnEndReason};
use keel_session::{PersistentSession, Session, Store, WriterOptions, new_session_id, now_ms};
use keel_testkit::agent::{FIXTURE_MODEL, write_file};
use keel_tools::subprocess::{SubprocessConfig, SubprocessService};
use keel_tools::{BuiltinConfig, SandboxMode, ToolRegistry, Workspace};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;

const SCRIPT: &str = r#"
responses:
  - tool_calls:
      - {id: c1, name: bash, arguments: {command: "echo ok > ran.txt"}}
  - text: "done"
"#;

fn bundle(dir: &Path, name: &str, hooks: &str) -> Bundle {
    let root = dir.join(name);
    write_file(&root, "hooks/hooks.json", hooks);
    Bundle {
        name: name.to_owned(),
        root,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bundles_hook_runs_with_its_root_and_a_broken_bundle_is_skipped_with_a_warning() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let plugins = tempfile::tempdir().unwrap();
    let cwd = work.path().canonicalize().unwrap();
    let plugins_dir = plugins.path().canonicalize().unwrap();
    // The text names the root (expanded by keel) and the command reads it from its
    // environment too.
    let good = bundle(
        &plugins_dir,
        "guard",
        &json!({"description": "records tool calls", "hooks": {"PreToolUse": [{"matcher": "Bash",
            "hooks": [{"type": "command",
                       "command": "cat > ${CLAUDE_PLUGIN_ROOT}/seen.json; printf %s \"$CLAUDE_PLUGIN_ROOT\" > \"$CLAUDE_PLUGIN_ROOT/env.txt\""}]}]}})
        .to_string(),
    );
    let broken = bundle(&plugins_dir, "broken", "{\"hooks\": {\"PreToolUse\": [,]}}");
    let other = bundle(
        &plugins_dir,
        "after",
        &json!({"hooks": {"PreToolUse": [{"hooks": [{"type": "command",
            "command": "touch ${CLAUDE_PLUGIN_ROOT}/after.txt"}]}]}})
        .to_string(),
    );

    let subprocess = SubprocessService::new(SubprocessConfig::from_process_env(
        home.path().join("spill"),
    ));
    let mut ctx = InstallContext::new(cwd.clone(), home.path().to_path_buf(), subprocess);
    ctx.bundles = vec![good.clone(), broken.clone(), other.clone()];
    assert!(!ctx.project_trust.is_trusted());
    CommandHooksPlugin.install(&mut ctx, json!({})).unwrap();

    let provider = Arc::new(
        ScriptedProvider::from_str(SCRIPT, ScriptFormat::Yaml)
            .unwrap()
            .with_name("scripted"),
    );
    let store = Store::new(home.path().to_path_buf());
    let header = SessionHeader::new(new_session_id(), now_ms(), Some(cwd.display().to_string()));
    let log =
        PersistentSession::create(&store, &cwd, Session::new(header), WriterOptions::default())
            .unwrap();
    let tools = ToolSetup::new(
        ToolRegistry::with_builtins(&BuiltinConfig::default()),
        Workspace::new(&cwd, SandboxMode::WorkspaceWrite).unwrap(),
    );
    let info = ModelCatalogue::default().lookup(FIXTURE_MODEL);
    let config = keel_agent::AgentConfig::new("scripted", FIXTURE_MODEL, info, cwd.clone());
    let agent = Agent::builder(config, provider as Arc<dyn Provider>, tools, log)
        .hooks(ctx.hooks)
        .agent_hooks(ctx.agent_hooks)
        .build()
        .unwrap();
    InstallContext::bind(ctx.on_agent, &agent);
    agent.followup("go").unwrap();
    let outcome = agent.run_pending().await.unwrap().unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Completed);

    assert!(cwd.join("ran.txt").exists(), "the hook allowed the call");
    let seen: Value =
        serde_json::from_str(&std::fs::read_to_string(good.root.join("seen.json")).unwrap())
            .unwrap();
    assert_eq!(seen["hook_event_name"], "PreToolUse");
    assert_eq!(
        std::fs::read_to_string(good.root.join("env.txt")).unwrap(),
        good.root.display().to_string()
    );
    assert!(other.root.join("after.txt").exists(), "later bundles load");

    let warnings: Vec<Value> = agent
        .log()
        .session()
        .events()
        .filter_map(|e| match &e.body {
            EventBody::Other(o) if o.type_name == WARNING_EVENT => Some(o.data.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(warnings[0]["bundle"], "broken");
    let file = broken.root.join("hooks/hooks.json").display().to_string();
    assert_eq!(warnings[0]["file"], file.as_str());
    assert!(
        warnings[0]["error"].as_str().unwrap().contains(&file),
        "{warnings:?}"
    );
}
