//! Per-workspace switches: plugin rows and MCP servers turned on or off for one workspace, in
//! the user's own configuration (never the repository's files), as the web app's plugins page
//! sets them:
//!
//! ```toml
//! [projects."/home/ada/src/keel"]
//! plugins = { provenance = true, web = false }
//! mcp_servers = { github = false }
//! ```
//!
//! At load, the entry of the workspace root (the key as `keel trust` writes it) becomes one
//! more layer, right after the project's: `[[plugins]]` rows and `[mcp_servers.NAME]` tables
//! with only `enabled`. A switch applies to a row or server the other layers define; one that
//! names nothing is left out (a removed plugin row, a server of the project's `.mcp.json`,
//! which keel does not rewrite). Being the user's, it needs no trust; `--config` and `-c`
//! still win over it.

use crate::config::Layer;
use crate::trust::{ProjectSection, RecordError};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use toml::{Table, Value};

/// What a switch turns on or off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SwitchKind {
    /// A `[[plugins]]` row, by its id.
    Plugin,
    /// A `[mcp_servers.NAME]` server, by its name.
    McpServer,
}

impl SwitchKind {
    /// The key of the `[projects."<dir>"]` entry that holds these switches.
    pub fn key(self) -> &'static str {
        match self {
            SwitchKind::Plugin => "plugins",
            SwitchKind::McpServer => "mcp_servers",
        }
    }
}

/// The name of the layer the switches of `root` make, as `keel config dump` names it.
pub fn layer_name(home_config: &Path, root: &Path) -> String {
    format!(
        "{} [projects.{:?}]",
        home_config.display(),
        root.display().to_string()
    )
}

/// The layer of `root`'s switches in `projects` (the user's layers' `[projects]`), for the rows
/// and servers the other layers define (`has_row`, `has_server`); `None` when there are none.
pub(crate) fn layer(
    projects: &BTreeMap<String, ProjectSection>,
    root: &Path,
    has_row: &dyn Fn(&str) -> bool,
    has_server: &dyn Fn(&str) -> bool,
    name: String,
) -> Option<Layer> {
    let section = projects.get(&root.display().to_string())?;
    let mut table = Table::new();
    let rows: Vec<Value> = section
        .plugins
        .iter()
        .flatten()
        .filter(|(id, _)| has_row(id))
        .map(|(id, on)| {
            let mut row = Table::new();
            row.insert("id".into(), Value::String(id.clone()));
            row.insert("enabled".into(), Value::Boolean(*on));
            Value::Table(row)
        })
        .collect();
    if !rows.is_empty() {
        table.insert("plugins".into(), Value::Array(rows));
    }
    let servers: Table = section
        .mcp_servers
        .iter()
        .flatten()
        .filter(|(name, _)| has_server(name))
        .map(|(name, on)| {
            let mut server = Table::new();
            server.insert("enabled".into(), Value::Boolean(*on));
            (name.clone(), Value::Table(server))
        })
        .collect();
    if !servers.is_empty() {
        table.insert("mcp_servers".into(), Value::Table(servers));
    }
    (!table.is_empty()).then_some(Layer { name, table })
}

/// Record in `config` (the user's `$KEEL_HOME/config.toml`) that `name` of `kind` is `enabled`
/// in the workspace of `dir` (its [`crate::trust::workspace_root`]), keeping every other line
/// of the file. Returns the root the switch was recorded for.
pub fn record(
    config: &Path,
    dir: &Path,
    kind: SwitchKind,
    name: &str,
    enabled: bool,
) -> Result<PathBuf, RecordError> {
    crate::trust::edit_project_entry(config, dir, |entry, root, invalid| {
        let switches = entry
            .entry(kind.key())
            .or_insert(toml_edit::value(toml_edit::InlineTable::new()))
            .as_table_like_mut()
            .ok_or_else(|| {
                invalid(format!(
                    "`projects.{:?}.{}` is not a table",
                    root.display().to_string(),
                    kind.key()
                ))
            })?;
        switches.insert(name, toml_edit::value(enabled));
        Ok(())
    })
}

/// One plugin row or MCP server of a workspace, as its next agent would get it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extension {
    /// The row id, or the server's name.
    pub name: String,
    /// The plugin the row uses; the server's transport (its command line or URL).
    pub what: String,
    /// What the plugin does (empty for a server).
    pub description: String,
    /// Whether it is on.
    pub enabled: bool,
    /// The layer that decided (a row), or where the server is configured.
    pub layer: String,
    /// Why the server is left out (a bad `.mcp.json` entry, say).
    pub problem: Option<String>,
    /// Whether a switch of this workspace applies to it (false for a `.mcp.json` server).
    pub switchable: bool,
}

/// The plugin rows and MCP servers of a workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extensions {
    /// The workspace root its switches are recorded for.
    pub root: PathBuf,
    /// Every `[[plugins]]` row, in configuration order.
    pub plugins: Vec<Extension>,
    /// Every configured MCP server (with `.mcp.json`'s when the workspace is trusted), then the
    /// entries left out with their problem.
    pub mcp_servers: Vec<Extension>,
    /// The skills its agents are offered (`what`: where the skill comes from, `project`,
    /// `config` or `home`, and its file), each on when the `skills` row is; switched with it.
    pub skills: Vec<Extension>,
}

/// What `loaded` (the configuration of the workspace `cwd`) says of its plugin rows (described
/// by `plugins`), MCP servers and skills (`keel_home`: `$KEEL_HOME`, a root of skills).
pub fn extensions(
    loaded: &crate::Loaded,
    plugins: &[Box<dyn keel_agent::plugin::Plugin>],
    cwd: &Path,
    keel_home: &Path,
) -> Extensions {
    let rows = loaded
        .config
        .plugins
        .iter()
        .map(|row| {
            let uses = row.uses.clone().unwrap_or_else(|| row.id.clone());
            Extension {
                description: plugins
                    .iter()
                    .find(|p| p.id().as_str() == uses)
                    .map(|p| p.description().to_owned())
                    .unwrap_or_default(),
                name: row.id.clone(),
                what: uses,
                enabled: row.enabled.unwrap_or(true),
                layer: loaded
                    .origin
                    .get(&format!("plugins[{}]", row.id))
                    .cloned()
                    .unwrap_or_default(),
                problem: None,
                switchable: true,
            }
        })
        .collect();
    let settings = serde_json::to_value(&loaded.table).unwrap_or_default();
    let project = loaded.trust.trusts(&cwd.join(".mcp.json")).then_some(cwd);
    let bundles = crate::bundles::enabled(keel_home, cwd);
    let (servers, problems) =
        keel_mcp::plugin::configured_with_bundles(&settings, project, &bundles);
    let in_toml = |name: &str| {
        loaded
            .table
            .get("mcp_servers")
            .and_then(Value::as_table)
            .is_some_and(|t| t.contains_key(name))
    };
    // A TOML server is named by the layers that set it, as `keel mcp list` names them.
    let layer_of = |name: &str, origin: &str| {
        let layers = loaded.layers_setting(&format!("mcp_servers.{name}."));
        if in_toml(name) && !layers.is_empty() {
            layers.join(", ")
        } else {
            origin.to_owned()
        }
    };
    let mut mcp: Vec<Extension> = servers
        .iter()
        .map(|s| Extension {
            name: s.name.clone(),
            what: s.transport.describe(),
            description: String::new(),
            enabled: s.enabled,
            layer: layer_of(&s.name, &s.origin),
            problem: None,
            switchable: in_toml(&s.name),
        })
        .collect();
    mcp.extend(problems.into_iter().map(|p| Extension {
        switchable: in_toml(&p.server),
        layer: layer_of(&p.server, &p.origin),
        name: p.server,
        what: String::new(),
        description: String::new(),
        enabled: false,
        problem: Some(p.message),
    }));
    Extensions {
        root: loaded.trust.root.clone(),
        plugins: rows,
        mcp_servers: mcp,
        skills: skills(loaded, cwd, keel_home),
    }
}

/// The skills the `skills` plugin would offer in `cwd` (the project's only when it is
/// trusted), as [`keel_skills::SkillsPlugin`] finds them.
fn skills(loaded: &crate::Loaded, cwd: &Path, keel_home: &Path) -> Vec<Extension> {
    let Ok(settings) =
        crate::plugins::settings::<keel_skills::SkillsConfig>(loaded, &keel_skills::SkillsPlugin)
    else {
        return Vec::new();
    };
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    let dirs: Vec<PathBuf> = settings
        .config
        .dirs
        .iter()
        .map(|d| keel_skills::roots::expand(d, home.as_deref(), keel_home))
        .collect();
    let project = loaded
        .trust
        .trust
        .is_trusted()
        .then(|| keel_skills::project_root(cwd));
    let bundles = crate::bundles::enabled(keel_home, cwd);
    let roots = keel_skills::roots::roots_with_bundles(
        project.as_deref(),
        &dirs,
        &bundles,
        home.as_deref(),
        keel_home,
    );
    keel_skills::SkillSet::scan(&roots)
        .skills
        .into_iter()
        .map(|skill| Extension {
            what: format!(
                "{} {}",
                match skill.scope {
                    keel_skills::Scope::Project => "project",
                    keel_skills::Scope::Config => "config",
                    keel_skills::Scope::Home => "home",
                },
                skill.file.display()
            ),
            name: skill.name,
            description: skill.description,
            enabled: settings.enabled,
            layer: String::new(),
            problem: None,
            switchable: false,
        })
        .collect()
}
