//! The ten memory and variable tools. Identity (session, workspace, agent role) comes from the
//! calling agent ([`keel_agent::calling_agent`]), never from arguments: an argument the schema
//! does not list (a `session_id`, say) is refused by name. Everything returned to the model is
//! framed as data ([`crate::framing::as_data`]). Store calls run on the blocking pool.

use super::records::{Kind, Scope, now_ms};
use super::search::{render, render_record, render_written};
use super::sqlite::{Changes, Identity, MemoryStore, NewRecord, StoreError, default_path};
use super::variables::{Change, TurnVars, Var, VarInfo, VarOp, VarScope};
use crate::framing::as_data;
use crate::lexical::Query;
use crate::plugin::MemoryConfig;
use async_trait::async_trait;
use keel_agent::plugin::{InstallContext, PluginError};
use keel_protocol::sync::Locked;
use keel_protocol::{EventBody, ToolSchema};
use keel_tools::{ExecMode, Tool, ToolContext, ToolEffect, ToolError, ToolOutput};
use serde_json::{Map, Value, json};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

/// The error code of a stale `expected_revision` of a record.
pub const MEMORY_REVISION_CONFLICT: &str = "MEMORY_REVISION_CONFLICT";
/// The error code of a stale `expected_revision` of a variable.
pub const VARIABLE_REVISION_CONFLICT: &str = "VARIABLE_REVISION_CONFLICT";

/// The ten tool names.
pub const TOOL_NAMES: [&str; 10] = [
    "memory_search",
    "memory_read",
    "memory_write",
    "memory_update",
    "memory_forget",
    "variable_get",
    "variable_set",
    "variable_patch",
    "variable_delete",
    "variable_list",
];

/// Most results of one search.
pub const MAX_LIMIT: u64 = 20;
/// Largest token budget of one search.
pub const MAX_SEARCH_TOKENS: u64 = 4000;
const DEFAULT_LIMIT: u64 = 10;
const DEFAULT_SEARCH_TOKENS: u64 = 1500;

/// What the tools of one install share: the store (opened on first use, so a broken file is
/// reported by the tool that needs it, naming the file) and the turn variables.
pub struct Shared {
    path: PathBuf,
    global_writes: bool,
    store: Mutex<Option<Arc<MemoryStore>>>,
    turn: TurnVars,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared").field("path", &self.path).finish()
    }
}

impl Shared {
    /// Tools state over the store file at `path`.
    pub fn new(path: PathBuf, global_writes: bool) -> Shared {
        Shared {
            path,
            global_writes,
            store: Mutex::new(None),
            turn: TurnVars::default(),
        }
    }

    fn store(&self) -> Result<Arc<MemoryStore>, StoreError> {
        let mut slot = self.store.locked();
        if let Some(s) = slot.as_ref() {
            return Ok(s.clone());
        }
        let s = Arc::new(MemoryStore::open(&self.path)?.with_global_writes(self.global_writes));
        *slot = Some(s.clone());
        Ok(s)
    }

    /// The turn variables.
    pub fn turn_vars(&self) -> &TurnVars {
        &self.turn
    }
}

/// The memory and variable tools for one install, over `$KEEL_HOME/memory/memory.sqlite3`;
/// registers the observer that clears the agent's turn variables at its `turn/end`.
pub fn tools(
    ctx: &mut InstallContext,
    config: &MemoryConfig,
) -> Result<Vec<Arc<dyn Tool>>, PluginError> {
    let shared = Arc::new(Shared::new(
        default_path(&ctx.keel_home),
        config.global_writes,
    ));
    Ok(tools_with_shared(ctx, &shared))
}

/// The ten tools over `shared`, installed into `ctx` with the `turn/end` observer that clears
/// the agent's turn variables.
pub fn tools_with_shared(ctx: &mut InstallContext, shared: &Arc<Shared>) -> Vec<Arc<dyn Tool>> {
    let session: Arc<OnceLock<String>> = Arc::new(OnceLock::new());
    let bound = session.clone();
    ctx.on_agent.push(Box::new(move |agent| {
        let _ = bound.set(agent.session_id().as_str().to_owned());
    }));
    let s = shared.clone();
    ctx.agent_hooks
        .session_event
        .push(Arc::new(move |ev: &keel_protocol::SessionEvent| {
            if matches!(ev.body, EventBody::TurnEnd(_))
                && let Some(id) = session.get()
            {
                s.turn.clear(id);
            }
        }));
    tools_over(shared)
}

/// The ten tools over `shared`.
pub fn tools_over(shared: &Arc<Shared>) -> Vec<Arc<dyn Tool>> {
    TOOL_NAMES
        .iter()
        .map(|name| {
            Arc::new(MemoryTool {
                name,
                shared: shared.clone(),
            }) as Arc<dyn Tool>
        })
        .collect()
}

struct MemoryTool {
    name: &'static str,
    shared: Arc<Shared>,
}

const S: &str = "string";

/// The parameters schema and description of tool `name`.
fn schema(name: &str) -> (&'static str, Value) {
    let scope = json!({"enum":["session","project","agent","global"]});
    let vscope = json!({"enum":["turn","session","project","agent","global"]});
    let s = json!({"type":S});
    let n = json!({"type":"number"});
    let tags = json!({"type":"array","items":{"type":S}});
    let obj =
        |props: Value, req: &[&str]| json!({"type":"object","properties":props,"required":req});
    match name {
        "memory_search" => (
            "Search memory (all scopes unless scope). limit<=20, max_tokens<=4000.",
            obj(
                json!({"query":s,"scope":scope,"limit":{"type":"integer"},"max_tokens":{"type":"integer"}}),
                &["query"],
            ),
        ),
        "memory_read" => (
            "Read a memory record.",
            obj(json!({"id":s,"scope":scope}), &["id", "scope"]),
        ),
        "memory_write" => (
            "Remember something. importance/confidence 0..1; expires_at RFC 3339.",
            obj(
                json!({"scope":scope,"kind":{"enum":["semantic","episodic"]},"content":s,"tags":tags,
                    "importance":n,"confidence":n,"expires_at":s}),
                &["scope", "kind", "content"],
            ),
        ),
        "memory_update" => (
            "Change a record; expected_revision: its current revision. Given fields replace.",
            obj(
                json!({"id":s,"scope":scope,"expected_revision":s,"kind":{"enum":["semantic","episodic"]},
                    "content":s,"tags":tags,"importance":n,"confidence":n,"expires_at":s}),
                &["id", "scope", "expected_revision"],
            ),
        ),
        "memory_forget" => (
            "Forget a record.",
            obj(
                json!({"id":s,"scope":scope,"expected_revision":s}),
                &["id", "scope", "expected_revision"],
            ),
        ),
        "variable_get" => (
            "Get a variable (JSON).",
            obj(json!({"name":s,"scope":vscope}), &["name", "scope"]),
        ),
        "variable_set" => (
            "Set a variable. turn scope ends with the turn. expected_revision: CAS.",
            obj(
                json!({"name":s,"scope":vscope,"value":{},"expected_revision":s}),
                &["name", "scope", "value"],
            ),
        ),
        "variable_patch" => (
            "Patch a variable: <=32 changes {op:set|delete, path: JSON Pointer, value}.",
            obj(
                json!({"name":s,"scope":vscope,"changes":{"type":"array","items":{"type":"object"}},"expected_revision":s}),
                &["name", "scope", "changes"],
            ),
        ),
        "variable_delete" => (
            "Delete a variable.",
            obj(
                json!({"name":s,"scope":vscope,"expected_revision":s}),
                &["name", "scope"],
            ),
        ),
        _ => (
            "List variables of a scope.",
            obj(json!({"scope":vscope}), &["scope"]),
        ),
    }
}

/// The ten schemas' compact JSON size in bytes (the per-request cost of the tools).
pub fn schema_bytes() -> usize {
    TOOL_NAMES
        .iter()
        .map(|n| {
            let (d, p) = schema(n);
            json!({"name": n, "description": d, "parameters": p})
                .to_string()
                .len()
        })
        .sum()
}

#[async_trait]
impl Tool for MemoryTool {
    fn schema(&self) -> ToolSchema {
        let (description, parameters) = schema(self.name);
        ToolSchema {
            name: self.name.into(),
            description: description.into(),
            parameters,
        }
    }

    fn effect(&self) -> ToolEffect {
        // Writes only the memory store under $KEEL_HOME, never the workspace.
        ToolEffect::ReadOnly
    }

    fn mode(&self) -> ExecMode {
        match self.name {
            "memory_search" | "memory_read" | "variable_get" | "variable_list" => {
                ExecMode::Parallel
            }
            _ => ExecMode::Exclusive,
        }
    }

    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let agent = keel_agent::calling_agent(ctx).ok_or_else(|| {
            ToolError::Failed(format!(
                "{} runs only inside an agent (identity comes from the calling agent)",
                self.name
            ))
        })?;
        let role = if agent.delegation_depth() == 0 {
            "main"
        } else {
            "subagent"
        };
        let who = Identity::new(agent.session_id().as_str(), &agent.config().cwd, role);
        let turn = agent.current_turn().0;
        let shared = self.shared.clone();
        let name = self.name;
        tokio::task::spawn_blocking(move || call(&shared, name, &args, &who, turn, now_ms()))
            .await
            .map_err(|e| ToolError::Failed(format!("{name}: {e}")))?
    }
}

/// Run tool `name` for `who` (in turn `turn`) at `now`: the body without the agent, for tests
/// and benches.
pub fn call(
    shared: &Shared,
    name: &str,
    args: &Value,
    who: &Identity,
    turn: u32,
    now: i64,
) -> Result<ToolOutput, ToolError> {
    let (_, params) = schema(name);
    let a = Args::new(name, args, &params)?;
    match name {
        "memory_search" | "memory_read" | "memory_write" | "memory_update" | "memory_forget" => {
            let store = shared.store().map_err(tool_err)?;
            memory(&store, name, &a, who, now)
        }
        _ => variable(shared, name, &a, who, turn, now),
    }
}

fn memory(
    store: &MemoryStore,
    name: &str,
    a: &Args<'_>,
    who: &Identity,
    now: i64,
) -> Result<ToolOutput, ToolError> {
    let data = |body: String| ToolOutput::text(as_data("memory", &body));
    match name {
        "memory_search" => {
            let query = a.str("query")?;
            let scope = a.opt_scope()?;
            let limit = a.bounded("limit", DEFAULT_LIMIT, 1, MAX_LIMIT)?;
            let max_tokens =
                a.bounded("max_tokens", DEFAULT_SEARCH_TOKENS, 1, MAX_SEARCH_TOKENS)?;
            let q = Query::new(query);
            if q.is_empty() {
                return Err(ToolError::InvalidArgs(
                    "query: has no words (letters or digits) to search for".into(),
                ));
            }
            let limit = usize::try_from(limit).unwrap_or(20);
            let hits = store.search(who, &q, scope, limit, now).map_err(tool_err)?;
            let ids: Vec<&str> = hits.iter().map(|h| h.record.id.as_str()).collect();
            let value = json!({"ids": ids});
            Ok(data(render(query, scope, &hits, max_tokens)).with_value(value))
        }
        "memory_read" => {
            let r = store
                .read(who, a.scope()?, a.str("id")?, now)
                .map_err(tool_err)?;
            let value = json!({"id": r.id, "revision": r.revision});
            Ok(data(render_record(&r)).with_value(value))
        }
        "memory_write" => {
            let new = NewRecord {
                kind: a.kind()?.unwrap_or(Kind::Semantic),
                content: a.str("content")?.to_owned(),
                tags: a.tags()?.unwrap_or_default(),
                importance: a.num("importance")?,
                confidence: a.num("confidence")?,
                expires_at: a.opt_str("expires_at")?.map(str::to_owned),
            };
            let r = store.write(who, a.scope()?, new, now).map_err(tool_err)?;
            let value = json!({"id": r.id, "revision": r.revision});
            Ok(data(render_written("wrote", &r)).with_value(value))
        }
        "memory_update" => {
            let changes = Changes {
                kind: a.kind()?,
                content: a.opt_str("content")?.map(str::to_owned),
                tags: a.tags()?,
                importance: a.num("importance")?,
                confidence: a.num("confidence")?,
                expires_at: a.opt_str("expires_at")?.map(str::to_owned),
            };
            let r = store
                .update(
                    who,
                    a.scope()?,
                    a.str("id")?,
                    a.str("expected_revision")?,
                    changes,
                    now,
                )
                .map_err(tool_err)?;
            let value = json!({"id": r.id, "revision": r.revision});
            Ok(data(render_written("updated", &r)).with_value(value))
        }
        _ => {
            let r = store
                .forget(
                    who,
                    a.scope()?,
                    a.str("id")?,
                    a.str("expected_revision")?,
                    now,
                )
                .map_err(tool_err)?;
            let value = json!({"id": r.id, "revision": r.revision});
            Ok(data(render_written("forgot", &r)).with_value(value))
        }
    }
}

fn variable(
    shared: &Shared,
    name: &str,
    a: &Args<'_>,
    who: &Identity,
    turn: u32,
    now: i64,
) -> Result<ToolOutput, ToolError> {
    let scope_s = a.str("scope")?;
    let scope = VarScope::parse(scope_s).ok_or_else(|| {
        ToolError::InvalidArgs(format!(
            "scope: {scope_s:?} is not one of turn, session, project, agent, global"
        ))
    })?;
    let data = |body: String| ToolOutput::text(as_data("variable", &body));
    if name == "variable_list" {
        let list = match scope {
            VarScope::Turn => shared.turn.list(&who.session_id, turn),
            VarScope::Stored(s) => shared
                .store()
                .and_then(|st| st.var_list(who, s))
                .map_err(tool_err)?,
        };
        return Ok(data(render_list(scope, &list)));
    }
    let var = a.str("name")?;
    if name == "variable_get" {
        super::variables::check_name(var).map_err(|e| ToolError::InvalidArgs(e.to_string()))?;
        let v = match scope {
            VarScope::Turn => shared.turn.get(&who.session_id, turn, var),
            VarScope::Stored(s) => shared
                .store()
                .and_then(|st| st.var_get(who, s, var))
                .map_err(tool_err)?,
        };
        return Ok(match v {
            Some(v) => data(render_var(scope, &v)).with_value(json!({"revision": v.revision})),
            None => data(format!(
                "variable {var} is not set in scope {}",
                scope.as_str()
            )),
        });
    }
    let op = match name {
        "variable_set" => VarOp::Set(a.get("value").cloned().ok_or_else(|| missing("value"))?),
        "variable_patch" => {
            let raw = a.get("changes").ok_or_else(|| missing("changes"))?;
            let list = raw
                .as_array()
                .ok_or_else(|| ToolError::InvalidArgs("changes: must be an array".into()))?;
            if list.len() > super::variables::MAX_PATCH_CHANGES {
                return Err(ToolError::InvalidArgs(format!(
                    "changes: {} changes; the limit is {}",
                    list.len(),
                    super::variables::MAX_PATCH_CHANGES
                )));
            }
            let changes = list
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    serde_json::from_value::<Change>(c.clone()).map_err(|e| {
                        ToolError::InvalidArgs(format!(
                            "changes[{i}]: {e} (expected {{op: \"set\", path, value}} or {{op: \"delete\", path}})"
                        ))
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            VarOp::Patch(changes)
        }
        _ => VarOp::Delete,
    };
    let expected = a.opt_str("expected_revision")?;
    let next = match scope {
        VarScope::Turn => shared
            .turn
            .write(&who.session_id, turn, var, &op, expected, now),
        VarScope::Stored(s) => shared
            .store()
            .and_then(|st| st.var_write(who, s, var, &op, expected, now)),
    }
    .map_err(tool_err)?;
    Ok(match next {
        Some(v) => data(format!(
            "variable {var} in scope {} is at revision {}\n{}",
            scope.as_str(),
            v.revision,
            v.value
        ))
        .with_value(json!({"revision": v.revision})),
        None => data(format!(
            "deleted variable {var} in scope {}",
            scope.as_str()
        )),
    })
}

fn render_var(scope: VarScope, v: &Var) -> String {
    format!(
        "variable {} in scope {} (revision {}, updated_at {}):\n{}",
        v.name,
        scope.as_str(),
        v.revision,
        v.updated_at,
        v.value
    )
}

fn render_list(scope: VarScope, list: &[VarInfo]) -> String {
    if list.is_empty() {
        return format!("no variables in scope {}", scope.as_str());
    }
    let mut s = format!("{} variable(s) in scope {}:", list.len(), scope.as_str());
    for v in list {
        s.push_str(&format!(
            "\n{} revision={} bytes={} updated_at={}",
            v.name, v.revision, v.bytes, v.updated_at
        ));
    }
    s
}

fn missing(field: &str) -> ToolError {
    ToolError::InvalidArgs(format!("{field}: missing"))
}

/// A store error as the model sees it: conflicts carry their code, bad fields `INVALID_ARGS`
/// naming the field, policy `DENIED`, the rest `TOOL_FAILED` naming the file.
pub fn tool_err(e: StoreError) -> ToolError {
    match &e {
        StoreError::RevisionConflict { id, current, .. } => ToolError::coded(
            MEMORY_REVISION_CONFLICT,
            format!("expected_revision: {e}"),
            json!({"id": id, "current_revision": current}),
        ),
        StoreError::VariableConflict { name, current, .. } => ToolError::coded(
            VARIABLE_REVISION_CONFLICT,
            format!("expected_revision: {e}"),
            json!({"name": name, "current_revision": current}),
        ),
        StoreError::Field(_) | StoreError::NotFound { .. } => ToolError::InvalidArgs(e.to_string()),
        StoreError::Denied(_) => ToolError::Denied(e.to_string()),
        _ => ToolError::Failed(e.to_string()),
    }
}

/// A tool's arguments, checked against its schema's property names.
struct Args<'a> {
    map: &'a Map<String, Value>,
}

impl<'a> Args<'a> {
    fn new(tool: &str, args: &'a Value, params: &Value) -> Result<Args<'a>, ToolError> {
        let map = args.as_object().ok_or_else(|| {
            ToolError::InvalidArgs(format!("{tool}: arguments must be an object"))
        })?;
        let known = params.get("properties").and_then(Value::as_object);
        if let Some(k) = map
            .keys()
            .find(|k| known.is_none_or(|p| !p.contains_key(*k)))
        {
            return Err(ToolError::InvalidArgs(format!(
                "{k}: not an argument of {tool} (identity — session, agent, workspace — comes from the calling agent)"
            )));
        }
        Ok(Args { map })
    }

    fn get(&self, field: &str) -> Option<&'a Value> {
        self.map.get(field).filter(|v| !v.is_null())
    }

    fn opt_str(&self, field: &'static str) -> Result<Option<&'a str>, ToolError> {
        match self.get(field) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(ToolError::InvalidArgs(format!("{field}: must be a string"))),
        }
    }

    fn str(&self, field: &'static str) -> Result<&'a str, ToolError> {
        self.opt_str(field)?.ok_or_else(|| missing(field))
    }

    fn num(&self, field: &'static str) -> Result<Option<f64>, ToolError> {
        match self.get(field) {
            None => Ok(None),
            Some(v) => v
                .as_f64()
                .map(Some)
                .ok_or_else(|| ToolError::InvalidArgs(format!("{field}: must be a number"))),
        }
    }

    fn bounded(
        &self,
        field: &'static str,
        default: u64,
        min: u64,
        max: u64,
    ) -> Result<u64, ToolError> {
        match self.get(field) {
            None => Ok(default),
            Some(v) => match v.as_u64() {
                Some(n) if (min..=max).contains(&n) => Ok(n),
                _ => Err(ToolError::InvalidArgs(format!(
                    "{field}: {v} is outside {min}..={max}"
                ))),
            },
        }
    }

    fn scope(&self) -> Result<Scope, ToolError> {
        self.opt_scope()?.ok_or_else(|| missing("scope"))
    }

    fn opt_scope(&self) -> Result<Option<Scope>, ToolError> {
        self.opt_str("scope")?
            .map(|s| {
                Scope::parse(s).ok_or_else(|| {
                    ToolError::InvalidArgs(format!(
                        "scope: {s:?} is not one of session, project, agent, global"
                    ))
                })
            })
            .transpose()
    }

    fn kind(&self) -> Result<Option<Kind>, ToolError> {
        self.opt_str("kind")?
            .map(|s| {
                Kind::parse(s).ok_or_else(|| {
                    ToolError::InvalidArgs(format!("kind: {s:?} is not semantic or episodic"))
                })
            })
            .transpose()
    }

    fn tags(&self) -> Result<Option<Vec<String>>, ToolError> {
        match self.get("tags") {
            None => Ok(None),
            Some(Value::Array(a)) => a
                .iter()
                .map(|t| {
                    t.as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| ToolError::InvalidArgs("tags: must be strings".into()))
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(_) => Err(ToolError::InvalidArgs(
                "tags: must be an array of strings".into(),
            )),
        }
    }
}
