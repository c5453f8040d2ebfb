//! keel's MCP client as the official conformance suite (`@modelcontextprotocol/conformance`)
//! drives a client: `keel-mcp-conformance-client URL`, the scenario in
//! `MCP_CONFORMANCE_SCENARIO` and the protocol version to speak (when the suite gives one) in
//! `MCP_CONFORMANCE_PROTOCOL_VERSION`. It connects through keel's own client (the MCP runtime
//! and [`Server`], exactly as the `mcp` plugin does), lists the tools, calls each with
//! arguments made from its schema, prints what it got as JSON lines, and stops. Exit 1 when the
//! server cannot be used. Used by `tests/conformance.rs`; not installed anywhere.

use keel_mcp::client::runtime::McpRuntime;
use keel_mcp::client::server::Server;
use keel_mcp::config::{ServerConfig, Transport};
use keel_tools::subprocess::{SubprocessConfig, SubprocessService};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// A value for a property of `schema` (what a model would fill in).
fn sample(schema: &Value) -> Value {
    match schema.get("type").and_then(Value::as_str) {
        Some("number") => json!(2.5),
        Some("integer") => json!(2),
        Some("boolean") => json!(true),
        Some("array") => json!([]),
        Some("object") => json!({}),
        _ => json!("keel"),
    }
}

/// Arguments for a tool with `input` as its input schema: its required properties.
fn arguments(input: &Map<String, Value>) -> Map<String, Value> {
    let required: Vec<&str> = input
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    input
        .get("properties")
        .and_then(Value::as_object)
        .map(|props| {
            props
                .iter()
                .filter(|(k, _)| required.contains(&k.as_str()))
                .map(|(k, s)| (k.clone(), sample(s)))
                .collect()
        })
        .unwrap_or_default()
}

fn say(line: &Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
}

fn run(url: String) -> Result<(), String> {
    let version = std::env::var("MCP_CONFORMANCE_PROTOCOL_VERSION")
        .ok()
        .filter(|v| !v.is_empty());
    let config = ServerConfig {
        name: "conformance".into(),
        transport: Transport::Http {
            url,
            headers: BTreeMap::new(),
            bearer_token_env_var: None,
        },
        enabled: true,
        startup_timeout: Duration::from_secs(20),
        tool_timeout: Duration::from_secs(20),
        enabled_tools: None,
        disabled_tools: Vec::new(),
        origin: "conformance".into(),
        protocol_version: version,
    };
    let rt = McpRuntime::start().map_err(|e| e.to_string())?;
    let dir = std::env::temp_dir();
    let subprocess = SubprocessService::new(SubprocessConfig::from_process_env(dir.clone()));
    let server = Arc::new(Server::new(config, subprocess, dir));
    rt.wait({
        let server = server.clone();
        async move {
            let tools = server.start().await.map_err(|f| f.to_string())?;
            say(&json!({"tools": tools.iter().map(|t| t.name.to_string()).collect::<Vec<_>>()}));
            for tool in &tools {
                let args = arguments(&tool.input_schema);
                match server
                    .call(&tool.name, Some(args), CancellationToken::new())
                    .await
                {
                    Ok(result) => say(&json!({"tool": tool.name, "result": result})),
                    Err(e) => say(&json!({"tool": tool.name, "error": format!("{e:?}")})),
                }
            }
            server.stop().await;
            Ok::<_, String>(())
        }
    })
    .ok_or("the MCP runtime stopped")?
}

fn main() -> std::process::ExitCode {
    let Some(url) = std::env::args().nth(1) else {
        let _ = writeln!(
            std::io::stderr(),
            "usage: keel-mcp-conformance-client URL (MCP_CONFORMANCE_SCENARIO in the environment)"
        );
        return std::process::ExitCode::from(2);
    };
    match run(url) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "keel-mcp-conformance-client: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
