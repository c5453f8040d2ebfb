//! The built-in tools: `read`, `write`, `edit` ([`files`]), `glob`, `grep` ([`search`]),
//! `bash` ([`bash`]), `working_directory` ([`cwd`]), `todo_write` and `exit_plan_mode`
//! ([`plan`]), `ask_user_question` ([`ask`]), `read_image` ([`image`]) when the model has
//! vision; the minimal preset's persistent `bash` ([`shell`]).
//!
//! Descriptions are deliberately short: every byte of a schema is sent with every request.

pub mod ask;
pub mod bash;
pub mod cwd;
pub mod files;
pub mod image;
pub mod plan;
pub mod search;
pub mod shell;

pub use ask::AskUserTool;
pub use bash::{BashConfig, BashTool};
pub use cwd::WorkingDirectoryTool;
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

/// The built-in tools of `cfg.preset`, in their fixed order (`read_image` after `read` when
/// `cfg.images` is set).
///
/// The minimal preset is dsh 0.2's: one persistent `bash` shell, `read`, `write`, `edit` and
/// `working_directory` (plus `exit_plan_mode`, which keel's plan mode needs in every preset).
pub fn all(cfg: &BuiltinConfig) -> Vec<Arc<dyn Tool>> {
    let image = cfg
        .images
        .as_ref()
        .map(|store| Arc::new(ReadImageTool::new(store.clone())) as Arc<dyn Tool>);
    if cfg.preset == Preset::Minimal {
        let mut tools: Vec<Arc<dyn Tool>> = vec![
            Arc::new(ShellTool::new(cfg.bash.clone())),
            Arc::new(ReadTool),
        ];
        tools.extend(image);
        tools.extend::<[Arc<dyn Tool>; 4]>([
            Arc::new(WriteTool),
            Arc::new(EditTool),
            Arc::new(WorkingDirectoryTool),
            Arc::new(ExitPlanModeTool::new(cfg.plan.clone())),
        ]);
        return tools;
    }
    let mut tools: Vec<Arc<dyn Tool>> = vec![Arc::new(ReadTool)];
    tools.extend(image);
    tools.extend::<[Arc<dyn Tool>; 9]>([
        Arc::new(WriteTool),
        Arc::new(EditTool),
        Arc::new(GlobTool),
        Arc::new(GrepTool),
        Arc::new(BashTool::new(cfg.bash.clone())),
        Arc::new(WorkingDirectoryTool),
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
