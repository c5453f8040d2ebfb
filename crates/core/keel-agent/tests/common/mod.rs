//! Shared fixture: an agent over a real temp workspace and a real session file, driven by a
//! scripted model, built through `keel-host`'s factory with no plugin enabled (the bare loop).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use keel_agent::{AgentConfig, ApprovalPolicy, HookRegistry};
use keel_protocol::SessionEvent;
use keel_testkit::agent::{AgentFixture, AgentOptions, agent_fixture, events_of, types_of};
use keel_tools::SandboxMode;

pub type Fixture = AgentFixture;

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
    fixture_config(script_yaml, hooks, sandbox, move |config| {
        config.approval = approval
    })
}

/// Like [`fixture_with`], with any change to the agent's config (e.g. a small context window).
pub fn fixture_config(
    script_yaml: &str,
    hooks: HookRegistry,
    sandbox: SandboxMode,
    edit: impl FnOnce(&mut AgentConfig) + Send + 'static,
) -> Fixture {
    agent_fixture(
        script_yaml,
        AgentOptions {
            sandbox,
            hooks,
            edit: Some(Box::new(edit)),
            ..AgentOptions::default()
        },
    )
}

pub fn events(f: &Fixture) -> Vec<SessionEvent> {
    events_of(&f.agent)
}

pub fn types(f: &Fixture) -> Vec<String> {
    types_of(&f.agent)
}
