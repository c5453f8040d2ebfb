//! The plugin rows. Both are off by default (their schemas are not paid on every request
//! unless asked for); a user config row switches one on:
//!
//! ```toml
//! [[plugins]]
//! id = "workflow"
//! [plugins.config]
//! max_parallel = 4        # children running at once; parallel()'s default limit
//! time_limit_sec = 1800   # one workflow, its children included
//! memory_limit_mib = 64   # the script's JavaScript heap
//!
//! [[plugins]]
//! id = "ralph"
//! ```
//!
//! Children do not inherit `workflow` or `ralph` (withheld at `subagent/build`).

use crate::engine::{DEFAULT_MEMORY_LIMIT_MIB, Limits};
use crate::flow::ralph::{RALPH, RalphTool};
use crate::flow::workflow::{DEFAULT_MAX_PARALLEL, DEFAULT_TIME_LIMIT_SEC, WORKFLOW, WorkflowTool};
use keel_agent::plugin::{InstallContext, Plugin, PluginError, PluginId, plugin_config};
use keel_agent::subagent::{Spawner, SubagentConfig};
use keel_session::Store;
use serde::Deserialize;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// The workflow plugin's id.
pub const WORKFLOW_ID: PluginId = keel_agent::plugin_id!("workflow");
/// The ralph plugin's id.
pub const RALPH_ID: PluginId = keel_agent::plugin_id!("ralph");

/// The `workflow` row's `[plugins.config]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkflowSettings {
    /// Children running at once, and `parallel()`'s default limit (default 4).
    pub max_parallel: Option<usize>,
    /// Seconds one workflow may take, its children included (default 1800).
    pub time_limit_sec: Option<u64>,
    /// MiB the script's JavaScript heap may hold (default 64).
    pub memory_limit_mib: Option<u64>,
}

impl WorkflowSettings {
    /// The engine limits of one workflow.
    pub fn limits(&self) -> Limits {
        let mib = self
            .memory_limit_mib
            .unwrap_or(DEFAULT_MEMORY_LIMIT_MIB)
            .max(1);
        Limits {
            memory_bytes: usize::try_from(mib.saturating_mul(1024 * 1024)).unwrap_or(usize::MAX),
            time: Duration::from_secs(self.time_limit_sec.unwrap_or(DEFAULT_TIME_LIMIT_SEC).max(1)),
            time_setting: "[plugins.config] time_limit_sec of the workflow row",
            memory_setting: "[plugins.config] memory_limit_mib of the workflow row",
            ..Limits::default()
        }
    }
}

/// A spawner bound to the agent being built, and the tool withheld from its children.
fn spawner(ctx: &mut InstallContext, tool: &'static str) -> Arc<Spawner> {
    let spawner = Spawner::new(
        Arc::new(SubagentConfig::default()),
        Store::new(ctx.keel_home.clone()),
    );
    let bind = spawner.clone();
    ctx.on_agent.push(Box::new(move |agent| bind.bind(agent)));
    ctx.agent_hooks
        .subagent_build
        .push(Arc::new(move |_, setup| {
            setup.withheld.push(tool.to_owned())
        }));
    spawner
}

/// The `workflow` plugin.
#[derive(Debug, Default, Clone, Copy)]
pub struct WorkflowPlugin;

impl Plugin for WorkflowPlugin {
    fn id(&self) -> PluginId {
        WORKFLOW_ID
    }

    fn description(&self) -> &'static str {
        "the workflow tool: a JavaScript/TypeScript script that fans out subagents (agent, parallel, pipeline)"
    }

    fn enabled_by_default(&self) -> bool {
        true
    }

    fn presenter(&self) -> Option<keel_protocol::present::MakePresenter> {
        Some(super::presenter::workflow())
    }

    fn install(&self, ctx: &mut InstallContext, config: Value) -> Result<(), PluginError> {
        let settings: WorkflowSettings = plugin_config(WORKFLOW_ID, config)?;
        let max_parallel = settings.max_parallel.unwrap_or(DEFAULT_MAX_PARALLEL).max(1);
        let spawner = spawner(ctx, WORKFLOW);
        ctx.tools.push(Arc::new(WorkflowTool::new(
            spawner,
            settings.limits(),
            max_parallel,
        )));
        Ok(())
    }
}

/// The `ralph` plugin.
#[derive(Debug, Default, Clone, Copy)]
pub struct RalphPlugin;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RalphConfig {}

impl Plugin for RalphPlugin {
    fn id(&self) -> PluginId {
        RALPH_ID
    }

    fn description(&self) -> &'static str {
        "the ralph tool: rounds of fresh subagents on one objective, with a hand-off between rounds"
    }

    fn enabled_by_default(&self) -> bool {
        false
    }

    fn presenter(&self) -> Option<keel_protocol::present::MakePresenter> {
        Some(super::presenter::ralph())
    }

    fn install(&self, ctx: &mut InstallContext, config: Value) -> Result<(), PluginError> {
        let _: RalphConfig = plugin_config(RALPH_ID, config)?;
        let spawner = spawner(ctx, RALPH);
        ctx.tools.push(Arc::new(RalphTool::new(spawner)));
        Ok(())
    }
}
