//! The scheduler, engine-neutral: [`Batch::open`] reads the task file ([`crate::tasks`]) and
//! `state.json` ([`crate::state`]); [`Batch::run`] makes each task's workspace
//! ([`crate::workspace`]), decides per task whether to start a session, resume one (crash
//! repair, then a "continue" turn) or only score one that already ended, keeps at most N
//! running on its [`Engine`], and writes results.jsonl from the sessions' logs
//! ([`crate::score`]). What it has to say goes to an [`Observer`].

use crate::engine::{Attempt, CheckOutcome, Engine, EngineError, Msg};
use crate::signals;
use crate::state::{State, StateError, Status};
use crate::tasks::{self, BadLine, Task};
use crate::workspace;
use keel_session::Store;
use serde_json::Value;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

/// Why a batch could not be opened or run (a task that fails is a result, not this).
#[derive(Debug, thiserror::Error)]
pub enum BatchError {
    /// The out dir (or its `work/`, `logs/`) could not be made.
    #[error("cannot create {}: {error}", path.display())]
    Create {
        /// The directory.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// The task file could not be read.
    #[error("cannot read the task file {}: {error}", path.display())]
    ReadTasks {
        /// The task file.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// `state.json` could not be read.
    #[error(transparent)]
    State(#[from] StateError),
    /// `state.json` or results.jsonl could not be written.
    #[error("cannot write {}: {error}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
}

/// A model's price, where one is known.
pub type PriceOf = dyn Fn(&str) -> Option<keel_llm::Price>;

/// What a batch's sessions cost: the model a task without one uses, and each model's price.
pub struct Pricing {
    /// The model of a task that names none (the batch's `--model`, configuration or default).
    pub default_model: String,
    /// A model's price, where one is known (the configuration's `[models]` over the list
    /// prices).
    pub price: Box<PriceOf>,
}

/// The live counters of a run, for an [`Observer`].
#[derive(Debug, Clone, Default)]
pub struct Counters {
    /// Tasks this run has to do.
    pub total: usize,
    /// Of which ended (any outcome).
    pub done: usize,
    /// Of which ended without completing or with a failed check.
    pub failed: usize,
    /// Sessions running now.
    pub running: usize,
    /// Tokens seen this run (prompt + output).
    pub tokens: u64,
    /// Dollars this run, where a price is known.
    pub cost: f64,
    /// Tokens were seen for a model without a price: `cost` leaves them out.
    pub unpriced: bool,
}

/// Where a running batch reports (the binary: a live line and one line per event on stderr).
pub trait Observer {
    /// One line to say: a task ended, resumes or runs again; tasks skipped; a bad task line.
    fn say(&mut self, line: &str, counters: &Counters);
    /// The counters may have changed: `now` when a task just ended, else on every turn of the
    /// scheduler's loop (about ten times a second).
    fn update(&mut self, counters: &Counters, now: bool);
    /// The run is over: nothing more is said.
    fn finish(&mut self);
}

/// How a run ended.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// results.jsonl's lines, in task file order.
    pub results: Vec<Value>,
    /// Ctrl-C (or SIGTERM) stopped it: the same command resumes it.
    pub interrupted: bool,
}

impl Outcome {
    /// Every task completed, and every check that ran passed.
    pub fn all_passed(&self) -> bool {
        self.results.iter().all(|r| {
            r.get("outcome").and_then(Value::as_str) == Some("completed")
                && r.get("check")
                    .and_then(Value::as_str)
                    .is_none_or(|c| c == "passed")
        })
    }
}

/// A batch: its task file read, its out dir and `state.json` open.
pub struct Batch {
    out: PathBuf,
    tasks: Vec<Task>,
    bad: Vec<BadLine>,
    state: State,
    store: Store,
}

impl Batch {
    /// Open the batch of `tasks_file` (its relative workspace paths are relative to its
    /// directory) in `out` (created, with `work/` and `logs/`; `state.json` there is picked
    /// up). Sessions are looked up and mirrored in `store`.
    pub fn open(tasks_file: &Path, out: &Path, store: Store) -> Result<Batch, BatchError> {
        for dir in [out.to_path_buf(), out.join("work"), out.join("logs")] {
            std::fs::create_dir_all(&dir).map_err(|error| BatchError::Create {
                path: dir.clone(),
                error,
            })?;
        }
        let out = out.canonicalize().map_err(|error| BatchError::Create {
            path: out.to_path_buf(),
            error,
        })?;
        let (tasks, bad) = tasks::read(tasks_file).map_err(|error| BatchError::ReadTasks {
            path: tasks_file.to_path_buf(),
            error,
        })?;
        let state = State::load(&out)?;
        Ok(Batch {
            out,
            tasks,
            bad,
            state,
            store,
        })
    }

    /// The out dir (canonical).
    pub fn out(&self) -> &Path {
        &self.out
    }

    /// Run every task not done yet, `concurrency` at a time on `engine`, until all have a
    /// result or Ctrl-C (SIGINT or SIGTERM, caught from here on) stops them; results.jsonl
    /// is rewritten after each.
    pub fn run(
        self,
        engine: &mut dyn Engine,
        concurrency: usize,
        pricing: Pricing,
        observer: &mut dyn Observer,
    ) -> Result<Outcome, BatchError> {
        let live = self.tasks.iter().map(|_| Live::default()).collect();
        let mut run = Run {
            out: self.out,
            tasks: self.tasks,
            bad: self.bad,
            state: self.state,
            store: self.store,
            pricing,
            observer,
            live,
            counters: Counters::default(),
            interrupted: false,
            ended: Vec::new(),
        };
        run.run(engine, concurrency)
    }
}

/// What this run knows of a task.
#[derive(Default)]
pub(crate) struct Live {
    /// Its workspace (canonical), once made or found.
    pub(crate) workspace: Option<PathBuf>,
    /// The last process's exit code.
    pub(crate) code: Option<i32>,
    /// Time its processes ran this run.
    pub(crate) wall: Duration,
    /// When its last attempt started (ms since epoch).
    pub(crate) started_at: keel_protocol::TimeMs,
    /// How long its check ran (ms).
    pub(crate) check_ms: u64,
    /// What the engine reported going wrong outside the session.
    pub(crate) error: Option<EngineError>,
    /// Tokens seen live (for the progress line).
    prompt: u64,
    output: u64,
    cached: u64,
}

/// A batch while it runs.
pub(crate) struct Run<'a> {
    pub(crate) out: PathBuf,
    pub(crate) tasks: Vec<Task>,
    pub(crate) bad: Vec<BadLine>,
    pub(crate) state: State,
    pub(crate) store: Store,
    pub(crate) pricing: Pricing,
    pub(crate) observer: &'a mut dyn Observer,
    pub(crate) live: Vec<Live>,
    pub(crate) counters: Counters,
    /// Ctrl-C (or SIGTERM) was received.
    pub(crate) interrupted: bool,
    /// Tasks whose slot is free, to score.
    ended: Vec<(usize, CheckOutcome)>,
}

/// What to do with a task now.
enum Plan {
    /// Make its workspace and start a session.
    Fresh,
    /// Resume its session (it was interrupted or crashed).
    Resume(String),
    /// Its session ended: score it (the check) without running it again.
    Settled,
}

impl Run<'_> {
    fn run(&mut self, engine: &mut dyn Engine, concurrency: usize) -> Result<Outcome, BatchError> {
        let mut queue: VecDeque<usize> = (0..self.tasks.len())
            .filter(|&i| {
                self.state
                    .tasks
                    .get(&self.tasks[i].id)
                    .is_none_or(|t| t.status != Status::Done)
            })
            .collect();
        let skipped = self.tasks.len() - queue.len();
        self.counters.total = queue.len();
        if skipped > 0 {
            self.say(&format!(
                "{skipped} task(s) already done in {} (skipped)",
                self.out.display()
            ));
        }
        for i in 0..self.bad.len() {
            let line = self.bad[i].to_string();
            self.say(&line);
        }
        self.write_results()?;
        self.reattach(engine, &queue)?;
        signals::catch();
        let (tx, rx) = mpsc::channel();
        let mut seen = signals::received();
        loop {
            let signals = signals::received();
            if signals != seen {
                seen = signals;
                if !self.interrupted {
                    self.say(
                        "interrupted: stopping the running sessions (run the same command again to resume)",
                    );
                }
                self.interrupted = true;
                engine.interrupt();
            }
            while !self.interrupted && self.counters.running < concurrency {
                let Some(i) = queue.pop_front() else { break };
                if self.launch(i, engine, &tx)? {
                    self.counters.running += 1;
                }
            }
            // Score what ended after the freed slots were filled (above): the bookkeeping
            // (the session's log read, state.json synced) is off the path from one task's end
            // to the next one's start. A crash in between finds the ended session settled and
            // only scores it again.
            for (index, check) in std::mem::take(&mut self.ended) {
                self.finish(index, check)?;
            }
            if self.counters.running == 0 && (self.interrupted || queue.is_empty()) {
                break;
            }
            self.observer.update(&self.counters, false);
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(msg) => {
                    self.on_msg(msg, engine)?;
                    // Everything else already reported, so every slot freed meanwhile is
                    // filled before any scoring.
                    while let Ok(msg) = rx.try_recv() {
                        self.on_msg(msg, engine)?;
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        self.observer.finish();
        let results = self.write_results()?;
        Ok(Outcome {
            results,
            interrupted: self.interrupted,
        })
    }

    /// Say `line` to the observer.
    pub(crate) fn say(&mut self, line: &str) {
        self.observer.say(line, &self.counters);
    }

    /// Write `state.json`.
    pub(crate) fn save(&self) -> Result<(), BatchError> {
        self.state
            .save(&self.out)
            .map_err(|error| BatchError::Write {
                path: self.out.join("state.json"),
                error,
            })
    }

    /// Runs the last batch left running when it died (a Ray job goes on without it): each is
    /// over when this returns, and what it reported is in its session here.
    fn reattach(
        &mut self,
        engine: &mut dyn Engine,
        queue: &VecDeque<usize>,
    ) -> Result<(), BatchError> {
        let runs: Vec<(usize, String, PathBuf)> = queue
            .iter()
            .filter_map(|&i| {
                let t = self.state.tasks.get(&self.tasks[i].id)?;
                let job = t.job.clone().filter(|_| t.status == Status::Running)?;
                Some((i, job, self.workspace_dir(i).canonicalize().ok()?))
            })
            .collect();
        if runs.is_empty() {
            return Ok(());
        }
        self.say(&format!(
            "{} task(s) were running when the last batch stopped: picking their runs up",
            runs.len()
        ));
        for ((i, _, _), found) in runs.iter().zip(engine.reattach(&runs)) {
            let record = self.state.task(&self.tasks[*i].id);
            if let Some(session) = found.session {
                record.session.get_or_insert(session);
            }
            if found.stopped {
                record.status = Status::Interrupted;
            }
        }
        self.save()
    }

    pub(crate) fn workspace_dir(&self, i: usize) -> PathBuf {
        self.out.join("work").join(&self.tasks[i].id)
    }

    pub(crate) fn log_path(&self, i: usize) -> PathBuf {
        self.out
            .join("logs")
            .join(format!("{}.log", self.tasks[i].id))
    }

    /// The session this task has: the one recorded, else one that ran in its workspace.
    fn known_session(&self, i: usize) -> Option<String> {
        let id = &self.tasks[i].id;
        if let Some(s) = self.state.tasks.get(id).and_then(|t| t.session.clone()) {
            return Some(s);
        }
        let ws = self.workspace_dir(i).canonicalize().ok()?;
        let mut found = self.store.list(Some(&ws));
        found.retain(|s| s.cwd.as_deref() == Some(&*ws.to_string_lossy()));
        found.into_iter().next().map(|s| s.id)
    }

    /// Start task `i` (or score it); `false` when it could not start (recorded).
    fn launch(
        &mut self,
        i: usize,
        engine: &mut dyn Engine,
        tx: &mpsc::Sender<Msg>,
    ) -> Result<bool, BatchError> {
        let task = self.tasks[i].clone();
        let stopped = self
            .state
            .tasks
            .get(&task.id)
            .is_some_and(|t| t.status == Status::Interrupted);
        let plan = match self.known_session(i) {
            Some(session) => match self.session_stats(i, &session) {
                Ok(stats) if stats.settled(stopped) => Plan::Settled,
                Ok(stats) if stats.turns > 0 => Plan::Resume(session),
                // A session without a turn: nothing ran; start again.
                Ok(_) => Plan::Fresh,
                Err(e) => {
                    self.fail(i, format!("cannot resume: {e}"), Status::Failed)?;
                    return Ok(false);
                }
            },
            None => Plan::Fresh,
        };
        let dest = self.workspace_dir(i);
        if matches!(plan, Plan::Fresh) {
            if let Err(e) = workspace::prepare(&task.workspace, &dest) {
                self.fail(i, e.to_string(), Status::Failed)?;
                return Ok(false);
            }
            self.state.task(&task.id).session = None;
        }
        let ws = match dest.canonicalize() {
            Ok(ws) => ws,
            Err(e) => {
                self.fail(
                    i,
                    format!("workspace {} is gone: {e}", dest.display()),
                    Status::Failed,
                )?;
                return Ok(false);
            }
        };
        self.live[i].workspace = Some(ws.clone());
        self.live[i].started_at = keel_session::now_ms();
        let (prompt, resume) = match &plan {
            Plan::Resume(session) => (
                format!(
                    "The batch run of this task ({}) stopped before it ended. Continue the task \
                     from where it stopped; do not redo steps whose results you already have.",
                    task.id
                ),
                Some(session.clone()),
            ),
            _ => (task.prompt.clone(), None),
        };
        let attempt = Attempt {
            index: i,
            id: task.id.clone(),
            workspace: ws,
            prompt,
            resume,
            model: task.model.clone(),
            flags: task.flags.clone(),
            check: task.check.clone(),
            log: self.log_path(i),
            job: self.state.tasks.get(&task.id).and_then(|t| t.job.clone()),
        };
        if matches!(plan, Plan::Settled) {
            engine.check_alone(i, &attempt, tx.clone());
            return Ok(true);
        }
        if let Err(e) = engine.start(attempt, tx.clone()) {
            self.fail(i, e.to_string(), Status::Failed)?;
            return Ok(false);
        }
        if let Plan::Resume(session) = &plan {
            self.say(&format!("{}: resuming session {session}", task.id));
        }
        let record = self.state.task(&task.id);
        record.status = Status::Running;
        record.attempts += 1;
        self.save()?;
        Ok(true)
    }

    fn on_msg(&mut self, msg: Msg, engine: &mut dyn Engine) -> Result<(), BatchError> {
        match msg {
            Msg::Job { index, id } => {
                let record = self.state.task(&self.tasks[index].id);
                record.job = Some(id);
                self.save()?;
            }
            Msg::Retry { index, reason } => {
                let id = self.tasks[index].id.clone();
                self.state.task(&id).attempts += 1;
                self.save()?;
                self.say(&format!("{id}: {reason}; running it again"));
            }
            Msg::Error { index, error } => self.live[index].error = Some(error),
            Msg::Session { index, id } => {
                let record = self.state.task(&self.tasks[index].id);
                record.session = Some(id);
                self.save()?;
            }
            Msg::Usage {
                index,
                prompt,
                cached,
                output,
            } => {
                let live = &mut self.live[index];
                live.prompt += prompt;
                live.cached += cached;
                live.output += output;
                self.counters.tokens += prompt + output;
                let model = self.tasks[index]
                    .model
                    .clone()
                    .unwrap_or_else(|| self.pricing.default_model.clone());
                match (self.pricing.price)(&model) {
                    Some(price) => self.counters.cost += price.cost(prompt, cached, output),
                    None => self.counters.unpriced = true,
                }
            }
            Msg::Exited { index, code, wall } => {
                let live = &mut self.live[index];
                live.code = code;
                live.wall += wall;
            }
            Msg::Finished {
                index,
                check,
                check_wall,
            } => {
                engine.ended(index);
                self.counters.running = self.counters.running.saturating_sub(1);
                self.live[index].check_ms = u64::try_from(check_wall.as_millis()).unwrap_or(0);
                self.ended.push((index, check));
            }
        }
        Ok(())
    }
}
