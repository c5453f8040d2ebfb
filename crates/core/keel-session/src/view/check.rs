//! The health check of a session file (`keel sessions check`): load it, validate it, plan
//! crash repair and count the messages it derives, without writing anything, and say whether
//! it is [`Status::Valid`], [`Status::Repairable`] (a torn tail was dropped or a turn is open)
//! or [`Status::Corrupt`] (the loader refused it, the loaded log breaks turn/step rules, or the
//! planned repair would not close it).
//!
//! Data flow: [`check_file`] loads the file with [`Store::load`], takes the facts of the loaded
//! session, then tries crash repair *in memory* on that same session (a copy would cost as much
//! as the load) and checks the result again. The [`CheckReport`] is plain data; its serde shape
//! is the `keel sessions check --json` format (errors and violations as their messages).

use super::summary::event_summary;
use super::transcript::call_names;
use crate::store::{Format, LoadError, Loaded, Store};
use crate::{InvariantViolation, RepairError};
use keel_protocol::Seq;
use keel_protocol::TurnNo;
use serde::{Serialize, Serializer};
use std::fmt;
use std::path::{Path, PathBuf};

/// The verdict of a check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Loads whole, no open turn, no violation.
    Valid,
    /// Loads, but a torn tail was dropped or a turn is open: crash repair closes it on resume.
    Repairable,
    /// Cannot be loaded, or breaks turn/step rules.
    Corrupt,
}

/// What a check found.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckReport {
    /// The session file.
    pub file: PathBuf,
    /// The verdict.
    pub status: Status,
    /// Why the file could not be loaded, when it could not (serialised as its message).
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "display_opt"
    )]
    pub error: Option<LoadError>,
    /// What was loaded, when it could be.
    #[serde(flatten)]
    pub loaded: Option<LoadedFacts>,
}

/// Facts about a loaded session.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadedFacts {
    /// `plain` or `zstd`.
    pub format: &'static str,
    /// Session id.
    pub id: String,
    /// Events loaded.
    pub events: u64,
    /// Lines read (header included, packed rows count once).
    pub lines: u64,
    /// Turns started.
    pub turns: u64,
    /// The open turn, if any.
    pub open_turn: Option<TurnNo>,
    /// The open step (`turn.step`), if any.
    pub open_step: Option<String>,
    /// Seq of the last `turn/end`.
    pub last_turn_end: Option<Seq>,
    /// Current surface nodes.
    pub surface_nodes: usize,
    /// Replacements (compaction) applied to the surface.
    pub replacements: u64,
    /// Model messages derived from the surface.
    pub derived_messages: usize,
    /// The torn tail dropped, if any.
    pub torn_tail: Option<TornFacts>,
    /// Turn/step rules the log breaks (serialised as their messages).
    #[serde(serialize_with = "display_all")]
    pub violations: Vec<InvariantViolation>,
    /// What crash repair would append (nothing is written).
    pub repair: Vec<PlannedEvent>,
    /// What is still wrong after that repair, tried in memory (serialised as messages).
    #[serde(serialize_with = "display_all")]
    pub violations_after_repair: Vec<AfterRepair>,
}

/// A dropped torn tail.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TornFacts {
    /// 1-based line of the first dropped record.
    pub line: u64,
    /// Byte offset in the file where the dropped part starts.
    pub offset: u64,
    /// Bytes dropped.
    pub dropped_bytes: u64,
    /// What was wrong.
    pub reason: String,
}

/// One event crash repair would append.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedEvent {
    /// Its seq.
    pub seq: Seq,
    /// Its type.
    #[serde(rename = "type")]
    pub type_name: String,
    /// One-line summary ([`super::event_summary`]).
    pub summary: String,
}

/// What is wrong with a session after the trial crash repair.
#[derive(Debug, thiserror::Error)]
pub enum AfterRepair {
    /// The repair itself was refused.
    #[error("the repair itself fails: {0}")]
    RepairFails(#[source] RepairError),
    /// The repaired log still breaks a turn/step rule.
    #[error(transparent)]
    Violation(InvariantViolation),
}

fn display_opt<T: fmt::Display, S: Serializer>(v: &Option<T>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) => s.collect_str(v),
        None => s.serialize_none(),
    }
}

fn display_all<T: fmt::Display, S: Serializer>(v: &[T], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(v.iter().map(ToString::to_string))
}

/// Check the session file at `file` (a file, or a session directory). The loaded session,
/// when it could be loaded, is handed back with the report so that a caller about to exit may
/// skip freeing it; crash repair has been tried on it in memory (nothing is written), so it is
/// not the file's session any more.
pub fn check_file(file: &Path) -> (CheckReport, Option<Loaded>) {
    match Store::load(file) {
        Err(e) => (
            CheckReport {
                file: file.to_owned(),
                status: Status::Corrupt,
                error: Some(e),
                loaded: None,
            },
            None,
        ),
        Ok(mut loaded) => (check_loaded(file, &mut loaded), Some(loaded)),
    }
}

fn check_loaded(file: &Path, loaded: &mut Loaded) -> CheckReport {
    let Loaded { session, report } = loaded;
    let state = session.turn_state();
    let violations = session.check_invariants().err().unwrap_or_default();
    let (plan, _) = session.plan_repair();
    let repair: Vec<PlannedEvent> = if plan.is_empty() {
        Vec::new()
    } else {
        let names = call_names(session);
        plan.iter()
            .map(|e| PlannedEvent {
                seq: e.seq,
                type_name: e.type_name().to_owned(),
                summary: event_summary(e, &names),
            })
            .collect()
    };
    // Only the number is reported: count what deriving would give without cloning every
    // message of the history.
    let derived_messages = session.derived_message_count();
    let facts = LoadedFacts {
        format: match report.format {
            Format::Plain => "plain",
            Format::Zstd => "zstd",
        },
        id: session.header().id.to_string(),
        events: session.len(),
        lines: report.lines,
        turns: session.turn_count(),
        open_turn: state.open_turn,
        open_step: state.open_step.map(|s| format!("{}.{}", s.turn, s.step)),
        last_turn_end: session.last_turn_end(),
        surface_nodes: session.surface().nodes().len(),
        replacements: session.surface().generation(),
        derived_messages,
        torn_tail: None,
        violations: Vec::new(),
        repair: Vec::new(),
        violations_after_repair: Vec::new(),
    };
    // Trial repair, in memory on the loaded session itself (the facts above are taken first;
    // a copy would cost as much as the load on a million-event log). Nothing is written.
    let violations_after_repair = if plan.is_empty() {
        Vec::new()
    } else {
        match session.repair() {
            Err(e) => vec![AfterRepair::RepairFails(e)],
            Ok(_) => session
                .check_invariants()
                .err()
                .unwrap_or_default()
                .into_iter()
                .map(AfterRepair::Violation)
                .collect(),
        }
    };
    let torn_tail = report.torn.as_ref().map(|t| TornFacts {
        line: t.line,
        offset: t.offset,
        dropped_bytes: t.dropped_bytes,
        reason: t.reason.clone(),
    });
    let status = if !violations.is_empty() || !violations_after_repair.is_empty() {
        Status::Corrupt
    } else if torn_tail.is_some() || !repair.is_empty() {
        Status::Repairable
    } else {
        Status::Valid
    };
    CheckReport {
        file: file.to_owned(),
        status,
        error: None,
        loaded: Some(LoadedFacts {
            torn_tail,
            violations,
            repair,
            violations_after_repair,
            ..facts
        }),
    }
}
