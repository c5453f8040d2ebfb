//! The MCP tools as one [`ToolSource`]: every ready server's tools, filtered by its
//! `enabled_tools` / `disabled_tools`, sorted by server then tool name, named
//! `mcp__<server>__<tool>` with collisions resolved over the whole set. A server's
//! `tools/list_changed` notification (or a restart) re-lists its tools on the MCP runtime; when
//! the resulting set differs, the source's generation moves and the agent takes the new set at
//! its next turn boundary (the next request header shows it). Each change is logged once as an
//! `mcp/server` event `{server, status: "tools-changed", tools}`, and a tool that cannot be
//! offered as `{server, status: "tool-skipped", tool, error}`.

use super::runtime::McpRuntime;
use super::server::Server;
use super::tool::{McpTool, assign_names};
use keel_agent::AgentSlot;
use keel_protocol::ToolSchema;
use keel_protocol::sync::Locked;
use keel_tools::{Tool, ToolSource};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

/// The event servers' outcomes and tool changes are logged as.
pub const SERVER_EVENT: &str = "mcp/server";

/// The MCP tools (see the module docs).
pub struct McpToolSource {
    runtime: Arc<McpRuntime>,
    servers: Vec<Arc<Server>>,
    state: Mutex<State>,
    generation: AtomicU64,
    /// The agent the change events are logged to (bound after install).
    pub agent: AgentSlot,
}

struct State {
    /// Each server's tools as it last listed them (unfiltered), in `servers` order.
    listed: Vec<Vec<rmcp::model::Tool>>,
    tools: Vec<Arc<dyn Tool>>,
    schemas: Vec<ToolSchema>,
}

impl std::fmt::Debug for McpToolSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpToolSource")
            .field("servers", &self.servers)
            .field("generation", &self.generation.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl McpToolSource {
    /// The tools `servers` listed at start (`listed[i]` is `servers[i]`'s), and the notices
    /// of tools left out, to log once the agent exists.
    pub fn new(
        runtime: Arc<McpRuntime>,
        servers: Vec<Arc<Server>>,
        listed: Vec<Vec<rmcp::model::Tool>>,
    ) -> (Arc<McpToolSource>, Vec<Value>) {
        let (tools, notices) = build(&runtime, &servers, &listed);
        let schemas = tools.iter().map(|t| t.schema()).collect();
        let source = Arc::new(McpToolSource {
            runtime,
            servers,
            state: Mutex::new(State {
                listed,
                tools,
                schemas,
            }),
            generation: AtomicU64::new(0),
            agent: AgentSlot::new(),
        });
        source.watch();
        (source, notices)
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.locked()
    }

    /// One task per server on the MCP runtime: on each change notice, re-list and update.
    /// The tasks hold the source weakly and end with the runtime.
    fn watch(self: &Arc<Self>) {
        for (i, server) in self.servers.iter().enumerate() {
            let weak: Weak<McpToolSource> = Arc::downgrade(self);
            let server = server.clone();
            self.runtime.spawn(async move {
                loop {
                    server.changed.notified().await;
                    let Some(tools) = server.tools().await else {
                        continue;
                    };
                    let Some(source) = weak.upgrade() else { break };
                    source.relisted(i, tools);
                }
            });
        }
    }

    /// `servers[i]` listed `tools`: rebuild the set, and move the generation when it differs.
    fn relisted(&self, i: usize, tools: Vec<rmcp::model::Tool>) {
        let (count, notices) = {
            let mut state = self.state();
            let Some(slot) = state.listed.get_mut(i) else {
                return;
            };
            *slot = tools;
            let (tools, notices) = build(&self.runtime, &self.servers, &state.listed);
            let schemas: Vec<ToolSchema> = tools.iter().map(|t| t.schema()).collect();
            if schemas == state.schemas {
                return;
            }
            let count = state.listed[i].len();
            state.tools = tools;
            state.schemas = schemas;
            self.generation.fetch_add(1, Ordering::Release);
            (count, notices)
        };
        if let Some(agent) = self.agent.get() {
            let name = &self.servers[i].config.name;
            let changed = json!({"server": name, "status": "tools-changed", "tools": count});
            for event in std::iter::once(changed).chain(notices) {
                let _ = agent.push_ignorable(SERVER_EVENT, event);
            }
        }
    }
}

impl ToolSource for McpToolSource {
    fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.state().tools.clone()
    }
}

/// The keel tools of `listed` (see the module docs), and a notice for each one left out.
fn build(
    runtime: &Arc<McpRuntime>,
    servers: &[Arc<Server>],
    listed: &[Vec<rmcp::model::Tool>],
) -> (Vec<Arc<dyn Tool>>, Vec<Value>) {
    let mut offered: Vec<(&Arc<Server>, &rmcp::model::Tool)> = Vec::new();
    for (server, tools) in servers.iter().zip(listed) {
        let mut tools: Vec<&rmcp::model::Tool> = tools
            .iter()
            .filter(|t| server.config.allows(&t.name))
            .collect();
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        offered.extend(tools.into_iter().map(|t| (server, t)));
    }
    let pairs: Vec<(String, String)> = offered
        .iter()
        .map(|(s, t)| (s.config.name.clone(), t.name.to_string()))
        .collect();
    let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
    let mut notices = Vec::new();
    for ((server, tool), name) in offered.into_iter().zip(assign_names(&pairs)) {
        match McpTool::new(server.clone(), runtime.clone(), tool, name) {
            Ok(t) => tools.push(Arc::new(t)),
            Err(why) => notices.push(json!({
                "server": server.config.name, "status": "tool-skipped", "tool": tool.name, "error": why.to_string(),
            })),
        }
    }
    (tools, notices)
}
