//! The model-callable query tools `trace` and `get_node`, over the calling session's live
//! snapshot. Answers are the allow-listed projections of [`crate::query`] as JSON text; query
//! errors are tool errors whose text starts with the query code (`UNKNOWN_TARGET`,
//! `AMBIGUOUS_TARGET` with the candidate node ids, `CAPTURE_INCOMPLETE`, `INVALID_ARGUMENT`).
//! Their own calls are not captured (see `seams.rs`).

use super::Provenance;
use crate::query::{
    DEFAULT_TRACE_DEPTH, Direction, MAX_TRACE_DEPTH, QueryError, QueryScope, get_node_in, trace_in,
};
use async_trait::async_trait;
use keel_protocol::ToolSchema;
use keel_tools::{ExecMode, Tool, ToolContext, ToolEffect, ToolError, ToolOutput};
use serde::Deserialize;
use serde_json::{Value, json};

/// Name of the `trace` tool.
pub const TRACE_TOOL: &str = "trace";
/// Name of the `get_node` tool.
pub const GET_NODE_TOOL: &str = "get_node";
/// The query tools, whose calls are never captured.
pub const QUERY_TOOLS: [&str; 2] = [TRACE_TOOL, GET_NODE_TOOL];

fn query_error(e: QueryError) -> ToolError {
    let text = match &e {
        QueryError::AmbiguousTarget { candidates, .. } => {
            format!("{e}; candidates: {}", candidates.join(", "))
        }
        _ => e.to_string(),
    };
    match e {
        QueryError::CaptureIncomplete { .. } => ToolError::Failed(text),
        _ => ToolError::InvalidArgs(text),
    }
}

fn not_bound() -> ToolError {
    ToolError::Failed("CAPTURE_INCOMPLETE: provenance is not bound to this session".into())
}

fn json_output(v: &impl serde::Serialize) -> Result<ToolOutput, ToolError> {
    serde_json::to_string(v)
        .map(ToolOutput::text)
        .map_err(|e| ToolError::Failed(format!("cannot encode the answer: {e}")))
}

/// Largest `trace` answer handed to the model (bytes of JSON): under the pipeline's spill
/// threshold, so the model never gets a JSON document cut in the middle.
pub const TRACE_ANSWER_BUDGET: usize = 32 * 1024;

/// The trace at `depth`, or — when its JSON exceeds [`TRACE_ANSWER_BUDGET`] — at the largest
/// smaller depth whose answer fits (`truncated: true` then says the walk was cut).
fn fitting_trace(
    scope: &QueryScope<'_>,
    target: &str,
    direction: Direction,
    depth: u32,
) -> Result<String, ToolError> {
    let encode = |d: u32| -> Result<String, ToolError> {
        let answer = trace_in(scope, target, direction, d).map_err(query_error)?;
        serde_json::to_string(&answer)
            .map_err(|e| ToolError::Failed(format!("cannot encode the answer: {e}")))
    };
    let full = encode(depth)?;
    if full.len() <= TRACE_ANSWER_BUDGET || depth == 0 {
        return Ok(full);
    }
    // Binary search for the largest depth below `depth` that fits (depth 0 always answers).
    let (mut lo, mut hi) = (0u32, depth - 1);
    let mut best = encode(0)?;
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        let text = encode(mid)?;
        if text.len() <= TRACE_ANSWER_BUDGET {
            lo = mid;
            best = text;
        } else {
            hi = mid - 1;
        }
    }
    Ok(best)
}

/// `trace {target_id, direction?, max_depth?}`.
#[derive(Debug, Clone)]
pub struct TraceTool {
    provenance: Provenance,
}

impl TraceTool {
    /// A `trace` tool over `provenance`'s session.
    pub fn new(provenance: Provenance) -> Self {
        TraceTool { provenance }
    }
}

#[derive(Deserialize)]
struct TraceArgs {
    target_id: String,
    #[serde(default)]
    direction: Direction,
    max_depth: Option<u32>,
}

#[async_trait]
impl Tool for TraceTool {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: TRACE_TOOL.into(),
            description: "Provenance of a tool result in this session: the formation path \
                (assistant message, tool call, pre-execute decision, dispatch, post-execute, \
                final result) as structural nodes and edges. Never shows payloads."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "target_id": {"type": "string", "description": "node id, tool-result event id, provider call id, or result:<call id>"},
                    "direction": {"type": "string", "enum": ["backward", "forward"], "default": "backward"},
                    "max_depth": {"type": "integer", "minimum": 0, "maximum": MAX_TRACE_DEPTH, "default": DEFAULT_TRACE_DEPTH}
                },
                "required": ["target_id"],
                "additionalProperties": false
            }),
        }
    }

    fn mode(&self) -> ExecMode {
        ExecMode::Parallel
    }

    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }

    async fn execute(&self, args: Value, _ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let a: TraceArgs = serde_json::from_value(args)
            .map_err(|e| ToolError::InvalidArgs(format!("INVALID_ARGUMENT: {e}")))?;
        let depth = a.max_depth.unwrap_or(DEFAULT_TRACE_DEPTH);
        let text = self
            .provenance
            .with_scope(|scope| fitting_trace(scope, &a.target_id, a.direction, depth))
            .ok_or_else(not_bound)??;
        Ok(ToolOutput::text(text))
    }
}

/// `get_node {id}`.
#[derive(Debug, Clone)]
pub struct GetNodeTool {
    provenance: Provenance,
}

impl GetNodeTool {
    /// A `get_node` tool over `provenance`'s session.
    pub fn new(provenance: Provenance) -> Self {
        GetNodeTool { provenance }
    }
}

#[derive(Deserialize)]
struct GetNodeArgs {
    id: String,
}

#[async_trait]
impl Tool for GetNodeTool {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: GET_NODE_TOOL.into(),
            description: "One provenance node of this session (structural fields only): a node \
                id, a tool-result event id, a provider call id, or result:<call id>."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {"id": {"type": "string"}},
                "required": ["id"],
                "additionalProperties": false
            }),
        }
    }

    fn mode(&self) -> ExecMode {
        ExecMode::Parallel
    }

    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }

    async fn execute(&self, args: Value, _ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let a: GetNodeArgs = serde_json::from_value(args)
            .map_err(|e| ToolError::InvalidArgs(format!("INVALID_ARGUMENT: {e}")))?;
        let answer = self
            .provenance
            .with_scope(|scope| get_node_in(scope, &a.id))
            .ok_or_else(not_bound)?
            .map_err(query_error)?;
        json_output(&answer)
    }
}
