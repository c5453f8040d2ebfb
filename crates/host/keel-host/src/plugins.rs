//! The built-in plugin set and the resolution of `[[plugins]]` rows.
//!
//! Each plugin is declared in its own crate (its id, description, default and configuration
//! live there); this is the one list of them. A row `{id, use, enabled, config}` names a
//! plugin of the set by `use` (defaulting to `id`). Enabled rows are installed in configuration
//! order; an unknown plugin or a bad `config` is an error naming the row and the layer (file
//! or flag) that set it.

use crate::config::Loaded;
use crate::error::HostError;
use keel_agent::plugin::{InstallContext, Plugin};
use keel_protocol::present::PresenterSet;
use serde_json::Value;
use std::sync::OnceLock;

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

/// Every built-in plugin's presenter ([`keel_protocol::present`]), enabled or not: a log keeps
/// the events of a plugin turned off since, and they show the same. Made once per process.
pub fn presenters() -> PresenterSet {
    static SET: OnceLock<PresenterSet> = OnceLock::new();
    SET.get_or_init(|| PresenterSet::new(builtin().iter().filter_map(|p| p.presenter()).collect()))
        .clone()
}

/// Whether the built-in presenters can show `event` as presented files
/// ([`keel_protocol::present::Item::Files`]): only the present plugin's presenter gives files,
/// from its `present/files` events. A front end listing the files a session presented runs the
/// presenters over these events alone, not the whole log.
pub fn presents_files(event: &keel_protocol::SessionEvent) -> bool {
    keel_protocol::present::data_of(event, keel_schedule::PRESENT_EVENT).is_some()
}

/// One active schedule of a session (the schedule plugin's), for a front end that lists them
/// without knowing the plugin: `GET /api/v1/schedules`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduledPrompt {
    /// `sched-N`.
    pub id: String,
    /// What is sent when it fires.
    pub prompt: String,
    /// When it fires next, ms since the Unix epoch.
    pub due_ms: i64,
    /// Seconds between firings of a recurring schedule.
    pub every_seconds: Option<u64>,
}

/// The active schedules of `events` (a session's, in order), as the schedule plugin folds them.
pub fn schedules<'a>(
    events: impl Iterator<Item = &'a keel_protocol::SessionEvent>,
) -> Vec<ScheduledPrompt> {
    keel_schedule::state::Fold::of(events)
        .active
        .into_iter()
        .map(|s| ScheduledPrompt {
            id: s.id,
            prompt: s.prompt,
            due_ms: s.due_ms,
            every_seconds: s.every_seconds,
        })
        .collect()
}

/// A plugin's settings as the layered configuration gives them, for a command that acts for the
/// plugin without installing it (`keel rewind` with the checkpoints' caps, `keel continuity
/// show`): the row that uses it and its typed `config`.
#[derive(Debug, Clone)]
pub struct PluginSettings<T> {
    /// The row (`None`: no row uses the plugin; `config` is its defaults).
    pub row: Option<String>,
    /// Whether that row is enabled (the plugin's default when no row names it).
    pub enabled: bool,
    /// Its configuration, typed by the plugin.
    pub config: T,
}

/// The settings of `plugin` in `loaded`: the row with its id that uses it, else the first row
/// using it; its `config` deserialised as the plugin does at install (errors name the row and
/// its layer).
pub fn settings<T: serde::de::DeserializeOwned + Default>(
    loaded: &Loaded,
    plugin: &dyn Plugin,
) -> Result<PluginSettings<T>, HostError> {
    let id = plugin.id();
    let rows = &loaded.config.plugins;
    let uses = |r: &&crate::config::PluginRow| r.uses.as_deref().unwrap_or(&r.id) == id.as_str();
    let Some(row) = rows
        .iter()
        .filter(uses)
        .find(|r| r.id == id.as_str())
        .or_else(|| rows.iter().find(uses))
    else {
        return Ok(PluginSettings {
            row: None,
            enabled: plugin.enabled_by_default(),
            config: T::default(),
        });
    };
    let value = match &row.config {
        Some(t) => serde_json::to_value(t).map_err(|source| HostError::RowConfig {
            row: row.id.clone(),
            source,
        })?,
        None => Value::Null,
    };
    let config =
        keel_agent::plugin::plugin_config(id, value).map_err(|source| HostError::Plugin {
            row: row.id.clone(),
            layer: loaded
                .origin
                .get(&format!("plugins[{}]", row.id))
                .cloned()
                .unwrap_or_else(|| "?".into()),
            source,
        })?;
    Ok(PluginSettings {
        row: Some(row.id.clone()),
        enabled: row.enabled.unwrap_or(true),
        config,
    })
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

#[cfg(test)]
mod tests {
    use keel_protocol::present::Item;
    use keel_protocol::{EventBody, OtherEvent, Seq, SessionEvent};
    use serde_json::json;

    fn other(seq: u64, type_name: &str, data: serde_json::Value) -> SessionEvent {
        let body = EventBody::Other(Box::new(OtherEvent {
            type_name: type_name.into(),
            data,
        }));
        SessionEvent::new(Seq(seq), 0, body)
    }

    #[test]
    fn the_files_the_presenters_give_come_from_the_events_that_present_files() {
        let log = [
            other(
                1,
                keel_schedule::FIRED_EVENT,
                json!({"id": "s", "dueAt": "t"}),
            ),
            other(
                2,
                keel_schedule::PRESENT_EVENT,
                json!({"files": [{"path": "a.md"}]}),
            ),
            other(3, "goal/set", json!({"objective": "x"})),
        ];
        let files = |items: Vec<(Seq, Item)>| -> Vec<Seq> {
            items
                .into_iter()
                .filter(|(_, i)| matches!(i, Item::Files(_)))
                .map(|(seq, _)| seq)
                .collect()
        };
        let all = files(super::presenters().present_all(log.iter()));
        let filtered =
            files(super::presenters().present_all(log.iter().filter(|e| super::presents_files(e))));
        assert_eq!(all, vec![Seq(2)]);
        assert_eq!(filtered, all);
    }
}
