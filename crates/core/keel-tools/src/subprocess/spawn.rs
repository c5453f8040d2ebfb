//! Starting a child without copying keel. `std::process::Command` forks whenever a `pre_exec`
//! step is set, and the subprocess service always sets some (the reaper's registration, the
//! parent-death signal, the mount plan, Landlock). A fork copies the page tables of the whole
//! process and write-protects every page: in `keel serve` hosting hundreds of sessions, each
//! tool call then cost the server milliseconds of copying and a page fault (with a TLB
//! shoot-down across its threads) on every page it wrote until the child exec'd. Profiled at
//! 100 busy sessions, that was over half of the server's CPU.
//!
//! [`launch`] starts the child the way `posix_spawn(3)` does: `clone(CLONE_VM | CLONE_VFORK)`
//! on a stack of its own, so nothing is copied and the calling thread waits only until the
//! child execs. The child shares keel's memory until then, so everything it does is prepared
//! here beforehand (C strings, the resolved program, the mount plan) and it runs only
//! async-signal-safe system calls on those buffers: no allocation, no lock, no formatting.
//! Its steps, in the order `std` runs them: signal handlers back to their defaults (no handler
//! of keel's may run on keel's memory in the child), the standard descriptors, the working
//! directory, a process group of its own, the reaper's registration, the parent-death signal,
//! the confinement (the mount plan then Landlock), an empty signal mask, `execve`. A step
//! that fails leaves its errno in the shared context and the child exits; [`launch`] returns
//! that error, as `std` does.
//!
//! The child is waited for through a pidfd (`CLONE_PIDFD`) registered with tokio; a child
//! dropped before it was waited for is SIGKILLed and reaped at the next launch.

use super::confine::ChildConfinement;
use keel_protocol::sync::Locked;
use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI32, Ordering};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// The child's stack until it execs (reserved, touched only as far as it is used).
const CHILD_STACK: usize = 256 * 1024;

/// The search path when the child's environment has none (glibc's `execvp` default).
const DEFAULT_PATH: &str = "/bin:/usr/bin";

/// What the child is started as.
pub(crate) struct Launch<'a> {
    /// The program: a name searched in the child's `PATH`, or a path (relative to `cwd`).
    pub program: &'a OsStr,
    /// The arguments after the program's own name.
    pub args: &'a [OsString],
    /// The child's whole environment.
    pub env: &'a [(OsString, OsString)],
    /// Its working directory (keel's own when `None`).
    pub cwd: Option<&'a Path>,
    /// Descriptors to become its stdin, stdout and stderr (kept open by the caller until
    /// [`launch`] returns).
    pub stdio: [RawFd; 3],
    /// The reaper's pipe: the child registers its own process group there.
    pub reaper_fd: Option<RawFd>,
    /// The confinement the child enters before it execs.
    pub confine: Option<&'a ChildConfinement>,
}

/// A started child. Dropped before it was waited for, it is SIGKILLed.
#[derive(Debug)]
pub(crate) struct Child {
    pid: libc::pid_t,
    pidfd: Option<AsyncFd<OwnedFd>>,
    status: Option<ExitStatus>,
}

/// Everything the child reads, built before the clone; it lives on the caller's stack, which
/// the child shares until it execs.
struct Shared {
    path: CString,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
    cwd: Option<CString>,
    stdio: [RawFd; 3],
    reaper_fd: Option<RawFd>,
    parent: libc::pid_t,
    confine: Option<*const ChildConfinement>,
    /// The errno of the step that failed; 0 while all went well.
    failed: AtomicI32,
}

/// Start the child described by `how`. Returns once it has exec'd (or failed to).
pub(crate) fn launch(how: &Launch<'_>) -> io::Result<Child> {
    reap_orphans();
    let path = resolve(how.program, how.env, how.cwd)?;
    let path = c_string(path.as_os_str())?;
    let mut keep: Vec<CString> = Vec::with_capacity(how.args.len() + how.env.len() + 1);
    keep.push(c_string(how.program)?);
    for arg in how.args {
        keep.push(c_string(arg)?);
    }
    let argc = keep.len();
    for (name, value) in how.env {
        let mut pair = Vec::with_capacity(name.len() + value.len() + 1);
        pair.extend_from_slice(name.as_bytes());
        pair.push(b'=');
        pair.extend_from_slice(value.as_bytes());
        keep.push(CString::new(pair).map_err(|_| nul_in(name))?);
    }
    let pointers = |strings: &[CString]| {
        let mut v: Vec<*const libc::c_char> = strings.iter().map(|s| s.as_ptr()).collect();
        v.push(std::ptr::null());
        v
    };
    let shared = Shared {
        path,
        argv: pointers(&keep[..argc]),
        envp: pointers(&keep[argc..]),
        cwd: how.cwd.map(|d| c_string(d.as_os_str())).transpose()?,
        stdio: how.stdio,
        reaper_fd: how.reaper_fd,
        // SAFETY: getpid(2) cannot fail.
        parent: unsafe { libc::getpid() },
        confine: how.confine.map(std::ptr::from_ref),
        failed: AtomicI32::new(0),
    };
    let stack = Stack::new()?;
    let (pid, pidfd) = clone_child(&shared, &stack)?;
    drop(stack);
    let failed = shared.failed.load(Ordering::Acquire);
    let mut child = Child {
        pid,
        pidfd: match pidfd {
            // SAFETY: the OwnedFd keeps the pidfd open, unchanged, as long as the AsyncFd.
            Some(fd) => Some(unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }?),
            None => None,
        },
        status: None,
    };
    if failed != 0 {
        // The child has exited already (the clone returned when it did): reap it now.
        let _ = child.wait_blocking();
        return Err(io::Error::from_raw_os_error(failed));
    }
    drop(keep);
    Ok(child)
}

/// The clone itself, with every signal blocked across it (the child unblocks them once its
/// handlers are reset). Returns the pid and, where the kernel gives one, a pidfd.
fn clone_child(shared: &Shared, stack: &Stack) -> io::Result<(libc::pid_t, Option<OwnedFd>)> {
    static NO_PIDFD: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    // SAFETY: an all-zero sigset_t is a valid value; sigfillset fills the one we own.
    let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: plain calls on sigset_t values we own.
    unsafe {
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
    }
    let arg = std::ptr::from_ref(shared).cast_mut().cast::<libc::c_void>();
    let mut pidfd: libc::c_int = -1;
    let mut flags = libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD;
    if !NO_PIDFD.load(Ordering::Relaxed) {
        flags |= libc::CLONE_PIDFD;
    }
    // SAFETY: `child_main` runs on `stack` (ours, large enough, alive until the clone returns,
    // which with CLONE_VFORK is after the child exec'd or exited) and reads `shared` through
    // `arg` only while this thread is suspended in the call. With CLONE_PIDFD the kernel writes
    // the new descriptor to `pidfd`.
    let mut pid = unsafe { libc::clone(child_main, stack.top(), flags, arg, &mut pidfd as *mut _) };
    if pid == -1 && flags & libc::CLONE_PIDFD != 0 && last_errno() == libc::EINVAL {
        // A kernel before 5.2: no pidfd; the child is waited for on a blocking thread.
        NO_PIDFD.store(true, Ordering::Relaxed);
        flags &= !libc::CLONE_PIDFD;
        // SAFETY: as above, without the pidfd.
        pid = unsafe { libc::clone(child_main, stack.top(), flags, arg) };
    }
    let err = io::Error::last_os_error();
    // SAFETY: restores the mask saved above.
    unsafe {
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
    }
    if pid == -1 {
        return Err(err);
    }
    // SAFETY: with CLONE_PIDFD the kernel gave us this descriptor; nothing else owns it.
    let fd = (flags & libc::CLONE_PIDFD != 0 && pidfd >= 0)
        .then(|| unsafe { OwnedFd::from_raw_fd(pidfd) });
    Ok((pid, fd))
}

/// The child, until it execs: see the module's documentation. Never returns on success.
extern "C" fn child_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `Shared` the suspended parent keeps alive (see `clone_child`).
    let shared = unsafe { &*arg.cast_const().cast::<Shared>() };
    let errno = match prepare_and_exec(shared) {
        Err(e) => e.raw_os_error().unwrap_or(libc::EINVAL),
        Ok(()) => libc::EINVAL,
    };
    shared.failed.store(errno, Ordering::Release);
    // SAFETY: _exit(2) ends this child only (it has no thread of keel's).
    unsafe { libc::_exit(127) }
}

/// The child's steps (module documentation); returns only on failure.
fn prepare_and_exec(s: &Shared) -> io::Result<()> {
    // SAFETY: every call below is an async-signal-safe system call on values the parent
    // prepared (C strings, pointer arrays, descriptors) or on stack values of our own.
    unsafe {
        reset_signal_handlers();
        for (target, &fd) in s.stdio.iter().enumerate() {
            check(libc::dup2(fd, target as libc::c_int))?;
        }
        if let Some(dir) = &s.cwd {
            check(libc::chdir(dir.as_ptr()))?;
        }
        check(libc::setpgid(0, 0))?;
        if let Some(fd) = s.reaper_fd {
            super::reaper::register_self_in_child(fd);
        }
        check(libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
        ))?;
        if libc::getppid() != s.parent {
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
        if let Some(confine) = s.confine {
            (*confine).enter()?;
        }
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::pthread_sigmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        libc::execve(s.path.as_ptr(), s.argv.as_ptr(), s.envp.as_ptr());
    }
    Err(io::Error::last_os_error())
}

/// Every caught signal back to its default, and SIGPIPE too (Rust's runtime ignores it; a
/// child must not inherit that). Signals keel ignores on purpose stay ignored, as with `std`.
///
/// # Safety
/// Only for the child, with every signal blocked.
unsafe fn reset_signal_handlers() {
    for sig in 1..=libc::SIGRTMAX() {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        // SAFETY: sigaction(2) reads and writes sigaction values we own; a signal the C
        // library reserves answers EINVAL, which is ignored.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) != 0 {
                continue;
            }
            if old.sa_sigaction != libc::SIG_DFL
                && (old.sa_sigaction != libc::SIG_IGN || sig == libc::SIGPIPE)
            {
                let mut dfl: libc::sigaction = std::mem::zeroed();
                dfl.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(sig, &dfl, std::ptr::null_mut());
            }
        }
    }
}

impl Child {
    /// The child's pid (also its process group's id).
    pub(crate) fn id(&self) -> libc::pid_t {
        self.pid
    }

    /// Wait for the child to exit.
    pub(crate) async fn wait(&mut self) -> io::Result<ExitStatus> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        if self.pidfd.is_none() {
            let pid = self.pid;
            let status = tokio::task::spawn_blocking(move || wait_pid(pid, 0))
                .await
                .map_err(io::Error::other)??;
            let status = status.ok_or_else(|| io::Error::from(io::ErrorKind::Other))?;
            self.status = Some(status);
            return Ok(status);
        }
        loop {
            let Some(fd) = &self.pidfd else {
                return Err(io::Error::from(io::ErrorKind::Other));
            };
            let mut ready = fd.readable().await?;
            if let Some(status) = wait_pid(self.pid, libc::WNOHANG)? {
                self.status = Some(status);
                return Ok(status);
            }
            ready.clear_ready();
        }
    }

    /// Wait, blocking the thread (for a child known to have exited).
    fn wait_blocking(&mut self) -> io::Result<ExitStatus> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        let status = wait_pid(self.pid, 0)?.ok_or_else(|| io::Error::from(io::ErrorKind::Other))?;
        self.status = Some(status);
        Ok(status)
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if self.status.is_some() {
            return;
        }
        // SAFETY: kill(2) on our own unreaped child (its pid cannot have been reused).
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
        }
        if !matches!(wait_pid(self.pid, libc::WNOHANG), Ok(Some(_))) {
            orphans().locked().push(self.pid);
        }
    }
}

/// Children dropped unwaited and not yet gone: reaped at the next launch.
fn orphans() -> &'static Mutex<Vec<libc::pid_t>> {
    static ORPHANS: Mutex<Vec<libc::pid_t>> = Mutex::new(Vec::new());
    &ORPHANS
}

fn reap_orphans() {
    orphans()
        .locked()
        .retain(|&pid| matches!(wait_pid(pid, libc::WNOHANG), Ok(None)));
}

/// waitpid(2) on our child: `None` while it runs (with WNOHANG).
fn wait_pid(pid: libc::pid_t, flags: libc::c_int) -> io::Result<Option<ExitStatus>> {
    let mut status: libc::c_int = 0;
    loop {
        // SAFETY: waitpid(2) writes the status we own.
        let rc = unsafe { libc::waitpid(pid, &mut status, flags) };
        match rc {
            0 => return Ok(None),
            -1 if last_errno() == libc::EINTR => continue,
            -1 => return Err(io::Error::last_os_error()),
            _ => return Ok(Some(ExitStatus::from_raw(status))),
        }
    }
}

/// The child's stack: an anonymous mapping with a guard page below it.
struct Stack {
    base: *mut libc::c_void,
}

impl Stack {
    fn new() -> io::Result<Stack> {
        // SAFETY: a fresh private anonymous mapping; nothing else refers to it.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                CHILD_STACK,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let stack = Stack { base };
        // SAFETY: the lowest page of our own mapping becomes the guard.
        check(unsafe { libc::mprotect(base, page_size(), libc::PROT_NONE) })?;
        Ok(stack)
    }

    /// The highest address (stacks grow down), 16-byte aligned as the mapping is.
    fn top(&self) -> *mut libc::c_void {
        self.base.cast::<u8>().wrapping_add(CHILD_STACK).cast()
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `new`, no longer used by anyone.
        unsafe {
            libc::munmap(self.base, CHILD_STACK);
        }
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf(3) takes a plain name.
    usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096)
}

/// The program's path as `execvp` would find it: a name with a `/` as it is (relative to the
/// child's working directory), any other name searched in the child's `PATH`. An entry is
/// taken when it is a regular file the child may execute.
fn resolve(
    program: &OsStr,
    env: &[(OsString, OsString)],
    cwd: Option<&Path>,
) -> io::Result<PathBuf> {
    if program.is_empty() {
        return Err(io::Error::from_raw_os_error(libc::ENOENT));
    }
    if program.as_bytes().contains(&b'/') {
        return Ok(PathBuf::from(program));
    }
    let search = env
        .iter()
        .rev()
        .find(|(name, _)| name == "PATH")
        .map_or(OsStr::new(DEFAULT_PATH), |(_, v)| v.as_os_str());
    let mut denied = false;
    for dir in search.as_bytes().split(|b| *b == b':') {
        let dir = Path::new(OsStr::from_bytes(if dir.is_empty() { b"." } else { dir }));
        let mut candidate = match cwd {
            Some(cwd) if dir.is_relative() => cwd.join(dir),
            _ => dir.to_path_buf(),
        };
        candidate.push(program);
        let Ok(meta) = std::fs::metadata(&candidate) else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        let Ok(c) = c_string(candidate.as_os_str()) else {
            continue;
        };
        // SAFETY: access(2) reads a NUL-terminated path we own.
        if unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0 {
            return Ok(candidate);
        }
        denied = true;
    }
    Err(io::Error::from_raw_os_error(if denied {
        libc::EACCES
    } else {
        libc::ENOENT
    }))
}

fn c_string(s: &OsStr) -> io::Result<CString> {
    CString::new(s.as_bytes()).map_err(|_| nul_in(s))
}

fn nul_in(s: &OsStr) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{s:?} contains a NUL byte"),
    )
}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn last_errno() -> libc::c_int {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}
