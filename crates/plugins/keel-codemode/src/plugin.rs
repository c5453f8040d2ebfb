//! The `code_mode` plugin row (on by default; it does nothing in the default `native` tools
//! mode). The tools mode is the top-level `tools_mode` key (`--tools-mode`, `DSH_TOOLS_MODE`),
//! the limits the `[code_mode]` table:
//!
//! ```toml
//! tools_mode = "code"        # native (default) | code | both
//! [code_mode]
//! memory_limit_mib = 64      # the JavaScript heap of one run
//! time_limit_sec = 60        # one run, its tool calls included
//! max_parallel = 10          # parallel-safe sub-calls running at once
//! ```
//!
//! `native` installs nothing: requests are byte-for-byte those of a keel without the plugin.
//! `code` and `both` register `run_code` and a `code-mode` prompt section with the generated
//! `tools` declaration; `code` also hides every other tool from the model (`tools/expose`), so
//! a direct call of one is answered `UNKNOWN_TOOL` with a hint to call it from `run_code`.
//! Subagents work in native mode (they do not inherit `run_code`).

use crate::RUN_CODE;
use crate::declare::declaration;
use crate::engine::{
    DEFAULT_MAX_PARALLEL, DEFAULT_MEMORY_LIMIT_MIB, DEFAULT_TIME_LIMIT_SEC, Limits,
};
use crate::tool::RunCodeTool;
use keel_agent::AgentSlot;
use keel_agent::plugin::{InstallContext, Plugin, PluginError, PluginId, plugin_config};
use keel_agent::prompt::PromptSection;
use keel_protocol::ToolSchema;
use keel_tools::ExposeHook;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// The plugin id.
pub const ID: PluginId = keel_agent::plugin_id!("code_mode");

/// How the model reaches its tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolsMode {
    /// One tool call per request, as without Code Mode (the default).
    #[default]
    Native,
    /// Only `run_code`: every other tool is called from inside a program.
    Code,
    /// `run_code` beside the other tools.
    Both,
}

impl ToolsMode {
    /// The spelling in configuration and flags.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolsMode::Native => "native",
            ToolsMode::Code => "code",
            ToolsMode::Both => "both",
        }
    }
}

impl std::str::FromStr for ToolsMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "native" => Ok(ToolsMode::Native),
            "code" => Ok(ToolsMode::Code),
            "both" => Ok(ToolsMode::Both),
            other => Err(format!(
                "unknown tools mode {other:?}; expected native, code or both"
            )),
        }
    }
}

/// The `[code_mode]` table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CodeModeSettings {
    /// MiB the JavaScript heap of one run may hold (default 64).
    pub memory_limit_mib: Option<u64>,
    /// Seconds one run may take, its tool calls included (default 60).
    pub time_limit_sec: Option<u64>,
    /// Parallel-safe sub-calls running at once (default 10).
    pub max_parallel: Option<usize>,
}

impl CodeModeSettings {
    /// The engine limits these settings give (defaults for what is unset; at least 1 of each).
    pub fn limits(&self) -> Limits {
        let mib = self
            .memory_limit_mib
            .unwrap_or(DEFAULT_MEMORY_LIMIT_MIB)
            .max(1);
        Limits {
            memory_bytes: usize::try_from(mib.saturating_mul(1024 * 1024)).unwrap_or(usize::MAX),
            time: Duration::from_secs(self.time_limit_sec.unwrap_or(DEFAULT_TIME_LIMIT_SEC).max(1)),
            max_parallel: self.max_parallel.unwrap_or(DEFAULT_MAX_PARALLEL).max(1),
            ..Limits::default()
        }
    }
}

/// The row's own `config` (nothing yet: the settings are top-level keys).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RowConfig {}

/// The Code Mode plugin.
#[derive(Debug, Default)]
pub struct CodeModePlugin;

/// Hides every tool but `run_code` from the model (`code` mode).
struct CodeOnly;

impl ExposeHook for CodeOnly {
    fn hidden(&self, name: &str) -> Option<String> {
        (name != RUN_CODE).then(|| {
            format!(
                "the tools mode is `code`; call it from inside run_code, e.g. \
                 `return await tools.{name}({{...}})`"
            )
        })
    }
}

/// The `code-mode` prompt section: how to use `run_code` and the `tools` declaration.
pub fn prompt_section(mode: ToolsMode, limits: &Limits, schemas: &[ToolSchema]) -> String {
    let mut text = format!(
        "## Code Mode\nWith `run_code` you run a JavaScript program over your tools in one call: \
         `code` is the body of an async function. `await tools.NAME(args)` calls a tool through \
         the usual checks and resolves to the text of its result; a failed call rejects with an \
         Error carrying `toolName`, `message` and `code`. Start independent calls together and \
         await them with `Promise.all`: read-only calls run in parallel. `console.log` lines are \
         collected; `return` a JSON-serialisable value; the result is `{{logs, result}}`. There \
         is no file system, network, `require`, `import`, `fetch`, `process` or timer: only \
         `tools`. Limits per run: {} s, {} MiB.",
        limits.time.as_secs(),
        limits.memory_bytes / (1024 * 1024),
    );
    if mode == ToolsMode::Code {
        text.push_str(
            " The tools below cannot be called directly: call them from inside `run_code`.",
        );
    }
    text.push_str("\n\n```ts\n");
    text.push_str(&declaration(schemas, &[RUN_CODE]));
    text.push_str("\n```");
    text
}

fn settings<T: serde::de::DeserializeOwned + Default>(
    ctx: &InstallContext,
    key: &str,
) -> Result<T, PluginError> {
    match ctx.section(key) {
        None | Some(Value::Null) => Ok(T::default()),
        Some(v) => serde_json::from_value(v.clone()).map_err(|source| PluginError::Config {
            plugin: ID.as_str(),
            source,
        }),
    }
}

impl Plugin for CodeModePlugin {
    fn id(&self) -> PluginId {
        ID
    }

    fn description(&self) -> &'static str {
        "Code Mode: run_code, a JavaScript program over the tools (tools_mode = native | code | both)"
    }

    fn enabled_by_default(&self) -> bool {
        true
    }

    fn install(&self, ctx: &mut InstallContext, config: Value) -> Result<(), PluginError> {
        let _: RowConfig = plugin_config(ID, config)?;
        let mode: ToolsMode = match ctx.section("tools_mode") {
            None | Some(Value::Null) => ToolsMode::Native,
            Some(Value::String(s)) => s.parse().map_err(|what| PluginError::Setup {
                plugin: ID.as_str(),
                what,
                source: None,
            })?,
            Some(other) => {
                return Err(PluginError::Setup {
                    plugin: ID.as_str(),
                    what: format!("tools_mode must be a string, not {other}"),
                    source: None,
                });
            }
        };
        if mode == ToolsMode::Native {
            return Ok(());
        }
        let limits = settings::<CodeModeSettings>(ctx, "code_mode")?.limits();
        ctx.tools.push(Arc::new(RunCodeTool::new(limits.clone())));
        let slot = Arc::new(AgentSlot::new());
        let bind = slot.clone();
        ctx.on_agent.push(Box::new(move |agent| {
            bind.bind(agent);
        }));
        ctx.agent_hooks.prompt_sections.push(Arc::new(move |_| {
            let Some(agent) = slot.get() else {
                return Vec::new();
            };
            let schemas = agent.pipeline().registry().offered_schemas();
            vec![PromptSection::new(
                "code-mode",
                prompt_section(mode, &limits, &schemas),
            )]
        }));
        if mode == ToolsMode::Code {
            let hooks = std::mem::take(&mut ctx.agent_hooks.tools);
            ctx.agent_hooks.tools = hooks.expose(Arc::new(CodeOnly));
        }
        // A subagent gets neither the prompt section nor the hook (they are this agent's), so
        // it does not inherit `run_code` either: children work in native mode.
        ctx.agent_hooks.subagent_build.push(Arc::new(|_, setup| {
            setup.withheld.push(RUN_CODE.to_owned())
        }));
        Ok(())
    }
}
