//! Workspace roots, the sandbox mode, and path resolution for file tools.
//!
//! A model-supplied path is joined to the working directory, normalised lexically (`.`/`..`),
//! then resolved on disk: the deepest existing ancestor is canonicalised (following symlinks,
//! dangling ones included) and the rest appended. Unless the sandbox is
//! [`SandboxMode::FullAccess`], the real path must lie under a workspace root (or, for reads,
//! under an extra readable directory such as the spill directory), so `..`, absolute paths and
//! symlinks pointing out are all refused the same way.

use crate::beneath::{Beneath, BeneathError};
use crate::error::ToolError;
use crate::observed::Observed;
use crate::protected;
use crate::subprocess::confine::{ConfineSpec, Confinement};
use std::fmt;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, OnceLock};

/// How far file tools and commands may reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SandboxMode {
    /// File tools may only read inside the workspace; writes are refused, commands need approval.
    ReadOnly,
    /// File tools may read and write inside the workspace roots only.
    #[default]
    WorkspaceWrite,
    /// File tools may reach any path.
    FullAccess,
}

impl SandboxMode {
    /// Spelling used in config, flags and `sandbox/mode` events.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::FullAccess => "full-access",
        }
    }

    /// The stricter of `self` and `other`: `read-only` over `workspace-write` over
    /// `full-access` (`self` when they are the same).
    pub fn stricter(self, other: SandboxMode) -> SandboxMode {
        let rank = |m: SandboxMode| match m {
            SandboxMode::FullAccess => 0,
            SandboxMode::WorkspaceWrite => 1,
            SandboxMode::ReadOnly => 2,
        };
        if rank(other) > rank(self) {
            other
        } else {
            self
        }
    }
}

impl fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A sandbox mode name that is not one of `read-only`, `workspace-write`, `full-access`.
#[derive(Debug, thiserror::Error)]
#[error("unknown sandbox mode {0:?}; expected read-only, workspace-write or full-access")]
pub struct UnknownSandboxMode(pub String);

impl FromStr for SandboxMode {
    type Err = UnknownSandboxMode;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "read-only" => Ok(SandboxMode::ReadOnly),
            "workspace-write" => Ok(SandboxMode::WorkspaceWrite),
            "full-access" => Ok(SandboxMode::FullAccess),
            other => Err(UnknownSandboxMode(other.to_owned())),
        }
    }
}

/// What a file tool intends to do with a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read (or list, or run a command in).
    Read,
    /// Create, overwrite or modify.
    Write,
}

/// Workspace roots, working directory and sandbox mode.
#[derive(Debug, Clone)]
pub struct Workspace {
    roots: Vec<PathBuf>,
    readable: Vec<PathBuf>,
    writable: Vec<PathBuf>,
    /// The working directory; `working_directory {cd}` moves it during a session.
    cwd: Cwd,
    sandbox: SandboxMode,
    network: bool,
    temp: PathBuf,
    /// Built on first use from the fields above; reset when one of them changes.
    confinement: OnceLock<Arc<Confinement>>,
    /// The editor's view of text files, when a front end offers one.
    text_files: Option<EditorFiles>,
    /// What the model has read of each file (the read-before-write rule).
    observed: Observed,
}

/// An editor's view of text files (ACP's `fs/read_text_file` and `fs/write_text_file`): a file
/// it has open is read with its unsaved changes and written through its buffer, so the person
/// sees the change in the editor at once. `read`, `edit` and `write` go through it when the
/// workspace has one ([`Workspace::set_text_files`]), after the sandbox has resolved the path.
#[async_trait::async_trait]
pub trait TextFiles: Send + Sync {
    /// The text of `path` (absolute, resolved) as the editor has it; `Ok(None)` leaves the
    /// read to the disk.
    async fn read(&self, path: &Path) -> Result<Option<String>, TextFilesError>;

    /// Write `text` to `path` through the editor; `Ok(false)` leaves the write to the disk.
    async fn write(&self, path: &Path, text: &str) -> Result<bool, TextFilesError>;
}

/// Why the editor could not read or write a file (the tool's error then names the file).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TextFilesError {
    /// The editor's connection cannot take requests for this session yet (or any more).
    #[error("{0}")]
    Unavailable(String),
    /// The editor answered the request with an error.
    #[error("the client answered {method} with: {message}")]
    Refused {
        /// The request (`fs/read_text_file`, `fs/write_text_file`).
        method: &'static str,
        /// The editor's message.
        message: String,
    },
}

/// A shared [`TextFiles`] (the workspace is `Debug` and `Clone`).
#[derive(Clone)]
struct EditorFiles(Arc<dyn TextFiles>);

/// The working directory cell. A clone (a subagent's workspace, one escalated call's) starts
/// where this one is and moves on its own.
#[derive(Debug)]
struct Cwd(std::sync::RwLock<PathBuf>);

impl Cwd {
    fn new(dir: PathBuf) -> Self {
        Cwd(std::sync::RwLock::new(dir))
    }

    fn get(&self) -> PathBuf {
        match self.0.read() {
            Ok(dir) => dir.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    fn set(&self, dir: PathBuf) {
        match self.0.write() {
            Ok(mut cell) => *cell = dir,
            Err(poisoned) => *poisoned.into_inner() = dir,
        }
    }
}

impl Clone for Cwd {
    fn clone(&self) -> Self {
        Cwd::new(self.get())
    }
}

impl fmt::Debug for EditorFiles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TextFiles")
    }
}

impl Workspace {
    /// A workspace with one root, which is also the working directory. The root must exist.
    pub fn new(root: impl AsRef<Path>, sandbox: SandboxMode) -> io::Result<Self> {
        let root = std::fs::canonicalize(root.as_ref())?;
        Ok(Workspace {
            roots: vec![root.clone()],
            readable: Vec::new(),
            writable: Vec::new(),
            cwd: Cwd::new(root),
            sandbox,
            network: true,
            temp: std::fs::canonicalize(std::env::temp_dir())
                .unwrap_or_else(|_| std::env::temp_dir()),
            confinement: OnceLock::new(),
            text_files: None,
            observed: Observed::default(),
        })
    }

    /// This workspace in sandbox `mode` (one call an approved escalation runs in): the same
    /// roots, the same record of reads, a confinement of its own.
    pub fn with_sandbox(&self, mode: SandboxMode) -> Workspace {
        let mut wider = self.clone();
        wider.sandbox = mode;
        wider.confinement = OnceLock::new();
        wider
    }

    /// What the model has read of each file, shared by this workspace's clones.
    pub fn observed(&self) -> &Observed {
        &self.observed
    }

    /// Check writes against reads (`true`, the default) or not (`tools.read_before_write`).
    pub fn set_read_before_write(&mut self, on: bool) {
        self.observed.set_enforced(on);
    }

    /// Read and write text files through `files` (an editor's buffers) from now on.
    pub fn set_text_files(&mut self, files: Arc<dyn TextFiles>) {
        self.text_files = Some(EditorFiles(files));
    }

    /// The editor's view of text files, if any.
    pub fn text_files(&self) -> Option<&dyn TextFiles> {
        self.text_files.as_ref().map(|f| &*f.0)
    }

    /// Add another root (must exist).
    pub fn add_root(&mut self, root: impl AsRef<Path>) -> io::Result<()> {
        self.roots.push(std::fs::canonicalize(root.as_ref())?);
        self.confinement = OnceLock::new();
        Ok(())
    }

    /// Allow writes (by file tools and commands) under `dir` as well, outside the roots:
    /// `sandbox.writable_roots`. Must exist.
    pub fn add_writable(&mut self, dir: impl AsRef<Path>) -> io::Result<()> {
        self.writable.push(std::fs::canonicalize(dir.as_ref())?);
        self.confinement = OnceLock::new();
        Ok(())
    }

    /// Whether commands may use the network (`sandbox.network`; default true).
    pub fn set_network(&mut self, allowed: bool) {
        self.network = allowed;
        self.confinement = OnceLock::new();
    }

    /// The temp directory commands may write to, and get as `TMPDIR` (default: keel's own,
    /// `$TMPDIR` or `/tmp`). Must exist.
    pub fn set_temp_dir(&mut self, dir: impl AsRef<Path>) -> io::Result<()> {
        self.temp = std::fs::canonicalize(dir.as_ref())?;
        self.confinement = OnceLock::new();
        Ok(())
    }

    /// The temp directory commands may write to.
    pub fn temp_dir(&self) -> &Path {
        &self.temp
    }

    /// Whether commands may use the network.
    pub fn network(&self) -> bool {
        self.network
    }

    /// Extra writable roots.
    pub fn writable(&self) -> &[PathBuf] {
        &self.writable
    }

    /// The OS confinement commands run in (built once, on first use).
    pub fn confinement(&self) -> Arc<Confinement> {
        self.confinement
            .get_or_init(|| {
                Arc::new(Confinement::prepare(&ConfineSpec {
                    mode: self.sandbox,
                    roots: &self.roots,
                    extra_writable: &self.writable,
                    temp: &self.temp,
                    network: self.network,
                }))
            })
            .clone()
    }

    /// Allow reads (never writes) under `dir`, e.g. the spill directory. Must exist.
    pub fn add_readable(&mut self, dir: impl AsRef<Path>) -> io::Result<()> {
        self.readable.push(std::fs::canonicalize(dir.as_ref())?);
        Ok(())
    }

    /// Set the working directory relative paths are resolved against (must exist).
    pub fn set_cwd(&mut self, cwd: impl AsRef<Path>) -> io::Result<()> {
        self.cwd = Cwd::new(std::fs::canonicalize(cwd.as_ref())?);
        Ok(())
    }

    /// Enter directory `raw` (resolved like any path the model gives, so the sandbox decides
    /// where it may go) for the rest of the session: relative paths, `bash` and `glob` start
    /// there from the next call. Existing shells and running processes keep theirs. Returns the
    /// new working directory.
    pub fn enter(&self, raw: &str) -> Result<PathBuf, ToolError> {
        let dir = self.resolve(raw, Access::Read)?;
        if !dir.is_dir() {
            return Err(ToolError::InvalidArgs(format!(
                "'{raw}' is not a directory"
            )));
        }
        self.cwd.set(dir.clone());
        Ok(dir)
    }

    /// Workspace roots (canonical).
    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    /// Working directory (canonical).
    pub fn cwd(&self) -> PathBuf {
        self.cwd.get()
    }

    /// Sandbox mode in force.
    pub fn sandbox(&self) -> SandboxMode {
        self.sandbox
    }

    /// Resolve a model-supplied path for `access`, enforcing the sandbox. Returns the real
    /// (symlink-free) absolute path.
    pub fn resolve(&self, raw: &str, access: Access) -> Result<PathBuf, ToolError> {
        if raw.is_empty() {
            return Err(ToolError::InvalidArgs("path is empty".into()));
        }
        if access == Access::Write && self.sandbox == SandboxMode::ReadOnly {
            return Err(ToolError::Denied(format!(
                "cannot modify '{raw}': the sandbox is read-only; file changes are not allowed \
                 in this session"
            )));
        }
        let joined = normalize(&self.cwd.get().join(raw));
        let real = real_path(&joined).map_err(|e| ToolError::io("resolving", &joined, e))?;
        if self.sandbox == SandboxMode::FullAccess {
            return Ok(real);
        }
        if self.allows(&real, access) {
            if access == Access::Write
                && let Some(p) = self.protected(&real)
            {
                return Err(ToolError::Denied(protected::refusal(raw, p)));
            }
            return Ok(real);
        }
        let roots: Vec<String> = self.roots.iter().map(|r| r.display().to_string()).collect();
        let verb = match access {
            Access::Read => "reading",
            Access::Write => "writing",
        };
        Err(ToolError::Denied(format!(
            "{verb} '{raw}' is not allowed: it resolves to {}, outside the workspace ({}); file \
             tools are confined to the workspace in {} mode. Use a path inside the workspace.",
            real.display(),
            roots.join(", "),
            self.sandbox
        )))
    }

    /// The protected entry (`.git`, `.mcp.json` …) `real` lies in, if any, judged from the
    /// workspace root or writable directory that holds it ([`crate::protected`]).
    pub fn protected(&self, real: &Path) -> Option<&'static protected::Protected> {
        self.roots
            .iter()
            .chain(&self.writable)
            .filter_map(|base| real.strip_prefix(base).ok())
            .find_map(protected::protected_component)
    }

    /// Where the resolved path `real` is opened for `access`: beneath the workspace root,
    /// writable or readable directory that holds it (the longest), never through a link out of
    /// that directory ([`crate::beneath`]); anywhere in `full-access`.
    pub fn place(&self, real: &Path, access: Access) -> Placed {
        let readable = match access {
            Access::Read => self.readable.as_slice(),
            Access::Write => &[],
        };
        let base = self
            .roots
            .iter()
            .chain(&self.writable)
            .chain(readable)
            .filter(|base| real.starts_with(base))
            .max_by_key(|base| base.as_os_str().len());
        match base {
            Some(base) => Placed::Beneath {
                base: base.clone(),
                rel: real.strip_prefix(base).unwrap_or(real).to_path_buf(),
            },
            None => Placed::Anywhere(real.to_path_buf()),
        }
    }

    fn allows(&self, real: &Path, access: Access) -> bool {
        self.roots.iter().any(|r| real.starts_with(r))
            || self.writable.iter().any(|r| real.starts_with(r))
            || (access == Access::Read && self.readable.iter().any(|r| real.starts_with(r)))
    }

    /// A path as shown to the model: relative to the working directory when under it.
    pub fn display(&self, path: &Path) -> String {
        match path.strip_prefix(self.cwd.get()) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_owned(),
            Ok(rel) => rel.display().to_string(),
            Err(_) => path.display().to_string(),
        }
    }
}

/// A resolved path and how it is opened ([`Workspace::place`]): every read and write of a file
/// tool goes through one, so a link swapped in after the path was checked cannot redirect it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placed {
    /// Opened beneath `base` (a workspace root, or a writable or readable directory).
    Beneath {
        /// The directory.
        base: PathBuf,
        /// The path under it.
        rel: PathBuf,
    },
    /// `full-access` outside every workspace directory: opened as named.
    Anywhere(PathBuf),
}

impl Placed {
    /// The whole path.
    pub fn path(&self) -> PathBuf {
        match self {
            Placed::Beneath { base, rel } => base.join(rel),
            Placed::Anywhere(p) => p.clone(),
        }
    }

    /// Open for reading: a regular file or a directory (a FIFO or device is refused, so a
    /// read never blocks on one).
    pub fn open_read(&self) -> Result<std::fs::File, ToolError> {
        let path = self.path();
        let file = match self {
            Placed::Beneath { base, rel } => {
                let flags = libc::O_RDONLY | libc::O_NOCTTY | libc::O_NONBLOCK;
                let fd = Beneath::open(base)
                    .map_err(|e| ToolError::io("opening", base, e))
                    .and_then(|b| b.open_raw(rel, flags).map_err(|e| beneath_error(&path, e)))?;
                std::fs::File::from(fd)
            }
            Placed::Anywhere(p) => {
                use std::os::unix::fs::OpenOptionsExt;
                std::fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
                    .open(p)
                    .map_err(|e| ToolError::io("reading", p, e))?
            }
        };
        let md = file
            .metadata()
            .map_err(|e| ToolError::io("reading", &path, e))?;
        if !md.is_file() && !md.is_dir() {
            return Err(ToolError::Failed(format!(
                "'{}' is not a regular file (a FIFO, socket or device); it was not read",
                path.display()
            )));
        }
        set_blocking(&file);
        Ok(file)
    }

    /// The whole content of a regular file.
    pub fn read_bytes(&self) -> Result<Vec<u8>, ToolError> {
        use std::io::Read;
        let path = self.path();
        let mut file = self.open_read()?;
        let mut out = Vec::new();
        file.read_to_end(&mut out)
            .map_err(|e| ToolError::io("reading", &path, e))?;
        Ok(out)
    }

    /// The parent directory, made where missing (beneath the workspace directory, one
    /// component at a time: [`Beneath::create_dir_all`]).
    pub fn create_parent(&self) -> Result<Beneath, ToolError> {
        let path = self.path();
        let parent = path.parent().unwrap_or(Path::new("/"));
        match self {
            Placed::Beneath { base, rel } => Beneath::open(base)
                .map_err(|e| ToolError::io("opening", base, e))?
                .create_dir_all(rel.parent().unwrap_or(Path::new("")))
                .map_err(|e| beneath_error(parent, e)),
            Placed::Anywhere(_) => {
                std::fs::create_dir_all(parent)
                    .map_err(|e| ToolError::io("creating directory", parent, e))?;
                Beneath::open(parent).map_err(|e| ToolError::io("opening", parent, e))
            }
        }
    }

    /// Replace (or create) the file with `bytes`, making missing parent directories: written to
    /// a fresh file in the parent directory and renamed over the name within it, so a symlink
    /// there is replaced, never followed ([`Beneath::replace`]).
    pub fn write(&self, bytes: &[u8]) -> Result<(), ToolError> {
        let path = self.path();
        let Some(name) = path.file_name() else {
            return Err(ToolError::Failed(format!(
                "'{}' names no file to write",
                path.display()
            )));
        };
        self.create_parent()?
            .replace(name, bytes, None)
            .map_err(|e| ToolError::io("writing", &path, e))
    }
}

/// A beneath-open failure as a tool error naming `path`.
fn beneath_error(path: &Path, e: BeneathError) -> ToolError {
    match e {
        BeneathError::Escapes { .. } => ToolError::Denied(format!(
            "'{}' leads outside the workspace (a symlink changed while the call ran?); nothing \
             was read or written",
            path.display()
        )),
        BeneathError::Io { source, .. } => ToolError::io("opening", path, source),
        other => ToolError::Failed(other.to_string()),
    }
}

fn set_blocking(file: &std::fs::File) {
    use std::os::fd::AsRawFd;
    let fd = file.as_raw_fd();
    // SAFETY: fcntl(2) on a descriptor `file` owns, with integer arguments only.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags >= 0 {
            libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK);
        }
    }
}

/// Lexical normalisation of an absolute path: drops `.`, applies `..` (never above `/`).
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for comp in path.components() {
        match comp {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Maximum symlink hops followed by hand while resolving dangling links.
const MAX_LINK_HOPS: usize = 40;

/// The real path of `path` (absolute, normalised), which need not exist: the deepest existing
/// ancestor is canonicalised and the missing tail appended. Dangling symlinks are followed.
fn real_path(path: &Path) -> io::Result<PathBuf> {
    let mut current = path.to_path_buf();
    let mut hops = 0;
    'restart: loop {
        let mut existing = current.as_path();
        let mut tail: Vec<&std::ffi::OsStr> = Vec::new();
        loop {
            match std::fs::symlink_metadata(existing) {
                Ok(md) => {
                    if md.file_type().is_symlink() && std::fs::metadata(existing).is_err() {
                        hops += 1;
                        if hops > MAX_LINK_HOPS {
                            return Err(io::Error::other("too many levels of symbolic links"));
                        }
                        let target = std::fs::read_link(existing)?;
                        let base = existing.parent().unwrap_or(Path::new("/"));
                        let mut next = normalize(&base.join(target));
                        for part in tail.iter().rev() {
                            next.push(part);
                        }
                        current = next;
                        continue 'restart;
                    }
                    let mut real = std::fs::canonicalize(existing)?;
                    for part in tail.iter().rev() {
                        real.push(part);
                    }
                    return Ok(real);
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    match (existing.parent(), existing.file_name()) {
                        (Some(parent), Some(name)) => {
                            tail.push(name);
                            existing = parent;
                        }
                        _ => return Ok(current.clone()),
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_applies_dot_dot() {
        assert_eq!(
            normalize(Path::new("/a/b/../c/./d")),
            PathBuf::from("/a/c/d")
        );
        assert_eq!(normalize(Path::new("/../../x")), PathBuf::from("/x"));
    }

    #[test]
    fn sandbox_mode_round_trips() {
        for m in [
            SandboxMode::ReadOnly,
            SandboxMode::WorkspaceWrite,
            SandboxMode::FullAccess,
        ] {
            assert_eq!(m.as_str().parse::<SandboxMode>().ok(), Some(m));
        }
        assert!("none".parse::<SandboxMode>().is_err());
    }
}
