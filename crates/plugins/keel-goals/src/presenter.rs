//! How the goal shows ([`keel_protocol::present`]): while a goal is open, a status item `goal`
//! (`goal g1 round 2/10`, `goal g1 paused`) carrying the block continuity re-projects once the
//! goal's last round prompt has left the model's history; when the goal ends, the item clears
//! and an outcome says how it ended (the exit code of `keel run --goal`: 0 complete, 3
//! blocked, 4 out of rounds).

use crate::state::{Fold, ROUND_PROMPT_START, Status as GoalStatus};
use keel_protocol::present::{Carry, Item, MakePresenter, Outcome, Presenter, Status};
use keel_protocol::{ContentBlock, EventBody, Seq, SessionEvent};
use std::sync::Arc;

/// Exit code of a goal that is blocked.
pub const EXIT_BLOCKED: u8 = 3;
/// Exit code of a goal whose rounds are spent.
pub const EXIT_SPENT: u8 = 4;

/// The goals plugin's presenter.
pub fn presenter() -> MakePresenter {
    Arc::new(|| Box::new(GoalPresenter::default()))
}

#[derive(Default)]
struct GoalPresenter {
    fold: Fold,
    /// Seq of the last `<goal_round>` prompt.
    round_prompt: Option<Seq>,
    /// What was last shown: the status item, and the final revision an outcome was given for.
    shown: Option<Status>,
    ended: Option<(String, u64)>,
}

impl GoalPresenter {
    fn status(&self) -> Option<Status> {
        let g = self.fold.open()?;
        let text = match g.status {
            GoalStatus::Paused => format!("goal {} paused", g.goal_id),
            _ => format!(
                "goal {} round {}/{}",
                g.goal_id, self.fold.rounds, g.max_rounds
            ),
        };
        let seq = self.fold.set_seq.unwrap_or(Seq(0));
        Some(Status {
            text,
            carry: Some(Carry {
                title: format!(
                    "The session's goal (goal {}, revision {}, {}, round {} of {}; goal/set seq {})",
                    g.goal_id,
                    g.revision,
                    g.status.as_str(),
                    self.fold.rounds,
                    g.max_rounds,
                    seq
                ),
                body: g.objective.clone(),
                seq,
                // A round prompt older than the goal's last change (and no round since) says
                // nothing about the goal as it is.
                anchor: self
                    .round_prompt
                    .filter(|p| *p > seq || self.fold.rounds > 0),
            }),
        })
    }

    fn outcome(&self) -> Option<Outcome> {
        let g = self.fold.goal.as_ref()?;
        let (id, rounds) = (&g.goal_id, self.fold.rounds);
        Some(match g.status {
            GoalStatus::Complete => Outcome {
                code: 0,
                text: format!("goal {id} complete after {rounds} rounds"),
            },
            GoalStatus::Blocked => Outcome {
                code: EXIT_BLOCKED,
                text: format!(
                    "goal {id} blocked after {rounds} rounds: {}",
                    g.blocked_reason.as_deref().unwrap_or("no reason given")
                ),
            },
            GoalStatus::BudgetSpent => Outcome {
                code: EXIT_SPENT,
                text: format!(
                    "goal {id} not complete: its {} rounds are spent",
                    g.max_rounds
                ),
            },
            _ => return None,
        })
    }
}

impl Presenter for GoalPresenter {
    fn present(&mut self, event: &SessionEvent, out: &mut Vec<Item>) {
        match &event.body {
            EventBody::Other(_) => {
                let before = (self.fold.set_seq, self.fold.rounds);
                self.fold.apply(event);
                if before == (self.fold.set_seq, self.fold.rounds) {
                    return;
                }
            }
            EventBody::UserMessage(m)
                if m.content.iter().any(|b| {
                    matches!(b, ContentBlock::Text { text } if text.starts_with(ROUND_PROMPT_START))
                }) =>
            {
                self.round_prompt = Some(event.seq);
            }
            _ => return,
        }
        let status = self.status();
        if status != self.shown {
            out.push(Item::Status {
                key: "goal".into(),
                status: status.clone(),
            });
            self.shown = status;
        }
        if let (Some(outcome), Some(g)) = (self.outcome(), &self.fold.goal) {
            let end = (g.goal_id.clone(), g.revision);
            if self.ended.as_ref() != Some(&end) {
                self.ended = Some(end);
                out.push(Item::Outcome(outcome));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::state::{Goal, ROUND_EVENT, SET_EVENT};
    use keel_protocol::{Message, MessageSource, OtherEvent};
    use serde_json::json;

    fn other(seq: u64, ty: &str, data: serde_json::Value) -> SessionEvent {
        let o = OtherEvent {
            type_name: ty.into(),
            data,
        };
        SessionEvent::new(Seq(seq), 0, EventBody::Other(Box::new(o)))
    }

    fn set(seq: u64, revision: u64, status: GoalStatus) -> SessionEvent {
        let goal = Goal {
            goal_id: "g1".into(),
            revision,
            objective: "make the tests pass".into(),
            max_rounds: 10,
            status,
            blocked_reason: None,
            by: "model".into(),
        };
        other(seq, SET_EVENT, serde_json::to_value(goal).unwrap())
    }

    #[test]
    fn an_open_goal_is_a_status_item_and_its_end_an_outcome() {
        let mut p = presenter()();
        let mut out = Vec::new();
        p.present(&set(2, 1, GoalStatus::Active), &mut out);
        p.present(
            &other(3, ROUND_EVENT, json!({"goalId": "g1", "round": 1})),
            &mut out,
        );
        let prompt = Message::user_text(
            format!("{ROUND_PROMPT_START} round=\"1\">"),
            MessageSource::plugin("goals"),
            "m",
        );
        p.present(
            &SessionEvent::new(Seq(4), 0, EventBody::UserMessage(Box::new(prompt))),
            &mut out,
        );
        p.present(&set(9, 2, GoalStatus::Complete), &mut out);
        // Replayed or not, one outcome per final revision.
        p.present(&set(9, 2, GoalStatus::Complete), &mut out);
        let texts: Vec<String> = out
            .iter()
            .map(|i| match i {
                Item::Status {
                    status: Some(s), ..
                } => {
                    let c = s.carry.as_ref().unwrap();
                    format!("{} | {} @{:?}", s.text, c.title, c.anchor)
                }
                Item::Status { status: None, .. } => "cleared".into(),
                Item::Outcome(o) => format!("{} {}", o.code, o.text),
                other => format!("{other:?}"),
            })
            .collect();
        assert_eq!(
            texts,
            [
                "goal g1 round 0/10 | The session's goal (goal g1, revision 1, active, round 0 of 10; goal/set seq 2) @None",
                "goal g1 round 1/10 | The session's goal (goal g1, revision 1, active, round 1 of 10; goal/set seq 2) @None",
                "goal g1 round 1/10 | The session's goal (goal g1, revision 1, active, round 1 of 10; goal/set seq 2) @Some(Seq(4))",
                "cleared",
                "0 goal g1 complete after 1 rounds",
            ]
        );
    }
}
