//! Subagents: the `subagent {description, prompt, run_in_background?}` tool, which runs a child
//! agent on its own session and returns its final answer.
//!
//! Two providers, chosen by [`SubagentConfig::mode`]:
//! - **spawn**: a fresh child session (no history): the prompt is all it knows;
//! - **fork**: the child is seeded with the parent's log up to its last completed turn
//!   (`Session::fork`, then `session/end-seed`), so it knows the conversation so far.
//!
//! Either way the child's header names its parent (`parentSession`), says `origin: "subagent"`
//! and carries `delegationDepth` = parent's + 1; a call that would pass
//! [`SubagentConfig::max_depth`] is refused, and a child at the limit gets no `subagent` tool.
//! The prompt becomes the child's first user message byte for byte (source plugin
//! `keel/subagent`). The child shares the parent's provider, model, workspace, sandbox, plan
//! mode flag, subprocess service and hooks, writes its own session file in the same store, and
//! cannot ask for approval: `ask` becomes `never` (asks are denied), `auto` stays `auto`. Its
//! tools are the parent's, minus `subagent` (replaced by one bound to the child while the depth
//! allows), `exit_plan_mode` and the job tools, and filtered by [`SubagentConfig::tools`].
//!
//! ```text
//! subagent call ─► depth check ─► child session (spawn | fork) + child agent
//!   ─► parent log: subagent/descriptor ─► subagent/started
//!   ─► foreground: child turn (cancel follows the call) ─► final text = tool result
//!   └► background: job "subagent-N" (needs the jobs service) ─► job id now, notice later
//!   ─► subagent/finished
//! ```
//!
//! Named subagents ([`defs`]): Claude Code's `agents/*.md` definitions from a trusted
//! workspace, the user's folders and the enabled plugin bundles. With any, `subagent` takes
//! `agent` (alias `subagent_type`): the child's system prompt gains the definition's body, its
//! tools are narrowed to the definition's list, and its first message records `agent`.
//!
//! Binding: the tool is registered before the parent agent exists; [`install`] adds an
//! `on_agent` callback that binds it (weakly) to the built agent.

mod child;
pub mod defs;
mod front;
mod spawner;
pub mod team;
mod tool;

pub use child::ChildError;
pub use defs::{AgentDef, AgentDefs, DefProblem};
pub use spawner::{ChildModel, ChildTask, LiveChild, Spawner};
pub use team::{
    AgentInfo, AgentsCommand, InterruptAgentTool, ListAgentsTool, MemberState, ParentMessageTool,
    SendMessageTool,
};
pub use tool::SubagentTool;

use crate::plugin::{InstallContext, Plugin, PluginError, PluginId, plugin_config};
use keel_session::Store;
use serde::Deserialize;
use serde_json::Value;
use std::sync::Arc;

/// The `subagent` plugin's identity (the source of a child's first message is
/// `keel/subagent`).
pub const ID: PluginId = crate::plugin_id!("subagent");

/// How a child session starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SubagentMode {
    /// A fresh session: the child sees only its prompt.
    Spawn,
    /// Seeded with the parent's log up to its last completed turn.
    Fork,
    /// Both tools: `subagent` (fresh) and `subagent_fork` (seeded), as in dsh (the default).
    #[default]
    Both,
}

impl SubagentMode {
    /// Spelling in config and `subagent/descriptor` events.
    pub fn as_str(self) -> &'static str {
        match self {
            SubagentMode::Spawn => "spawn",
            SubagentMode::Fork => "fork",
            SubagentMode::Both => "both",
        }
    }
}

/// Settings of the `subagent` tool (`[[plugins]] use = "subagent"`, `[plugins.config]`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SubagentConfig {
    /// `spawn`, `fork`, or `both` (`subagent` spawns and `subagent_fork` forks).
    pub mode: SubagentMode,
    /// Deepest delegation allowed (a top-level session is depth 0; its children depth 1).
    pub max_depth: u32,
    /// Tools children may use (by name); `None`: all of the parent's (minus the exclusions in
    /// the module docs).
    pub tools: Option<Vec<String>>,
}

impl Default for SubagentConfig {
    fn default() -> Self {
        SubagentConfig {
            mode: SubagentMode::Both,
            max_depth: 3,
            tools: None,
        }
    }
}

/// Register the `subagent` tool in `ctx` (child sessions go to the store under
/// `ctx.keel_home`) and bind it to the agent once built ([`InstallContext::bind`]). Background
/// children need a background service too (the `jobs` plugin).
///
/// The named subagent definitions ([`defs`]) are read here, once: the project's only when
/// `ctx.project_trust` is trusted, the user's, and those of `ctx.bundles`. Each file skipped is
/// logged in the agent's session, when it is bound, as an ignorable
/// [`defs::PROBLEM_EVENT`] `{file, error}`.
pub fn install(ctx: &mut InstallContext, config: SubagentConfig) -> Arc<SubagentTool> {
    let defs = Arc::new(AgentDefs::for_install(ctx));
    install_with(ctx, config, defs)
}

/// [`install`] with the definitions given rather than read.
pub fn install_with(
    ctx: &mut InstallContext,
    config: SubagentConfig,
    defs: Arc<AgentDefs>,
) -> Arc<SubagentTool> {
    let both = config.mode == SubagentMode::Both;
    let config = Arc::new(config);
    let store = Store::new(ctx.keel_home.clone());
    let tool = SubagentTool::with_defs(config.clone(), store.clone(), defs.clone(), false);
    ctx.tools.push(tool.clone());
    let fork = both.then(|| SubagentTool::with_defs(config, store, defs.clone(), true));
    if let Some(fork) = &fork {
        ctx.tools.push(fork.clone());
    }
    let controls = team::unbound_controls();
    let command = Arc::new(team::AgentsCommand::default());
    ctx.commands.push(command.clone());
    ctx.tools.push(controls.0.clone());
    ctx.tools.push(controls.1.clone());
    ctx.tools.push(controls.2.clone());
    let bind = tool.clone();
    ctx.on_agent.push(Box::new(move |agent| {
        bind.bind(agent);
        if let Some(fork) = &fork {
            fork.bind(agent);
        }
        team::bind_controls(&controls, agent);
        command.bind(agent);
        for p in defs.problems() {
            let data = serde_json::json!({"file": p.path.display().to_string(), "error": p.reason});
            let _ = agent.push_ignorable(defs::PROBLEM_EVENT, data);
        }
    }));
    tool
}

/// The `subagent` plugin: [`install`] with the row's [`SubagentConfig`].
#[derive(Debug, Clone, Copy, Default)]
pub struct SubagentPlugin;

impl Plugin for SubagentPlugin {
    fn id(&self) -> PluginId {
        ID
    }
    fn description(&self) -> &'static str {
        "the subagent tool: delegate a task to a child agent (spawn or fork), foreground or as a job"
    }
    fn enabled_by_default(&self) -> bool {
        true
    }
    fn presenter(&self) -> Option<keel_protocol::present::MakePresenter> {
        Some(defs::presenter())
    }
    fn install(&self, ctx: &mut InstallContext, config: Value) -> Result<(), PluginError> {
        let config: SubagentConfig = plugin_config(ID, config)?;
        install(ctx, config);
        Ok(())
    }
}
