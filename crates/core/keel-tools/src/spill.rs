//! Spill of large outputs to private files.
//!
//! A text result larger than [`SpillConfig::threshold`] bytes is written whole to a new file
//! (mode 0600) in a private directory (mode 0700) and replaced, for the model, by its head, its
//! tail and the file's path, which the `read` tool can open (the pipeline makes the spill
//! directory readable).

use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Default spill threshold, in bytes.
pub const DEFAULT_SPILL_THRESHOLD: usize = 50_000;

/// Where and when outputs are spilled.
#[derive(Debug, Clone)]
pub struct SpillConfig {
    /// Private directory holding spill files (created 0700 on first use).
    pub dir: PathBuf,
    /// Text longer than this (bytes) is spilled.
    pub threshold: usize,
    /// Bytes of the start kept in the replacement text.
    pub head: usize,
    /// Bytes of the end kept in the replacement text.
    pub tail: usize,
}

impl SpillConfig {
    /// Defaults (50,000-byte threshold, 8,000-byte head and tail) with files under `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        SpillConfig {
            dir: dir.into(),
            threshold: DEFAULT_SPILL_THRESHOLD,
            head: 8_000,
            tail: 8_000,
        }
    }

    /// Create the spill directory (0700) if needed.
    pub fn ensure_dir(&self) -> io::Result<()> {
        ensure_private_dir(&self.dir)
    }

    /// Save `text` whole in a new private file of the spill directory (created if needed).
    pub fn save(&self, text: &str, label: &str) -> io::Result<PathBuf> {
        self.ensure_dir()?;
        let (mut file, path) = create_private_file(&self.dir, label)?;
        file.write_all(text.as_bytes())?;
        file.flush()?;
        Ok(path)
    }

    /// If `text` is over the threshold, save it and return the replacement text and the file.
    pub fn spill_text(&self, text: &str, label: &str) -> io::Result<Option<(String, PathBuf)>> {
        if text.len() <= self.threshold {
            return Ok(None);
        }
        let path = self.save(text, label)?;
        let head = &text[..text.floor_char_boundary(self.head)];
        let tail_start = text.ceil_char_boundary(text.len().saturating_sub(self.tail));
        let tail = &text[tail_start.max(head.len())..];
        let omitted = text.len() - head.len() - tail.len();
        let replaced = format!(
            "{head}\n\n[… {omitted} bytes omitted; the full output ({} bytes) is saved in {} — \
             read it with the read tool (offset/limit) or grep it …]\n\n{tail}",
            text.len(),
            path.display()
        );
        Ok(Some((replaced, path)))
    }
}

/// Create `dir` (and parents) and make it private (0700). The directory itself must not be a
/// symlink (a confined command can write keel's temp directory and could plant one there to
/// redirect spill files or the chmod): it is opened with `O_NOFOLLOW` and changed through that
/// descriptor.
pub fn ensure_private_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_DIRECTORY)
        .open(dir)
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("{} is not a directory of keel's own: {e}", dir.display()),
            )
        })?;
    opened.set_permissions(std::fs::Permissions::from_mode(0o700))
}

/// A new uniquely named file (mode 0600) in the private directory `dir`.
pub fn create_private_file(dir: &Path, label: &str) -> io::Result<(std::fs::File, PathBuf)> {
    ensure_private_dir(dir)?;
    let prefix = format!("keel-{}-", sanitize(label));
    let named = tempfile::Builder::new()
        .prefix(&prefix)
        .suffix(".txt")
        .tempfile_in(dir)?;
    let (file, path) = named.keep().map_err(|e| e.error)?;
    Ok((file, path))
}

fn sanitize(label: &str) -> String {
    label
        .chars()
        .take(32)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn small_text_is_not_spilled() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let cfg = SpillConfig::new(dir.path().join("spill"));
        assert!(cfg.spill_text("short", "t")?.is_none());
        Ok(())
    }

    #[test]
    fn large_text_keeps_head_tail_and_a_private_file() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let mut cfg = SpillConfig::new(dir.path().join("spill"));
        cfg.threshold = 100;
        cfg.head = 10;
        cfg.tail = 10;
        let text: String = "é".repeat(30) + &"x".repeat(100) + "END";
        let Some((replaced, path)) = cfg.spill_text(&text, "my tool")? else {
            panic!("expected a spill");
        };
        assert_eq!(std::fs::read_to_string(&path)?, text);
        assert_eq!(
            std::fs::metadata(&path)?.permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(
            std::fs::metadata(&cfg.dir)?.permissions().mode() & 0o777,
            0o700
        );
        assert!(replaced.starts_with("ééééé\n"), "{replaced}");
        assert!(replaced.ends_with("xxxxxxxEND"), "{replaced}");
        assert!(replaced.contains(&path.display().to_string()));
        Ok(())
    }

    #[test]
    fn a_spill_directory_swapped_for_a_link_is_refused_and_its_target_untouched() {
        let tmp = tempfile::tempdir().unwrap();
        let elsewhere = tmp.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::fs::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o755)).unwrap();
        let dir = tmp.path().join("spill");
        std::os::unix::fs::symlink(&elsewhere, &dir).unwrap();
        assert!(create_private_file(&dir, "bash").is_err());
        let mode = std::fs::metadata(&elsewhere).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o755, "the link's target was not chmodded");
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    }
}
