//! What the model has seen of each file: the read-before-write rule of dsh's
//! `fs-observation-policy`. `read` records the file's stamp (size and modification time) as it
//! read it; `write` (of a file that exists) and `edit` are refused unless the file was read in
//! this session and its stamp is unchanged since, so the model never overwrites what it has not
//! seen or what changed under it (a person's edit, a formatter, a command). A successful
//! `write`/`edit` records the new stamp, so the model may go on editing its own result.
//!
//! The record lives with the [`crate::Workspace`] (shared by its clones, so by every call of one
//! agent) and is not kept across a resume: a resumed session reads a file again before it
//! changes it. Files an editor serves ([`crate::TextFiles`]) are the editor's business and are
//! not checked.

use crate::error::ToolError;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

/// A file as it was seen: size and modification time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
}

impl Stamp {
    /// The stamp of `meta`.
    pub fn of(meta: &std::fs::Metadata) -> Stamp {
        Stamp {
            len: meta.len(),
            modified: meta.modified().ok(),
        }
    }

    /// The stamp of the file at `path` now, if it is a file.
    fn now(path: &Path) -> Option<Stamp> {
        std::fs::metadata(path)
            .ok()
            .filter(std::fs::Metadata::is_file)
            .map(|m| Stamp::of(&m))
    }
}

/// Model-facing code of a change to a file the model has not read.
pub const NOT_READ: &str = "FILE_NOT_READ";
/// Model-facing code of a change to a file that changed since the model read it.
pub const CHANGED: &str = "FILE_CHANGED_SINCE_READ";

/// The files read in a session, by resolved path (see the module docs).
#[derive(Debug, Clone)]
pub struct Observed {
    seen: Arc<Mutex<HashMap<PathBuf, Stamp>>>,
    enforced: bool,
}

impl Default for Observed {
    fn default() -> Self {
        Observed {
            seen: Arc::default(),
            enforced: true,
        }
    }
}

impl Observed {
    /// Whether writes are checked against what was read (default true; `tools.read_before_write`).
    pub fn enforced(&self) -> bool {
        self.enforced
    }

    /// Check writes against reads, or not.
    pub fn set_enforced(&mut self, on: bool) {
        self.enforced = on;
    }

    /// `path` was seen as `stamp`.
    pub fn record(&self, path: &Path, stamp: Stamp) {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(path.to_path_buf(), stamp);
    }

    /// `path` was just written by a tool: record it as it is now.
    pub fn record_now(&self, path: &Path) {
        if let Some(stamp) = Stamp::now(path) {
            self.record(path, stamp);
        }
    }

    /// May a tool change `path` (shown to the model as `shown`)? A file that does not exist may
    /// be created; one that exists must have been read, unchanged since.
    pub fn check_change(&self, path: &Path, shown: &str) -> Result<(), ToolError> {
        if !self.enforced {
            return Ok(());
        }
        let Some(now) = Stamp::now(path) else {
            return Ok(());
        };
        let seen = self
            .seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(path)
            .copied();
        match seen {
            None => Err(ToolError::coded(
                NOT_READ,
                format!(
                    "'{shown}' exists and has not been read in this session; read it first, \
                     then change it"
                ),
                serde_json::json!({ "path": shown }),
            )),
            Some(seen) if seen != now => Err(ToolError::coded(
                CHANGED,
                format!(
                    "'{shown}' changed on disk since you read it; read it again, then change it"
                ),
                serde_json::json!({ "path": shown }),
            )),
            Some(_) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_file_must_be_read_and_unchanged_before_it_changes() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.txt");
        let observed = Observed::default();
        // A new file may be created.
        observed.check_change(&file, "a.txt").unwrap();
        std::fs::write(&file, "one").unwrap();
        let err = observed.check_change(&file, "a.txt").unwrap_err();
        assert!(
            err.model_text()
                .starts_with("FILE_NOT_READ: 'a.txt' exists")
        );
        observed.record(&file, Stamp::of(&std::fs::metadata(&file).unwrap()));
        observed.check_change(&file, "a.txt").unwrap();
        std::fs::write(&file, "three").unwrap();
        let err = observed.check_change(&file, "a.txt").unwrap_err();
        assert!(err.model_text().starts_with("FILE_CHANGED_SINCE_READ:"));
        observed.record_now(&file);
        observed.check_change(&file, "a.txt").unwrap();
        // Clones share the record; turning the check off lets anything through.
        let mut other = observed.clone();
        std::fs::write(&file, "four!").unwrap();
        assert!(other.check_change(&file, "a.txt").is_err());
        other.set_enforced(false);
        other.check_change(&file, "a.txt").unwrap();
    }
}
