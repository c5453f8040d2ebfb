//! Zip archives of a workspace, the form Ray's runtime environment ships a working directory
//! in (and the form a task's workspace comes back from its node in). Entries are written in
//! path order with a fixed time, so the same files give the same bytes: a package's name is
//! its content's hash and an unchanged one is uploaded once.

use keel_tools::beneath::{Beneath, BeneathError};
use std::io::{Cursor, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, DateTime, ZipArchive, ZipWriter};

/// The largest single file packed (the whole workspace travels in one upload).
pub const MAX_PACKED_FILE: u64 = 64 << 20;

/// An archive being written in memory.
pub struct Pack {
    zip: ZipWriter<Cursor<Vec<u8>>>,
    level: i64,
}

impl Pack {
    /// An empty archive; `level` is deflate's (1 fast … 9 small).
    pub fn new(level: i64) -> Pack {
        Pack {
            zip: ZipWriter::new(Cursor::new(Vec::new())),
            level,
        }
    }

    fn options(&self, mode: u32) -> SimpleFileOptions {
        SimpleFileOptions::default()
            .compression_method(CompressionMethod::Deflated)
            .compression_level(Some(self.level))
            .last_modified_time(DateTime::default())
            .unix_permissions(mode)
            .large_file(true)
    }

    /// Add one file at `name` (`/`-separated) with `mode`.
    pub fn file(&mut self, name: &str, mode: u32, data: &[u8]) -> Result<(), String> {
        self.zip
            .start_file(name, self.options(mode))
            .and_then(|()| self.zip.write_all(data).map_err(zip::result::ZipError::Io))
            .map_err(|e| format!("cannot add {name} to the archive: {e}"))
    }

    /// Add one file at `name` with `mode`, its bytes read from `from` (never held whole).
    pub fn copy(&mut self, name: &str, mode: u32, from: &mut impl Read) -> Result<(), String> {
        self.zip
            .start_file(name, self.options(mode))
            .map_err(|e| format!("cannot add {name} to the archive: {e}"))?;
        std::io::copy(from, &mut self.zip)
            .map(drop)
            .map_err(|e| format!("cannot add {name} to the archive: {e}"))
    }

    /// Add the tree under `dir` below `prefix` (`prefix/…`; empty: at the top). Files are read
    /// beneath `dir` ([`keel_tools::beneath`]): symbolic links are followed to files inside
    /// `dir` (Ray's unpacking writes files and directories only) and skipped when they lead to
    /// a directory, nowhere, or out of `dir` (a workspace's `env -> /proc/self/environ` must not
    /// ship keel's environment to the cluster); FIFOs, sockets and devices are skipped; a file
    /// over [`MAX_PACKED_FILE`] is an error naming it. A `.git` that is a file (a worktree's
    /// pointer into a repository on this machine) is left out.
    pub fn tree(&mut self, dir: &Path, prefix: &str) -> Result<(), String> {
        let mut entries: Vec<PathBuf> = Vec::new();
        walk(dir, &mut entries).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
        let beneath =
            Beneath::open(dir).map_err(|e| format!("cannot open {}: {e}", dir.display()))?;
        entries.sort();
        for path in entries {
            let rel = path.strip_prefix(dir).unwrap_or(&path);
            let name = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect::<Vec<_>>()
                .join("/");
            let name = if prefix.is_empty() {
                name
            } else {
                format!("{prefix}/{name}")
            };
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if meta.is_dir() {
                let options = self.options(meta.permissions().mode());
                self.zip
                    .add_directory(name.clone(), options)
                    .map_err(|e| format!("cannot add {name} to the archive: {e}"))?;
                continue;
            }
            let (mut file, _) = match beneath.open_regular(rel, MAX_PACKED_FILE) {
                Ok(opened) => opened,
                Err(BeneathError::TooLarge { size, cap, .. }) => {
                    return Err(format!(
                        "cannot pack {}: {size} bytes, over the {cap}-byte limit of one file",
                        path.display()
                    ));
                }
                // Out of the directory, a loop, a FIFO or device, gone since the walk.
                Err(_) => continue,
            };
            let mode = file
                .metadata()
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?
                .permissions()
                .mode();
            let mut data = Vec::new();
            file.read_to_end(&mut data)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            self.file(&name, mode, &data)?;
        }
        Ok(())
    }

    /// The archive's bytes.
    pub fn finish(self) -> Result<Vec<u8>, String> {
        self.zip
            .finish()
            .map(Cursor::into_inner)
            .map_err(|e| format!("cannot finish the archive: {e}"))
    }
}

/// Every path under `dir` (directories included, but for symlinked ones), depth first.
fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let kind = entry.file_type()?;
        if entry.file_name() == ".git" && !kind.is_dir() {
            continue;
        }
        if kind.is_dir() {
            out.push(path.clone());
            walk(&path, out)?;
        } else if kind.is_symlink() {
            if std::fs::metadata(&path).is_ok_and(|m| m.is_file()) {
                out.push(path);
            }
        } else {
            out.push(path);
        }
    }
    Ok(())
}

/// Unpack `data` into `dest` (created), keeping the files' modes. An entry whose path would
/// leave `dest` is refused: the archive came from a node.
pub fn unpack(data: &[u8], dest: &Path) -> Result<usize, String> {
    let mut zip =
        ZipArchive::new(Cursor::new(data)).map_err(|e| format!("not a zip archive: {e}"))?;
    std::fs::create_dir_all(dest).map_err(|e| format!("cannot create {}: {e}", dest.display()))?;
    let mut files = 0;
    for i in 0..zip.len() {
        let mut entry = zip
            .by_index(i)
            .map_err(|e| format!("entry {i} of the archive: {e}"))?;
        let Some(rel) = entry.enclosed_name() else {
            return Err(format!(
                "the archive's entry {:?} leaves its directory",
                entry.name()
            ));
        };
        if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
            return Err(format!(
                "the archive's entry {:?} is not a plain path",
                entry.name()
            ));
        }
        let path = dest.join(&rel);
        if entry.is_dir() {
            std::fs::create_dir_all(&path)
                .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
            continue;
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        let mut data = Vec::new();
        entry
            .read_to_end(&mut data)
            .map_err(|e| format!("cannot read {} from the archive: {e}", rel.display()))?;
        std::fs::write(&path, &data)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        if let Some(mode) = entry.unix_mode() {
            let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode & 0o7777));
        }
        files += 1;
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_tree_round_trips_with_modes_and_the_same_files_give_the_same_bytes() {
        let src = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(src.path().join("a/b")).unwrap();
        std::fs::write(src.path().join("a/b/x.txt"), "x").unwrap();
        std::fs::write(src.path().join("run.sh"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(
            src.path().join("run.sh"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        std::fs::write(src.path().join(".git"), "gitdir: /elsewhere\n").unwrap();
        std::os::unix::fs::symlink("run.sh", src.path().join("link")).unwrap();
        std::os::unix::fs::symlink("/nowhere", src.path().join("dangling")).unwrap();
        std::os::unix::fs::symlink("/proc/self/environ", src.path().join("env")).unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "SECRET").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), src.path().join("out")).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(src.path().join("pipe"))
            .status()
            .unwrap();
        assert!(made.success());
        let pack = |level| {
            let mut p = Pack::new(level);
            p.tree(src.path(), "ws").unwrap();
            p.finish().unwrap()
        };
        let bytes = pack(1);
        assert_eq!(bytes, pack(1));
        let dest = tempfile::tempdir().unwrap();
        assert_eq!(unpack(&bytes, dest.path()).unwrap(), 3);
        let ws = dest.path().join("ws");
        assert_eq!(std::fs::read_to_string(ws.join("a/b/x.txt")).unwrap(), "x");
        let mode = std::fs::metadata(ws.join("run.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o755);
        assert_eq!(
            std::fs::read_to_string(ws.join("link")).unwrap(),
            "#!/bin/sh\n"
        );
        assert!(!ws.join(".git").exists());
        assert!(!ws.join("dangling").exists());
        for left_out in ["env", "out", "pipe"] {
            assert!(!ws.join(left_out).exists(), "{left_out} was packed");
        }
    }

    #[test]
    fn an_entry_leaving_its_directory_is_refused() {
        let mut zip = ZipWriter::new(Cursor::new(Vec::new()));
        zip.start_file("../evil", SimpleFileOptions::default())
            .unwrap();
        zip.write_all(b"x").unwrap();
        let bytes = zip.finish().unwrap().into_inner();
        let dest = tempfile::tempdir().unwrap();
        let err = unpack(&bytes, &dest.path().join("d")).unwrap_err();
        assert!(err.contains("leaves its directory"), "{err}");
    }
}
