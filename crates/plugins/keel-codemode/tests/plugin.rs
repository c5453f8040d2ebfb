//! The `code_mode` row: what each tools mode installs, and the errors a bad setting gives.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use keel_agent::plugin::{InstallContext, Plugin};
use keel_codemode::{CodeModePlugin, RUN_CODE};
use keel_tools::subprocess::{SubprocessConfig, SubprocessService};
use serde_json::{Value, json};

fn install(settings: Value) -> Result<InstallContext, String> {
    let dir = tempfile::tempdir().unwrap();
    let service = SubprocessService::new(SubprocessConfig::from_process_env(dir.path()));
    let mut ctx = InstallContext::new(dir.path().into(), dir.path().into(), service);
    ctx.settings = settings;
    CodeModePlugin
        .install(&mut ctx, json!({}))
        .map_err(|e| e.to_string())?;
    Ok(ctx)
}

#[test]
fn native_installs_nothing() {
    for settings in [json!({}), json!({"tools_mode": "native"})] {
        let ctx = install(settings).unwrap();
        assert!(ctx.tools.is_empty());
        assert!(ctx.on_agent.is_empty());
        assert!(ctx.agent_hooks.prompt_sections.is_empty());
        assert!(ctx.agent_hooks.subagent_build.is_empty());
        assert_eq!(ctx.agent_hooks.tools.hidden("read"), None);
    }
}

#[test]
fn code_hides_the_other_tools_and_both_does_not() {
    let ctx = install(json!({"tools_mode": "code", "code_mode": {"time_limit_sec": 5}})).unwrap();
    let names: Vec<String> = ctx.tools.iter().map(|t| t.schema().name).collect();
    assert_eq!(names, vec![RUN_CODE]);
    assert_eq!(
        ctx.tools[0].timeout(),
        Some(std::time::Duration::from_secs(20))
    );
    assert_eq!(ctx.agent_hooks.prompt_sections.len(), 1);
    let hint = ctx.agent_hooks.tools.hidden("read").unwrap();
    assert!(hint.contains("call it from inside run_code"), "{hint}");
    assert_eq!(ctx.agent_hooks.tools.hidden(RUN_CODE), None);
    // Children do not inherit run_code.
    assert_eq!(ctx.agent_hooks.subagent_build.len(), 1);
    let build = keel_agent::seams::ChildBuild {
        parent: "p".into(),
        child: "c".into(),
        call_id: "call_1".into(),
        depth: 1,
    };
    let mut setup = keel_agent::seams::ChildSetup::default();
    (ctx.agent_hooks.subagent_build[0])(&build, &mut setup);
    assert_eq!(setup.withheld, vec![RUN_CODE]);

    let ctx = install(json!({"tools_mode": "both"})).unwrap();
    assert_eq!(ctx.tools.len(), 1);
    assert_eq!(ctx.agent_hooks.tools.hidden("read"), None);
}

#[test]
fn bad_settings_name_the_plugin_and_the_value() {
    let e = install(json!({"tools_mode": "sometimes"})).err().unwrap();
    assert!(e.contains("code_mode") && e.contains("sometimes"), "{e}");
    let e = install(json!({"tools_mode": "code", "code_mode": {"memory_mib": 1}}))
        .err()
        .unwrap();
    assert!(e.contains("memory_mib"), "{e}");
}
