//! The `ralph {objective, maxRounds?}` tool: rounds of fresh children in the same workspace.
//! Each child gets the objective, its round number and the previous round's hand-off; it ends
//! its answer with a hand-off object ([`handoff_schema`]), checked like a workflow agent's
//! schema (told why once, then the round fails). The rounds stop when a child says `done`,
//! when a round fails, or when they run out.
//!
//! ```text
//! ralph call ─► round r: Spawner::start (spawn, via "ralph") ─► ralph/round running
//!   ─► child turn ─► hand-off {status, summary, next} ─► ralph/round {status}
//!   ─► done? stop : round r+1 with the hand-off in its prompt
//! ```

use crate::flow::children::{run_child, schema_instruction};
use crate::flow::presenter as present;
use async_trait::async_trait;
use keel_agent::subagent::{ChildTask, Spawner, SubagentMode};
use keel_protocol::ToolSchema;
use keel_tools::{Tool, ToolContext, ToolEffect, ToolError, ToolOutput};
use serde_json::{Value, json};
use std::sync::Arc;

/// The tool's name.
pub const RALPH: &str = "ralph";
/// Rounds when `maxRounds` is not given.
pub const DEFAULT_ROUNDS: u64 = 8;
/// Most rounds one call may ask for.
pub const MAX_ROUNDS: u64 = 64;

/// The hand-off every round's child ends with.
pub fn handoff_schema() -> Value {
    json!({"type": "object", "required": ["status", "summary"], "properties": {
        "status": {"enum": ["continue", "done"]},
        "summary": {"type": "string"},
        "next": {"type": "string"}
    }})
}

/// The prompt of round `round` of `max`.
pub fn round_prompt(objective: &str, round: u64, max: u64, previous: Option<&Value>) -> String {
    let before = match previous {
        Some(h) => format!("The previous round's hand-off:\n{h}"),
        None => "This is the first round: there is no hand-off yet.".to_owned(),
    };
    format!(
        "Objective:\n{objective}\n\nThis is round {round} of at most {max}. You are a fresh agent: \
         the workspace (its files) is the memory between rounds. {before}\n\nMake progress on \
         the objective, leaving your work in the workspace. Set status \"done\" when the \
         objective is met, \"continue\" otherwise; say in summary what you did and in next what \
         the next round should do.{}",
        schema_instruction(&handoff_schema())
    )
}

/// The `ralph` tool of one agent.
#[derive(Debug)]
pub struct RalphTool {
    spawner: Arc<Spawner>,
}

impl RalphTool {
    /// The tool, starting its rounds through `spawner`.
    pub fn new(spawner: Arc<Spawner>) -> Self {
        RalphTool { spawner }
    }
}

#[async_trait]
impl Tool for RalphTool {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: RALPH.into(),
            description: "Work on an objective in rounds of fresh subagents (the workspace is \
                          their memory; each hands off to the next) until one says done. \
                          maxRounds: default 8, at most 64."
                .into(),
            parameters: json!({"type":"object","properties":{
                "objective":{"type":"string"},
                "maxRounds":{"type":"number"}
            },"required":["objective"]}),
        }
    }

    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }

    fn timeout(&self) -> Option<std::time::Duration> {
        None
    }

    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let objective = match args.get("objective") {
            Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
            _ => {
                return Err(ToolError::InvalidArgs(
                    "`objective` must be a non-empty string".into(),
                ));
            }
        };
        let max = match args.get("maxRounds") {
            None | Some(Value::Null) => DEFAULT_ROUNDS,
            Some(v) => match v.as_f64() {
                Some(f) if f.fract() == 0.0 && (1.0..=MAX_ROUNDS as f64).contains(&f) => f as u64,
                _ => {
                    return Err(ToolError::InvalidArgs(format!(
                        "`maxRounds` must be a whole number from 1 to {MAX_ROUNDS}, not {v}"
                    )));
                }
            },
        };
        let Some(agent) = keel_agent::calling_agent(ctx) else {
            return Err(ToolError::Failed(
                "ralph runs only inside an agent (it needs the agent's children)".into(),
            ));
        };
        let schema = handoff_schema();
        let call_id = ctx.call.id.clone();
        let mut rounds: Vec<Value> = Vec::new();
        let mut previous: Option<Value> = None;
        let mut status = "rounds_exhausted";
        for round in 1..=max {
            if ctx.cancel.is_cancelled() {
                status = "cancelled";
                break;
            }
            let prompt = round_prompt(&objective, round, max, previous.as_ref());
            let description = format!("ralph round {round}");
            let task = ChildTask {
                mode: SubagentMode::Spawn,
                via: Some(RALPH),
                ..ChildTask::new(&description, &prompt)
            };
            let event = |session: &str, st: &str, error: Option<&str>| {
                json!({"callId": call_id, "round": round, "childSession": session,
                       "status": st, "error": error})
            };
            let answer = run_child(&self.spawner, ctx, task, Some(&schema), &ctx.cancel, |s| {
                let _ = agent.push_ignorable(present::ROUND_EVENT, event(s, "running", None));
            })
            .await
            .map_err(|why| ToolError::Failed(format!("round {round} could not start: {why}")))?;
            match answer.result {
                Ok(handoff) => {
                    let done = handoff["status"] == "done";
                    let st = if done { "done" } else { "continue" };
                    let _ = agent.push_ignorable(
                        present::ROUND_EVENT,
                        event(&answer.child_session, st, None),
                    );
                    rounds.push(
                        json!({"round": round, "status": st, "childSession": answer.child_session,
                                       "summary": handoff["summary"], "next": handoff.get("next")}),
                    );
                    previous = Some(handoff);
                    if done {
                        status = "done";
                        break;
                    }
                }
                Err(why) => {
                    let why = why.to_string();
                    let _ = agent.push_ignorable(
                        present::ROUND_EVENT,
                        event(&answer.child_session, "failed", Some(&why)),
                    );
                    rounds.push(json!({"round": round, "status": "failed",
                                       "childSession": answer.child_session, "error": why}));
                    status = if ctx.cancel.is_cancelled() {
                        "cancelled"
                    } else {
                        "failed"
                    };
                    break;
                }
            }
        }
        if status == "cancelled" {
            return Err(ToolError::Aborted(format!(
                "ralph was cancelled in round {}; its child was stopped",
                rounds.len()
            )));
        }
        let result = json!({"status": status, "rounds": rounds});
        Ok(ToolOutput::text(result.to_string()).with_value(result))
    }
}
