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

/// `outcome` as shown: an [`OPEN`] turn is `running` while a writer holds the session (its lock
/// sidecar names a live process), else `interrupted` (its process died; crash repair closes the
/// turn on resume). Read when listed, never cached: the writer may end at any time.
pub(crate) fn settle(session_file: &Path, outcome: String) -> String {
    if outcome != OPEN {
        return outcome;
    }
    if writer_alive(&super::lock_path(session_file)) {
        "running".to_owned()
    } else {
        "interrupted".to_owned()
    }
}

/// Whether the lock sidecar `lock` names a live process. A sidecar left behind by a process
/// killed outright names a dead one; one whose pid is not written yet counts as alive. The
/// sidecar is only read (never locked, which could make a starting writer see it busy).
fn writer_alive(lock: &Path) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    let mut text = String::new();
    let read = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(lock)
        .and_then(|f| std::io::Read::read_to_string(&mut std::io::Read::take(f, 64), &mut text));
    if read.is_err() {
        return false;
    }
    match text.trim().parse::<libc::pid_t>() {
        Ok(pid) if pid > 0 => {
            // SAFETY: signal 0 sends nothing; it only asks whether `pid` exists.
            let exists = unsafe { libc::kill(pid, 0) } == 0;
            exists || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
        }
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_open_turn_is_running_while_a_live_process_holds_the_sidecar() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("session.jsonl");
        let lock = super::super::lock_path(&file);
        assert_eq!(settle(&file, "done".into()), "done");
        assert_eq!(settle(&file, OPEN.into()), "interrupted");
        std::fs::write(&lock, format!("{}\n", std::process::id())).unwrap();
        assert_eq!(settle(&file, OPEN.into()), "running");
        // Being written: no pid yet.
        std::fs::write(&lock, "").unwrap();
        assert_eq!(settle(&file, OPEN.into()), "running");
        // Left behind by a process that died.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        std::fs::write(&lock, format!("{dead}\n")).unwrap();
        assert_eq!(settle(&file, OPEN.into()), "interrupted");
    }
}
