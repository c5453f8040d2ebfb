//! A task's own workspace: a copy of a template directory, or a git worktree (a clone for a
//! URL), made under the batch's out dir as `work/<id>`. git is keel's hardened git
//! ([`keel_tools::git`]): the repository's hooks (`post-checkout`), fsmonitor and drivers do
//! not run.

use crate::tasks::Workspace;
use keel_tools::git::{Git, GitError};
use std::path::{Path, PathBuf};

/// Why a task's workspace could not be made (each names the workspace).
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    /// The template directory is not there.
    #[error("workspace {} does not exist", .0.display())]
    Missing(PathBuf),
    /// The template is not a directory.
    #[error("workspace {} is not a directory", .0.display())]
    NotADirectory(PathBuf),
    /// Copying the template failed.
    #[error("cannot copy workspace {}: {error}", src.display())]
    Copy {
        /// The template.
        src: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// The local repository is not there.
    #[error("workspace repository {0} does not exist")]
    NoRepository(String),
    /// git could not make the worktree or clone.
    #[error("workspace {repo} at {reference}: {error}")]
    Git {
        /// The repository (path or URL).
        repo: String,
        /// The ref asked for.
        reference: String,
        /// What went wrong.
        error: GitCommandError,
    },
}

/// Why one `git` command failed.
#[derive(Debug, thiserror::Error)]
pub enum GitCommandError {
    /// The hardened command could not be prepared.
    #[error(transparent)]
    Prepare(GitError),
    /// git could not be run.
    #[error("cannot run git: {0}")]
    Run(std::io::Error),
    /// git ran and failed.
    #[error("git {command} failed: {stderr}")]
    Failed {
        /// Its subcommand (`worktree`, `clone`, `checkout`).
        command: String,
        /// What it said.
        stderr: String,
    },
}

/// Make `dest` the task's fresh workspace (anything left there by an earlier attempt that
/// never started a session is removed first). The error names the workspace.
pub fn prepare(spec: &Workspace, dest: &Path) -> Result<(), WorkspaceError> {
    remove_stale(spec, dest);
    match spec {
        Workspace::Copy(src) => {
            if !src.exists() {
                return Err(WorkspaceError::Missing(src.clone()));
            }
            if !src.is_dir() {
                return Err(WorkspaceError::NotADirectory(src.clone()));
            }
            copy_dir(src, dest).map_err(|error| WorkspaceError::Copy {
                src: src.clone(),
                error,
            })
        }
        Workspace::Git { repo, reference } => {
            let local = Path::new(repo);
            if local.is_absolute() && !local.exists() {
                return Err(WorkspaceError::NoRepository(repo.clone()));
            }
            let failed = |error| WorkspaceError::Git {
                repo: repo.clone(),
                reference: reference.clone(),
                error,
            };
            if local.is_absolute() {
                git(
                    local,
                    &[
                        "worktree",
                        "add",
                        "--quiet",
                        "--detach",
                        &dest.to_string_lossy(),
                        reference,
                    ],
                )
                .map_err(failed)
            } else {
                // `--`: a repository that looks like an option (`--upload-pack=…`) is not one.
                git(
                    Path::new("."),
                    &["clone", "--quiet", "--", repo, &dest.to_string_lossy()],
                )
                .and_then(|()| git(dest, &["checkout", "--quiet", "--detach", reference]))
                .map_err(failed)
            }
        }
    }
}

/// Remove what an earlier attempt left at `dest` (a worktree is unregistered too).
fn remove_stale(spec: &Workspace, dest: &Path) {
    if !dest.exists() {
        return;
    }
    let _ = std::fs::remove_dir_all(dest);
    if let Workspace::Git { repo, .. } = spec
        && Path::new(repo).is_absolute()
    {
        let _ = git(Path::new(repo), &["worktree", "prune"]);
    }
}

/// Run `git ARGS` in `dir` (`.`: keel's own directory).
fn git(dir: &Path, args: &[&str]) -> Result<(), GitCommandError> {
    let out = Git::new(dir)
        .args(args)
        .std_command()
        .map_err(GitCommandError::Prepare)?
        .output()
        .map_err(GitCommandError::Run)?;
    if out.status.success() {
        Ok(())
    } else {
        Err(GitCommandError::Failed {
            command: args
                .iter()
                .find(|a| matches!(**a, "worktree" | "clone" | "checkout"))
                .unwrap_or(&"command")
                .to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        })
    }
}

/// Copy a directory tree: files (with their permissions), directories, symbolic links as links.
fn copy_dir(src: &Path, dest: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dest)?;
    for entry in std::fs::read_dir(src)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let to = dest.join(entry.file_name());
        if kind.is_dir() {
            copy_dir(&entry.path(), &to)?;
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(entry.path())?, &to)?;
        } else {
            std::fs::copy(entry.path(), &to)?;
        }
    }
    Ok(())
}
