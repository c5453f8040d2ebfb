//! Shared rig of the jobs and subagent tests: an agent built through the factory with the
//! `jobs` and `subagent` plugins as configured, over a real temp workspace, a real session
//! store and a scripted model.
#![allow(dead_code, unused_imports, clippy::unwrap_used, clippy::expect_used)]

use keel_agent::subagent::SubagentConfig;
use keel_agent::{Agent, ApprovalPolicy, HookRegistry};
use keel_jobs::JobsConfig;
use keel_llm::ScriptedProvider;
use keel_testkit::agent::{AgentFixture, AgentOptions, PluginRow, agent_fixture};
use keel_tools::JobControl;
use keel_tools::SandboxMode;
use std::path::PathBuf;
use std::sync::Arc;

pub use keel_testkit::agent::{
    GUARD, events_of, guarded, load_session as load, tool_results, until, user_messages,
};

pub struct Rig {
    pub fixture: AgentFixture,
    pub agent: Agent,
    pub provider: Arc<ScriptedProvider>,
}

impl Rig {
    /// The agent's job control, when the `jobs` plugin is on.
    pub fn jobs(&self) -> Option<Arc<dyn JobControl>> {
        self.agent.jobs()
    }
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
    let mut plugins = Vec::new();
    if let Some(c) = &opts.jobs {
        plugins.push(PluginRow::with("jobs", c));
    }
    if let Some(c) = &opts.subagent {
        plugins.push(PluginRow::with("subagent", c));
    }
    let fixture = agent_fixture(
        script_yaml,
        AgentOptions {
            sandbox: opts.sandbox,
            approval: opts.approval,
            hooks: opts.hooks,
            plugins,
            ..AgentOptions::default()
        },
    );
    Rig {
        agent: fixture.agent.clone(),
        provider: fixture.provider.clone(),
        fixture,
    }
}

/// The session file of `id` under the rig's store.
pub fn session_file(rig: &Rig, id: &str) -> PathBuf {
    keel_testkit::agent::session_file(&rig.fixture, id)
}
