//! Anchors: what continuity keeps outside the workspace, under `$KEEL_HOME/continuity/`
//! (directories 0700, files 0600, every write a temp file + fsync + rename + directory fsync).
//!
//! - `authority/<sha256(root session id)>.json`: `{schemaVersion: 1, rootSessionId, sources:
//!   [{seq, eventId, digest}]}` — every human `user/message` of the task, as it is committed.
//! - `delegation/<sha256(child session id)>.json`: `{schemaVersion: 1, childSessionId,
//!   parentSessionId, rootSessionId, initialMessage: {id, digest}}`, written once.
//!
//! Ids, seqs and SHA-256 digests only, never the text: the text stays in the session log, and
//! the anchor is what the log is checked against before anything is projected. The same (seq,
//! id) anchored with another digest is a hard error naming both. A file that does not parse,
//! has another schema version or names another session is refused with its path; a temp file
//! left by a crash between write and rename is never read.

use keel_protocol::{ContentBlock, Seq};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The anchor schema version this keel reads and writes.
pub const SCHEMA_VERSION: u32 = 1;

/// Why an anchor could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum AnchorError {
    /// Reading or writing failed.
    #[error("continuity anchor {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not an anchor this keel can trust (bad JSON, another schema version,
    /// another session's id inside).
    #[error(
        "continuity anchor {path} is not valid: {reason} (remove it to anchor again from the session log)"
    )]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The same (seq, event id) was anchored with another digest: the log and the anchor
    /// disagree about what the human said.
    #[error(
        "continuity anchor {path}: human message seq {seq} (event {event_id}) was anchored with digest {anchored}, but the session log now gives {found}; the log or the anchor was changed"
    )]
    Conflict {
        /// The authority file.
        path: PathBuf,
        /// Seq of the message.
        seq: u64,
        /// Its message id.
        event_id: String,
        /// The digest in the anchor.
        anchored: String,
        /// The digest of the log's message.
        found: String,
    },
}

/// One anchored human message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Source {
    /// Seq of its `user/message` event.
    pub seq: u64,
    /// The message id.
    pub event_id: String,
    /// SHA-256 of the canonical JSON of its content ([`content_digest`]).
    pub digest: String,
}

/// `authority/<sha256(root)>.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Authority {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The root session of the task.
    pub root_session_id: String,
    /// Anchored human messages, in seq order.
    pub sources: Vec<Source>,
}

impl Authority {
    /// Add `sources` (seq order) not anchored yet; one already anchored must carry the same id
    /// and digest, else a [`AnchorError::Conflict`] naming `path` (this authority's file).
    /// Returns the seqs added.
    pub fn merge(&mut self, path: &Path, sources: &[Source]) -> Result<Vec<u64>, AnchorError> {
        let mut added = Vec::new();
        for s in sources {
            match self.sources.binary_search_by_key(&s.seq, |a| a.seq) {
                Ok(i) => {
                    let a = &self.sources[i];
                    if a.event_id != s.event_id || a.digest != s.digest {
                        return Err(AnchorError::Conflict {
                            path: path.to_owned(),
                            seq: s.seq,
                            event_id: format!("{} / {}", a.event_id, s.event_id),
                            anchored: a.digest.clone(),
                            found: s.digest.clone(),
                        });
                    }
                }
                Err(i) => {
                    self.sources.insert(i, s.clone());
                    added.push(s.seq);
                }
            }
        }
        Ok(added)
    }
}

/// The first message of a delegated child.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InitialMessage {
    /// Message id.
    pub id: String,
    /// [`content_digest`] of it.
    pub digest: String,
}

/// `delegation/<sha256(child)>.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Delegation {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The child.
    pub child_session_id: String,
    /// Its parent.
    pub parent_session_id: String,
    /// The root of the task.
    pub root_session_id: String,
    /// The child's first message.
    pub initial_message: InitialMessage,
}

/// SHA-256 (hex) of the RFC 8785 canonical JSON of a message's content blocks: what the
/// anchors store for a message.
pub fn content_digest(content: &[ContentBlock]) -> String {
    // Content blocks are plain JSON (the log validated them at append); a value that cannot be
    // canonicalised still gets a stable digest of its serde_json bytes.
    let value = serde_json::to_value(content).unwrap_or(serde_json::Value::Null);
    let bytes = keel_jcs::to_canonical_vec(&value)
        .unwrap_or_else(|_| serde_json::to_vec(&value).unwrap_or_default());
    keel_jcs::digest::sha256_hex(&bytes)
}

/// SHA-256 (hex) of a text (result and prompt digests of child results).
pub fn text_digest(text: &str) -> String {
    keel_jcs::digest::sha256_hex(text.as_bytes())
}

/// The anchor directory `$KEEL_HOME/continuity`.
#[derive(Debug, Clone)]
pub struct Anchors {
    root: PathBuf,
}

impl Anchors {
    /// Anchors under `keel_home/continuity`.
    pub fn new(keel_home: &Path) -> Anchors {
        Anchors {
            root: keel_home.join("continuity"),
        }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.root
    }

    /// Path of the authority file of `root_session`.
    pub fn authority_path(&self, root_session: &str) -> PathBuf {
        self.root
            .join("authority")
            .join(format!("{}.json", text_digest(root_session)))
    }

    /// Path of the delegation file of `child_session`.
    pub fn delegation_path(&self, child_session: &str) -> PathBuf {
        self.root
            .join("delegation")
            .join(format!("{}.json", text_digest(child_session)))
    }

    /// The authority of `root_session` (empty when none was written yet).
    pub fn authority(&self, root_session: &str) -> Result<Authority, AnchorError> {
        let path = self.authority_path(root_session);
        let Some(a) = read::<Authority>(&path)? else {
            return Ok(Authority {
                schema_version: SCHEMA_VERSION,
                root_session_id: root_session.to_owned(),
                sources: Vec::new(),
            });
        };
        check_version(&path, a.schema_version)?;
        if a.root_session_id != root_session {
            return Err(AnchorError::Invalid {
                path,
                reason: format!(
                    "it names root session {}, not {root_session}",
                    a.root_session_id
                ),
            });
        }
        let mut last = None;
        for s in &a.sources {
            if last.is_some_and(|l| s.seq <= l) || !keel_jcs::digest::is_sha256_hex(&s.digest) {
                return Err(AnchorError::Invalid {
                    path,
                    reason: format!("source seq {} is out of order or has a bad digest", s.seq),
                });
            }
            last = Some(s.seq);
        }
        Ok(a)
    }

    /// Anchor `sources` (seq order) for `root_session`: new ones are added, ones already
    /// there must carry the same id and digest. Writes only when something was added;
    /// returns how many were.
    pub fn anchor(&self, root_session: &str, sources: &[Source]) -> Result<usize, AnchorError> {
        let mut authority = self.authority(root_session)?;
        let path = self.authority_path(root_session);
        let added = authority.merge(&path, sources)?;
        if !added.is_empty() {
            write_atomic(&path, &authority)?;
        }
        Ok(added.len())
    }

    /// Check the log's human messages against the authority: every anchored (seq, id) must
    /// carry its digest. Messages not yet anchored are anchored.
    pub fn verify(&self, root_session: &str, log: &[Source]) -> Result<(), AnchorError> {
        self.anchor(root_session, log).map(|_| ())
    }

    /// The delegation record of `child_session`, if written.
    pub fn delegation(&self, child_session: &str) -> Result<Option<Delegation>, AnchorError> {
        let path = self.delegation_path(child_session);
        let Some(d) = read::<Delegation>(&path)? else {
            return Ok(None);
        };
        check_version(&path, d.schema_version)?;
        if d.child_session_id != child_session {
            return Err(AnchorError::Invalid {
                path,
                reason: format!(
                    "it names child session {}, not {child_session}",
                    d.child_session_id
                ),
            });
        }
        Ok(Some(d))
    }

    /// The root session of the task `session` (a session id, at `depth` delegations) belongs
    /// to: itself at depth 0, else the root its delegation record names (itself when the
    /// record is missing or unreadable: a child resumed on its own).
    pub fn root_of(&self, session: &str, depth: u32) -> String {
        if depth == 0 {
            return session.to_owned();
        }
        self.delegation(session)
            .ok()
            .flatten()
            .map_or_else(|| session.to_owned(), |d| d.root_session_id)
    }

    /// Write the delegation record once: an existing one must be the same.
    pub fn record_delegation(&self, d: &Delegation) -> Result<(), AnchorError> {
        let path = self.delegation_path(&d.child_session_id);
        match self.delegation(&d.child_session_id)? {
            Some(existing) if existing == *d => Ok(()),
            Some(existing) => Err(AnchorError::Conflict {
                path,
                seq: 0,
                event_id: format!("{} / {}", existing.initial_message.id, d.initial_message.id),
                anchored: existing.initial_message.digest,
                found: d.initial_message.digest.clone(),
            }),
            None => write_atomic(&path, d),
        }
    }
}

fn check_version(path: &Path, version: u32) -> Result<(), AnchorError> {
    if version == SCHEMA_VERSION {
        return Ok(());
    }
    Err(AnchorError::Invalid {
        path: path.to_owned(),
        reason: format!("schemaVersion {version}, this keel reads {SCHEMA_VERSION}"),
    })
}

pub(crate) fn read<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<T>, AnchorError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(AnchorError::Io {
                path: path.to_owned(),
                source,
            });
        }
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| AnchorError::Invalid {
            path: path.to_owned(),
            reason: e.to_string(),
        })
}

/// Create `dir` and its parents with mode 0700.
pub(crate) fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Write `value` to `path` atomically: a 0600 temp file beside it, fsync, rename, fsync of
/// the directory. A crash leaves either the old file or the new one; the temp file (named
/// `.<name>.tmp-<pid>`) is never read.
pub(crate) fn write_atomic<T: Serialize>(path: &Path, value: &T) -> Result<(), AnchorError> {
    write_bytes_atomic(path, &pretty_bytes(value)?)
}

/// The bytes [`write_atomic`] writes for `value`: pretty JSON and a newline.
pub(crate) fn pretty_bytes<T: Serialize>(value: &T) -> Result<Vec<u8>, AnchorError> {
    let mut bytes = serde_json::to_vec_pretty(value).map_err(|e| AnchorError::Invalid {
        path: PathBuf::new(),
        reason: format!("cannot serialise: {e}"),
    })?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// Write `bytes` to `path` atomically (see [`write_atomic`]).
pub(crate) fn write_bytes_atomic(path: &Path, bytes: &[u8]) -> Result<(), AnchorError> {
    let io = |source| AnchorError::Io {
        path: path.to_owned(),
        source,
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    if !dir.is_dir() {
        create_private_dir(dir).map_err(io)?;
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let written = (|| {
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, path)?;
        std::fs::File::open(dir)?.sync_all()
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written.map_err(io)
}

/// Seq of a [`Source`] as a [`Seq`].
impl Source {
    /// The seq.
    pub fn seq(&self) -> Seq {
        Seq(self.seq)
    }
}
