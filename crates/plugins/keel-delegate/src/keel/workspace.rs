//! Git for the keel and acp providers: the isolated worktree a write-mode delegate works in
//! and the patch it leaves, and the pinned change a review reads. Every git command is keel's
//! hardened git ([`keel_tools::git`]: none of the repository's hooks, fsmonitor, drivers or
//! helpers run; the reading ones read-only confined), run by the subprocess service.

use crate::seam::{DelegateMode, RunStatus};
use crate::table::Ending;
use keel_tools::git::Git;
use keel_tools::subprocess::{SubprocessError, SubprocessService};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Bytes of a diff put into a review prompt; a longer change is named by its command instead.
const MAX_REVIEW_DIFF: usize = 200 * 1024;

/// A git command that did not succeed; the message names the command.
#[derive(Debug, thiserror::Error)]
pub(crate) enum GitError {
    /// It could not be prepared (the repository's configuration could not be read).
    #[error("git {command}: {error}")]
    Prepare {
        /// Its arguments, joined by spaces.
        command: String,
        /// What reading the configuration said.
        error: keel_tools::git::GitError,
    },
    /// It could not be run (spawn failure, timeout, cancellation).
    #[error("git {command}: {error}")]
    Run {
        /// Its arguments, joined by spaces.
        command: String,
        /// What the subprocess service said.
        error: SubprocessError,
    },
    /// It exited unsuccessfully.
    #[error("git {command} failed: {stderr}")]
    Failed {
        /// Its arguments, joined by spaces.
        command: String,
        /// Its stderr, trimmed.
        stderr: String,
    },
}

/// Why the isolated worktree or the change to review could not be prepared.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WorkspaceError {
    /// A git command failed.
    #[error(transparent)]
    Git(#[from] GitError),
    /// Write mode outside a git repository.
    #[error(
        "write mode needs a git repository (the delegate works in an isolated worktree and returns a patch): {} is not in one ({error})",
        dir.display()
    )]
    NotARepository {
        /// The caller's directory.
        dir: PathBuf,
        /// What `git rev-parse --show-toplevel` said.
        error: GitError,
    },
    /// The review base names no commit.
    #[error("'{base}' names no commit of the repository at {}", dir.display())]
    NoCommit {
        /// The base as given.
        base: String,
        /// The repository's directory.
        dir: PathBuf,
    },
    /// The working tree does not differ from the base.
    #[error("nothing to review: no change from {base} ({sha})")]
    NothingToReview {
        /// The base as given.
        base: String,
        /// The commit it names.
        sha: String,
    },
}

/// `git ARGS` in `dir` as keel (its identity for the stash commit).
fn keel_git(dir: &Path, args: &[&str]) -> Git {
    Git::new(dir)
        .config("user.name", "keel")
        .config("user.email", "keel@localhost")
        .args(args)
}

/// Run `git ARGS` in `dir`; stdout on success, an error naming the command otherwise.
async fn git(sp: &SubprocessService, dir: &Path, args: &[&str]) -> Result<String, GitError> {
    run(sp, keel_git(dir, args)).await
}

/// [`git`] for a command that only reads: also read-only confined.
async fn git_read(sp: &SubprocessService, dir: &Path, args: &[&str]) -> Result<String, GitError> {
    run(sp, keel_git(dir, args).read_only()).await
}

async fn run(sp: &SubprocessService, git: Git) -> Result<String, GitError> {
    let command = git.describe();
    let spec = git
        .spec(sp)
        .await
        .map_err(|error| GitError::Prepare {
            command: command.clone(),
            error,
        })?
        .timeout(Duration::from_secs(120))
        .cap(MAX_REVIEW_DIFF + 1024)
        .label("delegate-git");
    let out = sp
        .run(spec, &CancellationToken::new())
        .await
        .map_err(|error| GitError::Run {
            command: command.clone(),
            error,
        })?;
    if out.code == Some(0) {
        Ok(out.stdout.text())
    } else {
        Err(GitError::Failed {
            command,
            stderr: out.stderr.text().trim().to_owned(),
        })
    }
}

/// An isolated worktree of the caller's repository.
pub(crate) struct Isolated {
    /// The repository's top level (the caller's).
    top: PathBuf,
    /// The worktree.
    tree: PathBuf,
    /// The commit it starts from (HEAD plus the caller's tracked changes).
    base: String,
    /// Where the delegate runs: the caller's directory inside the worktree.
    pub(crate) cwd: PathBuf,
}

impl Isolated {
    /// Where a delegate in `mode` works: the caller's workspace for a read-only delegate; for
    /// a writing one a new isolated worktree under `job_dir` ([`Isolated::create`]), returned
    /// with it so its changes can be brought back.
    pub(crate) async fn for_mode(
        mode: DelegateMode,
        sp: &SubprocessService,
        caller_cwd: &Path,
        job_dir: &Path,
    ) -> Result<(PathBuf, Option<Isolated>), WorkspaceError> {
        match mode {
            DelegateMode::ReadOnly => Ok((caller_cwd.to_path_buf(), None)),
            DelegateMode::Write => {
                let w = Isolated::create(sp, caller_cwd, job_dir).await?;
                Ok((w.cwd.clone(), Some(w)))
            }
        }
    }

    /// A detached worktree at `job_dir/worktree` holding the caller's committed and tracked
    /// uncommitted state (untracked files stay behind).
    pub(crate) async fn create(
        sp: &SubprocessService,
        caller_cwd: &Path,
        job_dir: &Path,
    ) -> Result<Isolated, WorkspaceError> {
        let top = git_read(sp, caller_cwd, &["rev-parse", "--show-toplevel"])
            .await
            .map_err(|error| WorkspaceError::NotARepository {
                dir: caller_cwd.to_path_buf(),
                error,
            })?;
        let top = PathBuf::from(top.trim());
        let stash = git(sp, &top, &["stash", "create"]).await?;
        let base = match stash.trim() {
            "" => git_read(sp, &top, &["rev-parse", "HEAD"])
                .await?
                .trim()
                .to_owned(),
            s => s.to_owned(),
        };
        let tree = job_dir.join("worktree");
        let tree_s = tree.display().to_string();
        git(sp, &top, &["worktree", "add", "--detach", &tree_s, &base]).await?;
        let rel = caller_cwd
            .canonicalize()
            .ok()
            .and_then(|c| {
                let t = top.canonicalize().ok()?;
                c.strip_prefix(&t).ok().map(Path::to_path_buf)
            })
            .unwrap_or_default();
        Ok(Isolated {
            cwd: tree.join(rel),
            top,
            tree,
            base,
        })
    }

    /// [`Isolated::collect`] into the artifacts of a run that ended as `ending` so far:
    /// changes that cannot be brought back fail a run that had not failed already.
    pub(crate) async fn bring_back(
        self,
        sp: &SubprocessService,
        job_dir: &Path,
        ending: &mut Ending,
    ) {
        ending.artifacts = match self.collect(sp, job_dir).await {
            Ok(found) => Some(found),
            Err(e) => {
                if ending.error.is_none() {
                    ending.error = Some(format!("the delegate's changes were lost: {e}"));
                    ending.status = RunStatus::Failed;
                }
                None
            }
        };
    }

    /// The delegate's changes as `job_dir/changes.patch` (none when it changed nothing) and
    /// the files it touched; the worktree is removed.
    pub(crate) async fn collect(
        self,
        sp: &SubprocessService,
        job_dir: &Path,
    ) -> Result<(Option<String>, Vec<String>), GitError> {
        let found = self.diff(sp, job_dir).await;
        let tree_s = self.tree.display().to_string();
        if git(sp, &self.top, &["worktree", "remove", "--force", &tree_s])
            .await
            .is_err()
        {
            let _ = std::fs::remove_dir_all(&self.tree);
            let _ = git(sp, &self.top, &["worktree", "prune"]).await;
        }
        found
    }

    async fn diff(
        &self,
        sp: &SubprocessService,
        job_dir: &Path,
    ) -> Result<(Option<String>, Vec<String>), GitError> {
        git(sp, &self.tree, &["add", "-A"]).await?;
        let names = git_read(
            sp,
            &self.tree,
            &["diff", "--cached", "--name-only", &self.base],
        )
        .await?;
        let touched: Vec<String> = names.lines().map(str::to_owned).collect();
        if touched.is_empty() {
            return Ok((None, touched));
        }
        let patch = job_dir.join("changes.patch");
        let output = format!("--output={}", patch.display());
        git(
            sp,
            &self.tree,
            &["diff", "--cached", "--binary", &output, &self.base],
        )
        .await?;
        Ok((Some(patch.display().to_string()), touched))
    }
}

/// A change to review.
pub(super) struct Change {
    /// What it is, for the prompt.
    pub(super) what: String,
    /// Its diff.
    pub(super) diff: String,
}

/// The working tree's change against `base`, pinned to the commit `base` names now.
pub(super) async fn pinned_change(
    sp: &SubprocessService,
    cwd: &Path,
    base: &str,
) -> Result<Change, WorkspaceError> {
    let spec = format!("{base}^{{commit}}");
    let sha = git_read(sp, cwd, &["rev-parse", "--verify", "--quiet", &spec])
        .await
        .map_err(|_| WorkspaceError::NoCommit {
            base: base.to_owned(),
            dir: cwd.to_path_buf(),
        })?;
    let sha = sha.trim().to_owned();
    let diff = git_read(sp, cwd, &["diff", &sha]).await?;
    if diff.trim().is_empty() {
        return Err(WorkspaceError::NothingToReview {
            base: base.to_owned(),
            sha,
        });
    }
    Ok(Change {
        what: format!(
            "the change from {base} (commit {sha}) to the working tree (`git diff {sha}`)"
        ),
        diff,
    })
}

/// The review task handed to a read-only delegate.
pub(super) fn review_prompt(change: &Change) -> String {
    let diff = if change.diff.len() > MAX_REVIEW_DIFF {
        let mut end = MAX_REVIEW_DIFF;
        while !change.diff.is_char_boundary(end) {
            end -= 1;
        }
        format!(
            "{}\n[the diff is cut here at {MAX_REVIEW_DIFF} bytes; read the rest yourself]",
            &change.diff[..end]
        )
    } else {
        change.diff.clone()
    };
    format!(
        "Review {what}. Do not change any file.\n\n\
         Report findings first, most severe first: for each, its severity (high, medium or \
         low), the file and line, what is wrong and why it matters, and a concrete fix. Then, in \
         one short paragraph, your overall assessment. If you find nothing wrong, say so plainly. \
         Read the surrounding code where the diff alone does not settle a question.\n\n\
         ```diff\n{diff}\n```",
        what = change.what
    )
}
