//! A Ray job's output, read as it comes: the session's events into the task's session here
//! (the [`Mirror`], validated by keel's own writer), the job's own lines (`{"keel_batch": …}`:
//! exit, check, the workspace sent back) into what the task reports, anything else into the
//! task's log.

use crate::engine::{CheckOutcome, Msg, usage_of};
use crate::job::{LINE, hex_sha256};
use crate::pack::{PackError, unpack};
use base64::Engine as _;
use keel_protocol::{LogRecord, SessionEvent, SessionHeader};
use keel_session::store::{Store, WriterOptions, parse_record};
use keel_session::{AppendError, PersistentError, PersistentSession, Session, StoreError};
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc::Sender;

/// Why the task's session here could not follow the job's (the copy stops there).
#[derive(Debug, thiserror::Error)]
pub enum MirrorError {
    /// The copy here could not be opened.
    #[error("cannot open the session {id} here: {error}")]
    Open {
        /// The session id.
        id: String,
        /// Why.
        error: PersistentError,
    },
    /// The copy here could not be created.
    #[error("cannot create the session {id} here: {error}")]
    Create {
        /// The session id.
        id: String,
        /// Why.
        error: StoreError,
    },
    /// Events are missing from the job's output.
    #[error("the job's output skipped from event {from} to {to} of session {id}")]
    Skipped {
        /// The seq the copy expected.
        from: u64,
        /// The seq that came.
        to: u64,
        /// The session id.
        id: String,
    },
    /// An event the session's writer refuses.
    #[error("event {seq} of the job's output does not fit session {id}: {error}")]
    Misfit {
        /// Its seq.
        seq: u64,
        /// The session id.
        id: String,
        /// Why.
        error: AppendError,
    },
    /// The copy could not be written out.
    #[error("cannot write the session here: {error}")]
    Close {
        /// Why.
        error: StoreError,
    },
    /// The session to resume is not in the store here.
    #[error("session {id}: {error}")]
    Resolve {
        /// The session id.
        id: String,
        /// What the store said.
        error: StoreError,
    },
    /// Crash repair of the copy failed.
    #[error("cannot repair the session {}: {error}", path.display())]
    Repair {
        /// The session's file.
        path: PathBuf,
        /// Why.
        error: PersistentError,
    },
    /// The repaired copy could not be written.
    #[error("cannot write the session {}: {error}", path.display())]
    Write {
        /// The session's file.
        path: PathBuf,
        /// Why.
        error: StoreError,
    },
}

/// Why the workspace a job sent back could not be put in place.
#[derive(Debug, thiserror::Error)]
pub enum SendBackError {
    /// The session's copy failed first.
    #[error(transparent)]
    Mirror(#[from] MirrorError),
    /// A part of the zip is not base64.
    #[error("a part is not base64: {error}")]
    Base64 {
        /// What the decoder said.
        error: base64::DecodeError,
    },
    /// The node kept it.
    #[error("the node did not send the workspace back: {why}")]
    Skipped {
        /// The node's reason.
        why: String,
    },
    /// keel ran to its end on the node, but the job's output stops before the workspace:
    /// the job was killed while it sent it back (Ray kills a stopped job that has not ended
    /// within its time limit).
    #[error(
        "the job ended before it sent the workspace back; the workspace here is as it was \
         before the job"
    )]
    Missing,
    /// Its hash is not the one announced.
    #[error("the workspace the node sent back is damaged (its hash differs)")]
    Damaged,
    /// It could not be unpacked.
    #[error("the workspace the node sent back: {error}")]
    Unpack {
        /// Why.
        error: PackError,
    },
    /// It could not replace the workspace here.
    #[error("cannot put the workspace back at {}: {error}", path.display())]
    Swap {
        /// The task's workspace.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
}

/// The last check result in a job's output.
pub(super) fn last_check(text: &str) -> Option<(CheckOutcome, u64)> {
    text.lines().rev().find_map(|line| {
        let v = own_line(line)?;
        (v.get(LINE)?.as_str()? == "check").then(|| {
            (
                CheckOutcome::from_json(&v),
                v.get("ms").and_then(Value::as_u64).unwrap_or(0),
            )
        })
    })
}

/// A job's own line (`{"keel_batch": …}`), parsed.
fn own_line(line: &str) -> Option<Value> {
    line.starts_with(&format!("{{\"{LINE}\":"))
        .then(|| serde_json::from_str(line).ok())
        .flatten()
}

/// Reads a job's output: the session's events into the [`Mirror`], the job's own lines into
/// what the task reports, anything else (Ray's lines, keel's stderr) into the task's log.
pub(super) struct Reader {
    index: usize,
    pub(super) mirror: Mirror,
    /// Bytes of the job's output already read.
    pub(super) consumed: usize,
    /// keel's exit (`Some(code)`) once reported.
    pub(super) exited: Option<Option<i32>>,
    pub(super) check: Option<(CheckOutcome, u64)>,
    /// The job's own error line.
    pub(super) error: Option<String>,
    /// The workspace coming back, and its end line.
    ws: Vec<u8>,
    ws_end: Option<Value>,
    ws_bad: Option<SendBackError>,
    /// The last lines that were neither events nor the job's own (for a failure's message).
    pub(super) tail: Vec<String>,
}

impl Reader {
    pub(super) fn new(
        index: usize,
        store: Store,
        workspace: PathBuf,
        session: Option<String>,
    ) -> Reader {
        Reader {
            index,
            mirror: Mirror {
                store,
                workspace,
                log: None,
                id: session,
                error: None,
            },
            consumed: 0,
            exited: None,
            check: None,
            error: None,
            ws: Vec::new(),
            ws_end: None,
            ws_bad: None,
            tail: Vec::new(),
        }
    }

    /// A new job: its output starts from nothing.
    pub(super) fn reset_job(&mut self) {
        self.consumed = 0;
        self.exited = None;
        self.check = None;
        self.error = None;
        self.ws.clear();
        self.ws_end = None;
        self.ws_bad = None;
        self.tail.clear();
    }

    /// Read the whole output `text` so far (the API returns all of it): its new complete
    /// lines.
    pub(super) fn feed<W: LogSink>(&mut self, text: &str, tx: Option<&Sender<Msg>>, log: &mut W) {
        let Some(rest) = text.get(self.consumed..) else {
            return;
        };
        let Some(end) = rest.rfind('\n') else { return };
        let chunk = &rest[..=end];
        self.consumed += chunk.len();
        for line in chunk.lines() {
            self.line(line, tx, log);
        }
    }

    fn line<W: LogSink>(&mut self, line: &str, tx: Option<&Sender<Msg>>, log: &mut W) {
        if let Some(v) = own_line(line) {
            let text = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
            match v.get(LINE).and_then(Value::as_str).unwrap_or("") {
                "stderr" | "check-output" => log.put(&text("line")),
                "exited" => {
                    self.exited = Some(
                        v.get("code")
                            .and_then(Value::as_i64)
                            .and_then(|c| i32::try_from(c).ok()),
                    );
                }
                "check" => {
                    self.check = Some((
                        CheckOutcome::from_json(&v),
                        v.get("ms").and_then(Value::as_u64).unwrap_or(0),
                    ));
                }
                "ws" => {
                    let b64 = base64::engine::general_purpose::STANDARD;
                    match b64.decode(text("data")) {
                        Ok(bytes) => self.ws.extend(bytes),
                        Err(error) => self.ws_bad = Some(SendBackError::Base64 { error }),
                    }
                }
                "ws-end" => self.ws_end = Some(v),
                "ws-skipped" => {
                    self.ws_bad = Some(SendBackError::Skipped { why: text("why") });
                }
                "error" => self.error = Some(text("message")),
                _ => log.put(line),
            }
            return;
        }
        match parse_record(line) {
            Ok(LogRecord::Header(h)) => {
                let new = self.mirror.id.as_deref() != Some(h.id.as_str());
                let id = h.id.0.clone();
                self.mirror.header(h);
                if let (true, Some(tx)) = (new, tx) {
                    let _ = tx.send(Msg::Session {
                        index: self.index,
                        id,
                    });
                }
            }
            Ok(LogRecord::Event(ev)) => {
                if let Some(tx) = tx
                    && ev.seq.0 >= self.mirror.len()
                    && let Some(msg) = usage_of(self.index, &ev)
                {
                    let _ = tx.send(msg);
                }
                self.mirror.event(ev);
            }
            Ok(LogRecord::Packed(_)) | Err(_) => {
                log.put(line);
                self.tail.push(line.chars().take(300).collect());
                if self.tail.len() > 5 {
                    self.tail.remove(0);
                }
            }
        }
    }

    /// Put the workspace the node sent back in place of `workspace` (nothing to do when keel
    /// did not run); an error when the copy failed, the session's mirror did, or keel ran and
    /// no workspace came after it.
    pub(super) fn bring_back(&mut self, workspace: &Path) -> Result<(), SendBackError> {
        if let Some(e) = self.mirror.error.take() {
            return Err(e.into());
        }
        if let Some(bad) = self.ws_bad.take() {
            return Err(bad);
        }
        let Some(end) = self.ws_end.take() else {
            // The job sends its workspace back after keel's exit, whatever it was.
            return match self.exited {
                Some(_) => Err(SendBackError::Missing),
                None => Ok(()),
            };
        };
        let data = std::mem::take(&mut self.ws);
        let sha = end.get("sha256").and_then(Value::as_str).unwrap_or("");
        if hex_sha256(&data) != sha {
            return Err(SendBackError::Damaged);
        }
        let (Some(name), Some(parent)) = (workspace.file_name(), workspace.parent()) else {
            return Ok(());
        };
        let name = name.to_string_lossy().into_owned();
        let incoming = parent.join(format!(".{name}.incoming"));
        let old = parent.join(format!(".{name}.old"));
        let _ = std::fs::remove_dir_all(&incoming);
        let _ = std::fs::remove_dir_all(&old);
        if let Err(error) = unpack(&data, &incoming) {
            let _ = std::fs::remove_dir_all(&incoming);
            return Err(SendBackError::Unpack { error });
        }
        let swapped =
            std::fs::rename(workspace, &old).and_then(|()| std::fs::rename(&incoming, workspace));
        let _ = std::fs::remove_dir_all(&old);
        swapped.map_err(|error| SendBackError::Swap {
            path: workspace.to_path_buf(),
            error,
        })
    }
}

/// Where a [`Reader`] puts lines that are not the session's.
pub(super) trait LogSink {
    /// Keep `line`.
    fn put(&mut self, line: &str);
}

impl LogSink for Option<&mut std::fs::File> {
    fn put(&mut self, line: &str) {
        if let Some(f) = self {
            let _ = writeln!(f, "{line}");
        }
    }
}

impl LogSink for Vec<String> {
    fn put(&mut self, line: &str) {
        self.push(line.to_owned());
    }
}

/// The task's session here, rebuilt from the job's events: each is validated and appended by
/// keel's own writer; one it already has (a job's output read again) is skipped by its seq.
pub(super) struct Mirror {
    store: Store,
    /// The task's workspace here (the session is filed under it).
    workspace: PathBuf,
    log: Option<PersistentSession>,
    /// The session's id, once known.
    pub(super) id: Option<String>,
    /// The first thing that went wrong (the copy stops there).
    error: Option<MirrorError>,
}

impl Mirror {
    fn len(&self) -> u64 {
        self.log.as_ref().map_or(0, |l| l.session().len())
    }

    fn header(&mut self, h: SessionHeader) {
        if self.log.is_some() || self.error.is_some() {
            return;
        }
        let id = h.id.0.clone();
        // A copy already here is continued as it is (the job's events go on from where it
        // stops); crash repair is for a copy about to be resumed ([`Mirror::repaired`]).
        let opened = match self.store.resolve(&id, &self.workspace) {
            Ok(path) => PersistentSession::reopen(&path, WriterOptions::default())
                .map(|(log, _)| log)
                .map_err(|error| MirrorError::Open {
                    id: id.clone(),
                    error,
                }),
            Err(_) => PersistentSession::create(
                &self.store,
                &self.workspace,
                Session::new(h),
                WriterOptions::default(),
            )
            .map_err(|error| MirrorError::Create {
                id: id.clone(),
                error,
            }),
        };
        match opened {
            Ok(log) => self.log = Some(log),
            Err(e) => self.error = Some(e),
        }
        self.id = Some(id);
    }

    fn event(&mut self, ev: SessionEvent) {
        let Some(log) = self.log.as_mut() else { return };
        if self.error.is_some() {
            return;
        }
        let len = log.session().len();
        if ev.seq.0 < len {
            return;
        }
        let id = || self.id.as_deref().unwrap_or("?").to_owned();
        if ev.seq.0 > len {
            self.error = Some(MirrorError::Skipped {
                from: len,
                to: ev.seq.0,
                id: id(),
            });
            return;
        }
        let seq = ev.seq.0;
        if let Err(error) = log.append(ev) {
            self.error = Some(MirrorError::Misfit {
                seq,
                id: id(),
                error,
            });
        }
    }

    /// Flush and close the copy.
    pub(super) fn close(&mut self) {
        if let Some(log) = self.log.take()
            && let Err(error) = log.close()
            && self.error.is_none()
        {
            self.error = Some(MirrorError::Close { error });
        }
    }

    /// The session `id` here after crash repair (closing what a lost or stopped job left
    /// open), to ship with a job that resumes it.
    pub(super) fn repaired(&mut self, id: &str) -> Result<PathBuf, MirrorError> {
        self.close();
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        let path =
            self.store
                .resolve(id, &self.workspace)
                .map_err(|error| MirrorError::Resolve {
                    id: id.to_owned(),
                    error,
                })?;
        let (log, _, _) =
            PersistentSession::resume(&path, WriterOptions::default()).map_err(|error| {
                MirrorError::Repair {
                    path: path.clone(),
                    error,
                }
            })?;
        log.close().map_err(|error| MirrorError::Write {
            path: path.clone(),
            error,
        })?;
        Ok(path)
    }
}
