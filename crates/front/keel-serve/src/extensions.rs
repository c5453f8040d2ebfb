//! A workspace's plugins and MCP servers over the API, each switchable for that workspace (the
//! web app's plugins page): `GET /api/v1/plugins?cwd=DIR` lists the `[[plugins]]` rows (id,
//! the plugin used, what it does, on or off, the layer that decided) and the MCP servers (name,
//! transport, on or off, where configured, a problem) and the skills the agents are offered
//! (on with the `skills` row); `POST /api/v1/plugins {"cwd", "kind":
//! "plugin" | "mcp", "name", "enabled"}` records the switch in the user's configuration
//! (`[projects."<root>"]`, keel_host::switches), never in the repository's files. Like a trust
//! decision, it applies to sessions created or resumed from then on.

use crate::api::{parse, source_error, workspace};
use crate::{ApiError, App};
use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Query, State};
use keel_host::switches::{Extension, Extensions, SwitchKind};
use serde::Deserialize;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;

/// The query of `GET /api/v1/plugins`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PluginsQuery {
    cwd: PathBuf,
}

/// The body of `POST /api/v1/plugins`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SwitchBody {
    cwd: PathBuf,
    kind: String,
    name: String,
    enabled: bool,
}

/// `GET /api/v1/plugins?cwd=DIR`.
pub(crate) async fn list(
    State(app): State<Arc<App>>,
    query: Result<Query<PluginsQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let cwd = workspace(&query.cwd)?;
    let source = app.source.clone();
    let found = tokio::task::spawn_blocking(move || source.extensions(&cwd))
        .await
        .map_err(|e| ApiError::internal(format!("listing the plugins failed: {e}")))?
        .map_err(source_error)?;
    Ok(Json(describe(&found)))
}

/// `POST /api/v1/plugins`: the switch recorded; answers what `GET` answers now, plus the file
/// it went to.
pub(crate) async fn switch(
    State(app): State<Arc<App>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let body: SwitchBody = parse(body)?;
    let kind = match body.kind.as_str() {
        "plugin" => SwitchKind::Plugin,
        "mcp" => SwitchKind::McpServer,
        other => {
            return Err(ApiError::bad_request(format!(
                "kind: {other:?} is neither \"plugin\" nor \"mcp\""
            )));
        }
    };
    let cwd = workspace(&body.cwd)?;
    let source = app.source.clone();
    let (file, found) = tokio::task::spawn_blocking(move || {
        let found = source.extensions(&cwd)?;
        let listed = match kind {
            SwitchKind::Plugin => &found.plugins,
            SwitchKind::McpServer => &found.mcp_servers,
        };
        match listed.iter().find(|e| e.name == body.name) {
            None => return Ok(Err(ApiError::not_found(format!(
                "the workspace {} has no {} {:?} (GET /api/v1/plugins lists them)",
                found.root.display(),
                if kind == SwitchKind::Plugin { "plugin row" } else { "MCP server" },
                body.name
            )))),
            Some(e) if !e.switchable => return Ok(Err(ApiError::bad_request(format!(
                "the MCP server {:?} is configured in {}, which keel does not rewrite: edit that file",
                e.name, e.layer
            )))),
            Some(_) => {}
        }
        let (_, file) = source.switch(&cwd, kind, &body.name, body.enabled)?;
        Ok::<_, keel_host::SourceError>(Ok((file, source.extensions(&cwd)?)))
    })
    .await
    .map_err(|e| ApiError::internal(format!("recording the switch failed: {e}")))?
    .map_err(source_error)??;
    let mut answer = describe(&found);
    answer["recordedIn"] = json!(file);
    Ok(Json(answer))
}

/// The listing as JSON: `{root, plugins: [Row…], mcpServers: [Row…], skills: [Row…]}`, a row
/// being `{name,
/// what, description, enabled, layer, problem, switchable}`.
fn describe(found: &Extensions) -> Value {
    let row = |e: &Extension| {
        json!({"name": e.name, "what": e.what, "description": e.description,
            "enabled": e.enabled, "layer": e.layer, "problem": e.problem,
            "switchable": e.switchable})
    };
    json!({
        "root": found.root,
        "plugins": found.plugins.iter().map(row).collect::<Vec<_>>(),
        "mcpServers": found.mcp_servers.iter().map(row).collect::<Vec<_>>(),
        "skills": found.skills.iter().map(row).collect::<Vec<_>>(),
    })
}
