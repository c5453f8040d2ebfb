//! The engine: one program run in a fresh QuickJS runtime and context, on a thread of its own,
//! driven from async code that performs the program's tool calls.
//!
//! Data flow of one run:
//!
//! ```text
//! run(program) ─► engine thread: new Runtime (memory limit, stack limit, interrupt handler)
//!     ─► new Context (language built-ins only: no loader, no std/os, no timers, no network)
//!     ─► prelude (installs `tools`, `console`) ─► eval `(async () => { BODY })()`
//!     ─► loop: run pending jobs ─► send the calls the program made ─► promise settled? done
//!              ─► wait (until the deadline) for a settled call ─► resolve / reject it in JS
//! driver (async, the caller's task): queue calls ─► start them under the scheduling rule
//!     (parallel-safe calls overlap up to `max_parallel`, an exclusive call runs alone)
//!     ─► Bridge::call ─► hand each result back to the engine ─► the engine's final outcome
//! ```
//!
//! The runtime is never shared: it is created, used and dropped on its thread, so nothing of
//! one run survives into another. The interrupt handler stops JavaScript that runs past the
//! deadline or after cancellation; waiting for tool calls is bounded by the same deadline.

use async_trait::async_trait;
use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use keel_tools::ExecMode;
use rquickjs::context::EvalOptions;
use rquickjs::context::intrinsic;
use rquickjs::{Context, Ctx, Function, Object, Promise, Runtime, Value};
use serde::Deserialize;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc as std_mpsc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Default memory limit of one run's JavaScript heap, in MiB (`code_mode.memory_limit_mib`).
pub const DEFAULT_MEMORY_LIMIT_MIB: u64 = 64;
/// Default time limit of one run, in seconds (`code_mode.time_limit_sec`).
pub const DEFAULT_TIME_LIMIT_SEC: u64 = 60;
/// Default bound on parallel-safe sub-calls running at once (`code_mode.max_parallel`).
pub const DEFAULT_MAX_PARALLEL: usize = 10;

/// Stack of the engine thread. The JavaScript stack limit below stays well inside it, so deep
/// recursion is a `RangeError` in the program, never an overflow of the thread.
const ENGINE_THREAD_STACK: usize = 8 * 1024 * 1024;
/// How long the engine yields, waiting for a sub-call's result, before it blocks.
const SPIN_BEFORE_BLOCKING: Duration = Duration::from_micros(50);
/// The name errors and stack traces give the program's source.
const SOURCE_NAME: &str = "run_code";
/// Lines the wrapper puts before the program's first line.
const WRAPPER_LINES: u32 = 1;

/// The context's built-ins: the language's own objects only. Nothing here reaches files, the
/// network, the environment, timers or other modules: those live in QuickJS's libc modules and
/// in a module loader, and a run's runtime has neither.
type Intrinsics = (
    intrinsic::Date,
    intrinsic::Eval,
    intrinsic::RegExpCompiler,
    intrinsic::RegExp,
    intrinsic::Json,
    intrinsic::MapSet,
    intrinsic::TypedArrays,
    intrinsic::Promise,
    intrinsic::Proxy,
);

/// What one run may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Bytes the JavaScript heap may hold.
    pub memory_bytes: usize,
    /// Wall-clock time of the whole run, tool calls included.
    pub time: Duration,
    /// Bytes of native stack JavaScript may use (deep recursion past it is a `RangeError`).
    pub stack_bytes: usize,
    /// Parallel-safe sub-calls running at once.
    pub max_parallel: usize,
    /// Sub-calls one run may make.
    pub max_sub_calls: u32,
    /// `console.log` lines kept (later lines are counted, not kept).
    pub max_log_lines: usize,
    /// Bytes of `console.log` output kept.
    pub max_log_bytes: usize,
    /// The setting that raises the time limit, named in the time limit's message.
    pub time_setting: &'static str,
    /// The setting that raises the memory limit, named in the memory limit's message.
    pub memory_setting: &'static str,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory_bytes: (DEFAULT_MEMORY_LIMIT_MIB as usize) * 1024 * 1024,
            time: Duration::from_secs(DEFAULT_TIME_LIMIT_SEC),
            stack_bytes: 1024 * 1024,
            max_parallel: DEFAULT_MAX_PARALLEL,
            max_sub_calls: 1000,
            max_log_lines: 1000,
            max_log_bytes: 64 * 1024,
            time_setting: "code_mode.time_limit_sec",
            memory_setting: "code_mode.memory_limit_mib",
        }
    }
}

/// A tool call the program made (`await tools.NAME(ARGS)`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubCall {
    /// 1 for the program's first call, then counting up.
    pub n: u32,
    /// The tool.
    pub name: String,
    /// The arguments as JSON text.
    pub arguments: String,
}

/// How a sub-call ended, as the program sees it: a resolved string, or a rejection with a code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubResult {
    /// Whether the call succeeded.
    pub ok: bool,
    /// The result's text (on failure, the error message).
    pub text: String,
    /// The error code, on failure.
    pub code: Option<String>,
}

/// Performs the program's tool calls. The engine decides when a call may start; the bridge
/// runs it (in keel, through the whole tool pipeline).
#[async_trait]
pub trait Bridge: Send + Sync {
    /// How calls of `name` are scheduled (an unknown tool counts as parallel-safe: it fails
    /// before doing anything).
    fn mode(&self, name: &str) -> ExecMode;
    /// Run one call; `cancel` fires when the run ends or is cancelled before the call settles.
    async fn call(&self, call: SubCall, cancel: CancellationToken) -> SubResult;
}

/// Output of a run that completed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completed {
    /// `console.log` lines, as kept within the limits.
    pub logs: Vec<String>,
    /// Lines that were not kept.
    pub logs_dropped: usize,
    /// The program's return value as JSON text (`null` for `undefined`).
    pub result: String,
    /// Sub-calls the program made.
    pub sub_calls: u32,
}

/// Why a run failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// The program does not parse.
    Syntax,
    /// The program threw (or returned a rejected promise), a failed sub-call included.
    Thrown,
    /// The run passed its time limit.
    TimeLimit,
    /// The JavaScript heap passed its memory limit.
    MemoryLimit,
    /// Recursion passed the stack limit.
    StackLimit,
    /// The caller cancelled the run (turn abort, Ctrl-C, `job_kill`).
    Cancelled,
    /// The program awaits something that can never settle (only tool calls can be awaited).
    Stalled,
    /// The engine itself failed (could not start, or failed inside).
    Engine,
}

impl FailureKind {
    /// Short words for the message.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Syntax => "syntax error",
            FailureKind::Thrown => "uncaught error",
            FailureKind::TimeLimit => "time limit",
            FailureKind::MemoryLimit => "memory limit",
            FailureKind::StackLimit => "stack limit",
            FailureKind::Cancelled => "cancelled",
            FailureKind::Stalled => "stalled",
            FailureKind::Engine => "engine failure",
        }
    }
}

/// A run that did not complete: what happened, where, and the logs up to then.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failed {
    /// What kind of failure.
    pub kind: FailureKind,
    /// The message (the JavaScript error's `name: message`, or the limit's explanation).
    pub message: String,
    /// The program's line the error points at (1-based), when known.
    pub line: Option<u32>,
    /// The failed sub-call's tool, when a rejected sub-call ended the program.
    pub tool_name: Option<String>,
    /// The failed sub-call's code, when a rejected sub-call ended the program.
    pub code: Option<String>,
    /// `console.log` lines up to the failure.
    pub logs: Vec<String>,
    /// Sub-calls the program made.
    pub sub_calls: u32,
}

/// Placeholder for the memory setting in a classified message (filled in by the engine).
const MEMORY_SETTING: &str = "\u{0}memory-setting\u{0}";

impl Failed {
    fn naming_memory_setting(mut self, setting: &str) -> Self {
        self.message = self.message.replace(MEMORY_SETTING, setting);
        self
    }

    fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        Failed {
            kind,
            message: message.into(),
            line: None,
            tool_name: None,
            code: None,
            logs: Vec::new(),
            sub_calls: 0,
        }
    }
}

enum FromEngine {
    Call(SubCall),
    Done(Box<Result<Completed, Failed>>),
}

enum ToEngine {
    Settled(u32, SubResult),
    Abort,
}

/// Sets the abort flag when the driver goes away, so an engine still running stops at its next
/// interrupt check.
struct AbortOnDrop(Arc<AtomicBool>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Run `program` (the body of an async function) with `tools.NAME` for each of `names`, its
/// calls performed by `bridge`. Never panics on the program: every failure is a [`Failed`].
pub async fn run(
    program: &str,
    names: &[String],
    limits: &Limits,
    bridge: &dyn Bridge,
    cancel: &CancellationToken,
) -> Result<Completed, Failed> {
    run_with_setup(program, None, names, limits, bridge, cancel).await
}

/// [`run`], with `setup` (a script) evaluated after the prelude and before the program: it
/// sees `tools` and `console` and may define further globals (a workflow's `agent`, `parallel`,
/// …). Its frames are not the program's: errors keep pointing at the program's lines.
pub async fn run_with_setup(
    program: &str,
    setup: Option<&str>,
    names: &[String],
    limits: &Limits,
    bridge: &dyn Bridge,
    cancel: &CancellationToken,
) -> Result<Completed, Failed> {
    let (to_driver, mut from_engine) = mpsc::unbounded_channel::<FromEngine>();
    let (to_engine, from_driver) = std_mpsc::channel::<ToEngine>();
    let abort = Arc::new(AtomicBool::new(false));
    let _guard = AbortOnDrop(abort.clone());
    let job = Job {
        program: program.to_owned(),
        setup: setup.map(str::to_owned),
        names: names.to_vec(),
        limits: limits.clone(),
        to_driver,
        from_driver,
        abort: abort.clone(),
    };
    let spawned = std::thread::Builder::new()
        .name("keel-code".into())
        .stack_size(ENGINE_THREAD_STACK)
        .spawn(move || job.main());
    if let Err(e) = spawned {
        return Err(Failed::new(
            FailureKind::Engine,
            format!("could not start the JavaScript engine's thread: {e}"),
        ));
    }

    let sub_cancel = cancel.child_token();
    let max_parallel = limits.max_parallel.max(1);
    let mut queue: VecDeque<(SubCall, ExecMode)> = VecDeque::new();
    let mut running: FuturesUnordered<BoxFuture<'_, (u32, ExecMode, SubResult)>> =
        FuturesUnordered::new();
    let mut exclusive_running = false;
    let mut cancelled = false;
    let outcome = loop {
        while let Some((_, mode)) = queue.front() {
            let may_start = match mode {
                ExecMode::Parallel => !exclusive_running && running.len() < max_parallel,
                ExecMode::Exclusive => running.is_empty(),
            };
            let Some((call, mode)) = may_start.then(|| queue.pop_front()).flatten() else {
                break;
            };
            exclusive_running |= mode == ExecMode::Exclusive;
            let token = sub_cancel.clone();
            running.push(Box::pin(async move {
                let n = call.n;
                (n, mode, bridge.call(call, token).await)
            }));
        }
        // Cancellation first: a sub-call that ended because of it must not reach the program
        // as an ordinary rejection before the engine hears of the abort.
        tokio::select! {
            biased;
            () = cancel.cancelled(), if !cancelled => {
                cancelled = true;
                abort.store(true, Ordering::Relaxed);
                sub_cancel.cancel();
                let _ = to_engine.send(ToEngine::Abort);
            }
            msg = from_engine.recv() => match msg {
                Some(FromEngine::Call(call)) => {
                    let mode = bridge.mode(&call.name);
                    queue.push_back((call, mode));
                }
                Some(FromEngine::Done(outcome)) => break *outcome,
                None => break Err(Failed::new(
                    FailureKind::Engine,
                    "the JavaScript engine stopped without an outcome",
                )),
            },
            Some((n, mode, result)) = running.next(), if !running.is_empty() => {
                if mode == ExecMode::Exclusive {
                    exclusive_running = false;
                }
                // The engine may have finished already; then nobody needs the result.
                let _ = to_engine.send(ToEngine::Settled(n, result));
            }
        }
    };
    // Calls still queued never started; calls still running are cancelled and awaited, so each
    // settles (and is recorded) before the run's own result.
    sub_cancel.cancel();
    while running.next().await.is_some() {}
    outcome
}

/// Everything the engine thread owns.
struct Job {
    program: String,
    setup: Option<String>,
    names: Vec<String>,
    limits: Limits,
    to_driver: mpsc::UnboundedSender<FromEngine>,
    from_driver: std_mpsc::Receiver<ToEngine>,
    abort: Arc<AtomicBool>,
}

/// Why the interrupt handler stopped JavaScript.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    TimeLimit,
    Cancelled,
}

/// Per-run state the host functions share with the driver loop.
#[derive(Default)]
struct RunState {
    logs: Vec<String>,
    log_bytes: usize,
    logs_dropped: usize,
    outbox: Vec<SubCall>,
    calls: u32,
}

/// What `describe` in the prelude returns about a thrown value.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Thrown {
    name: String,
    message: String,
    stack: String,
    tool_name: Option<String>,
    code: Option<String>,
}

impl Job {
    fn main(self) {
        let to_driver = self.to_driver.clone();
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.run()))
            .unwrap_or_else(|_| {
                Err(Failed::new(
                    FailureKind::Engine,
                    "the JavaScript engine failed unexpectedly",
                ))
            });
        let _ = to_driver.send(FromEngine::Done(Box::new(outcome)));
    }

    fn run(&self) -> Result<Completed, Failed> {
        let engine = |e: rquickjs::Error| {
            Failed::new(
                FailureKind::Engine,
                format!("the JavaScript engine could not start: {e}"),
            )
        };
        let rt = Runtime::new().map_err(engine)?;
        rt.set_memory_limit(self.limits.memory_bytes);
        rt.set_max_stack_size(self.limits.stack_bytes);
        let deadline = Instant::now() + self.limits.time;
        let stop: Rc<Cell<Option<Stop>>> = Rc::new(Cell::new(None));
        let (flag, abort) = (stop.clone(), self.abort.clone());
        rt.set_interrupt_handler(Some(Box::new(move || {
            if abort.load(Ordering::Relaxed) {
                flag.set(Some(Stop::Cancelled));
                true
            } else if Instant::now() >= deadline {
                flag.set(Some(Stop::TimeLimit));
                true
            } else {
                false
            }
        })));
        let context = Context::custom::<Intrinsics>(&rt).map_err(engine)?;
        let state = Rc::new(RefCell::new(RunState::default()));
        let outcome = context.with(|ctx| self.drive(&ctx, deadline, &stop, &state));
        let mut state = state.take();
        let logs = std::mem::take(&mut state.logs);
        match outcome {
            Ok(result) => Ok(Completed {
                logs,
                logs_dropped: state.logs_dropped,
                result,
                sub_calls: state.calls,
            }),
            Err(mut failed) => {
                failed.logs = logs;
                failed.sub_calls = state.calls;
                Err(failed)
            }
        }
    }

    /// Evaluate the program and drive it to the end; the result's JSON text, or the failure.
    fn drive<'js>(
        &self,
        ctx: &Ctx<'js>,
        deadline: Instant,
        stop: &Rc<Cell<Option<Stop>>>,
        state: &Rc<RefCell<RunState>>,
    ) -> Result<String, Failed> {
        let engine = |what: &str, e: rquickjs::Error| {
            Failed::new(
                FailureKind::Engine,
                format!("the JavaScript engine failed ({what}): {e}"),
            )
        };
        let limits = self.limits.clone();
        let calls = state.clone();
        let host_call = Function::new(
            ctx.clone(),
            move |id: u32, name: String, arguments: String| -> String {
                let mut s = calls.borrow_mut();
                if s.calls >= limits.max_sub_calls {
                    return format!(
                        "this program has made its {} tool calls; no more are allowed in one run",
                        limits.max_sub_calls
                    );
                }
                s.calls += 1;
                s.outbox.push(SubCall {
                    n: id,
                    name,
                    arguments,
                });
                String::new()
            },
        )
        .map_err(|e| engine("host functions", e))?;
        let (max_lines, max_bytes) = (self.limits.max_log_lines, self.limits.max_log_bytes);
        let logs = state.clone();
        let host_log = Function::new(ctx.clone(), move |line: String| {
            let mut s = logs.borrow_mut();
            if s.logs.len() < max_lines && s.log_bytes + line.len() <= max_bytes {
                s.log_bytes += line.len();
                s.logs.push(line);
            } else {
                s.logs_dropped += 1;
            }
        })
        .map_err(|e| engine("host functions", e))?;
        let prelude: Function = ctx
            .eval(include_str!("prelude.js"))
            .map_err(|e| engine("prelude", e))?;
        let helpers: Object = prelude
            .call((host_call, host_log, self.names.clone()))
            .map_err(|e| engine("prelude", e))?;
        let settle: Function = helpers.get("settle").map_err(|e| engine("prelude", e))?;
        let render: Function = helpers.get("render").map_err(|e| engine("prelude", e))?;
        let describe: Function = helpers.get("describe").map_err(|e| engine("prelude", e))?;
        if let Some(setup) = &self.setup {
            let mut options = EvalOptions::default();
            options.strict = false;
            options.filename = Some("setup".to_owned());
            let _: Value = ctx
                .eval_with_options(setup.as_str(), options)
                .map_err(|e| engine("setup", e))?;
        }

        // A cancelled run is cancelled whatever the program did after (a sub-call rejected by
        // the cancellation may reach it before the abort does).
        let aborted = || {
            self.abort
                .load(Ordering::Relaxed)
                .then_some(Stop::Cancelled)
        };
        let failure = |kind_hint: Option<FailureKind>| -> Failed {
            if let Some(stop) = stop.get().or_else(aborted) {
                return stopped(stop, &self.limits);
            }
            let thrown = ctx.catch();
            ctx.run_gc();
            let text: Option<String> = describe.call((thrown,)).ok();
            let parsed = text.and_then(|t| serde_json::from_str::<Thrown>(&t).ok());
            match (parsed, stop.get()) {
                (_, Some(stop)) => stopped(stop, &self.limits),
                (Some(t), None) => classify(t, kind_hint),
                (None, None) => Failed::new(
                    FailureKind::Thrown,
                    "the program threw a value that could not be read",
                ),
            }
            .naming_memory_setting(self.limits.memory_setting)
        };

        let source = format!("(async () => {{\n{}\n}})()", self.program);
        let mut options = EvalOptions::default();
        options.strict = false;
        options.filename = Some(SOURCE_NAME.to_owned());
        let value: Value = match ctx.eval_with_options(source, options) {
            Ok(v) => v,
            Err(rquickjs::Error::Exception) => return Err(failure(Some(FailureKind::Syntax))),
            Err(e) => return Err(engine("evaluation", e)),
        };
        let Some(promise) = value.into_promise() else {
            return Err(Failed::new(
                FailureKind::Syntax,
                "the program must be the body of an async function (its wrapper was closed \
                 early)",
            ));
        };
        let promise: Promise = promise;
        let mut outstanding: usize = 0;
        loop {
            while ctx.execute_pending_job() {}
            if let Some(stop) = stop.get().or_else(aborted) {
                return Err(stopped(stop, &self.limits));
            }
            let calls = std::mem::take(&mut state.borrow_mut().outbox);
            for call in calls {
                outstanding += 1;
                if self.to_driver.send(FromEngine::Call(call)).is_err() {
                    return Err(stopped(Stop::Cancelled, &self.limits));
                }
            }
            match promise.result::<Value>() {
                Some(Ok(v)) => {
                    return render.call::<_, String>((v,)).map_err(|_| failure(None));
                }
                Some(Err(_)) => return Err(failure(None)),
                None => {}
            }
            if outstanding == 0 {
                return Err(Failed::new(
                    FailureKind::Stalled,
                    "the program is waiting for something that can never happen: only tool \
                     calls (`await tools.NAME(args)`) can be awaited, there are no timers",
                ));
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(stopped(Stop::TimeLimit, &self.limits));
            }
            let (n, result) = match self.next_message(deadline - now) {
                Ok(ToEngine::Settled(n, result)) => (n, result),
                Ok(ToEngine::Abort) | Err(std_mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(stopped(Stop::Cancelled, &self.limits));
                }
                Err(std_mpsc::RecvTimeoutError::Timeout) => {
                    return Err(stopped(Stop::TimeLimit, &self.limits));
                }
            };
            outstanding = outstanding.saturating_sub(1);
            let settled: rquickjs::Result<()> =
                settle.call((n, result.ok, result.text, result.code));
            if settled.is_err() {
                return Err(failure(None));
            }
        }
    }
}

/// Bytes QuickJS reports in use by a fresh runtime with its context and the prelude installed:
/// the memory of an idle engine (for benchmarks and the docs). `None` if the engine cannot start.
pub fn idle_heap_bytes() -> Option<i64> {
    let rt = Runtime::new().ok()?;
    let context = Context::custom::<Intrinsics>(&rt).ok()?;
    context.with(|ctx| {
        let prelude: Function = ctx.eval(include_str!("prelude.js")).ok()?;
        let noop = Function::new(ctx.clone(), |_: u32, _: String, _: String| String::new()).ok()?;
        let log = Function::new(ctx.clone(), |_: String| {}).ok()?;
        let _: Object = prelude.call((noop, log, vec!["read".to_owned()])).ok()?;
        Some(())
    })?;
    Some(rt.memory_usage().memory_used_size)
}

impl Job {
    /// The driver's next message, waiting at most `limit`. A sub-call often settles within
    /// microseconds (a read, a glob): the engine first yields its thread for a short while,
    /// which answers those without the cost of a sleep and a wake-up, then blocks.
    fn next_message(&self, limit: Duration) -> Result<ToEngine, std_mpsc::RecvTimeoutError> {
        let spin_until = Instant::now() + SPIN_BEFORE_BLOCKING.min(limit);
        loop {
            match self.from_driver.try_recv() {
                Ok(msg) => return Ok(msg),
                Err(std_mpsc::TryRecvError::Disconnected) => {
                    return Err(std_mpsc::RecvTimeoutError::Disconnected);
                }
                Err(std_mpsc::TryRecvError::Empty) if Instant::now() < spin_until => {
                    std::thread::yield_now();
                }
                Err(std_mpsc::TryRecvError::Empty) => break,
            }
        }
        self.from_driver
            .recv_timeout(limit.saturating_sub(SPIN_BEFORE_BLOCKING))
    }
}

fn stopped(stop: Stop, limits: &Limits) -> Failed {
    match stop {
        Stop::TimeLimit => Failed::new(
            FailureKind::TimeLimit,
            format!(
                "the program ran past its time limit of {} s and was stopped ({})",
                limits.time.as_secs_f64(),
                limits.time_setting
            ),
        ),
        Stop::Cancelled => Failed::new(
            FailureKind::Cancelled,
            "the program was cancelled and stopped",
        ),
    }
}

/// Turn what the program threw into a failure of the right kind, with its line.
fn classify(t: Thrown, hint: Option<FailureKind>) -> Failed {
    let lower = t.message.to_ascii_lowercase();
    let kind = if lower.contains("out of memory") {
        FailureKind::MemoryLimit
    } else if lower.contains("stack overflow") || lower.contains("maximum call stack") {
        FailureKind::StackLimit
    } else if t.name == "SyntaxError" && hint == Some(FailureKind::Syntax) {
        FailureKind::Syntax
    } else {
        hint.unwrap_or(FailureKind::Thrown)
    };
    let message = match kind {
        FailureKind::MemoryLimit => format!(
            "{}: {} (the program passed its memory limit, {MEMORY_SETTING})",
            t.name, t.message
        ),
        _ if t.message.is_empty() => t.name.clone(),
        _ => format!("{}: {}", t.name, t.message),
    };
    Failed {
        kind,
        message,
        line: line_of(&t.stack),
        tool_name: t.tool_name,
        code: t.code,
        logs: Vec::new(),
        sub_calls: 0,
    }
}

/// The program's line (1-based) of the first frame in `stack` that is in the program.
fn line_of(stack: &str) -> Option<u32> {
    let marker = format!("{SOURCE_NAME}:");
    stack.match_indices(&marker).find_map(|(at, _)| {
        let rest = &stack[at + marker.len()..];
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let line: u32 = digits.parse().ok()?;
        line.checked_sub(WRAPPER_LINES).filter(|l| *l > 0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_read_from_the_first_program_frame() {
        assert_eq!(
            line_of("    at f (run_code:4:7)\n    at <anonymous> (run_code:9)"),
            Some(3)
        );
        assert_eq!(line_of("    at <eval>:3"), None);
        assert_eq!(line_of("run_code:1:1"), None);
    }
}
