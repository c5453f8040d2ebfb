//! How a session ended, in one word, for `keel sessions list`: from its last turn's
//! `turn/end` (or the turn still open, or no turn at all).

use crate::Session;
use keel_protocol::{EventBody, TurnEndReason};
use std::path::Path;

/// The last turn is open: the session is being written, or its process died (crash repair
/// closes the turn on the next resume). [`settle`] tells which.
pub(crate) const OPEN: &str = "open";

/// The word for how `session`'s last turn ended: `done`, `failed` (a model error or the output
/// limit), `cancelled`, `blocked` (a hook or policy), `interrupted` (closed by crash repair),
/// [`OPEN`], or `empty` (no turn).
pub(crate) fn of(session: &Session) -> &'static str {
    if session.turn_count() == 0 {
        return "empty";
    }
    if session.turn_state().open_turn.is_some() {
        return OPEN;
    }
    let end = session
        .last_turn_end()
        .and_then(|seq| session.whole_event(seq));
    match end.map(|e| &e.body) {
        Some(EventBody::TurnEnd(t)) => match t.reason {
            TurnEndReason::Completed => "done",
            TurnEndReason::Aborted { .. } => "cancelled",
            TurnEndReason::Blocked { .. } => "blocked",
            TurnEndReason::Error { .. } | TurnEndReason::MaxTokens => "failed",
            TurnEndReason::Interrupted => "interrupted",
        },
        _ => OPEN,
    }
}

/// `outcome` as shown: an [`OPEN`] turn is `running` while a writer's lock sidecar is there
/// (a live process; one killed outright leaves it too), else `interrupted` (crash repair
/// closes it on resume). Read when listed, never cached: the writer may end at any time.
pub(crate) fn settle(session_file: &Path, outcome: String) -> String {
    if outcome != OPEN {
        return outcome;
    }
    if super::lock_path(session_file).exists() {
        "running".to_owned()
    } else {
        "interrupted".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_open_turn_is_running_while_the_lock_sidecar_is_there() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("session.jsonl");
        assert_eq!(settle(&file, "done".into()), "done");
        assert_eq!(settle(&file, OPEN.into()), "interrupted");
        std::fs::write(super::super::lock_path(&file), "1").unwrap();
        assert_eq!(settle(&file, OPEN.into()), "running");
    }
}
