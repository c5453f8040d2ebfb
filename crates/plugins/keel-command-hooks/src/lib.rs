//! Command hooks compatible with Claude Code's `hooks` configuration.
//!
//! Out-of-process extension by shell commands, configured exactly as in Claude Code (in keel's
//! config under `[hooks]`, and in a project's `.claude/settings.json` and
//! `.claude/settings.local.json`). Five events run: `SessionStart`, `UserPromptSubmit`,
//! `PreToolUse`, `PostToolUse` and `Stop` ([`HookEvent`]).
//!
//! Data flow: [`load_project_settings`] / [`HooksConfig`] deserialization validate the
//! configuration (matchers compiled, unknown events refused) → [`install`] puts adapters on
//! the seams (`agent/pre-step`, `tools/pre-execute`, `tools/post-execute`,
//! `agent/turn-stopping`; see `adapters`) → on each event the matching commands run through the
//! [`SubprocessService`] with a JSON payload on stdin (`runner`), each logged as `hook/invoked`
//! and `hook/result` → the exit code and stdout are interpreted by Claude Code's rules
//! (`output`) and the adapters turn them into seam decisions.
//!
//! Event logging from tool hooks: `tools/*` hooks see only the call, not the agent, so the
//! install shares a weak agent slot. The `agent/pre-step` adapter fills it on the first step
//! (every step runs it before any tool call), and [`CommandHooks::bind`] fills it explicitly.
//! The first agent bound wins; a child agent inheriting the registry runs the tool events
//! (logged in the bound agent's session) but not `SessionStart`, `UserPromptSubmit` or `Stop`.
//!
//! The tool adapters live in [`HookRegistry::tools`], which the agent builder turns into its
//! pipeline's seams. The plugin row is `hooks` ([`CommandHooksPlugin`]); it reads keel's
//! `[hooks]` configuration section and, unless its row says otherwise, the project's
//! `.claude/settings.json` — only in a workspace the user trusts
//! ([`keel_agent::plugin::InstallContext::project_trust`]) — and then the `hooks/hooks.json` of
//! every plugin bundle the user installed ([`bundles`]; whatever the workspace's trust). A
//! bundle's file that cannot be used is skipped and logged as an ignorable `hooks/warning`
//! `{bundle, file, error}` ([`presenter`]); the agent is built without it.
#![deny(missing_docs)]

mod adapters;
pub mod bundles;
pub mod config;
pub mod names;
mod output;
pub mod presenter;
mod runner;

pub use bundles::{BundleProblem, load_bundle_hooks, load_bundles};
pub use presenter::WARNING_EVENT;

pub use config::{
    DEFAULT_TIMEOUT, HookCommand, HookEvent, HooksConfig, HooksConfigError, Matcher, MatcherGroup,
    PROJECT_SETTINGS_FILES, load_project_settings, load_project_settings_where, parse_settings,
};

use keel_agent::AgentHandle;
use keel_agent::plugin::{InstallContext, Plugin, PluginError, PluginId, plugin_config};
use keel_agent::seams::HookRegistry;
use keel_tools::subprocess::SubprocessService;
use runner::Shared;
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Settings of the command-hook runner.
#[derive(Debug, Clone)]
pub struct HooksOptions {
    /// Project directory: commands run here; the payload's `cwd`; `CLAUDE_PROJECT_DIR`.
    pub cwd: PathBuf,
    /// Timeout of commands without their own.
    pub default_timeout: Duration,
    /// `Stop` continuations allowed per turn before the turn ends regardless (loop guard).
    pub max_stop_continuations: u32,
}

impl HooksOptions {
    /// Defaults for a project in `cwd`: 60 s timeout, 8 `Stop` continuations per turn.
    pub fn new(cwd: impl Into<PathBuf>) -> Self {
        HooksOptions {
            cwd: cwd.into(),
            default_timeout: DEFAULT_TIMEOUT,
            max_stop_continuations: 8,
        }
    }
}

/// Handle to installed command hooks. Cheap to clone.
#[derive(Clone)]
pub struct CommandHooks {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for CommandHooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandHooks")
            .field("config", &self.shared.config)
            .finish()
    }
}

impl CommandHooks {
    /// Send the events of tool hooks to `agent`'s log (and use its session in payloads) before
    /// its first step. Optional: the first step binds it anyway. The first binding wins.
    pub fn bind(&self, agent: &AgentHandle) {
        self.shared.bind(agent);
    }

    /// The configuration in force.
    pub fn config(&self) -> &HooksConfig {
        &self.shared.config
    }
}

/// Register `config`'s hooks on `hooks`, run by `runner` (whose environment scrub applies).
/// Nothing is registered for events without commands.
pub fn install(
    hooks: &mut HookRegistry,
    config: HooksConfig,
    runner: SubprocessService,
    options: HooksOptions,
) -> CommandHooks {
    let shared = Arc::new(Shared::new(config, runner, options));
    let config = &shared.config;
    if config.is_empty() {
        return CommandHooks { shared };
    }
    hooks.pre_step.push(adapters::pre_step(shared.clone()));
    if config.has(HookEvent::PreToolUse) {
        hooks.tools = std::mem::take(&mut hooks.tools)
            .pre_execute(Arc::new(adapters::PreToolUse(shared.clone())));
    }
    if config.has(HookEvent::PostToolUse) {
        hooks.tools = std::mem::take(&mut hooks.tools)
            .post_execute(Arc::new(adapters::PostToolUse(shared.clone())));
    }
    if config.has(HookEvent::Stop) {
        hooks.turn_stopping.push(adapters::stop(shared.clone()));
    }
    CommandHooks { shared }
}

/// The plugin's identity: row id `hooks`; messages hooks add have the source `keel/hooks`.
pub const ID: PluginId = keel_agent::plugin_id!("hooks");

/// The `hooks` row's own settings (`[plugins.config]`).
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
struct HooksRow {
    /// Read `.claude/settings.json` and `.claude/settings.local.json` of the project.
    project_settings: bool,
    /// Timeout of commands without their own, in seconds.
    default_timeout_secs: u64,
    /// `Stop` continuations allowed per turn.
    max_stop_continuations: u32,
}

impl Default for HooksRow {
    fn default() -> Self {
        HooksRow {
            project_settings: true,
            default_timeout_secs: 60,
            max_stop_continuations: 8,
        }
    }
}

/// The `hooks` plugin: command hooks from keel's `[hooks]` configuration section, the
/// project's `.claude/settings.json` (+ `.local.json`) and the installed plugin bundles'
/// `hooks/hooks.json`, run by the agent's subprocess service.
#[derive(Debug, Clone, Copy, Default)]
pub struct CommandHooksPlugin;

impl Plugin for CommandHooksPlugin {
    fn id(&self) -> PluginId {
        ID
    }
    fn description(&self) -> &'static str {
        "command hooks compatible with Claude Code (SessionStart, UserPromptSubmit, PreToolUse, PostToolUse, Stop)"
    }
    fn enabled_by_default(&self) -> bool {
        true
    }
    fn presenter(&self) -> Option<keel_protocol::present::MakePresenter> {
        Some(presenter::presenter())
    }
    fn install(&self, ctx: &mut InstallContext, config: Value) -> Result<(), PluginError> {
        let row: HooksRow = plugin_config(ID, config)?;
        let mut merged = match ctx.section("hooks") {
            Some(value) => HooksConfig::from_value(value.clone(), "keel configuration [hooks]")
                .map_err(|e| PluginError::setup(ID, "invalid [hooks] section", e))?,
            None => HooksConfig::default(),
        };
        // A workspace's own settings run nothing until the user trusts it, nor a settings file
        // that changed since then.
        if row.project_settings
            && ctx.project_trust.is_trusted()
            && let Some(project) = load_project_settings_where(&ctx.cwd, &|p| ctx.trusts_file(p))
                .map_err(|e| PluginError::setup(ID, "cannot read the project's settings", e))?
        {
            merged.merge(project);
        }
        // The user's installed bundles run whatever the workspace's trust; one that cannot be
        // used is left out with a warning, the others still load.
        let (from_bundles, problems) = load_bundles(&ctx.bundles);
        merged.merge(from_bundles);
        if !problems.is_empty() {
            let warnings: Vec<Value> = problems
                .iter()
                .map(|p| {
                    serde_json::json!({"bundle": p.bundle, "file": p.file, "error": p.error.to_string()})
                })
                .collect();
            ctx.on_agent.push(Box::new(move |agent| {
                for w in warnings {
                    let _ = agent.push_ignorable(WARNING_EVENT, w);
                }
            }));
        }
        if merged.is_empty() {
            return Ok(());
        }
        let mut options = HooksOptions::new(ctx.cwd.clone());
        options.default_timeout = Duration::from_secs(row.default_timeout_secs);
        options.max_stop_continuations = row.max_stop_continuations;
        let installed = install(&mut ctx.hooks, merged, ctx.subprocess.clone(), options);
        ctx.on_agent
            .push(Box::new(move |agent| installed.bind(agent)));
        Ok(())
    }
}
