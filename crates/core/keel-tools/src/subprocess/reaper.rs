//! Children die with keel. Every process group the subprocess service starts is registered with
//! a *reaper*: one small watcher process (`/bin/sh` running a read loop, started on first use,
//! in its own process group) that holds the read end of a pipe whose only write end is keel's.
//! When keel goes by any means — a normal exit, a panic, SIGKILL from the OOM killer — the kernel
//! closes that write end, the watcher reads end-of-file and SIGKILLs every group still
//! registered, then exits. No code in keel has to run at its death.
//!
//! The child registers its own group, between spawn and exec (one `write(2)` of `+PID` to the
//! watcher's pipe, whose descriptor it still holds until exec), so no instant exists in which a
//! child runs unregistered: a kill of keel right after the fork is covered too (a crash campaign
//! found that window when keel registered the group after the spawn returned).
//!
//! Why this and not `PR_SET_PDEATHSIG` alone: the parent-death signal reaches only the direct
//! child (`sh -c …`); the rest of its tree (`sleep 30 &`) lives on in the group. The direct child
//! still gets `PR_SET_PDEATHSIG(SIGKILL)` (set between spawn and exec), for the case of a watcher
//! that could not be started.
//!
//! A group is released when keel has seen all of it end: at once when the run was killed, and
//! for a group whose leader exited normally (it may have left background children) as soon as
//! `kill(-pgid, 0)` says the group is empty, checked at every later spawn. Linux does not reuse a
//! process-group id while any member lives, so a registered id names only our group.
//!
//! Limits: a process that leaves the group on purpose (`setsid`, a daemon's double fork) is not
//! reached; a cgroup or a PID namespace would be needed for that.

use keel_protocol::sync::Locked;
use std::io::Write;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};

/// The watcher's program: `+PGID` registers, `-PGID` releases, end-of-file kills what is left.
/// `kill` and `read` are shell built-ins; no other program is started.
const WATCHER: &str = r#"trap '' INT HUP TERM QUIT
groups=' '
while IFS= read -r line; do
  case $line in
    +*) groups="$groups${line#+} " ;;
    -*) p=${line#-}
        case $groups in *" $p "*) groups="${groups%% $p *} ${groups#* $p }" ;; esac ;;
  esac
done
for p in $groups; do kill -KILL -"$p" 2>/dev/null; done
"#;

struct Reaper {
    /// The pipe to the watcher; `None` when it could not be started. Never closed while keel
    /// runs (children write their registration to its descriptor, see [`registration_fd`]).
    pipe: Option<ChildStdin>,
    /// A write failed: the watcher is gone.
    broken: bool,
    /// Groups whose leader exited normally, still registered until found empty.
    lingering: Vec<i32>,
}

fn reaper() -> &'static Mutex<Reaper> {
    static REAPER: OnceLock<Mutex<Reaper>> = OnceLock::new();
    REAPER.get_or_init(|| Mutex::new(Reaper::start()))
}

impl Reaper {
    fn start() -> Reaper {
        let spawned = Command::new("/bin/sh")
            .arg("-c")
            .arg(WATCHER)
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn();
        let pipe = match spawned {
            // The handle is dropped without waiting: the watcher must outlive keel, and a
            // watcher that ends early is reaped by init once keel is gone.
            Ok(mut child) => child.stdin.take(),
            Err(_) => None,
        };
        Reaper {
            pipe,
            broken: false,
            lingering: Vec::new(),
        }
    }

    fn send(&mut self, op: char, pgid: i32) {
        // One write(2) of a few bytes: atomic on a pipe, so keel dying mid-line cannot leave
        // the watcher a torn registration.
        let line = format!("{op}{pgid}\n");
        if let Some(pipe) = &mut self.pipe
            && !self.broken
            && pipe.write_all(line.as_bytes()).is_err()
        {
            self.broken = true; // the watcher is gone; the parent-death signal still holds
        }
    }

    /// Release lingering groups that have no member left.
    fn sweep(&mut self) {
        let mut empty = Vec::new();
        self.lingering.retain(|&pgid| {
            let alive = group_alive(pgid);
            if !alive {
                empty.push(pgid);
            }
            alive
        });
        for pgid in empty {
            self.send('-', pgid);
        }
    }
}

fn group_alive(pgid: i32) -> bool {
    // SAFETY: kill(2) with signal 0 only checks for existence; no memory is involved.
    let rc = unsafe { libc::kill(-pgid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

fn with_reaper(f: impl FnOnce(&mut Reaper)) {
    // A poisoned lock only means another thread panicked mid-write; the state is still usable.
    let mut guard = reaper().locked();
    f(&mut guard);
}

/// The watcher's pipe (started now if need be), for a child to register its own group between
/// fork and exec: then no instant exists in which the child runs unregistered, even if keel is
/// killed right after the fork. `None` when there is no working watcher.
pub(crate) fn registration_fd() -> Option<RawFd> {
    let mut fd = None;
    with_reaper(|r| {
        if !r.broken {
            fd = r.pipe.as_ref().map(AsRawFd::as_raw_fd);
        }
    });
    fd
}

/// Write `+<pid>\n` to `fd` from the child before exec: no allocation, one write(2) (async-signal-safe).
pub(crate) fn register_self_in_child(fd: RawFd) {
    // SAFETY: getpid(2) cannot fail.
    let pid = unsafe { libc::getpid() };
    // `+`, at most 10 digits, `\n`, written from the end.
    let mut buf = [0u8; 12];
    let mut start = buf.len() - 1;
    buf[start] = b'\n';
    let mut v = pid.unsigned_abs();
    loop {
        start -= 1;
        buf[start] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    start -= 1;
    buf[start] = b'+';
    // SAFETY: writes our own stack buffer to a descriptor inherited from keel (open until
    // exec); a failed write only means the watcher is gone.
    unsafe {
        libc::write(fd, buf[start..].as_ptr().cast(), buf.len() - start);
    }
}

/// A child registered its own group: only release lingering groups found empty.
pub(crate) fn sweep() {
    with_reaper(Reaper::sweep);
}

/// Register a new process group: it is killed if keel goes before [`release`] or [`linger`].
pub(crate) fn register(pgid: i32) {
    with_reaper(|r| {
        r.sweep();
        r.send('+', pgid);
    });
}

/// The group was killed and reaped: forget it.
pub(crate) fn release(pgid: i32) {
    with_reaper(|r| r.send('-', pgid));
}

/// The group's leader exited normally; members may live on. Keep it registered until it is
/// found empty.
pub(crate) fn linger(pgid: i32) {
    with_reaper(|r| {
        if group_alive(pgid) {
            r.lingering.push(pgid);
        } else {
            r.send('-', pgid);
        }
    });
}
