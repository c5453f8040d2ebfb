//! `schedule_create`, `schedule_list`, `schedule_update` and `schedule_delete` with dsh's
//! schemas.

use crate::service::{ScheduleError, Shared, cut, when_arg};
use crate::state::{human, now_ms, rfc3339};
use async_trait::async_trait;
use keel_protocol::ToolSchema;
use keel_tools::{Tool, ToolContext, ToolEffect, ToolError, ToolOutput};
use serde_json::{Value, json};
use std::sync::Arc;

/// The schedule tools' names (withheld from subagents: a child's schedule would outlive it).
pub const SCHEDULE_TOOL_NAMES: [&str; 4] = [
    "schedule_create",
    "schedule_list",
    "schedule_update",
    "schedule_delete",
];

fn invalid(e: ScheduleError) -> ToolError {
    ToolError::InvalidArgs(e.0)
}

/// `schedule_create {prompt, after_seconds | every_seconds | at}`.
pub struct ScheduleCreateTool {
    pub(crate) shared: Arc<Shared>,
}

#[async_trait]
impl Tool for ScheduleCreateTool {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "schedule_create".into(),
            description: "Send yourself prompt later: give one of after_seconds, every_seconds, \
                          at (RFC 3339)."
                .into(),
            parameters: json!({"type":"object","properties":{
                "prompt":{"type":"string"},
                "after_seconds":{"type":"number"},
                "every_seconds":{"type":"number","minimum":self.shared.min_every()},
                "at":{"type":"string"}
            },"required":["prompt"]}),
        }
    }
    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }
    async fn execute(&self, args: Value, _ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let when = when_arg(&args).map_err(invalid)?;
        let prompt = args["prompt"].as_str().unwrap_or_default();
        let s = self.shared.create(prompt, when).map_err(invalid)?;
        let wait = human(s.due_ms - now_ms());
        let text = match s.every_seconds {
            Some(every) => format!(
                "Scheduled {}: every {every} s, first at {} (in {wait}).",
                s.id,
                rfc3339(s.due_ms)
            ),
            None => format!(
                "Scheduled {}: once at {} (in {wait}).",
                s.id,
                rfc3339(s.due_ms)
            ),
        };
        Ok(ToolOutput::text(text))
    }
}

/// `schedule_list {}`.
pub struct ScheduleListTool {
    pub(crate) shared: Arc<Shared>,
}

#[async_trait]
impl Tool for ScheduleListTool {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "schedule_list".into(),
            description: "This session's schedules: id, next time (UTC), prompt.".into(),
            parameters: json!({"type":"object","properties":{}}),
        }
    }
    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }
    async fn execute(&self, _args: Value, _ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let fold = self.shared.snapshot();
        if fold.active.is_empty() {
            return Ok(ToolOutput::text("No schedules."));
        }
        let now = now_ms();
        let lines: Vec<String> = fold
            .active
            .iter()
            .map(|s| {
                let every = s
                    .every_seconds
                    .map(|e| format!(", every {e} s"))
                    .unwrap_or_default();
                format!(
                    "{} next {} (in {}){every}: {}",
                    s.id,
                    rfc3339(s.due_ms),
                    human(s.due_ms - now),
                    cut(&s.prompt, 120)
                )
            })
            .collect();
        Ok(ToolOutput::text(lines.join("\n")))
    }
}

/// `schedule_update {id, prompt?, after_seconds | every_seconds | at ?}` (dsh 0.2).
pub struct ScheduleUpdateTool {
    pub(crate) shared: Arc<Shared>,
}

#[async_trait]
impl Tool for ScheduleUpdateTool {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "schedule_update".into(),
            description: "Change a schedule's prompt or its time (one of the three).".into(),
            parameters: json!({"type":"object","properties":{
                "id":{"type":"string"},
                "prompt":{"type":"string"},
                "after_seconds":{"type":"number"},
                "every_seconds":{"type":"number","minimum":self.shared.min_every()},
                "at":{"type":"string"}
            },"required":["id"]}),
        }
    }
    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }
    async fn execute(&self, args: Value, _ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let id = args["id"].as_str().unwrap_or_default().trim();
        let timed = ["after_seconds", "every_seconds", "at"]
            .iter()
            .any(|k| args.get(k).is_some_and(|v| !v.is_null()));
        let when = timed
            .then(|| when_arg(&args))
            .transpose()
            .map_err(invalid)?;
        let prompt = args["prompt"].as_str();
        if prompt.is_none() && when.is_none() {
            return Err(ToolError::InvalidArgs(
                "give a new prompt, or one of after_seconds, every_seconds or at".into(),
            ));
        }
        let s = self.shared.update(id, prompt, when).map_err(invalid)?;
        let every = s
            .every_seconds
            .map(|e| format!(", every {e} s"))
            .unwrap_or_default();
        Ok(ToolOutput::text(format!(
            "Updated {}: next at {} (in {}){every}.",
            s.id,
            rfc3339(s.due_ms),
            human(s.due_ms - now_ms())
        )))
    }
}

/// `schedule_delete {id}`.
pub struct ScheduleDeleteTool {
    pub(crate) shared: Arc<Shared>,
}

#[async_trait]
impl Tool for ScheduleDeleteTool {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "schedule_delete".into(),
            description: "Delete a schedule by id.".into(),
            parameters: json!({"type":"object","properties":{
                "id":{"type":"string"}
            },"required":["id"]}),
        }
    }
    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }
    async fn execute(&self, args: Value, _ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let id = args["id"].as_str().unwrap_or_default().trim();
        let s = self.shared.delete(id).map_err(invalid)?;
        Ok(ToolOutput::text(format!("Deleted {}.", s.id)))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::print_stderr)]
    use super::*;
    use crate::present::PresentTool;

    /// Every byte of a schema is paid on every request: the five stay small (compact JSON of
    /// name, description and parameters, as the request carries them).
    #[test]
    fn schemas_stay_small() {
        let shared = Shared::new();
        let tools: Vec<Box<dyn Tool>> = vec![
            Box::new(ScheduleCreateTool {
                shared: shared.clone(),
            }),
            Box::new(ScheduleListTool {
                shared: shared.clone(),
            }),
            Box::new(ScheduleUpdateTool {
                shared: shared.clone(),
            }),
            Box::new(ScheduleDeleteTool { shared }),
            Box::new(PresentTool),
        ];
        let mut total = 0;
        for tool in tools {
            let s = tool.schema();
            let bytes = serde_json::to_string(&json!({
                "name": s.name, "description": s.description, "parameters": s.parameters
            }))
            .unwrap()
            .len();
            eprintln!("{} {bytes} B", s.name);
            assert!(bytes <= 330, "{} is {bytes} B", s.name);
            total += bytes;
        }
        eprintln!("total {total} B");
        assert!(total <= 1300, "{total} B");
    }
}
