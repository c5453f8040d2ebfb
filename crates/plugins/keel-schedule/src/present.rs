//! The `present` plugin: dsh 0.1.5's `present {files: [{path, description?}]}`. The model
//! hands the person files of the workspace; each call is logged as `present/files` and every
//! front end lists the turn's files when the turn ends (keel run on stderr after the answer,
//! `--json` as the event's line; the TUI and ACP from the session view's `Presented` cell).

pub use crate::presenter::{PRESENT_EVENT, presented};
use async_trait::async_trait;
use keel_agent::plugin::{InstallContext, Plugin, PluginError, PluginId};
use keel_agent::seams::{ChildBuild, ChildSetup};
use keel_protocol::ToolSchema;
use keel_tools::{Access, Tool, ToolContext, ToolEffect, ToolError, ToolOutput};
use serde_json::{Value, json};
use std::sync::Arc;

/// The plugin's id (`[[plugins]] id = "present"`).
pub const PRESENT_ID: PluginId = keel_agent::plugin_id!("present");
/// Files one call may present.
pub const MAX_FILES: usize = 50;
/// Characters of a file's description.
pub const MAX_DESCRIPTION_CHARS: usize = 500;

/// `present {files}`.
pub struct PresentTool;

#[async_trait]
impl Tool for PresentTool {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "present".into(),
            description: "Show the user files of the workspace you made or changed; listed when \
                          the turn ends."
                .into(),
            parameters: json!({"type":"object","properties":{
                "files":{"type":"array","items":{"type":"object","properties":{
                    "path":{"type":"string"},
                    "description":{"type":"string"}
                },"required":["path"]}}
            },"required":["files"]}),
        }
    }
    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }
    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let files = checked_files(&args, ctx)?;
        let agent = keel_agent::calling_agent(ctx)
            .ok_or_else(|| ToolError::Failed("present runs only inside an agent".into()))?;
        let n = files.len();
        agent
            .push_ignorable(PRESENT_EVENT, json!({ "files": files }))
            .map_err(|e| ToolError::Failed(format!("the files could not be logged: {e}")))?;
        Ok(ToolOutput::text(format!(
            "Presented {n} file{}; the user sees them listed when this turn ends.",
            if n == 1 { "" } else { "s" }
        )))
    }
}

/// The `files` argument checked: each path exists inside the workspace (a tool error naming
/// the entry and its path otherwise), as `{path, description?}` with the path shown relative
/// to the working directory.
fn checked_files(args: &Value, ctx: &ToolContext<'_>) -> Result<Vec<Value>, ToolError> {
    let invalid = |m: String| ToolError::InvalidArgs(m);
    let Some(files) = args.get("files").and_then(Value::as_array) else {
        return Err(invalid(
            "files must be an array of {path, description}".into(),
        ));
    };
    if files.is_empty() {
        return Err(invalid("files is empty: name at least one file".into()));
    }
    if files.len() > MAX_FILES {
        return Err(invalid(format!(
            "files has {} entries; at most {MAX_FILES}",
            files.len()
        )));
    }
    let ws = ctx.workspace;
    let mut out = Vec::with_capacity(files.len());
    for (i, file) in files.iter().enumerate() {
        let raw = file
            .get("path")
            .and_then(Value::as_str)
            .map(str::trim)
            .unwrap_or_default();
        if raw.is_empty() {
            return Err(invalid(format!("files[{i}].path is empty")));
        }
        let real = ws.resolve(raw, Access::Read).map_err(|e| match e {
            ToolError::Io { .. } => invalid(format!(
                "files[{i}].path '{raw}' does not exist in the workspace"
            )),
            ToolError::Denied(m) | ToolError::InvalidArgs(m) => {
                invalid(format!("files[{i}].path '{raw}': {m}"))
            }
            other => other,
        })?;
        if !ws.roots().iter().any(|r| real.starts_with(r)) {
            return Err(invalid(format!(
                "files[{i}].path '{raw}' is outside the workspace ({})",
                real.display()
            )));
        }
        if !real.exists() {
            return Err(invalid(format!(
                "files[{i}].path '{raw}' does not exist in the workspace"
            )));
        }
        let mut entry = json!({ "path": ws.display(&real) });
        if let Some(d) = file
            .get("description")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|d| !d.is_empty())
        {
            entry["description"] = json!(keel_protocol::text::one_line(d, MAX_DESCRIPTION_CHARS));
        }
        out.push(entry);
    }
    Ok(out)
}

/// The `present` plugin (off by default: one more schema in every request).
#[derive(Debug, Clone, Copy, Default)]
pub struct PresentPlugin;

impl Plugin for PresentPlugin {
    fn id(&self) -> PluginId {
        PRESENT_ID
    }
    fn description(&self) -> &'static str {
        "present: the model lists workspace files for the user at the end of the turn"
    }
    fn enabled_by_default(&self) -> bool {
        false
    }

    fn presenter(&self) -> Option<keel_protocol::present::MakePresenter> {
        Some(crate::presenter::present())
    }
    fn install(&self, ctx: &mut InstallContext, config: Value) -> Result<(), PluginError> {
        let _: crate::NoConfig = keel_agent::plugin::plugin_config(PRESENT_ID, config)?;
        ctx.tools.push(Arc::new(PresentTool));
        // A child's files would be listed in its own log, where nobody sees them.
        ctx.hooks
            .subagent_build
            .push(Arc::new(|_: &ChildBuild, setup: &mut ChildSetup| {
                setup.withheld.push("present".to_owned());
            }));
        Ok(())
    }
}
