//! Persistence: where session files live, how they are created, appended, listed and found.
//!
//! Layout: `$KEEL_HOME/sessions/--<project key>--/<id>/session.jsonl` (or `session.jsonl.zst`;
//! dsh's `session.jsonl.zstd` is read too). The first line is the header. The first write (header
//! plus the events the session already holds) is published atomically by [`publish_file`]: temp
//! file, fsync, hard link to the final name (never clobbering), fsync of the directory; `keel
//! sessions import` publishes its copies the same way. Later batches are appended and fsynced by
//! a [`SessionWriter`], which holds the session's [`SessionLock`] (one writer per session, across
//! processes: see [`SessionLock`]). Loading is in [`load`]; readers take no lock.

mod encode;
mod fast;
mod lines;
pub mod load;
mod lock;
mod outcome;
pub(crate) mod parse;
mod pipeline;
mod publish;
mod summary_cache;
mod writer;

pub use load::{LoadError, LoadReport, Loaded, TornTail};
pub use lock::{SessionLock, lock_path};
pub use parse::parse_record;
pub use publish::{PublishError, publish_file};
pub use summary_cache::SUMMARY_FILE;
pub use writer::{FlushTicket, SessionWriter, WriterOptions};

use crate::Session;
use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// File name of plain session logs.
pub const PLAIN_FILE: &str = "session.jsonl";
/// File name of compressed session logs keel writes.
pub const ZSTD_FILE: &str = "session.jsonl.zst";
/// File name of compressed session logs dsh writes (read only).
pub const DSH_ZSTD_FILE: &str = "session.jsonl.zstd";

/// On-disk encoding of a session file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// One JSON record per line.
    Plain,
    /// The same lines in independent zstd frames, one per durable batch.
    Zstd,
}

impl Format {
    /// The format of a file, by name.
    pub fn of_path(path: &Path) -> Format {
        match path.extension().and_then(|e| e.to_str()) {
            Some("zst" | "zstd") => Format::Zstd,
            _ => Format::Plain,
        }
    }
}

/// A persistence failure. Cloneable so that a writer's sticky error can be returned by every
/// later flush.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// A filesystem operation failed. Returned by every store call and by `flush`; the session
    /// is not durable past the last successful flush: stop the turn and report the path.
    #[error("cannot {op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: Arc<std::io::Error>,
    },
    /// Returned by `create` when the session file already exists (never clobbered): pick a new
    /// id or use `open_for_append`.
    #[error("session file {path} already exists")]
    Exists {
        /// The existing file.
        path: PathBuf,
    },
    /// Returned by `flush` and `create` when an event cannot be serialised (a bug in a payload).
    #[error("cannot encode event {seq} for {path}: {source}")]
    Encode {
        /// The file.
        path: PathBuf,
        /// The event.
        seq: keel_protocol::Seq,
        /// The serialiser's error.
        source: Arc<serde_json::Error>,
    },
    /// Returned by `flush` after the writer thread stopped (closed or panicked): the queued
    /// events may not be durable.
    #[error("the writer for {path} has stopped; queued events may not be durable")]
    WriterGone {
        /// The file.
        path: PathBuf,
    },
    /// Returned by `resolve` when nothing matches.
    #[error("no session matches {query:?} (looked for a path, an id or an id prefix under {home})")]
    NotFound {
        /// What was asked for.
        query: String,
        /// The sessions root searched.
        home: PathBuf,
    },
    /// Returned by `resolve` when an id prefix matches several sessions: use a longer prefix.
    #[error("{query:?} matches several sessions: {}", .candidates.join(", "))]
    Ambiguous {
        /// What was asked for.
        query: String,
        /// Matching ids.
        candidates: Vec<String>,
    },
    /// Returned by `create`, `open_for_append` and `lock` when another writer (another keel
    /// process, or another writer in this one) holds the session: it is refused, never
    /// waited for. Read it, or close it there first.
    #[error("{}", lock::busy_message(.session, *.pid))]
    Busy {
        /// The session's id (its directory's name), or its file's path outside the store.
        session: String,
        /// The holder's pid, as it wrote it in the lock file (None if unreadable).
        pid: Option<u32>,
        /// The lock file.
        lock: PathBuf,
    },
    /// Returned by `open_for_append` when the session on disk does not match the one in memory.
    #[error("cannot append to {path}: {why}")]
    Mismatch {
        /// The file.
        path: PathBuf,
        /// What differs.
        why: String,
    },
}

impl StoreError {
    pub(crate) fn io(op: &'static str, path: &Path, e: std::io::Error) -> StoreError {
        StoreError::Io {
            op,
            path: path.to_owned(),
            source: Arc::new(e),
        }
    }
    pub(crate) fn encode(path: &Path, e: encode::EncodeError) -> StoreError {
        StoreError::Encode {
            path: path.to_owned(),
            seq: e.seq,
            source: Arc::new(e.source),
        }
    }
}

impl From<PublishError> for StoreError {
    /// A failed publish in the words of the other store operations (`cannot <op> <path>`).
    fn from(e: PublishError) -> StoreError {
        match e {
            PublishError::CreateTemp { path, source } => StoreError::io("create", &path, source),
            PublishError::Write { path, source } => StoreError::io("write", &path, source),
            PublishError::SyncFile { path, source } => StoreError::io("fsync", &path, source),
            PublishError::Exists { path } => StoreError::Exists { path },
            PublishError::Link { path, source } => StoreError::io("publish", &path, source),
            PublishError::SyncDir { dir, source } => {
                StoreError::io("fsync directory", &dir, source)
            }
        }
    }
}

pub(crate) fn compress_frame(buf: &[u8], level: i32, path: &Path) -> Result<Vec<u8>, StoreError> {
    let mut c = zstd::bulk::Compressor::new(level)
        .map_err(|e| StoreError::io("start zstd for", path, e))?;
    c.include_checksum(true)
        .map_err(|e| StoreError::io("configure zstd for", path, e))?;
    c.compress(buf)
        .map_err(|e| StoreError::io("compress a batch for", path, e))
}

/// What `list` reports about one session.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSummary {
    /// Session id (from the header).
    pub id: String,
    /// The session file.
    pub path: PathBuf,
    /// Working directory recorded in the header.
    pub cwd: Option<String>,
    /// Creation time, ms since epoch.
    pub created: keel_protocol::TimeMs,
    /// Events loaded.
    pub events: u64,
    /// Turns started.
    pub turns: u64,
    /// The last `session/title`, if any.
    pub title: Option<String>,
    /// The first prompt a human typed, if any.
    pub first_prompt: Option<String>,
    /// File modification time.
    pub last_modified: Option<std::time::SystemTime>,
    /// Stored compressed.
    pub compressed: bool,
    /// Parent session, for forks and subagents.
    pub parent: Option<String>,
    /// Why the session could not be loaded, if it could not.
    pub problem: Option<String>,
    /// How the last turn ended: `done`, `failed`, `cancelled`, `blocked`, `interrupted`,
    /// `running` (a turn open while its writer holds the lock) or `empty` (no turn); `?` when
    /// the session could not be loaded.
    pub outcome: String,
}

/// The session store rooted at a keel home directory.
#[derive(Debug, Clone)]
pub struct Store {
    home: PathBuf,
}

impl Store {
    /// A store under `home` (sessions live in `home/sessions`).
    pub fn new(home: PathBuf) -> Store {
        Store { home }
    }

    /// A store under `$KEEL_HOME`, else `~/.keel` (else `./.keel` when there is no home dir).
    pub fn from_env() -> Store {
        let home = std::env::var_os("KEEL_HOME")
            .map(PathBuf::from)
            .or_else(|| dirs::home_dir().map(|h| h.join(".keel")))
            .unwrap_or_else(|| PathBuf::from(".keel"));
        Store::new(home)
    }

    /// The keel home.
    pub fn home(&self) -> &Path {
        &self.home
    }

    /// `--<cwd without its leading '/', every other char than [A-Za-z0-9_.-] as '-'>--`.
    pub fn project_key(cwd: &Path) -> String {
        let s = cwd.to_string_lossy();
        let s = s.strip_prefix('/').unwrap_or(&s);
        let key: String = s
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                    c
                } else {
                    '-'
                }
            })
            .collect();
        format!("--{key}--")
    }

    /// `home/sessions/<project key>/<id>`.
    pub fn session_dir(&self, cwd: &Path, id: &str) -> PathBuf {
        self.home
            .join("sessions")
            .join(Self::project_key(cwd))
            .join(id)
    }

    /// Create the session's file under `cwd`'s project, publishing the header and every event
    /// `session` holds atomically, and return a writer appending after them.
    pub fn create(
        &self,
        cwd: &Path,
        session: &Session,
        options: WriterOptions,
    ) -> Result<SessionWriter, StoreError> {
        let dir = self.session_dir(cwd, session.header().id.as_str());
        let name = match options.format {
            Format::Plain => PLAIN_FILE,
            Format::Zstd => ZSTD_FILE,
        };
        let path = dir.join(name);
        Self::create_at(&path, session, options)
    }

    /// Like [`Store::create`] at an explicit file path (its directory is created).
    pub fn create_at(
        path: &Path,
        session: &Session,
        options: WriterOptions,
    ) -> Result<SessionWriter, StoreError> {
        let dir = path.parent().unwrap_or(Path::new("."));
        private_dir_all(dir).map_err(|e| StoreError::io("create directory", dir, e))?;
        let lock = SessionLock::acquire(path, session.header().id.as_str())?;
        if path.exists() {
            return Err(StoreError::Exists {
                path: path.to_owned(),
            });
        }
        let mut buf = serde_json::to_vec(session.header()).map_err(|e| StoreError::Encode {
            path: path.to_owned(),
            seq: keel_protocol::Seq(0),
            source: Arc::new(e),
        })?;
        buf.push(b'\n');
        encode::encode_records(session.records().records(), 0, &mut buf)
            .map_err(|e| StoreError::encode(path, e))?;
        if options.format == Format::Zstd {
            buf = compress_frame(&buf, options.zstd_level, path)?;
        }
        publish_file(path, &buf, session.header().id.as_str())?;
        let file = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(|e| StoreError::io("open", path, e))?;
        Ok(SessionWriter::from_file(file, path.to_owned(), options)?.holding(lock))
    }

    /// Lock the session at `path` (a session directory or file) for writing: refused with
    /// [`StoreError::Busy`] while another writer holds it. Lock first, then load, then
    /// [`Store::open_locked`]: what was loaded is then what no one else appends to.
    pub fn lock(path: &Path) -> Result<SessionLock, StoreError> {
        let file = load::session_file(path)
            .map_err(|e| StoreError::io("find session file in", path, e))?;
        SessionLock::acquire(&file, &lock::session_name(&file))
    }

    /// Resume appending to a loaded session file, locking it first ([`Store::lock`]). A torn
    /// tail reported by the load is cut off first (it holds no committed event), so new batches
    /// follow the last committed record. Prefer [`Store::lock`] before loading, then
    /// [`Store::open_locked`] (as [`crate::PersistentSession::reopen`] does).
    pub fn open_for_append(
        path: &Path,
        session: &Session,
        report: &LoadReport,
        options: WriterOptions,
    ) -> Result<SessionWriter, StoreError> {
        let lock = Self::lock(path)?;
        Self::open_locked(lock, path, session, report, options)
    }

    /// [`Store::open_for_append`] under a lock already taken on `path` (before it was loaded).
    pub fn open_locked(
        lock: SessionLock,
        path: &Path,
        session: &Session,
        report: &LoadReport,
        options: WriterOptions,
    ) -> Result<SessionWriter, StoreError> {
        let path = load::session_file(path)
            .map_err(|e| StoreError::io("find session file in", path, e))?;
        if lock.path() != lock_path(&path) {
            return Err(StoreError::Mismatch {
                path,
                why: format!("the lock held is {}", lock.path().display()),
            });
        }
        if report.events > session.len() {
            return Err(StoreError::Mismatch {
                path,
                why: format!(
                    "the file holds {} events, the session only {}",
                    report.events,
                    session.len()
                ),
            });
        }
        let options = WriterOptions {
            format: Format::of_path(&path),
            ..options
        };
        let file = OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(|e| StoreError::io("open", &path, e))?;
        let len = file
            .metadata()
            .map_err(|e| StoreError::io("stat", &path, e))?
            .len();
        if len > report.valid_len {
            file.set_len(report.valid_len)
                .map_err(|e| StoreError::io("cut the torn tail of", &path, e))?;
            file.sync_all()
                .map_err(|e| StoreError::io("fsync", &path, e))?;
        }
        drop(file);
        let file = OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(|e| StoreError::io("open", &path, e))?;
        let writer = SessionWriter::from_file(file, path, options)?.holding(lock);
        for seq in report.events..session.len() {
            if let Some(ev) = session.event(keel_protocol::Seq(seq)) {
                writer.enqueue_owned(ev.into_owned());
            }
        }
        Ok(writer)
    }

    /// Load a session from a session directory or file.
    pub fn load(path: &Path) -> Result<Loaded, LoadError> {
        load::load(path)
    }

    fn sessions_root(&self) -> PathBuf {
        self.home.join("sessions")
    }

    /// Session directories under one project (or all projects).
    fn session_dirs(&self, cwd: Option<&Path>) -> Vec<PathBuf> {
        self.candidate_dirs(cwd)
            .filter(|d| load::session_file(d).is_ok())
            .collect()
    }

    /// The session file of every session under `cwd`'s project (or under every project),
    /// without reading them (a search index stats them).
    pub fn session_files(&self, cwd: Option<&Path>) -> Vec<PathBuf> {
        self.candidate_dirs(cwd)
            .filter_map(|d| load::session_file(&d).ok())
            .collect()
    }

    /// The directories under `cwd`'s project (or under every project) that may hold a session.
    fn candidate_dirs(&self, cwd: Option<&Path>) -> impl Iterator<Item = PathBuf> {
        let projects: Vec<PathBuf> = match cwd {
            Some(cwd) => vec![self.sessions_root().join(Self::project_key(cwd))],
            None => read_dirs(&self.sessions_root()),
        };
        projects.into_iter().flat_map(|p| read_dirs(&p))
    }

    /// Every session under `cwd`'s project (or under every project), newest first.
    pub fn list(&self, cwd: Option<&Path>) -> Vec<SessionSummary> {
        let mut out: Vec<SessionSummary> = self
            .session_dirs(cwd)
            .iter()
            .map(|d| summarize(d))
            .collect();
        out.sort_by(|a, b| {
            b.last_modified
                .cmp(&a.last_modified)
                .then_with(|| a.id.cmp(&b.id))
        });
        out
    }

    /// The session file named by `query`: a path to a session directory or file, a session id,
    /// or a unique id prefix (searched in `cwd`'s project first, then everywhere).
    pub fn resolve(&self, query: &str, cwd: &Path) -> Result<PathBuf, StoreError> {
        let as_path = Path::new(query);
        if as_path.exists() {
            return load::session_file(as_path)
                .map_err(|e| StoreError::io("find session file in", as_path, e));
        }
        for scope in [Some(cwd), None] {
            let matches: Vec<PathBuf> = self
                .session_dirs(scope)
                .into_iter()
                .filter(|d| {
                    d.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with(query))
                })
                .collect();
            if let Some(exact) = matches
                .iter()
                .find(|d| d.file_name().and_then(|n| n.to_str()) == Some(query))
            {
                return load::session_file(exact)
                    .map_err(|e| StoreError::io("find session file in", exact, e));
            }
            match matches.as_slice() {
                [] => continue,
                [one] => {
                    return load::session_file(one)
                        .map_err(|e| StoreError::io("find session file in", one, e));
                }
                many => {
                    let mut candidates: Vec<String> = many
                        .iter()
                        .filter_map(|d| d.file_name()?.to_str().map(str::to_owned))
                        .collect();
                    candidates.sort();
                    candidates.dedup();
                    return Err(StoreError::Ambiguous {
                        query: query.to_owned(),
                        candidates,
                    });
                }
            }
        }
        Err(StoreError::NotFound {
            query: query.to_owned(),
            home: self.sessions_root(),
        })
    }
}

fn read_dirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = rd
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    v.sort();
    v
}

fn summarize(dir: &Path) -> SessionSummary {
    let path = load::session_file(dir).unwrap_or_else(|_| dir.join(PLAIN_FILE));
    let mut s = match summary_cache::read(dir, &path) {
        Some(cached) => cached,
        None => {
            let before = summary_cache::stamp(&path);
            let s = summarize_from_log(dir, path);
            summary_cache::write(dir, &s.path, before, &s);
            s
        }
    };
    s.outcome = outcome::settle(&s.path, std::mem::take(&mut s.outcome));
    s
}

/// Summarize by loading the whole log.
fn summarize_from_log(dir: &Path, path: PathBuf) -> SessionSummary {
    let last_modified = fs::metadata(&path).and_then(|m| m.modified()).ok();
    let mut s = SessionSummary {
        id: dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        compressed: Format::of_path(&path) == Format::Zstd,
        path,
        cwd: None,
        created: 0,
        events: 0,
        turns: 0,
        title: None,
        first_prompt: None,
        last_modified,
        parent: None,
        problem: None,
        outcome: "?".to_owned(),
    };
    match load::load(dir) {
        Ok(loaded) => {
            let h = loaded.session.header();
            s.id = h.id.to_string();
            s.cwd = h.cwd.clone();
            s.created = h.created_at;
            s.parent = h.parent_session.as_ref().map(ToString::to_string);
            s.events = loaded.session.len();
            s.turns = loaded.session.turn_count();
            s.title = loaded.session.title().map(str::to_owned);
            s.first_prompt = loaded.session.first_prompt();
            s.outcome = outcome::of(&loaded.session).to_owned();
        }
        Err(e) => s.problem = Some(e.to_string()),
    }
    s
}

/// Create `dir` and its missing parents readable by the owner only (0700): session logs hold
/// prompts, file contents and command output. Existing directories keep their mode.
pub fn private_dir_all(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Create a new file (never replacing one) readable and writable by the owner only (0600).
pub fn private_file(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}
