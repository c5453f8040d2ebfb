//! Loading a session file: plain or zstd, keel's or dsh's, with torn-tail tolerance.
//!
//! Flow: read the file in pieces ([`super::lines`]; zstd: frame by frame, remembering where each
//! frame starts) → parse the header → parse each line ([`super::parse`], [`super::fast`]) and
//! append it through the session's validation, one line at a time. At the first
//! defect (unparseable line, failed validation, missing final newline, damaged frame): if a later
//! record is a `turn/end`, the defect lies before a committed turn end and loading fails with
//! [`LoadError::Corrupt`]; otherwise everything from the defect on is a torn tail — dropped and
//! reported ([`TornTail`]), cut at the start of the damaged frame for zstd files since a frame is
//! one durable batch. Unknown event types not marked `ignorable` refuse to load.
//!
//! Files of `Tuning::min_file` bytes or more are read on two threads (`super::pipeline`) up to
//! the end or the first line that does not parse or append; from there on they are read here,
//! one line at a time, so every error and torn tail is found and worded by the code above.

use super::lines::{LineRead, Lines, Source};
use super::parse::{Line, Scratch, parse_line};
use super::pipeline::{self, Tuning};
use super::{DSH_ZSTD_FILE, Format, PLAIN_FILE, ZSTD_FILE};
use crate::error::AppendError;
use crate::session::Session;
use keel_protocol::{LOG_VERSION, Seq, SessionHeader};
use std::path::{Path, PathBuf};

/// A loaded session and what the loader found.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The session (committed events only).
    pub session: Session,
    /// What was read and dropped.
    pub report: LoadReport,
}

/// What the loader read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadReport {
    /// The file read.
    pub path: PathBuf,
    /// Its format.
    pub format: Format,
    /// Events loaded.
    pub events: u64,
    /// Lines read (header included, torn tail excluded).
    pub lines: u64,
    /// Bytes of the file holding committed records (where appending continues).
    pub valid_len: u64,
    /// The torn tail dropped, if any.
    pub torn: Option<TornTail>,
}

/// A dropped torn tail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornTail {
    /// Byte offset in the file where the dropped part starts.
    pub offset: u64,
    /// Bytes dropped.
    pub dropped_bytes: u64,
    /// Line number (1-based, in the decoded text) of the first dropped record.
    pub line: u64,
    /// What was wrong with it.
    pub reason: String,
}

/// Why a session could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read. Check the path and permissions.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The first line is missing or not a session header: not a session file.
    #[error("{path}: line 1 is not a session header: {reason}")]
    Header {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The header names a log version keel does not read (written by a newer harness).
    #[error(
        "{path}: session log version {found} is not supported (keel reads version {LOG_VERSION})"
    )]
    Version {
        /// The file.
        path: PathBuf,
        /// The version found.
        found: u32,
    },
    /// A record before the last committed `turn/end` is damaged: the log cannot be trusted past
    /// it. Nothing is repaired silently; inspect or restore the file.
    #[error("{path}: corrupt at line {line} (seq {seq}): {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// 1-based line number in the decoded text.
        line: u64,
        /// The seq expected at that line.
        seq: Seq,
        /// What is wrong.
        reason: String,
    },
    /// An event type keel does not know, not marked `ignorable`: a newer or foreign writer.
    /// Upgrade keel to read it.
    #[error(
        "{path}: line {line} (seq {seq}) has event type {type_name:?}, which this keel does not know and which is not marked ignorable"
    )]
    UnknownEventType {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: u64,
        /// Its seq.
        seq: Seq,
        /// The type.
        type_name: String,
    },
}

impl LoadError {
    /// True for damage (corruption), as opposed to an unreadable or foreign file.
    pub fn is_corruption(&self) -> bool {
        matches!(self, LoadError::Corrupt { .. })
    }
}

/// The session file for a path that is a session directory or a file.
pub fn session_file(path: &Path) -> std::io::Result<PathBuf> {
    if path.is_file() {
        return Ok(path.to_owned());
    }
    for name in [ZSTD_FILE, DSH_ZSTD_FILE, PLAIN_FILE] {
        let p = path.join(name);
        if p.is_file() {
            return Ok(p);
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::NotFound,
        "no session.jsonl, session.jsonl.zst or session.jsonl.zstd",
    ))
}

/// Load the session at `path` (a session directory or file).
pub fn load(path: &Path) -> Result<Loaded, LoadError> {
    load_tuned(path, Some(Tuning::default()))
}

/// [`load`] read the sequential way only, whatever the file's size. For the fuzz target
/// (`fuzz/fuzz_targets/session_load.rs`); not a stable API.
#[doc(hidden)]
pub fn load_sequential(path: &Path) -> Result<Loaded, LoadError> {
    load_tuned(path, None)
}

/// [`load`] with the two-thread reader used for any file size, handing blocks of at least
/// `block` bytes between the threads. For the fuzz target, which checks that it agrees with
/// [`load_sequential`]; not a stable API.
#[doc(hidden)]
pub fn load_two_threads(path: &Path, block: usize) -> Result<Loaded, LoadError> {
    load_tuned(path, Some(Tuning { min_file: 0, block }))
}

/// [`load`], on two threads when `two_threads` is set and the file is big enough (see
/// [`super::pipeline`]), else (and always after a defect) the sequential way.
pub(crate) fn load_tuned(path: &Path, two_threads: Option<Tuning>) -> Result<Loaded, LoadError> {
    let file = session_file(path).map_err(|source| LoadError::Io {
        path: path.to_owned(),
        source,
    })?;
    let format = Format::of_path(&file);
    let open = |limit| {
        Source::open(&file, format)
            .map(|src| Lines::new(src, limit))
            .map_err(|source| LoadError::Io {
                path: file.clone(),
                source,
            })
    };
    let mut lines = open(u64::MAX)?;
    let (header, header_end) = read_header(&file, &mut lines)?;
    let two_threads =
        two_threads.filter(|t| std::fs::metadata(&file).is_ok_and(|m| m.len() >= t.min_file));
    let mut ingest = Ingest::new(&file, header.clone());
    ingest.run_two_threads(&mut lines, two_threads)?;
    let line_defect = ingest.run(&mut lines)?;
    // A damaged frame ends the text: it is the defect when no line before it is.
    let damage = lines.src.zstd().and_then(|z| z.damage.clone());
    let Some(defect) = line_defect.or_else(|| {
        damage.as_ref().map(|(_, dec, reason)| Defect {
            line: ingest.line_no + 1,
            offset: *dec,
            seq: ingest.session.next_seq(),
            reason: format!("damaged zstd frame: {reason}"),
        })
    }) else {
        let Ingest {
            session, line_no, ..
        } = ingest;
        let events = session.len();
        let report = LoadReport {
            valid_len: lines.src.file_len(),
            path: file,
            format,
            events,
            lines: line_no,
            torn: None,
        };
        return Ok(Loaded { session, report });
    };
    // A defect: corruption if a committed turn/end follows it, else a torn tail.
    let io = |source| LoadError::Io {
        path: file.clone(),
        source,
    };
    let mut committed_after = ingest.turn_end_follows(&mut lines).map_err(io)?;
    let frames = lines
        .src
        .zstd()
        .map(|z| z.frames.clone())
        .unwrap_or_default();
    let file_len = lines.src.file_len();
    if !committed_after && let Some(later) = lines.into_source().later() {
        committed_after = ingest
            .turn_end_follows(&mut Lines::new(later, u64::MAX))
            .map_err(io)?;
    }
    if committed_after {
        return Err(LoadError::Corrupt {
            path: file,
            line: defect.line,
            seq: defect.seq,
            reason: defect.reason,
        });
    }
    // Where the committed part ends, in decoded and in file bytes.
    let (cut_decoded, cut_file) = match format {
        Format::Plain => (defect.offset, defect.offset),
        Format::Zstd => frames
            .iter()
            .rev()
            .find(|(_, dec)| *dec <= defect.offset)
            .map(|&(comp, dec)| (dec, comp))
            .unwrap_or((0, 0)),
    };
    if cut_decoded <= header_end {
        return Err(LoadError::Header {
            path: file,
            reason: "the first batch (header) is damaged".to_owned(),
        });
    }
    let (session, lines) = if cut_decoded == defect.offset {
        (ingest.session, ingest.line_no - 1)
    } else {
        // The defect is inside a batch: read again up to the batch's start.
        let mut lines = open(cut_decoded)?;
        read_header(&file, &mut lines)?;
        let mut again = Ingest::new(&file, header);
        again.run_two_threads(&mut lines, two_threads)?;
        let cut_defect = again.run(&mut lines)?;
        let read = again.line_no - u64::from(cut_defect.is_some());
        (again.session, read)
    };
    let torn = TornTail {
        offset: cut_file,
        dropped_bytes: file_len - cut_file,
        line: defect.line,
        reason: defect.reason,
    };
    let events = session.len();
    let report = LoadReport {
        path: file,
        format,
        events,
        lines,
        valid_len: cut_file,
        torn: Some(torn),
    };
    Ok(Loaded { session, report })
}

/// Read and check the header line; returns it and the offset of its newline.
fn read_header(path: &Path, lines: &mut Lines) -> Result<(SessionHeader, u64), LoadError> {
    let header_err = |reason: String| LoadError::Header {
        path: path.to_owned(),
        reason,
    };
    let line = match lines.next() {
        Ok(LineRead::Line(_, line)) => line,
        Ok(_) => return Err(header_err("no complete first line".to_owned())),
        Err(source) => {
            return Err(LoadError::Io {
                path: path.to_owned(),
                source,
            });
        }
    };
    let header_end = line.len() as u64;
    let header_line = std::str::from_utf8(line).map_err(|e| header_err(e.to_string()))?;
    let header: SessionHeader =
        serde_json::from_str(header_line).map_err(|e| header_err(e.to_string()))?;
    if header.record_type != "session" {
        return Err(header_err(format!(
            "type is {:?}, not \"session\"",
            header.record_type
        )));
    }
    if header.version != LOG_VERSION {
        return Err(LoadError::Version {
            path: path.to_owned(),
            found: header.version,
        });
    }
    Ok((header, header_end))
}

/// A defect found while reading lines.
struct Defect {
    line: u64,
    offset: u64,
    seq: Seq,
    reason: String,
}

/// Appends lines in order to a new session, tracking the line number.
struct Ingest<'p> {
    path: &'p Path,
    session: Session,
    /// Number of the last line read (the header is line 1).
    line_no: u64,
    scratch: Scratch,
}

impl<'p> Ingest<'p> {
    fn new(path: &'p Path, header: SessionHeader) -> Ingest<'p> {
        Ingest {
            path,
            session: Session::new(header),
            line_no: 1,
            scratch: Scratch::default(),
        }
    }

    /// With `tuning`, append lines on two threads ([`pipeline::ingest`]) as far as they parse
    /// and append, and leave `lines` at the first line not appended, for [`Ingest::run`].
    fn run_two_threads(
        &mut self,
        lines: &mut Lines,
        tuning: Option<Tuning>,
    ) -> Result<(), LoadError> {
        let Some(tuning) = tuning else {
            return Ok(());
        };
        let done = pipeline::ingest(lines, &mut self.session, tuning);
        self.line_no += done.lines;
        if !done.whole {
            // Stopped before the end: go on from the first line not appended, which meets
            // whatever stopped the two threads again.
            lines.rewind(done.at).map_err(|source| LoadError::Io {
                path: self.path.to_owned(),
                source,
            })?;
        }
        Ok(())
    }

    /// Append every line to the session. Stops at the first defect, which is returned; the
    /// session then holds the lines before it.
    fn run(&mut self, lines: &mut Lines) -> Result<Option<Defect>, LoadError> {
        loop {
            let next = lines.next().map_err(|source| LoadError::Io {
                path: self.path.to_owned(),
                source,
            })?;
            let (offset, res) = match next {
                LineRead::End => return Ok(None),
                LineRead::Unfinished(offset, _) => (
                    offset,
                    Err(Reason::Defect(
                        "the last record has no newline (torn write)".to_owned(),
                    )),
                ),
                LineRead::Line(offset, bytes) => (offset, self.feed(bytes)),
            };
            self.line_no += 1;
            match res {
                Ok(()) => {}
                Err(Reason::Unknown(e)) => return Err(e),
                Err(Reason::Defect(reason)) => {
                    return Ok(Some(Defect {
                        line: self.line_no,
                        offset,
                        seq: self.session.next_seq(),
                        reason,
                    }));
                }
            }
        }
    }

    /// Parse one line and append what it holds.
    fn feed(&mut self, bytes: &[u8]) -> Result<(), Reason> {
        let line =
            std::str::from_utf8(bytes).map_err(|e| Reason::Defect(format!("not UTF-8: {e}")))?;
        let line =
            parse_line(line, &mut self.scratch).map_err(|e| Reason::Defect(e.to_string()))?;
        let line_no = self.line_no + 1;
        let session = &mut self.session;
        let res = match line {
            Line::Event(ev) => session.append_parsed(ev),
            Line::Delta(d) => session.append_delta(&d),
            Line::Row(row) => session.append_row(&row),
        };
        res.map_err(|e| append_reason(self.path, line_no, e))
    }

    /// True when a later record of `lines` (an unfinished last line included) is a `turn/end`.
    fn turn_end_follows(&mut self, lines: &mut Lines) -> std::io::Result<bool> {
        loop {
            let line = match lines.next()? {
                LineRead::End => return Ok(false),
                LineRead::Line(_, line) | LineRead::Unfinished(_, line) => line,
            };
            if memchr::memmem::find(line, b"\"turn/end\"").is_some()
                && std::str::from_utf8(line)
                    .ok()
                    .and_then(|l| parse_line(l, &mut self.scratch).ok())
                    .is_some_and(|p| matches!(p, Line::Event(e) if e.type_name() == "turn/end"))
            {
                return Ok(true);
            }
        }
    }
}

enum Reason {
    Defect(String),
    Unknown(LoadError),
}

fn append_reason(path: &Path, line: u64, e: AppendError) -> Reason {
    match e {
        AppendError::UnknownRequiredType { seq, type_name } => {
            Reason::Unknown(LoadError::UnknownEventType {
                path: path.to_owned(),
                line,
                seq,
                type_name,
            })
        }
        e => Reason::Defect(e.to_string()),
    }
}
