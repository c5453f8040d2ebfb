//! Atomic publish of a new file in the store: the bytes are written to a uniquely named temp
//! file beside the destination (owner-only, 0600), fsynced, hard-linked to the final name
//! (never replacing an existing file), and the directory is fsynced so that the new name is
//! durable. Readers see either no file or the whole file, never a part of it.
//!
//! Data flow: callers ([`super::Store::create_at`] for a new session's first batch, keel-cli's
//! `sessions import` for a byte-for-byte copy of a log) hand over the complete bytes;
//! [`publish_file`] owns the temp file from creation to removal.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Why [`publish_file`] failed. Nothing is left at the destination on any of these; a temp
/// file that could not be removed is litter, not damage.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// The temp file could not be created (missing directory, permissions, disk full).
    #[error("cannot create {path}")]
    CreateTemp {
        /// The temp file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Writing the temp file failed.
    #[error("cannot write {path}")]
    Write {
        /// The temp file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Flushing the temp file to disk failed.
    #[error("cannot fsync {path}")]
    SyncFile {
        /// The temp file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The destination already exists: it is never replaced.
    #[error("{path} already exists")]
    Exists {
        /// The destination.
        path: PathBuf,
    },
    /// Linking the temp file to the destination failed for another reason.
    #[error("cannot publish {path}")]
    Link {
        /// The destination.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file is published, but the directory entry could not be made durable.
    #[error("cannot fsync {dir}")]
    SyncDir {
        /// The destination's directory.
        dir: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

/// Publish `bytes` as the new file `dest` atomically (see the module docs): never replacing an
/// existing file, readable and writable by the owner only. `dest`'s directory must exist
/// (create it with [`super::private_dir_all`]). The temp file is
/// `.<tmp_stem>.tmp-<random uuid>` in the same directory, so concurrent publishers never share
/// one; it is removed whether or not the publish succeeds.
pub fn publish_file(dest: &Path, bytes: &[u8], tmp_stem: &str) -> Result<(), PublishError> {
    let dir = match dest.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let tmp = dir.join(format!(".{tmp_stem}.tmp-{}", uuid::Uuid::new_v4()));
    let publish = || -> Result<(), PublishError> {
        let mut f = super::private_file(&tmp).map_err(|source| PublishError::CreateTemp {
            path: tmp.clone(),
            source,
        })?;
        f.write_all(bytes).map_err(|source| PublishError::Write {
            path: tmp.clone(),
            source,
        })?;
        f.sync_all().map_err(|source| PublishError::SyncFile {
            path: tmp.clone(),
            source,
        })?;
        fs::hard_link(&tmp, dest).map_err(|source| match source.kind() {
            std::io::ErrorKind::AlreadyExists => PublishError::Exists {
                path: dest.to_owned(),
            },
            _ => PublishError::Link {
                path: dest.to_owned(),
                source,
            },
        })
    };
    let published = publish();
    // The temp name is private to this publish; failing to remove it leaves litter, not damage.
    let _ = fs::remove_file(&tmp);
    published?;
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|source| PublishError::SyncDir {
            dir: dir.to_owned(),
            source,
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn publishes_whole_owner_only_files_and_never_replaces_one() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("f");
        publish_file(&dest, b"first", "x").unwrap();
        assert_eq!(fs::read(&dest).unwrap(), b"first");
        let mode = fs::metadata(&dest).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        match publish_file(&dest, b"second", "x") {
            Err(PublishError::Exists { path }) => assert_eq!(path, dest),
            other => panic!("{other:?}"),
        }
        assert_eq!(fs::read(&dest).unwrap(), b"first");
        // No temp file is left behind, published or refused.
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["f"]);
    }

    #[test]
    fn a_missing_directory_is_a_temp_file_error() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("missing").join("f");
        match publish_file(&dest, b"x", "x") {
            Err(PublishError::CreateTemp { path, .. }) => {
                assert_eq!(path.parent(), dest.parent());
                assert!(!dest.exists());
            }
            other => panic!("{other:?}"),
        }
    }
}
