//! Session search: a derived full-text index over every session log under `$KEEL_HOME`.
//!
//! The logs are the truth; the index is a cache beside them (`$KEEL_HOME/index/search.sqlite`,
//! SQLite FTS5), safe to delete at any time. Every search first brings it up to date from the
//! files ([`Index::refresh`]):
//!
//! ```text
//! session files ─► stat (size, mtime) ─► unchanged: skip
//!                                     ├► grown (appended, by any process): index seqs from the last one indexed
//!                                     ├► shrunk or replaced: drop its rows, index it whole
//!                                     └► gone: drop its rows
//! query words ─► FTS5 phrase AND ─► hits: session, turn, seq, kind, snippet (best first)
//! ```
//!
//! What is indexed, per event: what the human typed (`user`), other user messages such as
//! notices (`note`), the model's answers (`answer`), each tool call's name and arguments, file
//! paths included (`call`), and tool results (`result`, the first 64 KiB). The log is
//! append-only, so a message that compaction took off the model's surface is still found.
#![deny(missing_docs)]

use keel_protocol::{ContentBlock, EventBody};
use keel_session::Store;
use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

/// Bytes of one tool result that are indexed.
pub const RESULT_CAP: usize = 64 * 1024;
/// Bytes of one tool call's arguments that are indexed.
pub const ARGS_CAP: usize = 4 * 1024;
/// Bumped when what is indexed changes: an index of another version is rebuilt.
const SCHEMA_VERSION: &str = "1";

/// Why a search failed.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// The index database could not be opened or written.
    #[error("the search index {path} failed: {source}")]
    Db {
        /// The index file.
        path: PathBuf,
        /// What SQLite said.
        source: rusqlite::Error,
    },
    /// The index directory or file could not be created.
    #[error("cannot create {path} (the search index): {source}")]
    Create {
        /// The directory or file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The query has no words.
    #[error("the search query is empty")]
    EmptyQuery,
}

/// One place a query matched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Hit {
    /// Session id.
    pub session: String,
    /// The session file.
    pub path: PathBuf,
    /// The working directory the session ran in (from its header).
    pub cwd: String,
    /// The turn the event belongs to (0: before the first turn).
    pub turn: u64,
    /// The event's seq.
    pub seq: u64,
    /// `user`, `note`, `answer`, `call` or `result`.
    pub kind: String,
    /// The matching text around the words, the words in `[` `]`.
    pub snippet: String,
}

/// What a refresh did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Refresh {
    /// Session files looked at.
    pub files: usize,
    /// Files (re)indexed, in whole or from their last indexed event.
    pub indexed: usize,
    /// Events read into the index.
    pub events: u64,
    /// Files no longer there, dropped from the index.
    pub removed: usize,
    /// Files that could not be read, with why (they are retried at the next refresh).
    pub problems: Vec<(PathBuf, String)>,
}

/// The search index of one `$KEEL_HOME`.
pub struct Index {
    conn: Connection,
    path: PathBuf,
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index").field("path", &self.path).finish()
    }
}

/// Where the index of `keel_home` lives.
pub fn index_path(keel_home: &Path) -> PathBuf {
    keel_home.join("index").join("search.sqlite")
}

struct FileRow {
    size: i64,
    mtime_ns: i64,
    next_seq: i64,
    turn: i64,
}

impl Index {
    /// Open (or create) the index of `keel_home`. An index that cannot be read (corrupt, or of
    /// another version) is deleted and rebuilt: it holds nothing the logs do not.
    pub fn open(keel_home: &Path) -> Result<Index, SearchError> {
        let path = index_path(keel_home);
        let dir = path.parent().unwrap_or(keel_home).to_path_buf();
        keel_session::store::private_dir_all(&dir).map_err(|source| SearchError::Create {
            path: dir.clone(),
            source,
        })?;
        match Self::open_at(&path) {
            Ok(index) => Ok(index),
            Err(_) => {
                for suffix in ["", "-wal", "-shm"] {
                    let mut p = path.clone().into_os_string();
                    p.push(suffix);
                    let _ = std::fs::remove_file(PathBuf::from(p));
                }
                Self::open_at(&path)
            }
        }
    }

    fn open_at(path: &Path) -> Result<Index, SearchError> {
        let db = |source| SearchError::Db {
            path: path.to_path_buf(),
            source,
        };
        // The index quotes the logs: owner-only like them (SQLite gives its -wal and -shm
        // files the database file's mode).
        if !path.exists() {
            keel_session::store::private_file(path).map_err(|source| SearchError::Create {
                path: path.to_path_buf(),
                source,
            })?;
        }
        let conn = Connection::open(path).map_err(db)?;
        conn.execute_batch(
            "PRAGMA journal_mode = WAL;
             PRAGMA synchronous = NORMAL;
             CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
             CREATE TABLE IF NOT EXISTS files (
                 path TEXT PRIMARY KEY, session TEXT NOT NULL, cwd TEXT NOT NULL,
                 project TEXT NOT NULL, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
                 next_seq INTEGER NOT NULL, turn INTEGER NOT NULL);
             CREATE VIRTUAL TABLE IF NOT EXISTS docs USING fts5(
                 text, path UNINDEXED, seq UNINDEXED, turn UNINDEXED, kind UNINDEXED,
                 tokenize = 'unicode61 remove_diacritics 2');",
        )
        .map_err(db)?;
        let version: Option<String> = conn
            .query_row("SELECT value FROM meta WHERE key = 'version'", [], |r| {
                r.get(0)
            })
            .optional()
            .map_err(db)?;
        match version.as_deref() {
            Some(SCHEMA_VERSION) => {}
            None => {
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES ('version', ?1)",
                    [SCHEMA_VERSION],
                )
                .map_err(db)?;
            }
            Some(_) => return Err(db(rusqlite::Error::InvalidQuery)),
        }
        Ok(Index {
            conn,
            path: path.to_path_buf(),
        })
    }

    fn db(&self, source: rusqlite::Error) -> SearchError {
        SearchError::Db {
            path: self.path.clone(),
            source,
        }
    }

    /// Bring the index up to date with every session file of `store` (see the module docs).
    /// Nothing is written when nothing changed.
    pub fn refresh(&mut self, store: &Store) -> Result<Refresh, SearchError> {
        let files = store.session_files(None);
        let mut report = Refresh {
            files: files.len(),
            ..Refresh::default()
        };
        let path = self.path.clone();
        let db = |source| SearchError::Db {
            path: path.clone(),
            source,
        };
        // What the index knows, in one read.
        let mut known: HashMap<String, FileRow> = {
            let mut stmt = self
                .conn
                .prepare_cached("SELECT path, size, mtime_ns, next_seq, turn FROM files")
                .map_err(db)?;
            let rows = stmt
                .query_map([], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        FileRow {
                            size: r.get(1)?,
                            mtime_ns: r.get(2)?,
                            next_seq: r.get(3)?,
                            turn: r.get(4)?,
                        },
                    ))
                })
                .map_err(db)?;
            rows.collect::<Result<_, _>>().map_err(db)?
        };
        // What changed: files whose size or modification time differ from the index's.
        let mut work = Vec::new();
        for file in &files {
            let key = file.to_string_lossy().into_owned();
            let row = known.remove(&key);
            let Ok(meta) = std::fs::metadata(file) else {
                continue;
            };
            let size = meta.len() as i64;
            let mtime_ns = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos() as i64);
            if row
                .as_ref()
                .is_some_and(|r| r.size == size && r.mtime_ns == mtime_ns)
            {
                continue;
            }
            work.push((file, key, size, mtime_ns, row));
        }
        // Left in `known`: files that are gone.
        if work.is_empty() && known.is_empty() {
            return Ok(report);
        }
        let tx = self.conn.transaction().map_err(db)?;
        for gone in known.keys() {
            tx.execute("DELETE FROM docs WHERE path = ?1", [gone])
                .map_err(db)?;
            tx.execute("DELETE FROM files WHERE path = ?1", [gone])
                .map_err(db)?;
            report.removed += 1;
        }
        for (file, key, size, mtime_ns, row) in work {
            let (from_seq, mut turn) = match &row {
                Some(r) if size > r.size => (r.next_seq as u64, r.turn as u64),
                Some(_) => {
                    tx.execute("DELETE FROM docs WHERE path = ?1", [&key])
                        .map_err(db)?;
                    (0, 0)
                }
                None => (0, 0),
            };
            let loaded = match Store::load(file) {
                Ok(l) => l,
                Err(e) => {
                    report.problems.push((file.clone(), e.to_string()));
                    continue;
                }
            };
            let session = &loaded.session;
            let header = session.header();
            let project = file
                .parent()
                .and_then(Path::parent)
                .and_then(Path::file_name)
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            {
                let mut insert = tx
                    .prepare_cached(
                        "INSERT INTO docs (text, path, seq, turn, kind) VALUES (?1, ?2, ?3, ?4, ?5)",
                    )
                    .map_err(db)?;
                for ev in session.events() {
                    if ev.seq.0 < from_seq {
                        if let EventBody::TurnStart(t) = &ev.body {
                            turn = t.turn.0.into();
                        }
                        continue;
                    }
                    report.events += 1;
                    for (kind, text) in documents(&ev.body, &mut turn) {
                        insert
                            .execute(params![text, key, ev.seq.0 as i64, turn as i64, kind])
                            .map_err(db)?;
                    }
                }
            }
            tx.execute(
                "INSERT INTO files (path, session, cwd, project, size, mtime_ns, next_seq, turn)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                 ON CONFLICT(path) DO UPDATE SET session = ?2, cwd = ?3, project = ?4,
                     size = ?5, mtime_ns = ?6, next_seq = ?7, turn = ?8",
                params![
                    key,
                    header.id.as_str(),
                    header.cwd.as_deref().unwrap_or(""),
                    project,
                    size,
                    mtime_ns,
                    session.next_seq().0 as i64,
                    turn as i64
                ],
            )
            .map_err(db)?;
            report.indexed += 1;
        }
        tx.commit().map_err(db)?;
        Ok(report)
    }

    /// The best `limit` hits for `query` (every word must appear; each is matched as a word,
    /// case- and accent-insensitively), in the sessions of `project` (a [`Store::project_key`])
    /// or of every project.
    pub fn search(
        &self,
        query: &str,
        project: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Hit>, SearchError> {
        let expr = match_expression(query).ok_or(SearchError::EmptyQuery)?;
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT f.session, d.path, f.cwd, d.turn, d.seq, d.kind,
                        snippet(docs, 0, '[', ']', '…', 16)
                 FROM docs d JOIN files f ON f.path = d.path
                 WHERE docs MATCH ?1 AND (?2 IS NULL OR f.project = ?2)
                 ORDER BY rank LIMIT ?3",
            )
            .map_err(|e| self.db(e))?;
        let rows = stmt
            .query_map(params![expr, project, limit as i64], |r| {
                Ok(Hit {
                    session: r.get(0)?,
                    path: PathBuf::from(r.get::<_, String>(1)?),
                    cwd: r.get(2)?,
                    turn: r.get::<_, i64>(3)? as u64,
                    seq: r.get::<_, i64>(4)? as u64,
                    kind: r.get(5)?,
                    snippet: r.get::<_, String>(6)?.replace('\n', " "),
                })
            })
            .map_err(|e| self.db(e))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(|e| self.db(e))
    }
}

/// The FTS5 expression for the words of `query`: each word a quoted phrase (quotes doubled),
/// all required. `None` when it has no words. A NUL separates words too: FTS5 reads the
/// expression only up to one, so a word holding it left its phrase unterminated (an error).
pub fn match_expression(query: &str) -> Option<String> {
    let words: Vec<String> = query
        .split(|c: char| c.is_whitespace() || c == '\0')
        .filter(|w| !w.is_empty())
        .map(|w| format!("\"{}\"", w.replace('"', "\"\"")))
        .collect();
    (!words.is_empty()).then(|| words.join(" "))
}

fn capped(text: &str, cap: usize) -> &str {
    &text[..text.floor_char_boundary(cap)]
}

/// The documents one event adds: `(kind, text)`. Keeps `turn` current.
fn documents(body: &EventBody, turn: &mut u64) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    match body {
        EventBody::TurnStart(t) => *turn = t.turn.0.into(),
        EventBody::UserMessage(m) => {
            let kind = if m.source.is_user() { "user" } else { "note" };
            let text = m.text();
            if !text.trim().is_empty() {
                out.push((kind, text));
            }
        }
        EventBody::AssistantMessage(a) => {
            let text = a.message.text();
            if !text.trim().is_empty() {
                out.push(("answer", text));
            }
            for call in a.message.tool_calls() {
                out.push((
                    "call",
                    format!("{} {}", call.name, capped(&call.arguments, ARGS_CAP)),
                ));
            }
        }
        EventBody::ToolResult(r) => {
            for block in &r.message.content {
                if let ContentBlock::ToolResult(result) = block {
                    let text = result.text();
                    if !text.trim().is_empty() {
                        out.push(("result", capped(&text, RESULT_CAP).to_owned()));
                    }
                }
            }
        }
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_words_become_quoted_phrases() {
        assert_eq!(match_expression("  "), None);
        assert_eq!(
            match_expression(r#"heron say"s OR"#).as_deref(),
            Some(r#""heron" "say""s" "OR""#)
        );
        assert_eq!(match_expression("\0 \0"), None);
        assert_eq!(
            match_expression("he\0ron").as_deref(),
            Some(r#""he" "ron""#)
        );
    }

    #[test]
    fn a_query_holding_a_nul_is_searched() {
        let home = tempfile::tempdir().unwrap();
        let index = Index::open(home.path()).unwrap();
        let hits = index.search("heron\0 say\"s\0", None, 10).unwrap();
        assert!(hits.is_empty());
    }
}
