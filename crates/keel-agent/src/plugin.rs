//! Plugins: Rust types compiled into the binary and enabled by configuration rows.
//!
//! A [`Plugin`] installs itself into a [`HostBuilder`] before the agent is built: it registers
//! hooks on the seams, adds tools, and may ask to be handed the [`Agent`] once it exists
//! ([`HostBuilder::on_agent`]) — for tools and hooks that must append to the log or start
//! child agents. Configuration arrives as the row's `config` table converted to JSON; a plugin
//! deserialises it with [`plugin_config`] into its own struct with `deny_unknown_fields`, so an
//! unknown key is an error naming the plugin and the key.

use crate::agent::Agent;
use crate::seams::HookRegistry;
use keel_tools::Tool;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;

/// Why a plugin could not be installed.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// The row's `config` does not fit the plugin; fix the configuration.
    #[error("plugin {plugin}: invalid config: {message}")]
    Config {
        /// Plugin id.
        plugin: String,
        /// What is wrong (names the key).
        message: String,
    },
    /// The plugin could not prepare what it needs (files, directories).
    #[error("plugin {plugin}: {message}")]
    Setup {
        /// Plugin id.
        plugin: String,
        /// What failed.
        message: String,
    },
}

/// A callback run once the agent is built.
pub type OnAgent = Box<dyn FnOnce(&Agent) + Send>;

/// What plugins install into, before the agent is built.
pub struct HostBuilder {
    /// Global hooks: this agent's and its children's (subagents inherit them).
    pub hooks: HookRegistry,
    /// Hooks of this agent only (not inherited by children): per-session observers such as a
    /// progress printer or a journal.
    pub agent_hooks: HookRegistry,
    /// Extra tools to register.
    pub tools: Vec<Arc<dyn Tool>>,
    /// Called with the agent once built.
    pub on_agent: Vec<OnAgent>,
    /// Workspace root.
    pub cwd: PathBuf,
    /// `$KEEL_HOME`.
    pub keel_home: PathBuf,
    /// The subprocess service tools use (credential scrub, process groups); plugins that run
    /// commands (command hooks) reuse it. `None` until the front end sets it.
    pub subprocess: Option<keel_tools::subprocess::SubprocessService>,
}

impl HostBuilder {
    /// An empty builder.
    pub fn new(cwd: PathBuf, keel_home: PathBuf) -> Self {
        HostBuilder {
            hooks: HookRegistry::default(),
            agent_hooks: HookRegistry::default(),
            tools: Vec::new(),
            on_agent: Vec::new(),
            cwd,
            keel_home,
            subprocess: None,
        }
    }

    /// Run the `on_agent` callbacks.
    pub fn bind(callbacks: Vec<OnAgent>, agent: &Agent) {
        for f in callbacks {
            f(agent);
        }
    }
}

/// A built-in plugin.
pub trait Plugin: Send + Sync {
    /// The id used in `[[plugins]]` rows (`use = "<id>"`).
    fn id(&self) -> &'static str;
    /// One line for `keel config dump` and the docs.
    fn description(&self) -> &'static str;
    /// Install into `host` with the row's configuration (`{}` when the row has none).
    fn install(&self, host: &mut HostBuilder, config: Value) -> Result<(), PluginError>;
}

/// Deserialise a plugin's configuration, naming the plugin in errors.
pub fn plugin_config<T: DeserializeOwned>(plugin: &str, config: Value) -> Result<T, PluginError> {
    let config = if config.is_null() {
        Value::Object(Default::default())
    } else {
        config
    };
    serde_json::from_value(config).map_err(|e| PluginError::Config {
        plugin: plugin.to_owned(),
        message: e.to_string(),
    })
}
