//! `todo_write` (the whole todo list, logged as `todo/write`) and `exit_plan_mode` (asks the
//! user to approve a plan; on approval ends plan mode and logs `plan/mode`; when nobody can
//! answer now, hands the plan to the user and ends the turn, see [`crate::plan`]).

use super::parse;
use crate::caller::{ApprovalOutcome, Handoff};
use crate::error::ToolError;
use crate::plan::{PLAN_AWAITS_APPROVAL, PlanState};
use crate::tool::{ExecMode, Tool, ToolContext, ToolEffect, ToolOutput};
use async_trait::async_trait;
use keel_protocol::ToolSchema;
use keel_protocol::{EventBody, PlanModeEvent, TodoStatus, TodoWrite};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

/// The `todo_write` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct TodoWriteTool;

#[async_trait]
impl Tool for TodoWriteTool {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "todo_write".into(),
            description: "Replace the whole todo list. For work of 3+ steps: one item \
                          in_progress; mark items completed when done."
                .into(),
            parameters: json!({"type":"object","properties":{
                "todos":{"type":"array","items":{"type":"object","properties":{
                    "content":{"type":"string","minLength":1},
                    "status":{"type":"string","enum":["pending","in_progress","completed"]},
                    "activeForm":{"type":"string","description":"Present-continuous form, e.g. 'Running tests'."}
                },"required":["content","status"]}}
            },"required":["todos"]}),
        }
    }
    fn mode(&self) -> ExecMode {
        ExecMode::Exclusive
    }
    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }
    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let list: TodoWrite = parse(args)?;
        let count = |s: TodoStatus| list.todos.iter().filter(|t| t.status == s).count();
        let (done, active, pending) = (
            count(TodoStatus::Completed),
            count(TodoStatus::InProgress),
            count(TodoStatus::Pending),
        );
        let text = format!(
            "Todo list saved: {} items ({done} completed, {active} in progress, {pending} pending).",
            list.todos.len()
        );
        ctx.caller.emit(EventBody::TodoWrite(Box::new(list))).await;
        Ok(ToolOutput::text(text))
    }
}

/// The `exit_plan_mode` tool.
#[derive(Debug, Clone, Default)]
pub struct ExitPlanModeTool {
    plan: Arc<PlanState>,
}

impl ExitPlanModeTool {
    /// An `exit_plan_mode` tool acting on `plan`.
    pub fn new(plan: Arc<PlanState>) -> Self {
        ExitPlanModeTool { plan }
    }
}

#[derive(Deserialize)]
struct ExitArgs {
    plan: String,
}

#[async_trait]
impl Tool for ExitPlanModeTool {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "exit_plan_mode".into(),
            description: "In plan mode, submit your plan for the user's approval. If approved, \
                          plan mode ends and you carry out the plan; if not, revise it."
                .into(),
            parameters: json!({"type":"object","properties":{
                "plan":{"type":"string","minLength":1,"description":"Concise markdown steps."}
            },"required":["plan"]}),
        }
    }
    fn mode(&self) -> ExecMode {
        ExecMode::Exclusive
    }
    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }
    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let a: ExitArgs = parse(args)?;
        if !self.plan.is_active() {
            return Err(ToolError::Failed(
                "plan mode is not active; there is nothing to exit. Proceed with the task.".into(),
            ));
        }
        let decided = ctx
            .caller
            .ask_approval(ctx.call, "approve the plan and leave plan mode")
            .await;
        let approved = decided.is_approved();
        if approved {
            self.plan.set_active(false);
        }
        ctx.caller
            .emit(EventBody::PlanMode(Box::new(PlanModeEvent {
                active: !approved,
                plan: Some(a.plan.clone()),
                approved: Some(approved),
            })))
            .await;
        let text = match decided {
            ApprovalOutcome::Approved => {
                "The user approved the plan. Plan mode is off: carry out the plan now.".to_owned()
            }
            ApprovalOutcome::Denied { reason } => format!(
                "The user did not approve the plan{}. Plan mode stays on: revise the plan and \
                 call exit_plan_mode again.",
                reason.map(|r| format!(" ({r})")).unwrap_or_default()
            ),
            ApprovalOutcome::Unanswered { .. } => {
                // Nobody can approve now: the plan goes to the user as this turn's answer and
                // the turn ends; they approve (or ask for changes) in a later turn.
                ctx.caller.hand_off(Handoff {
                    reason: PLAN_AWAITS_APPROVAL.to_owned(),
                    answer: a.plan,
                });
                return Ok(ToolOutput::text(PLAN_HANDED_OFF)
                    .with_value(json!({"approved": false, "handedOff": true})));
            }
        };
        Ok(ToolOutput::text(text).with_value(json!({"approved": approved})))
    }
}

/// What the model reads when its plan was handed to the user because nobody could approve it
/// now.
pub const PLAN_HANDED_OFF: &str = "Nobody can approve the plan right now, so it was handed to the \
user for review and this turn ends here. Plan mode stays on: make no changes. The user answers \
in a later message: revise the plan if they ask for changes, or carry it out once they approve it.";
