//! keel's goals plugin (dsh's `dsh-tool-goal`): a person or the model sets one durable goal
//! per session, and keel keeps starting turns toward it until the model says it is complete or
//! blocked, or the round budget is spent.
//!
//! - **State** lives in the session log: every change is an ignorable `goal/set` event holding
//!   the whole goal (`goalId`, `revision`, `objective`, `maxRounds`, `status`,
//!   `blockedReason`, `by`), every round the driver starts a `goal/round` `{goalId, round}`.
//!   A resumed session folds them back ([`state::Fold`]), so a resume cannot reset the budget.
//! - **Tools** with dsh's schemas: `get_goal`, `create_goal {objective, max_goal_rounds?}`,
//!   `update_goal {goal_id, revision, action, objective?, max_goal_rounds?, blocked_reason?}`
//!   ([`tools`]). A stale revision is refused naming both revisions; `blocked` only from the
//!   third round on. `get_goal` and `update_goal` are offered once the session has a goal.
//! - **The driver** ([`plugin`]) is an `agent/turn-stopping` hook: when a turn completes and
//!   the goal is active with rounds left, it logs the next `goal/round` and queues a
//!   `<goal_round>` follow-up turn. A person's prompt waiting in the inbox goes first; the
//!   driver starts the next round after that turn.
//! - **`/goal OBJECTIVE`** (`/goal --max-rounds N OBJECTIVE`) sets the goal and sends round 1;
//!   `keel run --goal` does the same headless.
//! - **How it shows** ([`presenter`]): a status item while the goal is open, an outcome when
//!   it ends, in every front end.
#![deny(missing_docs)]

pub mod plugin;
pub mod presenter;
pub mod state;
pub mod tools;

pub use plugin::{GoalsPlugin, ID};
pub use state::{
    DEFAULT_MAX_ROUNDS, Fold, Goal, ROUND_EVENT, ROUND_PROMPT_START, SET_EVENT, Status,
};
