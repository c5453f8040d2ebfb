//! Background jobs: a [`JobService`] holding jobs of one or more owner agents, the tools
//! `job_output` / `job_list` / `job_kill`, `bash`'s `run_in_background`, and wake-ups.
//!
//! Design. Tools are registered before the agent exists, so nothing here is bound to an agent
//! at registration: [`install`] puts the job tools into the [`InstallContext`] and an
//! `on_agent` callback that [`JobService::attach`]es the built agent. The agent then holds the
//! service through the core's background seam ([`keel_agent::background::Background`], an
//! `Arc`), the service holds the agent weakly (no cycle). Tools reach the service through
//! their host ([`keel_tools::ToolCaller::jobs`]), which hands out job control scoped to the
//! calling agent, so the same tool instances serve any agent and an agent without a service
//! (a subagent) gets a clear refusal.
//!
//! ```text
//! bash{run_in_background} / subagent{run_in_background} ─► JobService::spawn ─► "<kind>-N"
//!   job future (tokio task) ─► output tail buffer (capped) ─► JobResult
//!   first settlement wins: finish(result) | kill ─► signal the owner's driver
//!   finish ─► notice (keel/jobs user message) ─► owner busy: inject into the running turn
//!                                             └► owner idle: follow-up turn (wake budget)
//! Agent::run_until_idle (core) ─► Background::idle: wait while owned jobs run and may wake it
//! ```
//!
//! What the front end calls: [`install`] (or the [`JobsPlugin`] row), [`InstallContext::bind`]
//! after building the agent, then [`keel_agent::Agent::run_until_idle`] instead of
//! [`keel_agent::Agent::run_pending`], and [`keel_agent::Agent::kill_jobs`] before exiting.
//! Children (subagents) own no jobs: the plugin withholds the job tools from them through the
//! `subagent/build` seam.
//!
//! Not persisted: jobs live in memory; a resumed session starts with none (the wake budget,
//! which is read from the log, survives).

#![deny(missing_docs)]

mod notice;
mod service;
mod tools;
mod wake;

pub use notice::{JobNotice, NOTICE_OUTPUT_CAP};
pub use service::JobService;
pub use tools::{JOB_TOOL_NAMES, JobKillTool, JobListTool, JobOutputTool};

use keel_agent::plugin::{InstallContext, Plugin, PluginError, PluginId, plugin_config};
use keel_agent::seams::{ChildBuild, ChildSetup};
use serde::Deserialize;
use serde_json::Value;
use std::sync::Arc;

/// The `jobs` plugin's identity (its notices' source is `keel/jobs`).
pub const ID: PluginId = keel_agent::plugin_id!("jobs");

/// Settings of the job service (`[[plugins]] use = "jobs"`, `[plugins.config]`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct JobsConfig {
    /// Bytes of each job's output kept (the tail).
    pub output_cap: usize,
    /// Jobs that may run at once across all owners; more are refused.
    pub max_running: usize,
    /// Consecutive wake-ups of an idle owner before a human message is needed again.
    pub max_wakeups: u32,
    /// `job_output` wait when the call gives no `timeout_ms`.
    pub wait_default_ms: u64,
    /// Longest `job_output` wait a call may ask for.
    pub wait_max_ms: u64,
}

impl Default for JobsConfig {
    fn default() -> Self {
        JobsConfig {
            output_cap: 64 * 1024,
            max_running: 8,
            max_wakeups: 3,
            wait_default_ms: 30_000,
            wait_max_ms: 600_000,
        }
    }
}

/// Add the job tools to `ctx` and attach the agent to a new [`JobService`] once it is built
/// ([`InstallContext::bind`]); child agents do not inherit the job tools. Returns the service
/// (e.g. for a front end's job panel).
pub fn install(ctx: &mut InstallContext, config: JobsConfig) -> Arc<JobService> {
    let service = JobService::new(config);
    ctx.tools.extend(tools::all(service.config()));
    ctx.hooks
        .subagent_build
        .push(Arc::new(|_: &ChildBuild, setup: &mut ChildSetup| {
            setup
                .withheld
                .extend(JOB_TOOL_NAMES.iter().map(|n| (*n).to_owned()));
        }));
    let attach = service.clone();
    ctx.on_agent
        .push(Box::new(move |agent| attach.attach(agent)));
    service
}

/// The `jobs` plugin: [`install`] with the row's [`JobsConfig`].
#[derive(Debug, Clone, Copy, Default)]
pub struct JobsPlugin;

impl Plugin for JobsPlugin {
    fn id(&self) -> PluginId {
        ID
    }
    fn description(&self) -> &'static str {
        "background jobs: bash run_in_background, job_output/job_list/job_kill, wake-ups on completion"
    }
    fn enabled_by_default(&self) -> bool {
        true
    }
    fn install(&self, ctx: &mut InstallContext, config: Value) -> Result<(), PluginError> {
        let config: JobsConfig = plugin_config(ID, config)?;
        install(ctx, config);
        Ok(())
    }
}
