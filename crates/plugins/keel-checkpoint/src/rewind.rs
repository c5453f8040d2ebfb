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
use keel_protocol::EventBody;
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
    let done = shadow.restore(&now.commit, &plan.target, &keep)?;
    let after = shadow.snapshot(&format!("keel {session_id} after rewind"))?;
    shadow.publish()?;
    Ok(json!({
        "to": plan.target, "from": now.commit, "after": after.commit, "written": done.written,
        "removed": done.removed, "kept": done.kept, "notRestorable": plan.not_restorable,
    }))
}

/// One paragraph saying what a rewind did, from its record.
pub fn describe(record: &Value, label: &str) -> String {
    let list = |k: &str| {
        record
            .get(k)
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect::<Vec<_>>())
            .unwrap_or_default()
    };
    let (written, removed, kept) = (list("written"), list("removed"), list("kept"));
    let mut text = format!(
        "Rewound the files to {label}: {} written, {} removed.",
        written.len(),
        removed.len()
    );
    if !kept.is_empty() {
        text.push_str(&format!(
            " Kept {} file(s) changed since the agent's last turn or too large to restore (force overwrites the first kind): {}.",
            kept.len(),
            kept.join(", ")
        ));
    }
    text
}
