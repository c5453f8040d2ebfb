//! `mcp_resources {server?}` and `mcp_read_resource {server, uri}`: the resources of the
//! servers that offer them (registered only when one does). Both are read-only and
//! parallel-safe; a server's texts reach the model as text, binary contents are written to the
//! spill directory (an image also as an image block).

use super::runtime::McpRuntime;
use super::server::{CallFailure, Server};
use super::tool::save_media;
use async_trait::async_trait;
use keel_protocol::{ContentBlock, ImageRef, ToolSchema};
use keel_tools::{ExecMode, Tool, ToolContext, ToolEffect, ToolError, ToolOutput};
use serde_json::{Value, json};
use std::sync::Arc;

/// Resources listed per server at most.
const MAX_LISTED: usize = 200;

/// What both tools share: the servers offering resources, by name.
#[derive(Clone)]
pub struct ResourceServers {
    servers: Vec<Arc<Server>>,
    runtime: Arc<McpRuntime>,
}

impl ResourceServers {
    /// Over `servers` (those that offer resources).
    pub fn new(servers: Vec<Arc<Server>>, runtime: Arc<McpRuntime>) -> Self {
        ResourceServers { servers, runtime }
    }

    fn names(&self) -> String {
        self.servers
            .iter()
            .map(|s| s.config.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn find(&self, name: &str) -> Result<Arc<Server>, ToolError> {
        self.servers
            .iter()
            .find(|s| s.config.name == name)
            .cloned()
            .ok_or_else(|| {
                ToolError::InvalidArgs(format!(
                    "no MCP server '{name}' offers resources (these do: {})",
                    self.names()
                ))
            })
    }
}

fn failure(server: &str, f: CallFailure) -> ToolError {
    let who = format!("MCP server '{server}'");
    match f {
        CallFailure::Timeout(d) => ToolError::Timeout {
            message: format!("{who} did not answer within {} s", d.as_secs_f64()),
            meta: None,
        },
        CallFailure::Cancelled => ToolError::Aborted(format!("{who}: cancelled")),
        CallFailure::Broken(why) => ToolError::Failed(format!("{who}: {why}")),
        CallFailure::Disabled(why) => ToolError::Failed(format!("{who} is not available: {why}")),
    }
}

/// `mcp_resources`.
pub struct ListResources(pub ResourceServers);

/// `mcp_read_resource`.
pub struct ReadResource(pub ResourceServers);

#[async_trait]
impl Tool for ListResources {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "mcp_resources".into(),
            description: format!(
                "List the resources MCP servers offer (servers: {}). Read one with mcp_read_resource.",
                self.0.names()
            ),
            parameters: json!({"type": "object", "properties": {
                "server": {"type": "string", "description": "One server; all when omitted."}
            }}),
        }
    }

    fn mode(&self) -> ExecMode {
        ExecMode::Parallel
    }

    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }

    async fn execute(&self, args: Value, _ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let servers = match args.get("server").and_then(Value::as_str) {
            Some(name) => vec![self.0.find(name)?],
            None => self.0.servers.clone(),
        };
        let mut out = Vec::new();
        for server in servers {
            let name = server.config.name.clone();
            let s = server.clone();
            let listed = self
                .0
                .runtime
                .spawn(async move { s.list_resources().await })
                .await
                .map_err(|e| ToolError::Failed(format!("the MCP task failed: {e}")))?;
            match listed {
                Ok(Value::Array(items)) => {
                    out.push(format!("{name}: {} resource(s)", items.len()));
                    for r in items.iter().take(MAX_LISTED) {
                        let field = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("");
                        let mime = match field("mimeType") {
                            "" => String::new(),
                            m => format!(" ({m})"),
                        };
                        let desc = match field("description") {
                            "" => String::new(),
                            d => format!(": {d}"),
                        };
                        out.push(format!("- {} {}{mime}{desc}", field("uri"), field("name")));
                    }
                    if items.len() > MAX_LISTED {
                        out.push(format!("- … {} more", items.len() - MAX_LISTED));
                    }
                }
                Ok(_) => out.push(format!("{name}: (no resource list)")),
                Err(f) => out.push(failure(&name, f).to_string()),
            }
        }
        Ok(ToolOutput::text(out.join("\n")))
    }
}

#[async_trait]
impl Tool for ReadResource {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "mcp_read_resource".into(),
            description: "Read one resource of an MCP server by its URI (from mcp_resources)."
                .into(),
            parameters: json!({"type": "object", "properties": {
                "server": {"type": "string"},
                "uri": {"type": "string"}
            }, "required": ["server", "uri"]}),
        }
    }

    fn mode(&self) -> ExecMode {
        ExecMode::Parallel
    }

    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }

    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let name = args.get("server").and_then(Value::as_str).unwrap_or("");
        let uri = args
            .get("uri")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let server = self.0.find(name)?;
        let s = server.clone();
        let u = uri.clone();
        let read = self
            .0
            .runtime
            .spawn(async move { s.read_resource(&u).await })
            .await
            .map_err(|e| ToolError::Failed(format!("the MCP task failed: {e}")))?
            .map_err(|f| failure(name, f))?;
        let mut content = Vec::new();
        let mut texts = Vec::new();
        for c in read
            .get("contents")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let curi = c.get("uri").and_then(Value::as_str).unwrap_or(&uri);
            let mime = c
                .get("mimeType")
                .and_then(Value::as_str)
                .unwrap_or("application/octet-stream");
            if let Some(t) = c.get("text").and_then(Value::as_str) {
                texts.push(format!("[resource {curi}]\n{t}"));
            } else if let Some(b) = c.get("blob").and_then(Value::as_str) {
                match save_media(ctx, "resource", mime, b) {
                    Ok(path) => {
                        if mime.starts_with("image/") {
                            content.push(ContentBlock::Image(ImageRef {
                                uri: path.clone(),
                                media_type: Some(mime.to_owned()),
                            }));
                        }
                        texts.push(format!("[resource {curi}: {mime} saved to {path}]"));
                    }
                    Err(e) => {
                        texts.push(format!("[resource {curi}: {mime} could not be saved: {e}]"))
                    }
                }
            }
        }
        if texts.is_empty() {
            texts.push(format!("[resource {uri}: no contents]"));
        }
        content.insert(0, ContentBlock::text(texts.join("\n")));
        Ok(ToolOutput {
            content,
            value: None,
        })
    }
}
