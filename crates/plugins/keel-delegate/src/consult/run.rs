//! Running one consult subcommand through keel's subprocess service (credential scrub, process
//! group, bounded collection) with a keel-authored argv and the host environment stamped, and
//! mapping its exit code to the spec's error codes.

use crate::seam::{Caller, DelegationError, ErrorCode};
use keel_tools::subprocess::{CommandSpec, OutputSink, RunEnd, SubprocessService};
use std::path::PathBuf;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Bytes of each output stream kept (envelopes must fit).
const OUTPUT_CAP: usize = 1 << 20;

/// Pause before the one retry of a busy (exit 3) consult.
const BUSY_RETRY_PAUSE: Duration = Duration::from_millis(200);

/// How consult is found and what every spawn is stamped with.
#[derive(Debug, Clone)]
pub struct ConsultConfig {
    /// The `consult` executable (a bare name is looked up on `PATH`).
    pub program: PathBuf,
    /// `CONSULT_DATA_DIR` for every spawn, when set.
    pub data_dir: Option<PathBuf>,
    /// Time limit of one non-blocking subcommand.
    pub timeout: Duration,
    /// Time limit of a (blocking) `review`.
    pub review_timeout: Duration,
}

impl Default for ConsultConfig {
    fn default() -> Self {
        ConsultConfig {
            program: PathBuf::from("consult"),
            data_dir: None,
            timeout: Duration::from_secs(60),
            review_timeout: Duration::from_secs(30 * 60),
        }
    }
}

/// A failed consult invocation, typed. Converts into the seam's [`DelegationError`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConsultError {
    /// consult could not be started (not installed, not executable).
    #[error("cannot run consult {subcommand}: {detail}")]
    Spawn {
        /// The subcommand.
        subcommand: String,
        /// Why.
        detail: String,
    },
    /// A mapped exit code (3 after the retry, 4, 5, 6, 8, 2 with an unknown job).
    #[error("consult {subcommand} exited {exit}: {stderr}")]
    Exit {
        /// The subcommand.
        subcommand: String,
        /// The spec's code for this exit.
        code: ErrorCode,
        /// The exit code.
        exit: i32,
        /// consult's stderr (trimmed).
        stderr: String,
    },
    /// Exit 2 without an unknown job: consult rejected keel's own argv — an infrastructure
    /// error (a keel bug or an incompatible consult).
    #[error("consult {subcommand} rejected keel's arguments (exit 2): {stderr}")]
    Usage {
        /// The subcommand.
        subcommand: String,
        /// consult's stderr.
        stderr: String,
    },
    /// Exit 1, any other exit code, a signal or a time limit: `internal`.
    #[error("consult {subcommand} failed ({how}): {stderr}")]
    Internal {
        /// The subcommand.
        subcommand: String,
        /// `exit 1`, `signal 9`, `timed out after 60s`…
        how: String,
        /// consult's stderr.
        stderr: String,
    },
    /// The output was not a trusted (schemaVersion 1) envelope, or not JSON.
    #[error("consult {subcommand} printed an untrusted envelope: {detail}")]
    Envelope {
        /// The subcommand.
        subcommand: String,
        /// What was wrong.
        detail: String,
    },
}

impl ConsultError {
    /// The spec's error code.
    pub fn code(&self) -> ErrorCode {
        match self {
            ConsultError::Exit { code, .. } => *code,
            ConsultError::Spawn { .. } => ErrorCode::NotReady,
            ConsultError::Usage { .. }
            | ConsultError::Internal { .. }
            | ConsultError::Envelope { .. } => ErrorCode::Internal,
        }
    }

    /// The subcommand it names.
    pub fn subcommand(&self) -> &str {
        match self {
            ConsultError::Spawn { subcommand, .. }
            | ConsultError::Exit { subcommand, .. }
            | ConsultError::Usage { subcommand, .. }
            | ConsultError::Internal { subcommand, .. }
            | ConsultError::Envelope { subcommand, .. } => subcommand,
        }
    }
}

impl ConsultError {
    /// consult's stderr, when this failure carries a non-empty one.
    pub fn stderr(&self) -> Option<&str> {
        match self {
            ConsultError::Exit { stderr, .. }
            | ConsultError::Usage { stderr, .. }
            | ConsultError::Internal { stderr, .. } => {
                Some(stderr.as_str()).filter(|s| !s.is_empty())
            }
            ConsultError::Spawn { .. } | ConsultError::Envelope { .. } => None,
        }
    }

    /// What happened, without consult's stderr (which travels apart, as the diagnosis the
    /// renders frame as untrusted: it may quote the delegate).
    pub fn headline(&self) -> String {
        match self {
            ConsultError::Exit {
                subcommand, exit, ..
            } => format!("consult {subcommand} exited {exit}"),
            ConsultError::Usage { subcommand, .. } => {
                format!("consult {subcommand} rejected keel's arguments (exit 2)")
            }
            ConsultError::Internal {
                subcommand, how, ..
            } => {
                format!("consult {subcommand} failed ({how})")
            }
            ConsultError::Spawn { .. } | ConsultError::Envelope { .. } => self.to_string(),
        }
    }
}

impl From<ConsultError> for DelegationError {
    fn from(e: ConsultError) -> Self {
        let err = DelegationError::new(e.code(), e.headline());
        match e.stderr() {
            Some(s) => err.with_diagnosis(s),
            None => err,
        }
    }
}

/// A time limit for messages: whole seconds as `60s`, anything else in milliseconds.
fn limit_text(limit: Duration) -> String {
    if limit.subsec_millis() == 0 && limit.as_secs() > 0 {
        format!("{}s", limit.as_secs())
    } else {
        format!("{}ms", limit.as_millis())
    }
}

/// What one spawn produced.
#[derive(Debug, Clone)]
pub struct RawRun {
    /// Exit code (`None` when killed by a signal or the time limit).
    pub exit: Option<i32>,
    /// How it ended, for messages (`exit 1`, `signal 9`, `timed out after 60s`).
    pub how: String,
    /// stdout.
    pub stdout: String,
    /// stderr (trimmed).
    pub stderr: String,
}

/// The argv's subcommand, for messages (`--version` → `version`).
fn subcommand_of(args: &[String]) -> String {
    match args.first().map(String::as_str) {
        Some("--version") => "version".to_owned(),
        Some(s) => s.to_owned(),
        None => "consult".to_owned(),
    }
}

/// Spawn `consult <args>` once in the caller's directory, with `CONSULT_HOST=keel`,
/// `CONSULT_HOST_SESSION_ID` and `CONSULT_DATA_DIR` stamped after the service's (scrubbed,
/// forwarded) environment so configuration cannot spoof the host session.
pub(crate) async fn spawn_once(
    subprocess: &SubprocessService,
    config: &ConsultConfig,
    caller: &Caller,
    args: &[String],
    timeout: Duration,
) -> Result<RawRun, ConsultError> {
    spawn(subprocess, config, caller, args, timeout, None).await
}

/// [`spawn_once`], also handing every chunk of stdout (alone) to `sink` as it is read.
pub(crate) async fn spawn_once_tee(
    subprocess: &SubprocessService,
    config: &ConsultConfig,
    caller: &Caller,
    args: &[String],
    timeout: Duration,
    sink: OutputSink,
) -> Result<RawRun, ConsultError> {
    spawn(subprocess, config, caller, args, timeout, Some(sink)).await
}

async fn spawn(
    subprocess: &SubprocessService,
    config: &ConsultConfig,
    caller: &Caller,
    args: &[String],
    timeout: Duration,
    sink: Option<OutputSink>,
) -> Result<RawRun, ConsultError> {
    let sub = subcommand_of(args);
    let mut argv = vec![config.program.clone().into_os_string()];
    argv.extend(args.iter().map(Into::into));
    let mut spec = CommandSpec::new(argv)
        .cwd(&caller.cwd)
        .env("CONSULT_HOST", "keel")
        .env("CONSULT_HOST_SESSION_ID", &caller.session_id)
        .timeout(timeout)
        .cap(OUTPUT_CAP)
        .label("consult");
    if let Some(dir) = &config.data_dir {
        spec = spec.env("CONSULT_DATA_DIR", dir);
    }
    if let Some(sink) = sink {
        // stdout alone: a stderr chunk must not land inside an NDJSON line.
        spec = spec.tee_stdout(sink).spill(false);
    }
    let out = subprocess
        .run(spec, &CancellationToken::new())
        .await
        .map_err(|e| ConsultError::Spawn {
            subcommand: sub.clone(),
            detail: e.to_string(),
        })?;
    let stderr = out.stderr.text().trim().to_owned();
    let (exit, how) = match (out.end, out.code, out.signal) {
        (RunEnd::TimedOut, _, _) => (None, format!("timed out after {}", limit_text(timeout))),
        (RunEnd::Cancelled, _, _) => (None, "cancelled".to_owned()),
        (RunEnd::Exited, Some(code), _) => (Some(code), format!("exit {code}")),
        (RunEnd::Exited, None, sig) => (None, format!("signal {}", sig.unwrap_or(0))),
    };
    Ok(RawRun {
        exit,
        how,
        stdout: out.stdout.text(),
        stderr,
    })
}

/// The spec's mapping of a non-zero end of `subcommand`.
pub(crate) fn map_exit(subcommand: &str, run: &RawRun) -> ConsultError {
    let exit = |code| ConsultError::Exit {
        subcommand: subcommand.to_owned(),
        code,
        exit: run.exit.unwrap_or(-1),
        stderr: run.stderr.clone(),
    };
    match run.exit {
        Some(3) => exit(ErrorCode::Busy),
        Some(4) => exit(ErrorCode::Timeout),
        Some(5) => exit(ErrorCode::NotFinal),
        Some(6) => exit(ErrorCode::DelegateFailed),
        Some(8) => exit(ErrorCode::ReviewUnsupported),
        Some(2) => {
            let lower = run.stderr.to_ascii_lowercase();
            if lower.contains("job not found") || lower.contains("unknown job") {
                exit(ErrorCode::UnknownJob)
            } else {
                ConsultError::Usage {
                    subcommand: subcommand.to_owned(),
                    stderr: run.stderr.clone(),
                }
            }
        }
        _ => ConsultError::Internal {
            subcommand: subcommand.to_owned(),
            how: run.how.clone(),
            stderr: run.stderr.clone(),
        },
    }
}

/// Run `consult <args>` to a successful exit and return its stdout; a busy consult (exit 3) is
/// retried once, then reported `busy`. Every other non-zero end is mapped by [`map_exit`].
pub async fn run_subcommand(
    subprocess: &SubprocessService,
    config: &ConsultConfig,
    caller: &Caller,
    args: &[String],
    timeout: Duration,
) -> Result<String, ConsultError> {
    let run = run_retrying(subprocess, config, caller, args, timeout).await?;
    match run.exit {
        Some(0) => Ok(run.stdout),
        _ => Err(map_exit(&subcommand_of(args), &run)),
    }
}

/// Spawn `consult <args>`, once more after a pause when it exits 3 (busy); the last run is
/// returned whatever its end.
pub(crate) async fn run_retrying(
    subprocess: &SubprocessService,
    config: &ConsultConfig,
    caller: &Caller,
    args: &[String],
    timeout: Duration,
) -> Result<RawRun, ConsultError> {
    let run = spawn_once(subprocess, config, caller, args, timeout).await?;
    if run.exit != Some(3) {
        return Ok(run);
    }
    tokio::time::sleep(BUSY_RETRY_PAUSE).await;
    spawn_once(subprocess, config, caller, args, timeout).await
}
