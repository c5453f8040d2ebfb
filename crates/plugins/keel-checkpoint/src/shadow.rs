//! The shadow repository: the workspace's states as commits of a git repository keel owns
//! (`$KEEL_HOME/checkpoints/<project key>/git`), never the user's `.git`. The `git` command
//! line runs with its own `--git-dir` and the workspace as `--work-tree`, isolated from the
//! user's git configuration (no system or global config, no hooks, no fsmonitor, no filters),
//! as gemini-cli does.
//!
//! ```text
//! snapshot: walk the workspace (.gitignore respected) ─► stat table equal to the last one? reuse its commit
//!   └► changed paths ─► caps (per file, per checkpoint: over-cap files listed, not stored)
//!        ─► blobs of the changed files, trees of the directories on their paths, a commit:
//!           written in-process (`objects.rs`) ─► publish: refs/keel/checkpoints
//! restore(C): diff now..C ─► checkout C -- changed paths, delete the paths C does not have
//!             (paths the caller keeps are left alone) ─► snapshot
//! ```
//!
//! Why git's format, written in-process, with the `git` CLI for the rest: git's object store
//! keeps only what changed (deduplicated, compressed), and `git checkout` restores files with
//! their modes. A checkpoint is the hot path (before every step that may change files): it
//! writes its blobs, trees and commit itself (SHA-1 + zlib, `objects.rs`), with the walk's stat
//! table as the cache that tells what changed, so it starts no process at all. The `git` CLI
//! (isolated as below) creates the repository, reads the last checkpoint's tree once per
//! process (`ls-tree`), and restores and diffs — rare, and where git's own code is worth
//! having. `gix` would add a large dependency tree to the build for the same result.

use crate::objects::{Dir, Odb, commit_body, hex, parse_hex};
use keel_tools::git::{Git, GitError};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Default largest file stored in a checkpoint (bigger ones are listed as not restorable).
pub const DEFAULT_MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;
/// Default most bytes of changed files stored by one checkpoint.
pub const DEFAULT_MAX_CHECKPOINT_BYTES: u64 = 256 * 1024 * 1024;
/// Default most files a workspace may hold for checkpoints to be taken (a home directory is
/// not a project).
pub const DEFAULT_MAX_FILES: usize = 200_000;
/// The ref that keeps the checkpoints reachable.
const REF: &str = "refs/keel/checkpoints";

/// Why a checkpoint or a restore failed.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// `git` could not be started.
    #[error("cannot run git (checkpoints need it on PATH): {0}")]
    NoGit(std::io::Error),
    /// A git command failed.
    #[error("git {what} failed in the shadow repository {git_dir}: {stderr}")]
    Git {
        /// The command.
        what: String,
        /// The shadow repository.
        git_dir: PathBuf,
        /// What git said.
        stderr: String,
    },
    /// The workspace holds more files than checkpoints are taken of.
    #[error(
        "{path} holds more than {max} files (the checkpoints plugin's max_files): no checkpoint"
    )]
    TooManyFiles {
        /// The workspace.
        path: PathBuf,
        /// The cap.
        max: usize,
    },
    /// The workspace could not be read or written.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// Why it failed.
        source: std::io::Error,
    },
}

/// Size caps of a checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    /// Largest file stored.
    pub max_file_bytes: u64,
    /// Most bytes of changed files one checkpoint stores.
    pub max_checkpoint_bytes: u64,
    /// Most files the workspace may hold (past it, no checkpoint is taken).
    pub max_files: usize,
}

impl Default for Caps {
    fn default() -> Self {
        Caps {
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            max_checkpoint_bytes: DEFAULT_MAX_CHECKPOINT_BYTES,
            max_files: DEFAULT_MAX_FILES,
        }
    }
}

/// What one checkpoint recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// The commit.
    pub commit: String,
    /// Paths stored or removed by this checkpoint (0 when the workspace had not changed).
    pub changed: usize,
    /// The paths that changed since the snapshot before it in this process (every path for
    /// the first one), sorted: stored, removed, or over a cap.
    pub paths: Vec<String>,
    /// Files over a cap: not stored, so a restore leaves them as they are.
    pub not_restorable: Vec<String>,
}

/// What a restore did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Restored {
    /// Files written back (created or changed).
    pub written: Vec<String>,
    /// Files removed (the checkpoint did not have them).
    pub removed: Vec<String>,
    /// Files left alone because the caller keeps them.
    pub kept: Vec<String>,
    /// Of the files written, those the workspace did not have (created again).
    pub created: Vec<String>,
}

/// Size, modification time, inode and mode of a file: what tells whether it changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stat {
    len: u64,
    mtime_ns: i128,
    ino: u64,
    mode: u32,
}

/// The shadow repository of one workspace.
#[derive(Debug)]
pub struct Shadow {
    git_dir: PathBuf,
    work_tree: PathBuf,
    caps: Caps,
    /// The stat table of the last snapshot (`None`: not taken in this process yet).
    stats: Option<BTreeMap<String, Stat>>,
    /// The last snapshot's commit and its tree.
    head: Option<(String, String)>,
    /// Whether the ref points at `head` (it is moved by [`Shadow::publish`]).
    published: bool,
    /// The tree of `head` in memory (read at the first snapshot of the process).
    root: Option<Dir>,
    /// The object store; objects it holds are written out before any `git` command runs.
    odb: RefCell<Odb>,
}

impl Shadow {
    /// The shadow repository at `git_dir` for the workspace `work_tree`, created if missing
    /// (owner-only: it holds copies of the workspace's files).
    pub fn open(git_dir: &Path, work_tree: &Path, caps: Caps) -> Result<Shadow, CheckpointError> {
        let mut shadow = Shadow {
            git_dir: git_dir.to_path_buf(),
            work_tree: work_tree.to_path_buf(),
            caps,
            stats: None,
            head: None,
            published: true,
            root: None,
            odb: RefCell::new(Odb::new(git_dir)),
        };
        if !git_dir.join("HEAD").exists() {
            keel_session::store::private_dir_all(git_dir).map_err(|source| {
                CheckpointError::Io {
                    what: "cannot create the shadow repository",
                    path: git_dir.to_path_buf(),
                    source,
                }
            })?;
            let git_dir = git_dir.to_string_lossy();
            shadow.run(&["init", "--quiet", "--bare", git_dir.as_ref()], None)?;
        }
        shadow.head = shadow
            .run(&["rev-parse", REF, &format!("{REF}^{{tree}}")], None)
            .ok()
            .and_then(|out| {
                let mut lines = out.lines();
                Some((lines.next()?.to_owned(), lines.next()?.to_owned()))
            });
        Ok(shadow)
    }

    /// The shadow repository.
    pub fn git_dir(&self) -> &Path {
        &self.git_dir
    }

    /// A git command on the shadow repository and the workspace: keel's hardened git
    /// ([`keel_tools::git`]: no hooks, fsmonitor, drivers or helpers; the reading commands
    /// read-only confined), isolated from the user's git configuration too.
    fn command(&self, args: &[&str]) -> Result<Command, CheckpointError> {
        let mut git = Git::new(self.git_dir.parent().unwrap_or(&self.git_dir))
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("LC_ALL", "C");
        // `init` creates the repository itself (it takes no work tree).
        if args.first() != Some(&"init") {
            git = git.git_dir(&self.git_dir).work_tree(&self.work_tree);
        }
        for (key, value) in [
            ("core.bare", "false"),
            ("core.autocrlf", "false"),
            ("core.excludesFile", "/dev/null"),
            ("core.symlinks", "true"),
            ("user.name", "keel"),
            ("user.email", "keel@localhost"),
        ] {
            git = git.config(key, value);
        }
        git = git.args(args);
        if matches!(
            args.first(),
            Some(&("rev-parse" | "ls-tree" | "diff" | "cat-file"))
        ) {
            git = git.read_only();
        }
        let mut cmd = git.std_command().map_err(|e| match e {
            GitError::Spawn { source, .. } => CheckpointError::NoGit(source),
            other => CheckpointError::Git {
                what: args.first().copied().unwrap_or("").to_owned(),
                git_dir: self.git_dir.clone(),
                stderr: other.to_string(),
            },
        })?;
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        Ok(cmd)
    }

    /// Run git with `args` (and `input` on its stdin); its stdout.
    fn run(&self, args: &[&str], input: Option<&[u8]>) -> Result<String, CheckpointError> {
        // git reads the objects from disk.
        self.flush()?;
        let mut cmd = self.command(args)?;
        if input.is_some() {
            cmd.stdin(Stdio::piped());
        }
        let mut child = cmd.spawn().map_err(CheckpointError::NoGit)?;
        if let (Some(bytes), Some(mut stdin)) = (input, child.stdin.take()) {
            // A failed write shows as git's own error below.
            let _ = stdin.write_all(bytes);
        }
        let out = child.wait_with_output().map_err(CheckpointError::NoGit)?;
        if !out.status.success() {
            return Err(CheckpointError::Git {
                what: args.first().copied().unwrap_or("").to_owned(),
                git_dir: self.git_dir.clone(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Every file of the workspace that git would see (`.gitignore` respected, `.git`
    /// directories skipped), with its stat.
    fn walk(&self) -> Result<BTreeMap<String, Stat>, CheckpointError> {
        use std::os::unix::fs::MetadataExt;
        let mut out = BTreeMap::new();
        let walker = ignore::WalkBuilder::new(&self.work_tree)
            .hidden(false)
            .ignore(false)
            .parents(false)
            .git_global(false)
            .git_exclude(false)
            .require_git(false)
            .follow_links(false)
            .filter_entry(|e| e.file_name() != ".git")
            .build();
        for entry in walker {
            let entry = match entry {
                Ok(e) => e,
                // A file removed while walking, a directory that cannot be read: what git
                // cannot read either; the next checkpoint sees it again.
                Err(_) => continue,
            };
            let Some(kind) = entry.file_type() else {
                continue;
            };
            // What git records: regular files and symlinks. A FIFO, socket or device is not
            // content (and reading a FIFO would wait for a writer forever).
            if !(kind.is_file() || kind.is_symlink()) {
                continue;
            }
            let Ok(rel) = entry.path().strip_prefix(&self.work_tree) else {
                continue;
            };
            let Some(rel) = rel.to_str() else {
                continue;
            };
            let meta = match entry.path().symlink_metadata() {
                Ok(m) => m,
                Err(_) => continue,
            };
            if out.len() >= self.caps.max_files {
                return Err(CheckpointError::TooManyFiles {
                    path: self.work_tree.clone(),
                    max: self.caps.max_files,
                });
            }
            out.insert(
                rel.to_owned(),
                Stat {
                    len: meta.len(),
                    mtime_ns: i128::from(meta.mtime()) * 1_000_000_000
                        + i128::from(meta.mtime_nsec()),
                    ino: meta.ino(),
                    mode: meta.mode(),
                },
            );
        }
        Ok(out)
    }

    /// Record the workspace now. A workspace unchanged since this process's last snapshot
    /// costs a walk and no git process.
    pub fn snapshot(&mut self, message: &str) -> Result<Snapshot, CheckpointError> {
        if !self.work_tree.is_dir() {
            return Err(CheckpointError::Io {
                what: "the workspace is not a directory any more:",
                path: self.work_tree.clone(),
                source: std::io::Error::from(std::io::ErrorKind::NotFound),
            });
        }
        let now = self.walk()?;
        if let (Some(prev), Some((head, _))) = (&self.stats, &self.head)
            && *prev == now
        {
            return Ok(Snapshot {
                commit: head.clone(),
                changed: 0,
                paths: Vec::new(),
                not_restorable: Vec::new(),
            });
        }
        // The tree of the last checkpoint, read once per process.
        if self.root.is_none() {
            self.root = Some(self.load_root()?);
        }
        // What changed since the last snapshot; everything, and what the last checkpoint has
        // that is gone, when this process has not taken one yet.
        let mut changed: Vec<String> = Vec::new();
        let mut removed: Vec<String> = Vec::new();
        match &self.stats {
            Some(prev) => {
                changed.extend(
                    now.iter()
                        .filter(|(p, s)| prev.get(*p) != Some(s))
                        .map(|(p, _)| p.clone()),
                );
                removed.extend(prev.keys().filter(|p| !now.contains_key(*p)).cloned());
            }
            None => {
                changed.extend(now.keys().cloned());
                let mut had = Vec::new();
                if let Some(root) = &self.root {
                    root.paths("", &mut had);
                }
                removed.extend(had.into_iter().filter(|p| !now.contains_key(p)));
            }
        }
        // The caps: over-cap files (and files that cannot be read) are taken out of the tree,
        // so a restore never writes an old copy of them back.
        let mut not_restorable = Vec::new();
        let mut bytes = 0u64;
        // The first checkpoint after a published one (the first of a turn) is written out at
        // once: the state before a turn survives a crash. Later ones wait for the turn's end
        // (or the next `git` command), so a step costs no new file.
        let write_out = self.published;
        let odb = self.odb.get_mut();
        let root = self.root.get_or_insert_with(Dir::default);
        let beneath = keel_tools::beneath::Beneath::open(&self.work_tree);
        for path in &changed {
            let Some(stat) = now.get(path) else {
                continue;
            };
            if stat.len > self.caps.max_file_bytes
                || bytes.saturating_add(stat.len) > self.caps.max_checkpoint_bytes
            {
                not_restorable.push(path.clone());
                root.remove(path);
                continue;
            }
            let full = self.work_tree.join(path);
            let (mode, body) = if stat.mode & 0o170000 == 0o120000 {
                let target =
                    std::fs::read_link(&full).map(|t| t.into_os_string().into_encoded_bytes());
                (0o120000, target)
            } else {
                let mode = if stat.mode & 0o111 != 0 {
                    0o100755
                } else {
                    0o100644
                };
                // Beneath the work tree, never through a link swapped in on the way, and a
                // regular file only (keel_tools::beneath).
                let body = beneath
                    .as_ref()
                    .map_err(|e| std::io::Error::new(e.kind(), e.to_string()))
                    .and_then(|b| {
                        b.read_regular(Path::new(path), self.caps.max_file_bytes)
                            .map_err(std::io::Error::other)
                    });
                (mode, body)
            };
            match body {
                Ok(body) => {
                    bytes += stat.len;
                    let oid = odb
                        .write("blob", &body)
                        .map_err(|source| CheckpointError::Io {
                            what: "cannot store a checkpoint in",
                            path: self.git_dir.clone(),
                            source,
                        })?;
                    root.insert(path, mode, oid);
                }
                // Gone since the walk: the next checkpoint sees that.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => root.remove(path),
                Err(_) => {
                    not_restorable.push(path.clone());
                    root.remove(path);
                }
            }
        }
        for path in &removed {
            root.remove(path);
        }
        let store_failed = |source| CheckpointError::Io {
            what: "cannot store a checkpoint in",
            path: self.git_dir.clone(),
            source,
        };
        let tree = root.write(odb).map_err(store_failed)?;
        let commit = match &self.head {
            Some((head, head_tree)) if *head_tree == hex(&tree) => head.clone(),
            head => {
                let secs = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                let parent = head.as_ref().map(|(h, _)| h.as_str());
                if let Some(parent) = parent.filter(|p| !odb.has(p)) {
                    return Err(CheckpointError::Git {
                        what: format!("commit (the last checkpoint {parent} is missing)"),
                        git_dir: self.git_dir.clone(),
                        stderr: "the shadow repository is damaged; remove it to start afresh"
                            .to_owned(),
                    });
                }
                let body = commit_body(&tree, parent, secs, message);
                let commit = odb.write("commit", &body).map_err(store_failed)?;
                self.published = false;
                hex(&commit)
            }
        };
        if write_out {
            odb.flush().map_err(store_failed)?;
        }
        let count = changed.len() - not_restorable.len() + removed.len();
        let mut paths = changed;
        paths.extend(removed);
        paths.sort_unstable();
        self.head = Some((commit.clone(), hex(&tree)));
        self.stats = Some(now);
        Ok(Snapshot {
            commit,
            changed: count,
            paths,
            not_restorable,
        })
    }

    /// Write out the objects held in memory.
    fn flush(&self) -> Result<(), CheckpointError> {
        self.odb
            .borrow_mut()
            .flush()
            .map_err(|source| CheckpointError::Io {
                what: "cannot store a checkpoint in",
                path: self.git_dir.clone(),
                source,
            })
    }

    /// The tree of the last checkpoint (empty when there is none), from `git ls-tree`.
    fn load_root(&self) -> Result<Dir, CheckpointError> {
        let mut root = Dir::default();
        let Some((head, _)) = &self.head else {
            return Ok(root);
        };
        let out = self.run(&["ls-tree", "-r", "-z", "--full-tree", head], None)?;
        for line in out.split('\0').filter(|l| !l.is_empty()) {
            // "<mode> <type> <oid>\t<path>"
            let Some((meta, path)) = line.split_once('\t') else {
                continue;
            };
            let mut parts = meta.split(' ');
            let (Some(mode), Some(_), Some(oid)) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            if let (Ok(mode), Some(oid)) = (u32::from_str_radix(mode, 8), parse_hex(oid)) {
                root.insert(path, mode, oid);
            }
        }
        Ok(root)
    }

    /// Point the shadow repository's ref at the last checkpoint, so that `git gc` keeps every
    /// checkpoint (each one's parent is the one before). Checkpoints are written without it (one
    /// `git` process less per step); a turn's end and a rewind publish them.
    pub fn publish(&mut self) -> Result<(), CheckpointError> {
        self.flush()?;
        if let (false, Some((head, _))) = (self.published, &self.head) {
            // The loose ref file, written as `git update-ref` writes it (a temporary file
            // renamed over it), without starting git.
            let path = self.git_dir.join(REF);
            let tmp = path.with_extension(format!("lock-{}", std::process::id()));
            let written = path
                .parent()
                .map_or(Ok(()), std::fs::create_dir_all)
                .and_then(|()| std::fs::write(&tmp, format!("{head}\n")))
                .and_then(|()| std::fs::rename(&tmp, &path));
            written.map_err(|source| CheckpointError::Io {
                what: "cannot record the checkpoints in",
                path: path.clone(),
                source,
            })?;
            self.published = true;
        }
        Ok(())
    }

    /// The paths that differ between two checkpoints.
    pub fn changed_between(&self, a: &str, b: &str) -> Result<Vec<String>, CheckpointError> {
        let out = self.run(&["diff", "--name-only", "--no-renames", "-z", a, b], None)?;
        Ok(out
            .split('\0')
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
            .collect())
    }

    /// Whether `commit` is a checkpoint this repository holds.
    pub fn has(&self, commit: &str) -> bool {
        self.run(&["cat-file", "-e", &format!("{commit}^{{commit}}")], None)
            .is_ok()
    }

    /// Return the workspace to checkpoint `to`, from the state recorded as `from` (take it
    /// with [`Shadow::snapshot`] first): files `to` has are written back, files it does not
    /// have are removed; paths in `keep` are left alone. Files over a cap when `to` was taken
    /// are not in it and are left alone too.
    pub fn restore(
        &mut self,
        from: &str,
        to: &str,
        keep: &HashSet<String>,
    ) -> Result<Restored, CheckpointError> {
        let out = self.run(
            &["diff", "--name-status", "--no-renames", "-z", from, to],
            None,
        )?;
        let mut fields = out.split('\0').filter(|f| !f.is_empty());
        let mut report = Restored::default();
        let (mut write, mut remove) = (Vec::new(), Vec::new());
        // A kept file where a written path needs a directory (or kept files under a path to
        // be written as a file) would be replaced by git: those paths are kept as they are.
        let in_the_way = |path: &str| {
            keep.iter().any(|k| {
                path.strip_prefix(k.as_str())
                    .is_some_and(|r| r.starts_with('/'))
                    || k.strip_prefix(path).is_some_and(|r| r.starts_with('/'))
            })
        };
        while let (Some(status), Some(path)) = (fields.next(), fields.next()) {
            if keep.contains(path) || (!status.starts_with('D') && in_the_way(path)) {
                report.kept.push(path.to_owned());
            } else if status.starts_with('D') {
                remove.push(path.to_owned());
            } else {
                if status.starts_with('A') {
                    report.created.push(path.to_owned());
                }
                write.push(path.to_owned());
            }
        }
        // Removed beneath the work tree from its directories' descriptors: a directory on the
        // way swapped for a link out of the workspace fails the removal instead of following.
        let beneath = keel_tools::beneath::Beneath::open(&self.work_tree).map_err(|source| {
            CheckpointError::Io {
                what: "cannot open",
                path: self.work_tree.clone(),
                source,
            }
        })?;
        for path in &remove {
            let full = self.work_tree.join(path);
            let rel = Path::new(path);
            let (parent, name) = (rel.parent().unwrap_or(Path::new("")), rel.file_name());
            let removed = match name {
                Some(name) => beneath
                    .open_dir(parent)
                    .map_err(std::io::Error::other)
                    .and_then(|d| d.remove_file(name)),
                None => Ok(()),
            };
            match removed {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e)
                    if e.get_ref()
                        .and_then(|i| i.downcast_ref::<keel_tools::beneath::BeneathError>())
                        .is_some_and(keel_tools::beneath::BeneathError::is_not_found) => {}
                Err(source) => {
                    return Err(CheckpointError::Io {
                        what: "cannot remove",
                        path: full,
                        source,
                    });
                }
            }
            // Directories the removal left empty go too (git does not track directories).
            let mut dir = parent;
            while let (Some(up), Some(name)) = (dir.parent(), dir.file_name()) {
                let gone = beneath
                    .open_dir(up)
                    .map_err(std::io::Error::other)
                    .and_then(|d| d.remove_dir(name));
                if gone.is_err() {
                    break;
                }
                dir = up;
            }
        }
        if !write.is_empty() {
            let mut list = Vec::new();
            for p in &write {
                list.extend_from_slice(p.as_bytes());
                list.push(0);
            }
            self.run(
                &[
                    "checkout",
                    to,
                    "--pathspec-from-file=-",
                    "--pathspec-file-nul",
                ],
                Some(&list),
            )?;
        }
        report.written = write;
        report.removed = remove;
        // The next snapshot reads the workspace afresh.
        self.stats = None;
        Ok(report)
    }
}

impl Drop for Shadow {
    fn drop(&mut self) {
        // Checkpoints not written out yet (a turn cut short, a process ending): best effort.
        let _ = self.odb.get_mut().flush();
    }
}
