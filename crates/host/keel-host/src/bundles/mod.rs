//! Claude Code plugin bundles: marketplaces, installs pinned to a commit, and what each enabled
//! bundle gives an agent (docs/plugins.md).
//!
//! ```text
//! $KEEL_HOME/plugins/
//!   installed.json                 State: marketplaces, installed plugins, per-project switches
//!   marketplaces/NAME/             a hardened `git clone` of the marketplace (its HEAD = its pin)
//!   installed/PLUGIN@MARKETPLACE/  the plugin's files copied at the commit it was installed at
//! ```
//!
//! A marketplace is a git repository holding `.claude-plugin/marketplace.json`; a plugin is a
//! folder holding `.claude-plugin/plugin.json` and any of `commands/`, `agents/`, `skills/`,
//! `hooks/hooks.json` and `.mcp.json`. Installing copies the plugin's folder out of the
//! marketplace's clone (or a clone of the plugin's own repository), so a later `marketplace
//! update` changes nothing installed until `keel plugin update`. Every write goes to a staging
//! folder first and is renamed into place: a failed install leaves nothing behind.
//!
//! What a project declares (`extraKnownMarketplaces` and `enabledPlugins` in its
//! `.claude/settings.json`, Claude Code's keys) is only offered ([`offered`]): nothing here
//! clones, installs or enables on a project's word.

mod install;
mod market;

pub use install::{Moved, install, remove, set_enabled, short, update};
pub use market::{
    Listing, PluginSource, add_marketplace, listings, remove_marketplace, update_marketplace,
};

use keel_agent::plugin::Bundle;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The state file under `$KEEL_HOME/plugins`.
const STATE_FILE: &str = "installed.json";

/// Why a plugin command failed. Each names the marketplace, plugin or file involved.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// The state file is unreadable or not what keel writes.
    #[error("{}: {reason}", path.display())]
    State {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A marketplace source is not a marketplace (not a repository, no marketplace.json, …).
    #[error("marketplace {origin}: {reason}")]
    Marketplace {
        /// The source as given, or the marketplace's name.
        origin: String,
        /// Why.
        reason: String,
    },
    /// A plugin cannot be installed, updated or used.
    #[error("plugin {name}: {reason}")]
    Plugin {
        /// `NAME@MARKETPLACE` or the name as given.
        name: String,
        /// Why.
        reason: String,
    },
    /// A file operation under `$KEEL_HOME/plugins` failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

impl BundleError {
    fn io(path: &Path) -> impl FnOnce(std::io::Error) -> BundleError + '_ {
        move |source| BundleError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// An added marketplace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Marketplace {
    /// The source as the user gave it (`owner/repo`, a URL, a path).
    pub source: String,
    /// What git clones (`https://github.com/owner/repo.git`, the URL, the absolute path).
    pub url: String,
    /// The commit its clone is at.
    pub commit: String,
}

/// An installed plugin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Installed {
    /// Its name.
    pub name: String,
    /// The marketplace it came from.
    pub marketplace: String,
    /// Its manifest's version, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Its manifest's (or listing's) description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The commit its files were copied at: the pin.
    pub commit: String,
    /// Whether it is on (for every workspace without a project switch).
    pub enabled: bool,
}

impl Installed {
    /// `NAME@MARKETPLACE`.
    pub fn key(&self) -> String {
        format!("{}@{}", self.name, self.marketplace)
    }
}

/// `$KEEL_HOME/plugins/installed.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct State {
    /// Marketplaces by name.
    #[serde(default)]
    pub marketplaces: BTreeMap<String, Marketplace>,
    /// Installed plugins by `NAME@MARKETPLACE`.
    #[serde(default)]
    pub plugins: BTreeMap<String, Installed>,
    /// Per-project switches: a workspace root (canonical) → `NAME@MARKETPLACE` → on or off.
    #[serde(default)]
    pub projects: BTreeMap<String, BTreeMap<String, bool>>,
}

/// Where the plugins of one `$KEEL_HOME` live.
#[derive(Debug, Clone)]
pub struct Plugins {
    dir: PathBuf,
}

impl Plugins {
    /// The plugins of `keel_home`.
    pub fn new(keel_home: &Path) -> Plugins {
        Plugins {
            dir: keel_home.join("plugins"),
        }
    }

    /// `$KEEL_HOME/plugins`.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The state file.
    pub fn state_path(&self) -> PathBuf {
        self.dir.join(STATE_FILE)
    }

    /// A marketplace's clone.
    pub fn market_dir(&self, name: &str) -> PathBuf {
        self.dir.join("marketplaces").join(name)
    }

    /// An installed plugin's folder (`${CLAUDE_PLUGIN_ROOT}`).
    pub fn plugin_dir(&self, key: &str) -> PathBuf {
        self.dir.join("installed").join(key)
    }

    /// The state; an absent file is the empty state.
    pub fn load(&self) -> Result<State, BundleError> {
        let path = self.state_path();
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(State::default()),
            Err(e) => return Err(BundleError::io(&path)(e)),
        };
        serde_json::from_str(&text).map_err(|e| BundleError::State {
            path,
            reason: format!("not a keel plugin state file ({e}); fix or remove it"),
        })
    }

    /// Write the state (a temporary file renamed over the old one).
    pub fn save(&self, state: &State) -> Result<(), BundleError> {
        std::fs::create_dir_all(&self.dir).map_err(BundleError::io(&self.dir))?;
        let path = self.state_path();
        let tmp = self
            .dir
            .join(format!(".{STATE_FILE}.{}", std::process::id()));
        let text = serde_json::to_string_pretty(state).map_err(|e| BundleError::State {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        std::fs::write(&tmp, text + "\n").map_err(BundleError::io(&tmp))?;
        std::fs::rename(&tmp, &path).map_err(BundleError::io(&path))
    }
}

/// Whether `key` is on in the workspace whose root is `root` (a project switch wins).
pub fn is_on(state: &State, plugin: &Installed, root: Option<&Path>) -> bool {
    root.and_then(|r| state.projects.get(&r.to_string_lossy().into_owned()))
        .and_then(|switches| switches.get(&plugin.key()))
        .copied()
        .unwrap_or(plugin.enabled)
}

/// The bundles the user installed and turned on for the workspace `cwd`, in name order, for
/// [`keel_agent::plugin::InstallContext::bundles`]. An unreadable state or a plugin whose
/// folder is gone gives none of it (`keel plugin list` names the problem): an agent still
/// starts.
pub fn enabled(keel_home: &Path, cwd: &Path) -> Vec<Bundle> {
    let plugins = Plugins::new(keel_home);
    if !plugins.state_path().exists() {
        return Vec::new();
    }
    let Ok(state) = plugins.load() else {
        return Vec::new();
    };
    let root = crate::trust::workspace_root(cwd).ok();
    state
        .plugins
        .values()
        .filter(|p| is_on(&state, p, root.as_deref()))
        .map(|p| Bundle {
            name: p.name.clone(),
            root: plugins.plugin_dir(&p.key()),
        })
        .filter(|b| b.root.is_dir())
        .collect()
}

/// `.claude-plugin/plugin.json`, the fields keel reads.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Manifest {
    /// The plugin's name.
    pub name: String,
    /// Its version.
    #[serde(default)]
    pub version: Option<String>,
    /// One line about it.
    #[serde(default)]
    pub description: Option<String>,
}

/// Read `DIR/.claude-plugin/plugin.json`; `Ok(None)` when there is none.
pub fn read_manifest(dir: &Path) -> Result<Option<Manifest>, String> {
    let path = dir.join(".claude-plugin").join("plugin.json");
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!(".claude-plugin/plugin.json: {e}")),
    };
    let manifest: Manifest = serde_json::from_str(&text)
        .map_err(|e| format!(".claude-plugin/plugin.json is not a plugin manifest: {e}"))?;
    if !valid_name(&manifest.name) {
        return Err(format!(
            ".claude-plugin/plugin.json: `name` {:?} is not a plugin name (letters, digits, `-`, `_`, `.`)",
            manifest.name
        ));
    }
    Ok(Some(manifest))
}

/// What one installed plugin gives an agent, for `keel plugin list`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Contributes {
    /// Slash commands (`commands/*.md` stems, subfolders as `a:b`).
    pub commands: Vec<String>,
    /// Subagent definitions (`agents/*.md` stems).
    pub agents: Vec<String>,
    /// Skills (`skills/NAME/SKILL.md` folders).
    pub skills: Vec<String>,
    /// Hook events (`hooks/hooks.json` keys).
    pub hooks: Vec<String>,
    /// MCP servers (`.mcp.json` `mcpServers` keys).
    pub mcp_servers: Vec<String>,
}

impl Contributes {
    /// What the bundle in `dir` holds. Nothing is run; unreadable parts are left out.
    pub fn of(dir: &Path) -> Contributes {
        let stems = |sub: &str| {
            let mut out = Vec::new();
            md_stems(&dir.join(sub), "", &mut out, 0);
            out.sort();
            out
        };
        let mut skills: Vec<String> = list(&dir.join("skills"))
            .into_iter()
            .filter(|name| dir.join("skills").join(name).join("SKILL.md").is_file())
            .collect();
        skills.sort();
        let keys = |path: PathBuf, field: &str| -> Vec<String> {
            std::fs::read_to_string(path)
                .ok()
                .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
                .and_then(|v| v.get(field).and_then(|h| h.as_object()).cloned())
                .map(|o| {
                    let mut keys: Vec<String> = o.keys().cloned().collect();
                    keys.sort();
                    keys
                })
                .unwrap_or_default()
        };
        Contributes {
            commands: stems("commands"),
            agents: stems("agents"),
            skills,
            hooks: keys(dir.join("hooks").join("hooks.json"), "hooks"),
            mcp_servers: keys(dir.join(".mcp.json"), "mcpServers"),
        }
    }

    /// `3 commands (a, b, c) · 1 skill (x)`; `nothing` when empty.
    pub fn summary(&self) -> String {
        let parts: Vec<String> = [
            ("command", &self.commands),
            ("agent", &self.agents),
            ("skill", &self.skills),
            ("hook event", &self.hooks),
            ("MCP server", &self.mcp_servers),
        ]
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(what, v)| {
            let s = if v.len() == 1 { "" } else { "s" };
            format!("{} {what}{s} ({})", v.len(), v.join(", "))
        })
        .collect();
        if parts.is_empty() {
            "nothing".into()
        } else {
            parts.join(" · ")
        }
    }
}

/// Names in `dir` (none when unreadable), hidden ones left out.
fn list(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| !n.starts_with('.'))
                .collect()
        })
        .unwrap_or_default()
}

/// The `.md` stems below `dir`, subfolders as `prefix:` namespaces (as commands are named).
fn md_stems(dir: &Path, prefix: &str, out: &mut Vec<String>, depth: usize) {
    if depth > 4 {
        return;
    }
    for name in list(dir) {
        let path = dir.join(&name);
        if path.is_dir() {
            md_stems(&path, &format!("{prefix}{name}:"), out, depth + 1);
        } else if let Some(stem) = name.strip_suffix(".md") {
            out.push(format!("{prefix}{stem}"));
        }
    }
}

/// A marketplace or plugin name: letters, digits, `-`, `_`, `.`, not starting with `.`, at
/// most 64 characters (it names a folder).
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// What a project's `.claude/settings.json` declares (Claude Code's `extraKnownMarketplaces`
/// and `enabledPlugins`): offered to the user, never installed or run by keel on its word.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Offered {
    /// Marketplaces: name → source (`owner/repo`, URL or path as declared).
    pub marketplaces: Vec<(String, String)>,
    /// Plugins the project would turn on (`NAME@MARKETPLACE`).
    pub plugins: Vec<String>,
}

/// What the project of `cwd` declares in `.claude/settings.json` (read beneath the workspace
/// root, never following a link out of it). Nothing is acted on.
pub fn offered(cwd: &Path) -> Offered {
    let Ok(root) = crate::trust::workspace_root(cwd) else {
        return Offered::default();
    };
    let Ok(reader) = keel_tools::beneath::Reader::beneath(&root) else {
        return Offered::default();
    };
    let path = root.join(".claude").join("settings.json");
    let Some(value) = reader
        .read_regular(&path, 1024 * 1024)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
    else {
        return Offered::default();
    };
    let mut out = Offered::default();
    if let Some(markets) = value
        .get("extraKnownMarketplaces")
        .and_then(|v| v.as_object())
    {
        for (name, entry) in markets {
            let source = entry.get("source").unwrap_or(entry);
            let text = source
                .get("repo")
                .or_else(|| source.get("url"))
                .or_else(|| source.get("path"))
                .and_then(|v| v.as_str())
                .unwrap_or("?");
            out.marketplaces.push((name.clone(), text.to_owned()));
        }
    }
    if let Some(plugins) = value.get("enabledPlugins").and_then(|v| v.as_object()) {
        out.plugins = plugins
            .iter()
            .filter(|(_, on)| on.as_bool() == Some(true))
            .map(|(k, _)| k.clone())
            .collect();
    }
    out
}

#[cfg(test)]
mod tests;
