//! Rendering of `keel sessions check`: the [`CheckReport`] computed by keel-session's
//! [`keel_session::view::check`] as aligned text, and the process exit code of its verdict
//! (0 valid, 1 repairable, 2 corrupt). `--json` prints the report's serde shape as is.

use keel_session::view::{CheckReport, Status};
use std::fmt::Write as _;

/// The process exit code for a verdict.
pub fn exit_code(status: Status) -> u8 {
    match status {
        Status::Valid => 0,
        Status::Repairable => 1,
        Status::Corrupt => 2,
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
    let _ = writeln!(out, "status      {what} (exit {})", exit_code(r.status));
    out
}
