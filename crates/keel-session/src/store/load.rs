//! Loading a session file: plain or zstd, keel's or dsh's, with torn-tail tolerance.
//!
//! Flow: read the file (zstd: decode frame by frame, remembering where each frame starts) →
//! parse the header → parse and append each line through the session's validation. At the first
//! defect (unparseable line, failed validation, missing final newline, damaged frame): if a later
//! record is a `turn/end`, the defect lies before a committed turn end and loading fails with
//! [`LoadError::Corrupt`]; otherwise everything from the defect on is a torn tail — dropped and
//! reported ([`TornTail`]), cut at the start of the damaged frame for zstd files since a frame is
//! one durable batch. Unknown event types not marked `ignorable` refuse to load.

use super::parse::{Line, parse_line};
use super::{DSH_ZSTD_FILE, Format, PLAIN_FILE, ZSTD_FILE};
use crate::error::AppendError;
use crate::session::Session;
use keel_protocol::{LOG_VERSION, Seq, SessionHeader};
use std::io::Read;
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

/// Decoded text plus, for zstd, (compressed start, decoded start) of each frame.
struct Decoded {
    text: Vec<u8>,
    frames: Vec<(u64, u64)>,
    /// A damaged frame: (compressed offset, decoded offset, reason). Nothing after it is decoded
    /// into `text`; `later` holds what later frames decode to (for the turn/end check).
    damage: Option<(u64, u64, String)>,
    later: Vec<u8>,
    file_len: u64,
}

fn decode_zstd(data: &[u8]) -> Decoded {
    let mut out = Decoded {
        text: Vec::with_capacity(data.len() * 4),
        frames: Vec::new(),
        damage: None,
        later: Vec::new(),
        file_len: data.len() as u64,
    };
    let mut off = 0usize;
    while off < data.len() {
        let frame = zstd::zstd_safe::find_frame_compressed_size(&data[off..])
            .ok()
            .filter(|&n| n > 0 && off + n <= data.len());
        let decoded_start = out.text.len() as u64;
        let target = if out.damage.is_some() {
            &mut out.later
        } else {
            &mut out.text
        };
        let before = target.len();
        let res = match frame {
            Some(n) => zstd::stream::read::Decoder::with_buffer(&data[off..off + n])
                .and_then(|d| d.single_frame().read_to_end(target))
                .map(|_| n)
                .map_err(|e| e.to_string()),
            None => Err("incomplete or invalid zstd frame".to_owned()),
        };
        match res {
            Ok(n) => {
                if out.damage.is_none() {
                    out.frames.push((off as u64, decoded_start));
                }
                off += n;
            }
            Err(reason) => {
                target.truncate(before);
                if out.damage.is_none() {
                    // The damaged frame starts a (dropped) batch too.
                    out.frames.push((off as u64, decoded_start));
                    out.damage = Some((off as u64, decoded_start, reason));
                }
                match frame {
                    Some(n) => off += n,
                    None => break,
                }
            }
        }
    }
    out
}

/// Load the session at `path` (a session directory or file).
pub fn load(path: &Path) -> Result<Loaded, LoadError> {
    let file = session_file(path).map_err(|source| LoadError::Io {
        path: path.to_owned(),
        source,
    })?;
    let data = std::fs::read(&file).map_err(|source| LoadError::Io {
        path: file.clone(),
        source,
    })?;
    let format = Format::of_path(&file);
    let decoded = match format {
        Format::Plain => Decoded {
            file_len: data.len() as u64,
            text: data,
            frames: Vec::new(),
            damage: None,
            later: Vec::new(),
        },
        Format::Zstd => decode_zstd(&data),
    };
    load_decoded(file, format, decoded)
}

/// A defect found while reading lines.
struct Defect {
    line: u64,
    offset: u64,
    seq: Seq,
    reason: String,
}

fn has_turn_end(text: &[u8]) -> bool {
    text.split(|&b| b == b'\n').any(|l| {
        memchr::memmem::find(l, b"\"turn/end\"").is_some()
            && std::str::from_utf8(l)
                .ok()
                .and_then(|l| parse_line(l).ok())
                .is_some_and(|p| matches!(p, Line::Event(e) if e.type_name() == "turn/end"))
    })
}

fn load_decoded(path: PathBuf, format: Format, d: Decoded) -> Result<Loaded, LoadError> {
    let text = &d.text[..];
    let header_end = memchr::memchr(b'\n', text).ok_or_else(|| LoadError::Header {
        path: path.clone(),
        reason: "no complete first line".to_owned(),
    })?;
    let header_line = std::str::from_utf8(&text[..header_end]).map_err(|e| LoadError::Header {
        path: path.clone(),
        reason: e.to_string(),
    })?;
    let header: SessionHeader =
        serde_json::from_str(header_line).map_err(|e| LoadError::Header {
            path: path.clone(),
            reason: e.to_string(),
        })?;
    if header.record_type != "session" {
        return Err(LoadError::Header {
            path,
            reason: format!("type is {:?}, not \"session\"", header.record_type),
        });
    }
    if header.version != LOG_VERSION {
        return Err(LoadError::Version {
            path,
            found: header.version,
        });
    }
    let (session, lines, defect) =
        read_lines(&path, header.clone(), text, header_end + 1, u64::MAX)?;
    let Some(defect) = defect.or_else(|| {
        d.damage.as_ref().map(|(_, dec, reason)| Defect {
            line: lines + 1,
            offset: *dec,
            seq: session.next_seq(),
            reason: format!("damaged zstd frame: {reason}"),
        })
    }) else {
        let events = session.len();
        let report = LoadReport {
            path,
            format,
            events,
            lines,
            valid_len: d.file_len,
            torn: None,
        };
        return Ok(Loaded { session, report });
    };
    // A defect: corruption if a committed turn/end follows it, else a torn tail.
    let rest = text.get(defect.offset as usize..).unwrap_or(&[]);
    let after_defect = memchr::memchr(b'\n', rest).map_or(&[][..], |nl| &rest[nl + 1..]);
    if has_turn_end(after_defect) || has_turn_end(&d.later) {
        return Err(LoadError::Corrupt {
            path,
            line: defect.line,
            seq: defect.seq,
            reason: defect.reason,
        });
    }
    // Where the committed part ends, in decoded and in file bytes.
    let (cut_decoded, cut_file) = match format {
        Format::Plain => (defect.offset, defect.offset),
        Format::Zstd => d
            .frames
            .iter()
            .rev()
            .find(|(_, dec)| *dec <= defect.offset)
            .map(|&(comp, dec)| (dec, comp))
            .unwrap_or((0, 0)),
    };
    if (cut_decoded as usize) <= header_end {
        return Err(LoadError::Header {
            path,
            reason: "the first batch (header) is damaged".to_owned(),
        });
    }
    let (session, lines) = if cut_decoded == defect.offset {
        (session, lines)
    } else {
        let (s, l, _) = read_lines(&path, header, text, header_end + 1, cut_decoded)?;
        (s, l)
    };
    let torn = TornTail {
        offset: cut_file,
        dropped_bytes: d.file_len - cut_file,
        line: defect.line,
        reason: defect.reason,
    };
    let events = session.len();
    let report = LoadReport {
        path,
        format,
        events,
        lines,
        valid_len: cut_file,
        torn: Some(torn),
    };
    Ok(Loaded { session, report })
}

/// One line's parse: the offset after it and what it holds.
struct Parsed<'a> {
    next: usize,
    line: Result<Line<'a>, String>,
}

fn parse_one(text: &[u8], pos: usize, end: usize) -> Parsed<'_> {
    let Some(nl) = memchr::memchr(b'\n', &text[pos..end]) else {
        return Parsed {
            next: end,
            line: Err("the last record has no newline (torn write)".to_owned()),
        };
    };
    let line = match std::str::from_utf8(&text[pos..pos + nl]) {
        Err(e) => Err(format!("not UTF-8: {e}")),
        Ok(line) => parse_line(line).map_err(|e| e.to_string()),
    };
    Parsed {
        next: pos + nl + 1,
        line,
    }
}

/// Parse `text[from..to]` (whole lines), stopping after the first failure.
fn parse_segment(text: &[u8], from: usize, to: usize) -> Vec<Parsed<'_>> {
    let mut out = Vec::new();
    let mut pos = from;
    while pos < to {
        let p = parse_one(text, pos, to);
        pos = p.next;
        let failed = p.line.is_err();
        out.push(p);
        if failed {
            break;
        }
    }
    out
}

/// Segments worth parsing on other threads: `[(from, to)]` split at line starts.
fn segments(text: &[u8], start: usize, end: usize) -> Vec<(usize, usize)> {
    const MIN_SEGMENT: usize = 4 << 20;
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(4);
    let n = ((end - start) / MIN_SEGMENT).clamp(1, threads);
    let mut cuts = vec![start];
    for k in 1..n {
        let guess = start + (end - start) * k / n;
        let cut = memchr::memchr(b'\n', &text[guess..end]).map_or(end, |nl| guess + nl + 1);
        if cut > *cuts.last().unwrap_or(&start) && cut < end {
            cuts.push(cut);
        }
    }
    cuts.push(end);
    cuts.windows(2).map(|w| (w[0], w[1])).collect()
}

/// Append every line of `text[start..end]` to a new session. Stops at the first defect, which
/// is returned with the session of the lines before it and the number of lines read. Lines
/// are parsed on several threads for large files; they are appended in order on this one.
fn read_lines(
    path: &Path,
    header: SessionHeader,
    text: &[u8],
    start: usize,
    end: u64,
) -> Result<(Session, u64, Option<Defect>), LoadError> {
    let end = (end as usize).min(text.len());
    let segs = if start < end {
        segments(text, start, end)
    } else {
        Vec::new()
    };
    let mut ingest = Ingest {
        path,
        session: Session::new(header),
        pos: start,
        line_no: 1,
    };
    let outcome = std::thread::scope(|scope| -> Result<Option<Defect>, LoadError> {
        let others: Vec<_> = segs
            .iter()
            .skip(1)
            .map(|&(a, b)| scope.spawn(move || parse_segment(text, a, b)))
            .collect();
        if let Some(&(a, b)) = segs.first() {
            let mut pos = a;
            while pos < b {
                let p = parse_one(text, pos, b);
                pos = p.next;
                if let Some(d) = ingest.feed(p)? {
                    return Ok(Some(d));
                }
            }
        }
        for (h, &(a, _)) in others.into_iter().zip(segs.iter().skip(1)) {
            let parsed = h.join().unwrap_or_else(|_| {
                vec![Parsed {
                    next: a,
                    line: Err("internal error: the parser thread panicked".to_owned()),
                }]
            });
            for p in parsed {
                if let Some(d) = ingest.feed(p)? {
                    return Ok(Some(d));
                }
            }
        }
        Ok(None)
    })?;
    let Ingest {
        mut session,
        line_no,
        pos,
        ..
    } = ingest;
    match outcome {
        None => Ok((session, line_no, None)),
        Some(defect) => {
            if session.len() != defect.seq.0 {
                // A packed row failed half-way: rebuild from the lines before it.
                session = read_lines(path, session.header().clone(), text, start, pos as u64)?.0;
            }
            let defect = Defect {
                seq: session.next_seq(),
                ..defect
            };
            Ok((session, line_no - 1, Some(defect)))
        }
    }
}

/// Appends parsed lines in order, tracking position and line number.
struct Ingest<'p> {
    path: &'p Path,
    session: Session,
    /// Start of the next line.
    pos: usize,
    /// Number of the last line fed.
    line_no: u64,
}

impl Ingest<'_> {
    fn feed(&mut self, p: Parsed<'_>) -> Result<Option<Defect>, LoadError> {
        self.line_no += 1;
        let before = self.session.len();
        let res = match p.line {
            Err(reason) => Err(Reason::Defect(reason)),
            Ok(line) => append_line(self.path, self.line_no, line, &mut self.session),
        };
        match res {
            Ok(()) => {
                self.pos = p.next;
                Ok(None)
            }
            Err(Reason::Unknown(e)) => Err(e),
            Err(Reason::Defect(reason)) => Ok(Some(Defect {
                line: self.line_no,
                offset: self.pos as u64,
                seq: Seq(before),
                reason,
            })),
        }
    }
}

fn append_line(
    path: &Path,
    line_no: u64,
    line: Line<'_>,
    session: &mut Session,
) -> Result<(), Reason> {
    match line {
        Line::Event(ev) => session
            .append_parsed(ev)
            .map_err(|e| append_reason(path, line_no, e)),
        Line::Delta(dl) => session
            .append_delta(&dl)
            .map_err(|e| append_reason(path, line_no, e)),
        Line::Row(row) => {
            let mut time = 0;
            for i in 0..row.len() {
                time = row.time_after(i, time);
                session
                    .append_delta(&row.member(i, time))
                    .map_err(|e| append_reason(path, line_no, e))?;
            }
            Ok(())
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
