//! The goal's state as the log holds it, and this plugin's rules for it: `goal/set` events
//! carry the whole goal after each change, `goal/round` events `{goalId, round}` one round the
//! driver started. Both are ignorable; [`Fold`] reads them back. Nothing outside this crate
//! reads them: front ends see the goal through the plugin's presenter
//! ([`crate::presenter`]), continuity through the status item it carries.

use keel_protocol::{EventBody, Seq, SessionEvent};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The event of every change to the goal; its data is a [`Goal`].
pub const SET_EVENT: &str = "goal/set";
/// The event of every round the driver starts: `{goalId, round}`.
pub const ROUND_EVENT: &str = "goal/round";
/// How the prompt of a round starts (`<goal_round round="2" …>`): what tells a round's user
/// message from others.
pub const ROUND_PROMPT_START: &str = "<goal_round";

/// Where a goal stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// The driver starts rounds toward it.
    Active,
    /// Set aside: no rounds until it is resumed.
    Paused,
    /// The model said it is done.
    Complete,
    /// The model said it cannot go on (`blockedReason` says why).
    Blocked,
    /// Every round of its budget ran without it completing.
    BudgetSpent,
    /// A person cleared it.
    Cleared,
}

impl Status {
    /// The spelling in events and results.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Active => "active",
            Status::Paused => "paused",
            Status::Complete => "complete",
            Status::Blocked => "blocked",
            Status::BudgetSpent => "budget-spent",
            Status::Cleared => "cleared",
        }
    }

    /// Whether the goal is over: nothing can change it any more but a new goal.
    pub fn is_final(self) -> bool {
        !matches!(self, Status::Active | Status::Paused)
    }
}

/// The goal after one change: the data of a `goal/set` event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Goal {
    /// `g1`, `g2`… in the session.
    pub goal_id: String,
    /// 1 when set, one more at every change.
    pub revision: u64,
    /// What to achieve.
    pub objective: String,
    /// Rounds the driver may start.
    pub max_rounds: u32,
    /// Where it stands.
    pub status: Status,
    /// Why the model says it cannot go on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked_reason: Option<String>,
    /// Who made this change: `user`, `model` or `driver`.
    pub by: String,
}

/// The goal folded from a session's events.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fold {
    /// The last goal set, if any.
    pub goal: Option<Goal>,
    /// Seq of the `goal/set` that set it as it is (`None` when applied without an event).
    pub set_seq: Option<Seq>,
    /// Rounds started toward it.
    pub rounds: u32,
    /// Goals set in the session (the next id is one more).
    pub goals: u64,
}

impl Fold {
    /// Fold `events` in order.
    pub fn of<'a>(events: impl Iterator<Item = &'a SessionEvent>) -> Fold {
        let mut fold = Fold::default();
        for event in events {
            fold.apply(event);
        }
        fold
    }

    /// Apply one event: a `goal/set` or `goal/round`; others, and ones whose data does not
    /// parse (they are ignorable), change nothing.
    pub fn apply(&mut self, event: &SessionEvent) {
        let EventBody::Other(other) = &event.body else {
            return;
        };
        match other.type_name.as_str() {
            SET_EVENT => {
                if let Ok(goal) = Goal::deserialize(&other.data) {
                    self.set(goal);
                    self.set_seq = Some(event.seq);
                }
            }
            ROUND_EVENT => self.round(&other.data),
            _ => {}
        }
    }

    /// Apply a `goal/set`.
    pub fn set(&mut self, goal: Goal) {
        let same = self
            .goal
            .as_ref()
            .is_some_and(|g| g.goal_id == goal.goal_id);
        if !same {
            self.rounds = 0;
            self.goals += 1;
        }
        self.goal = Some(goal);
    }

    /// Apply a `goal/round`.
    pub fn round(&mut self, data: &Value) {
        let of_this = self
            .goal
            .as_ref()
            .is_some_and(|g| data.get("goalId").and_then(Value::as_str) == Some(&g.goal_id));
        if of_this {
            self.rounds += 1;
        }
    }

    /// The goal while it is active or paused.
    pub fn open(&self) -> Option<&Goal> {
        self.goal.as_ref().filter(|g| !g.status.is_final())
    }
}

/// Rounds a goal gets when it names none (dsh's default).
pub const DEFAULT_MAX_ROUNDS: u32 = 256;
/// The most rounds a goal may ask for.
pub const MAX_ROUNDS_LIMIT: u32 = 4096;
/// `blocked` is accepted from this round on (dsh: only after 3 rounds).
pub const BLOCKED_FROM_ROUND: u32 = 3;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn goal(id: &str, revision: u64, status: Status) -> Goal {
        Goal {
            goal_id: id.into(),
            revision,
            objective: "o".into(),
            max_rounds: 5,
            status,
            blocked_reason: None,
            by: "user".into(),
        }
    }

    #[test]
    fn rounds_count_for_the_current_goal_and_restart_with_a_new_one() {
        let mut f = Fold::default();
        f.set(goal("g1", 1, Status::Active));
        f.round(&json!({"goalId": "g1", "round": 1}));
        f.round(&json!({"goalId": "g0", "round": 9}));
        f.set(goal("g1", 2, Status::Paused));
        f.round(&json!({"goalId": "g1", "round": 2}));
        assert_eq!(f.rounds, 2);
        assert!(f.open().is_some());
        f.set(goal("g1", 3, Status::Complete));
        assert!(f.open().is_none());
        f.set(goal("g2", 1, Status::Active));
        assert_eq!((f.rounds, f.goals), (0, 2));
        let text = serde_json::to_value(goal("g2", 1, Status::BudgetSpent)).unwrap();
        assert_eq!(text["status"], "budget-spent");
        assert_eq!(text["maxRounds"], 5);
    }
}
