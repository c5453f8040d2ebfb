//! Zip archives of a workspace, the form Ray's runtime environment ships a working directory
//! in (and the form a task's workspace comes back from its node in). Entries are written in
//! path order with a fixed time, so the same files give the same bytes: a package's name is
//! its content's hash and an unchanged one is uploaded once.

use keel_tools::beneath::{Beneath, BeneathError};
use std::io::{Cursor, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};
use zip::result::ZipError;
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, DateTime, ZipArchive, ZipWriter};

/// Why an archive could not be written or unpacked (each names the file or entry).
#[derive(Debug, thiserror::Error)]
pub enum PackError {
    /// An entry could not be added.
    #[error("cannot add {name} to the archive: {error}")]
    Add {
        /// The entry's name.
        name: String,
        /// What the zip writer said.
        error: ZipError,
    },
    /// A file's bytes could not be copied into its entry.
    #[error("cannot add {name} to the archive: {error}")]
    Copy {
        /// The entry's name.
        name: String,
        /// Why.
        error: std::io::Error,
    },
    /// A file or directory to pack could not be read.
    #[error("cannot read {}: {error}", path.display())]
    Read {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// The directory to pack could not be opened.
    #[error("cannot open {}: {error}", path.display())]
    Open {
        /// The directory.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// A file is over [`MAX_PACKED_FILE`].
    #[error("cannot pack {}: {size} bytes, over the {cap}-byte limit of one file", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        size: u64,
        /// The limit.
        cap: u64,
    },
    /// The archive could not be finished.
    #[error("cannot finish the archive: {error}")]
    Finish {
        /// What the zip writer said.
        error: ZipError,
    },
    /// The bytes to unpack are no zip archive.
    #[error("not a zip archive: {error}")]
    NotZip {
        /// What the zip reader said.
        error: ZipError,
    },
    /// An entry could not be read.
    #[error("entry {index} of the archive: {error}")]
    Entry {
        /// Its index.
        index: usize,
        /// What the zip reader said.
        error: ZipError,
    },
    /// An entry's path leaves the directory unpacked into.
    #[error("the archive's entry {name:?} leaves its directory")]
    Leaves {
        /// Its name.
        name: String,
    },
    /// An entry's path has other parts than names.
    #[error("the archive's entry {name:?} is not a plain path")]
    NotPlain {
        /// Its name.
        name: String,
    },
    /// A directory to unpack into could not be made.
    #[error("cannot create {}: {error}", path.display())]
    Create {
        /// The directory.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// An entry's bytes could not be read.
    #[error("cannot read {} from the archive: {error}", path.display())]
    ReadEntry {
        /// The entry's path.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// An unpacked file could not be written.
    #[error("cannot write {}: {error}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
}

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
    pub fn file(&mut self, name: &str, mode: u32, data: &[u8]) -> Result<(), PackError> {
        self.zip
            .start_file(name, self.options(mode))
            .and_then(|()| self.zip.write_all(data).map_err(ZipError::Io))
            .map_err(|error| PackError::Add {
                name: name.to_owned(),
                error,
            })
    }

    /// Add one file at `name` with `mode`, its bytes read from `from` (never held whole).
    pub fn copy(&mut self, name: &str, mode: u32, from: &mut impl Read) -> Result<(), PackError> {
        self.zip
            .start_file(name, self.options(mode))
            .map_err(|error| PackError::Add {
                name: name.to_owned(),
                error,
            })?;
        std::io::copy(from, &mut self.zip)
            .map(drop)
            .map_err(|error| PackError::Copy {
                name: name.to_owned(),
                error,
            })
    }

    /// Add the tree under `dir` below `prefix` (`prefix/…`; empty: at the top). Files are read
    /// beneath `dir` ([`keel_tools::beneath`]): symbolic links are followed to files inside
    /// `dir` (Ray's unpacking writes files and directories only) and skipped when they lead to
    /// a directory, nowhere, or out of `dir` (a workspace's `env -> /proc/self/environ` must not
    /// ship keel's environment to the cluster); FIFOs, sockets and devices are skipped; a file
    /// over [`MAX_PACKED_FILE`] is an error naming it. A `.git` that is a file (a worktree's
    /// pointer into a repository on this machine) is left out.
    pub fn tree(&mut self, dir: &Path, prefix: &str) -> Result<(), PackError> {
        let mut entries: Vec<PathBuf> = Vec::new();
        walk(dir, &mut entries).map_err(|error| PackError::Read {
            path: dir.to_path_buf(),
            error,
        })?;
        let beneath = Beneath::open(dir).map_err(|error| PackError::Open {
            path: dir.to_path_buf(),
            error,
        })?;
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
                    .map_err(|error| PackError::Add { name, error })?;
                continue;
            }
            let (mut file, _) = match beneath.open_regular(rel, MAX_PACKED_FILE) {
                Ok(opened) => opened,
                Err(BeneathError::TooLarge { size, cap, .. }) => {
                    return Err(PackError::TooLarge { path, size, cap });
                }
                // Out of the directory, a loop, a FIFO or device, gone since the walk.
                Err(_) => continue,
            };
            let unreadable = |error| PackError::Read {
                path: path.clone(),
                error,
            };
            let mode = file.metadata().map_err(unreadable)?.permissions().mode();
            let mut data = Vec::new();
            file.read_to_end(&mut data).map_err(unreadable)?;
            self.file(&name, mode, &data)?;
        }
        Ok(())
    }

    /// The archive's bytes.
    pub fn finish(self) -> Result<Vec<u8>, PackError> {
        self.zip
            .finish()
            .map(Cursor::into_inner)
            .map_err(|error| PackError::Finish { error })
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
pub fn unpack(data: &[u8], dest: &Path) -> Result<usize, PackError> {
    let mut zip =
        ZipArchive::new(Cursor::new(data)).map_err(|error| PackError::NotZip { error })?;
    let create = |path: &Path| {
        std::fs::create_dir_all(path).map_err(|error| PackError::Create {
            path: path.to_path_buf(),
            error,
        })
    };
    create(dest)?;
    let mut files = 0;
    for index in 0..zip.len() {
        let mut entry = zip
            .by_index(index)
            .map_err(|error| PackError::Entry { index, error })?;
        let Some(rel) = entry.enclosed_name() else {
            return Err(PackError::Leaves {
                name: entry_name(&entry),
            });
        };
        if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
            return Err(PackError::NotPlain {
                name: entry_name(&entry),
            });
        }
        let path = dest.join(&rel);
        if entry.is_dir() {
            create(&path)?;
            continue;
        }
        if let Some(parent) = path.parent() {
            create(parent)?;
        }
        let mut data = Vec::new();
        entry
            .read_to_end(&mut data)
            .map_err(|error| PackError::ReadEntry { path: rel, error })?;
        std::fs::write(&path, &data).map_err(|error| PackError::Write {
            path: path.clone(),
            error,
        })?;
        if let Some(mode) = entry.unix_mode() {
            let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode & 0o7777));
        }
        files += 1;
    }
    Ok(files)
}

/// An entry's name as the archive has it (lossily, when it is not text).
fn entry_name<R: Read>(entry: &zip::read::ZipFile<'_, R>) -> String {
    match entry.name() {
        Ok(name) => name.into_owned(),
        Err(_) => String::from_utf8_lossy(entry.name_raw()).into_owned(),
    }
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
        assert_eq!(
            err.to_string(),
            "the archive's entry \"../evil\" leaves its directory"
        );
    }
}
