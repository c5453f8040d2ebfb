//! A derived, per-session cache of what `keel sessions list` shows: `summary.json` beside the
//! session file, valid while the file keeps the size and modification time it had when the
//! summary was taken (the way git's index trusts a file's stat). Listing a store then reads one
//! small file per finished session instead of loading every log; a session being written, or
//! a cache that is missing, stale, unreadable or of another version, is summarized from the
//! log and the cache rewritten (atomically, best effort: a read-only store still lists).

use super::SessionSummary;
use serde::{Deserialize, Serialize};
use std::fs;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// File name of the cache, in the session's directory.
pub const SUMMARY_FILE: &str = "summary.json";

const VERSION: u32 = 2;

/// What identifies the session file's content for the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Stamp {
    len: u64,
    modified_ns: u128,
}

impl Stamp {
    fn of(file: &Path) -> Option<Stamp> {
        Stamp::with_time(file).map(|(stamp, _)| stamp)
    }

    /// The stamp and the modification time, from one `stat`.
    fn with_time(file: &Path) -> Option<(Stamp, SystemTime)> {
        let meta = fs::metadata(file).ok()?;
        let modified = meta.modified().ok()?;
        let modified_ns = modified.duration_since(UNIX_EPOCH).ok()?.as_nanos();
        let stamp = Stamp {
            len: meta.len(),
            modified_ns,
        };
        Some((stamp, modified))
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Cached {
    version: u32,
    stamp: Stamp,
    id: String,
    cwd: Option<String>,
    created: keel_protocol::TimeMs,
    events: u64,
    turns: u64,
    title: Option<String>,
    first_prompt: Option<String>,
    parent: Option<String>,
    /// As logged (an open turn is settled when listed).
    outcome: String,
}

/// The cached summary of the session file in `dir`, if the cache matches the file.
pub(crate) fn read(dir: &Path, file: &Path) -> Option<SessionSummary> {
    let (stamp, modified) = Stamp::with_time(file)?;
    let bytes = fs::read(dir.join(SUMMARY_FILE)).ok()?;
    let c: Cached = serde_json::from_slice(&bytes).ok()?;
    if c.version != VERSION || c.stamp != stamp {
        return None;
    }
    Some(SessionSummary {
        id: c.id,
        path: file.to_owned(),
        cwd: c.cwd,
        created: c.created,
        events: c.events,
        turns: c.turns,
        title: c.title,
        first_prompt: c.first_prompt,
        last_modified: Some(modified),
        compressed: super::Format::of_path(file) == super::Format::Zstd,
        parent: c.parent,
        problem: None,
        outcome: c.outcome,
    })
}

/// Remember `s` (taken from `file` whose stamp was `stamp` before loading) for the next listing.
/// Summaries of files that changed while they were read, or could not be loaded, are not kept.
pub(crate) fn write(dir: &Path, file: &Path, before: Option<(u64, u128)>, s: &SessionSummary) {
    let (Some((len, modified_ns)), Some(after)) = (before, Stamp::of(file)) else {
        return;
    };
    let stamp = Stamp { len, modified_ns };
    if s.problem.is_some() || after != stamp {
        return;
    }
    let c = Cached {
        version: VERSION,
        stamp,
        id: s.id.clone(),
        cwd: s.cwd.clone(),
        created: s.created,
        events: s.events,
        turns: s.turns,
        title: s.title.clone(),
        first_prompt: s.first_prompt.clone(),
        parent: s.parent.clone(),
        outcome: s.outcome.clone(),
    };
    let Ok(bytes) = serde_json::to_vec(&c) else {
        return;
    };
    // No more readable than the log it summarizes (it holds the first prompt).
    let mode = fs::metadata(file).map_or(0o600, |m| m.permissions().mode() & 0o666);
    let tmp = dir.join(format!(".{SUMMARY_FILE}.{}.tmp", std::process::id()));
    let written = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&tmp)
        .and_then(|mut f| f.write_all(&bytes));
    if written.is_err() || fs::rename(&tmp, dir.join(SUMMARY_FILE)).is_err() {
        let _ = fs::remove_file(&tmp);
    }
}

/// The stamp of `file` now, as `(len, modified ns)`, to pass to [`write`] after loading it.
pub(crate) fn stamp(file: &Path) -> Option<(u64, u128)> {
    Stamp::of(file).map(|s| (s.len, s.modified_ns))
}
