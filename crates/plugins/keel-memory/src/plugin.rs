//! The `memory` plugin row (off by default; `--memory` or a `[[plugins]]` row turns it on):
//!
//! ```toml
//! [[plugins]]
//! id = "memory"
//! [plugins.config]
//! tools = true              # memory_*, variable_*, history_search
//! context_mode = "managed"  # or "native" (unset: a resumed session keeps its logged mode)
//! policy = "recent"         # managed mode's policy: "recent", "relevant", or a plugged-in one
//! budget_fraction = 0.5     # managed mode: the history budget, a share of the context window
//! global_writes = false     # memory_write to the `global` scope
//! ```

use crate::context::{ContextMode, Policy};
use keel_agent::plugin::{InstallContext, Plugin, PluginError, PluginId, plugin_config};
use serde::Deserialize;
use serde_json::Value;
use std::sync::Arc;

/// The plugin id.
pub const ID: PluginId = keel_agent::plugin_id!("memory");

/// The row's `config`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryConfig {
    /// Register the memory, variable and history tools.
    #[serde(default = "yes")]
    pub tools: bool,
    /// The context mode: a new session starts in it, a resumed one switches to it (between
    /// turns, logged). Unset: a resumed session keeps the mode its log says; a new one is
    /// `native`.
    #[serde(default)]
    pub context_mode: Option<ContextMode>,
    /// The projection policy of `managed` mode.
    #[serde(default = "recent")]
    pub policy: String,
    /// `managed` mode's history budget as a share of the context window (0 < f ≤ 1).
    #[serde(default = "half")]
    pub budget_fraction: f64,
    /// Whether `memory_write` may write the `global` scope.
    #[serde(default)]
    pub global_writes: bool,
}

fn yes() -> bool {
    true
}
fn recent() -> String {
    "recent".into()
}
fn half() -> f64 {
    0.5
}

impl Default for MemoryConfig {
    fn default() -> Self {
        MemoryConfig {
            tools: true,
            context_mode: None,
            policy: recent(),
            budget_fraction: half(),
            global_writes: false,
        }
    }
}

/// The `memory` plugin, with the projection policies it knows (the built-in `recent` and
/// `relevant`, and any added with [`MemoryPlugin::with_policy`]).
#[derive(Clone)]
pub struct MemoryPlugin {
    policies: Vec<Arc<dyn Policy>>,
}

impl std::fmt::Debug for MemoryPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryPlugin")
            .field(
                "policies",
                &self.policies.iter().map(|p| p.name()).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl Default for MemoryPlugin {
    fn default() -> Self {
        MemoryPlugin {
            policies: crate::context::builtin_policies(),
        }
    }
}

impl MemoryPlugin {
    /// Add a projection policy (selected by `policy = "<its name>"`); a policy with the name
    /// of an existing one replaces it.
    pub fn with_policy(mut self, policy: Arc<dyn Policy>) -> Self {
        self.policies.retain(|p| p.name() != policy.name());
        self.policies.push(policy);
        self
    }
}

impl Plugin for MemoryPlugin {
    fn id(&self) -> PluginId {
        ID
    }

    fn description(&self) -> &'static str {
        "managed context mode (per-request history projection) and memory, variable and history tools"
    }

    fn enabled_by_default(&self) -> bool {
        false
    }

    fn install(&self, ctx: &mut InstallContext, config: Value) -> Result<(), PluginError> {
        let config: MemoryConfig = plugin_config(ID, config)?;
        if !(config.budget_fraction > 0.0 && config.budget_fraction <= 1.0) {
            return Err(PluginError::Setup {
                plugin: ID.as_str(),
                what: format!(
                    "budget_fraction {} is outside (0, 1]",
                    config.budget_fraction
                ),
                source: None,
            });
        }
        if config.tools {
            let tools = crate::store::tools(ctx, &config)?;
            ctx.tools.extend(tools);
            ctx.tools
                .push(Arc::new(crate::history::HistorySearch::default()));
        }
        crate::context::install(ctx, &config, &self.policies).map(|_| ())
    }
}

/// `row_config` (the memory row's merged config, `null` when it has none) with `context_mode`
/// and `policy` set, its other keys kept: what `--context MODE[:POLICY]` does.
pub fn with_context(row_config: Value, mode: ContextMode, policy: Option<&str>) -> Value {
    let mut map = match row_config {
        Value::Object(m) => m,
        _ => serde_json::Map::new(),
    };
    map.insert("context_mode".into(), Value::from(mode.as_str()));
    if let Some(p) = policy {
        map.insert("policy".into(), Value::from(p));
    }
    Value::Object(map)
}

/// `--context native`.
pub fn context_native(row_config: Value) -> Value {
    with_context(row_config, ContextMode::Native, None)
}

/// `--context managed` (the configured policy, `recent` by default).
pub fn context_managed(row_config: Value) -> Value {
    with_context(row_config, ContextMode::Managed, None)
}

/// `--context managed:recent`.
pub fn context_recent(row_config: Value) -> Value {
    with_context(row_config, ContextMode::Managed, Some("recent"))
}

/// `--context managed:relevant`.
pub fn context_relevant(row_config: Value) -> Value {
    with_context(row_config, ContextMode::Managed, Some("relevant"))
}
