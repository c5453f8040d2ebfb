//! The `mcp` plugin (on by default; it does nothing without configured servers, so the default
//! request does not change). At install it reads `[mcp_servers.*]`, the project's
//! `.mcp.json` and the servers of the installed plugin bundles ([`crate::bundles`]), starts
//! every enabled server in parallel on the MCP runtime, waits for each at most its startup
//! timeout, and offers the tools of those that answered as one tool source
//! ([`McpToolSource`]: sorted by server and tool name so requests stay prefix-stable, re-read
//! at turn boundaries after `tools/list_changed`), then `mcp_resources` and
//! `mcp_read_resource` when any of them offers resources. Each server's outcome is logged once
//! as an ignorable `mcp/server` event: `{server, transport, origin, status: "ready", tools}` or
//! `{server, transport, origin, status: "failed", error}` — front ends show failures.

use crate::client::prompts::PromptCommands;
use crate::client::resources::{ListResources, ReadResource, ResourceServers};
use crate::client::runtime::McpRuntime;
use crate::client::server::Server;
use crate::client::source::McpToolSource;
use crate::config::{self, ServerConfig, TomlServer};
use keel_agent::plugin::{Bundle, InstallContext, Plugin, PluginError, PluginId};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The plugin id.
pub const ID: PluginId = keel_agent::plugin_id!("mcp");

pub use crate::client::source::SERVER_EVENT;

/// The `mcp` plugin.
#[derive(Debug, Clone, Copy, Default)]
pub struct McpPlugin;

fn setup(what: String) -> PluginError {
    PluginError::Setup {
        plugin: ID.as_str(),
        what,
        source: None,
    }
}

/// The servers the merged configuration (`settings`, the `mcp_servers` section) and the
/// project's `.mcp.json` name (`None`: an untrusted workspace, whose file is not read), with
/// the problems of those left out.
pub fn configured(
    settings: &Value,
    project: Option<&std::path::Path>,
) -> (Vec<ServerConfig>, Vec<config::ConfigProblem>) {
    configured_with_bundles(settings, project, &[])
}

/// [`configured`], then the servers of the user's plugin `bundles`
/// ([`crate::bundles::add_bundle_servers`]: read whatever the workspace's trust, renamed
/// `BUNDLE_SERVER` when their name is taken).
pub fn configured_with_bundles(
    settings: &Value,
    project: Option<&std::path::Path>,
    bundles: &[Bundle],
) -> (Vec<ServerConfig>, Vec<config::ConfigProblem>) {
    let toml: BTreeMap<String, TomlServer> = settings
        .get("mcp_servers")
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default();
    let env = |name: &str| std::env::var(name).ok();
    let (mut servers, mut problems) =
        config::resolve(&toml, &|_| "configuration".to_owned(), project, &env);
    crate::bundles::add_bundle_servers(&mut servers, &mut problems, bundles, &env);
    (servers, problems)
}

impl Plugin for McpPlugin {
    fn id(&self) -> PluginId {
        ID
    }

    fn description(&self) -> &'static str {
        "MCP client: the tools of every configured Model Context Protocol server ([mcp_servers], .mcp.json) as mcp__<server>__<tool>"
    }

    fn enabled_by_default(&self) -> bool {
        true
    }

    fn presenter(&self) -> Option<keel_protocol::present::MakePresenter> {
        Some(crate::presenter::presenter())
    }

    fn install(&self, ctx: &mut InstallContext, _config: Value) -> Result<(), PluginError> {
        // A workspace's own `.mcp.json` starts nothing until the user trusts it, nor once it
        // changed since then.
        let project = ctx
            .trusts_file(&ctx.cwd.join(".mcp.json"))
            .then_some(ctx.cwd.as_path());
        // The user's installed bundles' servers start whatever the workspace's trust.
        let (servers, problems) = configured_with_bundles(&ctx.settings, project, &ctx.bundles);
        let servers: Vec<ServerConfig> = servers.into_iter().filter(|s| s.enabled).collect();
        let mut events: Vec<Value> = problems
            .iter()
            .map(|p| {
                json!({"server": p.server, "origin": p.origin, "status": "failed", "error": p.message})
            })
            .collect();
        if servers.is_empty() {
            push_events(ctx, events);
            return Ok(());
        }
        let runtime = Arc::new(
            McpRuntime::start().map_err(|e| setup(format!("cannot start the MCP runtime: {e}")))?,
        );
        let servers: Vec<Arc<Server>> = servers
            .into_iter()
            .map(|c| {
                let tokens = crate::auth::TokenStore::new(&ctx.keel_home);
                Arc::new(Server::new(c, ctx.subprocess.clone(), ctx.cwd.clone()).with_oauth(tokens))
            })
            .collect();
        // Start every server at once; each is bounded by its own startup timeout.
        let started = runtime
            .wait({
                let servers = servers.clone();
                async move {
                    let starts = servers.iter().map(|s| s.start());
                    futures::future::join_all(starts).await
                }
            })
            .ok_or_else(|| setup("the MCP runtime stopped while servers started".into()))?;
        let mut ready: Vec<Arc<Server>> = Vec::new();
        let mut listed: Vec<Vec<rmcp::model::Tool>> = Vec::new();
        for (server, outcome) in servers.iter().zip(started) {
            let c = &server.config;
            match outcome {
                Ok(tools) => {
                    events.push(json!({
                        "server": c.name, "transport": c.transport.describe(), "origin": c.origin,
                        "status": "ready", "tools": tools.iter().filter(|t| c.allows(&t.name)).count(),
                    }));
                    ready.push(server.clone());
                    listed.push(tools);
                }
                Err(f) => events.push(json!({
                    "server": c.name, "transport": c.transport.describe(), "origin": c.origin,
                    "status": "failed", "error": f.reason, "stderrTail": f.stderr_tail,
                })),
            }
        }
        if !ready.is_empty() {
            ctx.commands.push(Arc::new(PromptCommands::new(
                runtime.clone(),
                ready.clone(),
            )));
        }
        let (source, skipped) = McpToolSource::new(runtime.clone(), ready, listed);
        events.extend(skipped);
        ctx.tool_sources.push(source.clone());
        ctx.on_agent.push(Box::new(move |agent| {
            source.agent.bind(agent);
        }));
        let with_resources: Vec<Arc<Server>> = servers
            .iter()
            .filter(|s| s.offers_resources())
            .cloned()
            .collect();
        if !with_resources.is_empty() {
            let shared = ResourceServers::new(with_resources, runtime.clone());
            ctx.tools.push(Arc::new(ListResources(shared.clone())));
            ctx.tools.push(Arc::new(ReadResource(shared)));
        }
        // The runtime lives as long as the tools that use it (and the agent holding them).
        push_events(ctx, events);
        Ok(())
    }
}

fn push_events(ctx: &mut InstallContext, events: Vec<Value>) {
    if events.is_empty() {
        return;
    }
    ctx.on_agent.push(Box::new(move |agent| {
        for e in events {
            let _ = agent.push_ignorable(SERVER_EVENT, e);
        }
    }));
}
