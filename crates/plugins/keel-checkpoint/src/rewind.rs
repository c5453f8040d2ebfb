//! Rewinding files: which checkpoint a point of a session names ([`plan`]) and putting the
//! workspace back to it ([`apply`]). `keel rewind` (a closed session) and `/rewind` (the live
//! one, in the terminal UI and over ACP) share both; each logs the returned record as
//! `checkpoint/restored`.
//!
//! ```text
//! the log's checkpoint/created and checkpoint/restored events ─► plan(point):
//!   the first checkpoint at or after the point (nothing changed the files between them)
//! apply: snapshot now ─► paths changed since the agent's last turn (kept unless forced)
//!        ─► restore ─► snapshot after ─► {to, from, after, written, removed, kept, notRestorable}
//! ```

use crate::shadow::{CheckpointError, Shadow};
use crate::{CREATED_EVENT, RESTORED_EVENT};
use keel_protocol::{EventBody, Seq, SurfaceRewind, TurnNo};
use keel_session::Session;
use serde_json::{Value, json};
use std::collections::HashSet;

/// Where to rewind to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Point {
    /// Just before turn N's prompt.
    Turn(u32),
    /// Event S.
    Seq(u64),
    /// What the files were before the last rewind.
    Undo,
}

impl Point {
    /// The point in plain words, for "Rewound the files to …": `before turn N`, `seq S`,
    /// `before the last rewind`.
    pub fn target(self) -> String {
        match self {
            Point::Turn(turn) => format!("before turn {turn}"),
            Point::Seq(seq) => format!("seq {seq}"),
            Point::Undo => "before the last rewind".to_owned(),
        }
    }

    /// The point in plain words, for "… after …": `the start of turn N`, `seq S`, `the last
    /// rewind`.
    pub fn since(self) -> String {
        match self {
            Point::Turn(turn) => format!("the start of turn {turn}"),
            Point::Seq(seq) => format!("seq {seq}"),
            Point::Undo => "the last rewind".to_owned(),
        }
    }

    /// `N`, `seq:S` or `undo`; `None` for anything else.
    pub fn parse(text: &str) -> Option<Point> {
        let text = text.trim();
        if text == "undo" {
            return Some(Point::Undo);
        }
        match text.strip_prefix("seq:") {
            Some(seq) => seq.trim().parse().ok().map(Point::Seq),
            None => text.parse().ok().map(Point::Turn),
        }
    }
}

/// What a rewind returns to the earlier point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The workspace's files (from the checkpoints).
    Files,
    /// The model-visible history (a `surface/rewind` event).
    Conversation,
    /// Both.
    Both,
}

impl Scope {
    /// The scope of `--files` / `--conversation` (neither or both: [`Scope::Both`]).
    pub fn of_flags(files: bool, conversation: bool) -> Scope {
        match (files, conversation) {
            (true, false) => Scope::Files,
            (false, true) => Scope::Conversation,
            _ => Scope::Both,
        }
    }

    /// Whether the files are rewound.
    pub fn files(self) -> bool {
        self != Scope::Conversation
    }

    /// Whether the conversation is rewound.
    pub fn conversation(self) -> bool {
        self != Scope::Files
    }

    /// What an undo with this scope undoes in `session`: the last rewind's own scope (a
    /// rewind of both logs a `checkpoint/restored` and a `surface/rewind` side by side)
    /// narrowed to this one; `None` when there is nothing of that scope to undo.
    pub fn for_undo(self, session: &Session) -> Option<Scope> {
        let (mut files, mut conversation) = (None::<u64>, None::<u64>);
        for ev in session.whole_event_iter() {
            match &ev.body {
                EventBody::SurfaceRewind(_) => conversation = Some(ev.seq.0),
                EventBody::Other(o) if o.type_name == RESTORED_EVENT => files = Some(ev.seq.0),
                _ => {}
            }
        }
        let last = match (files, conversation) {
            (Some(f), Some(c)) if f.abs_diff(c) == 1 => Scope::Both,
            (Some(f), Some(c)) if f > c => Scope::Files,
            (Some(_), Some(_)) | (None, Some(_)) => Scope::Conversation,
            (Some(_), None) => Scope::Files,
            (None, None) => return None,
        };
        match (self, last) {
            (Scope::Both, last) => Some(last),
            (mine, Scope::Both) => Some(mine),
            (mine, last) if mine == last => Some(mine),
            // The last rewind of this scope, though another came after it.
            (Scope::Files, _) if files.is_some() => Some(Scope::Files),
            (Scope::Conversation, _) if conversation.is_some() => Some(Scope::Conversation),
            _ => None,
        }
    }
}

/// A rewind decided before anything changes (`keel rewind` and `/rewind` share it): what it
/// covers, the files' checkpoint and the conversation's event, each `None` when there is
/// nothing to do there.
#[derive(Debug, Clone)]
pub struct Rewind {
    /// What is rewound: the scope asked for, or for an undo the last rewind's own, narrowed.
    pub scope: Scope,
    /// The checkpoint the files return to.
    pub files: Option<Plan>,
    /// The event that returns the conversation.
    pub conversation: Option<SurfaceRewind>,
    /// The files were asked for by default in a session without checkpoints: left alone.
    no_checkpoints: bool,
}

impl Rewind {
    /// Decide the rewind of `session` to `point` with the scope `asked`. A session without
    /// checkpoints still rewinds its conversation when both were asked for by default.
    pub fn decide(session: &Session, point: Point, asked: Scope) -> Result<Rewind, RewindError> {
        let scope = match point {
            Point::Undo => asked.for_undo(session).ok_or(RewindError::NothingToUndo)?,
            _ => asked,
        };
        let mut no_checkpoints = false;
        let files = if scope.files() {
            match plan(session, point) {
                Ok(plan) => plan,
                Err(RewindError::NoCheckpoints) if asked == Scope::Both => {
                    no_checkpoints = true;
                    None
                }
                Err(e) => return Err(e),
            }
        } else {
            None
        };
        let conversation = if scope.conversation() {
            conversation(session, point)?
        } else {
            None
        };
        Ok(Rewind {
            scope,
            files,
            conversation,
            no_checkpoints,
        })
    }

    /// A sentence for the files and one for the conversation, as far as the scope covers
    /// them: `files_done` says what the files' restore did ([`describe`]); `point` names the
    /// point in plain words ([`Point::since`]).
    pub fn notes(&self, files_done: Option<String>, point: &str) -> Vec<String> {
        let mut notes = Vec::new();
        if self.no_checkpoints {
            notes.push(format!(
                "The files were not rewound: {}.",
                RewindError::NoCheckpoints
            ));
        } else if let Some(done) = files_done {
            notes.push(done);
        } else if self.scope.files() {
            notes.push(format!(
                "The files need no rewind: no step changed them after {point}."
            ));
        }
        match &self.conversation {
            Some(body) => notes.push(conversation_note(body)),
            None if self.scope.conversation() => {
                notes.push("The conversation is already at that point.".into())
            }
            None => {}
        }
        notes
    }
}

/// The `surface/rewind` that returns `session`'s conversation to `point`: just before turn
/// N's prompt, the start of the turn holding seq S (or S itself between turns), or what it
/// was before the last conversation rewind. `Ok(None)` when the conversation is already
/// there.
pub fn conversation(session: &Session, point: Point) -> Result<Option<SurfaceRewind>, RewindError> {
    let mut turns: Vec<(u32, u64, Option<u64>)> = Vec::new();
    let mut last_rewind = None;
    for ev in session.whole_event_iter() {
        match &ev.body {
            EventBody::TurnStart(t) => turns.push((t.turn.0, ev.seq.0, None)),
            EventBody::TurnEnd(_) => {
                if let Some(open) = turns.last_mut() {
                    open.2 = Some(ev.seq.0);
                }
            }
            EventBody::SurfaceRewind(_) => last_rewind = Some(ev.seq.0),
            _ => {}
        }
    }
    let (to, turn, reason) = match point {
        Point::Undo => (last_rewind.ok_or(RewindError::NothingToUndo)?, None, "undo"),
        Point::Turn(n) => {
            let start = turns
                .iter()
                .find(|t| t.0 == n)
                .ok_or(RewindError::NoSuchTurn {
                    turn: n,
                    turns: turns.last().map_or(0, |t| t.0),
                })?;
            (start.1, Some(n), "rewind")
        }
        Point::Seq(seq) if seq >= session.len() => {
            return Err(RewindError::NoSuchSeq {
                seq,
                len: session.len(),
            });
        }
        Point::Seq(seq) => match turns
            .iter()
            .rev()
            .find(|t| t.1 <= seq && t.2.is_none_or(|end| end >= seq))
        {
            Some(t) => (t.1, Some(t.0), "rewind"),
            None => (seq, None, "rewind"),
        },
    };
    if let Some(open) = turns.last().filter(|t| t.2.is_none()) {
        return Err(RewindError::TurnOpen { turn: open.0 });
    }
    let (nodes, _) = session.surface_before(Seq(to));
    if nodes == session.surface().nodes() {
        return Ok(None);
    }
    Ok(Some(SurfaceRewind {
        to_seq: Seq(to),
        turn: turn.map(TurnNo),
        reason: Some(reason.into()),
    }))
}

/// The checkpoint a point names, and what the log says around it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The checkpoint to return to.
    pub target: String,
    /// How the target was found (for messages).
    pub label: String,
    /// Files over a cap when it was taken: left alone.
    pub not_restorable: Vec<String>,
    /// The state the agent left last (its last turn-end checkpoint, or the last rewind's
    /// result): paths changed since are someone else's.
    pub agent_left: Option<String>,
}

/// Why a rewind cannot be done; nothing was changed.
#[derive(Debug, thiserror::Error)]
pub enum RewindError {
    /// The session has no checkpoints.
    #[error("the session has no checkpoints (the checkpoints plugin was off, or git was missing)")]
    NoCheckpoints,
    /// `Undo` without an earlier rewind.
    #[error("the session has no rewind to undo")]
    NothingToUndo,
    /// A turn the session does not have.
    #[error("the session has {turns} turn(s), not turn {turn}")]
    NoSuchTurn {
        /// Asked for.
        turn: u32,
        /// The session's turns.
        turns: u32,
    },
    /// A seq past the end.
    #[error("the session has {len} events, not seq {seq}")]
    NoSuchSeq {
        /// Asked for.
        seq: u64,
        /// The session's length.
        len: u64,
    },
    /// The session's last turn has not ended (a crashed session: `keel resume` repairs it).
    #[error("turn {turn} has not ended: a conversation rewinds between turns")]
    TurnOpen {
        /// The open turn.
        turn: u32,
    },
    /// The checkpoint is gone from the shadow repository.
    #[error(
        "checkpoint {target} ({label}) is not in the shadow repository {git_dir} (was it removed?)"
    )]
    Missing {
        /// The checkpoint.
        target: String,
        /// How it was found.
        label: String,
        /// The shadow repository.
        git_dir: String,
    },
    /// The shadow repository or the workspace failed.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// The restore stopped part-way (a file that cannot be written back): `record` is the
    /// `checkpoint/restored` to log all the same, so that an undo returns the files.
    #[error(
        "the rewind stopped part-way: {reason}; undo returns the files to what they were before it"
    )]
    Incomplete {
        /// Why.
        reason: String,
        /// What to log.
        record: Value,
    },
}

/// The checkpoint `point` names in `session`; `Ok(None)` when no step changed files after
/// the point (the workspace is as the agent left it).
pub fn plan(session: &Session, point: Point) -> Result<Option<Plan>, RewindError> {
    let mut checkpoints: Vec<(u64, String, String, Vec<String>)> = Vec::new();
    let (mut agent_left, mut before_last_rewind) = (None::<String>, None::<String>);
    let mut turn_starts: Vec<(u32, u64)> = Vec::new();
    for ev in session.events() {
        let o = match &ev.body {
            EventBody::TurnStart(t) => {
                turn_starts.push((t.turn.0, ev.seq.0));
                continue;
            }
            EventBody::Other(o) => o,
            _ => continue,
        };
        let text = |k: &str| o.data.get(k).and_then(Value::as_str).map(str::to_owned);
        match o.type_name.as_str() {
            CREATED_EVENT => {
                let Some(snapshot) = text("snapshot") else {
                    continue;
                };
                let at = text("at").unwrap_or_default();
                if at == "turn-end" {
                    agent_left = Some(snapshot.clone());
                }
                let not_restorable = o
                    .data
                    .get("notRestorable")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|p| p.as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default();
                checkpoints.push((ev.seq.0, snapshot, at, not_restorable));
            }
            RESTORED_EVENT => {
                agent_left = text("after").or(agent_left);
                before_last_rewind = text("from");
            }
            _ => {}
        }
    }
    if checkpoints.is_empty() {
        return Err(RewindError::NoCheckpoints);
    }
    let point_seq = match point {
        Point::Undo => {
            let target = before_last_rewind.ok_or(RewindError::NothingToUndo)?;
            return Ok(Some(Plan {
                target,
                label: "before the last rewind".into(),
                not_restorable: Vec::new(),
                agent_left,
            }));
        }
        Point::Seq(seq) if seq >= session.len() => {
            return Err(RewindError::NoSuchSeq {
                seq,
                len: session.len(),
            });
        }
        Point::Seq(seq) => seq,
        Point::Turn(turn) => turn_starts
            .iter()
            .find(|(t, _)| *t == turn)
            .map(|(_, seq)| *seq)
            .ok_or(RewindError::NoSuchTurn {
                turn,
                turns: turn_starts.last().map_or(0, |t| t.0),
            })?,
    };
    Ok(checkpoints
        .into_iter()
        .find(|(seq, ..)| *seq >= point_seq)
        .map(|(seq, target, at, not_restorable)| Plan {
            target,
            label: format!("the checkpoint at seq {seq} ({at})"),
            not_restorable,
            agent_left,
        }))
}

/// Put the workspace of `shadow` back to `plan`'s checkpoint: paths changed since the agent's
/// last turn are kept unless `force`. Returns the `checkpoint/restored` record.
pub fn apply(
    shadow: &mut Shadow,
    plan: &Plan,
    force: bool,
    session_id: &str,
) -> Result<Value, RewindError> {
    if !shadow.has(&plan.target) {
        return Err(RewindError::Missing {
            target: plan.target.clone(),
            label: plan.label.clone(),
            git_dir: shadow.git_dir().display().to_string(),
        });
    }
    let now = shadow.snapshot(&format!("keel {session_id} before rewind"))?;
    let by_others = match (&plan.agent_left, force) {
        (Some(left), false) => shadow.changed_between(left, &now.commit)?,
        _ => Vec::new(),
    };
    let mut keep: HashSet<String> = by_others.into_iter().collect();
    keep.extend(plan.not_restorable.iter().cloned());
    let restored = shadow.restore(&now.commit, &plan.target, &keep);
    let after = shadow.snapshot(&format!("keel {session_id} after rewind"))?;
    shadow.publish()?;
    match restored {
        Ok(done) => Ok(json!({
            "to": plan.target, "from": now.commit, "after": after.commit,
            "written": done.written, "removed": done.removed, "kept": done.kept,
            "created": done.created, "notRestorable": plan.not_restorable,
        })),
        // Some files may have changed: the record still goes to the log, so that an undo
        // returns them to what they were before.
        Err(e) => Err(RewindError::Incomplete {
            reason: e.to_string(),
            record: json!({
                "to": plan.target, "from": now.commit, "after": after.commit,
                "written": [], "removed": [], "kept": [], "notRestorable": plan.not_restorable,
                "error": e.to_string(),
            }),
        }),
    }
}

/// Paths a rewind's report names one by one; the rest are counted.
pub const PATHS_NAMED: usize = 10;

/// One paragraph saying what a rewind did, from its record: how many files it put back and
/// the first [`PATHS_NAMED`] of them, each marked restored (changed back), created (the
/// workspace had lost it) or deleted (made after the point). `label` names the point
/// plainly ([`Point::target`]).
pub fn describe(record: &Value, label: &str) -> String {
    let list = |k: &str| {
        record
            .get(k)
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect::<Vec<_>>())
            .unwrap_or_default()
    };
    let (written, removed, kept) = (list("written"), list("removed"), list("kept"));
    let created: HashSet<&str> = list("created").into_iter().collect();
    let mut files: Vec<String> = written
        .iter()
        .map(|p| {
            let how = if created.contains(p) {
                "created"
            } else {
                "restored"
            };
            format!("{p} ({how})")
        })
        .chain(removed.iter().map(|p| format!("{p} (deleted)")))
        .collect();
    let mut text = match files.len() {
        0 => format!("Rewound the files to {label}: no file needed a change."),
        n => {
            let more = n.saturating_sub(PATHS_NAMED);
            files.truncate(PATHS_NAMED);
            let mut named = files.join(", ");
            if more > 0 {
                named.push_str(&format!(" and {more} more"));
            }
            let s = if n == 1 { "" } else { "s" };
            format!("Rewound the files to {label}: {n} file{s} put back: {named}.")
        }
    };
    if !kept.is_empty() {
        text.push_str(&format!(
            " Kept {} file(s) changed since the agent's last turn or too large to restore (force overwrites the first kind): {}.",
            kept.len(),
            kept.join(", ")
        ));
    }
    text
}

/// One line saying what a conversation rewind does.
pub fn conversation_note(body: &SurfaceRewind) -> String {
    match (body.reason.as_deref(), body.turn) {
        (Some("undo"), _) => {
            "Undid the last conversation rewind: the model sees the history it had before it."
                .to_owned()
        }
        (_, Some(turn)) => format!(
            "Rewound the conversation to just before turn {turn}: the model no longer sees turn {turn} and after (the log keeps them, marked rewound)."
        ),
        _ => format!(
            "Rewound the conversation to just before seq {} (the log keeps what came after, marked rewound).",
            body.to_seq
        ),
    }
}

/// One turn a rewind can return to: what the UI's rewind list shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnPoint {
    /// The turn.
    pub turn: u32,
    /// Its `turn/start`.
    pub seq: u64,
    /// The prompt a person typed for it (empty when a plugin started it).
    pub prompt: String,
    /// The files the turn changed, from its checkpoints (at most [`crate::PATHS_LOGGED`] per
    /// step), sorted.
    pub files: Vec<String>,
}

/// The session's turns, oldest first, each with its prompt and the files it changed: the
/// paths of every checkpoint of the turn but its first, which holds what changed before the
/// turn (by hand, or everything when a process takes its first).
pub fn turn_points(session: &Session) -> Vec<TurnPoint> {
    let mut out: Vec<TurnPoint> = Vec::new();
    let mut first_checkpoint = true;
    for ev in session.whole_event_iter() {
        match &ev.body {
            EventBody::TurnStart(t) => {
                out.push(TurnPoint {
                    turn: t.turn.0,
                    seq: ev.seq.0,
                    prompt: String::new(),
                    files: Vec::new(),
                });
                first_checkpoint = true;
            }
            EventBody::UserMessage(m) if m.source.is_user() => {
                if let Some(point) = out.last_mut().filter(|p| p.prompt.is_empty()) {
                    point.prompt = m.text();
                }
            }
            EventBody::Other(o) if o.type_name == CREATED_EVENT => {
                if std::mem::replace(&mut first_checkpoint, false) {
                    continue;
                }
                if let (Some(point), Some(paths)) = (
                    out.last_mut(),
                    o.data.get("paths").and_then(Value::as_array),
                ) {
                    point
                        .files
                        .extend(paths.iter().filter_map(Value::as_str).map(str::to_owned));
                }
            }
            EventBody::TurnEnd(_) => {
                if let Some(point) = out.last_mut() {
                    point.files.sort_unstable();
                    point.files.dedup();
                }
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describe_names_the_files_put_back_and_counts_the_rest() {
        let record = json!({
            "written": ["a.txt", "gone.txt"], "created": ["gone.txt"],
            "removed": ["new.txt"], "kept": [],
        });
        assert_eq!(
            describe(&record, &Point::Turn(1).target()),
            "Rewound the files to before turn 1: 3 files put back: a.txt (restored), \
             gone.txt (created), new.txt (deleted)."
        );
        let many: Vec<String> = (0..13).map(|i| format!("f{i:02}")).collect();
        let record = json!({"written": many, "removed": []});
        let text = describe(&record, &Point::Seq(7).target());
        assert!(
            text.starts_with("Rewound the files to seq 7: 13 files put back: f00 (restored)"),
            "{text}"
        );
        assert!(text.ends_with("f09 (restored) and 3 more."), "{text}");
        assert!(!text.contains("f10"), "{text}");
        assert_eq!(
            describe(&json!({}), &Point::Undo.target()),
            "Rewound the files to before the last rewind: no file needed a change."
        );
    }
}
