//! `read_image`: shows the model an image file of the workspace (dsh-tool-fs's `read_image`).
//!
//! Offered only to a model whose catalogue entry has vision (the host registers it then). The
//! file is checked ([`crate::attachments::sniff`]: PNG, JPEG, GIF or WebP, at most 20 MiB) and
//! stored content-addressed under `$KEEL_HOME/attachments`; the result carries a line of text
//! and a reference to the stored image, which the agent sends as an image part.

use super::files::FILE_PATH_ALIAS;
use super::{blocking, parse};
use crate::attachments::{Attachments, ImageError, read_image_from};
use crate::error::ToolError;
use crate::tool::{ExecMode, Tool, ToolContext, ToolEffect, ToolOutput};
use crate::workspace::Access;
use async_trait::async_trait;
use keel_protocol::{ContentBlock, ToolSchema};
use serde::Deserialize;
use serde_json::json;

/// `read_image {file_path}`.
#[derive(Debug, Clone)]
pub struct ReadImageTool {
    store: Attachments,
}

impl ReadImageTool {
    /// A `read_image` storing what it reads in `store`.
    pub fn new(store: Attachments) -> Self {
        ReadImageTool { store }
    }
}

#[derive(Deserialize)]
struct ReadImageArgs {
    file_path: String,
}

#[async_trait]
impl Tool for ReadImageTool {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "read_image".into(),
            description: "View an image file (PNG, JPEG, GIF or WebP, up to 20 MiB).".into(),
            parameters: json!({"type":"object","properties":{
                "file_path":{"type":"string","description":"Image path, relative to the working directory or absolute."}
            },"required":["file_path"]}),
        }
    }
    fn aliases(&self) -> &'static [(&'static str, &'static str)] {
        FILE_PATH_ALIAS
    }
    fn mode(&self) -> ExecMode {
        ExecMode::Parallel
    }
    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }
    async fn execute(
        &self,
        args: serde_json::Value,
        ctx: &ToolContext<'_>,
    ) -> Result<ToolOutput, ToolError> {
        let a: ReadImageArgs = parse(args)?;
        let path = ctx.workspace.resolve(&a.file_path, Access::Read)?;
        let shown = ctx.workspace.display(&path);
        let store = self.store.clone();
        let named = shown.clone();
        // Opened beneath the workspace directory that holds it: a link swapped in after the
        // path was checked is not followed out, and a FIFO or device is refused.
        let placed = ctx.workspace.place(&path, Access::Read);
        let (image, bytes) = blocking(move || {
            let file = placed.open_read()?;
            let (bytes, _) = read_image_from(file, &named).map_err(failed)?;
            let image = store.store(&bytes, &named).map_err(failed)?;
            Ok((image, bytes.len()))
        })
        .await?;
        let mime = image.media_type.clone().unwrap_or_default();
        let value = json!({"path": shown, "mimeType": mime, "bytes": bytes, "uri": image.uri});
        Ok(ToolOutput {
            content: vec![
                ContentBlock::text(format!(
                    "{shown}: {mime}, {bytes} bytes (the image follows)"
                )),
                ContentBlock::Image(image),
            ],
            value: Some(value),
        })
    }
}

/// An image that cannot be read is the call's failure, explained for the model.
fn failed(e: ImageError) -> ToolError {
    ToolError::Failed(e.to_string())
}
