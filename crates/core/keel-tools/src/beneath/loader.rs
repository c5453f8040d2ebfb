//! What keel's loaders (configuration, settings, `.mcp.json`, custom commands, skills) need
//! beyond opening one file: a directory listed from a descriptor opened beneath the root
//! ([`Beneath::list`]), the user's own files read as regular files within a cap
//! ([`read_user_file`]), one [`Reader`] over both for loaders that read project and user trees
//! alike, and a short reason for a notice ([`BeneathError::reason`]).
//!
//! Data flow: a loader opens a [`Reader`] for each tree (the project's beneath the workspace
//! root, the user's as they are), lists and reads through it, and turns an error that is not
//! [`BeneathError::is_not_found`] into a notice naming the file and [`BeneathError::reason`].

use super::{Beneath, BeneathError};
use std::ffi::{CStr, OsStr, OsString};
use std::io;
use std::os::fd::{IntoRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

impl BeneathError {
    /// Why the file was not read, without its path: for a notice that names the file itself
    /// (`.mcp.json not read: it leads outside the workspace …`).
    pub fn reason(&self) -> String {
        match self {
            BeneathError::Escapes { .. } => {
                "it leads outside the workspace (a symlink, '..' or an absolute path)".to_owned()
            }
            BeneathError::Loop { .. } => "too many levels of symbolic links (a loop?)".to_owned(),
            BeneathError::NotRegular { kind, .. } => format!("it is {kind}, not a regular file"),
            BeneathError::TooLarge { size, cap, .. } => {
                format!("it is {size} bytes, over the {cap}-byte limit")
            }
            BeneathError::Io { source, .. } => source.to_string(),
        }
    }

    /// The same error about `path` (a loader's full path rather than the relative one).
    fn about(self, path: &Path) -> BeneathError {
        let path = path.to_path_buf();
        match self {
            BeneathError::Escapes { root, .. } => BeneathError::Escapes { path, root },
            BeneathError::Loop { .. } => BeneathError::Loop { path },
            BeneathError::NotRegular { kind, .. } => BeneathError::NotRegular { path, kind },
            BeneathError::TooLarge { size, cap, .. } => BeneathError::TooLarge { path, size, cap },
            BeneathError::Io { source, .. } => BeneathError::Io { path, source },
        }
    }
}

impl Beneath {
    /// The names in the directory `rel` (`""` is this one), `.` and `..` left out, sorted.
    /// The directory is opened beneath the root and listed from that descriptor: a directory
    /// reached by a link out of the root is refused ([`BeneathError::Escapes`]), never listed.
    pub fn list(&self, rel: &Path) -> Result<Vec<OsString>, BeneathError> {
        let fd = self.open_raw(rel, libc::O_RDONLY | libc::O_DIRECTORY)?;
        list_fd(fd).map_err(|source| BeneathError::Io {
            path: rel.to_path_buf(),
            source,
        })
    }
}

/// The entries of the open directory `fd` (consumed), sorted.
fn list_fd(fd: OwnedFd) -> io::Result<Vec<OsString>> {
    let raw = fd.into_raw_fd();
    // SAFETY: `raw` is an open directory descriptor we own; on success the stream owns it.
    let dir = unsafe { libc::fdopendir(raw) };
    if dir.is_null() {
        let e = io::Error::last_os_error();
        // SAFETY: fdopendir failed, so `raw` is still ours to close, once.
        unsafe { libc::close(raw) };
        return Err(e);
    }
    let mut names = Vec::new();
    let listed = loop {
        // SAFETY: errno is thread-local; cleared to tell the end of the stream from an error.
        unsafe { *libc::__errno_location() = 0 };
        // SAFETY: `dir` is an open directory stream used by this thread only.
        let entry = unsafe { libc::readdir(dir) };
        if entry.is_null() {
            let e = io::Error::last_os_error();
            break if e.raw_os_error() == Some(0) {
                Ok(())
            } else {
                Err(e)
            };
        }
        // SAFETY: a non-null entry's `d_name` is NUL-terminated and valid until the next
        // readdir on this stream; it is copied before then.
        let name = unsafe { CStr::from_ptr((*entry).d_name.as_ptr()) }.to_bytes();
        if name != b"." && name != b".." {
            names.push(OsStr::from_bytes(name).to_os_string());
        }
    };
    // SAFETY: `dir` is open and closed once, closing `raw` with it.
    unsafe { libc::closedir(dir) };
    listed?;
    names.sort();
    Ok(names)
}

/// A file of the user's own (under `$KEEL_HOME`, `~/.claude`, a `--config` they named): it
/// may be a link (to their dotfiles) and is followed, but what it leads to must be a regular
/// file of at most `cap` bytes, opened without waiting on a FIFO. Errors name `path`.
pub fn read_user_file(path: &Path, cap: u64) -> Result<Vec<u8>, BeneathError> {
    let io_err = |source: io::Error| BeneathError::Io {
        path: path.to_path_buf(),
        source,
    };
    let real = std::fs::canonicalize(path).map_err(io_err)?;
    let (Some(dir), Some(name)) = (real.parent(), real.file_name()) else {
        // The root directory itself.
        return Err(BeneathError::NotRegular {
            path: path.to_path_buf(),
            kind: "a directory",
        });
    };
    Beneath::open(dir)
        .map_err(io_err)?
        .read_regular(Path::new(name), cap)
        .map_err(|e| e.about(path))
}

/// [`read_user_file`] as text (invalid UTF-8 replaced).
pub fn read_user_text(path: &Path, cap: u64) -> Result<String, BeneathError> {
    let bytes = read_user_file(path, cap)?;
    Ok(match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

/// How a loader reads a tree of files by full path: the project's [`Reader::Beneath`] its
/// root (nothing followed out of it), the user's own [`Reader::User`] as they are (links
/// followed). Either way a file read is a regular file within the caller's cap; errors name the
/// full path asked for.
#[derive(Debug)]
pub enum Reader {
    /// The project's files: every path must be under the root and is opened beneath it.
    Beneath(Beneath),
    /// The user's own files.
    User,
}

impl Reader {
    /// A reader of the files under `root` (the workspace root), opened beneath it.
    pub fn beneath(root: &Path) -> Result<Reader, BeneathError> {
        Beneath::open(root)
            .map(Reader::Beneath)
            .map_err(|source| BeneathError::Io {
                path: root.to_path_buf(),
                source,
            })
    }

    /// `path` relative to the root (a path not under it is an escape).
    fn rel<'a>(b: &Beneath, path: &'a Path) -> Result<&'a Path, BeneathError> {
        path.strip_prefix(b.path())
            .map_err(|_| BeneathError::Escapes {
                path: path.to_path_buf(),
                root: b.path().to_path_buf(),
            })
    }

    /// The names in the directory `dir`, sorted ([`Beneath::list`] for the project's).
    pub fn list(&self, dir: &Path) -> Result<Vec<OsString>, BeneathError> {
        match self {
            Reader::Beneath(b) => b.list(Self::rel(b, dir)?).map_err(|e| e.about(dir)),
            Reader::User => {
                let io_err = |source| BeneathError::Io {
                    path: dir.to_path_buf(),
                    source,
                };
                let mut names = Vec::new();
                for entry in std::fs::read_dir(dir).map_err(io_err)? {
                    names.push(entry.map_err(io_err)?.file_name());
                }
                names.sort();
                Ok(names)
            }
        }
    }

    /// The metadata of `path`, a final link followed (within the root for the project's).
    pub fn metadata(&self, path: &Path) -> Result<std::fs::Metadata, BeneathError> {
        match self {
            Reader::Beneath(b) => b.metadata(Self::rel(b, path)?).map_err(|e| e.about(path)),
            Reader::User => std::fs::metadata(path).map_err(|source| BeneathError::Io {
                path: path.to_path_buf(),
                source,
            }),
        }
    }

    /// The bytes of `path`: a regular file of at most `cap` bytes.
    pub fn read_regular(&self, path: &Path, cap: u64) -> Result<Vec<u8>, BeneathError> {
        match self {
            Reader::Beneath(b) => b
                .read_regular(Self::rel(b, path)?, cap)
                .map_err(|e| e.about(path)),
            Reader::User => read_user_file(path, cap),
        }
    }

    /// [`Reader::read_regular`] as text (invalid UTF-8 replaced).
    pub fn read_text(&self, path: &Path, cap: u64) -> Result<String, BeneathError> {
        let bytes = self.read_regular(path, cap)?;
        Ok(match String::from_utf8(bytes) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        })
    }

    /// The root the project's files are read beneath (`None` for the user's).
    pub fn root(&self) -> Option<PathBuf> {
        match self {
            Reader::Beneath(b) => Some(b.path().to_path_buf()),
            Reader::User => None,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::beneath::Resolver;
    use std::os::unix::fs::symlink;

    fn mkfifo(path: &Path) {
        let c = crate::beneath::cstring(path.as_os_str()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }

    #[test]
    fn list_names_entries_and_refuses_a_directory_linked_out() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        std::fs::create_dir_all(root.join("d/sub")).unwrap();
        std::fs::create_dir_all(tmp.path().join("outside")).unwrap();
        std::fs::write(root.join("d/b.md"), "b").unwrap();
        std::fs::write(tmp.path().join("outside/secret.md"), "s").unwrap();
        symlink("../outside", root.join("out")).unwrap();
        symlink("d", root.join("in")).unwrap();
        for resolver in [Resolver::Openat2, Resolver::Walk] {
            let b = Beneath::open_with(&root, resolver).unwrap();
            assert_eq!(b.list(Path::new("d")).unwrap(), ["b.md", "sub"]);
            assert_eq!(b.list(Path::new("in")).unwrap(), ["b.md", "sub"]);
            let e = b.list(Path::new("out")).unwrap_err();
            assert!(
                matches!(e, BeneathError::Escapes { .. }),
                "{resolver:?}: {e}"
            );
            assert!(b.list(Path::new("missing")).unwrap_err().is_not_found());
        }
    }

    #[test]
    fn user_files_follow_links_but_must_be_regular_and_small() {
        let tmp = tempfile::tempdir().unwrap();
        let t = tmp.path();
        std::fs::write(t.join("real.toml"), "x = 1").unwrap();
        symlink(t.join("real.toml"), t.join("link.toml")).unwrap();
        mkfifo(&t.join("fifo"));
        std::fs::write(t.join("big"), vec![b'x'; 200]).unwrap();
        assert_eq!(read_user_text(&t.join("link.toml"), 100).unwrap(), "x = 1");
        let e = read_user_file(&t.join("fifo"), 100).unwrap_err();
        assert!(
            matches!(e, BeneathError::NotRegular { kind: "a FIFO", .. }),
            "{e}"
        );
        assert!(
            e.to_string()
                .contains(&t.join("fifo").display().to_string()),
            "{e}"
        );
        let e = read_user_file(&t.join("big"), 100).unwrap_err();
        assert!(matches!(e, BeneathError::TooLarge { size: 200, .. }), "{e}");
        assert!(
            read_user_file(&t.join("none"), 100)
                .unwrap_err()
                .is_not_found()
        );
    }

    #[test]
    fn a_project_reader_names_the_full_path_and_refuses_paths_outside() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("ws");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(tmp.path().join("secret"), "MARKER").unwrap();
        symlink("../secret", root.join(".mcp.json")).unwrap();
        let r = Reader::beneath(&root).unwrap();
        let e = r.read_text(&root.join(".mcp.json"), 100).unwrap_err();
        assert!(matches!(e, BeneathError::Escapes { .. }), "{e}");
        assert!(
            e.to_string()
                .contains(&root.join(".mcp.json").display().to_string())
        );
        assert!(e.reason().contains("outside the workspace"));
        let e = r.read_text(&tmp.path().join("secret"), 100).unwrap_err();
        assert!(matches!(e, BeneathError::Escapes { .. }), "{e}");
        assert_eq!(
            Reader::User
                .read_text(&root.join(".mcp.json"), 100)
                .unwrap(),
            "MARKER"
        );
    }
}
