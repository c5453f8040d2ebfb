//! `get_goal`, `create_goal` and `update_goal` with dsh's schemas.

use crate::plugin::{GoalError, Shared, rounds_arg};
use crate::state::{BLOCKED_FROM_ROUND, Fold, Goal, Status};
use async_trait::async_trait;
use keel_protocol::ToolSchema;
use keel_tools::{Tool, ToolContext, ToolEffect, ToolError, ToolOutput};
use serde_json::{Value, json};
use std::sync::Arc;

fn invalid(e: GoalError) -> ToolError {
    ToolError::InvalidArgs(e.0)
}

/// The goal as the model reads it: one JSON object.
fn describe(goal: &Goal, rounds: u32) -> String {
    let mut v = json!({
        "goal_id": goal.goal_id,
        "revision": goal.revision,
        "objective": goal.objective,
        "status": goal.status.as_str(),
        "rounds": rounds,
        "max_goal_rounds": goal.max_rounds,
    });
    if let Some(why) = &goal.blocked_reason {
        v["blocked_reason"] = json!(why);
    }
    v.to_string()
}

/// `get_goal {}`.
pub struct GetGoalTool {
    pub(crate) shared: Arc<Shared>,
}

#[async_trait]
impl Tool for GetGoalTool {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "get_goal".into(),
            description: "The session's goal: id, revision, objective, status and rounds.".into(),
            parameters: json!({"type":"object","properties":{}}),
        }
    }
    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }
    async fn execute(&self, _args: Value, _ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let Fold { goal, rounds, .. } = self.shared.snapshot();
        Ok(ToolOutput::text(match goal {
            Some(goal) => describe(&goal, rounds),
            None => "No goal is set.".to_owned(),
        }))
    }
}

/// `create_goal {objective, max_goal_rounds?}`.
pub struct CreateGoalTool {
    pub(crate) shared: Arc<Shared>,
}

#[async_trait]
impl Tool for CreateGoalTool {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "create_goal".into(),
            description: "Set a goal keel works toward, round after round, until update_goal \
                          ends it."
                .into(),
            parameters: json!({"type":"object","properties":{
                "objective":{"type":"string"},
                "max_goal_rounds":{"type":"number"}
            },"required":["objective"]}),
        }
    }
    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }
    async fn execute(&self, args: Value, _ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let objective = args["objective"].as_str().unwrap_or_default();
        let rounds = rounds_arg(args.get("max_goal_rounds")).map_err(invalid)?;
        let goal = self
            .shared
            .create(objective, rounds, "model")
            .map_err(invalid)?;
        Ok(ToolOutput::text(format!(
            "Goal {} set (revision 1, up to {} rounds). Rounds start when this turn ends.",
            goal.goal_id, goal.max_rounds
        )))
    }
}

/// `update_goal {goal_id, revision, action, objective?, max_goal_rounds?, blocked_reason?}`.
pub struct UpdateGoalTool {
    pub(crate) shared: Arc<Shared>,
}

fn whole(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| {
        v.as_f64()
            .filter(|f| f.fract() == 0.0 && *f >= 0.0)
            .map(|f| f as u64)
    })
}

#[async_trait]
impl Tool for UpdateGoalTool {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "update_goal".into(),
            description: "Change the goal (revision from get_goal): edit, pause, resume, \
                          complete, or blocked with blocked_reason (from round 3)."
                .into(),
            parameters: json!({"type":"object","properties":{
                "goal_id":{"type":"string"},
                "revision":{"type":"number"},
                "action":{"type":"string","enum":["edit","pause","resume","complete","blocked"]},
                "objective":{"type":"string"},
                "max_goal_rounds":{"type":"number"},
                "blocked_reason":{"type":"string"}
            },"required":["goal_id","revision","action"]}),
        }
    }
    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }
    async fn execute(&self, args: Value, _ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let fail = |m: String| Err(ToolError::InvalidArgs(m));
        let Fold { goal, rounds, .. } = self.shared.snapshot();
        let id = args["goal_id"].as_str().unwrap_or_default();
        let Some(goal) = goal.filter(|g| g.goal_id == id) else {
            return fail(format!(
                "goal_id '{id}' is not the session's goal; call get_goal"
            ));
        };
        let Some(revision) = whole(&args["revision"]) else {
            return fail(format!(
                "revision {} is not a whole number",
                args["revision"]
            ));
        };
        if revision != goal.revision {
            return fail(format!(
                "revision {revision} is stale: goal {id} is at revision {}; call get_goal and \
                 decide again",
                goal.revision
            ));
        }
        if goal.status.is_final() {
            return fail(format!(
                "goal {id} is {}: it cannot change any more; set a new one with create_goal",
                goal.status.as_str()
            ));
        }
        let action = args["action"].as_str().unwrap_or_default();
        let mut next = Goal {
            revision: goal.revision + 1,
            by: "model".into(),
            ..goal.clone()
        };
        match action {
            "edit" => {
                let objective = args["objective"].as_str().map(str::trim);
                let max = rounds_arg(args.get("max_goal_rounds")).map_err(invalid)?;
                if objective.is_none() && max.is_none() {
                    return fail("edit needs objective or max_goal_rounds".into());
                }
                if let Some(o) = objective {
                    if o.is_empty() {
                        return fail("objective is empty: say what to achieve".into());
                    }
                    next.objective = o.to_owned();
                }
                if let Some(n) = max {
                    next.max_rounds = n;
                }
            }
            "pause" => next.status = Status::Paused,
            "resume" => next.status = Status::Active,
            "complete" => next.status = Status::Complete,
            "blocked" => {
                if rounds < BLOCKED_FROM_ROUND {
                    return fail(format!(
                        "blocked is accepted from round {BLOCKED_FROM_ROUND} on and goal {id} \
                         has run {rounds}; keep working, or say what is missing and go on"
                    ));
                }
                let why = args["blocked_reason"]
                    .as_str()
                    .map(str::trim)
                    .unwrap_or_default();
                if why.is_empty() {
                    return fail("blocked needs blocked_reason: what stops the work".into());
                }
                next.status = Status::Blocked;
                next.blocked_reason = Some(why.to_owned());
            }
            other => return fail(format!("unknown action '{other}'")),
        }
        let next = self.shared.commit(next).map_err(invalid)?;
        Ok(ToolOutput::text(format!(
            "Goal {id} is now {} (revision {}).",
            next.status.as_str(),
            next.revision
        )))
    }
}
