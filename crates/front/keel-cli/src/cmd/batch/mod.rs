//! `keel batch TASKS.jsonl`: many tasks as `keel run` sessions, N at a time, each in a
//! workspace of its own (docs/batch.md).
//!
//! The scheduler here is engine-neutral: it reads the task file ([`tasks`]), keeps
//! `state.json` ([`state`]), makes each task's workspace ([`workspace`]), decides per task
//! whether to start a session, resume one (crash repair, then a "continue" turn) or only score
//! one that already ended, and writes results.jsonl from the sessions' logs ([`score`]). An
//! [`Engine`] runs the sessions: [`local::LocalEngine`], child processes of this one, or
//! [`ray::RayEngine`], jobs on a Ray cluster (their side is [`job`], `keel batch-job`).

mod engine;
pub mod job;
mod local;
mod pack;
mod ray;
mod report;
mod score;
mod state;
mod tasks;
mod workspace;

use super::Ctx;
use crate::cli::{BatchArgs, Common};
use anyhow::{Context, Result};
use engine::{Attempt, CheckOutcome, Engine, Msg};
use serde_json::Value;
use state::{State, Status};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::Duration;
use tasks::{BadLine, Task};

/// `keel batch`.
pub fn run(ctx: &Ctx, args: BatchArgs) -> Result<ExitCode> {
    // Relative paths are relative to the working directory (--cwd), as other commands read.
    let tasks_path = ctx
        .cwd
        .join(&args.tasks)
        .canonicalize()
        .with_context(|| format!("task file {} does not exist", args.tasks.display()))?;
    let out = match &args.out {
        Some(dir) => ctx.cwd.join(dir),
        None => tasks_path.with_extension("batch"),
    };
    for dir in [out.clone(), out.join("work"), out.join("logs")] {
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let out = out.canonicalize()?;
    let (tasks, bad) = tasks::read(&tasks_path)
        .with_context(|| format!("cannot read the task file {}", tasks_path.display()))?;
    let state = State::load(&out)?;
    let host = ctx.host()?;
    let config = host.config().config.clone();
    let default_model = ctx
        .common
        .model
        .clone()
        .or_else(|| config.model.clone())
        .unwrap_or_else(|| keel_llm::DEFAULT_MODEL.to_owned());
    let concurrency = match (args.concurrency, args.engine.as_str()) {
        (Some(n), _) => n as usize,
        // Ray queues what its nodes cannot take yet: keep a cluster's worth in flight.
        (None, "ray") => RAY_CONCURRENCY,
        (None, _) => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let exe = std::env::current_exe().context("cannot find the keel binary")?;
    let mut engine: Box<dyn Engine> = match args.engine.as_str() {
        "ray" => Box::new(ray_engine(ctx, &args, &config, exe)?),
        _ => Box::new(local::LocalEngine::new(
            exe,
            forward(&ctx.common),
            Duration::from_secs(args.check_timeout),
        )),
    };
    let live = tasks.iter().map(|_| Live::default()).collect();
    let mut batch = Batch {
        ctx,
        out,
        tasks,
        bad,
        state,
        config,
        default_model,
        live,
        progress: report::Progress::new(0),
        interrupted: false,
        ended: Vec::new(),
    };
    batch.run(engine.as_mut(), concurrency)
}

/// `--engine ray` without `--concurrency`: jobs in flight.
const RAY_CONCURRENCY: usize = 32;

/// The Ray engine for `args`: the batch's flags, the model's key variables and the user's
/// configuration go to every job.
fn ray_engine(
    ctx: &Ctx,
    args: &BatchArgs,
    config: &keel_host::config::Config,
    exe: PathBuf,
) -> Result<ray::RayEngine> {
    let address = args.address.clone().context(
        "--engine ray needs the Ray dashboard's address: --address http://HEAD:8265 (or \
         RAY_API_SERVER_ADDRESS)",
    )?;
    if ctx.common.config_file.is_some() {
        anyhow::bail!(
            "--config FILE is a file on this machine and is not shipped to Ray nodes: put its \
             settings in $KEEL_HOME/config.toml (shipped with every job) or -c KEY=VALUE"
        );
    }
    let mut names: Vec<String> = vec!["DEEPSEEK_API_KEY".into(), "DEEPSEEK_BASE_URL".into()];
    names.extend(ctx.common.api_key_env.clone());
    names.extend(
        config
            .providers
            .values()
            .filter_map(|p| p.api_key_env.clone()),
    );
    names.extend(args.pass_env.iter().cloned());
    let env = names
        .into_iter()
        .filter_map(|n| std::env::var(&n).ok().map(|v| (n, v)))
        .collect();
    let mut home_files = Vec::new();
    let mut ship = |rel: String| {
        if let Ok(data) = std::fs::read(ctx.home.join(&rel)) {
            home_files.push((rel, data));
        }
    };
    ship("config.toml".into());
    if let Some(profile) = &ctx.common.profile {
        ship(format!("profiles/{profile}.toml"));
    }
    ray::RayEngine::new(ray::RayOptions {
        address,
        retries: args.retries,
        cpus: args.cpus_per_task,
        keel_on_nodes: args.keel_on_nodes.clone(),
        env,
        check_timeout: Duration::from_secs(args.check_timeout),
        common: forward(&ctx.common),
        home_files,
        store: ctx.store.clone(),
        exe,
    })
    .map_err(|e| anyhow::anyhow!(e))
}

/// What this run knows of a task.
#[derive(Default)]
struct Live {
    /// Its workspace (canonical), once made or found.
    workspace: Option<PathBuf>,
    /// The last process's exit code.
    code: Option<i32>,
    /// Time its processes ran this run.
    wall: Duration,
    /// When its last attempt started (ms since epoch).
    started_at: keel_protocol::TimeMs,
    /// How long its check ran (ms).
    check_ms: u64,
    /// What the engine reported going wrong outside the session.
    error: Option<String>,
    /// Tokens seen live (for the progress line).
    prompt: u64,
    output: u64,
    cached: u64,
}

struct Batch<'a> {
    ctx: &'a Ctx,
    out: PathBuf,
    tasks: Vec<Task>,
    bad: Vec<BadLine>,
    state: State,
    config: keel_host::config::Config,
    default_model: String,
    live: Vec<Live>,
    progress: report::Progress,
    /// Ctrl-C (or SIGTERM) was received.
    interrupted: bool,
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

/// SIGINT/SIGTERM received.
static SIGNALS: AtomicU32 = AtomicU32::new(0);

extern "C" fn on_signal(_: libc::c_int) {
    SIGNALS.fetch_add(1, Ordering::SeqCst);
}

fn catch_signals() {
    let handler: extern "C" fn(libc::c_int) = on_signal;
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only touches an atomic (async-signal-safe).
        unsafe {
            libc::signal(sig, handler as libc::sighandler_t);
        }
    }
}

impl Batch<'_> {
    fn run(&mut self, engine: &mut dyn Engine, concurrency: usize) -> Result<ExitCode> {
        let mut queue: VecDeque<usize> = (0..self.tasks.len())
            .filter(|&i| {
                self.state
                    .tasks
                    .get(&self.tasks[i].id)
                    .is_none_or(|t| t.status != Status::Done)
            })
            .collect();
        let skipped = self.tasks.len() - queue.len();
        self.progress = report::Progress::new(queue.len());
        if skipped > 0 {
            self.progress.say(&format!(
                "{skipped} task(s) already done in {} (skipped)",
                self.out.display()
            ));
        }
        for bad in &self.bad {
            let line = bad.error.clone();
            self.progress.say(&line);
        }
        self.write_results()?;
        self.reattach(engine, &queue)?;
        catch_signals();
        let (tx, rx) = mpsc::channel();
        let mut seen = SIGNALS.load(Ordering::SeqCst);
        loop {
            let signals = SIGNALS.load(Ordering::SeqCst);
            if signals != seen {
                seen = signals;
                if !self.interrupted {
                    self.progress.say(
                        "interrupted: stopping the running sessions (run the same command again to resume)",
                    );
                }
                self.interrupted = true;
                engine.interrupt();
            }
            while !self.interrupted && self.progress.running < concurrency {
                let Some(i) = queue.pop_front() else { break };
                if self.launch(i, engine, &tx)? {
                    self.progress.running += 1;
                }
            }
            // Score what ended after the freed slots were filled (above): the bookkeeping
            // (the session's log read, state.json synced) is off the path from one task's end
            // to the next one's start. A crash in between finds the ended session settled and
            // only scores it again.
            for (index, check) in std::mem::take(&mut self.ended) {
                self.finish(index, check)?;
            }
            if self.progress.running == 0 && (self.interrupted || queue.is_empty()) {
                break;
            }
            self.progress.draw(false);
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
        self.progress.clear();
        let results = self.write_results()?;
        report::summary(&mut std::io::stdout().lock(), &results)?;
        if self.interrupted {
            return Ok(ExitCode::from(130));
        }
        let all_good = results.iter().all(|r| {
            r.get("outcome").and_then(Value::as_str) == Some("completed")
                && r.get("check")
                    .and_then(Value::as_str)
                    .is_none_or(|c| c == "passed")
        });
        Ok(if all_good {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        })
    }

    /// Runs the last batch left running when it died (a Ray job goes on without it): each is
    /// over when this returns, and what it reported is in its session here.
    fn reattach(&mut self, engine: &mut dyn Engine, queue: &VecDeque<usize>) -> Result<()> {
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
        self.progress.say(&format!(
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
        self.state.save(&self.out)?;
        Ok(())
    }

    fn workspace_dir(&self, i: usize) -> PathBuf {
        self.out.join("work").join(&self.tasks[i].id)
    }

    fn log_path(&self, i: usize) -> PathBuf {
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
        let mut found = self.ctx.store.list(Some(&ws));
        found.retain(|s| s.cwd.as_deref() == Some(&*ws.to_string_lossy()));
        found.into_iter().next().map(|s| s.id)
    }

    /// Start task `i` (or score it); `false` when it could not start (recorded).
    fn launch(
        &mut self,
        i: usize,
        engine: &mut dyn Engine,
        tx: &mpsc::Sender<Msg>,
    ) -> Result<bool> {
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
                self.fail(i, e, Status::Failed)?;
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
            self.fail(i, e, Status::Failed)?;
            return Ok(false);
        }
        if let Plan::Resume(session) = &plan {
            self.progress
                .say(&format!("{}: resuming session {session}", task.id));
        }
        let record = self.state.task(&task.id);
        record.status = Status::Running;
        record.attempts += 1;
        self.state.save(&self.out)?;
        Ok(true)
    }

    fn on_msg(&mut self, msg: Msg, engine: &mut dyn Engine) -> Result<()> {
        match msg {
            Msg::Job { index, id } => {
                let record = self.state.task(&self.tasks[index].id);
                record.job = Some(id);
                self.state.save(&self.out)?;
            }
            Msg::Retry { index, reason } => {
                let id = self.tasks[index].id.clone();
                self.state.task(&id).attempts += 1;
                self.state.save(&self.out)?;
                self.progress
                    .say(&format!("{id}: {reason}; running it again"));
            }
            Msg::Error { index, error } => self.live[index].error = Some(error),
            Msg::Session { index, id } => {
                let record = self.state.task(&self.tasks[index].id);
                record.session = Some(id);
                self.state.save(&self.out)?;
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
                self.progress.tokens += prompt + output;
                let model = self.tasks[index]
                    .model
                    .clone()
                    .unwrap_or_else(|| self.default_model.clone());
                if let Some(price) = self.config.price(&model) {
                    self.progress.cost += price.cost(prompt, cached, output);
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
                self.progress.running = self.progress.running.saturating_sub(1);
                self.live[index].check_ms = u64::try_from(check_wall.as_millis()).unwrap_or(0);
                self.ended.push((index, check));
            }
        }
        Ok(())
    }
}

/// The batch's global flags, for each task's `keel` (not `--cwd`: each task has its own).
fn forward(c: &Common) -> Vec<String> {
    let mut out = Vec::new();
    let mut opt = |flag: &str, value: &Option<String>| {
        if let Some(v) = value {
            out.push(flag.to_owned());
            out.push(v.clone());
        }
    };
    opt("--model", &c.model);
    opt("--provider", &c.provider);
    opt("--base-url", &c.base_url);
    opt("--api-key-env", &c.api_key_env);
    opt("--profile", &c.profile);
    opt(
        "--config",
        &c.config_file.as_ref().map(|p| p.display().to_string()),
    );
    opt("--sandbox", &c.sandbox);
    opt("--approval", &c.approval);
    opt("--context-window", &c.context_window.map(|n| n.to_string()));
    opt("--max-output", &c.max_output.map(|n| n.to_string()));
    opt("--control", &c.control);
    opt("--context", &c.context);
    opt("--tools-mode", &c.tools_mode);
    opt("--preset", &c.preset);
    opt("--project-trust", &c.project_trust);
    if let Some(d) = &c.delegate {
        out.push(format!("--delegate={d}"));
    }
    for o in &c.overrides {
        out.push("-c".into());
        out.push(o.clone());
    }
    for (on, flag) in [
        (c.provenance, "--provenance"),
        (c.memory, "--memory"),
        (c.trust_project, "--trust-project"),
    ] {
        if on {
            out.push(flag.into());
        }
    }
    out
}
