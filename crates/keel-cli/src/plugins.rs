//! The catalogue of built-in plugins and the resolution of `[[plugins]]` rows.
//!
//! A row `{id, use, enabled, config}` names a catalogue plugin by `use` (defaulting to `id`).
//! Enabled rows are installed in configuration order; an unknown plugin or a bad `config`
//! is an error naming the row and the layer (file or flag) that set it.

use crate::config::Loaded;
use anyhow::{Result, anyhow};
use keel_agent::plugin::{HostBuilder, Plugin, PluginError, plugin_config};
use serde_json::Value;

/// `compaction`: prune oversized tool results and summarise old history under context pressure
/// or on a context-window overflow.
struct CompactionPlugin;

impl Plugin for CompactionPlugin {
    fn id(&self) -> &'static str {
        "compaction"
    }
    fn description(&self) -> &'static str {
        "prune oversized tool results and summarise old history when the context window fills"
    }
    fn install(&self, host: &mut HostBuilder, config: Value) -> Result<(), PluginError> {
        let config: keel_agent::compaction::CompactionConfig = plugin_config(self.id(), config)?;
        keel_agent::compaction::install(&mut host.hooks, config);
        Ok(())
    }
}

/// `hooks`: command hooks compatible with Claude Code's `hooks` settings, from keel's
/// configuration (`[hooks]`) and the project's `.claude/settings.json` (+ `.local.json`).
struct HooksPlugin {
    keel_hooks: Option<toml::Table>,
}

/// The `hooks` row's own settings.
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

impl Plugin for HooksPlugin {
    fn id(&self) -> &'static str {
        "hooks"
    }
    fn description(&self) -> &'static str {
        "command hooks compatible with Claude Code (SessionStart, UserPromptSubmit, PreToolUse, PostToolUse, Stop)"
    }
    fn install(&self, host: &mut HostBuilder, config: Value) -> Result<(), PluginError> {
        use keel_agent::command_hooks::{self, HooksConfig, HooksOptions};
        let row: HooksRow = plugin_config(self.id(), config)?;
        let setup = |message: String| PluginError::Setup {
            plugin: "hooks".into(),
            message,
        };
        let mut merged = match &self.keel_hooks {
            Some(t) => {
                let value = serde_json::to_value(t).map_err(|e| setup(e.to_string()))?;
                HooksConfig::from_value(value, "keel configuration [hooks]")
                    .map_err(|e| setup(e.to_string()))?
            }
            None => HooksConfig::default(),
        };
        if row.project_settings
            && let Some(project) =
                command_hooks::load_project_settings(&host.cwd).map_err(|e| setup(e.to_string()))?
        {
            merged.merge(project);
        }
        if merged.is_empty() {
            return Ok(());
        }
        let runner = host
            .subprocess
            .clone()
            .ok_or_else(|| setup("no subprocess service to run hook commands".into()))?;
        let mut options = HooksOptions::new(host.cwd.clone());
        options.default_timeout = std::time::Duration::from_secs(row.default_timeout_secs);
        options.max_stop_continuations = row.max_stop_continuations;
        let installed = command_hooks::install(&mut host.hooks, merged, runner, options);
        host.on_agent
            .push(Box::new(move |agent| installed.bind(agent)));
        Ok(())
    }
}

/// Every built-in plugin (`loaded` supplies configuration sections some plugins read).
pub fn catalogue(loaded: &Loaded) -> Vec<Box<dyn Plugin>> {
    vec![
        Box::new(CompactionPlugin),
        Box::new(keel_agent::jobs::JobsPlugin),
        Box::new(keel_agent::subagent::SubagentPlugin),
        Box::new(HooksPlugin {
            keel_hooks: loaded.config.hooks.clone(),
        }),
        Box::new(keel_provenance::ProvenancePlugin),
    ]
}

/// Plugin ids enabled by flags (`--provenance`), for [`install_rows`]'s `force_enable`.
pub fn forced(common: &crate::cli::Common) -> Vec<&'static str> {
    if common.provenance {
        vec!["provenance"]
    } else {
        Vec::new()
    }
}

/// Install the enabled rows of `loaded` into `host`. `force_enable` lists plugin ids enabled by
/// flags (e.g. `--provenance`) even when their row says otherwise.
pub fn install_rows(
    loaded: &Loaded,
    host: &mut HostBuilder,
    force_enable: &[&str],
) -> Result<Vec<String>> {
    let catalogue = catalogue(loaded);
    let mut installed = Vec::new();
    for row in &loaded.config.plugins {
        let uses = row.uses.clone().unwrap_or_else(|| row.id.clone());
        let layer = loaded
            .origin
            .get(&format!("plugins[{}]", row.id))
            .cloned()
            .unwrap_or_else(|| "?".into());
        let plugin = catalogue.iter().find(|p| p.id() == uses).ok_or_else(|| {
            let known: Vec<&str> = catalogue.iter().map(|p| p.id()).collect();
            anyhow!(
                "unknown plugin {uses:?} in the [[plugins]] row with id {:?} (set in {layer}); known plugins: {}",
                row.id,
                known.join(", ")
            )
        })?;
        let enabled = row.enabled.unwrap_or(true) || force_enable.contains(&uses.as_str());
        if !enabled {
            continue;
        }
        let config = match &row.config {
            Some(t) => {
                serde_json::to_value(t).map_err(|e| anyhow!("plugin row {:?}: {e}", row.id))?
            }
            None => Value::Object(Default::default()),
        };
        plugin
            .install(host, config)
            .map_err(|e| anyhow!("{e} (row {:?}, set in {layer})", row.id))?;
        installed.push(row.id.clone());
    }
    for id in force_enable {
        if !loaded
            .config
            .plugins
            .iter()
            .any(|r| r.uses.as_deref().unwrap_or(&r.id) == *id)
        {
            let plugin = catalogue
                .iter()
                .find(|p| p.id() == *id)
                .ok_or_else(|| anyhow!("unknown plugin {id:?}"))?;
            plugin.install(host, Value::Object(Default::default()))?;
            installed.push((*id).to_owned());
        }
    }
    Ok(installed)
}
