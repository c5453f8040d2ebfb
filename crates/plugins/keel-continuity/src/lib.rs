//! keel-continuity: keeps the execution basis — the human's exact words, the approved plan,
//! the todo list, what delegated children returned, and the session's lineage — across the
//! lossy boundaries of a long task: a surface replacement (compaction, pruning), a cold resume
//! of a session whose surface holds one, the first request of a subagent.
//!
//! Everything is folded from the session log ([`basis`]), checked against anchors kept outside
//! the workspace ([`anchors`]), rendered bounded ([`render`]) and delivered once per boundary
//! through the runtime-context channel ([`plugin`]). Before the first boundary the plugin adds
//! nothing to any request. Opt-in explicit control ([`control`]) adds a durable task contract,
//! five tools and a `tools/guard` on write/edit/bash. Design: `docs/continuity.md`.
#![deny(missing_docs)]

pub mod anchors;
pub mod basis;
pub mod continuation;
pub mod control;
mod plugin;
pub mod presenter;
pub mod render;
pub mod show;

pub use control::ControlMode;
pub use plugin::{ContinuityConfig, ContinuityPlugin, ID, PROJECTION_EVENT};
