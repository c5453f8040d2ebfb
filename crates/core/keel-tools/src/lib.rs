//! keel's tools: the [`Tool`] trait, the [`ToolRegistry`], the execution [`Pipeline`], the
//! built-in tools, the [`subprocess`] service and the output [`spill`].
//!
//! Data flow of one batch of tool calls (the calls of one assistant message):
//!
//! ```text
//! run_batch(calls) ─► per call, in model order: caller.call_started
//!   ─► parse + validate arguments (INVALID_ARGS / UNKNOWN_TOOL results, never a panic)
//!   ─► tools/pre-execute (allow / deny / ask → caller.ask_approval) ─► tools/guard
//!   ─► caller.checkpoint ─► tools/execute middleware ─► Tool::execute (timeout, cancel)
//!   ─► tools/post-execute ─► spill ─► tools/settled + caller.settled (model order)
//!   ─► Vec<ToolOutcome> in model order (the caller appends one `tool/result` each)
//! ```
//!
//! Parallel-safe calls ([`ExecMode::Parallel`]) run concurrently, bounded; an exclusive call
//! runs alone. File tools resolve paths through [`workspace`], which enforces the
//! [`SandboxMode`].
#![deny(missing_docs)]

pub mod attachments;
pub mod beneath;
pub mod builtins;
pub mod caller;
pub mod complete;
pub mod error;
pub mod escalation;
pub mod git;
pub mod jobs;
pub mod observed;
pub mod pipeline;
pub mod plan;
pub mod protected;
pub mod registry;
pub mod schema;
pub mod seams;
pub mod spill;
pub mod subprocess;
pub mod tool;
pub mod workspace;

pub use attachments::{Attachments, ImageError};
pub use caller::{
    ApprovalOutcome, CallerId, Handoff, NO_PERSON_PRESENT, NullCaller, ToolCaller, ToolOutcome,
    UserAnswer,
};
pub use error::ToolError;
pub use jobs::{
    JobControl, JobError, JobEventSink, JobEvents, JobInfo, JobIo, JobOutput, JobResult, JobSpec,
    JobStatus,
};
pub use pipeline::{BatchOptions, Pipeline, PipelineBuilder};
pub use plan::{PLAN_AWAITS_APPROVAL, PlanModeSection, PlanState, enter_plan_mode};
pub use registry::{
    ArgsShape, BuiltinConfig, Preset, RegisteredTool, RegistryError, ToolRegistry, ToolSource,
    default_tool_schemas_bytes,
};
pub use seams::{
    ExecToken, ExecuteMiddleware, ExecuteNext, ExposeHook, GuardDecision, GuardHook, HookContext,
    PipelineObserver, PostDecision, PostExecuteHook, PreDecision, PreExecuteHook, ResultDraft,
    SettledHook, ToolHooks, ToolInfo,
};
pub use tool::{ExecMode, Tool, ToolContext, ToolEffect, ToolOutput};
pub use workspace::{Access, SandboxMode, TextFiles, TextFilesError, Workspace};
