//! The Ray engine (`keel batch --engine ray --address http://HEAD:8265`): each attempt is a
//! Ray job submitted through the Jobs REST API (no Python here), and the job's output is read
//! back through the same API while it runs.
//!
//! - **What a job gets.** Its `working_dir` is a package uploaded for it: the task's workspace,
//!   the [`Spec`](crate::job::Spec) `keel batch-job` reads, the session it resumes, the user's configuration.
//!   keel itself is shipped once per batch as a `py_modules` package (content-addressed, so an
//!   unchanged binary is never uploaded twice), unless `--keel-on-nodes PATH` names a keel
//!   every node has. Shipping is the default because a Ray cluster's nodes share Ray's install,
//!   not the user's files: a task then needs nothing on the nodes.
//! - **Where the session lives.** On the node, `keel run --json` prints the session's events;
//!   the batch appends each to the task's session here (the mirror, filed under the task's
//!   local workspace), validating it as keel's own writer does. That copy is the session: a
//!   retry or a resume ships it back, and results are read from it.
//! - **Node death.** A job that fails without keel failing (Ray's supervisor actor died: its
//!   node is gone) is submitted again, up to `--retries` times, resuming its session from the
//!   copy here after crash repair — so no tool call settled here runs twice. What the lost node
//!   did after the batch last read its output is lost with it, as are its file changes.
//! - **Cancellation.** Ctrl-C stops every job (`POST …/stop`; Ray sends SIGINT, which keel
//!   takes as Ctrl-C, ending its turn) and reads each to its end. A check a stop cut short
//!   after the session ended is run again later by a job of its own.
//!
//! Here: the engine and each task's life (submit, follow, classify how a job ended, retry).
//! Beside it: `submit` packages a task and submits its job, `reader` reads a job's output
//! into the session here, `api` is the Jobs REST client (each with its error type, re-exported
//! here).

mod api;
mod reader;
mod submit;

pub use api::ApiError;
pub use reader::{MirrorError, SendBackError};
pub use submit::SubmitError;

use crate::engine::{Attempt, CheckOutcome, Engine, EngineError, Msg, Reattached};
use api::Api;
use keel_session::store::Store;
use reader::{Reader, last_check};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use submit::submit;

/// `--engine ray` without `--concurrency`: jobs in flight (Ray queues what its nodes cannot
/// take yet: keep a cluster's worth in flight).
pub const RAY_CONCURRENCY: usize = 32;

/// Why the Ray engine could not be made.
#[derive(Debug, thiserror::Error)]
pub enum RayError {
    /// Its async runtime could not start.
    #[error("cannot start the Ray engine's runtime: {error}")]
    Runtime {
        /// Why.
        error: std::io::Error,
    },
    /// The address is not a dashboard's, or no HTTP client could be made.
    #[error(transparent)]
    Api(#[from] ApiError),
}

/// What went wrong with a task's Ray job (it becomes the task's `error`).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The job could not be submitted.
    #[error(transparent)]
    Submit(#[from] SubmitError),
    /// The job ran, but its workspace or session did not come back whole.
    #[error(transparent)]
    SendBack(#[from] SendBackError),
    /// The job was lost without keel failing, and no retry is left.
    #[error("the Ray job {job} was lost: {why}")]
    Lost {
        /// The submission id.
        job: String,
        /// Ray's reason.
        why: String,
    },
    /// The cluster stopped answering about the job.
    #[error("lost contact with the Ray job {job}: {error}")]
    Contact {
        /// The submission id.
        job: String,
        /// The last failure.
        error: ApiError,
    },
    /// The job ended, but its last output could not be read (the session here and the
    /// workspace stop where the batch last read them).
    #[error("the Ray job {job} ended, but its output could not be read: {error}")]
    Unread {
        /// The submission id.
        job: String,
        /// The last failure.
        error: ApiError,
    },
    /// `keel batch-job` reported an error on the node.
    #[error("on its Ray node (job {job}): {message}")]
    OnNode {
        /// The submission id.
        job: String,
        /// Its message.
        message: String,
    },
    /// The job failed.
    #[error(
        "the Ray job {job} failed{}: {message}{}",
        in_parens(.kind),
        output_tail(.tail)
    )]
    Failed {
        /// The submission id.
        job: String,
        /// Ray's `error_type` (may be empty).
        kind: String,
        /// The first line of Ray's message.
        message: String,
        /// The last lines of the job's output that were not keel's (`|`-joined; may be
        /// empty).
        tail: String,
    },
}

/// ` (kind)`, or nothing for no kind.
fn in_parens(kind: &str) -> String {
    if kind.is_empty() {
        String::new()
    } else {
        format!(" ({kind})")
    }
}

/// `; its output ended: tail`, or nothing for no tail.
fn output_tail(tail: &str) -> String {
    if tail.is_empty() {
        String::new()
    } else {
        format!("; its output ended: {tail}")
    }
}

/// How the Ray engine is set up.
pub struct RayOptions {
    /// The dashboard's address (`http://HEAD:8265`).
    pub address: String,
    /// Submissions again of a job lost without keel failing.
    pub retries: u32,
    /// `entrypoint_num_cpus` of each job.
    pub cpus: f64,
    /// A keel binary every node has (else this one is shipped).
    pub keel_on_nodes: Option<String>,
    /// Environment variables every job gets.
    pub env: BTreeMap<String, String>,
    /// The check's time limit.
    pub check_timeout: Duration,
    /// Global flags every task's keel gets.
    pub common: Vec<String>,
    /// Files put under the job's `$KEEL_HOME` (relative path → bytes): the user's
    /// configuration and profile.
    pub home_files: Vec<(String, Vec<u8>)>,
    /// The session store here.
    pub store: Store,
    /// This keel binary.
    pub exe: PathBuf,
}

/// Job states Ray is done with.
const TERMINAL: [&str; 3] = ["SUCCEEDED", "FAILED", "STOPPED"];

/// Ray's reasons for a failed job that say nothing about the task: its node or its
/// supervisor went away, or it never started. Such a job is submitted again.
const LOST: [&str; 4] = [
    "JOB_SUPERVISOR_ACTOR_DIED",
    "JOB_SUPERVISOR_ACTOR_UNKNOWN_FAILURE",
    "JOB_SUPERVISOR_ACTOR_START_FAILURE",
    "JOB_SUPERVISOR_ACTOR_START_TIMEOUT",
];

/// Runs attempts as Ray jobs.
pub struct RayEngine {
    rt: tokio::runtime::Runtime,
    shared: Arc<Shared>,
    /// Running tasks: index → its current job's submission id (once submitted).
    running: HashMap<usize, Arc<Mutex<Option<String>>>>,
}

struct Shared {
    opts: RayOptions,
    api: Api,
    /// The shipped binary's package URI, once uploaded.
    binary: tokio::sync::OnceCell<String>,
    /// Ctrl-C: no new job, running ones are being stopped.
    stop: AtomicBool,
}

impl RayEngine {
    /// An engine for the cluster at `opts.address`. Nothing is contacted yet: an unreachable
    /// cluster fails each task with a message saying so.
    pub fn new(opts: RayOptions) -> Result<RayEngine, RayError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map_err(|error| RayError::Runtime { error })?;
        let api = Api::new(&opts.address)?;
        Ok(RayEngine {
            rt,
            shared: Arc::new(Shared {
                opts,
                api,
                binary: tokio::sync::OnceCell::new(),
                stop: AtomicBool::new(false),
            }),
            running: HashMap::new(),
        })
    }
}

impl Engine for RayEngine {
    fn start(&mut self, attempt: Attempt, tx: Sender<Msg>) -> Result<(), EngineError> {
        let slot = Arc::new(Mutex::new(None));
        self.running.insert(attempt.index, slot.clone());
        let shared = self.shared.clone();
        self.rt
            .spawn(async move { run_task(shared, slot, attempt, tx).await });
        Ok(())
    }

    fn ended(&mut self, index: usize) {
        self.running.remove(&index);
    }

    fn interrupt(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        for slot in self.running.values() {
            let job = slot.lock().ok().and_then(|j| j.clone());
            if let Some(job) = job {
                let shared = self.shared.clone();
                self.rt.spawn(async move {
                    let _ = shared.api.stop(&job).await;
                });
            }
        }
    }

    fn check_alone(&mut self, index: usize, attempt: &Attempt, tx: Sender<Msg>) {
        let shared = self.shared.clone();
        let job = attempt.job.clone();
        let has_check = attempt.check.is_some();
        let slot = Arc::new(Mutex::new(None));
        self.running.insert(index, slot.clone());
        let attempt = attempt.clone();
        self.rt.spawn(async move {
            let (check, ms) = match (has_check, job) {
                (false, _) => (CheckOutcome::None, 0),
                (true, None) => (
                    CheckOutcome::Error(
                        "the session ended on a Ray node and no job of it is recorded; the check \
                         cannot run again (its workspace stayed on the node)"
                            .into(),
                    ),
                    0,
                ),
                (true, Some(job)) => match shared.api.logs(&job).await {
                    // A stop cut the check short after the session ended: run it again.
                    Ok(text) if matches!(last_check(&text), Some((CheckOutcome::Stopped, _))) => {
                        check_again(&shared, &slot, &attempt, &tx).await
                    }
                    Ok(text) => last_check(&text).unwrap_or_else(|| {
                        (
                            CheckOutcome::Error(format!(
                                "the Ray job {job} reported no check result, and the check \
                                 cannot run again (its workspace stayed on the node)"
                            )),
                            0,
                        )
                    }),
                    Err(e) => (CheckOutcome::Error(e.to_string()), 0),
                },
            };
            let _ = tx.send(Msg::Finished {
                index,
                check,
                check_wall: Duration::from_millis(ms),
            });
        });
    }

    fn reattach(&mut self, runs: &[(usize, String, PathBuf)]) -> Vec<Reattached> {
        // All at once: a job left pending waits for a CPU the others hold, so stopping them
        // one after another would let the others run on unread meanwhile.
        let handles: Vec<_> = runs
            .iter()
            .map(|(index, job, workspace)| {
                let shared = self.shared.clone();
                self.rt
                    .spawn(reattach_one(shared, *index, job.clone(), workspace.clone()))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| self.rt.block_on(h).unwrap_or_default())
            .collect()
    }
}

/// The check of a task whose session ended, run again by a job of its own in the workspace
/// that came back (a stop had cut it short).
async fn check_again(
    shared: &Arc<Shared>,
    slot: &Mutex<Option<String>>,
    attempt: &Attempt,
    tx: &Sender<Msg>,
) -> (CheckOutcome, u64) {
    if shared.stop.load(Ordering::SeqCst) {
        return (CheckOutcome::Stopped, 0);
    }
    let store = shared.opts.store.clone();
    let mut reader = Reader::new(attempt.index, store, attempt.workspace.clone(), None);
    let job = match submit(shared, attempt, None, None, &mut reader).await {
        Ok(job) => job,
        Err(e) => return (CheckOutcome::Error(e.to_string()), 0),
    };
    if let Ok(mut s) = slot.lock() {
        *s = Some(job.clone());
    }
    let _ = tx.send(Msg::Job {
        index: attempt.index,
        id: job.clone(),
    });
    if shared.stop.load(Ordering::SeqCst) {
        let _ = shared.api.stop(&job).await;
    }
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&attempt.log)
        .ok();
    let end = follow(shared, &job, &mut reader, tx, log.as_mut()).await;
    let outcome = match end {
        End::Ran => match (reader.check.take(), reader.bring_back(&attempt.workspace)) {
            (_, Err(e)) => (CheckOutcome::Error(e.to_string()), 0),
            (Some(check), Ok(())) => check,
            (None, Ok(())) => (CheckOutcome::Stopped, 0),
        },
        End::Lost(why) => (
            CheckOutcome::Error(format!(
                "the Ray job {job} that ran the check was lost: {why}"
            )),
            0,
        ),
        End::Failed(e) => (CheckOutcome::Error(e.to_string()), 0),
    };
    reader.mirror.close();
    outcome
}

/// Stop `job` if it still runs, wait for its end, and read its output into the session here.
async fn reattach_one(
    shared: Arc<Shared>,
    index: usize,
    job: String,
    workspace: PathBuf,
) -> Reattached {
    let Ok(info) = shared.api.status(&job).await else {
        return Reattached::default();
    };
    let stopped = !is_terminal(&info);
    if stopped {
        // It ran on while no batch was reading it: stop it and read it to its end.
        let _ = shared.api.stop(&job).await;
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(250)).await;
            match shared.api.status(&job).await {
                Ok(info) if is_terminal(&info) => break,
                Ok(_) => {}
                Err(_) => break,
            }
        }
    }
    let Ok(text) = shared.api.logs(&job).await else {
        return Reattached {
            session: None,
            stopped,
        };
    };
    let mut reader = Reader::new(index, shared.opts.store.clone(), workspace.clone(), None);
    let mut sink = Vec::new();
    reader.feed(&text, None, &mut sink);
    reader.mirror.close();
    if reader.exited.is_some() {
        // It ran to its end (or its stop): its workspace came back with it.
        let _ = reader.bring_back(&workspace);
    }
    Reattached {
        session: reader.mirror.id.clone(),
        stopped,
    }
}

/// One task, from its first submission to its end (retries included).
async fn run_task(
    shared: Arc<Shared>,
    slot: Arc<Mutex<Option<String>>>,
    attempt: Attempt,
    tx: Sender<Msg>,
) {
    let index = attempt.index;
    let started = Instant::now();
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&attempt.log)
        .ok();
    let mut reader = Reader::new(
        index,
        shared.opts.store.clone(),
        attempt.workspace.clone(),
        attempt.resume.clone(),
    );
    let mut prompt = attempt.prompt.clone();
    let mut retries = 0;
    let (code, check, check_ms, error) = loop {
        if shared.stop.load(Ordering::SeqCst) {
            break (None, CheckOutcome::None, 0, None);
        }
        let resume = reader.mirror.id.clone();
        let job = match submit(
            &shared,
            &attempt,
            resume.as_deref(),
            Some(&prompt),
            &mut reader,
        )
        .await
        {
            Ok(job) => job,
            Err(e) => break (None, CheckOutcome::None, 0, Some(RunError::from(e))),
        };
        if let Ok(mut s) = slot.lock() {
            *s = Some(job.clone());
        }
        let _ = tx.send(Msg::Job {
            index,
            id: job.clone(),
        });
        if shared.stop.load(Ordering::SeqCst) {
            // Ctrl-C came while it was being submitted: `interrupt` did not see its id.
            let _ = shared.api.stop(&job).await;
        }
        reader.reset_job();
        match follow(&shared, &job, &mut reader, &tx, log.as_mut()).await {
            End::Ran => {
                let check = match (&reader.check, &attempt.check) {
                    (Some((c, _)), _) => c.clone(),
                    (None, Some(_)) => CheckOutcome::Stopped,
                    (None, None) => CheckOutcome::None,
                };
                let ms = reader.check.as_ref().map_or(0, |(_, ms)| *ms);
                let error = reader
                    .bring_back(&attempt.workspace)
                    .err()
                    .map(RunError::from);
                break (reader.exited.flatten(), check, ms, error);
            }
            End::Lost(why)
                if retries < shared.opts.retries && !shared.stop.load(Ordering::SeqCst) =>
            {
                retries += 1;
                let _ = tx.send(Msg::Retry {
                    index,
                    reason: format!("the Ray job {job} was lost ({why})"),
                });
                prompt = lost_prompt(&attempt, reader.mirror.id.is_some());
            }
            End::Lost(why) => {
                break (
                    None,
                    CheckOutcome::None,
                    0,
                    Some(RunError::Lost { job, why }),
                );
            }
            End::Failed(why) => break (reader.exited.flatten(), CheckOutcome::None, 0, Some(why)),
        }
    };
    reader.mirror.close();
    if let Some(error) = error {
        let _ = tx.send(Msg::Error {
            index,
            error: error.into(),
        });
    }
    let _ = tx.send(Msg::Exited {
        index,
        code,
        wall: started.elapsed(),
    });
    let _ = tx.send(Msg::Finished {
        index,
        check,
        check_wall: Duration::from_millis(check_ms),
    });
}

/// The prompt of a task's next job after its node was lost.
fn lost_prompt(attempt: &Attempt, has_session: bool) -> String {
    if has_session {
        format!(
            "The machine running this task ({}) stopped before it ended, and the task moved to \
             another one. Continue the task from where it stopped; do not redo steps whose \
             results you already have. Files you changed on the other machine may be back as \
             they were when the task started: check them before going on.",
            attempt.id
        )
    } else {
        attempt.prompt.clone()
    }
}

/// How a job ended, for its task.
enum End {
    /// It ran to its end (keel's exit and the check, if any, are in the [`Reader`]), or was
    /// stopped.
    Ran,
    /// Lost without keel failing: submit again.
    Lost(String),
    /// Failed: the task fails with this.
    Failed(RunError),
}

/// Follow `job` to its end: its output into `reader`, its state from Ray.
async fn follow(
    shared: &Arc<Shared>,
    job: &str,
    reader: &mut Reader,
    tx: &Sender<Msg>,
    mut log: Option<&mut std::fs::File>,
) -> End {
    let mut wait = Duration::from_millis(50);
    let mut errors = 0u32;
    loop {
        tokio::time::sleep(wait).await;
        let before = reader.consumed;
        if let Ok(text) = shared.api.logs(job).await {
            reader.feed(&text, Some(tx), &mut log);
        }
        let info = match shared.api.status(job).await {
            Ok(info) => {
                errors = 0;
                info
            }
            Err(e) => {
                errors += 1;
                if errors >= 60 {
                    return End::Failed(RunError::Contact {
                        job: job.to_owned(),
                        error: e,
                    });
                }
                wait = Duration::from_millis(1000);
                continue;
            }
        };
        if is_terminal(&info) {
            // What the job printed last (its session's end, keel's exit, the workspace) is
            // read now. A job that ended on a live node has it all in its output, read again
            // until the read succeeds; a lost node's output went with it.
            let mut tries = 0;
            let mut wait = Duration::from_millis(250);
            loop {
                match shared.api.logs(job).await {
                    Ok(text) => {
                        reader.feed(&text, Some(tx), &mut log);
                        break;
                    }
                    Err(_) if is_lost(&info) => break,
                    Err(error) if tries >= FINAL_READS => {
                        return End::Failed(RunError::Unread {
                            job: job.to_owned(),
                            error,
                        });
                    }
                    Err(_) => {
                        tries += 1;
                        tokio::time::sleep(wait).await;
                        wait = (wait * 2).min(Duration::from_secs(2));
                    }
                }
            }
            return classify(job, &info, reader);
        }
        // New output: look again soon; quiet: back off to a second.
        wait = if reader.consumed > before {
            Duration::from_millis(50)
        } else {
            (wait * 2).min(Duration::from_millis(1000))
        };
    }
}

/// Reads of an ended job's output that may fail before its task gives up on it (about a
/// minute, backing off to 2 s).
const FINAL_READS: u32 = 32;

/// Ray failed the job because its supervisor (or its node) went away.
fn is_lost(info: &Value) -> bool {
    info.get("error_type")
        .and_then(Value::as_str)
        .is_some_and(|kind| LOST.contains(&kind))
}

fn is_terminal(info: &Value) -> bool {
    info.get("status")
        .and_then(Value::as_str)
        .is_some_and(|s| TERMINAL.contains(&s))
}

fn classify(job: &str, info: &Value, reader: &Reader) -> End {
    let status = info.get("status").and_then(Value::as_str).unwrap_or("");
    // Ray's message can carry the job's whole log: its first line is the reason.
    let message = info
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("")
        .lines()
        .next()
        .unwrap_or("")
        .trim()
        .trim_end_matches(':')
        .to_owned();
    if let Some(e) = &reader.error {
        return End::Failed(RunError::OnNode {
            job: job.to_owned(),
            message: e.clone(),
        });
    }
    match status {
        "SUCCEEDED" | "STOPPED" => End::Ran,
        _ if reader.exited.is_some() => End::Ran,
        _ => {
            let kind = info.get("error_type").and_then(Value::as_str).unwrap_or("");
            if LOST.contains(&kind) {
                End::Lost(if message.is_empty() {
                    kind.to_owned()
                } else {
                    message
                })
            } else {
                End::Failed(RunError::Failed {
                    job: job.to_owned(),
                    kind: kind.to_owned(),
                    message,
                    tail: reader.tail.join(" | "),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_whose_keel_ran_and_whose_workspace_did_not_come_back_says_so() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let ws = dir.join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let store = Store::new(dir.join("home"));
        let exited = format!("{{\"{}\":\"exited\",\"code\":1}}\n", crate::job::LINE);
        // keel ran to its end; the output stops before the workspace.
        let mut reader = Reader::new(0, store.clone(), ws.clone(), None);
        reader.feed(&exited, None, &mut Vec::new());
        let error = reader.bring_back(&ws).unwrap_err();
        assert!(matches!(error, SendBackError::Missing), "{error}");
        // keel never ran (stopped before it started): nothing was to come back.
        let mut reader = Reader::new(0, store, ws.clone(), None);
        reader.feed("Running entrypoint\n", None, &mut Vec::new());
        reader.bring_back(&ws).unwrap();
    }

    #[test]
    fn a_failed_job_says_its_kind_and_the_end_of_its_output_when_it_has_them() {
        let failed = |kind: &str, tail: &str| {
            RunError::Failed {
                job: "keel-t-1".into(),
                kind: kind.into(),
                message: "Job entrypoint command failed with exit code 1".into(),
                tail: tail.into(),
            }
            .to_string()
        };
        assert_eq!(
            failed("", ""),
            "the Ray job keel-t-1 failed: Job entrypoint command failed with exit code 1"
        );
        assert_eq!(
            failed("RUNTIME_ENV_SETUP_FAILED", "no space | left"),
            "the Ray job keel-t-1 failed (RUNTIME_ENV_SETUP_FAILED): Job entrypoint command \
             failed with exit code 1; its output ended: no space | left"
        );
        let engine: EngineError = RunError::Lost {
            job: "keel-t-2".into(),
            why: "JOB_SUPERVISOR_ACTOR_DIED".into(),
        }
        .into();
        assert_eq!(
            engine.to_string(),
            "the Ray job keel-t-2 was lost: JOB_SUPERVISOR_ACTOR_DIED"
        );
    }
}
