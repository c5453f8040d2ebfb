//! The built-in plugin set and the resolution of `[[plugins]]` rows.
//!
//! Each plugin is declared in its own crate (its id, description, default and configuration
//! live there); this is the one list of them. A row `{id, use, enabled, config}` names a
//! catalogue plugin by `use` (defaulting to `id`). Enabled rows are installed in configuration
//! order; an unknown plugin or a bad `config` is an error naming the row and the layer (file
//! or flag) that set it.

use crate::config::Loaded;
use crate::error::HostError;
use keel_agent::plugin::{InstallContext, Plugin};
use serde_json::Value;

/// Every built-in plugin, in the order of their default rows.
pub fn builtin() -> Vec<Box<dyn Plugin>> {
    vec![
        Box::new(keel_agent::compaction::CompactionPlugin),
        Box::new(keel_jobs::JobsPlugin),
        Box::new(keel_agent::subagent::SubagentPlugin),
        Box::new(keel_command_hooks::CommandHooksPlugin),
        Box::new(keel_provenance::ProvenancePlugin),
        Box::new(keel_continuity::ContinuityPlugin),
        Box::new(keel_memory::MemoryPlugin::default()),
        Box::new(keel_memory::RoleplayPlugin),
        Box::new(keel_delegate::DelegatePlugin::default()),
        Box::new(keel_mcp::McpPlugin),
        Box::new(keel_codemode::CodeModePlugin),
        Box::new(keel_skills::SkillsPlugin),
        Box::new(keel_goals::GoalsPlugin),
        Box::new(keel_web::WebPlugin),
        Box::new(keel_schedule::SchedulePlugin),
        Box::new(keel_schedule::PresentPlugin),
        Box::new(keel_codemode::WorkflowPlugin),
        Box::new(keel_codemode::RalphPlugin),
        Box::new(keel_checkpoint::CheckpointPlugin),
    ]
}

/// Install the enabled rows of `loaded` into `ctx`; `force_enable` lists plugin ids enabled by
/// flags (`--provenance`) even when their row says otherwise, or when no row names them;
/// `edits` change a plugin's merged row config (`--control contract`). Returns the ids of the
/// rows installed.
pub fn install_rows(
    plugins: &[Box<dyn Plugin>],
    loaded: &Loaded,
    ctx: &mut InstallContext,
    force_enable: &[&str],
    edits: &[crate::factory::RowEdit],
) -> Result<Vec<String>, HostError> {
    let edited = |uses: &str, config: Value| {
        edits
            .iter()
            .filter(|e| e.plugin == uses)
            .fold(config, |c, e| (e.edit)(c))
    };
    let mut installed = Vec::new();
    let find = |uses: &str| plugins.iter().find(|p| p.id().as_str() == uses);
    for row in &loaded.config.plugins {
        let uses = row.uses.as_deref().unwrap_or(&row.id);
        let layer = loaded
            .origin
            .get(&format!("plugins[{}]", row.id))
            .cloned()
            .unwrap_or_else(|| "?".into());
        let plugin = find(uses).ok_or_else(|| HostError::UnknownPlugin {
            uses: uses.to_owned(),
            row: row.id.clone(),
            layer: layer.clone(),
            known: plugins.iter().map(|p| p.id().as_str()).collect(),
        })?;
        if !(row.enabled.unwrap_or(true) || force_enable.contains(&uses)) {
            continue;
        }
        let config = match &row.config {
            Some(t) => serde_json::to_value(t).map_err(|source| HostError::RowConfig {
                row: row.id.clone(),
                source,
            })?,
            None => Value::Object(Default::default()),
        };
        plugin
            .install(ctx, edited(uses, config))
            .map_err(|source| HostError::Plugin {
                row: row.id.clone(),
                layer,
                source,
            })?;
        installed.push(row.id.clone());
    }
    for id in force_enable {
        let has_row = loaded
            .config
            .plugins
            .iter()
            .any(|r| r.uses.as_deref().unwrap_or(&r.id) == *id);
        if has_row {
            continue;
        }
        let plugin = find(id).ok_or_else(|| HostError::UnknownPlugin {
            uses: (*id).to_owned(),
            row: (*id).to_owned(),
            layer: "a command-line flag".into(),
            known: plugins.iter().map(|p| p.id().as_str()).collect(),
        })?;
        plugin
            .install(ctx, edited(id, Value::Object(Default::default())))
            .map_err(|source| HostError::Plugin {
                row: (*id).to_owned(),
                layer: "a command-line flag".into(),
                source,
            })?;
        installed.push((*id).to_owned());
    }
    Ok(installed)
}
