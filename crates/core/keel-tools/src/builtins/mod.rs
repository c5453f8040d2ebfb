//! The built-in tools: `read`, `write`, `edit` ([`files`]), `glob`, `grep` ([`search`]),
//! `bash` ([`bash`]), `todo_write` and `exit_plan_mode` ([`plan`]), `ask_user_question`
//! ([`ask`]), `read_image` ([`image`]) when the model has vision; the minimal preset's
//! persistent `bash` ([`shell`]) and `str_replace_editor` ([`editor`]).
//!
//! Descriptions are deliberately short: every byte of a schema is sent with every request.

pub mod ask;
pub mod bash;
pub mod editor;
pub mod files;
pub mod image;
pub mod plan;
pub mod search;
pub mod shell;

pub use ask::AskUserTool;
pub use bash::{BashConfig, BashTool};
pub use editor::StrReplaceEditorTool;
pub use files::{EditTool, ReadTool, WriteTool};
pub use image::ReadImageTool;
pub use plan::{ExitPlanModeTool, PLAN_HANDED_OFF, TodoWriteTool};
pub use search::{GlobTool, GrepTool};
pub use shell::ShellTool;

use crate::error::ToolError;
use crate::registry::{BuiltinConfig, Preset};
use crate::tool::Tool;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::sync::Arc;

/// The built-in tools of `cfg.preset`, in their fixed order (`read_image` after `read`, or
/// after `str_replace_editor` in the minimal preset, when `cfg.images` is set).
pub fn all(cfg: &BuiltinConfig) -> Vec<Arc<dyn Tool>> {
    let image = cfg
        .images
        .as_ref()
        .map(|store| Arc::new(ReadImageTool::new(store.clone())) as Arc<dyn Tool>);
    if cfg.preset == Preset::Minimal {
        let mut tools: Vec<Arc<dyn Tool>> = vec![
            Arc::new(ShellTool::new(cfg.bash.clone())),
            Arc::new(StrReplaceEditorTool),
        ];
        tools.extend(image);
        tools.push(Arc::new(ExitPlanModeTool::new(cfg.plan.clone())));
        return tools;
    }
    let mut tools: Vec<Arc<dyn Tool>> = vec![Arc::new(ReadTool)];
    tools.extend(image);
    tools.extend::<[Arc<dyn Tool>; 8]>([
        Arc::new(WriteTool),
        Arc::new(EditTool),
        Arc::new(GlobTool),
        Arc::new(GrepTool),
        Arc::new(BashTool::new(cfg.bash.clone())),
        Arc::new(TodoWriteTool),
        Arc::new(ExitPlanModeTool::new(cfg.plan.clone())),
        Arc::new(AskUserTool),
    ]);
    tools
}

/// Deserialize schema-checked arguments into the tool's argument struct.
pub(crate) fn parse<T: DeserializeOwned>(args: Value) -> Result<T, ToolError> {
    serde_json::from_value(args).map_err(|e| ToolError::InvalidArgs(e.to_string()))
}

/// Run blocking filesystem work off the async threads.
pub(crate) async fn blocking<T, F>(f: F) -> Result<T, ToolError>
where
    F: FnOnce() -> Result<T, ToolError> + Send + 'static,
    T: Send + 'static,
{
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ToolError::Failed(format!("internal error: worker failed: {e}")))?
}
