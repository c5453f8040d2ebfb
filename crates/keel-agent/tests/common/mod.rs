//! Shared fixture: an agent over a real temp workspace and a real session file, driven by a
//! scripted model.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use keel_agent::{Agent, AgentConfig, ApprovalPolicy, HookRegistry};
use keel_llm::{Format, ModelCatalogue, Provider, ScriptedProvider};
use keel_protocol::{SessionEvent, SessionHeader};
use keel_session::{PersistentSession, Session, Store, WriterOptions, new_session_id, now_ms};
use keel_tools::{BuiltinConfig, Pipeline, SandboxMode, ToolRegistry, Workspace};
use std::path::PathBuf;
use std::sync::Arc;

pub struct Fixture {
    pub home: tempfile::TempDir,
    pub work: tempfile::TempDir,
    pub agent: Agent,
    pub provider: Arc<ScriptedProvider>,
    pub session_path: PathBuf,
}

pub fn fixture(script_yaml: &str, hooks: HookRegistry) -> Fixture {
    fixture_with(
        script_yaml,
        hooks,
        SandboxMode::WorkspaceWrite,
        ApprovalPolicy::Ask,
    )
}

pub fn fixture_with(
    script_yaml: &str,
    hooks: HookRegistry,
    sandbox: SandboxMode,
    approval: ApprovalPolicy,
) -> Fixture {
    fixture_config(script_yaml, hooks, sandbox, |config| {
        config.approval = approval
    })
}

/// Like [`fixture_with`], with any change to the agent's config (e.g. a small context window).
pub fn fixture_config(
    script_yaml: &str,
    hooks: HookRegistry,
    sandbox: SandboxMode,
    edit: impl FnOnce(&mut AgentConfig),
) -> Fixture {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let cwd = work.path().canonicalize().unwrap();
    let provider = Arc::new(
        ScriptedProvider::from_str(script_yaml, Format::Yaml)
            .unwrap()
            .with_name("scripted"),
    );
    let store = Store::new(home.path().to_path_buf());
    let header = SessionHeader::new(new_session_id(), now_ms(), Some(cwd.display().to_string()));
    let log =
        PersistentSession::create(&store, &cwd, Session::new(header), WriterOptions::default())
            .unwrap();
    let session_path = log.writer().path().to_path_buf();
    let cfg = BuiltinConfig::default();
    let registry = Arc::new(ToolRegistry::with_builtins(&cfg));
    let pipeline = Pipeline::builder(registry, Workspace::new(&cwd, sandbox).unwrap())
        .plan_state(cfg.plan.clone())
        .build()
        .unwrap();
    let model = "deepseek-v4-flash";
    let info = ModelCatalogue::default().lookup(model);
    let mut config = AgentConfig::new("scripted", model, info, cwd);
    config.retry = keel_llm::RetryPolicy::seeded(7);
    edit(&mut config);
    let agent = Agent::builder(config, provider.clone() as Arc<dyn Provider>, pipeline, log)
        .hooks(hooks)
        .build()
        .unwrap();
    Fixture {
        home,
        work,
        agent,
        provider,
        session_path,
    }
}

pub fn events(f: &Fixture) -> Vec<SessionEvent> {
    f.agent
        .log()
        .session()
        .events()
        .map(|e| e.into_owned())
        .collect()
}

pub fn types(f: &Fixture) -> Vec<String> {
    events(f)
        .iter()
        .map(|e| e.type_name().to_owned())
        .filter(|t| t != "assistant/chunk")
        .collect()
}
