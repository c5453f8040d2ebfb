//! The subprocess service: runs an argv (never shell-parsed here) in its own process group
//! with a scrubbed environment, feeds an optional stdin payload, captures a tail-capped copy
//! of its output (the full stream spilled to a private file once it outgrows the cap), and on
//! timeout or cancellation sends SIGTERM to the whole group, waits a grace period, then
//! SIGKILLs the group. Dropping a run in flight SIGKILLs the group too. Every group is
//! registered with the [`reaper`], so it dies with keel however keel goes (SIGKILL included).
//!
//! Used by the `bash` tool and, by the agent loop, for command hooks.

pub mod confine;
mod mountns;
pub mod reaper;
mod spawn;

use crate::spill::create_private_file;
use confine::Confinement;
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Default pause between SIGTERM and SIGKILL.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(2);

/// How long output is still read after the main process exits (background children may keep
/// the pipe open).
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(250);

/// True when an environment variable name looks secret: it contains `KEY`, `PASSWORD`,
/// `SECRET` or `TOKEN`, in any case.
pub fn is_secret_name(name: &OsStr) -> bool {
    let upper = name.to_string_lossy().to_ascii_uppercase();
    ["KEY", "PASSWORD", "SECRET", "TOKEN"]
        .iter()
        .any(|p| upper.contains(p))
}

/// A copy of a command's output as it is read (e.g. a background job's buffer). Cheap to clone.
#[derive(Clone)]
pub struct OutputSink(Arc<SinkFn>);

type SinkFn = dyn Fn(&[u8]) + Send + Sync;

impl OutputSink {
    /// A sink calling `f` with every chunk read, in order.
    pub fn new(f: impl Fn(&[u8]) + Send + Sync + 'static) -> Self {
        OutputSink(Arc::new(f))
    }

    /// Pass on one chunk.
    pub fn write(&self, bytes: &[u8]) {
        (self.0)(bytes)
    }
}

impl std::fmt::Debug for OutputSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OutputSink")
    }
}

/// Configuration of a [`SubprocessService`].
#[derive(Debug, Clone)]
pub struct SubprocessConfig {
    /// Environment children start from, before scrubbing (usually the process environment).
    pub base_env: Vec<(OsString, OsString)>,
    /// Names passed through even though they look secret (exact, case-sensitive).
    pub forward: Vec<String>,
    /// Pause between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// Private directory for spilled output streams.
    pub spill_dir: PathBuf,
}

impl SubprocessConfig {
    /// The current process environment, default grace, spill files under `spill_dir`.
    pub fn from_process_env(spill_dir: impl Into<PathBuf>) -> Self {
        SubprocessConfig {
            base_env: std::env::vars_os().collect(),
            forward: Vec::new(),
            grace: DEFAULT_GRACE,
            spill_dir: spill_dir.into(),
        }
    }
}

/// Runs child processes. Cheap to clone.
#[derive(Debug, Clone)]
pub struct SubprocessService {
    cfg: Arc<SubprocessConfig>,
}

/// Whether stderr is captured apart from stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputMode {
    /// stdout and stderr share one pipe, interleaved as written (like a terminal).
    Merged,
    /// stdout and stderr are captured separately.
    Separate,
}

/// One command to run. Build with [`CommandSpec::new`] and the setters.
#[derive(Debug, Clone)]
pub struct CommandSpec {
    argv: Vec<OsString>,
    cwd: Option<PathBuf>,
    stdin: Option<Vec<u8>>,
    env: Vec<(OsString, OsString)>,
    env_remove: Vec<OsString>,
    timeout: Option<Duration>,
    output: OutputMode,
    cap: usize,
    label: String,
    tee: Option<OutputSink>,
    tee_stdout: Option<OutputSink>,
    spill: bool,
    stdin_stream: Option<StdinStream>,
    confine: Option<Arc<Confinement>>,
}

/// Lines (or any bytes) written to a child's stdin while it runs: each message the sender
/// sends is written as it arrives; stdin closes when every sender is dropped.
#[derive(Debug, Clone)]
struct StdinStream(Arc<std::sync::Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>>>>);

impl CommandSpec {
    /// Run `argv[0]` with the remaining arguments; separate streams, 30,000-byte tail cap.
    pub fn new<I, S>(argv: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        CommandSpec {
            argv: argv.into_iter().map(Into::into).collect(),
            cwd: None,
            stdin: None,
            env: Vec::new(),
            env_remove: Vec::new(),
            timeout: None,
            output: OutputMode::Separate,
            cap: 30_000,
            label: "cmd".into(),
            tee: None,
            tee_stdout: None,
            spill: true,
            stdin_stream: None,
            confine: None,
        }
    }
    /// Working directory.
    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }
    /// Bytes written to stdin (then closed). Without it, stdin is `/dev/null`.
    pub fn stdin(mut self, payload: impl Into<Vec<u8>>) -> Self {
        self.stdin = Some(payload.into());
        self
    }
    /// Keep stdin open while the child runs and write each message received on `messages` to it
    /// (a long-lived child steered through its stdin); stdin closes when the sender is dropped.
    /// Replaces a [`CommandSpec::stdin`] payload.
    pub fn stdin_stream(mut self, messages: tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>) -> Self {
        self.stdin = None;
        self.stdin_stream = Some(StdinStream(Arc::new(std::sync::Mutex::new(Some(messages)))));
        self
    }
    /// Set a variable explicitly (never scrubbed).
    pub fn env(mut self, name: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }
    /// Leave `name` out of the environment the child starts from (a variable set with
    /// [`CommandSpec::env`] is still set).
    pub fn env_remove(mut self, name: impl Into<OsString>) -> Self {
        self.env_remove.push(name.into());
        self
    }
    /// Time limit, after which the group is terminated.
    pub fn timeout(mut self, limit: Duration) -> Self {
        self.timeout = Some(limit);
        self
    }
    /// Stream capture mode.
    pub fn output(mut self, mode: OutputMode) -> Self {
        self.output = mode;
        self
    }
    /// Bytes of each stream's tail kept in memory.
    pub fn cap(mut self, bytes: usize) -> Self {
        self.cap = bytes;
        self
    }
    /// Label used in spill file names.
    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.label = label.into();
        self
    }
    /// Also hand every chunk of output to `sink` as it is read (both streams, in read order).
    pub fn tee(mut self, sink: OutputSink) -> Self {
        self.tee = Some(sink);
        self
    }
    /// Hand every chunk of stdout alone to `sink` as it is read (a child speaking a line
    /// protocol on stdout while it writes diagnostics on stderr). Needs
    /// [`OutputMode::Separate`] (the default).
    pub fn tee_stdout(mut self, sink: OutputSink) -> Self {
        self.tee_stdout = Some(sink);
        self
    }
    /// Whether a stream that outgrows the cap is spilled whole to a private file (the default);
    /// `false` keeps only the tail (a caller that keeps what it needs through a tee).
    pub fn spill(mut self, spill: bool) -> Self {
        self.spill = spill;
        self
    }
    /// Run the command (and all it starts) inside `confinement` (see [`confine`]).
    pub fn confine(mut self, confinement: Arc<Confinement>) -> Self {
        self.confine = Some(confinement);
        self
    }
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEnd {
    /// The process exited by itself.
    Exited,
    /// The time limit passed; the group was terminated.
    TimedOut,
    /// The cancellation token fired; the group was terminated.
    Cancelled,
}

/// The captured tail of one output stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Captured {
    /// The last `cap` bytes (everything when not truncated).
    pub tail: Vec<u8>,
    /// Bytes the stream carried in all.
    pub total: u64,
    /// File holding the whole stream, when it outgrew the cap.
    pub spill: Option<PathBuf>,
}

impl Captured {
    /// True when bytes were dropped from the front.
    pub fn truncated(&self) -> bool {
        self.total > self.tail.len() as u64
    }

    /// The tail as text (lossy UTF-8; a character cut at the front is dropped).
    pub fn text(&self) -> String {
        let mut start = 0;
        if self.truncated() {
            while start < self.tail.len().min(3) && (self.tail[start] & 0xC0) == 0x80 {
                start += 1;
            }
        }
        String::from_utf8_lossy(&self.tail[start..]).into_owned()
    }
}

/// The result of a run.
#[derive(Debug, Clone)]
pub struct CommandOutput {
    /// How it ended.
    pub end: RunEnd,
    /// Exit code, when the process exited normally.
    pub code: Option<i32>,
    /// Terminating signal, when killed by one.
    pub signal: Option<i32>,
    /// stdout (both streams in [`OutputMode::Merged`]).
    pub stdout: Captured,
    /// stderr (empty in [`OutputMode::Merged`]).
    pub stderr: Captured,
    /// Wall time.
    pub duration: Duration,
}

/// Why a command could not be run.
#[derive(Debug, thiserror::Error)]
pub enum SubprocessError {
    /// The argv was empty; a caller bug, report it.
    #[error("empty argv")]
    EmptyArgv,
    /// The program could not be started (not found, not executable, bad cwd).
    #[error("cannot start {program:?}: {source}")]
    Spawn {
        /// The program.
        program: OsString,
        /// The OS error.
        source: std::io::Error,
    },
    /// Setting up pipes or waiting for the child failed.
    #[error("subprocess I/O: {0}")]
    Io(#[from] std::io::Error),
}

/// Kills the process group on drop unless the leader [exited](GroupGuard::exited) by itself.
/// The group stays registered with the [`reaper`] until it is known to be gone.
struct GroupGuard {
    pgid: Option<i32>,
}

impl GroupGuard {
    /// `by_child`: the child registered its group itself before exec.
    fn new(pgid: Option<i32>, by_child: bool) -> Self {
        match pgid {
            Some(_) if by_child => reaper::sweep(),
            Some(pgid) => reaper::register(pgid),
            None => {}
        }
        GroupGuard { pgid }
    }

    /// The leader exited normally: background children may outlive it (until keel goes).
    fn exited(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            reaper::linger(pgid);
        }
    }

    fn signal(&self, sig: i32) {
        if let Some(pgid) = self.pgid {
            // SAFETY: kill(2) has no memory-safety preconditions; a negative pid addresses the
            // process group we created for this child.
            unsafe {
                libc::kill(-pgid, sig);
            }
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.signal(libc::SIGKILL);
        if let Some(pgid) = self.pgid {
            reaper::release(pgid);
        }
    }
}

impl SubprocessService {
    /// A service with `cfg`.
    pub fn new(cfg: SubprocessConfig) -> Self {
        SubprocessService { cfg: Arc::new(cfg) }
    }

    /// The configuration.
    pub fn config(&self) -> &SubprocessConfig {
        &self.cfg
    }

    /// The environment children get: the base environment minus secret-looking names that are
    /// not forwarded.
    pub fn scrubbed_env(&self) -> impl Iterator<Item = (&OsString, &OsString)> {
        self.cfg
            .base_env
            .iter()
            .filter(|(k, _)| !is_secret_name(k) || self.is_forwarded(k))
            .map(|(k, v)| (k, v))
    }

    fn is_forwarded(&self, name: &OsStr) -> bool {
        self.cfg.forward.iter().any(|f| OsStr::new(f) == name)
    }

    /// The child's whole environment: the scrubbed one, minus `spec`'s removals, with `spec`'s
    /// variables set over it.
    fn child_env(&self, spec: &CommandSpec) -> Vec<(OsString, OsString)> {
        let mut env: Vec<(OsString, OsString)> = self
            .scrubbed_env()
            .filter(|(k, _)| !spec.env_remove.contains(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (k, v) in &spec.env {
            match env.iter_mut().find(|(name, _)| name == k) {
                Some(slot) => slot.1 = v.clone(),
                None => env.push((k.clone(), v.clone())),
            }
        }
        env
    }

    /// Run `spec` to completion, timeout or cancellation.
    pub async fn run(
        &self,
        spec: CommandSpec,
        cancel: &CancellationToken,
    ) -> Result<CommandOutput, SubprocessError> {
        let started = Instant::now();
        let (program, args) = spec.argv.split_first().ok_or(SubprocessError::EmptyArgv)?;
        let env = self.child_env(&spec);
        let reaper_fd = reaper::registration_fd();
        let confine = spec
            .confine
            .as_ref()
            .and_then(|c| c.for_child(spec.cwd.as_deref()));
        let (stdin_child, stdin_ours) = if spec.stdin.is_some() || spec.stdin_stream.is_some() {
            let (r, w) = std::io::pipe()?;
            (OwnedFd::from(r), Some(w))
        } else {
            (OwnedFd::from(std::fs::File::open("/dev/null")?), None)
        };
        let (out_r, out_w) = std::io::pipe()?;
        let (out_w, err_pipe) = match spec.output {
            OutputMode::Merged => (OwnedFd::from(out_w), None),
            OutputMode::Separate => (OwnedFd::from(out_w), Some(std::io::pipe()?)),
        };
        let err_w = err_pipe
            .as_ref()
            .map_or(out_w.as_raw_fd(), |(_, w)| w.as_raw_fd());
        let launched = spawn::launch(&spawn::Launch {
            program,
            args,
            env: &env,
            cwd: spec.cwd.as_deref(),
            stdio: [stdin_child.as_raw_fd(), out_w.as_raw_fd(), err_w],
            reaper_fd,
            confine: confine.as_ref(),
        });
        // The parent's copies of the child's ends close now: end of file comes with the child.
        drop((stdin_child, out_w, confine));
        let err_r = err_pipe.map(|(r, _)| r);
        let mut child = launched.map_err(|source| SubprocessError::Spawn {
            program: program.clone(),
            source,
        })?;
        let mut guard = GroupGuard::new(Some(child.id()), reaper_fd.is_some());

        let stream = spec
            .stdin_stream
            .as_ref()
            .and_then(|s| s.0.lock().ok().and_then(|mut r| r.take()));
        let stdin = match stdin_ours {
            Some(w) => Some(pipe::Sender::from_owned_fd(OwnedFd::from(w))?),
            None => None,
        };
        match (spec.stdin.clone(), stream, stdin) {
            (Some(payload), _, Some(mut stdin)) => {
                tokio::spawn(async move {
                    // A child that exits without reading its stdin is not an error.
                    let _ = stdin.write_all(&payload).await;
                });
            }
            (None, Some(mut messages), Some(mut stdin)) => {
                tokio::spawn(async move {
                    while let Some(bytes) = messages.recv().await {
                        // A child that stopped reading is not an error; its exit tells.
                        if stdin.write_all(&bytes).await.is_err() || stdin.flush().await.is_err() {
                            break;
                        }
                    }
                });
            }
            _ => {}
        }
        let stop = CancellationToken::new();
        let reader = |r: Option<Box<dyn AsyncRead + Send + Unpin>>,
                      label: String,
                      own: Option<OutputSink>| {
            let mut capture = Capture::new(
                spec.cap,
                self.cfg.spill_dir.clone(),
                label,
                spec.tee.clone(),
            );
            capture.own_tee = own;
            capture.spill_failed = !spec.spill;
            let stop = stop.clone();
            r.map(|r| tokio::spawn(capture.drain(r, stop)))
        };
        let receiver =
            |r: std::io::PipeReader| -> std::io::Result<Box<dyn AsyncRead + Send + Unpin>> {
                Ok(Box::new(pipe::Receiver::from_owned_fd(OwnedFd::from(r))?))
            };
        let (out_task, err_task) = match err_r {
            None => (
                reader(Some(receiver(out_r)?), spec.label.clone(), None),
                None,
            ),
            Some(err_r) => (
                reader(
                    Some(receiver(out_r)?),
                    format!("{}-out", spec.label),
                    spec.tee_stdout.clone(),
                ),
                reader(Some(receiver(err_r)?), format!("{}-err", spec.label), None),
            ),
        };

        let deadline = async {
            match spec.timeout {
                Some(t) => tokio::time::sleep(t).await,
                None => std::future::pending().await,
            }
        };
        let (end, status) = tokio::select! {
            status = child.wait() => (RunEnd::Exited, Some(status?)),
            () = deadline => (RunEnd::TimedOut, None),
            () = cancel.cancelled() => (RunEnd::Cancelled, None),
        };
        let status = match status {
            Some(s) => s,
            None => {
                guard.signal(libc::SIGTERM);
                let waited = tokio::time::timeout(self.cfg.grace, child.wait()).await;
                guard.signal(libc::SIGKILL);
                match waited {
                    Ok(s) => s?,
                    Err(_) => child.wait().await?,
                }
            }
        };
        if end == RunEnd::Exited {
            guard.exited(); // background children may outlive a normal exit, not keel
        }
        let stdout = finish(out_task, &stop).await;
        let stderr = finish(err_task, &stop).await;
        drop(guard);
        Ok(CommandOutput {
            end,
            code: status.code(),
            signal: status.signal(),
            stdout,
            stderr,
            duration: started.elapsed(),
        })
    }
}

async fn finish(task: Option<JoinHandle<Captured>>, stop: &CancellationToken) -> Captured {
    let Some(mut task) = task else {
        return Captured::default();
    };
    if let Ok(done) = tokio::time::timeout(DRAIN_AFTER_EXIT, &mut task).await {
        return done.unwrap_or_default();
    }
    stop.cancel();
    task.await.unwrap_or_default()
}

/// Tail buffer for one stream, spilling the whole stream once it outgrows the cap.
struct Capture {
    cap: usize,
    buf: Vec<u8>,
    total: u64,
    spill: Option<(std::fs::File, PathBuf)>,
    spill_failed: bool,
    spill_dir: PathBuf,
    label: String,
    tee: Option<OutputSink>,
    /// This stream's own tee ([`CommandSpec::tee_stdout`]).
    own_tee: Option<OutputSink>,
}

impl Capture {
    fn new(cap: usize, spill_dir: PathBuf, label: String, tee: Option<OutputSink>) -> Self {
        Capture {
            cap,
            buf: Vec::new(),
            total: 0,
            spill: None,
            spill_failed: false,
            spill_dir,
            label,
            tee,
            own_tee: None,
        }
    }

    fn push(&mut self, chunk: &[u8]) {
        use std::io::Write;
        self.total += chunk.len() as u64;
        if let Some(tee) = &self.tee {
            tee.write(chunk);
        }
        if let Some(tee) = &self.own_tee {
            tee.write(chunk);
        }
        if self.spill.is_none() && !self.spill_failed && self.buf.len() + chunk.len() > self.cap {
            match create_private_file(&self.spill_dir, &self.label) {
                Ok((mut file, path)) => {
                    self.spill_failed = file.write_all(&self.buf).is_err();
                    self.spill = Some((file, path));
                }
                Err(_) => self.spill_failed = true,
            }
        }
        if let Some((file, _)) = &mut self.spill
            && !self.spill_failed
        {
            self.spill_failed = file.write_all(chunk).is_err();
        }
        self.buf.extend_from_slice(chunk);
        if self.buf.len() > self.cap {
            let excess = self.buf.len() - self.cap;
            self.buf.drain(..excess);
        }
    }

    async fn drain(
        mut self,
        mut r: Box<dyn AsyncRead + Send + Unpin>,
        stop: CancellationToken,
    ) -> Captured {
        let mut chunk = vec![0u8; 16 * 1024];
        loop {
            let n = tokio::select! {
                n = r.read(&mut chunk) => n,
                () = stop.cancelled() => break,
            };
            match n {
                Ok(0) | Err(_) => break,
                Ok(n) => self.push(&chunk[..n]),
            }
        }
        Captured {
            tail: self.buf,
            total: self.total,
            spill: if self.spill_failed {
                None
            } else {
                self.spill.map(|(_, p)| p)
            },
        }
    }
}
