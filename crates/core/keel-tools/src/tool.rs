//! The [`Tool`] trait and what a tool body receives ([`ToolContext`]) and returns
//! ([`ToolOutput`]).
//!
//! A tool declares its schema once (the registry caches it), how it may be scheduled
//! ([`ExecMode`]), what it can change ([`ToolEffect`], read by plan mode and the read-only
//! sandbox) and an optional timeout enforced by the pipeline around the body.

use crate::caller::ToolCaller;
use crate::error::ToolError;
use crate::seams::ExecToken;
use crate::spill::SpillConfig;
use crate::subprocess::SubprocessService;
use crate::workspace::Workspace;
use async_trait::async_trait;
use keel_protocol::{ContentBlock, ToolCallBlock, ToolSchema};
use serde_json::Value;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How the pipeline may schedule calls of a tool within one batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecMode {
    /// Safe to run concurrently with other parallel calls (read-only, no shared state).
    Parallel,
    /// Runs alone: every earlier call has finished before it starts and later ones wait.
    Exclusive,
}

/// What a tool can change. Plan mode denies everything but [`ToolEffect::ReadOnly`]; the
/// read-only sandbox denies [`ToolEffect::Writes`] and asks before [`ToolEffect::Executes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolEffect {
    /// Reads files or only talks to the caller (todo list, plan approval).
    ReadOnly,
    /// Writes files in the workspace.
    Writes,
    /// Runs arbitrary commands.
    Executes,
}

/// What a tool body produced.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolOutput {
    /// Model-facing content (text and image blocks).
    pub content: Vec<ContentBlock>,
    /// Structured details for the caller and hooks, never sent to the model (exit code, path…).
    /// An object's fields are merged into the outcome's `meta`.
    pub value: Option<Value>,
}

impl ToolOutput {
    /// Output with one text block.
    pub fn text(text: impl Into<String>) -> Self {
        ToolOutput {
            content: vec![ContentBlock::text(text)],
            value: None,
        }
    }

    /// Attach a structured value.
    pub fn with_value(mut self, value: Value) -> Self {
        self.value = Some(value);
        self
    }
}

/// Everything a tool body may use. Built by the pipeline for one dispatch.
pub struct ToolContext<'a> {
    /// Workspace roots, working directory and sandbox mode; resolves and confines paths.
    pub workspace: &'a Workspace,
    /// Cancelled when the caller aborts; long bodies should watch it and stop promptly.
    pub cancel: CancellationToken,
    /// Runs child processes (process group, env scrub with forward list, timeouts).
    pub subprocess: &'a SubprocessService,
    /// Where large outputs are spilled.
    pub spill: &'a SpillConfig,
    /// The agent loop, for `emit` and `ask_approval`.
    pub caller: &'a dyn ToolCaller,
    /// The call being executed.
    pub call: &'a ToolCallBlock,
    /// This dispatch's token; pass it as the parent of nested dispatches.
    pub token: ExecToken,
}

/// A tool the model can call. Dyn-compatible: registries hold `Arc<dyn Tool>`.
#[async_trait]
pub trait Tool: Send + Sync {
    /// Name, description and JSON-Schema parameters. Called once, at registration.
    fn schema(&self) -> ToolSchema;

    /// Scheduling within a batch. Default: [`ExecMode::Exclusive`].
    fn mode(&self) -> ExecMode {
        ExecMode::Exclusive
    }

    /// What the tool can change. Default: [`ToolEffect::Executes`] (the most guarded).
    fn effect(&self) -> ToolEffect {
        ToolEffect::Executes
    }

    /// Time limit the pipeline enforces around the body (`TOOL_TIMEOUT` past it). `None`: no
    /// limit from the pipeline (the tool may enforce its own).
    fn timeout(&self) -> Option<Duration> {
        None
    }

    /// Whether the tool is offered to the model now: asked once per request, so a tool can
    /// appear when a mode turns on (a change shows in the logged request header). A call to a
    /// tool not offered still reaches it (it answers why it is not available). Default: always.
    fn offered(&self) -> bool {
        true
    }

    /// Whether the parameter schema comes from outside keel (an MCP server) and is passed to
    /// the model as it is: it is then checked only for being an object schema, and arguments
    /// are validated against the keywords keel knows (the tool's owner checks the rest).
    /// Default: false (the schema must stay within keel's subset, see [`crate::schema`]).
    fn foreign_schema(&self) -> bool {
        false
    }

    /// Earlier names of parameters, as `(old, new)`: a call that uses an old name is read as if
    /// it used the new one (so sessions written before a rename still resume). Default: none.
    fn aliases(&self) -> &'static [(&'static str, &'static str)] {
        &[]
    }

    /// Whether a call may ask to run outside the sandbox with `sandbox_permissions` and
    /// `justification` (see [`crate::escalation`]; the schema declares both with
    /// [`crate::escalation::with_escalation`]). The pipeline takes them out of the arguments
    /// and asks a person. Default: false (the two are then unknown properties).
    fn escalates(&self) -> bool {
        false
    }

    /// Run the tool on schema-valid arguments.
    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError>;
}
