//! The goal's state, as the log holds it ([`keel_protocol::goal`]: shared with the session view
//! and continuity), and this plugin's rules for it.

pub use keel_protocol::goal::{Fold, Goal, ROUND_EVENT, SET_EVENT, Status};

/// Rounds a goal gets when it names none (dsh's default).
pub const DEFAULT_MAX_ROUNDS: u32 = 256;
/// The most rounds a goal may ask for.
pub const MAX_ROUNDS_LIMIT: u32 = 4096;
/// `blocked` is accepted from this round on (dsh: only after 3 rounds).
pub const BLOCKED_FROM_ROUND: u32 = 3;
