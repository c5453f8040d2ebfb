//! The local engine: each attempt is a `keel run --json` (or `keel resume --json`) child of
//! this process, in its own process group, killed with this process if it dies (Linux
//! `PR_SET_PDEATHSIG`), its stdout read on a thread of its own; then the task's check.

use crate::engine::{Attempt, CheckOutcome, Engine, EngineError, Msg, read_event};
use std::io::BufRead;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

/// Runs attempts as child processes of this one.
pub struct LocalEngine {
    /// The `keel` binary (this one).
    exe: PathBuf,
    /// Global flags every child gets (the batch's own).
    common: Vec<String>,
    /// Running children: task index → pid.
    running: Vec<(usize, i32)>,
    /// Set when the batch is interrupted: checks stop.
    stop: Arc<AtomicBool>,
    /// Time limit of a check.
    check_timeout: Duration,
}

impl LocalEngine {
    /// An engine starting `exe` with the global flags `common`.
    pub fn new(exe: PathBuf, common: Vec<String>, check_timeout: Duration) -> Self {
        LocalEngine {
            exe,
            common,
            running: Vec::new(),
            stop: Arc::new(AtomicBool::new(false)),
            check_timeout,
        }
    }
}

impl Engine for LocalEngine {
    fn start(&mut self, attempt: Attempt, tx: Sender<Msg>) -> Result<(), EngineError> {
        let idx = attempt.index;
        let mut cmd = Command::new(&self.exe);
        cmd.args(&self.common);
        if let Some(model) = &attempt.model {
            cmd.arg("--model").arg(model);
        }
        cmd.args(&attempt.flags)
            .arg("--cwd")
            .arg(&attempt.workspace);
        match &attempt.resume {
            None => cmd.args(["run", "--json"]).arg(&attempt.prompt),
            Some(session) => cmd.args(["resume", "--json", session]).arg(&attempt.prompt),
        };
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&attempt.log)
            .map_err(|error| EngineError::Log {
                path: attempt.log.clone(),
                error,
            })?;
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .process_group(0);
        die_with_parent(&mut cmd);
        let started = Instant::now();
        let mut child = cmd.spawn().map_err(|error| EngineError::Start {
            exe: self.exe.clone(),
            error,
        })?;
        let pid = i32::try_from(child.id()).unwrap_or(0);
        self.running.push((idx, pid));
        let stdout = child.stdout.take();
        let stop = self.stop.clone();
        let timeout = self.check_timeout;
        let check = attempt.check.clone();
        let workspace = attempt.workspace.clone();
        let check_log = attempt.log.clone();
        std::thread::spawn(move || {
            if let Some(out) = stdout {
                let reader = std::io::BufReader::new(out);
                for line in reader.lines() {
                    let Ok(line) = line else { break };
                    if let Some(msg) = read_event(idx, &line) {
                        let _ = tx.send(msg);
                    }
                }
            }
            let status = child.wait().ok();
            let wall = started.elapsed();
            let _ = tx.send(Msg::Exited {
                index: idx,
                code: status.and_then(|s| s.code()),
                wall,
            });
            let checked = Instant::now();
            let outcome = match check {
                Some(command) if !stop.load(Ordering::SeqCst) => {
                    run_check(&command, &workspace, &check_log, timeout, &stop)
                }
                Some(_) => CheckOutcome::Stopped,
                None => CheckOutcome::None,
            };
            let _ = tx.send(Msg::Finished {
                index: idx,
                check: outcome,
                check_wall: checked.elapsed(),
            });
        });
        Ok(())
    }

    fn ended(&mut self, index: usize) {
        self.running.retain(|(i, _)| *i != index);
    }

    fn interrupt(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for (_, pid) in &self.running {
            // SAFETY: kill(2) of a child this process started. Its reader thread may have
            // reaped it a moment ago (`ended` not called yet); the pid is not reused that fast
            // in practice, and the signal is SIGINT, which a keel child takes as Ctrl-C.
            unsafe {
                libc::kill(*pid, libc::SIGINT);
            }
        }
    }

    fn check_alone(&mut self, index: usize, attempt: &Attempt, tx: Sender<Msg>) {
        let stop = self.stop.clone();
        let timeout = self.check_timeout;
        let check = attempt.check.clone();
        let workspace = attempt.workspace.clone();
        let log = attempt.log.clone();
        std::thread::spawn(move || {
            let checked = Instant::now();
            let outcome = match check {
                Some(command) if !stop.load(Ordering::SeqCst) => {
                    run_check(&command, &workspace, &log, timeout, &stop)
                }
                Some(_) => CheckOutcome::Stopped,
                None => CheckOutcome::None,
            };
            let _ = tx.send(Msg::Finished {
                index,
                check: outcome,
                check_wall: checked.elapsed(),
            });
        });
    }
}

/// Linux: the child gets SIGKILL when this process dies (a SIGKILLed batch leaves no
/// session running behind it; the next run resumes it with crash repair).
fn die_with_parent(cmd: &mut Command) {
    #[cfg(target_os = "linux")]
    {
        let parent = std::process::id();
        // SAFETY: between fork and exec only async-signal-safe calls: prctl and getppid.
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if u32::try_from(libc::getppid()).ok() != Some(parent) {
                    return Err(std::io::Error::other("the batch process is gone"));
                }
                Ok(())
            });
        }
    }
}

/// Run a check: `sh -c COMMAND` in the workspace, its output appended to `log`, in its own
/// process group, which is killed at the time limit (and after it exits, for what it left).
pub(crate) fn run_check(
    command: &str,
    workspace: &Path,
    log: &Path,
    timeout: Duration,
    stop: &AtomicBool,
) -> CheckOutcome {
    let open = || {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
    };
    let (out, err) = match (open(), open()) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => {
            return CheckOutcome::Error(format!("cannot open {}: {e}", log.display()));
        }
    };
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(command)
        .current_dir(workspace)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0);
    die_with_parent(&mut cmd);
    let started = Instant::now();
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return CheckOutcome::Error(format!("cannot run the check: {e}")),
    };
    let pgid = i32::try_from(child.id()).unwrap_or(0);
    let kill_group = || {
        if pgid > 0 {
            // SAFETY: killpg(2) on the process group this check leads.
            unsafe {
                libc::killpg(pgid, libc::SIGKILL);
            }
        }
    };
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                kill_group();
                return match status.code() {
                    Some(0) => CheckOutcome::Passed,
                    Some(code) => CheckOutcome::Failed(code),
                    None => CheckOutcome::Failed(-1),
                };
            }
            Ok(None) => {}
            Err(e) => {
                kill_group();
                return CheckOutcome::Error(format!("cannot wait for the check: {e}"));
            }
        }
        if started.elapsed() >= timeout {
            kill_group();
            let _ = child.wait();
            return CheckOutcome::Timeout(timeout.as_secs());
        }
        if stop.load(Ordering::SeqCst) {
            kill_group();
            let _ = child.wait();
            return CheckOutcome::Stopped;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
