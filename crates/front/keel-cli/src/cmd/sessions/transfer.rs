//! `keel sessions export` and `keel sessions import`.
//!
//! Export writes the loaded session: as plain JSONL (the header, then one line per event with
//! packed chunk rows *expanded* into their `assistant/chunk` events, so any JSONL reader sees
//! every seq) or as the Markdown transcript. Import validates a DeepSeek Harness (or keel)
//! session file and copies its committed bytes, unchanged, into keel's store under the project
//! of the header's `cwd`, published atomically by the store's [`publish_file`] (temp file, fsync,
//! no-clobber link, fsync of the directory) and then loaded back to verify it.

use super::render::render_markdown;
use crate::cli::ExportFormat;
use anyhow::{Context, Result, bail};
use keel_session::store::{
    PLAIN_FILE, PublishError, ZSTD_FILE, load::session_file, private_dir_all, publish_file,
};
use keel_session::view::Transcript;
use keel_session::{Format, Loaded, Session, Store};
use std::fs;
use std::path::{Path, PathBuf};

/// The session as plain JSONL: header, then every event (packed rows expanded).
pub fn jsonl(session: &Session) -> Result<Vec<u8>> {
    let mut out = serde_json::to_vec(session.header()).context("cannot encode the header")?;
    out.push(b'\n');
    for ev in session.events() {
        serde_json::to_writer(&mut out, &*ev)
            .with_context(|| format!("cannot encode event #{}", ev.seq))?;
        out.push(b'\n');
    }
    Ok(out)
}

/// The export of `session` in `format`.
pub fn export(session: &Session, format: ExportFormat) -> Result<Vec<u8>> {
    match format {
        ExportFormat::Jsonl => jsonl(session),
        ExportFormat::Markdown => {
            Ok(render_markdown(&Transcript::build(session, &keel_host::presenters())).into_bytes())
        }
        // Needs the provenance journal beside the log: `super::html` writes it.
        ExportFormat::Html => {
            bail!("the HTML export is written by `keel sessions export`, not by transfer::export")
        }
    }
}

/// What an import did.
#[derive(Debug)]
pub struct Imported {
    /// The session id.
    pub id: String,
    /// The new session file in the store.
    pub path: PathBuf,
    /// Events imported.
    pub events: u64,
    /// Turns imported.
    pub turns: u64,
}

/// The session file a user named: a file, or a directory holding one.
pub fn source_file(path: &Path) -> Result<PathBuf> {
    if !path.exists() {
        bail!("{}: no such file or directory", path.display());
    }
    if path.is_dir() {
        return session_file(path).map_err(|_| {
            anyhow::anyhow!(
                "{} holds no session file (looked for {PLAIN_FILE}, {ZSTD_FILE} and session.jsonl.zstd)",
                path.display()
            )
        });
    }
    Ok(path.to_owned())
}

/// A session id is used as a directory name: refuse anything that could leave the store.
fn check_id(id: &str, file: &Path) -> Result<()> {
    let bad = id.is_empty()
        || id.len() > 200
        || id.starts_with('.')
        || id
            .chars()
            .any(|c| c == '/' || c == '\\' || c == '\0' || c.is_control());
    if bad {
        bail!(
            "refusing to import {}: its session id {id:?} cannot be used as a directory name",
            file.display()
        );
    }
    Ok(())
}

/// Import the session file `file` (already resolved) into `store`; `cwd` is the project used
/// when the header names none. `warn` receives a warning about a dropped torn tail.
pub fn import(
    store: &Store,
    cwd: &Path,
    file: &Path,
    warn: &mut dyn FnMut(String),
) -> Result<Imported> {
    let Loaded { session, report } = Store::load(file)
        .map_err(|e| anyhow::anyhow!("refusing to import {}: {e}", file.display()))?;
    if let Some(t) = &report.torn {
        warn(format!(
            "{}: torn tail dropped at line {} ({} bytes: {}); importing the {} committed events",
            file.display(),
            t.line,
            t.dropped_bytes,
            t.reason,
            report.events
        ));
    }
    let header = session.header();
    let id = header.id.as_str();
    check_id(id, file)?;
    let project = header.cwd.as_deref().map_or(cwd, Path::new);
    let dir = store.session_dir(project, id);
    if let Ok(existing) = session_file(&dir) {
        bail!(
            "a session with id {id} already exists at {}; nothing imported (remove it first to replace it)",
            existing.display()
        );
    }
    let name = match report.format {
        Format::Plain => PLAIN_FILE,
        Format::Zstd => ZSTD_FILE,
    };
    let dest = dir.join(name);
    let data = fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    let committed = usize::try_from(report.valid_len)
        .ok()
        .and_then(|n| data.get(..n))
        .with_context(|| format!("{}: changed while being imported", file.display()))?;
    publish(&dir, &dest, committed, id)?;
    let verified = match Store::load(&dest) {
        Err(e) => Err(anyhow::anyhow!("the imported copy does not load back: {e}")),
        Ok(back) if back.session.len() != session.len() => Err(anyhow::anyhow!(
            "the imported copy {} holds {} events, the source {}",
            dest.display(),
            back.session.len(),
            session.len()
        )),
        Ok(_) => Ok(()),
    };
    if let Err(e) = verified {
        // Do not leave a copy that would block a later import of the same id.
        let _ = fs::remove_file(&dest);
        return Err(e);
    }
    Ok(Imported {
        id: id.to_owned(),
        path: dest,
        events: session.len(),
        turns: session.turn_count(),
    })
}

/// Write `bytes` to `dest` atomically, never replacing an existing file (the store's own
/// publish: temp file, fsync, no-clobber link, fsync of the directory).
fn publish(dir: &Path, dest: &Path, bytes: &[u8], id: &str) -> Result<()> {
    private_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    publish_file(dest, bytes, id).map_err(|e| match e {
        PublishError::Exists { path } => {
            anyhow::anyhow!("{} already exists; nothing imported", path.display())
        }
        e => anyhow::Error::new(e),
    })
}
