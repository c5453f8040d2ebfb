//! The configuration files keel edits on the user's command (`keel mcp add|remove`, `keel config
//! set`). The user's own (`$KEEL_HOME/config.toml`, a `--config` file) are read and written as
//! they are, links followed. A file inside the workspace (the project's `.keel/config.toml`) is
//! the repository's: it is opened beneath the workspace, so a link in it never leads a read or a
//! write out of it, and it is replaced by a rename within its own directory.

use anyhow::{Context, Result, anyhow};
use keel_host::Host;
use keel_host::config::MAX_CONFIG_FILE_BYTES;
use keel_tools::beneath::{self, Beneath};
use std::path::Path;

/// Where the files are: `$KEEL_HOME` (the user's) and the workspace (the repository's).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Places<'a> {
    home: &'a Path,
    workspace: &'a Path,
}

impl<'a> Places<'a> {
    pub(crate) fn of(host: &'a Host) -> Self {
        Places {
            home: host.home(),
            workspace: host.cwd(),
        }
    }

    /// `file` relative to the workspace when it is inside it and not under `$KEEL_HOME` (which
    /// may sit inside a workspace such as the home directory).
    fn in_workspace<'f>(&self, file: &'f Path) -> Option<&'f Path> {
        if file.starts_with(self.home) {
            return None;
        }
        file.strip_prefix(self.workspace).ok()
    }
}

/// The text of `file`, `None` when it does not exist.
pub(crate) fn read(host: &Host, file: &Path) -> Result<Option<String>> {
    read_in(Places::of(host), file)
}

/// Replace `file` with `text`, making its directory where missing.
pub(crate) fn write(host: &Host, file: &Path, text: &str) -> Result<()> {
    write_in(Places::of(host), file, text)
}

/// Remove `file` (a link is removed itself, never followed); a missing file is not an error.
pub(crate) fn remove(host: &Host, file: &Path) -> Result<()> {
    remove_in(Places::of(host), file)
}

fn read_in(at: Places<'_>, file: &Path) -> Result<Option<String>> {
    let read = match at.in_workspace(file) {
        Some(_) => beneath::Reader::beneath(at.workspace)
            .and_then(|r| r.read_text(file, MAX_CONFIG_FILE_BYTES)),
        None => beneath::read_user_text(file, MAX_CONFIG_FILE_BYTES),
    };
    match read {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(anyhow!("cannot read {}: {}", file.display(), e.reason())),
    }
}

fn write_in(at: Places<'_>, file: &Path, text: &str) -> Result<()> {
    let name = file
        .file_name()
        .ok_or_else(|| anyhow!("{} is not a file name", file.display()))?;
    match at.in_workspace(file) {
        Some(rel) => {
            let parent = rel.parent().unwrap_or(Path::new(""));
            let root = Beneath::open(at.workspace)
                .with_context(|| format!("cannot open {}", at.workspace.display()))?;
            let dir = root
                .create_dir_all(parent)
                .map_err(|e| anyhow!("cannot write {}: {}", file.display(), e.reason()))?;
            dir.replace(name, text.as_bytes(), None)
                .with_context(|| format!("cannot write {}", file.display()))
        }
        None => {
            if let Some(dir) = file.parent() {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("cannot create {}", dir.display()))?;
            }
            std::fs::write(file, text).with_context(|| format!("cannot write {}", file.display()))
        }
    }
}

fn remove_in(at: Places<'_>, file: &Path) -> Result<()> {
    let removed = match at.in_workspace(file) {
        Some(rel) => {
            let (Some(name), parent) = (rel.file_name(), rel.parent().unwrap_or(Path::new("")))
            else {
                return Err(anyhow!("{} is not a file name", file.display()));
            };
            let root = Beneath::open(at.workspace)
                .with_context(|| format!("cannot open {}", at.workspace.display()))?;
            root.open_dir(parent)
                .map_err(|e| match e.is_not_found() {
                    true => std::io::Error::from(std::io::ErrorKind::NotFound),
                    false => std::io::Error::other(e.reason()),
                })
                .and_then(|dir| dir.remove_file(name))
        }
        None => std::fs::remove_file(file),
    };
    match removed {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("cannot remove {}", file.display()))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    struct Dirs {
        _tmp: tempfile::TempDir,
        home: std::path::PathBuf,
        ws: std::path::PathBuf,
        outside: std::path::PathBuf,
    }

    impl Dirs {
        fn new() -> Dirs {
            let tmp = tempfile::tempdir().unwrap();
            let base = tmp.path().canonicalize().unwrap();
            let dirs = Dirs {
                home: base.join("home"),
                ws: base.join("ws"),
                outside: base.join("outside"),
                _tmp: tmp,
            };
            for d in [&dirs.home, &dirs.ws, &dirs.outside] {
                std::fs::create_dir_all(d).unwrap();
            }
            dirs
        }

        fn at(&self) -> Places<'_> {
            Places {
                home: &self.home,
                workspace: &self.ws,
            }
        }

        fn project(&self) -> std::path::PathBuf {
            self.ws.join(".keel/config.toml")
        }
    }

    #[test]
    fn the_projects_file_is_not_read_or_written_through_a_link_out() {
        let d = Dirs::new();
        let victim = d.outside.join("victim.toml");
        std::fs::write(&victim, "model = \"kept\"\n").unwrap();
        std::fs::create_dir_all(d.ws.join(".keel")).unwrap();
        symlink(&victim, d.project()).unwrap();

        let read = read_in(d.at(), &d.project()).unwrap_err();
        assert!(
            format!("{read:#}").contains(".keel/config.toml"),
            "{read:#}"
        );
        // The write replaces the link itself: the file outside is untouched.
        write_in(d.at(), &d.project(), "model = \"new\"\n").unwrap();
        assert_eq!(
            std::fs::read_to_string(&victim).unwrap(),
            "model = \"kept\"\n"
        );
        let meta = std::fs::symlink_metadata(d.project()).unwrap();
        assert!(meta.file_type().is_file());
        assert_eq!(
            std::fs::read_to_string(d.project()).unwrap(),
            "model = \"new\"\n"
        );
    }

    #[test]
    fn a_linked_directory_out_of_the_workspace_is_refused() {
        let d = Dirs::new();
        symlink(&d.outside, d.ws.join(".keel")).unwrap();
        let err = write_in(d.at(), &d.project(), "x = 1\n").unwrap_err();
        assert!(format!("{err:#}").contains(".keel/config.toml"), "{err:#}");
        assert!(!d.outside.join("config.toml").exists());
        std::fs::write(d.outside.join("config.toml"), "x = 2\n").unwrap();
        assert!(read_in(d.at(), &d.project()).is_err());
        assert!(remove_in(d.at(), &d.project()).is_err());
        assert!(d.outside.join("config.toml").exists());
    }

    #[test]
    fn a_missing_file_reads_as_none_and_its_directory_is_made() {
        let d = Dirs::new();
        assert_eq!(read_in(d.at(), &d.project()).unwrap(), None);
        write_in(d.at(), &d.project(), "x = 1\n").unwrap();
        assert_eq!(
            read_in(d.at(), &d.project()).unwrap().as_deref(),
            Some("x = 1\n")
        );
        remove_in(d.at(), &d.project()).unwrap();
        remove_in(d.at(), &d.project()).unwrap();
        assert!(!d.project().exists());
    }

    #[test]
    fn the_users_own_file_is_followed_through_its_link() {
        // $KEEL_HOME/config.toml kept in a dotfiles folder: the user's link is theirs.
        let d = Dirs::new();
        let dotfiles = d.outside.join("keel.toml");
        std::fs::write(&dotfiles, "model = \"a\"\n").unwrap();
        let user = d.home.join("config.toml");
        symlink(&dotfiles, &user).unwrap();
        assert_eq!(
            read_in(d.at(), &user).unwrap().as_deref(),
            Some("model = \"a\"\n")
        );
        write_in(d.at(), &user, "model = \"b\"\n").unwrap();
        assert_eq!(
            std::fs::read_to_string(&dotfiles).unwrap(),
            "model = \"b\"\n"
        );
    }
}
