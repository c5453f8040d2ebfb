//! Background jobs: a [`JobService`] holding jobs of one or more owner agents, the tools
//! `job_output` / `job_list` / `job_kill`, `bash`'s `run_in_background`, and wake-ups.
//!
//! Design. Tools are registered before the agent exists, so nothing here is bound to an agent
//! at registration: [`install`] puts the job tools into the [`HostBuilder`] and an `on_agent`
//! callback that [`JobService::attach`]es the built agent. The agent then holds the service
//! (`Arc`), the service holds the agent weakly (no cycle). Tools reach the service through
//! their host ([`keel_tools::PipelineHost::jobs`]), which hands out job control scoped to the
//! calling agent, so the same tool instances serve any agent and an agent without a service
//! (a subagent) gets a clear refusal.
//!
//! ```text
//! bash{run_in_background} / subagent{run_in_background} ─► JobService::spawn ─► "<kind>-N"
//!   job future (tokio task) ─► output tail buffer (capped) ─► JobResult
//!   first settlement wins: finish(result) | kill ─► signal the owner's driver
//!   finish ─► notice (keel/jobs user message) ─► owner busy: inject into the running turn
//!                                             └► owner idle: follow-up turn (wake budget)
//! Agent::run_until_idle: run pending turns; wait while owned jobs run and may still wake it
//! ```
//!
//! What the front end calls: [`install`] (or the [`JobsPlugin`] row), [`HostBuilder::bind`]
//! after building the agent, then [`crate::Agent::run_until_idle`] instead of
//! [`crate::Agent::run_pending`], and [`crate::Agent::kill_jobs`] before exiting.
//!
//! Not persisted: jobs live in memory; a resumed session starts with none (the wake budget,
//! which is read from the log, survives).

mod notice;
mod service;
mod tools;
mod wake;

pub use notice::{JOBS_PLUGIN, JobNotice, NOTICE_OUTPUT_CAP};
pub use service::JobService;
pub use tools::{JOB_TOOL_NAMES, JobKillTool, JobListTool, JobOutputTool};

use crate::plugin::{HostBuilder, Plugin, PluginError, plugin_config};
use serde::Deserialize;
use serde_json::Value;
use std::sync::Arc;

/// Settings of the job service (`[[plugins]] use = "jobs"`, `[plugins.config]`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
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

/// Add the job tools to `host` and attach the agent to a new [`JobService`] once it is built
/// ([`HostBuilder::bind`]). Returns the service (e.g. for a front end's job panel).
pub fn install(host: &mut HostBuilder, config: JobsConfig) -> Arc<JobService> {
    let service = JobService::new(config);
    host.tools.extend(tools::all(service.config()));
    let attach = service.clone();
    host.on_agent
        .push(Box::new(move |agent| attach.attach(agent)));
    service
}

/// The `jobs` plugin: [`install`] with the row's [`JobsConfig`].
#[derive(Debug, Clone, Copy, Default)]
pub struct JobsPlugin;

impl Plugin for JobsPlugin {
    fn id(&self) -> &'static str {
        "jobs"
    }
    fn description(&self) -> &'static str {
        "background jobs: bash run_in_background, job_output/job_list/job_kill, wake-ups on completion"
    }
    fn install(&self, host: &mut HostBuilder, config: Value) -> Result<(), PluginError> {
        let config: JobsConfig = plugin_config(self.id(), config)?;
        install(host, config);
        Ok(())
    }
}
