//! Where a task's session runs: the [`Engine`] seam. The local engine (child processes of this
//! one) is the only one so far; a remote one (Ray's Jobs API) implements the same four calls and
//! reports through the same [`Msg`]s, so scheduling, state, scoring and results stay shared.

use keel_protocol::{EventBody, LogRecord};
use keel_session::store::parse_record;
use std::path::PathBuf;
use std::sync::mpsc::Sender;
use std::time::Duration;

/// One process run for a task: a new session, or a resumed one.
#[derive(Debug, Clone)]
pub struct Attempt {
    /// The task's index in the batch (names it in every [`Msg`]).
    pub index: usize,
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
    fn start(&mut self, attempt: Attempt, tx: Sender<Msg>) -> Result<(), String>;
    /// The task's [`Msg::Finished`] was received.
    fn ended(&mut self, index: usize);
    /// Stop every running session cleanly (their turns end interrupted) and every check.
    fn interrupt(&mut self);
    /// Run only the check of a task whose session already ended (ends with [`Msg::Finished`]).
    fn check_alone(&mut self, index: usize, attempt: &Attempt, tx: Sender<Msg>);
}

/// What one line of `keel run --json` tells the scheduler (its session id, a request's usage).
pub fn read_event(index: usize, line: &str) -> Option<Msg> {
    match parse_record(line).ok()? {
        LogRecord::Header(h) => Some(Msg::Session { index, id: h.id.0 }),
        LogRecord::Event(ev) => match ev.body {
            EventBody::AssistantMessage(m) => m.usage.map(|u| Msg::Usage {
                index,
                prompt: u.prompt_tokens(),
                cached: u.cache_read_tokens,
                output: u.output_tokens,
            }),
            _ => None,
        },
        LogRecord::Packed(_) => None,
    }
}
