//! Errors of host assembly: configuration, model route, plugins, the agent itself.

use crate::config::ConfigError;
use keel_agent::AgentError;
use keel_agent::plugin::PluginError;
use std::path::PathBuf;

/// Why an agent could not be assembled. Every variant names what is involved (the layer, the
/// row, the provider, the path); a front end reports it to the user and stops.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The layered configuration could not be loaded.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The configured provider has no `[providers.NAME]` table.
    #[error(
        "unknown provider {name:?}: add a [providers.{name}] table with base_url (and api_key_env if the server needs a key) to the configuration"
    )]
    UnknownProvider {
        /// The provider name.
        name: String,
    },
    /// The provider could not be set up (API key, base URL, HTTP client).
    #[error(transparent)]
    Provider(#[from] keel_llm::ConfigError),
    /// The stored keys (`$KEEL_HOME/credentials.toml`) could not be read or written.
    #[error(transparent)]
    Credentials(#[from] crate::credentials::CredentialsError),
    /// The endpoint's key variable is unset or blank and no key is stored for its provider.
    /// The text is the first run's guide: store a key, use a local server, or try the demo.
    #[error(
        "no API key for {provider} ({base_url}): set the environment variable {var}, or\n  \
         keel login {provider:<13} store a key in $KEEL_HOME/credentials.toml (asked without echo)\n  \
         keel --base-url URL …    a local OpenAI-compatible server (Ollama, llama.cpp, vLLM): no key needed\n  \
         keel demo                try keel offline with a scripted model"
    )]
    MissingKey {
        /// The variable.
        var: String,
        /// The provider.
        provider: String,
        /// Where the key would be sent.
        base_url: String,
    },
    /// A model script (`--script`) could not be read.
    #[error("cannot use model script {}", path.display())]
    Script {
        /// The script file.
        path: PathBuf,
        /// Why.
        #[source]
        source: keel_llm::ScriptError,
    },
    /// The working directory cannot be a workspace.
    #[error("cannot use workspace {}", path.display())]
    Workspace {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A `sandbox.writable_roots` entry cannot be used.
    #[error("sandbox.writable_roots: cannot use {}", path.display())]
    WritableRoot {
        /// The directory, as resolved against the workspace.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A `[[plugins]]` row names no plugin of the set.
    #[error(
        "unknown plugin {uses:?} in the [[plugins]] row with id {row:?} (set in {layer}); known plugins: {}",
        known.join(", ")
    )]
    UnknownPlugin {
        /// What the row uses.
        uses: String,
        /// The row id.
        row: String,
        /// The layer that set the row.
        layer: String,
        /// The plugin set's ids.
        known: Vec<&'static str>,
    },
    /// A row's `config` table cannot be handed to its plugin.
    #[error("plugin row {row:?}: cannot convert its config")]
    RowConfig {
        /// The row id.
        row: String,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// A plugin refused its configuration or could not set itself up.
    #[error("{source} (row {row:?}, set in {layer})")]
    Plugin {
        /// The row id.
        row: String,
        /// The layer that set the row.
        layer: String,
        /// The plugin's error.
        source: PluginError,
    },
    /// A plugin tool has the name of a tool already registered.
    #[error("cannot register plugin tool {name}")]
    ToolName {
        /// The tool's name.
        name: String,
        /// Why.
        #[source]
        source: keel_tools::registry::RegistryError,
    },
    /// A session file could not be created.
    #[error("cannot create a session under {}", home.display())]
    Session {
        /// `$KEEL_HOME`.
        home: PathBuf,
        /// Why.
        #[source]
        source: keel_session::StoreError,
    },
    /// The model's context window cannot hold keel's fixed prompt (system prompt and tool
    /// schemas) plus a reserve for the answer; found before any request. Report it and stop:
    /// the user raises the window (`--context-window`, `[models.NAME] context_window`).
    #[error(
        "the context window of model {model} is {window} tokens, too small for keel's fixed \
         prompt: the system prompt and tool schemas take about {fixed} tokens, plus {reserve} \
         reserved for the answer ({needed} in all); raise it with --context-window N or \
         context_window in the [models.\"{model}\"] table of the configuration"
    )]
    ContextWindowTooSmall {
        /// The model.
        model: String,
        /// Its context window, in tokens.
        window: u64,
        /// Estimated tokens of the system prompt and tool schemas.
        fixed: u64,
        /// Tokens reserved for the answer.
        reserve: u64,
        /// `fixed + reserve`.
        needed: u64,
    },
    /// The agent could not be built (its first events, its tools).
    #[error(transparent)]
    Agent(#[from] AgentError),
}
