//! `working_directory {cd?}` (dsh 0.2's tool): read the session's working directory, or move it.
//! Where it may go is the sandbox's call, as for any path the model gives; relative paths,
//! `bash` and `glob` start from the new directory on the next call, while a persistent shell
//! and running jobs keep their own.

use super::parse;
use crate::error::ToolError;
use crate::tool::{ExecMode, Tool, ToolContext, ToolEffect, ToolOutput};
use async_trait::async_trait;
use keel_protocol::ToolSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// The `working_directory` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct WorkingDirectoryTool;

#[derive(Deserialize)]
struct Args {
    #[serde(default)]
    cd: Option<String>,
}

#[async_trait]
impl Tool for WorkingDirectoryTool {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "working_directory".into(),
            description: "Read the working directory, or change it with cd (relative to it)."
                .into(),
            parameters: json!({"type":"object","properties":{
                "cd":{"type":"string","description":"Existing directory to enter."}
            }}),
        }
    }
    fn mode(&self) -> ExecMode {
        ExecMode::Exclusive
    }
    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }
    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let a: Args = parse(args)?;
        let (dir, text) = match a.cd.as_deref().map(str::trim) {
            None | Some("") => {
                let dir = ctx.workspace.cwd();
                let text = format!("Working directory: {}", dir.display());
                (dir, text)
            }
            Some(raw) => {
                let dir = ctx.workspace.enter(raw)?;
                let text = format!("Working directory is now {}", dir.display());
                (dir, text)
            }
        };
        Ok(ToolOutput::text(text).with_value(json!({ "cwd": dir })))
    }
}
