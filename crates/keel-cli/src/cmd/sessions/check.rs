//! `keel sessions check`: load, validate, plan crash repair and derive the messages of a
//! session file without writing anything, and say whether it is valid (exit 0), repairable
//! (exit 1: a torn tail was dropped or a turn is open) or corrupt (exit 2: the loader refused
//! it, or the loaded log breaks turn/step rules, or the planned repair would not close it).

use super::fmt::event_summary;
use keel_protocol::Seq;
use keel_session::{Format, LoadError, Loaded, Store};
use serde::Serialize;
use std::fmt::Write as _;
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

impl Status {
    /// The process exit code for this verdict.
    pub fn exit_code(self) -> u8 {
        match self {
            Status::Valid => 0,
            Status::Repairable => 1,
            Status::Corrupt => 2,
        }
    }
}

/// What `check` found (also its `--json` output).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckReport {
    /// The session file.
    pub file: PathBuf,
    /// The verdict.
    pub status: Status,
    /// Why the file could not be loaded, when it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
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
    pub open_turn: Option<u32>,
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
    /// Turn/step rules the log breaks.
    pub violations: Vec<String>,
    /// What crash repair would append (nothing is written).
    pub repair: Vec<PlannedEvent>,
    /// Rules the log would still break after that repair.
    pub violations_after_repair: Vec<String>,
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
    /// One-line summary.
    pub summary: String,
}

/// Check the session file at `file` (already resolved). The loaded session, when it could be
/// loaded, is handed back with the report so that a caller about to exit may skip freeing it;
/// crash repair has been tried on it in memory (nothing is written), so it is not the file's
/// session any more.
pub fn check(file: &Path) -> (CheckReport, Option<Loaded>) {
    match Store::load(file) {
        Err(e) => (corrupt(file, &e), None),
        Ok(mut loaded) => (check_loaded(file, &mut loaded), Some(loaded)),
    }
}

fn corrupt(file: &Path, e: &LoadError) -> CheckReport {
    CheckReport {
        file: file.to_owned(),
        status: Status::Corrupt,
        error: Some(e.to_string()),
        loaded: None,
    }
}

fn check_loaded(file: &Path, loaded: &mut Loaded) -> CheckReport {
    let Loaded { session, report } = loaded;
    let state = session.turn_state();
    let violations: Vec<String> = match session.check_invariants() {
        Ok(()) => Vec::new(),
        Err(v) => v.iter().map(ToString::to_string).collect(),
    };
    let (plan, _) = session.plan_repair();
    let repair: Vec<PlannedEvent> = if plan.is_empty() {
        Vec::new()
    } else {
        let names = super::transcript::call_names(session);
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
            Err(e) => vec![format!("the repair itself fails: {e}")],
            Ok(_) => match session.check_invariants() {
                Ok(()) => Vec::new(),
                Err(v) => v.iter().map(ToString::to_string).collect(),
            },
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

/// The report as aligned text.
pub fn render(r: &CheckReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "file        {}", r.file.display());
    if let Some(e) = &r.error {
        let _ = writeln!(out, "error       {e}");
    }
    if let Some(f) = &r.loaded {
        let _ = writeln!(out, "format      {}", f.format);
        let _ = writeln!(out, "session     {}", f.id);
        let _ = writeln!(out, "events      {} ({} lines)", f.events, f.lines);
        let open = match (f.open_turn, &f.open_step) {
            (Some(t), Some(s)) => format!(", turn {t} open (step {s} open)"),
            (Some(t), None) => format!(", turn {t} open"),
            _ => String::new(),
        };
        let last = f
            .last_turn_end
            .map(|s| format!(", last turn/end at #{s}"))
            .unwrap_or_default();
        let _ = writeln!(out, "turns       {}{last}{open}", f.turns);
        let _ = writeln!(
            out,
            "messages    {} derived from {} surface nodes ({} replacements)",
            f.derived_messages, f.surface_nodes, f.replacements
        );
        match &f.torn_tail {
            None => {
                let _ = writeln!(out, "torn tail   none");
            }
            Some(t) => {
                let _ = writeln!(
                    out,
                    "torn tail   line {}, byte {}: {} bytes dropped ({})",
                    t.line, t.offset, t.dropped_bytes, t.reason
                );
            }
        }
        if f.violations.is_empty() {
            let _ = writeln!(out, "invariants  ok");
        } else {
            let _ = writeln!(out, "invariants  {} violated:", f.violations.len());
            for v in &f.violations {
                let _ = writeln!(out, "  {v}");
            }
        }
        if f.repair.is_empty() {
            let _ = writeln!(out, "repair      nothing to close");
        } else {
            let _ = writeln!(out, "repair      would append {} events:", f.repair.len());
            for e in &f.repair {
                let _ = writeln!(out, "  #{} {} {}", e.seq, e.type_name, e.summary);
            }
        }
        for v in &f.violations_after_repair {
            let _ = writeln!(out, "  after repair: {v}");
        }
    }
    let what = match r.status {
        Status::Valid => "valid",
        Status::Repairable => "repairable (crash repair closes it on resume)",
        Status::Corrupt => "corrupt",
    };
    let _ = writeln!(out, "status      {what} (exit {})", r.status.exit_code());
    out
}
