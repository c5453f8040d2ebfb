//! Code Mode: the model writes the body of an async function over its tools, and one `run_code`
//! call does the work of many tool calls.
//!
//! Data flow of one `run_code` call:
//!
//! ```text
//! run_code {code} ─► tool::RunCodeTool ─► engine::run (fresh QuickJS runtime + context on its
//!   own thread; memory, stack and time limits; cancellation) ─► each `await tools.x(args)`
//!   ─► engine's scheduler (parallel-safe calls overlap up to a bound, exclusive ones alone)
//!   ─► bridge::PipelineBridge ─► the agent's Pipeline::run_batch_with (parent = run_code's
//!   dispatch; `tool/code-dispatch-start` / `tool/code-dispatch` logged) ─► the result text
//!   back into the program ─► `{logs, result}` or `CODE_RUN_FAILED`
//! ```
//!
//! [`declare`] turns the visible tools' JSON Schemas into the TypeScript `tools` declaration the
//! prompt section shows; [`plugin`] wires the modes (`native`, `code`, `both`).
#![deny(missing_docs)]

pub mod bridge;
pub mod declare;
pub mod engine;
pub mod flow;
pub mod plugin;
pub mod strip;
pub mod tool;

pub use flow::{RalphPlugin, WorkflowPlugin, WorkflowSettings};
pub use plugin::{CodeModePlugin, CodeModeSettings, ID, ToolsMode};
pub use tool::{CODE_RUN_FAILED, RunCodeTool};

/// The tool's name.
pub const RUN_CODE: &str = "run_code";
