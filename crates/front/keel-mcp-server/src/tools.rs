//! The two tools' definitions (names, descriptions, input and output schemas) and their
//! argument parsing. Arguments that do not fit a schema are an `invalid_params` error, which
//! the handler answers as an error tool result (`isError: true`) naming the argument.

use super::{ReplyRequest, TaskRequest};
use keel_agent::ApprovalPolicy;
use keel_tools::SandboxMode;
use rmcp::ErrorData;
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;

/// The name of the tool that runs a task in a new session.
pub const KEEL_TOOL: &str = "keel";
/// The name of the tool that continues a session.
pub const REPLY_TOOL: &str = "keel_reply";

const KEEL_DESCRIPTION: &str = "Delegate a task to keel, a coding agent: it runs the task to \
the end in a new keel session (reading and editing files, running commands in the workspace) \
and answers with its final message and the session id. Continue the same session with \
keel_reply. Approval cannot be asked for over MCP: with approval \"ask\" (the default unless \
configured otherwise) or \"deny\", tool calls that need approval are refused and keel works \
around them; \"allow\" approves them.";

const REPLY_DESCRIPTION: &str = "Continue a keel session (the sessionId a keel call answered \
with) with another prompt: keel runs one more turn with the whole session as context, under the \
settings the session started with, and answers like the keel tool.";

fn object(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => Arc::new(JsonObject::new()),
    }
}

fn output_schema() -> Arc<JsonObject> {
    object(json!({
        "type": "object",
        "properties": {
            "sessionId": {
                "type": "string",
                "description": "The keel session the turn ran in (pass it to keel_reply)."
            },
            "finalText": {
                "type": "string",
                "description": "keel's last message of the turn."
            },
            "turnEnd": {
                "type": "string",
                "enum": ["completed", "aborted", "blocked", "error", "max-tokens", "interrupted"],
                "description": "Why the turn ended; anything but completed is an error result."
            },
            "detail": {
                "type": "string",
                "description": "What went wrong, when the turn did not complete."
            }
        },
        "required": ["sessionId", "finalText", "turnEnd"]
    }))
}

/// The `keel` tool.
pub fn keel_tool() -> Tool {
    Tool::new(
        KEEL_TOOL,
        KEEL_DESCRIPTION,
        object(json!({
            "type": "object",
            "properties": {
                "prompt": {
                    "type": "string",
                    "minLength": 1,
                    "description": "The task, as you would tell a colleague."
                },
                "cwd": {
                    "type": "string",
                    "description": "Workspace directory (absolute, or relative to the server's \
                                    working directory); default: the server's working directory."
                },
                "sandbox": {
                    "type": "string",
                    "enum": ["read-only", "workspace-write", "full-access"],
                    "description": "How far keel's tools reach; default: as configured \
                                    (workspace-write)."
                },
                "approval": {
                    "type": "string",
                    "enum": ["ask", "deny", "allow", "never", "auto"],
                    "description": "Approval policy for actions that need it. Nobody can be \
                                    asked over MCP: ask and deny refuse such actions, allow \
                                    approves them (never and auto: keel's old words for deny \
                                    and allow). Default: as configured (ask)."
                },
                "model": {
                    "type": "string",
                    "description": "Model name; default: as configured."
                }
            },
            "required": ["prompt"],
            "additionalProperties": false
        })),
    )
    .with_title("Delegate a task to keel")
    .with_raw_output_schema(output_schema())
    .with_annotations(ToolAnnotations::from_raw(
        Some("Delegate a task to keel".into()),
        Some(false),
        Some(true),
        Some(false),
        Some(true),
    ))
}

/// The `keel_reply` tool.
pub fn reply_tool() -> Tool {
    Tool::new(
        REPLY_TOOL,
        REPLY_DESCRIPTION,
        object(json!({
            "type": "object",
            "properties": {
                "session_id": {
                    "type": "string",
                    "minLength": 1,
                    "description": "The sessionId of an earlier keel answer."
                },
                "prompt": {
                    "type": "string",
                    "minLength": 1,
                    "description": "What to tell keel next."
                }
            },
            "required": ["session_id", "prompt"],
            "additionalProperties": false
        })),
    )
    .with_title("Continue a keel session")
    .with_raw_output_schema(output_schema())
    .with_annotations(ToolAnnotations::from_raw(
        Some("Continue a keel session".into()),
        Some(false),
        Some(true),
        Some(false),
        Some(true),
    ))
}

/// Both tools, in listing order.
pub fn tools() -> Vec<Tool> {
    vec![keel_tool(), reply_tool()]
}

fn invalid(tool: &str, message: impl std::fmt::Display) -> ErrorData {
    ErrorData::invalid_params(format!("{tool}: {message}"), None)
}

/// Reject keys the schema does not name.
fn only_known(tool: &str, args: &JsonObject, known: &[&str]) -> Result<(), ErrorData> {
    match args.keys().find(|k| !known.contains(&k.as_str())) {
        Some(key) => Err(invalid(
            tool,
            format!(
                "unknown argument {key:?}; expected {}",
                known
                    .iter()
                    .map(|k| format!("{k:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
        None => Ok(()),
    }
}

/// An optional string argument (`null` counts as absent).
fn opt_string(tool: &str, args: &JsonObject, key: &str) -> Result<Option<String>, ErrorData> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(invalid(
            tool,
            format!("{key:?} must be a string, not {}", type_name(other)),
        )),
    }
}

/// A required, non-blank string argument.
fn text(tool: &str, args: &JsonObject, key: &str) -> Result<String, ErrorData> {
    match opt_string(tool, args, key)? {
        Some(s) if !s.trim().is_empty() => Ok(s),
        Some(_) => Err(invalid(tool, format!("{key:?} is empty"))),
        None => Err(invalid(tool, format!("missing required argument {key:?}"))),
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Check the `keel` tool's arguments.
pub fn parse_task(args: &JsonObject) -> Result<TaskRequest, ErrorData> {
    let tool = KEEL_TOOL;
    only_known(
        tool,
        args,
        &["prompt", "cwd", "sandbox", "approval", "model"],
    )?;
    let prompt = text(tool, args, "prompt")?;
    let cwd = match opt_string(tool, args, "cwd")? {
        Some(dir) if dir.trim().is_empty() => return Err(invalid(tool, "\"cwd\" is empty")),
        dir => dir.map(PathBuf::from),
    };
    let sandbox = opt_string(tool, args, "sandbox")?
        .map(|name| {
            name.parse::<SandboxMode>().map_err(|_| {
                invalid(
                    tool,
                    format!(
                        "unknown sandbox {name:?}; expected read-only, workspace-write or \
                         full-access"
                    ),
                )
            })
        })
        .transpose()?;
    let approval = opt_string(tool, args, "approval")?
        .map(|name| {
            ApprovalPolicy::parse(&name).ok_or_else(|| {
                invalid(
                    tool,
                    format!(
                        "unknown approval {name:?}; expected {}",
                        ApprovalPolicy::EXPECTED
                    ),
                )
            })
        })
        .transpose()?;
    let model = match opt_string(tool, args, "model")? {
        Some(m) if m.trim().is_empty() => return Err(invalid(tool, "\"model\" is empty")),
        m => m,
    };
    Ok(TaskRequest {
        prompt,
        cwd,
        sandbox,
        approval,
        model,
    })
}

/// Check the `keel_reply` tool's arguments.
pub fn parse_reply(args: &JsonObject) -> Result<ReplyRequest, ErrorData> {
    let tool = REPLY_TOOL;
    only_known(tool, args, &["session_id", "prompt"])?;
    let session_id = text(tool, args, "session_id")?.trim().to_owned();
    let prompt = text(tool, args, "prompt")?;
    Ok(ReplyRequest { session_id, prompt })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn args(v: Value) -> JsonObject {
        match v {
            Value::Object(m) => m,
            _ => panic!("not an object"),
        }
    }

    #[test]
    fn task_arguments_parse_with_defaults_and_all_fields() {
        let t = parse_task(&args(json!({"prompt": "do it"}))).unwrap();
        assert_eq!(t.prompt, "do it");
        assert_eq!(
            (t.cwd, t.sandbox, t.approval, t.model),
            (None, None, None, None)
        );
        let t = parse_task(&args(json!({
            "prompt": "do it", "cwd": "sub", "sandbox": "read-only", "approval": "auto",
            "model": "m",
        })))
        .unwrap();
        assert_eq!(t.cwd, Some(PathBuf::from("sub")));
        assert_eq!(t.sandbox, Some(SandboxMode::ReadOnly));
        assert_eq!(t.approval, Some(ApprovalPolicy::Allow));
        assert_eq!(t.model.as_deref(), Some("m"));
        let t = parse_task(&args(json!({"prompt": "x", "cwd": null}))).unwrap();
        assert_eq!(t.cwd, None);
    }

    #[test]
    fn bad_task_arguments_are_invalid_params_naming_the_problem() {
        for (v, needle) in [
            (json!({}), "missing required argument \"prompt\""),
            (json!({"prompt": "  "}), "\"prompt\" is empty"),
            (
                json!({"prompt": 3}),
                "\"prompt\" must be a string, not a number",
            ),
            (
                json!({"prompt": "x", "sandbox": "yolo"}),
                "unknown sandbox \"yolo\"",
            ),
            (
                json!({"prompt": "x", "approval": "maybe"}),
                "unknown approval \"maybe\"",
            ),
            (
                json!({"prompt": "x", "promt": "y"}),
                "unknown argument \"promt\"",
            ),
        ] {
            let e = parse_task(&args(v.clone())).unwrap_err();
            assert_eq!(e.code, rmcp::model::ErrorCode::INVALID_PARAMS, "{v}");
            assert!(e.message.contains(needle), "{v}: {}", e.message);
        }
    }

    #[test]
    fn reply_arguments_parse_and_reject() {
        let r = parse_reply(&args(json!({"session_id": " abc ", "prompt": "more"}))).unwrap();
        assert_eq!(r.session_id, "abc");
        assert_eq!(r.prompt, "more");
        let e = parse_reply(&args(json!({"prompt": "more"}))).unwrap_err();
        assert!(e.message.contains("\"session_id\""), "{}", e.message);
    }

    #[test]
    fn schemas_name_their_arguments() {
        let [keel, reply] = <[Tool; 2]>::try_from(tools()).unwrap();
        assert_eq!(keel.name, KEEL_TOOL);
        assert_eq!(keel.input_schema["required"], json!(["prompt"]));
        assert!(
            keel.description
                .as_deref()
                .unwrap()
                .contains("Approval cannot be asked for over MCP")
        );
        assert_eq!(reply.name, REPLY_TOOL);
        assert_eq!(
            reply.input_schema["required"],
            json!(["session_id", "prompt"])
        );
        let out = keel.output_schema.unwrap();
        assert_eq!(
            out["required"],
            json!(["sessionId", "finalText", "turnEnd"])
        );
    }
}
