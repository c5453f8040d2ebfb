//! A task's own workspace: a copy of a template directory, or a git worktree (a clone for a
//! URL), made under the batch's out dir as `work/<id>`. git is keel's hardened git
//! ([`keel_tools::git`]): the repository's hooks (`post-checkout`), fsmonitor and drivers do
//! not run.

use super::tasks::Workspace;
use keel_tools::git::Git;
use std::path::Path;

/// Make `dest` the task's fresh workspace (anything left there by an earlier attempt that
/// never started a session is removed first). The error names the workspace.
pub fn prepare(spec: &Workspace, dest: &Path) -> Result<(), String> {
    remove_stale(spec, dest);
    match spec {
        Workspace::Copy(src) => {
            if !src.exists() {
                return Err(format!("workspace {} does not exist", src.display()));
            }
            if !src.is_dir() {
                return Err(format!("workspace {} is not a directory", src.display()));
            }
            copy_dir(src, dest).map_err(|e| format!("cannot copy workspace {}: {e}", src.display()))
        }
        Workspace::Git { repo, reference } => {
            let local = Path::new(repo);
            if local.is_absolute() && !local.exists() {
                return Err(format!("workspace repository {repo} does not exist"));
            }
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
                .map_err(|e| format!("workspace {repo} at {reference}: {e}"))
            } else {
                // `--`: a repository that looks like an option (`--upload-pack=…`) is not one.
                git(
                    Path::new("."),
                    &["clone", "--quiet", "--", repo, &dest.to_string_lossy()],
                )
                .and_then(|()| git(dest, &["checkout", "--quiet", "--detach", reference]))
                .map_err(|e| format!("workspace {repo} at {reference}: {e}"))
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
fn git(dir: &Path, args: &[&str]) -> Result<(), String> {
    let out = Git::new(dir)
        .args(args)
        .std_command()
        .map_err(|e| e.to_string())?
        .output()
        .map_err(|e| format!("cannot run git: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "git {} failed: {}",
            args.iter()
                .find(|a| matches!(**a, "worktree" | "clone" | "checkout"))
                .unwrap_or(&"command"),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
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
