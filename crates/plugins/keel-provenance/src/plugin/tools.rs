//! The model-callable query tools `trace` and `get_node`, over the calling session's live
//! snapshot. Answers are the allow-listed projections of [`crate::query`] as JSON text; query
//! errors are tool errors whose text starts with the query code (`UNKNOWN_TARGET`,
//! `AMBIGUOUS_TARGET` with the candidate node ids, `CAPTURE_INCOMPLETE`). Arguments the tool
//! cannot use (unreadable, or `INVALID_ARGUMENT` from the query) are `INVALID_ARGS` errors whose
//! text is the detail alone, so the model reads one code (`INVALID_ARGS: <detail>`), not two.
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
        // The pipeline writes `INVALID_ARGS: ` before the text; `INVALID_ARGUMENT: ` would say
        // the same thing twice.
        QueryError::InvalidArgument { detail } => detail.clone(),
        _ => e.to_string(),
    };
    match e {
        QueryError::CaptureIncomplete { .. } => ToolError::Failed(text),
        _ => ToolError::InvalidArgs(text),
    }
}

/// Arguments that do not deserialize (the pipeline's schema check lets few through).
fn bad_args(e: serde_json::Error) -> ToolError {
    ToolError::InvalidArgs(e.to_string())
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

    /// The answer to one call (what [`Tool::execute`] returns; it needs no context).
    fn answer(&self, args: Value) -> Result<ToolOutput, ToolError> {
        let a: TraceArgs = serde_json::from_value(args).map_err(bad_args)?;
        let depth = a.max_depth.unwrap_or(DEFAULT_TRACE_DEPTH);
        let text = self
            .provenance
            .with_scope(|scope| fitting_trace(scope, &a.target_id, a.direction, depth))
            .ok_or_else(not_bound)??;
        Ok(ToolOutput::text(text))
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
        self.answer(args)
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

    /// The answer to one call (what [`Tool::execute`] returns; it needs no context).
    fn answer(&self, args: Value) -> Result<ToolOutput, ToolError> {
        let a: GetNodeArgs = serde_json::from_value(args).map_err(bad_args)?;
        let answer = self
            .provenance
            .with_scope(|scope| get_node_in(scope, &a.id))
            .ok_or_else(not_bound)?
            .map_err(query_error)?;
        json_output(&answer)
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
        self.answer(args)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_protocol::{SessionId, ToolErrorCode};

    fn bound() -> Provenance {
        let p = Provenance::in_memory();
        p.bind(&SessionId("s-tools".into())).unwrap();
        p
    }

    /// The model-facing text (what the pipeline puts in the result) carries `code` and then
    /// the detail, with no second `SOME_CODE:` prefix.
    fn one_code(e: &ToolError, code: ToolErrorCode) -> String {
        assert_eq!(e.code(), code);
        let text = e.model_text();
        let detail = text
            .strip_prefix(&format!("{}: ", code.as_str()))
            .unwrap_or_else(|| panic!("{text}"));
        let head = detail.split(':').next().unwrap_or("");
        assert!(
            !(head.len() > 1 && head.bytes().all(|b| b.is_ascii_uppercase() || b == b'_')),
            "two codes: {text}"
        );
        text
    }

    #[test]
    fn invalid_arguments_read_as_one_code() {
        let p = bound();
        let trace = TraceTool::new(p.clone());
        let e = trace
            .answer(json!({"target_id": "x", "max_depth": MAX_TRACE_DEPTH + 1}))
            .unwrap_err();
        assert_eq!(
            one_code(&e, ToolErrorCode::InvalidArgs),
            format!(
                "INVALID_ARGS: max_depth {} is above {MAX_TRACE_DEPTH}",
                MAX_TRACE_DEPTH + 1
            )
        );
        for args in [
            json!({}),
            json!({"target_id": 5}),
            json!({"target_id": "x", "direction": "up"}),
        ] {
            let e = trace.answer(args).unwrap_err();
            one_code(&e, ToolErrorCode::InvalidArgs);
        }
        let get = GetNodeTool::new(p);
        for args in [json!({}), json!({"id": ["x"]})] {
            let e = get.answer(args).unwrap_err();
            one_code(&e, ToolErrorCode::InvalidArgs);
        }
    }

    #[test]
    fn query_codes_stay_in_the_query_layer() {
        // The query API (and `keel trace`) keep their own code.
        let e = QueryError::InvalidArgument {
            detail: "max_depth 300 is above 256".into(),
        };
        assert_eq!(e.code(), "INVALID_ARGUMENT");
        assert_eq!(
            e.to_string(),
            "INVALID_ARGUMENT: max_depth 300 is above 256"
        );
        assert_eq!(
            query_error(e).model_text(),
            "INVALID_ARGS: max_depth 300 is above 256"
        );
    }
}
