//! Workspace trust: whether what a repository contains may run code or widen keel's
//! permissions.
//!
//! A cloned repository can carry `.claude/settings.json` hooks, a `.mcp.json` server and a
//! `.keel/config.toml` that turns the sandbox off. None of it takes effect until the user trusts
//! the workspace, recorded the way Codex records it, in the user's own layers only:
//!
//! ```toml
//! [projects."/home/ada/src/keel"]
//! trust_level = "trusted"   # or "untrusted"
//! ```
//!
//! Data flow: [`workspace_root`] (the canonical git root of the workspace, or the workspace when
//! there is none) → [`decide`] over the `[projects]` table of the user's layers (the nearest
//! recorded ancestor-or-self of the root decides; a run's flag wins over the record) → when not
//! trusted, [`untrusted_view`] keeps of the project's `.keel/config.toml` only the keys that
//! tighten or change nothing, and [`project_files`] lists the hooks and servers the plugins will
//! leave alone; [`notice`] turns that into the one line every front end shows.
//!
//! Undecided is untrusted: a headless run never trusts by accident, and the terminal UI asks.
//! A recorded trust pins the files it trusted ([`pins`]): one changed since stays inert.

pub mod pins;
mod workspace;

pub use workspace::{GovernedFile, WorkspaceTrust};

use crate::config::{Config, Layer};
use keel_agent::ApprovalPolicy;
pub use keel_agent::plugin::ProjectTrust;
use keel_tools::SandboxMode;
use serde::{Deserialize, Deserializer};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use toml::{Table, Value};

/// `[projects."<dir>"]` of a user layer.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProjectSection {
    /// `trusted` or `untrusted`.
    #[serde(default, deserialize_with = "trust_level")]
    pub trust_level: Option<ProjectTrust>,
    /// What each file of [`pins::PINNED_FILES`] was when the directory was trusted, by path
    /// relative to it (`None`: recorded before keel pinned; nothing is checked).
    #[serde(default)]
    pub pins: Option<BTreeMap<String, pins::Pin>>,
    /// Plugin rows turned on or off in this workspace, by row id ([`crate::switches`]).
    #[serde(default)]
    pub plugins: Option<BTreeMap<String, bool>>,
    /// MCP servers turned on or off in this workspace, by name ([`crate::switches`]).
    #[serde(default)]
    pub mcp_servers: Option<BTreeMap<String, bool>>,
}

fn trust_level<'de, D: Deserializer<'de>>(d: D) -> Result<Option<ProjectTrust>, D::Error> {
    let Some(name) = Option::<String>::deserialize(d)? else {
        return Ok(None);
    };
    ProjectTrust::parse(&name).map(Some).ok_or_else(|| {
        serde::de::Error::custom(format!(
            "unknown trust_level {name:?}; expected \"trusted\" or \"untrusted\""
        ))
    })
}

/// Where a workspace's decision came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrustSource {
    /// `[projects."<dir>"]` of the user layer `layer` (`dir` is the root or an ancestor).
    Recorded {
        /// The directory of the entry.
        dir: PathBuf,
        /// The layer (file or flag) that holds it.
        layer: String,
    },
    /// The run's own flag (`--trust-project`, or a supervisor's decision passed to a
    /// delegate); not recorded.
    Flag,
    /// Nothing recorded: untrusted until the user decides.
    Undecided,
}

/// A workspace's trust decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustDecision {
    /// The directory decided on: the canonical git root of the workspace, or the workspace.
    pub root: PathBuf,
    /// The decision.
    pub trust: ProjectTrust,
    /// Where it came from.
    pub source: TrustSource,
    /// The workspace's files that changed since it was trusted ([`pins::check`]): inert
    /// although it is trusted. Empty when untrusted, or trusted for this run only.
    pub changed: Vec<pins::Changed>,
}

impl TrustDecision {
    /// Whether the project's files may run.
    pub fn is_trusted(&self) -> bool {
        self.trust.is_trusted()
    }

    /// Whether the workspace's file `file` (as the plugins read it: `<workspace>/.mcp.json`)
    /// may run or widen anything: trusted, and not changed since.
    pub fn trusts(&self, file: &Path) -> bool {
        self.is_trusted() && !self.changed.iter().any(|c| c.file == file)
    }

    /// Whether nobody decided yet (the terminal UI asks).
    pub fn is_undecided(&self) -> bool {
        self.source == TrustSource::Undecided
    }

    /// One phrase for `keel config dump` and notices: `trusted (recorded in FILE for DIR)`,
    /// and `, but .mcp.json changed since` when files changed since it was trusted.
    pub fn describe(&self) -> String {
        let mut s = self.describe_source();
        if self.is_trusted() && !self.changed.is_empty() {
            let names: Vec<&str> = self.changed.iter().map(|c| c.pinned).collect();
            s.push_str(&format!(", but {} changed since", names.join(", ")));
        }
        s
    }

    fn describe_source(&self) -> String {
        match &self.source {
            TrustSource::Recorded { dir, layer } if dir == &self.root => {
                format!("{} (recorded in {layer})", self.trust.as_str())
            }
            TrustSource::Recorded { dir, layer } => format!(
                "{} (recorded in {layer} for {})",
                self.trust.as_str(),
                dir.display()
            ),
            TrustSource::Flag => format!("{} (for this run only)", self.trust.as_str()),
            TrustSource::Undecided => "undecided (untrusted until you decide)".to_owned(),
        }
    }
}

/// What an untrusted workspace holds that keel left alone, by file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ignored {
    /// The file (`<workspace>/.keel/config.toml`, `.claude/settings.json`, `.mcp.json`).
    pub file: PathBuf,
    /// What in it: dotted keys (`sandbox.mode`, `mcp_servers.x`, `plugins[delegate]`), hook
    /// events (`hooks.SessionStart`), server names (`mcpServers.x`).
    pub what: Vec<String>,
}

/// The canonical directory a workspace's decision is recorded for: its git root (the nearest
/// ancestor-or-self holding `.git`, a directory or a worktree's file), or the workspace itself.
pub fn workspace_root(dir: &Path) -> std::io::Result<PathBuf> {
    let dir = dir.canonicalize()?;
    let root = dir
        .ancestors()
        .find(|d| d.join(".git").exists())
        .unwrap_or(&dir)
        .to_path_buf();
    Ok(root)
}

/// The decision for `root`: the run's `flag` when given, else the nearest recorded
/// ancestor-or-self of `root` in `projects` (keys compared as written: `keel trust` writes
/// canonical paths; a symlinked or moved path matches nothing and stays undecided).
pub fn decide(
    root: &Path,
    projects: &BTreeMap<String, ProjectSection>,
    layer_of: &dyn Fn(&str) -> String,
    flag: Option<ProjectTrust>,
) -> TrustDecision {
    let decided = |trust, source| TrustDecision {
        root: root.to_path_buf(),
        trust,
        source,
        changed: Vec::new(),
    };
    if let Some(trust) = flag {
        return decided(trust, TrustSource::Flag);
    }
    for dir in root.ancestors() {
        let found = projects.iter().find_map(|(key, section)| {
            (Path::new(key) == dir)
                .then_some(section.trust_level.map(|level| (key, level)))
                .flatten()
        });
        if let Some((key, level)) = found {
            let source = TrustSource::Recorded {
                dir: dir.to_path_buf(),
                layer: layer_of(key),
            };
            return decided(level, source);
        }
    }
    decided(ProjectTrust::Untrusted, TrustSource::Undecided)
}

/// Plugins whose only effect is the tools they offer: an untrusted project may turn them off
/// (fewer tools), never on. The others (hooks, provenance, continuity, compaction) guard or
/// record, so turning them off would loosen what the user set.
const TOOL_ONLY_PLUGINS: [&str; 9] = [
    "jobs",
    "skills",
    "subagent",
    "memory",
    "roleplay",
    "delegate",
    "mcp",
    "code_mode",
    "web",
];

/// Plugin row keys only the user's own layers set, even in a trusted workspace: where the
/// user's DeepSeek key goes for web search (`search_base_url`, like a provider's `base_url`)
/// and whether `web_fetch` reaches private addresses (`docs/web.md`).
const USER_ONLY_ROW_KEYS: [(&str, &str); 2] =
    [("web", "search_base_url"), ("web", "allow_private")];

/// `project` (a trusted project's layer) without the plugin row keys only the user's own
/// layers may set; the dotted names of those it held.
pub fn without_user_only(mut project: Layer) -> (Layer, Vec<String>) {
    let mut dropped = Vec::new();
    if let Some(Value::Array(rows)) = project.table.get_mut("plugins") {
        for row in rows.iter_mut() {
            let id = row
                .get("id")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let uses = row
                .get("use")
                .and_then(Value::as_str)
                .map_or(id.clone(), str::to_owned);
            let Some(Value::Table(config)) = row.get_mut("config") else {
                continue;
            };
            for (plugin, key) in USER_ONLY_ROW_KEYS {
                if plugin == uses && config.remove(key).is_some() {
                    dropped.push(format!("plugins[{id}].config.{key}"));
                }
            }
        }
    }
    (project, dropped)
}

/// The part of an untrusted project's layer that still applies, and the dotted keys left out.
///
/// Kept: keys that change nothing keel runs or reaches (`model`, `provider`, `[agent]`, prices,
/// `tools_mode`, `preset`, `[code_mode]`, `tools.spill_bytes`, `tools.bash_timeout_ms`) and keys that only
/// tighten what `user` (the merged user layers) sets: a stricter `sandbox.mode` or `approval`,
/// `sandbox.network = false`, `writable_roots` and `forward_env` within the user's own, a
/// smaller model window, a tool-only plugin turned off. Everything else is left out: hooks, MCP
/// servers, providers (a URL would receive the user's key), looser sandbox or approval, plugin
/// rows that enable or configure (some name executables).
pub fn untrusted_view(project: &Layer, user: &Config) -> (Layer, Vec<String>) {
    let mut kept = Table::new();
    let mut ignored = Vec::new();
    for (key, value) in &project.table {
        match key.as_str() {
            "model" | "provider" | "agent" | "tools_mode" | "preset" | "code_mode" => {
                kept.insert(key.clone(), value.clone());
            }
            "sandbox" => {
                let t = sub_table(value);
                let mut section = Table::new();
                for (k, v) in &t {
                    let tightens = match k.as_str() {
                        "mode" => v
                            .as_str()
                            .and_then(|m| m.parse::<SandboxMode>().ok())
                            .is_some_and(|m| {
                                m.stricter(user.sandbox.mode.unwrap_or_default()) == m
                            }),
                        "network" => v
                            .as_bool()
                            .is_some_and(|on| !on || user.sandbox.network.unwrap_or(true)),
                        "writable_roots" => {
                            let own = user.sandbox.writable_roots.clone().unwrap_or_default();
                            within(v, |s| own.iter().any(|r| r == Path::new(s)))
                        }
                        _ => false,
                    };
                    keep_or_ignore(&mut section, &mut ignored, "sandbox", k, v, tightens);
                }
                if !section.is_empty() {
                    kept.insert(key.clone(), Value::Table(section));
                }
            }
            // Titles cost a request: a project may turn them off, not on.
            "titles" => {
                let tightens = value.as_bool() == Some(false);
                keep_or_ignore(&mut kept, &mut ignored, "", key, value, tightens);
            }
            "approval" => {
                let tightens = value
                    .as_str()
                    .and_then(ApprovalPolicy::parse)
                    .is_some_and(|p| p.stricter(user.approval.unwrap_or_default()) == p);
                keep_or_ignore(&mut kept, &mut ignored, "", key, value, tightens);
            }
            "tools" => {
                let mut section = Table::new();
                for (k, v) in &sub_table(value) {
                    let tightens = match k.as_str() {
                        "spill_bytes" | "bash_timeout_ms" => true,
                        // Turning the read-before-write rule on tightens; off widens.
                        "read_before_write" => v.as_bool() == Some(true),
                        "forward_env" => {
                            let own = user.tools.forward_env.clone().unwrap_or_default();
                            within(v, |s| own.iter().any(|o| o == s))
                        }
                        _ => false,
                    };
                    keep_or_ignore(&mut section, &mut ignored, "tools", k, v, tightens);
                }
                if !section.is_empty() {
                    kept.insert(key.clone(), Value::Table(section));
                }
            }
            "models" => {
                let mut models = Table::new();
                for (name, settings) in &sub_table(value) {
                    let info = model_info(user, name);
                    let mut section = Table::new();
                    let prefix = format!("models.{name}");
                    for (k, v) in &sub_table(settings) {
                        let own = match k.as_str() {
                            "context_window" => Some(info.context_window),
                            "max_output" => Some(info.max_output),
                            _ => None,
                        };
                        let tightens = match own {
                            Some(own) => v
                                .as_integer()
                                .is_some_and(|n| u64::try_from(n).is_ok_and(|n| n <= own)),
                            // Prices change what /status reports, nothing that runs.
                            None => k.ends_with("_price"),
                        };
                        keep_or_ignore(&mut section, &mut ignored, &prefix, k, v, tightens);
                    }
                    if !section.is_empty() {
                        models.insert(name.clone(), Value::Table(section));
                    }
                }
                if !models.is_empty() {
                    kept.insert(key.clone(), Value::Table(models));
                }
            }
            "plugins" => {
                let mut rows = Vec::new();
                for row in value.as_array().into_iter().flatten() {
                    let id = row.get("id").and_then(Value::as_str).unwrap_or_default();
                    if turns_off_a_tool_plugin(row, user) {
                        rows.push(row.clone());
                    } else {
                        ignored.push(format!("plugins[{id}]"));
                    }
                }
                if !rows.is_empty() {
                    kept.insert(key.clone(), Value::Array(rows));
                }
            }
            // hooks, mcp_servers, providers, and anything a later keel adds: left out.
            _ => ignored.extend(leaves(key, value)),
        }
    }
    let layer = Layer {
        name: project.name.clone(),
        table: kept,
    };
    (layer, ignored)
}

fn sub_table(value: &Value) -> Table {
    value.as_table().cloned().unwrap_or_default()
}

/// Whether `value` is an array of strings each of which `allowed` accepts.
fn within(value: &Value, allowed: impl Fn(&str) -> bool) -> bool {
    value
        .as_array()
        .is_some_and(|items| items.iter().all(|item| item.as_str().is_some_and(&allowed)))
}

fn keep_or_ignore(
    into: &mut Table,
    ignored: &mut Vec<String>,
    prefix: &str,
    key: &str,
    value: &Value,
    keep: bool,
) {
    if keep {
        into.insert(key.to_owned(), value.clone());
    } else if prefix.is_empty() {
        ignored.push(key.to_owned());
    } else {
        ignored.push(format!("{prefix}.{key}"));
    }
}

/// The dotted names a left-out key stands for: a table's entries one level down
/// (`mcp_servers.evil`, `hooks.SessionStart`), the key itself otherwise.
fn leaves(key: &str, value: &Value) -> Vec<String> {
    match value.as_table() {
        Some(t) if !t.is_empty() => t.keys().map(|k| format!("{key}.{k}")).collect(),
        _ => vec![key.to_owned()],
    }
}

/// A `[[plugins]]` row that only turns off (`id`, `enabled = false`, and a `use` matching the
/// user's row) a plugin whose only effect is its tools.
fn turns_off_a_tool_plugin(row: &Value, user: &Config) -> bool {
    let Some(t) = row.as_table() else {
        return false;
    };
    let Some(id) = t.get("id").and_then(Value::as_str) else {
        return false;
    };
    let only_disables = t.iter().all(|(k, v)| match k.as_str() {
        "id" => true,
        "enabled" => v.as_bool() == Some(false),
        _ => false,
    }) && t.get("enabled").is_some();
    let uses = user
        .plugins
        .iter()
        .find(|r| r.id == id)
        .map(|r| r.uses.clone().unwrap_or_else(|| r.id.clone()))
        .unwrap_or_else(|| id.to_owned());
    only_disables && TOOL_ONLY_PLUGINS.contains(&uses.as_str())
}

/// The window the user's layers give `model` (the built-in catalogue under `[models.NAME]`).
fn model_info(user: &Config, model: &str) -> keel_llm::ModelInfo {
    let mut catalogue = keel_llm::ModelCatalogue::default();
    if let Some(m) = user.models.get(model) {
        catalogue.apply_override(
            model,
            keel_llm::ModelOverride {
                context_window: m.context_window,
                max_output: m.max_output,
                vision: m.vision,
                ..keel_llm::ModelOverride::default()
            },
        );
    }
    catalogue.lookup(model)
}

/// What the workspace's own files hold that the plugins run only when it is trusted: the hook
/// events of `.claude/settings.json` and `.claude/settings.local.json`, the servers of
/// `.mcp.json`, and the skills of the project's skill folders (`.claude/skills`, …, at its git
/// root; `keel_skills::PROJECT_DIRS`). A file that cannot be read is listed as such (it would not run either way).
pub fn project_files(workspace: &Path) -> Vec<Ignored> {
    let mut out = Vec::new();
    for rel in keel_command_hooks::PROJECT_SETTINGS_FILES {
        let path = workspace.join(rel);
        // Beneath the workspace, as the hooks plugin reads it: never through a link out.
        let Ok(text) = keel_tools::beneath::Reader::beneath(workspace)
            .and_then(|r| r.read_text(&path, keel_command_hooks::config::MAX_SETTINGS_FILE_BYTES))
        else {
            continue;
        };
        let what = match keel_command_hooks::parse_settings(&path, &text) {
            Ok(Some(hooks)) => keel_command_hooks::HookEvent::ALL
                .into_iter()
                .filter(|e| hooks.has(*e))
                .map(|e| format!("hooks.{}", e.as_str()))
                .collect(),
            Ok(None) => Vec::new(),
            Err(e) => vec![format!("hooks (not readable: {e})")],
        };
        if !what.is_empty() {
            out.push(Ignored { file: path, what });
        }
    }
    let path = workspace.join(".mcp.json");
    if let Ok(text) = keel_tools::beneath::Reader::beneath(workspace)
        .and_then(|r| r.read_text(&path, keel_mcp::config::MAX_MCP_JSON_BYTES))
    {
        let what = match serde_json::from_str::<serde_json::Value>(&text) {
            Ok(root) => root
                .get("mcpServers")
                .and_then(serde_json::Value::as_object)
                .map(|servers| {
                    servers
                        .keys()
                        .map(|name| format!("mcpServers.{name}"))
                        .collect()
                })
                .unwrap_or_default(),
            Err(e) => vec![format!("mcpServers (not valid JSON: {e})")],
        };
        if !what.is_empty() {
            out.push(Ignored { file: path, what });
        }
    }
    // A project's skills: listed for the model and loadable only when trusted.
    for (dir, names) in keel_skills::project_skill_dirs(workspace) {
        let mut what: Vec<String> = names
            .iter()
            .take(8)
            .map(|n| format!("skills.{n}"))
            .collect();
        if names.len() > 8 {
            what.push(format!("{} more skills", names.len() - 8));
        }
        out.push(Ignored { file: dir, what });
    }
    out
}

/// The one line a front end shows for an untrusted workspace that holds something keel left
/// alone, or for a trusted one whose files changed since ([`pins`]); `None` when there is
/// nothing to say.
pub fn notice(decision: &TrustDecision, ignored: &[Ignored]) -> Option<String> {
    if decision.is_trusted() {
        return pins::notice(decision, ignored);
    }
    if ignored.is_empty() {
        return None;
    }
    let parts: Vec<String> = ignored
        .iter()
        .map(|i| format!("{} ({})", i.file.display(), i.what.join(", ")))
        .collect();
    Some(format!(
        "workspace {} is not trusted: ignored {}; trust it with `keel trust {}` (or /trust; `--trust-project` for one run)",
        decision.root.display(),
        parts.join("; "),
        decision.root.display()
    ))
}

/// Why a trust decision could not be recorded.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The directory to decide on does not exist (or cannot be resolved).
    #[error("cannot trust {}: {source}", dir.display())]
    Directory {
        /// The directory as given.
        dir: PathBuf,
        /// Why it cannot be resolved.
        #[source]
        source: std::io::Error,
    },
    /// The user's configuration file cannot be read or written.
    #[error("cannot update {}: {source}", path.display())]
    Io {
        /// `$KEEL_HOME/config.toml`.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The user's configuration file is not TOML, or its `projects` is not a table.
    #[error("cannot update {}: {message}", path.display())]
    Invalid {
        /// `$KEEL_HOME/config.toml`.
        path: PathBuf,
        /// What is wrong (names the key).
        message: String,
    },
}

/// Record `trust` for the workspace `dir` (its [`workspace_root`]) in `config` (the user's
/// `$KEEL_HOME/config.toml`), keeping every other line of the file as it was; a trust pins
/// the files it trusts as they are now ([`pins`]), a distrust drops the pins. Returns the
/// directory recorded.
pub fn record(config: &Path, dir: &Path, trust: ProjectTrust) -> Result<PathBuf, RecordError> {
    let named = dir.canonicalize().ok();
    edit_project_entry(config, dir, |entry, root, _| {
        entry.insert("trust_level", toml_edit::value(trust.as_str()));
        if trust.is_trusted() {
            pins::pin_entry(entry, root, named.as_deref().unwrap_or(root));
        } else {
            entry.remove("pins");
        }
        Ok(())
    })
}

/// Apply `edit` to the `[projects."<root>"]` entry of the workspace of `dir` (its
/// [`workspace_root`]) in `config`, the entry made when missing, every other line of the file
/// kept; `edit` gets the entry, the root and a maker of [`RecordError::Invalid`]. Returns the
/// root.
pub(crate) fn edit_project_entry(
    config: &Path,
    dir: &Path,
    edit: impl FnOnce(
        &mut dyn toml_edit::TableLike,
        &Path,
        &dyn Fn(String) -> RecordError,
    ) -> Result<(), RecordError>,
) -> Result<PathBuf, RecordError> {
    let root = workspace_root(dir).map_err(|source| RecordError::Directory {
        dir: dir.to_path_buf(),
        source,
    })?;
    edit_config(config, |doc, invalid| {
        let projects = doc
            .entry("projects")
            .or_insert_with(|| {
                let mut t = toml_edit::Table::new();
                t.set_implicit(true);
                toml_edit::Item::Table(t)
            })
            .as_table_like_mut()
            .ok_or_else(|| invalid("`projects` is not a table".to_owned()))?;
        let key = root.display().to_string();
        let entry = projects
            .entry(&key)
            .or_insert(toml_edit::Item::Table(toml_edit::Table::new()))
            .as_table_like_mut()
            .ok_or_else(|| invalid(format!("`projects.{key:?}` is not a table")))?;
        edit(entry, &root, invalid)
    })?;
    Ok(root)
}

/// Apply `edit` to the user's configuration `config` (missing: empty) and write it back,
/// beside and renamed over it; `edit` gets a maker of [`RecordError::Invalid`].
pub(crate) fn edit_config<T>(
    config: &Path,
    edit: impl FnOnce(
        &mut toml_edit::DocumentMut,
        &dyn Fn(String) -> RecordError,
    ) -> Result<T, RecordError>,
) -> Result<T, RecordError> {
    let io = |source| RecordError::Io {
        path: config.to_path_buf(),
        source,
    };
    let invalid = |message: String| RecordError::Invalid {
        path: config.to_path_buf(),
        message,
    };
    let text = match std::fs::read_to_string(config) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(io(e)),
    };
    let mut doc: toml_edit::DocumentMut = text
        .parse()
        .map_err(|e: toml_edit::TomlError| invalid(e.message().trim().to_owned()))?;
    let out = edit(&mut doc, &invalid)?;
    let edited = doc.to_string();
    if edited == text {
        return Ok(out);
    }
    if let Some(parent) = config.parent() {
        std::fs::create_dir_all(parent).map_err(io)?;
    }
    // Write beside, then rename: a crash never leaves half a configuration.
    let tmp = config.with_extension("toml.tmp");
    std::fs::write(&tmp, edited).map_err(io)?;
    std::fs::rename(&tmp, config).map_err(io)?;
    Ok(out)
}

#[cfg(test)]
mod tests;
