//! Workflows and ralph: two plugins (ids `workflow` and `ralph`, off by default) that run child
//! agents through keel-agent's [`Spawner`](keel_agent::subagent::Spawner).
//!
//! - `workflow {script, meta, args?}`: a model-written JavaScript (or TypeScript) body run in
//!   Code Mode's engine (one fresh QuickJS runtime per workflow, no ambient authority) whose
//!   `agent()`, `parallel()`, `pipeline()`, `phase()` and `log()` fan out children and return
//!   JSON ([`workflow`]).
//! - `ralph {objective, maxRounds?}`: rounds of fresh children with the workspace as memory and
//!   a structured hand-off between rounds ([`ralph`]).
//!
//! They live in Code Mode's crate because they run its engine (keel's layering keeps plugin
//! crates from depending on one another), and share the child plumbing ([`children`]: start,
//! run, hold a JSON answer to a schema) and the schema checks ([`schema`]).

pub mod children;
pub mod plugin;
pub mod presenter;
pub mod ralph;
pub mod schema;
pub mod workflow;

pub use plugin::{RalphPlugin, WorkflowPlugin, WorkflowSettings};
