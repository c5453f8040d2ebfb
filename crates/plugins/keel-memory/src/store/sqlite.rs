//! The SQLite file behind the store: `$KEEL_HOME/memory/memory.sqlite3` (directory 0700, file
//! 0600), WAL, `synchronous = FULL`, a 5 s busy timeout. Every write runs in one `IMMEDIATE`
//! transaction that checks the expected revision, writes the row, maintains the token index and
//! appends an audit row, so two processes never lose an update and a failure leaves nothing
//! half-written.
//!
//! | table | holds |
//! |---|---|
//! | `records` | one row per record: id, scope key, revision, times, the record's JSON |
//! | `postings` | the inverted index: one row per (distinct token, visible record) with the record's scoring fields |
//! | `variables` | one row per (scope key, name): the JSON value and its revision |
//! | `audit` | one row per write: when, who, what, old → new revision |

use super::records::{
    FieldError, Kind, Record, Scope, check_content, check_unit, field_err, normalize_tags,
    parse_rfc3339, rfc3339,
};
use keel_protocol::sync::Locked;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// The schema version in `PRAGMA user_version`.
pub const SCHEMA_VERSION: i64 = 1;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS records(
  id TEXT PRIMARY KEY,
  skey TEXT NOT NULL,
  revision TEXT NOT NULL,
  updated_ms INTEGER NOT NULL,
  expires_ms INTEGER,
  deleted INTEGER NOT NULL DEFAULT 0,
  json TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS postings(
  token TEXT NOT NULL,
  skey TEXT NOT NULL,
  id TEXT NOT NULL,
  importance REAL NOT NULL,
  confidence REAL NOT NULL,
  updated_ms INTEGER NOT NULL,
  expires_ms INTEGER,
  PRIMARY KEY(token, skey, id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS variables(
  skey TEXT NOT NULL,
  name TEXT NOT NULL,
  revision TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY(skey, name)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS audit(
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  at TEXT NOT NULL,
  actor TEXT NOT NULL,
  op TEXT NOT NULL,
  target TEXT NOT NULL,
  scope TEXT NOT NULL,
  scope_id TEXT NOT NULL,
  old_revision TEXT,
  new_revision TEXT
);
";

/// Who is calling: derived from the calling agent, never from tool arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The calling agent's session id (scope id of `session`).
    pub session_id: String,
    /// The digest of the canonical workspace root (scope id of `project`).
    pub project_id: String,
    /// The agent's role, `main` or `subagent` (scope id of `agent`).
    pub agent_id: String,
}

impl Identity {
    /// The identity of an agent of `role` in `session_id` working in `workspace_root`.
    pub fn new(session_id: &str, workspace_root: &Path, role: &str) -> Identity {
        let root = workspace_root
            .canonicalize()
            .unwrap_or_else(|_| workspace_root.to_path_buf());
        let digest = keel_jcs::digest::sha256_hex(root.to_string_lossy().as_bytes());
        Identity {
            session_id: session_id.to_owned(),
            project_id: format!("p{}", &digest[..16]),
            agent_id: role.to_owned(),
        }
    }

    /// The scope id this caller has in `scope`.
    pub fn scope_id(&self, scope: Scope) -> &str {
        match scope {
            Scope::Session => &self.session_id,
            Scope::Project => &self.project_id,
            Scope::Agent => &self.agent_id,
            Scope::Global => "global",
        }
    }

    /// The index key of `scope` for this caller (`scope/scope id`).
    pub fn skey(&self, scope: Scope) -> String {
        format!("{}/{}", scope.as_str(), self.scope_id(scope))
    }

    /// What the audit log and the records' `source` name as the writer.
    pub fn actor(&self) -> String {
        format!("{}:{}", self.agent_id, self.session_id)
    }
}

/// Why a store operation failed. Every variant's text names what to do; the tool layer maps
/// [`StoreError::RevisionConflict`] to `MEMORY_REVISION_CONFLICT` and
/// [`StoreError::VariableConflict`] to `VARIABLE_REVISION_CONFLICT`.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The file is not a SQLite database or is damaged. Nothing was written.
    #[error(
        "memory store {} is corrupt or not a SQLite database ({source}); nothing was written. Move the file aside to start a new store",
        path.display()
    )]
    Corrupt {
        /// The database file.
        path: PathBuf,
        /// SQLite's report.
        source: rusqlite::Error,
    },
    /// Any other SQLite failure.
    #[error("memory store {}: {source}", path.display())]
    Sql {
        /// The database file.
        path: PathBuf,
        /// SQLite's report.
        source: rusqlite::Error,
    },
    /// Creating the directory or the file failed.
    #[error("memory store {}: {what}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// What was attempted.
        what: &'static str,
        /// The error.
        source: std::io::Error,
    },
    /// The file was written by a newer keel.
    #[error("memory store {}: schema version {found} is newer than this keel's {SCHEMA_VERSION}", path.display())]
    Newer {
        /// The database file.
        path: PathBuf,
        /// Its `user_version`.
        found: i64,
    },
    /// A field is out of bounds.
    #[error(transparent)]
    Field(#[from] FieldError),
    /// No visible record with this id in this scope.
    #[error(
        "no record {id} in scope {scope} (it may have expired, been forgotten, or belong to another scope)"
    )]
    NotFound {
        /// The id asked for.
        id: String,
        /// The scope asked for.
        scope: Scope,
    },
    /// `expected_revision` is not the record's current revision.
    #[error(
        "record {id} is at revision {current}, not {expected}: read it again and pass expected_revision {current}"
    )]
    RevisionConflict {
        /// The record.
        id: String,
        /// What the caller passed.
        expected: String,
        /// The current revision.
        current: String,
    },
    /// `expected_revision` of a variable is not its current revision.
    #[error("variable {name} is {}, not at revision {expected}", match current { Some(c) => format!("at revision {c}"), None => "not set".to_owned() })]
    VariableConflict {
        /// The variable.
        name: String,
        /// What the caller passed.
        expected: String,
        /// The current revision (`None`: not set).
        current: Option<String>,
    },
    /// Policy refuses the write (the `global` scope without `global_writes`).
    #[error("{0}")]
    Denied(String),
}

/// A new record's fields, as the model gives them.
#[derive(Debug, Clone)]
pub struct NewRecord {
    /// Semantic or episodic.
    pub kind: Kind,
    /// The text.
    pub content: String,
    /// Tags (normalized on write).
    pub tags: Vec<String>,
    /// 0..=1, default 0.5.
    pub importance: Option<f64>,
    /// 0..=1, default 1.
    pub confidence: Option<f64>,
    /// RFC 3339; must be in the future.
    pub expires_at: Option<String>,
}

/// Changes to a record (`None`: keep).
#[derive(Debug, Clone, Default)]
pub struct Changes {
    /// New kind.
    pub kind: Option<Kind>,
    /// New content.
    pub content: Option<String>,
    /// New tags (replace the old ones).
    pub tags: Option<Vec<String>>,
    /// New importance.
    pub importance: Option<f64>,
    /// New confidence.
    pub confidence: Option<f64>,
    /// New expiry.
    pub expires_at: Option<String>,
}

/// The memory store over one SQLite file.
pub struct MemoryStore {
    pub(super) path: PathBuf,
    pub(super) conn: Mutex<Connection>,
    pub(super) global_writes: bool,
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore")
            .field("path", &self.path)
            .finish()
    }
}

/// `$KEEL_HOME/memory/memory.sqlite3`.
pub fn default_path(keel_home: &Path) -> PathBuf {
    keel_home.join("memory").join("memory.sqlite3")
}

impl MemoryStore {
    /// Open (creating if needed) the store at `path`: its directory 0700, the file 0600, WAL,
    /// the schema. A file that is not a SQLite database is [`StoreError::Corrupt`].
    pub fn open(path: &Path) -> Result<MemoryStore, StoreError> {
        let io = |what, source| StoreError::Io {
            path: path.to_path_buf(),
            what,
            source,
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| io("creating the directory", e))?;
            set_mode(dir, 0o700).map_err(|e| io("setting the directory to 0700", e))?;
        }
        {
            let mut o = std::fs::OpenOptions::new();
            o.read(true).write(true).create(true).truncate(false);
            #[cfg(unix)]
            {
                use std::os::unix::fs::OpenOptionsExt;
                o.mode(0o600);
            }
            o.open(path).map_err(|e| io("creating the file", e))?;
            set_mode(path, 0o600).map_err(|e| io("setting the file to 0600", e))?;
        }
        let sql = |e| sql_err(path, e);
        let conn = Connection::open(path).map_err(sql)?;
        conn.busy_timeout(Duration::from_secs(5)).map_err(sql)?;
        let found: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(sql)?;
        if found > SCHEMA_VERSION {
            return Err(StoreError::Newer {
                path: path.to_path_buf(),
                found,
            });
        }
        conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get::<_, String>(0))
            .map_err(sql)?;
        conn.execute_batch("PRAGMA synchronous=FULL").map_err(sql)?;
        if found < SCHEMA_VERSION {
            let mut conn = conn;
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sql)?;
            tx.execute_batch(SCHEMA).map_err(sql)?;
            tx.execute_batch(&format!("PRAGMA user_version={SCHEMA_VERSION}"))
                .map_err(sql)?;
            tx.commit().map_err(sql)?;
            return Ok(MemoryStore {
                path: path.to_path_buf(),
                conn: Mutex::new(conn),
                global_writes: false,
            });
        }
        Ok(MemoryStore {
            path: path.to_path_buf(),
            conn: Mutex::new(conn),
            global_writes: false,
        })
    }

    /// Allow (or refuse) writes to the `global` scope.
    pub fn with_global_writes(mut self, on: bool) -> MemoryStore {
        self.global_writes = on;
        self
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub(super) fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn.locked()
    }

    pub(super) fn sql(&self, e: rusqlite::Error) -> StoreError {
        sql_err(&self.path, e)
    }

    pub(super) fn check_writable(&self, scope: Scope) -> Result<(), StoreError> {
        if scope == Scope::Global && !self.global_writes {
            return Err(StoreError::Denied(
                "writes to the global scope are off (memory plugin config global_writes = false); use scope project, agent or session".into(),
            ));
        }
        Ok(())
    }

    /// Write a new record in `scope`; returns it (with its id and revision).
    pub fn write(
        &self,
        who: &Identity,
        scope: Scope,
        new: NewRecord,
        now: i64,
    ) -> Result<Record, StoreError> {
        let mut out = self.write_batch(who, scope, vec![new], now)?;
        out.pop()
            .ok_or_else(|| StoreError::Denied("nothing written".into()))
    }

    /// Write new records in `scope` in one transaction (an import): all or none.
    pub fn write_batch(
        &self,
        who: &Identity,
        scope: Scope,
        news: Vec<NewRecord>,
        now: i64,
    ) -> Result<Vec<Record>, StoreError> {
        self.check_writable(scope)?;
        let recs = news
            .into_iter()
            .map(|n| build(who, scope, n, now))
            .collect::<Result<Vec<_>, _>>()?;
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| self.sql(e))?;
        for rec in &recs {
            put_record(&tx, rec, None).map_err(|e| self.sql(e))?;
            audit(
                &tx,
                &rec.updated_at,
                who,
                "write",
                &rec.id,
                scope.as_str(),
                &rec.scope_id,
                None,
                Some(&rec.revision),
            )
            .map_err(|e| self.sql(e))?;
        }
        tx.commit().map_err(|e| self.sql(e))?;
        Ok(recs)
    }

    /// The visible record `id` of `scope`.
    pub fn read(
        &self,
        who: &Identity,
        scope: Scope,
        id: &str,
        now: i64,
    ) -> Result<Record, StoreError> {
        let conn = self.conn();
        load_visible(&conn, who, scope, id, now)
            .map_err(|e| self.sql(e))?
            .ok_or_else(|| StoreError::NotFound {
                id: id.to_owned(),
                scope,
            })
    }

    /// Change record `id` if it is at `expected` revision; returns the new record and the old
    /// revision.
    pub fn update(
        &self,
        who: &Identity,
        scope: Scope,
        id: &str,
        expected: &str,
        changes: Changes,
        now: i64,
    ) -> Result<Record, StoreError> {
        self.check_writable(scope)?;
        if let Some(c) = &changes.content {
            check_content(c)?;
        }
        let tags = changes.tags.as_deref().map(normalize_tags).transpose()?;
        let importance = changes
            .importance
            .map(|v| check_unit("importance", v))
            .transpose()?;
        let confidence = changes
            .confidence
            .map(|v| check_unit("confidence", v))
            .transpose()?;
        let expires_at = check_expiry(changes.expires_at.as_deref(), now)?;
        self.cas(who, scope, id, expected, now, "update", |rec| {
            if let Some(k) = changes.kind {
                rec.kind = k;
            }
            if let Some(c) = changes.content {
                rec.content = c;
            }
            if let Some(t) = tags {
                rec.tags = t;
            }
            if let Some(v) = importance {
                rec.importance = v;
            }
            if let Some(v) = confidence {
                rec.confidence = v;
            }
            if expires_at.is_some() {
                rec.expires_at = expires_at;
            }
        })
    }

    /// Forget (soft-delete) record `id` if it is at `expected` revision.
    pub fn forget(
        &self,
        who: &Identity,
        scope: Scope,
        id: &str,
        expected: &str,
        now: i64,
    ) -> Result<Record, StoreError> {
        self.check_writable(scope)?;
        self.cas(who, scope, id, expected, now, "forget", |rec| {
            rec.deleted_at = Some(rfc3339(now));
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn cas(
        &self,
        who: &Identity,
        scope: Scope,
        id: &str,
        expected: &str,
        now: i64,
        op: &str,
        change: impl FnOnce(&mut Record),
    ) -> Result<Record, StoreError> {
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| self.sql(e))?;
        let mut rec = load_visible(&tx, who, scope, id, now)
            .map_err(|e| self.sql(e))?
            .ok_or_else(|| StoreError::NotFound {
                id: id.to_owned(),
                scope,
            })?;
        if rec.revision != expected {
            return Err(StoreError::RevisionConflict {
                id: id.to_owned(),
                expected: expected.to_owned(),
                current: rec.revision,
            });
        }
        let before = rec.clone();
        change(&mut rec);
        rec.updated_at = rfc3339(now);
        rec.seal();
        put_record(&tx, &rec, Some(&before)).map_err(|e| self.sql(e))?;
        audit(
            &tx,
            &rec.updated_at,
            who,
            op,
            id,
            scope.as_str(),
            &rec.scope_id,
            Some(&before.revision),
            Some(&rec.revision),
        )
        .map_err(|e| self.sql(e))?;
        tx.commit().map_err(|e| self.sql(e))?;
        Ok(rec)
    }

    /// The audit log, oldest first: `(at, actor, op, target, scope, scope_id, old, new)`.
    pub fn audit_log(&self) -> Result<Vec<AuditRow>, StoreError> {
        let conn = self.conn();
        let mut st = conn
            .prepare("SELECT at, actor, op, target, scope, scope_id, old_revision, new_revision FROM audit ORDER BY seq")
            .map_err(|e| self.sql(e))?;
        let rows = st
            .query_map([], |r| {
                Ok(AuditRow {
                    at: r.get(0)?,
                    actor: r.get(1)?,
                    op: r.get(2)?,
                    target: r.get(3)?,
                    scope: r.get(4)?,
                    scope_id: r.get(5)?,
                    old_revision: r.get(6)?,
                    new_revision: r.get(7)?,
                })
            })
            .map_err(|e| self.sql(e))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(|e| self.sql(e))
    }
}

/// One row of the audit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRow {
    /// When (RFC 3339).
    pub at: String,
    /// Who (`<agent role>:<session id>`).
    pub actor: String,
    /// `write`, `update`, `forget`, `variable_set`, `variable_patch`, `variable_delete`.
    pub op: String,
    /// The record id or variable name.
    pub target: String,
    /// The scope.
    pub scope: String,
    /// The scope id.
    pub scope_id: String,
    /// The revision before (`None`: created).
    pub old_revision: Option<String>,
    /// The revision after (`None`: deleted variable).
    pub new_revision: Option<String>,
}

fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
    }
    #[cfg(not(unix))]
    {
        let _ = (path, mode);
        Ok(())
    }
}

pub(super) fn sql_err(path: &Path, e: rusqlite::Error) -> StoreError {
    use rusqlite::ErrorCode::{DatabaseCorrupt, NotADatabase};
    match e.sqlite_error_code() {
        Some(NotADatabase | DatabaseCorrupt) => StoreError::Corrupt {
            path: path.to_path_buf(),
            source: e,
        },
        _ => StoreError::Sql {
            path: path.to_path_buf(),
            source: e,
        },
    }
}

/// A new record of `who` in `scope` from the model's fields, checked and sealed.
fn build(who: &Identity, scope: Scope, new: NewRecord, now: i64) -> Result<Record, FieldError> {
    check_content(&new.content)?;
    let tags = normalize_tags(&new.tags)?;
    let importance = check_unit("importance", new.importance.unwrap_or(0.5))?;
    let confidence = check_unit("confidence", new.confidence.unwrap_or(1.0))?;
    let expires_at = check_expiry(new.expires_at.as_deref(), now)?;
    let at = rfc3339(now);
    let mut rec = Record {
        id: new_id(),
        scope,
        scope_id: who.scope_id(scope).to_owned(),
        kind: new.kind,
        content: new.content,
        tags,
        importance,
        confidence,
        source: who.actor(),
        created_at: at.clone(),
        updated_at: at,
        expires_at,
        deleted_at: None,
        revision: String::new(),
    };
    rec.seal();
    Ok(rec)
}

fn new_id() -> String {
    let u = uuid::Uuid::new_v4().simple().to_string();
    format!("mem_{}", &u[..16])
}

fn check_expiry(expires_at: Option<&str>, now: i64) -> Result<Option<String>, FieldError> {
    let Some(s) = expires_at else {
        return Ok(None);
    };
    let ms = parse_rfc3339("expires_at", s)?;
    if ms <= now {
        return Err(field_err(
            "expires_at",
            format!("{s} is not in the future (now is {})", rfc3339(now)),
        ));
    }
    Ok(Some(rfc3339(ms)))
}

fn ms_of(s: Option<&str>) -> Option<i64> {
    s.and_then(|s| parse_rfc3339("time", s).ok())
}

/// The record `id` of `scope` for `who`, if visible (not deleted, not expired at `now`).
pub(super) fn load_visible(
    conn: &Connection,
    who: &Identity,
    scope: Scope,
    id: &str,
    now: i64,
) -> rusqlite::Result<Option<Record>> {
    let row: Option<String> = conn
        .prepare_cached(
            "SELECT json FROM records WHERE id = ?1 AND skey = ?2 AND deleted = 0 AND (expires_ms IS NULL OR expires_ms > ?3)",
        )?
        .query_row(params![id, who.skey(scope), now], |r| r.get(0))
        .optional()?;
    Ok(row.and_then(|j| serde_json::from_str(&j).ok()))
}

/// Insert or replace `rec` and its postings (none when it is deleted).
fn put_record(conn: &Connection, rec: &Record, old: Option<&Record>) -> rusqlite::Result<()> {
    let skey = format!("{}/{}", rec.scope.as_str(), rec.scope_id);
    let json = serde_json::to_string(rec).unwrap_or_default();
    let updated_ms = ms_of(Some(&rec.updated_at)).unwrap_or(0);
    let expires_ms = ms_of(rec.expires_at.as_deref());
    let deleted = rec.deleted_at.is_some();
    conn.prepare_cached(
        "INSERT OR REPLACE INTO records(id, skey, revision, updated_ms, expires_ms, deleted, json) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?
    .execute(params![rec.id, skey, rec.revision, updated_ms, expires_ms, deleted, json])?;
    if let Some(old) = old {
        // The old postings, by the old record's tokens (the index is keyed by token first).
        let mut del =
            conn.prepare_cached("DELETE FROM postings WHERE token = ?1 AND skey = ?2 AND id = ?3")?;
        let mut seen = HashSet::new();
        for t in crate::lexical::tokens(&old.search_text()) {
            if seen.insert(t.clone()) {
                del.execute(params![t, skey, rec.id])?;
            }
        }
    }
    if deleted {
        return Ok(());
    }
    let mut ins = conn.prepare_cached(
        "INSERT OR IGNORE INTO postings(token, skey, id, importance, confidence, updated_ms, expires_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?;
    let mut seen = HashSet::new();
    for t in crate::lexical::tokens(&rec.search_text()) {
        if seen.insert(t.clone()) {
            ins.execute(params![
                t,
                skey,
                rec.id,
                rec.importance,
                rec.confidence,
                updated_ms,
                expires_ms
            ])?;
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
pub(super) fn audit(
    conn: &Connection,
    at: &str,
    who: &Identity,
    op: &str,
    target: &str,
    scope: &str,
    scope_id: &str,
    old: Option<&str>,
    new: Option<&str>,
) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO audit(at, actor, op, target, scope, scope_id, old_revision, new_revision) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![at, who.actor(), op, target, scope, scope_id, old, new])?;
    Ok(())
}
