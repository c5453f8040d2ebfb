//! A server's tool as a keel tool: its name (`mcp__<server>__<tool>`), its schema (passed
//! through, normalised only where the wire needs it), scheduling from its annotations, and its
//! result mapped to keel content.
//!
//! Names: Claude Code's convention, sanitised to the characters providers accept (`a-zA-Z0-9_-`,
//! anything else becomes `_`) and to 64 characters (a longer name keeps its first 55 and gets
//! `_` + 8 hex digits of a hash of the full name); names that still collide get `_2`, `_3`… in
//! sorted order of the servers' own names, so the same configuration always gives the same names.
//!
//! Schemas: passed through as the server gives them, except (1) `$schema` is removed (a
//! meta-schema URI, noise on every request) and (2) an object schema without `properties` gets
//! `"properties": {}` (chat-completions servers, DeepSeek's among them, reject a bare
//! `{"type":"object"}` for function parameters). A schema that is not an object schema cannot be
//! offered: that tool is skipped with a notice.
//!
//! Scheduling: a tool annotated `readOnlyHint: true` is parallel-safe and read-only (no approval
//! under `workspace-write`, allowed in plan mode); any other runs alone and follows the approval
//! policy like `bash`.

use super::runtime::McpRuntime;
use super::server::{CallFailure, Server};
use async_trait::async_trait;
use keel_protocol::{ContentBlock, ImageRef, ToolSchema};
use keel_tools::{ExecMode, Tool, ToolContext, ToolEffect, ToolError, ToolOutput};
use serde_json::{Map, Value, json};
use std::collections::BTreeSet;
use std::sync::Arc;

/// Longest tool name providers accept.
pub const MAX_NAME: usize = 64;
/// Characters of a tool description sent to the model.
const MAX_DESCRIPTION: usize = 2048;

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn fnv(s: &str) -> u32 {
    s.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// The keel name of `server`'s tool `tool`, before collisions are resolved.
pub fn wire_name(server: &str, tool: &str) -> String {
    let full = format!("mcp__{}__{}", sanitize(server), sanitize(tool));
    if full.len() <= MAX_NAME {
        return full;
    }
    format!(
        "{}_{:08x}",
        &full[..MAX_NAME - 9],
        fnv(&format!("{server}\0{tool}"))
    )
}

/// Keel names for `(server, tool)` pairs in the order given (already sorted by the caller),
/// collisions resolved with `_2`, `_3`… (kept within [`MAX_NAME`]).
pub fn assign_names(pairs: &[(String, String)]) -> Vec<String> {
    let mut taken = BTreeSet::new();
    pairs
        .iter()
        .map(|(server, tool)| {
            let base = wire_name(server, tool);
            let mut name = base.clone();
            let mut n = 2;
            while taken.contains(&name) {
                let suffix = format!("_{n}");
                let keep = base.len().min(MAX_NAME - suffix.len());
                name = format!("{}{suffix}", &base[..keep]);
                n += 1;
            }
            taken.insert(name.clone());
            name
        })
        .collect()
}

/// Why a server tool's input schema cannot be offered to the model.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SchemaError {
    /// Its `type` is not `"object"`.
    #[error("its input schema has type {0}, not \"object\"")]
    NotAnObject(Value),
    /// Its `properties` is not an object.
    #[error("its input schema's `properties` is not an object")]
    PropertiesNotAnObject,
    /// It is outside the schema subset keel offers.
    #[error("its input schema cannot be offered: {0}")]
    Unsupported(keel_tools::schema::SchemaDefect),
}

/// The server's input schema as offered to the model (see the module docs), or why it
/// cannot be offered.
pub fn normalise_schema(schema: &Map<String, Value>) -> Result<Value, SchemaError> {
    let mut s = schema.clone();
    s.remove("$schema");
    match s.get("type") {
        Some(Value::String(t)) if t == "object" => {}
        None => {
            s.insert("type".into(), json!("object"));
        }
        Some(other) => return Err(SchemaError::NotAnObject(other.clone())),
    }
    match s.get("properties") {
        None => {
            s.insert("properties".into(), json!({}));
        }
        Some(Value::Object(_)) => {}
        Some(_) => return Err(SchemaError::PropertiesNotAnObject),
    }
    Ok(Value::Object(s))
}

/// One server tool as a keel tool.
pub struct McpTool {
    server: Arc<Server>,
    runtime: Arc<McpRuntime>,
    tool: String,
    schema: ToolSchema,
    read_only: bool,
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool")
            .field("name", &self.schema.name)
            .finish_non_exhaustive()
    }
}

impl McpTool {
    /// `tool` of `server` under the keel name `name`; `Err` says why it cannot be offered.
    pub fn new(
        server: Arc<Server>,
        runtime: Arc<McpRuntime>,
        tool: &rmcp::model::Tool,
        name: String,
    ) -> Result<McpTool, SchemaError> {
        let parameters = normalise_schema(&tool.input_schema)?;
        keel_tools::schema::check_foreign_schema(&parameters).map_err(SchemaError::Unsupported)?;
        let mut description = format!("[MCP server {}] ", server.config.name);
        let own = tool.description.as_deref().unwrap_or("");
        match own.char_indices().nth(MAX_DESCRIPTION) {
            Some((i, _)) => {
                description.push_str(&own[..i]);
                description.push('…');
            }
            None => description.push_str(own),
        }
        let read_only = tool
            .annotations
            .as_ref()
            .and_then(|a| a.read_only_hint)
            .unwrap_or(false);
        Ok(McpTool {
            server,
            runtime,
            tool: tool.name.to_string(),
            schema: ToolSchema {
                name,
                description,
                parameters,
            },
            read_only,
        })
    }
}

#[async_trait]
impl Tool for McpTool {
    fn schema(&self) -> ToolSchema {
        self.schema.clone()
    }

    fn mode(&self) -> ExecMode {
        if self.read_only {
            ExecMode::Parallel
        } else {
            ExecMode::Exclusive
        }
    }

    fn effect(&self) -> ToolEffect {
        if self.read_only {
            ToolEffect::ReadOnly
        } else {
            ToolEffect::Executes
        }
    }

    fn foreign_schema(&self) -> bool {
        true
    }

    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let arguments = match args {
            Value::Object(m) => Some(m),
            Value::Null => None,
            other => {
                return Err(ToolError::InvalidArgs(format!(
                    "arguments must be an object, not {other}"
                )));
            }
        };
        let server = self.server.clone();
        let tool = self.tool.clone();
        let cancel = ctx.cancel.child_token();
        let guard = cancel.clone().drop_guard();
        // Counted as running before it is sent: an elicitation may come at once.
        let running = self.server.elicit.running();
        let call = self
            .runtime
            .spawn(async move { server.call(&tool, arguments, cancel).await });
        // The server may ask the person for input meanwhile (crate::elicit).
        let (outcome, notes) =
            crate::elicit::serve_while(call, &self.server.elicit, &self.server.config.name, ctx)
                .await;
        drop(running);
        let outcome =
            outcome.map_err(|e| ToolError::Failed(format!("the MCP call task failed: {e}")))?;
        drop(guard);
        let who = format!("MCP server '{}'", self.server.config.name);
        match outcome {
            Ok(result) => map_result(&result, ctx, &who).map(|mut out| {
                out.content
                    .extend(notes.into_iter().map(ContentBlock::text));
                out
            }),
            Err(CallFailure::Timeout(d)) => Err(ToolError::Timeout {
                message: format!(
                    "{who}: {} did not answer within {} s (tool_timeout_sec); the server was told to cancel it",
                    self.tool,
                    d.as_secs_f64()
                ),
                meta: None,
            }),
            Err(CallFailure::Cancelled) => Err(ToolError::Aborted(format!(
                "{who}: the call was cancelled (the server was told)"
            ))),
            Err(CallFailure::Broken(why)) => Err(ToolError::Failed(format!("{who}: {why}"))),
            Err(CallFailure::Disabled(why)) => {
                Err(ToolError::Failed(format!("{who} is not available: {why}")))
            }
        }
    }
}

/// A `tools/call` result (as JSON) in keel terms: text blocks for text, embedded text
/// resources, resource links and structured content; image blocks for images (written to the
/// spill directory: the log never holds inline bytes); `isError` as an error result.
fn map_result(result: &Value, ctx: &ToolContext<'_>, who: &str) -> Result<ToolOutput, ToolError> {
    let mut content = Vec::new();
    let mut texts = Vec::new();
    for block in result
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let kind = block.get("type").and_then(Value::as_str).unwrap_or("");
        match kind {
            "text" => texts.push(
                block
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
            ),
            "image" | "audio" => {
                let mime = block
                    .get("mimeType")
                    .and_then(Value::as_str)
                    .unwrap_or("application/octet-stream");
                let data = block.get("data").and_then(Value::as_str).unwrap_or("");
                match save_media(ctx, kind, mime, data) {
                    Ok(path) if kind == "image" => {
                        flush_text(&mut texts, &mut content);
                        content.push(ContentBlock::Image(ImageRef {
                            uri: path.clone(),
                            media_type: Some(mime.to_owned()),
                        }));
                        texts.push(format!("[image {mime} saved to {path}]"));
                    }
                    Ok(path) => texts.push(format!("[{kind} {mime} saved to {path}]")),
                    Err(e) => texts.push(format!("[{kind} {mime} could not be saved: {e}]")),
                }
            }
            "resource" => {
                let r = block.get("resource").unwrap_or(&Value::Null);
                let uri = r.get("uri").and_then(Value::as_str).unwrap_or("?");
                match r.get("text").and_then(Value::as_str) {
                    Some(t) => texts.push(format!("[resource {uri}]\n{t}")),
                    None => texts.push(format!(
                        "[resource {uri}: binary ({}), not shown]",
                        r.get("mimeType")
                            .and_then(Value::as_str)
                            .unwrap_or("unknown type")
                    )),
                }
            }
            "resource_link" => {
                let uri = block.get("uri").and_then(Value::as_str).unwrap_or("?");
                let name = block.get("name").and_then(Value::as_str).unwrap_or("");
                let desc = block
                    .get("description")
                    .and_then(Value::as_str)
                    .map(|d| format!(": {d}"))
                    .unwrap_or_default();
                texts.push(format!("[resource link {uri} {name}{desc}]"));
            }
            other => texts.push(format!("[{other} content not shown]")),
        }
    }
    let structured = result.get("structuredContent").filter(|v| !v.is_null());
    // The server's content is its rendering of the result: shown once, as sent. Structured
    // content is shown only when the server sent no content at all (servers mirror it in text,
    // pretty-printed or as the raw value, so matching it against the text cannot tell).
    let rendered = !texts.is_empty() || !content.is_empty();
    let compact = structured.map(|s| serde_json::to_string(s).unwrap_or_default());
    if let (false, Some(json)) = (rendered, &compact) {
        texts.push(json.clone());
    }
    let is_error = result.get("isError").and_then(Value::as_bool) == Some(true);
    if is_error {
        let text = texts.join("\n");
        return Err(ToolError::Failed(if text.is_empty() {
            format!("{who} reported an error without a message")
        } else {
            text
        }));
    }
    flush_text(&mut texts, &mut content);
    if content.is_empty() {
        content.push(ContentBlock::text("(no output)"));
    }
    Ok(ToolOutput {
        content,
        value: compact.map(|json| structured_meta(ctx, structured, json)),
    })
}

/// The structured content as the result's `meta` (it goes to the session log): the value
/// itself when it is no longer than the spill threshold, else the path of a spill file holding
/// it and its size, so a large result is not stored whole in the log.
fn structured_meta(ctx: &ToolContext<'_>, structured: Option<&Value>, json: String) -> Value {
    if json.len() <= ctx.spill.threshold {
        return json!({ "structuredContent": structured });
    }
    match ctx.spill.save(&json, "mcp-structured") {
        Ok(path) => json!({
            "structuredContentFile": path.display().to_string(),
            "structuredContentBytes": json.len(),
        }),
        Err(e) => json!({
            "structuredContentBytes": json.len(),
            "structuredContentError": format!("not saved: {e}"),
        }),
    }
}

fn flush_text(texts: &mut Vec<String>, content: &mut Vec<ContentBlock>) {
    if !texts.is_empty() {
        content.push(ContentBlock::text(texts.join("\n")));
        texts.clear();
    }
}

/// Why a server's media could not be saved ([`save_media`]).
#[derive(Debug, thiserror::Error)]
pub(crate) enum MediaError {
    /// The data is not base64.
    #[error("not base64: {0}")]
    NotBase64(#[from] base64::DecodeError),
    /// The spill directory or the file could not be written.
    #[error(transparent)]
    Write(#[from] std::io::Error),
}

/// Write base64 `data` to a private file in the spill directory; its path.
pub(crate) fn save_media(
    ctx: &ToolContext<'_>,
    kind: &str,
    mime: &str,
    data: &str,
) -> Result<String, MediaError> {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD.decode(data.trim())?;
    let ext = mime.rsplit('/').next().unwrap_or("bin");
    let ext: String = ext
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(8)
        .collect();
    let dir = &ctx.spill.dir;
    std::fs::create_dir_all(dir)?;
    let path = dir.join(format!("mcp-{kind}-{}.{ext}", uuid::Uuid::new_v4()));
    std::fs::write(&path, bytes)?;
    Ok(path.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_sanitised_bounded_and_unique() {
        assert_eq!(wire_name("files", "read_file"), "mcp__files__read_file");
        assert_eq!(wire_name("my server", "do it!"), "mcp__my_server__do_it_");
        let long = wire_name("s", &"x".repeat(200));
        assert_eq!(long.len(), MAX_NAME);
        assert_ne!(
            long,
            wire_name("s", &"x".repeat(201)),
            "hash tells them apart"
        );
        let pairs: Vec<(String, String)> = [("a", "b c"), ("a", "b_c"), ("a", "b.c")]
            .iter()
            .map(|(s, t)| ((*s).to_owned(), (*t).to_owned()))
            .collect();
        assert_eq!(
            assign_names(&pairs),
            ["mcp__a__b_c", "mcp__a__b_c_2", "mcp__a__b_c_3"]
        );
    }

    #[test]
    fn schemas_pass_through_with_two_normalisations() {
        let s: Map<String, Value> = serde_json::from_value(json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {"q": {"type": "string", "format": "uri", "anyOf": [{"minLength": 1}]}},
            "additionalProperties": false
        }))
        .unwrap();
        let n = normalise_schema(&s).unwrap();
        assert!(n.get("$schema").is_none());
        assert_eq!(
            n["properties"]["q"]["anyOf"][0]["minLength"], 1,
            "kept as given"
        );
        let bare: Map<String, Value> = serde_json::from_value(json!({"type": "object"})).unwrap();
        assert_eq!(
            normalise_schema(&bare).unwrap(),
            json!({"type": "object", "properties": {}})
        );
        let wrong: Map<String, Value> = serde_json::from_value(json!({"type": "array"})).unwrap();
        assert!(
            normalise_schema(&wrong)
                .unwrap_err()
                .to_string()
                .contains("not \"object\"")
        );
    }
}
