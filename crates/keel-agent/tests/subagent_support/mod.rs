//! Shared fixture of the jobs and subagent tests: an agent built the way the binary builds
//! one (a `HostBuilder` with the plugins installed, tools registered before the pipeline, the
//! agent bound after it is built), over a real temp workspace, a real session store and a
//! scripted model.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use keel_agent::jobs::{JobService, JobsConfig};
use keel_agent::plugin::HostBuilder;
use keel_agent::subagent::SubagentConfig;
use keel_agent::{Agent, AgentConfig, ApprovalPolicy, HookRegistry};
use keel_llm::{Format, ModelCatalogue, Provider, ScriptedProvider};
use keel_protocol::{EventBody, Message, SessionEvent, SessionHeader};
use keel_session::{PersistentSession, Session, Store, WriterOptions, new_session_id, now_ms};
use keel_tools::{BuiltinConfig, Pipeline, SandboxMode, ToolRegistry, Workspace};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

pub struct Rig {
    pub home: tempfile::TempDir,
    pub work: tempfile::TempDir,
    pub agent: Agent,
    pub provider: Arc<ScriptedProvider>,
    pub jobs: Option<Arc<JobService>>,
}

pub struct Options {
    pub jobs: Option<JobsConfig>,
    pub subagent: Option<SubagentConfig>,
    pub sandbox: SandboxMode,
    pub approval: ApprovalPolicy,
    pub hooks: HookRegistry,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            jobs: Some(JobsConfig::default()),
            subagent: Some(SubagentConfig::default()),
            sandbox: SandboxMode::WorkspaceWrite,
            approval: ApprovalPolicy::Ask,
            hooks: HookRegistry::default(),
        }
    }
}

pub fn rig(script_yaml: &str, opts: Options) -> Rig {
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

    let mut host = HostBuilder::new(cwd.clone(), home.path().to_path_buf());
    host.hooks = opts.hooks;
    let jobs = opts.jobs.map(|c| keel_agent::jobs::install(&mut host, c));
    if let Some(c) = opts.subagent {
        keel_agent::subagent::install(&mut host, c);
    }
    let cfg = BuiltinConfig::default();
    let mut registry = ToolRegistry::with_builtins(&cfg);
    for tool in std::mem::take(&mut host.tools) {
        registry.register(tool).unwrap();
    }
    let pipeline = Pipeline::builder(
        Arc::new(registry),
        Workspace::new(&cwd, opts.sandbox).unwrap(),
    )
    .hooks(host.hooks.tools.clone())
    .plan_state(cfg.plan.clone())
    .build()
    .unwrap();
    let model = "deepseek-v4-flash";
    let mut config = AgentConfig::new(
        "scripted",
        model,
        ModelCatalogue::default().lookup(model),
        cwd,
    );
    config.retry = keel_llm::RetryPolicy::seeded(7);
    config.approval = opts.approval;
    let agent = Agent::builder(config, provider.clone() as Arc<dyn Provider>, pipeline, log)
        .hooks(host.hooks.clone())
        .build()
        .unwrap();
    HostBuilder::bind(host.on_agent, &agent);
    Rig {
        home,
        work,
        agent,
        provider,
        jobs,
    }
}

/// Hang guard for anything that waits on processes or jobs.
pub const GUARD: Duration = Duration::from_secs(60);

pub async fn guarded<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(GUARD, f)
        .await
        .expect("hang guard: the operation did not finish")
}

/// Poll `cond` until it holds (hang-guarded; not a timing assertion).
pub async fn until(mut cond: impl FnMut() -> bool) {
    guarded(async {
        while !cond() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
}

pub fn events_of(agent: &Agent) -> Vec<SessionEvent> {
    agent
        .log()
        .session()
        .events()
        .map(|e| e.into_owned())
        .collect()
}

pub fn tool_results(events: &[SessionEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::ToolResult(r) => Some(r.message.tool_results().next().unwrap().text()),
            _ => None,
        })
        .collect()
}

pub fn user_messages(events: &[SessionEvent]) -> Vec<Message> {
    events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::UserMessage(m) => Some((**m).clone()),
            _ => None,
        })
        .collect()
}

/// The session file of `id` under the rig's store.
pub fn session_file(rig: &Rig, id: &str) -> PathBuf {
    let cwd = rig.work.path().canonicalize().unwrap();
    Store::new(rig.home.path().to_path_buf())
        .session_dir(&cwd, id)
        .join("session.jsonl")
}

pub fn load(path: &Path) -> Session {
    Store::load(path).unwrap().session
}
