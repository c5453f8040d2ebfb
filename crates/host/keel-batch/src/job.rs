//! `keel batch-job SPEC`: one task of `keel batch --engine ray`, on whichever Ray node runs its
//! job. The job's working directory is the package the batch uploaded:
//!
//! ```text
//! ws/               the task's workspace (the session's --cwd)
//! job/spec.json     this [`Spec`]
//! job/session.jsonl the session to resume, when the task resumes one
//! job/home/         $KEEL_HOME for the session (the user's config.toml, when there is one)
//! ```
//!
//! It imports the session it resumes, runs `keel run --json` (or `keel resume --json`) as its
//! child, then the check, then sends the workspace back (a job with no keel arguments runs only
//! the check). Everything goes to stdout (the job's
//! log, which the batch reads through the Jobs API) one whole line per write: the session's
//! events as `keel run --json` prints them, and [`LINE`] objects for the rest.

use crate::engine::CheckOutcome;
use crate::local::run_check;
use crate::pack::Pack;
use crate::signals;
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::Digest;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The key of a job's own lines: `{"keel_batch": KIND, …}`. Kinds: `stderr` (`line`: the
/// session's stderr), `exited` (`code`), `check-output` (`line`), `check` (a
/// [`CheckOutcome::to_json`] with `ms`), `ws` (`data`: a base64 part of the workspace's zip),
/// `ws-end` (`parts`, `bytes`, `sha256`), `ws-skipped` (`bytes`, `why`), `error` (`message`).
pub const LINE: &str = "keel_batch";

/// The largest workspace sent back (zipped); a larger one stays on the node.
pub const SEND_BACK_MAX: usize = 64 << 20;

/// Bytes of the zip per `ws` line (before base64).
const PART: usize = 48 << 10;

/// Why a job could not run its task (its `error` line says it).
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// The spec could not be read.
    #[error("cannot read the job spec {}: {error}", path.display())]
    ReadSpec {
        /// The spec file.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// The spec is not a [`Spec`].
    #[error("the job spec {} is not valid: {error}", path.display())]
    BadSpec {
        /// The spec file.
        path: PathBuf,
        /// What the parser said.
        error: serde_json::Error,
    },
    /// The workspace or `$KEEL_HOME` directory could not be made.
    #[error("cannot create {}: {error}", path.display())]
    Create {
        /// The directory.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// This process's binary could not be found.
    #[error("cannot find the keel binary: {error}")]
    Exe {
        /// Why.
        error: std::io::Error,
    },
    /// `keel sessions import` could not be run.
    #[error("cannot run keel sessions import: {error}")]
    RunImport {
        /// Why.
        error: std::io::Error,
    },
    /// `keel sessions import` failed.
    #[error("cannot import the session to resume: {stderr}")]
    Import {
        /// What it said.
        stderr: String,
    },
    /// The session's `keel` could not be started.
    #[error("cannot start {}: {error}", exe.display())]
    Start {
        /// The binary.
        exe: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// The session's `keel` could not be waited for.
    #[error("cannot wait for keel: {error}")]
    Wait {
        /// Why.
        error: std::io::Error,
    },
}

/// What a job runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Spec {
    /// The task's id.
    pub task: String,
    /// keel's arguments (global flags, then `run --json PROMPT` or `resume --json ID PROMPT`);
    /// the job puts `--cwd ws` first. None: the job runs only the check (again).
    pub args: Vec<String>,
    /// A session file (relative to the job's directory) to import before.
    pub import: Option<String>,
    /// The check command.
    pub check: Option<String>,
    /// Its time limit (seconds).
    pub check_timeout: u64,
}

/// One line to stdout, in one write.
#[derive(Clone)]
struct Out(Arc<std::sync::Mutex<std::io::Stdout>>);

impl Out {
    fn raw(&self, line: &str) {
        let mut buf = String::with_capacity(line.len() + 1);
        buf.push_str(line);
        buf.push('\n');
        if let Ok(out) = self.0.lock() {
            let mut out = out.lock();
            let _ = out.write_all(buf.as_bytes());
            let _ = out.flush();
        }
    }

    fn emit(&self, kind: &str, fields: Value) {
        let mut obj = serde_json::Map::new();
        obj.insert(LINE.into(), json!(kind));
        if let Value::Object(m) = fields {
            obj.extend(m);
        }
        self.raw(&Value::Object(obj).to_string());
    }
}

/// `keel batch-job SPEC`: run the job of `spec` (relative to `cwd`), everything it has to say
/// on stdout; `false` when it could not run its task (an `error` line said why).
pub fn run(cwd: &Path, spec: &Path) -> bool {
    let out = Out(Arc::new(std::sync::Mutex::new(std::io::stdout())));
    match job(cwd, spec, &out) {
        Ok(()) => true,
        Err(e) => {
            out.emit("error", json!({"message": e.to_string()}));
            false
        }
    }
}

fn job(cwd: &Path, spec: &Path, out: &Out) -> Result<(), JobError> {
    let path = cwd.join(spec);
    let text = std::fs::read(&path).map_err(|error| JobError::ReadSpec {
        path: path.clone(),
        error,
    })?;
    let spec: Spec = serde_json::from_slice(&text).map_err(|error| JobError::BadSpec {
        path: path.clone(),
        error,
    })?;
    let root = path
        .parent()
        .and_then(|p| p.parent())
        .map_or_else(|| cwd.to_path_buf(), Path::to_path_buf);
    let ws = root.join("ws");
    let home = root.join("job").join("home");
    for dir in [&ws, &home] {
        std::fs::create_dir_all(dir).map_err(|error| JobError::Create {
            path: dir.clone(),
            error,
        })?;
    }
    // Ray stops a job with SIGINT (the batch asks for it) to the job's process group: keel's
    // child takes it as Ctrl-C and ends its turn; this process notes it and skips the check.
    signals::catch();
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        std::thread::spawn(move || {
            loop {
                if signals::received() > 0 {
                    stop.store(true, Ordering::SeqCst);
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
    }
    // Without keel's arguments the job only runs the check again (the session had ended
    // when a stop cut its check short).
    if !spec.args.is_empty() {
        session(&spec, &root, &ws, &home, out)?;
    }
    if let Some(command) = &spec.check {
        let checked = Instant::now();
        let log = root.join("job").join("check.log");
        // The signal itself, not only the watcher's flag: keel may end its turn and exit
        // before the watcher's next look.
        if signals::received() > 0 {
            stop.store(true, Ordering::SeqCst);
        }
        let outcome = if stop.load(Ordering::SeqCst) {
            CheckOutcome::Stopped
        } else {
            run_check(
                command,
                &ws,
                &log,
                Duration::from_secs(spec.check_timeout),
                &stop,
            )
        };
        let text = std::fs::read(&log).unwrap_or_default();
        let tail = &text[text.len().saturating_sub(64 << 10)..];
        for line in String::from_utf8_lossy(tail).lines() {
            out.emit("check-output", json!({"line": line}));
        }
        let mut report = outcome.to_json();
        report["ms"] = json!(checked.elapsed().as_millis());
        out.emit("check", report);
    }
    send_back(&ws, out);
    Ok(())
}

/// Import the session to resume (if any), run keel's session to its end, and say its exit.
fn session(spec: &Spec, root: &Path, ws: &Path, home: &Path, out: &Out) -> Result<(), JobError> {
    let exe = std::env::current_exe().map_err(|error| JobError::Exe { error })?;
    if let Some(file) = &spec.import {
        let done = Command::new(&exe)
            .env("KEEL_HOME", home)
            .arg("--cwd")
            .arg(ws)
            .args(["sessions", "import"])
            .arg(root.join(file))
            .stdin(Stdio::null())
            .output()
            .map_err(|error| JobError::RunImport { error })?;
        if !done.status.success() {
            return Err(JobError::Import {
                stderr: String::from_utf8_lossy(&done.stderr).trim().to_owned(),
            });
        }
    }
    let started = Instant::now();
    let mut child = Command::new(&exe)
        .env("KEEL_HOME", home)
        .arg("--cwd")
        .arg(ws)
        .args(&spec.args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|error| JobError::Start {
            exe: exe.clone(),
            error,
        })?;
    let errs = child.stderr.take().map(|err| {
        let out = out.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(err).lines() {
                let Ok(line) = line else { break };
                out.emit("stderr", json!({"line": line}));
            }
        })
    });
    if let Some(stdout) = child.stdout.take() {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            out.raw(&line);
        }
    }
    let status = child.wait().map_err(|error| JobError::Wait { error })?;
    if let Some(t) = errs {
        let _ = t.join();
    }
    out.emit(
        "exited",
        json!({"code": status.code(), "ms": started.elapsed().as_millis()}),
    );
    Ok(())
}

/// The workspace, zipped, as base64 `ws` lines and a `ws-end` line (or `ws-skipped`).
fn send_back(ws: &Path, out: &Out) {
    let mut pack = Pack::new(6);
    let zipped = pack.tree(ws, "").and_then(|()| pack.finish());
    let data = match zipped {
        Ok(data) => data,
        Err(why) => {
            out.emit("ws-skipped", json!({"bytes": null, "why": why.to_string()}));
            return;
        }
    };
    if data.len() > SEND_BACK_MAX {
        out.emit(
            "ws-skipped",
            json!({"bytes": data.len(), "why": format!("the zipped workspace is larger than {} MiB", SEND_BACK_MAX >> 20)}),
        );
        return;
    }
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut parts = 0usize;
    for chunk in data.chunks(PART) {
        out.emit("ws", json!({"data": b64.encode(chunk)}));
        parts += 1;
    }
    out.emit(
        "ws-end",
        json!({"parts": parts, "bytes": data.len(), "sha256": hex_sha256(&data)}),
    );
}

/// Lower-case hex SHA-256.
pub fn hex_sha256(data: &[u8]) -> String {
    hex::encode(sha2::Sha256::digest(data))
}
