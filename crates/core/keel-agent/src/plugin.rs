//! Plugins: Rust types compiled into the binary and enabled by configuration rows.
//!
//! A [`Plugin`] installs itself into an [`InstallContext`] before the agent is built: it
//! registers hooks on the seams, adds tools, and may ask to be handed the agent's
//! [`AgentHandle`] once it exists ([`InstallContext::on_agent`]) — for tools and hooks that must append to the log or start
//! child agents. Configuration arrives as the row's `config` table converted to JSON; a plugin
//! deserialises it with [`plugin_config`] into its own struct with `deny_unknown_fields`, so an
//! unknown key is an error naming the plugin and the key.

use crate::agent::Agent;
use crate::handle::AgentHandle;
use crate::seams::HookRegistry;
use keel_tools::subprocess::SubprocessService;
use keel_tools::{Tool, ToolSource};
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A built-in plugin's identity: the id its `[[plugins]]` row uses (`use = "jobs"`) and, derived
/// from it, the qualified name its messages carry in the session log as their source
/// (`{"kind":"plugin","plugin":"keel/jobs"}`). Written once per plugin with [`plugin_id!`],
/// so the two spellings cannot drift apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PluginId {
    id: &'static str,
    source: &'static str,
}

impl PluginId {
    #[doc(hidden)]
    pub const fn from_parts(id: &'static str, source: &'static str) -> Self {
        PluginId { id, source }
    }

    /// The id of its configuration row (`jobs`).
    pub const fn as_str(self) -> &'static str {
        self.id
    }

    /// The plugin name in the sources of the messages it writes (`keel/jobs`).
    pub const fn source(self) -> &'static str {
        self.source
    }
}

impl std::fmt::Display for PluginId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.id)
    }
}

/// Declare a built-in plugin's [`PluginId`]: `plugin_id!("jobs")` is the row id `jobs` with the
/// message source `keel/jobs`.
#[macro_export]
macro_rules! plugin_id {
    ($id:literal) => {
        $crate::plugin::PluginId::from_parts($id, concat!("keel/", $id))
    };
}

/// Why a plugin could not be installed.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// The row's `config` does not fit the plugin; fix the configuration.
    #[error("plugin {plugin}: invalid config: {source}")]
    Config {
        /// Plugin id.
        plugin: &'static str,
        /// What is wrong (names the key).
        #[source]
        source: serde_json::Error,
    },
    /// The plugin could not prepare what it needs (files, directories, other settings it
    /// reads); the agent is not built.
    #[error("plugin {plugin}: {what}")]
    Setup {
        /// Plugin id.
        plugin: &'static str,
        /// What failed.
        what: String,
        /// The underlying error, when there is one.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
}

impl PluginError {
    /// A setup failure of `plugin`: `what` failed because of `source`.
    pub fn setup(
        plugin: PluginId,
        what: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        PluginError::Setup {
            plugin: plugin.as_str(),
            what: what.into(),
            source: Some(Box::new(source)),
        }
    }
}

/// A slash command a plugin offers interactive front ends (an MCP server's prompt).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginCommand {
    /// The name typed after `/`.
    pub name: String,
    /// One line shown in completion.
    pub description: String,
    /// What goes after the name, when it takes arguments.
    pub argument_hint: Option<String>,
}

/// One value a command offers for its argument (`/rewind`'s turns), for front ends that let
/// the person pick from a list instead of typing ([`CommandSource::choices`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandChoice {
    /// The argument `/name` takes for it (`3`); a front end may add the command's own flags.
    pub args: String,
    /// One line naming it in a list.
    pub label: String,
    /// More about it, shown once it is picked.
    pub detail: String,
    /// The session event it stands for (a turn's `turn/start`), when it stands for a point of
    /// the session: where a front end may fork the session instead.
    pub seq: Option<u64>,
    /// Text a front end may put back in its editor once the action is done (a rewound turn's
    /// prompt).
    pub text: Option<String>,
}

/// Why a plugin command gave no prompt ([`CommandSource::expand`]).
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// The caller abandoned the expansion.
    #[error("cancelled")]
    Cancelled,
    /// The plugin could not expand the command; its error names the command and what failed.
    #[error("{0}")]
    Failed(Box<dyn std::error::Error + Send + Sync>),
}

/// Slash commands of a plugin: listed by front ends that have a command line, and expanded to
/// the prompt they send.
pub trait CommandSource: Send + Sync {
    /// The commands (a stable order).
    fn commands(&self) -> Vec<PluginCommand>;
    /// The prompt `/name args` sends, or why there is none.
    fn expand<'a>(
        &'a self,
        name: &'a str,
        args: &'a str,
    ) -> futures::future::BoxFuture<'a, Result<String, CommandError>>;
    /// `/name args` as an action done at once, when it is one: `Some(Ok(text))` is what the
    /// person is told and nothing goes to the model (`/goal pause`). Front ends ask this
    /// first, and [`CommandSource::expand`] when it is `None` (the default).
    fn act(&self, _name: &str, _args: &str) -> Option<Result<String, CommandError>> {
        None
    }
    /// `/name args` as an action that takes a while (a delegated review): `Some(future)`
    /// resolving to what the person is told; the plugin itself does what the action does (the
    /// review's findings go into the session's next turn). Front ends ask this first, then
    /// [`CommandSource::act`], then [`CommandSource::expand`]; default `None`.
    fn act_async<'a>(
        &'a self,
        _name: &'a str,
        _args: &'a str,
    ) -> Option<futures::future::BoxFuture<'a, Result<String, CommandError>>> {
        None
    }
    /// The values `/name` offers for its argument now, newest first (`/rewind`: the
    /// session's turns); empty when it offers none (the default).
    fn choices(&self, _name: &str) -> Vec<CommandChoice> {
        Vec::new()
    }
}

/// A callback run once the agent is built, with the agent's plugin handle.
pub type OnAgent = Box<dyn FnOnce(&AgentHandle) + Send>;

/// What a plugin installs into, before the agent is built: seams, tools, callbacks for the
/// built agent, and what it may read (the workspace, `$KEEL_HOME`, the merged configuration).
pub struct InstallContext {
    /// Global hooks: this agent's and its children's (subagents inherit them).
    pub hooks: HookRegistry,
    /// Hooks of this agent only (not inherited by children): per-session observers such as a
    /// progress printer or a journal.
    pub agent_hooks: HookRegistry,
    /// Extra tools to register.
    pub tools: Vec<Arc<dyn Tool>>,
    /// Sources of tools whose set can change while the agent runs, registered after `tools`
    /// and re-read at turn boundaries (an MCP server's, after `tools/list_changed`).
    pub tool_sources: Vec<Arc<dyn ToolSource>>,
    /// Slash commands for interactive front ends ([`crate::Agent::commands`]).
    pub commands: Vec<Arc<dyn CommandSource>>,
    /// Called with the agent once built.
    pub on_agent: Vec<OnAgent>,
    /// Workspace root.
    pub cwd: PathBuf,
    /// `$KEEL_HOME`.
    pub keel_home: PathBuf,
    /// The subprocess service tools use (credential scrub, process groups); plugins that run
    /// commands (command hooks) reuse it.
    pub subprocess: SubprocessService,
    /// The merged configuration as JSON, for plugins that own a top-level section (`[hooks]`).
    pub settings: Value,
    /// How another keel process reaches this agent's model (`None` when the model lives only
    /// in this process, like an embedded test double).
    pub model_launch: Option<ModelLaunch>,
    /// Whether the user trusts the workspace's own files: a plugin that would run or load
    /// something the project contains (`.claude/settings.json` hooks, `.mcp.json` servers)
    /// does so only when [`ProjectTrust::Trusted`]; a plugin that starts another keel passes
    /// the decision on, so a child never decides on its own.
    pub project_trust: ProjectTrust,
    /// The workspace's own files (relative to `cwd`: `.mcp.json`) that changed since the user
    /// trusted it: while [`InstallContext::project_trust`] is trusted these stay inert as if it
    /// were not ([`InstallContext::trusts_file`]). Empty when untrusted or nothing changed.
    pub changed_since_trust: Vec<PathBuf>,
    /// Every plugin's presenter ([`keel_protocol::present`]): how the session's events show,
    /// for a plugin that reads other plugins' state without knowing their events (continuity
    /// carries the goal's status item). Set by the host; empty by default.
    pub presenters: keel_protocol::present::PresenterSet,
    /// The Claude Code plugin bundles the user installed and enabled (`keel plugin`): each
    /// plugin reads its part of every bundle (hooks from `hooks/hooks.json`, servers from
    /// `.mcp.json`, skills from `skills/`, subagent definitions from `agents/`). Set by the
    /// host; empty by default. A bundle a project merely declares is never here.
    pub bundles: Vec<Bundle>,
}

/// One installed, enabled Claude Code plugin bundle (docs/plugins.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bundle {
    /// The plugin's name (`.claude-plugin/plugin.json` `name`), the namespace of what it adds.
    pub name: String,
    /// Its folder, at the commit it is pinned to: `${CLAUDE_PLUGIN_ROOT}`.
    pub root: PathBuf,
}

impl Bundle {
    /// `text` with `${CLAUDE_PLUGIN_ROOT}` replaced by [`Bundle::root`], as Claude Code does in
    /// a plugin's hook commands and server definitions.
    pub fn expand(&self, text: &str) -> String {
        text.replace("${CLAUDE_PLUGIN_ROOT}", &self.root.to_string_lossy())
    }
}

/// The user's decision about a workspace's own files (hooks, MCP servers, configuration that
/// widens what runs). Anything but an explicit trust is [`ProjectTrust::Untrusted`]: the
/// project's files are inert.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProjectTrust {
    /// The user trusts the workspace (recorded in `$KEEL_HOME/config.toml`, or for one run).
    Trusted,
    /// Not trusted, or not decided: what the project contains runs nothing.
    #[default]
    Untrusted,
}

impl ProjectTrust {
    /// `trusted` or `untrusted`: the spelling of `trust_level` and `--project-trust`.
    pub fn as_str(self) -> &'static str {
        match self {
            ProjectTrust::Trusted => "trusted",
            ProjectTrust::Untrusted => "untrusted",
        }
    }

    /// Parse `trusted` or `untrusted`.
    pub fn parse(s: &str) -> Option<ProjectTrust> {
        match s {
            "trusted" => Some(ProjectTrust::Trusted),
            "untrusted" => Some(ProjectTrust::Untrusted),
            _ => None,
        }
    }

    /// Whether the project's files may run.
    pub fn is_trusted(self) -> bool {
        self == ProjectTrust::Trusted
    }
}

/// How to start another `keel run` on an agent's model route, for a plugin that runs keel as
/// a child process (the keel delegation provider): the command-line arguments that name the
/// route, and the variables that carry its credential. The credential is passed explicitly on
/// that one spawn; the subprocess service's scrub keeps it out of every other child.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ModelLaunch {
    /// `keel run` arguments (`--base-url URL --model M --api-key-env VAR`, or `--script FILE`).
    pub args: Vec<String>,
    /// Variables to set on the child (name, value): the credential the arguments name.
    pub env: Vec<(String, String)>,
    /// The model endpoint's base URL (`None` for a scripted model): what a plugin that talks
    /// to the same provider (web search) reaches.
    pub base_url: Option<String>,
}

impl std::fmt::Debug for ModelLaunch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the credential's value.
        let names: Vec<&str> = self.env.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("ModelLaunch")
            .field("args", &self.args)
            .field("env", &names)
            .field("base_url", &self.base_url)
            .finish()
    }
}

impl InstallContext {
    /// An empty context for an agent in `cwd`, running commands with `subprocess`.
    pub fn new(cwd: PathBuf, keel_home: PathBuf, subprocess: SubprocessService) -> Self {
        InstallContext {
            hooks: HookRegistry::default(),
            agent_hooks: HookRegistry::default(),
            tools: Vec::new(),
            tool_sources: Vec::new(),
            commands: Vec::new(),
            on_agent: Vec::new(),
            cwd,
            keel_home,
            subprocess,
            settings: Value::Object(Default::default()),
            model_launch: None,
            project_trust: ProjectTrust::Untrusted,
            changed_since_trust: Vec::new(),
            presenters: Default::default(),
            bundles: Vec::new(),
        }
    }

    /// Whether the workspace's own file `path` (absolute, `cwd/.mcp.json`) may run: the
    /// workspace is trusted and the file has not changed since the user trusted it.
    pub fn trusts_file(&self, path: &Path) -> bool {
        // By the name's tail: a path spelled otherwise than `cwd` still matches.
        self.project_trust.is_trusted()
            && !self
                .changed_since_trust
                .iter()
                .any(|rel| path.ends_with(rel))
    }

    /// The decision a plugin that starts another keel passes on: untrusted when any of the
    /// workspace's files changed since it was trusted (the child would not see that).
    pub fn child_project_trust(&self) -> ProjectTrust {
        if self.changed_since_trust.is_empty() {
            self.project_trust
        } else {
            ProjectTrust::Untrusted
        }
    }

    /// The top-level configuration section `key`, if the configuration has it.
    pub fn section(&self, key: &str) -> Option<&Value> {
        self.settings.get(key)
    }

    /// Run the `on_agent` callbacks with the built agent's handle.
    pub fn bind(callbacks: Vec<OnAgent>, agent: &Agent) {
        let handle = agent.handle();
        for f in callbacks {
            f(&handle);
        }
    }
}

/// A built-in plugin.
pub trait Plugin: Send + Sync {
    /// Its identity (the `use = "<id>"` of `[[plugins]]` rows).
    fn id(&self) -> PluginId;
    /// One line for `keel config dump` and the docs.
    fn description(&self) -> &'static str;
    /// Whether its row in the built-in defaults is enabled.
    fn enabled_by_default(&self) -> bool;
    /// Install into `ctx` with the row's configuration (`{}` when the row has none).
    fn install(&self, ctx: &mut InstallContext, config: Value) -> Result<(), PluginError>;
    /// How its own events show ([`keel_protocol::present`]), for a plugin that logs events
    /// of its own. Asked of every built-in plugin, enabled or not: a log keeps the events of a
    /// plugin turned off since, and they show the same.
    fn presenter(&self) -> Option<keel_protocol::present::MakePresenter> {
        None
    }
}

/// Deserialise a plugin's configuration, naming the plugin in errors.
pub fn plugin_config<T: DeserializeOwned>(
    plugin: PluginId,
    config: Value,
) -> Result<T, PluginError> {
    let config = if config.is_null() {
        Value::Object(Default::default())
    } else {
        config
    };
    serde_json::from_value(config).map_err(|source| PluginError::Config {
        plugin: plugin.as_str(),
        source,
    })
}
