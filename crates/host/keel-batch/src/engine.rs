//! Where a task's session runs: the [`Engine`] seam. The local engine runs child processes of
//! this one; the Ray engine runs jobs on a cluster through its Jobs REST API and rebuilds their
//! sessions here. Both report through the same [`Msg`]s, so scheduling, state, scoring and
//! results stay shared.

use keel_protocol::{EventBody, LogRecord, SessionEvent};
use keel_session::store::parse_record;
use std::path::PathBuf;
use std::sync::mpsc::Sender;
use std::time::Duration;

/// What went wrong running a task outside its session: it becomes the task's `error`.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The task's log file could not be opened.
    #[error("cannot open {}: {error}", path.display())]
    Log {
        /// The log file.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// The task's `keel` could not be started.
    #[error("cannot start {}: {error}", exe.display())]
    Start {
        /// The binary.
        exe: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// The task's Ray job went wrong.
    #[error(transparent)]
    Ray(Box<crate::ray::RunError>),
}

impl From<crate::ray::RunError> for EngineError {
    fn from(error: crate::ray::RunError) -> Self {
        EngineError::Ray(Box::new(error))
    }
}

/// One process run for a task: a new session, or a resumed one.
#[derive(Debug, Clone)]
pub struct Attempt {
    /// The task's index in the batch (names it in every [`Msg`]).
    pub index: usize,
    /// The task's id.
    pub id: String,
    /// Its workspace (canonical).
    pub workspace: PathBuf,
    /// The prompt of the turn to run.
    pub prompt: String,
    /// `Some(session)`: `keel resume` it (crash repair first) with `prompt`.
    pub resume: Option<String>,
    /// `--model`.
    pub model: Option<String>,
    /// The task's own global flags.
    pub flags: Vec<String>,
    /// The check to run when the session ends.
    pub check: Option<String>,
    /// The task's log file (the sessions' stderr, the check's output).
    pub log: PathBuf,
    /// The engine's record of the task's last run (a Ray job's submission id), if any.
    pub job: Option<String>,
}

/// How a check went.
#[derive(Debug, Clone, PartialEq)]
pub enum CheckOutcome {
    /// The task has no check.
    None,
    /// Exit 0.
    Passed,
    /// Another exit status (-1: killed by a signal).
    Failed(i32),
    /// Killed at its time limit (seconds).
    Timeout(u64),
    /// Not run, or stopped, because the batch was interrupted.
    Stopped,
    /// Could not run.
    Error(String),
}

impl CheckOutcome {
    /// As a JSON object (how a Ray job reports its check).
    pub fn to_json(&self) -> serde_json::Value {
        let (exit, secs, error) = match self {
            CheckOutcome::Failed(code) => (Some(*code), None, None),
            CheckOutcome::Passed => (Some(0), None, None),
            CheckOutcome::Timeout(secs) => (None, Some(*secs), None),
            CheckOutcome::Error(e) => (None, None, Some(e.as_str())),
            _ => (None, None, None),
        };
        serde_json::json!({"outcome": self.word(), "exit": exit, "secs": secs, "error": error})
    }

    /// Back from [`CheckOutcome::to_json`].
    pub fn from_json(v: &serde_json::Value) -> CheckOutcome {
        let int = |k: &str| v.get(k).and_then(serde_json::Value::as_i64);
        match v.get("outcome").and_then(serde_json::Value::as_str) {
            None => CheckOutcome::None,
            Some("passed") => CheckOutcome::Passed,
            Some("failed") => CheckOutcome::Failed(
                int("exit")
                    .and_then(|c| i32::try_from(c).ok())
                    .unwrap_or(-1),
            ),
            Some("timeout") => {
                CheckOutcome::Timeout(int("secs").and_then(|s| u64::try_from(s).ok()).unwrap_or(0))
            }
            Some("stopped") => CheckOutcome::Stopped,
            Some(other) => CheckOutcome::Error(
                v.get("error")
                    .and_then(serde_json::Value::as_str)
                    .map_or_else(|| format!("the check ended {other}"), str::to_owned),
            ),
        }
    }

    /// The word results.jsonl uses (`None` for no check).
    pub fn word(&self) -> Option<&'static str> {
        match self {
            CheckOutcome::None => None,
            CheckOutcome::Passed => Some("passed"),
            CheckOutcome::Failed(_) => Some("failed"),
            CheckOutcome::Timeout(_) => Some("timeout"),
            CheckOutcome::Stopped => Some("stopped"),
            CheckOutcome::Error(_) => Some("error"),
        }
    }
}

/// What an engine reports about a running task.
#[derive(Debug)]
pub enum Msg {
    /// The engine's record of this run (a Ray job's submission id), kept in state.json.
    Job {
        /// Task index.
        index: usize,
        /// The record.
        id: String,
    },
    /// The run was lost without keel failing (its node died) and is being run again,
    /// resuming its session if it had one.
    Retry {
        /// Task index.
        index: usize,
        /// What happened, in words.
        reason: String,
    },
    /// Something went wrong outside the session (the cluster, the job); it goes into the
    /// task's `error`.
    Error {
        /// Task index.
        index: usize,
        /// What.
        error: EngineError,
    },
    /// The session's id (its header arrived).
    Session {
        /// Task index.
        index: usize,
        /// Session id.
        id: String,
    },
    /// A model request answered, with its usage.
    Usage {
        /// Task index.
        index: usize,
        /// Prompt tokens (cached included).
        prompt: u64,
        /// Of which from the cache.
        cached: u64,
        /// Output tokens.
        output: u64,
    },
    /// The session's process ended.
    Exited {
        /// Task index.
        index: usize,
        /// Its exit code (`None`: killed by a signal).
        code: Option<i32>,
        /// How long it ran.
        wall: Duration,
    },
    /// The check (if any) is done: the task's slot is free.
    Finished {
        /// Task index.
        index: usize,
        /// How its check went.
        check: CheckOutcome,
        /// How long the check ran.
        check_wall: Duration,
    },
}

/// Runs tasks' sessions somewhere.
pub trait Engine {
    /// Start `attempt`; its [`Msg`]s go to `tx`, ending with [`Msg::Finished`].
    fn start(&mut self, attempt: Attempt, tx: Sender<Msg>) -> Result<(), EngineError>;
    /// The task's [`Msg::Finished`] was received.
    fn ended(&mut self, index: usize);
    /// Stop every running session cleanly (their turns end interrupted) and every check.
    fn interrupt(&mut self);
    /// Score a task whose session already ended without running it again: its check alone
    /// (local), or the check's result read from the job that ran it (Ray). Ends with
    /// [`Msg::Finished`].
    fn check_alone(&mut self, index: usize, attempt: &Attempt, tx: Sender<Msg>);
    /// Before anything is planned: the runs an earlier `keel batch` left running when it died
    /// (task index, the engine's record of the run, the task's workspace). Make sure each is
    /// over and everything it reported is in the session's log here; one answer per run, in
    /// order. The local engine has nothing to do: the batch's death killed its children, which
    /// wrote their logs themselves.
    fn reattach(&mut self, runs: &[(usize, String, PathBuf)]) -> Vec<Reattached> {
        runs.iter().map(|_| Reattached::default()).collect()
    }
}

/// What [`Engine::reattach`] found of a task's last run.
#[derive(Debug, Default)]
pub struct Reattached {
    /// The session it reported.
    pub session: Option<String>,
    /// It was still running, and was stopped now (its turn ended interrupted: resume it).
    pub stopped: bool,
}

/// What one line of `keel run --json` tells the scheduler (its session id, a request's usage).
pub fn read_event(index: usize, line: &str) -> Option<Msg> {
    match parse_record(line).ok()? {
        LogRecord::Header(h) => Some(Msg::Session { index, id: h.id.0 }),
        LogRecord::Event(ev) => usage_of(index, &ev),
        LogRecord::Packed(_) => None,
    }
}

/// The usage an event reports (a model request answered), as a [`Msg::Usage`].
pub fn usage_of(index: usize, ev: &SessionEvent) -> Option<Msg> {
    match &ev.body {
        EventBody::AssistantMessage(m) => m.usage.as_ref().map(|u| Msg::Usage {
            index,
            prompt: u.prompt_tokens(),
            cached: u.cache_read_tokens,
            output: u.output_tokens,
        }),
        _ => None,
    }
}
