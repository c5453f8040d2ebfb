//! The file-backed journal: `$KEEL_HOME/provenance/<session id>/receipts.jsonl` (one canonical
//! receipt per line, append-only) and `graph.json` (the snapshot's canonical bytes plus a
//! newline). Directory 0700, files 0600: receipts hold private prompts, file contents and
//! arguments.
//!
//! Durability is split so that each cost can be paid (and measured) where it belongs:
//! [`Journal::flush`] appends the pending receipt lines with one `write`; [`Journal::sync`]
//! fsyncs them; [`Journal::write_graph`] publishes `graph.json` atomically (temp file, fsync,
//! rename, fsync of the directory). The pipeline flushes (and syncs) inside the awaited
//! `tools/settled` seam, so a receipt is durable before its `tool/result` is appended; it writes
//! the graph at step boundaries and at close. `graph.json` may therefore lag the receipts; the
//! validator checks that it is exactly the compilation of a prefix of them.
//!
//! Opening an existing journal replays it: every line is re-checked (hashes, chain), the graph
//! and the call bookkeeping are rebuilt, and a torn last line (a crash mid-append) is reported in
//! [`ResumeReport`], cut from the file and recorded as a `journal_tail_torn` capture failure —
//! never silently dropped. Calls still open are then closed as `outcome_unobserved`.

use crate::graph::Snapshot;
use crate::model::Stage;
use crate::recorder::Recorder;
use crate::verify::{self, TornTail, VerifyFailure};
use keel_protocol::SessionId;
use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Name of the receipts file.
pub const RECEIPTS_FILE: &str = "receipts.jsonl";
/// Name of the graph file.
pub const GRAPH_FILE: &str = "graph.json";

/// Why the journal could not be opened or written. Capture never returns these to the tool
/// pipeline as a tool error: the caller logs them and the tool result stands.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// A file system operation failed; receipts not yet written stay pending and are retried at
    /// the next flush.
    #[error("provenance journal {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The session id cannot be a directory name.
    #[error("session id {0:?} is not usable as a directory name")]
    BadSessionId(String),
    /// The existing journal belongs to another run.
    #[error("journal {path} belongs to run {found:?}, not {expected:?}")]
    RunMismatch {
        /// The receipts file.
        path: PathBuf,
        /// The run it holds.
        found: String,
        /// The run asked for.
        expected: String,
    },
    /// The existing journal fails validation before its last line; it is not resumed (run
    /// `keel provenance verify` for details).
    #[error("journal {path} is corrupt: {failure}")]
    Corrupt {
        /// The receipts file.
        path: PathBuf,
        /// The first failure.
        failure: Box<VerifyFailure>,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> JournalError + '_ {
    move |source| JournalError::Io {
        path: path.to_owned(),
        source,
    }
}

/// What opening an existing journal found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResumeReport {
    /// Receipts replayed.
    pub receipts: usize,
    /// A torn last line that was cut (and recorded as a capture failure).
    pub torn_tail: Option<TornTail>,
    /// Calls that were open and were closed as `outcome_unobserved`.
    pub closed_calls: Vec<String>,
}

/// `$home/provenance/<session id>`.
pub fn journal_dir(home: &Path, session: &SessionId) -> Result<PathBuf, JournalError> {
    let s = session.as_str();
    if s.is_empty() || s == "." || s == ".." || s.contains(['/', '\\', '\0']) {
        return Err(JournalError::BadSessionId(s.to_owned()));
    }
    Ok(home.join("provenance").join(s))
}

/// Load a journal read-only (for `keel trace` and queries over finished or running sessions):
/// every line is checked and compiled; nothing is written, no open call is closed. A torn last
/// line is returned beside the snapshot of the lines before it.
pub fn load_snapshot(dir: &Path) -> Result<(Snapshot, Option<TornTail>), JournalError> {
    let path = dir.join(RECEIPTS_FILE);
    let bytes = fs::read(&path).map_err(io(&path))?;
    let scan = verify::scan_receipts(&bytes, None).map_err(|failure| JournalError::Corrupt {
        path: path.clone(),
        failure: Box::new(failure),
    })?;
    let run_id = scan.receipts.first().map_or("", |r| r.run_id.as_str());
    let snapshot =
        Snapshot::compile(run_id, &scan.receipts).map_err(|e| JournalError::Corrupt {
            path,
            failure: Box::new(verify::compile_failure(&e)),
        })?;
    Ok((snapshot, scan.torn))
}

/// A [`Recorder`] whose receipts are appended to `receipts.jsonl`.
#[derive(Debug)]
pub struct Journal {
    dir: PathBuf,
    file: File,
    len: u64,
    recorder: Recorder,
    report: ResumeReport,
    /// The last `graph.json` this journal published: receipts it covered, its `graph_id`.
    published: Option<(usize, String)>,
}

impl Journal {
    /// Open (create or resume) the journal of `session` under `$KEEL_HOME` = `home`.
    pub fn open_in_home(home: &Path, session: &SessionId) -> Result<Journal, JournalError> {
        let dir = journal_dir(home, session)?;
        Journal::open(&dir, session.as_str())
    }

    /// Open (create or resume) the journal in `dir` for run `run_id`.
    pub fn open(dir: &Path, run_id: &str) -> Result<Journal, JournalError> {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(io(dir))?;
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).map_err(io(dir))?;
        let path = dir.join(RECEIPTS_FILE);
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o600)
            .open(&path)
            .map_err(io(&path))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(io(&path))?;
        let scan =
            verify::scan_receipts(&bytes, None).map_err(|failure| JournalError::Corrupt {
                path: path.clone(),
                failure: Box::new(failure),
            })?;
        if let Some(found) = scan.receipts.first().map(|r| r.run_id.clone())
            && found != run_id
        {
            return Err(JournalError::RunMismatch {
                path,
                found,
                expected: run_id.to_owned(),
            });
        }
        let mut recorder =
            Recorder::replay(run_id, &scan.receipts).map_err(|e| JournalError::Corrupt {
                path: path.clone(),
                failure: Box::new(verify::compile_failure(&e)),
            })?;
        let mut report = ResumeReport {
            receipts: scan.receipts.len(),
            ..ResumeReport::default()
        };
        if let Some(torn) = scan.torn {
            file.set_len(scan.good_len).map_err(io(&path))?;
            file.sync_all().map_err(io(&path))?;
            let detail = format!(
                "journal_tail_torn: {} byte(s) after line {} cut at resume (sha256 {})",
                torn.bytes, torn.line, torn.sha256
            );
            recorder.failure(Stage::CaptureFailure, RECEIPTS_FILE, &detail);
            report.torn_tail = Some(torn);
        }
        let mut journal = Journal {
            dir: dir.to_owned(),
            file,
            len: scan.good_len,
            recorder,
            report,
            published: None,
        };
        if journal.report.receipts > 0 {
            journal.report.closed_calls = journal
                .recorder
                .open_calls()
                .into_iter()
                .map(str::to_owned)
                .collect();
            journal.recorder.close_open_calls("resume");
            journal.flush()?;
            journal.sync()?;
        }
        Ok(journal)
    }

    /// What opening found (empty for a new journal).
    pub fn resume_report(&self) -> &ResumeReport {
        &self.report
    }

    /// The journal directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The capture API.
    pub fn recorder(&self) -> &Recorder {
        &self.recorder
    }

    /// The capture API, to record stages.
    pub fn recorder_mut(&mut self) -> &mut Recorder {
        &mut self.recorder
    }

    /// The graph so far.
    pub fn snapshot(&self) -> &Snapshot {
        self.recorder.snapshot()
    }

    /// Append pending receipt lines (one `write`, no fsync). Returns how many were written. On
    /// error the file is cut back to its last complete line and the lines stay pending.
    pub fn flush(&mut self) -> Result<usize, JournalError> {
        let (bytes, count) = self.recorder.pending_bytes();
        if count == 0 {
            return Ok(0);
        }
        let path = self.dir.join(RECEIPTS_FILE);
        if let Err(e) = self.file.write_all(bytes) {
            let _ = self.file.set_len(self.len);
            return Err(io(&path)(e));
        }
        self.len += bytes.len() as u64;
        self.recorder.clear_pending();
        Ok(count)
    }

    /// fsync `receipts.jsonl`.
    pub fn sync(&mut self) -> Result<(), JournalError> {
        let path = self.dir.join(RECEIPTS_FILE);
        self.file.sync_data().map_err(io(&path))
    }

    /// Publish `graph.json` atomically; returns the `graph_id`.
    pub fn write_graph(&mut self) -> Result<String, JournalError> {
        // The snapshot changes only with receipts: a graph already published for as many is
        // this one (step boundaries without tool calls, a subagent's final publish).
        let receipts = self.recorder.snapshot().receipts().len();
        if let Some((covered, graph_id)) = &self.published
            && *covered == receipts
        {
            return Ok(graph_id.clone());
        }
        let (graph_id, mut bytes) = self.recorder.snapshot().to_canonical();
        bytes.push(b'\n');
        let tmp = self.dir.join(".graph.json.tmp");
        let path = self.dir.join(GRAPH_FILE);
        {
            let mut f = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)
                .map_err(io(&tmp))?;
            f.write_all(&bytes).map_err(io(&tmp))?;
            f.sync_all().map_err(io(&tmp))?;
        }
        fs::rename(&tmp, &path).map_err(io(&path))?;
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(io(&self.dir))?;
        self.published = Some((receipts, graph_id.clone()));
        Ok(graph_id)
    }

    /// The `graph_id` of the `graph.json` last published, if it is still the current snapshot's.
    pub fn published_graph_id(&self) -> Option<&str> {
        let receipts = self.recorder.snapshot().receipts().len();
        match &self.published {
            Some((covered, id)) if *covered == receipts => Some(id),
            _ => None,
        }
    }

    /// Close: open calls become `outcome_unobserved`, receipts are flushed and synced, and the
    /// final `graph.json` is written. Returns the `graph_id`.
    pub fn close(mut self) -> Result<String, JournalError> {
        self.recorder.close_open_calls("close");
        self.flush()?;
        self.sync()?;
        self.write_graph()
    }
}
