//! Layered TOML configuration.
//!
//! Layers, later overriding earlier: built-in defaults → `$KEEL_HOME/config.toml` → profile
//! (`$KEEL_HOME/profiles/<name>.toml`) → project `.keel/config.toml` → `--config FILE` →
//! `-c key=value`. The project layer is the repository's, not the user's: unless the user
//! trusts the workspace ([`crate::trust`]), only its keys that tighten or change nothing are
//! merged, and the rest is listed in [`Loaded::ignored`]; it may never say `[projects]`. Tables merge key by key; `[[plugins]]` rows merge by `id`, a later layer
//! replacing a row's whole `config`. Every layer is validated on its own, so an unknown key or a
//! bad value is reported with the file (or flag) that holds it. `keel config dump` prints the
//! merged result with the layer that set each key.
//!
//! The defaults layer is [`DEFAULTS`] followed by one `[[plugins]]` row per built-in plugin,
//! enabled as the plugin itself says ([`keel_agent::plugin::Plugin::enabled_by_default`]).
//! Values with a fixed vocabulary (`sandbox`, `approval`) are typed when a layer is parsed, so a
//! misspelling names the layer that holds it.

use crate::trust::{self, Ignored, ProjectTrust, TrustDecision, TrustSource};
use keel_agent::ApprovalPolicy;
use keel_agent::plugin::Plugin;
use keel_tools::SandboxMode;
use keel_tools::beneath::{self, BeneathError};
use serde::{Deserialize, Deserializer};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use toml::{Table, Value};

/// Why the configuration could not be loaded. Every variant names the layer (file or flag)
/// involved; the front end reports it and stops.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A layer is not valid TOML, or holds an unknown key or a bad value.
    #[error("invalid configuration in {layer}: {message}")]
    Invalid {
        /// The file path, `defaults`, or `-c key=value`.
        layer: String,
        /// What is wrong (names the key).
        message: String,
    },
    /// A configuration file exists but cannot be read.
    #[error("cannot read configuration file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A configuration file leads out of the workspace (the project's, through a symlink), is
    /// not a regular file (a FIFO, a directory) or is over [`MAX_CONFIG_FILE_BYTES`]: nothing
    /// of it was read. The front end reports it and stops; the user replaces or removes it.
    #[error(
        "configuration file {} not read: {}; replace it with a regular file or remove it",
        path.display(),
        refused.reason()
    )]
    NotRead {
        /// The file.
        path: PathBuf,
        /// Why it was refused.
        refused: BeneathError,
    },
    /// The project's own `.keel/config.toml` says `[projects]`: only the user's layers may
    /// decide what is trusted.
    #[error(
        "invalid configuration in {}: `projects` (workspace trust) may be set only in $KEEL_HOME/config.toml, a profile, --config or -c; remove it from this file",
        path.display()
    )]
    TrustInProject {
        /// The project's file.
        path: PathBuf,
    },
    /// `--profile NAME` names no file.
    #[error("profile {name:?} not found: expected {}", path.display())]
    ProfileNotFound {
        /// The profile name.
        name: String,
        /// Where it was looked for.
        path: PathBuf,
    },
    /// `--config FILE` names no file.
    #[error("configuration file {} not found", path.display())]
    FileNotFound {
        /// The file.
        path: PathBuf,
    },
    /// A `-c` flag is not `key=value` over tables.
    #[error("-c {spec}: {message}")]
    Override {
        /// The value of the flag.
        spec: String,
        /// What is wrong.
        message: String,
    },
    /// Two `[[plugins]]` rows of one layer share an id.
    #[error("plugin row id {id:?} appears twice in one layer")]
    DuplicateRow {
        /// The id.
        id: String,
    },
}

type Result<T, E = ConfigError> = std::result::Result<T, E>;

/// Built-in defaults, as a TOML document (also the reference for `docs/config.md`); the
/// plugin rows follow from the plugin set ([`defaults_text`]).
pub const DEFAULTS: &str = include_str!("defaults.toml");

/// The typed view of a merged configuration. Every field is optional in a layer; the defaults
/// layer fills them.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Model name.
    pub model: Option<String>,
    /// Provider name (a key of `providers`).
    pub provider: Option<String>,
    /// `[sandbox]` (a plain `sandbox = "MODE"` is read as `[sandbox] mode = "MODE"`).
    #[serde(default)]
    pub sandbox: SandboxSection,
    /// `ask`, `never` or `auto`.
    #[serde(default, deserialize_with = "approval_policy")]
    pub approval: Option<ApprovalPolicy>,
    /// OpenAI-compatible endpoints by name.
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderSection>,
    /// Per-model overrides.
    #[serde(default)]
    pub models: BTreeMap<String, ModelSection>,
    /// Agent loop settings.
    #[serde(default)]
    pub agent: AgentSection,
    /// Tool settings.
    #[serde(default)]
    pub tools: ToolsSection,
    /// Plugin rows.
    #[serde(default)]
    pub plugins: Vec<PluginRow>,
    /// Command hooks in Claude Code's shape (`[[hooks.PreToolUse]] matcher = "bash"` with
    /// `[[hooks.PreToolUse.hooks]] type = "command" command = "…"`); see docs/hooks.md.
    pub hooks: Option<Table>,
    /// MCP servers by name (Codex's keys; docs/mcp.md). The project's `.mcp.json` adds more.
    #[serde(default)]
    pub mcp_servers: BTreeMap<String, keel_mcp::config::TomlServer>,
    /// How the model reaches its tools: `native` (default), `code` (only `run_code`) or `both`
    /// (`--tools-mode`, `DSH_TOOLS_MODE`; docs/code-mode.md).
    pub tools_mode: Option<keel_codemode::ToolsMode>,
    /// The built-in tool set: `minimal` (dsh 0.2's: a persistent `bash`, read/write/edit),
    /// `standard` (the default) or `code` (the standard tools through `run_code` unless
    /// `tools_mode` is set) (`--preset`; docs/tools.md).
    pub preset: Option<keel_tools::Preset>,
    /// `[code_mode]`: the limits of one `run_code` program.
    pub code_mode: Option<keel_codemode::CodeModeSettings>,
    /// `[projects."<dir>"] trust_level = "trusted" | "untrusted"`: workspace trust, by the
    /// canonical directory (user layers only; [`crate::trust`]).
    #[serde(default)]
    pub projects: BTreeMap<String, crate::trust::ProjectSection>,
    /// Titles by the model after the first prompt ([`crate::titles`]; off by default for a
    /// `--base-url` server).
    pub titles: Option<bool>,
}

/// `[sandbox]`: how far tools may reach (docs/config.md, docs/sandbox.md).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxSection {
    /// `read-only`, `workspace-write` or `full-access`.
    #[serde(default, deserialize_with = "sandbox_mode")]
    pub mode: Option<SandboxMode>,
    /// Whether commands may use the network (false closes TCP where the kernel can).
    pub network: Option<bool>,
    /// Directories writable besides the workspace under `workspace-write`.
    pub writable_roots: Option<Vec<PathBuf>>,
}

/// `[providers.<name>]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderSection {
    /// Base URL (the wire format's path is appended: `/chat/completions`, `/v1/messages`,
    /// `/responses`).
    pub base_url: Option<String>,
    /// Environment variable holding the API key sent to `base_url` (none: no key is sent). A
    /// layer that changes `base_url` must name it again for the key to follow (see
    /// [`crate::endpoint`]).
    pub api_key_env: Option<String>,
    /// Idle stream timeout in seconds.
    pub idle_timeout_secs: Option<u64>,
    /// The wire format: `chat` (chat completions, the default), `messages` (the Messages API)
    /// or `responses` (OpenAI's Responses API).
    pub api: Option<keel_llm::WireApi>,
    /// Messages API: send the request-level `cache_control` (Anthropic's automatic caching).
    pub cache_control: Option<bool>,
}

/// `[models.<name>]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSection {
    /// Context window in tokens.
    pub context_window: Option<u64>,
    /// Default max output tokens.
    pub max_output: Option<u64>,
    /// Whether the model reads images (`image_url` parts): prompt images and the `read_image`
    /// tool need it. None of DeepSeek's current models does.
    pub vision: Option<bool>,
    /// Whether the model takes `thinking` (DeepSeek's reasoning models do; set it for another).
    pub reasoning: Option<bool>,
    /// The Messages API's thinking `budget_tokens` (Anthropic's models need one).
    pub thinking_budget: Option<u64>,
    /// US dollars per million input tokens that miss the prompt cache (the UI's `/status`
    /// shows the session's cost; DeepSeek's list prices are built in for the models keel knows
    /// them for).
    pub input_price: Option<f64>,
    /// US dollars per million input tokens served from the prompt cache.
    pub cached_input_price: Option<f64>,
    /// US dollars per million output tokens.
    pub output_price: Option<f64>,
}

impl Config {
    /// What `model`'s tokens cost: the built-in list price with whatever `[models.NAME]` sets
    /// over it; `None` when neither gives all three prices.
    pub fn price(&self, model: &str) -> Option<keel_llm::Price> {
        let builtin = keel_llm::builtin_price(model);
        let set = self.models.get(model);
        let pick = |own: Option<f64>, base: Option<f64>| own.or(base);
        Some(keel_llm::Price {
            input: pick(set.and_then(|m| m.input_price), builtin.map(|p| p.input))?,
            cached_input: pick(
                set.and_then(|m| m.cached_input_price),
                builtin.map(|p| p.cached_input),
            )?,
            output: pick(set.and_then(|m| m.output_price), builtin.map(|p| p.output))?,
        })
    }
}

/// `[agent]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSection {
    /// Steps per turn before the turn is stopped.
    pub max_steps: Option<u32>,
    /// Identical failing tool calls in a row (same tool, arguments and error) before the model
    /// is told to change course; at twice this the turn is stopped. 0 = off.
    pub repeat_failure_limit: Option<u32>,
    /// Thinking on/off for models that support it.
    pub thinking: Option<bool>,
    /// Reasoning effort for models that support it.
    pub reasoning_effort: Option<String>,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Byte budget for AGENTS.md / CLAUDE.md.
    pub instructions_budget: Option<usize>,
    /// Persona template (`{{model}}`, `{{cwd}}`).
    pub persona: Option<String>,
    /// Retries of a failed model call (rate limit, server, transport, timeout, closed stream)
    /// inside the same step; 0 = never retry.
    pub retry_max: Option<u32>,
    /// Delay before the first retry in milliseconds (doubling, jittered, capped at 10 s); a
    /// server's `Retry-After` takes precedence.
    pub retry_base_ms: Option<u64>,
}

/// `[tools]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsSection {
    /// Spill text results larger than this many bytes.
    pub spill_bytes: Option<usize>,
    /// Default `bash` timeout.
    pub bash_timeout_ms: Option<u64>,
    /// Environment variables forwarded to `bash` despite the credential scrub.
    pub forward_env: Option<Vec<String>>,
    /// Refuse `write`/`edit` of a file the model has not read, or that changed since it read it
    /// (default true).
    pub read_before_write: Option<bool>,
}

/// `[[plugins]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginRow {
    /// Row id (unique).
    pub id: String,
    /// Which built-in plugin (defaults to `id`).
    #[serde(rename = "use")]
    pub uses: Option<String>,
    /// Enabled?
    pub enabled: Option<bool>,
    /// Plugin-specific configuration.
    pub config: Option<Table>,
}

/// One configuration layer.
#[derive(Debug, Clone)]
pub struct Layer {
    /// Where it came from: `defaults`, a file path, or `-c`.
    pub name: String,
    /// Its contents.
    pub table: Table,
}

/// Where to look for layers.
#[derive(Debug, Clone, Default)]
pub struct Sources {
    /// `$KEEL_HOME`.
    pub home: PathBuf,
    /// Project directory (for `.keel/config.toml`).
    pub project: PathBuf,
    /// `--profile`.
    pub profile: Option<String>,
    /// `--config`.
    pub config_file: Option<PathBuf>,
    /// `-c key=value`.
    pub overrides: Vec<String>,
    /// The run's own trust decision, over what is recorded (`--trust-project`, or the
    /// decision a supervisor hands its delegate); not recorded anywhere.
    pub trust: Option<crate::trust::ProjectTrust>,
}

impl Sources {
    /// The layers of a workspace: `$KEEL_HOME/config.toml` and the project's
    /// `.keel/config.toml`, no profile, no extra file, no `-c`.
    pub fn for_workspace(home: PathBuf, project: PathBuf) -> Self {
        Sources {
            home,
            project,
            ..Sources::default()
        }
    }
}

/// The merged configuration with provenance of every key.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// Typed view.
    pub config: Config,
    /// Merged table.
    pub table: Table,
    /// Dotted key → layer that set it.
    pub origin: BTreeMap<String, String>,
    /// Names of the layers, in the order they were merged (later overrides earlier).
    pub layers: Vec<String>,
    /// Whether the workspace's own files may run or widen anything.
    pub trust: TrustDecision,
    /// What an untrusted workspace holds that was left out, by file (when trusted: only what
    /// its files changed since hold, [`crate::trust::pins`]).
    pub ignored: Vec<Ignored>,
    /// What the trust decision governs, by file: what a load as untrusted leaves out, whatever
    /// the decision is (equal to [`Loaded::ignored`] when the workspace is not trusted).
    pub governed: Vec<Ignored>,
    /// The project layer's name, if any: its URLs get no stored key ([`crate::endpoint`]).
    pub project_layer: Option<String>,
}

impl Loaded {
    /// Position of the layer called `name` in the merge order (`None` when there is none).
    pub fn layer_index(&self, name: &str) -> Option<usize> {
        self.layers.iter().position(|l| l == name)
    }
}

/// The defaults layer: [`DEFAULTS`] and a row per plugin of `plugins`, enabled as the plugin
/// says.
pub fn defaults_text(plugins: &[Box<dyn Plugin>]) -> String {
    let mut text = DEFAULTS.to_owned();
    for p in plugins {
        text.push_str(&format!(
            "\n[[plugins]]\nid = {:?}\nenabled = {}\n",
            p.id().as_str(),
            p.enabled_by_default()
        ));
    }
    text
}

fn sandbox_mode<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SandboxMode>, D::Error> {
    let Some(name) = Option::<String>::deserialize(d)? else {
        return Ok(None);
    };
    name.parse().map(Some).map_err(serde::de::Error::custom)
}

fn approval_policy<'de, D: Deserializer<'de>>(d: D) -> Result<Option<ApprovalPolicy>, D::Error> {
    let Some(name) = Option::<String>::deserialize(d)? else {
        return Ok(None);
    };
    ApprovalPolicy::parse(&name).map(Some).ok_or_else(|| {
        serde::de::Error::custom(format!(
            "unknown approval policy {name:?}; expected {}",
            ApprovalPolicy::EXPECTED
        ))
    })
}

fn parse_layer(name: &str, text: &str) -> Result<Table> {
    let mut table: Table = toml::from_str(text).map_err(|e| ConfigError::Invalid {
        layer: name.to_owned(),
        message: e.message().trim().to_owned(),
    })?;
    expand_shorthands(&mut table);
    validate(name, &table)?;
    Ok(table)
}

/// `sandbox = "MODE"` (the short spelling, and what `--sandbox` and `-c sandbox=MODE` say) is
/// `[sandbox] mode = "MODE"`, so that layers merge key by key whichever spelling they use.
fn expand_shorthands(table: &mut Table) {
    if let Some(Value::String(mode)) = table.get("sandbox") {
        let mut section = Table::new();
        section.insert("mode".into(), Value::String(mode.clone()));
        table.insert("sandbox".into(), Value::Table(section));
    }
}

fn validate(name: &str, table: &Table) -> Result<()> {
    Config::deserialize(Value::Table(table.clone())).map_err(|e| ConfigError::Invalid {
        layer: name.to_owned(),
        message: e.to_string(),
    })?;
    Ok(())
}

/// One layer from TOML text: parsed, short spellings expanded, validated on its own; `name`
/// (a file path, `defaults`) is what errors and `keel config dump` call it.
pub fn layer_from_text(name: &str, text: &str) -> Result<Layer> {
    let table = parse_layer(name, text)?;
    Ok(Layer {
        name: name.to_owned(),
        table,
    })
}

/// The layer of one `-c key=value` flag ([`override_table`]), validated on its own.
pub fn override_layer(spec: &str) -> Result<Layer> {
    let mut table = override_table(spec)?;
    expand_shorthands(&mut table);
    let name = format!("-c {spec}");
    validate(&name, &table)?;
    Ok(Layer { name, table })
}

/// Largest configuration file read (1 MiB): the user's, a profile, the project's
/// `.keel/config.toml`. A larger one is [`ConfigError::NotRead`].
pub const MAX_CONFIG_FILE_BYTES: u64 = 1024 * 1024;

/// Whose a configuration file is, which says how it is opened.
#[derive(Debug, Clone, Copy)]
enum Owner<'a> {
    /// The user's (`$KEEL_HOME/config.toml`, a profile): links followed, a regular file
    /// within [`MAX_CONFIG_FILE_BYTES`].
    User,
    /// Named by `--config`: read as it is (it may be `/dev/stdin` or a process substitution).
    Named,
    /// The project's, opened beneath this directory: never through a link out of it.
    Project(&'a Path),
}

fn read_layer(path: &Path, owner: Owner<'_>) -> Result<Option<Layer>> {
    let read = match owner {
        Owner::User => beneath::read_user_text(path, MAX_CONFIG_FILE_BYTES),
        Owner::Project(root) => {
            beneath::Reader::beneath(root).and_then(|r| r.read_text(path, MAX_CONFIG_FILE_BYTES))
        }
        Owner::Named => std::fs::read_to_string(path).map_err(|source| BeneathError::Io {
            path: path.to_path_buf(),
            source,
        }),
    };
    match read {
        Ok(text) => layer_from_text(&path.display().to_string(), &text).map(Some),
        Err(e) if e.is_not_found() => Ok(None),
        Err(BeneathError::Io { source, .. }) => Err(ConfigError::Read {
            path: path.to_path_buf(),
            source,
        }),
        Err(refused) => Err(ConfigError::NotRead {
            path: path.to_path_buf(),
            refused,
        }),
    }
}

/// Parse `-c key=value` into a one-key table. The value is TOML when it parses as TOML
/// (`true`, `3`, `"x"`, `[1]`), otherwise a plain string.
pub fn override_table(spec: &str) -> Result<Table> {
    let bad = |message: String| ConfigError::Override {
        spec: spec.to_owned(),
        message,
    };
    let (key, raw) = spec
        .split_once('=')
        .ok_or_else(|| bad("expected key=value".into()))?;
    let key = key.trim();
    if key.is_empty() {
        return Err(bad("empty key".into()));
    }
    let value = match toml::from_str::<Table>(&format!("v = {raw}")) {
        Ok(mut t) => t.remove("v").unwrap_or(Value::String(raw.to_owned())),
        Err(_) => Value::String(raw.to_owned()),
    };
    let mut table = Table::new();
    let parts: Vec<&str> = key.split('.').collect();
    let mut cur = &mut table;
    for (i, part) in parts.iter().enumerate() {
        if i + 1 == parts.len() {
            cur.insert((*part).to_owned(), value.clone());
        } else {
            cur = match cur
                .entry((*part).to_owned())
                .or_insert_with(|| Value::Table(Table::new()))
            {
                Value::Table(t) => t,
                _ => return Err(bad(format!("{part} is not a table"))),
            };
        }
    }
    Ok(table)
}

/// Load and merge every layer; the defaults layer has a row for each of `plugins`. The
/// project layer is merged whole only when the workspace is trusted ([`crate::trust`]).
pub fn load(sources: &Sources, plugins: &[Box<dyn Plugin>]) -> Result<Loaded> {
    let mut user = vec![Layer {
        name: "defaults".to_owned(),
        table: parse_layer("defaults", &defaults_text(plugins))?,
    }];
    if let Some(l) = read_layer(&sources.home.join("config.toml"), Owner::User)? {
        user.push(l);
    }
    if let Some(profile) = &sources.profile {
        let path = sources
            .home
            .join("profiles")
            .join(format!("{profile}.toml"));
        match read_layer(&path, Owner::User)? {
            Some(l) => user.push(l),
            None => {
                return Err(ConfigError::ProfileNotFound {
                    name: profile.clone(),
                    path,
                });
            }
        }
    }
    let project_path = sources.project.join(".keel").join("config.toml");
    let project = read_layer(&project_path, Owner::Project(&sources.project))?;
    let project_name = project.as_ref().map(|l| l.name.clone());
    if project
        .as_ref()
        .is_some_and(|l| l.table.contains_key("projects"))
    {
        return Err(ConfigError::TrustInProject { path: project_path });
    }
    // The project layer's place: later layers (`--config`, `-c`) override it.
    let at = user.len();
    if let Some(file) = &sources.config_file {
        match read_layer(file, Owner::Named)? {
            Some(l) => user.push(l),
            None => return Err(ConfigError::FileNotFound { path: file.clone() }),
        }
    }
    for spec in &sources.overrides {
        user.push(override_layer(spec)?);
    }
    for layer in &user {
        check_projects(layer)?;
    }
    let own = merge_layers(&user)?;
    let root = trust::workspace_root(&sources.project).unwrap_or_else(|_| sources.project.clone());
    let mut decision = trust::decide(
        &root,
        &own.config.projects,
        &|key| {
            own.origin
                .get(&format!("projects.{key}.trust_level"))
                .cloned()
                .unwrap_or_default()
        },
        sources.trust,
    );
    // A file changed since the workspace was trusted stays inert, as if it were not.
    decision.changed = trust::pins::check(&decision, &own.config.projects, &sources.project);
    let project_trusted = decision.trusts(&project_path);
    let switches = crate::switches::layer(
        &own.config.projects,
        &root,
        &|id| defined(&own.table, project.as_ref(), "plugins", id),
        &|name| defined(&own.table, project.as_ref(), "mcp_servers", name),
        crate::switches::layer_name(&sources.home.join("config.toml"), &root),
    );
    // What the decision governs is worked out whatever it is, from this one load: `keel trust`
    // and the trust notice show it without loading again as untrusted.
    let mut governed = Vec::new();
    let mut loaded = match project {
        // No project layer: the user's own layers are the whole configuration.
        None => match switches {
            None => own,
            Some(switches) => {
                let mut layers = user;
                layers.insert(at, switches);
                merge_layers(&layers)?
            }
        },
        Some(project) => {
            let mut layers = user;
            // After the project's layer (inserted at the same place below).
            if let Some(switches) = switches {
                layers.insert(at, switches);
            }
            let (kept, left_out) = trust::untrusted_view(&project, &own.config);
            if !left_out.is_empty() {
                governed.push(Ignored {
                    file: project_path,
                    what: left_out,
                });
            }
            if project_trusted {
                // Even trusted, a project does not choose where the user's key goes.
                let (project, _user_only) = trust::without_user_only(project);
                layers.insert(at, project);
            } else if !kept.table.is_empty() {
                layers.insert(at, kept);
            }
            merge_layers(&layers)?
        }
    };
    governed.extend(trust::project_files(&sources.project));
    loaded.ignored = governed
        .iter()
        .filter(|i| !decision.trusts(&i.file))
        .cloned()
        .collect();
    loaded.trust = decision;
    loaded.governed = governed;
    loaded.project_layer = project_name;
    Ok(loaded)
}

/// Whether a layer of `own` or `project` defines the `[[plugins]]` row `name` (`section` =
/// `plugins`) or the `[mcp_servers.NAME]` server (`mcp_servers`).
fn defined(own: &Table, project: Option<&Layer>, section: &str, name: &str) -> bool {
    [Some(own), project.map(|l| &l.table)]
        .into_iter()
        .flatten()
        .filter_map(|t| t.get(section))
        .any(|v| match v {
            Value::Array(rows) => rows
                .iter()
                .any(|r| r.get("id").and_then(Value::as_str) == Some(name)),
            Value::Table(t) => t.contains_key(name),
            _ => false,
        })
}

/// A user layer's `[projects]` keys must be absolute directories.
fn check_projects(layer: &Layer) -> Result<()> {
    let Some(projects) = layer.table.get("projects").and_then(Value::as_table) else {
        return Ok(());
    };
    match projects.keys().find(|k| !Path::new(k).is_absolute()) {
        Some(key) => Err(ConfigError::Invalid {
            layer: layer.name.clone(),
            message: format!(
                "projects.{key:?}: a trusted or untrusted directory must be an absolute path (keel trust DIR writes it)"
            ),
        }),
        None => Ok(()),
    }
}

/// Merge layers in order.
pub fn merge_layers(layers: &[Layer]) -> Result<Loaded> {
    let mut table = Table::new();
    let mut origin = BTreeMap::new();
    for layer in layers {
        merge_into(&mut table, &layer.table, "", &layer.name, &mut origin);
    }
    let config =
        Config::deserialize(Value::Table(table.clone())).map_err(|e| ConfigError::Invalid {
            layer: "the merged configuration".into(),
            message: e.to_string(),
        })?;
    let mut seen = std::collections::BTreeSet::new();
    for row in &config.plugins {
        if !seen.insert(row.id.clone()) {
            return Err(ConfigError::DuplicateRow { id: row.id.clone() });
        }
    }
    Ok(Loaded {
        config,
        table,
        origin,
        layers: layers.iter().map(|l| l.name.clone()).collect(),
        trust: TrustDecision {
            root: PathBuf::new(),
            trust: ProjectTrust::Untrusted,
            source: TrustSource::Undecided,
            changed: Vec::new(),
        },
        ignored: Vec::new(),
        governed: Vec::new(),
        project_layer: None,
    })
}

fn merge_into(
    dst: &mut Table,
    src: &Table,
    prefix: &str,
    layer: &str,
    origin: &mut BTreeMap<String, String>,
) {
    for (key, value) in src {
        let path = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        match (key.as_str(), value, dst.get_mut(key)) {
            ("plugins", Value::Array(rows), _) if prefix.is_empty() => {
                let existing = match dst
                    .entry("plugins")
                    .or_insert_with(|| Value::Array(Vec::new()))
                {
                    Value::Array(a) => a,
                    other => {
                        *other = Value::Array(Vec::new());
                        match other {
                            Value::Array(a) => a,
                            _ => continue,
                        }
                    }
                };
                for row in rows {
                    let id = row
                        .get("id")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned();
                    origin.insert(format!("plugins[{id}]"), layer.to_owned());
                    match existing
                        .iter_mut()
                        .find(|r| r.get("id").and_then(Value::as_str) == Some(id.as_str()))
                    {
                        Some(slot) => {
                            // A later layer replaces the row's whole config; other fields merge.
                            if let (Value::Table(slot_t), Value::Table(row_t)) = (slot, row) {
                                for (k, v) in row_t {
                                    slot_t.insert(k.clone(), v.clone());
                                }
                            }
                        }
                        None => existing.push(row.clone()),
                    }
                }
            }
            (_, Value::Table(sub), Some(Value::Table(existing))) => {
                merge_into(existing, sub, &path, layer, origin);
            }
            (_, Value::Table(sub), _) => {
                let mut fresh = Table::new();
                merge_into(&mut fresh, sub, &path, layer, origin);
                dst.insert(key.clone(), Value::Table(fresh));
            }
            _ => {
                origin.insert(path, layer.to_owned());
                dst.insert(key.clone(), value.clone());
            }
        }
    }
}

#[path = "config_dump.rs"]
mod dump;
pub use dump::dump;

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
