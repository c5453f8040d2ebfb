//! The [`ToolRegistry`]: tools by name, with their schemas checked and cached at registration
//! so a call costs one hash lookup. [`ToolRegistry::schemas`] lists tools in registration
//! order, which is fixed for the built-ins, so requests carry identical bytes run to run
//! (prompt-cache stability).
//!
//! A [`ToolSource`] contributes tools whose set can change while an agent runs (an MCP
//! server's, after `tools/list_changed`). The registry holds the source's tools as of its last
//! [`ToolRegistry::refreshed`]; the agent refreshes at turn boundaries only, so a turn's
//! requests all carry the same tools.

use crate::builtins::{self, BashConfig};
use crate::plan::PlanState;
use crate::schema::{SchemaDefect, check_schema};
use crate::seams::ToolInfo;
use crate::tool::Tool;
use keel_protocol::ToolSchema;
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

/// Tools whose set can change while an agent runs. The registry re-reads a source when its
/// [`ToolSource::generation`] moved since the last read.
pub trait ToolSource: Send + Sync {
    /// A counter that moves whenever [`ToolSource::tools`] would return a different set.
    fn generation(&self) -> u64;
    /// The current tools, in the order they are offered (keep it deterministic: requests stay
    /// prefix-stable).
    fn tools(&self) -> Vec<Arc<dyn Tool>>;
}

/// Where a source's tools sit in the registry, and the generation they were read at.
#[derive(Clone)]
struct SourceSlot {
    source: Arc<dyn ToolSource>,
    generation: u64,
    at: usize,
    len: usize,
}

/// A tool with its cached schema, scheduling and timeout.
#[derive(Clone)]
pub struct RegisteredTool {
    tool: Arc<dyn Tool>,
    schema: ToolSchema,
    info: ToolInfo,
    timeout: Option<Duration>,
    shape: ArgsShape,
}

/// How a tool's arguments are read before validation: the parameters' earlier names, and
/// whether a property its schema does not declare is refused.
#[derive(Debug, Clone, Copy, Default)]
pub struct ArgsShape {
    /// `(old, new)` parameter names ([`Tool::aliases`]).
    pub aliases: &'static [(&'static str, &'static str)],
    /// Refuse undeclared top-level properties: true for keel's own schemas unless they say
    /// `additionalProperties`, false for foreign (MCP) schemas, whose owner decides.
    pub closed: bool,
}

impl RegisteredTool {
    /// The tool.
    pub fn tool(&self) -> &dyn Tool {
        &*self.tool
    }
    /// Its schema, as registered.
    pub fn schema(&self) -> &ToolSchema {
        &self.schema
    }
    /// Its scheduling and effect.
    pub fn info(&self) -> ToolInfo {
        self.info
    }
    /// Its pipeline timeout.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }
    /// How its arguments are read.
    pub fn shape(&self) -> ArgsShape {
        self.shape
    }
}

/// Why a tool could not be registered. A programming error of whoever registers the tool
/// (built-in, plugin, MCP bridge): report it at startup.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// A tool with this name is already registered.
    #[error("a tool named '{0}' is already registered")]
    Duplicate(String),
    /// The tool's name is empty or has characters providers reject (allowed: `a-zA-Z0-9_-`).
    #[error("invalid tool name {0:?}: use 1-64 characters from a-z, A-Z, 0-9, '_' and '-'")]
    InvalidName(String),
    /// The parameter schema is outside the supported subset.
    #[error("tool '{tool}': {source}")]
    InvalidSchema {
        /// The tool.
        tool: String,
        /// What is wrong.
        source: SchemaDefect,
    },
}

impl RegistryError {
    /// The name of the tool that was refused.
    pub fn tool(&self) -> &str {
        match self {
            RegistryError::Duplicate(name) | RegistryError::InvalidName(name) => name,
            RegistryError::InvalidSchema { tool, .. } => tool,
        }
    }
}

/// Configuration of the built-in tools.
#[derive(Debug, Clone, Default)]
pub struct BuiltinConfig {
    /// Plan-mode flag shared with the loop and the pipeline.
    pub plan: Arc<PlanState>,
    /// `bash` limits.
    pub bash: BashConfig,
    /// Which built-ins the model gets.
    pub preset: Preset,
    /// Where `read_image` stores the images it reads; `None` (a model without vision): no
    /// `read_image` tool.
    pub images: Option<crate::attachments::Attachments>,
}

/// A session's set of built-in tools (`--preset`, the `preset` key; dsh's presets).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Preset {
    /// dsh 0.2's: a persistent `bash` shell, read, write, edit, working_directory (and
    /// `exit_plan_mode`).
    Minimal,
    /// read, write, edit, glob, grep, bash, working_directory, todo_write, exit_plan_mode,
    /// ask_user_question.
    #[default]
    Standard,
    /// The standard tools reached through Code Mode's `run_code` (unless `tools_mode` says
    /// otherwise; the host applies that part).
    Code,
}

impl Preset {
    /// Spelling in flags and config.
    pub fn as_str(self) -> &'static str {
        match self {
            Preset::Minimal => "minimal",
            Preset::Standard => "standard",
            Preset::Code => "code",
        }
    }
}

impl std::str::FromStr for Preset {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "minimal" => Ok(Preset::Minimal),
            "standard" => Ok(Preset::Standard),
            "code" => Ok(Preset::Code),
            other => Err(format!(
                "unknown preset {other:?}; expected minimal, standard or code"
            )),
        }
    }
}

/// Tools by name.
#[derive(Default)]
pub struct ToolRegistry {
    tools: Vec<RegisteredTool>,
    index: HashMap<String, usize>,
    plan: Arc<PlanState>,
    sources: Vec<SourceSlot>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// The built-in tools of `cfg.preset` (by default read, write, edit, glob, grep, bash,
    /// todo_write, exit_plan_mode, ask_user_question).
    pub fn with_builtins(cfg: &BuiltinConfig) -> Self {
        let mut reg = ToolRegistry {
            plan: cfg.plan.clone(),
            ..Self::default()
        };
        for tool in builtins::all(cfg) {
            // Built-in names and schemas are checked by this crate's tests (every built-in must
            // register); a rejection here cannot depend on input.
            if reg.register(tool).is_err() {
                continue;
            }
        }
        reg
    }

    /// The plan-mode flag the built-ins were made with.
    pub fn plan_state(&self) -> Arc<PlanState> {
        self.plan.clone()
    }

    /// Add a tool after the existing ones.
    pub fn register(&mut self, tool: Arc<dyn Tool>) -> Result<(), RegistryError> {
        let schema = tool.schema();
        let name = schema.name.clone();
        let valid_name = !name.is_empty()
            && name.len() <= 64
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !valid_name {
            return Err(RegistryError::InvalidName(name));
        }
        if self.index.contains_key(&name) {
            return Err(RegistryError::Duplicate(name));
        }
        let checked = if tool.foreign_schema() {
            crate::schema::check_foreign_schema(&schema.parameters)
        } else {
            check_schema(&schema.parameters)
        };
        checked.map_err(|source| RegistryError::InvalidSchema {
            tool: name.clone(),
            source,
        })?;
        let info = ToolInfo {
            mode: tool.mode(),
            effect: tool.effect(),
        };
        let timeout = tool.timeout();
        let shape = ArgsShape {
            aliases: tool.aliases(),
            closed: !tool.foreign_schema()
                && schema.parameters.get("additionalProperties").is_none(),
        };
        self.index.insert(name, self.tools.len());
        self.tools.push(RegisteredTool {
            tool,
            schema,
            info,
            timeout,
            shape,
        });
        Ok(())
    }

    /// Add `source`'s current tools after the existing ones, and keep the source to re-read in
    /// [`ToolRegistry::refreshed`]. Tools that cannot be registered are left out and returned.
    pub fn add_source(&mut self, source: Arc<dyn ToolSource>) -> Vec<RegistryError> {
        self.add_source_beside(source, &HashSet::new())
    }

    /// [`ToolRegistry::add_source`], refusing the names in `reserved` too (tools registered
    /// after the source, which keep their names when the source changes).
    fn add_source_beside(
        &mut self,
        source: Arc<dyn ToolSource>,
        reserved: &HashSet<&str>,
    ) -> Vec<RegistryError> {
        let generation = source.generation();
        let at = self.tools.len();
        let mut errors = Vec::new();
        for tool in source.tools() {
            let name = tool.schema().name;
            let done = if reserved.contains(name.as_str()) {
                Err(RegistryError::Duplicate(name))
            } else {
                self.register(tool)
            };
            errors.extend(done.err());
        }
        self.sources.push(SourceSlot {
            source,
            generation,
            at,
            len: self.tools.len() - at,
        });
        errors
    }

    /// When a source's generation moved: a registry with the same tools, each source's as it
    /// offers them now (in the same place among the others), and the tools that could not be
    /// registered. `None` when no source changed.
    pub fn refreshed(&self) -> Option<(ToolRegistry, Vec<RegistryError>)> {
        if self
            .sources
            .iter()
            .all(|s| s.source.generation() == s.generation)
        {
            return None;
        }
        let from_sources: HashSet<usize> = self
            .sources
            .iter()
            .flat_map(|s| s.at..s.at + s.len)
            .collect();
        let fixed: HashSet<&str> = self
            .tools
            .iter()
            .enumerate()
            .filter(|(i, _)| !from_sources.contains(i))
            .map(|(_, t)| t.schema.name.as_str())
            .collect();
        let mut out = ToolRegistry {
            plan: self.plan.clone(),
            ..Self::default()
        };
        let mut errors = Vec::new();
        let mut slots = self.sources.iter().peekable();
        let mut i = 0;
        loop {
            if let Some(slot) = slots.next_if(|s| s.at == i) {
                errors.extend(out.add_source_beside(slot.source.clone(), &fixed));
                i += slot.len;
                continue;
            }
            let Some(t) = self.tools.get(i) else { break };
            out.push_checked(t.clone());
            i += 1;
        }
        Some((out, errors))
    }

    /// Append a tool registered before (its name and schema were checked then).
    fn push_checked(&mut self, t: RegisteredTool) {
        self.index.insert(t.schema.name.clone(), self.tools.len());
        self.tools.push(t);
    }

    /// A registry holding the same tools (same instances, same order) whose names `keep`
    /// accepts, sharing this one's plan-mode flag; a snapshot (tool sources are not carried).
    /// Used for child agents' tool sets.
    pub fn filtered(&self, keep: impl Fn(&str) -> bool) -> ToolRegistry {
        let mut out = ToolRegistry {
            plan: self.plan.clone(),
            ..Self::default()
        };
        for t in self.tools.iter().filter(|t| keep(&t.schema.name)) {
            out.push_checked(t.clone());
        }
        out
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<&RegisteredTool> {
        self.index.get(name).and_then(|&i| self.tools.get(i))
    }

    /// Tool names in registration order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.iter().map(|t| t.schema.name.as_str())
    }

    /// Schemas in registration order.
    pub fn schemas(&self) -> Vec<ToolSchema> {
        self.tools.iter().map(|t| t.schema.clone()).collect()
    }

    /// Schemas of the tools offered to the model now ([`Tool::offered`]), in registration
    /// order: the `tools` of a request.
    pub fn offered_schemas(&self) -> Vec<ToolSchema> {
        self.tools
            .iter()
            .filter(|t| t.tool.offered())
            .map(|t| t.schema.clone())
            .collect()
    }

    /// The `tools` array of a chat-completions request:
    /// `[{"type":"function","function":{name,description,parameters}}…]`.
    pub fn request_tools(&self) -> Value {
        Value::Array(
            self.tools
                .iter()
                .map(|t| {
                    json!({"type": "function", "function": {
                        "name": t.schema.name,
                        "description": t.schema.description,
                        "parameters": t.schema.parameters,
                    }})
                })
                .collect(),
        )
    }

    /// Bytes of [`ToolRegistry::request_tools`] serialised compactly.
    pub fn request_tools_bytes(&self) -> usize {
        serde_json::to_vec(&self.request_tools()).map_or(0, |v| v.len())
    }
}

/// Bytes the default tool set adds to every request (compact JSON of the `tools` array).
pub fn default_tool_schemas_bytes() -> usize {
    ToolRegistry::with_builtins(&BuiltinConfig::default()).request_tools_bytes()
}
