//! The `goals` plugin: the shared goal state, the round driver and `/goal`.

use crate::state::{
    DEFAULT_MAX_ROUNDS, Fold, Goal, MAX_ROUNDS_LIMIT, ROUND_EVENT, ROUND_PROMPT_START, SET_EVENT,
    Status,
};
use crate::tools::{CreateGoalTool, GetGoalTool, UpdateGoalTool};
use futures::FutureExt;
use futures::future::BoxFuture;
use keel_agent::modes::SerialHook;
use keel_agent::plugin::{
    CommandError, CommandSource, InstallContext, Plugin, PluginCommand, PluginError, PluginId,
};
use keel_agent::seams::{StopDecision, TurnStopping};
use keel_agent::{AgentHandle, AgentSlot, InboxMode};
use keel_protocol::sync::Locked;
use keel_protocol::{Message, MessageSource, TurnEndReason};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};

/// The plugin's id (`[[plugins]] use = "goals"`).
pub const ID: PluginId = keel_agent::plugin_id!("goals");

/// The goals plugin (on by default; it adds three small tools and `/goal`).
#[derive(Debug, Clone, Copy, Default)]
pub struct GoalsPlugin;

/// Why a goal could not be set or changed: the model-facing (or person-facing) message.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct GoalError(pub String);

/// What the tools, the driver and the command of one agent share: its goal, folded from its
/// log when the agent is bound and kept in step with every event this plugin appends.
#[derive(Debug, Default)]
pub struct Shared {
    slot: AgentSlot,
    fold: Mutex<Fold>,
}

impl Shared {
    /// The goal and its rounds now.
    pub fn snapshot(&self) -> Fold {
        self.fold.locked().clone()
    }

    /// Whether the session has had a goal (then `get_goal` and `update_goal` are offered).
    pub fn has_goal(&self) -> bool {
        self.fold.locked().goal.is_some()
    }

    fn agent(&self) -> Result<AgentHandle, GoalError> {
        self.slot
            .get()
            .ok_or_else(|| GoalError("the goal is not available before the agent starts".into()))
    }

    fn bind(&self, agent: &AgentHandle) {
        self.slot.bind(agent);
        *self.fold.locked() = agent.with_session(|s| Fold::of(s.whole_event_iter()));
    }

    /// Log `goal` as the goal's new state.
    pub fn commit(&self, goal: Goal) -> Result<Goal, GoalError> {
        let data = serde_json::to_value(&goal).unwrap_or(Value::Null);
        let seq = self
            .agent()?
            .push_ignorable(SET_EVENT, data)
            .map_err(|e| GoalError(format!("the goal could not be logged: {e}")))?;
        let mut fold = self.fold.locked();
        fold.set(goal.clone());
        fold.set_seq = Some(seq);
        Ok(goal)
    }

    /// Set a new goal (none may be open).
    pub fn create(
        &self,
        objective: &str,
        max_rounds: Option<u32>,
        by: &str,
    ) -> Result<Goal, GoalError> {
        let fold = self.snapshot();
        if let Some(open) = fold.open() {
            return Err(GoalError(format!(
                "a goal is already set ({}, {}, revision {}): change it with update_goal, or \
                 finish it (complete or blocked) before setting another",
                open.goal_id,
                open.status.as_str(),
                open.revision
            )));
        }
        let objective = objective.trim();
        if objective.is_empty() {
            return Err(GoalError(
                "the objective is empty: say what to achieve".into(),
            ));
        }
        let max_rounds = check_rounds(max_rounds)?;
        self.commit(Goal {
            goal_id: format!("g{}", fold.goals + 1),
            revision: 1,
            objective: objective.to_owned(),
            max_rounds,
            status: Status::Active,
            blocked_reason: None,
            by: by.to_owned(),
        })
    }

    /// `/goal` alone: where the goal stands, for a person.
    fn status(&self) -> String {
        let fold = self.snapshot();
        match fold.goal {
            None => "No goal is set. Set one with /goal OBJECTIVE.".into(),
            Some(g) => format!(
                "Goal {} ({}, revision {}, round {} of {}): {}",
                g.goal_id,
                g.status.as_str(),
                g.revision,
                fold.rounds,
                g.max_rounds,
                g.objective
            ),
        }
    }

    /// The open goal, for a change a person asks for.
    fn open_goal(&self) -> Result<Goal, GoalError> {
        self.snapshot()
            .open()
            .cloned()
            .ok_or_else(|| GoalError("there is no open goal; set one with /goal OBJECTIVE".into()))
    }

    /// `/goal pause`, `/goal clear`, `/goal edit OBJECTIVE` (`objective`: an edit, which
    /// keeps the goal's status).
    fn person(&self, status: Status, objective: Option<&str>) -> Result<String, GoalError> {
        let goal = self.open_goal()?;
        let mut next = Goal {
            revision: goal.revision + 1,
            by: "user".into(),
            ..goal.clone()
        };
        match objective {
            Some("") => return Err(GoalError("/goal edit needs the new objective".into())),
            Some(text) => next.objective = text.to_owned(),
            None => next.status = status,
        }
        let next = self.commit(next)?;
        Ok(match objective {
            Some(_) => format!(
                "Goal {} now reads: {} (revision {}; from the next round).",
                next.goal_id, next.objective, next.revision
            ),
            None => format!(
                "Goal {} is {} (revision {}).",
                next.goal_id,
                next.status.as_str(),
                next.revision
            ),
        })
    }

    /// `/goal resume`: a paused goal is active again (its next round is sent at once).
    fn resume(&self) -> Result<Goal, GoalError> {
        let goal = self.open_goal()?;
        if goal.status != Status::Paused {
            return Err(GoalError(format!("goal {} is not paused", goal.goal_id)));
        }
        self.commit(Goal {
            revision: goal.revision + 1,
            status: Status::Active,
            by: "user".into(),
            ..goal
        })
    }

    /// Log the start of the next round of `goal`; its number.
    fn start_round(&self, goal: &Goal) -> Result<u32, GoalError> {
        let round = self.snapshot().rounds + 1;
        let data = json!({"goalId": goal.goal_id, "round": round});
        self.agent()?
            .push_ignorable(ROUND_EVENT, data.clone())
            .map_err(|e| GoalError(format!("the round could not be logged: {e}")))?;
        self.fold.locked().round(&data);
        Ok(round)
    }

    /// After a completed turn: start the next round of the active goal (queue its turn), or
    /// mark the goal's budget spent. Nothing when no goal is active.
    fn drive(&self, agent: &AgentHandle) -> Result<(), GoalError> {
        let fold = self.snapshot();
        let Some(goal) = fold.goal.filter(|g| g.status == Status::Active) else {
            return Ok(());
        };
        if fold.rounds >= goal.max_rounds {
            self.commit(Goal {
                revision: goal.revision + 1,
                status: Status::BudgetSpent,
                by: "driver".into(),
                ..goal
            })?;
            return Ok(());
        }
        let round = self.start_round(&goal)?;
        agent
            .enqueue(InboxMode::Followup, round_message(&goal, round))
            .map_err(|e| GoalError(format!("the round could not be queued: {e}")))?;
        Ok(())
    }
}

fn check_rounds(max_rounds: Option<u32>) -> Result<u32, GoalError> {
    match max_rounds {
        None => Ok(DEFAULT_MAX_ROUNDS),
        Some(n) if (1..=MAX_ROUNDS_LIMIT).contains(&n) => Ok(n),
        Some(n) => Err(GoalError(format!(
            "max_goal_rounds {n} is out of range: 1 to {MAX_ROUNDS_LIMIT}"
        ))),
    }
}

pub(crate) fn rounds_arg(value: Option<&Value>) -> Result<Option<u32>, GoalError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| {
                GoalError(format!(
                    "max_goal_rounds {v} is not a whole number of rounds"
                ))
            }),
    }
}

/// The user message of round `round`.
pub fn round_message(goal: &Goal, round: u32) -> Message {
    let text = format!(
        "{ROUND_PROMPT_START} round=\"{round}\" max=\"{}\" goal_id=\"{}\" revision=\"{}\">\n{}\n\nKeep \
         working toward this goal. When it is achieved, call update_goal with action \
         \"complete\"; if you cannot go on, \"blocked\" with blocked_reason (accepted from round \
         3).\n</goal_round>",
        goal.max_rounds, goal.goal_id, goal.revision, goal.objective
    );
    Message::user_text(
        text,
        MessageSource::plugin(ID.source()),
        uuid::Uuid::new_v4().to_string(),
    )
}

fn driver(shared: Arc<Shared>) -> SerialHook<TurnStopping, StopDecision> {
    Arc::new(move |t: &TurnStopping| {
        let shared = shared.clone();
        let agent = t.agent.clone();
        let completed = t.reason == TurnEndReason::Completed;
        async move {
            // A person's prompt waiting in the inbox goes first; the next round follows it.
            if completed && !agent.has_pending_turn() {
                // A log that cannot be written stops the loop on its own next write.
                let _ = shared.drive(&agent);
            }
            StopDecision::Stop
        }
        .boxed()
    })
}

/// `/goal [--max-rounds N] OBJECTIVE`.
struct GoalCommand {
    shared: Arc<Shared>,
}

/// `--max-rounds N` at the front of `/goal`'s arguments, and the objective after it.
pub fn parse_goal_args(args: &str) -> Result<(Option<u32>, &str), GoalError> {
    let args = args.trim();
    let Some(rest) = args.strip_prefix("--max-rounds") else {
        return Ok((None, args));
    };
    let rest = rest.trim_start();
    let (n, objective) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    let n = n
        .parse::<u32>()
        .map_err(|_| GoalError(format!("--max-rounds needs a number of rounds, not {n:?}")))?;
    Ok((Some(n), objective.trim()))
}

impl CommandSource for GoalCommand {
    fn commands(&self) -> Vec<PluginCommand> {
        vec![PluginCommand {
            name: "goal".into(),
            description: "Set a goal keel keeps working toward, round after round".into(),
            argument_hint: Some(
                "[--max-rounds N] OBJECTIVE | edit OBJECTIVE | pause | resume | clear".into(),
            ),
        }]
    }

    fn act(&self, _name: &str, args: &str) -> Option<Result<String, CommandError>> {
        let args = args.trim();
        let (word, rest) = args.split_once(char::is_whitespace).unwrap_or((args, ""));
        let done = match word {
            "" => Ok(self.shared.status()),
            "pause" if rest.is_empty() => self.shared.person(Status::Paused, None),
            "clear" if rest.is_empty() => self.shared.person(Status::Cleared, None),
            "edit" => self.shared.person(Status::Active, Some(rest.trim())),
            _ => return None,
        };
        Some(done.map_err(|e| CommandError::Failed(Box::new(e))))
    }

    fn expand<'a>(
        &'a self,
        _name: &'a str,
        args: &'a str,
    ) -> BoxFuture<'a, Result<String, CommandError>> {
        async move {
            let failed = |e: GoalError| CommandError::Failed(Box::new(e));
            if args.trim() == "resume" {
                let goal = self.shared.resume().map_err(failed)?;
                let round = self.shared.start_round(&goal).map_err(failed)?;
                return Ok(round_message(&goal, round).text());
            }
            let (max_rounds, objective) = parse_goal_args(args).map_err(failed)?;
            if objective.is_empty() {
                return Err(failed(GoalError(
                    "/goal needs an objective: /goal [--max-rounds N] OBJECTIVE".into(),
                )));
            }
            let goal = self
                .shared
                .create(objective, max_rounds, "user")
                .map_err(failed)?;
            let round = self.shared.start_round(&goal).map_err(failed)?;
            Ok(round_message(&goal, round).text())
        }
        .boxed()
    }
}

impl Plugin for GoalsPlugin {
    fn id(&self) -> PluginId {
        ID
    }

    fn description(&self) -> &'static str {
        "goal loops: get_goal, create_goal, update_goal, /goal and a driver that starts rounds until the goal is complete or blocked"
    }

    fn enabled_by_default(&self) -> bool {
        true
    }

    fn presenter(&self) -> Option<keel_protocol::present::MakePresenter> {
        Some(crate::presenter::presenter())
    }

    fn install(&self, ctx: &mut InstallContext, _config: Value) -> Result<(), PluginError> {
        let shared = Arc::new(Shared::default());
        ctx.tools.push(Arc::new(GetGoalTool {
            shared: shared.clone(),
        }));
        ctx.tools.push(Arc::new(CreateGoalTool {
            shared: shared.clone(),
        }));
        ctx.tools.push(Arc::new(UpdateGoalTool {
            shared: shared.clone(),
        }));
        ctx.commands.push(Arc::new(GoalCommand {
            shared: shared.clone(),
        }));
        ctx.agent_hooks.turn_stopping.push(driver(shared.clone()));
        ctx.on_agent.push(Box::new(move |agent| shared.bind(agent)));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn goal_arguments_take_an_optional_round_budget_first() {
        assert_eq!(parse_goal_args(" fix it ").unwrap(), (None, "fix it"));
        assert_eq!(
            parse_goal_args("--max-rounds 3 fix it").unwrap(),
            (Some(3), "fix it")
        );
        assert!(parse_goal_args("--max-rounds three fix").is_err());
        assert_eq!(parse_goal_args("--max-rounds 2").unwrap(), (Some(2), ""));
    }
}
