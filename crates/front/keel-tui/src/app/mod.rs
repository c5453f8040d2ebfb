//! The interactive loop: terminal events, the agent's committed events and approval questions
//! arrive on one channel; the UI state changes; a frame is drawn when something changed (at
//! most every 16 ms while text streams, never while nothing happens). The session is reached
//! through a `SessionDriver` (today the agent the front end's [`AgentSource`] builds, driven
//! on a small tokio runtime); the UI owns no loop logic: it queues follow-ups, steers, cancels
//! and answers approvals through the driver and its channel.

mod approver;
mod commands;
mod driver;
mod first;
mod images;
mod keys;
mod modals;
mod question;
mod remote;
mod rewind;

use approver::UiApprover;
use driver::{LocalDriver, SessionDriver};
pub use first::UI_COMMANDS;
use modals::{Picked, ask_trust, pick_session};
use remote::RemoteDriver;
pub use remote::{ServerLink, StreamError, StreamMessage, StreamSink};

use crate::canvas::Canvas;
use crate::cells::{Cell, Cells, Detail, Level, ToolCard, ToolState};
use crate::commands::{Builtin, TrustArg};
use crate::input::Input;
use crate::slash::Slash;
use crate::trust::{self, Answer, WorkspaceTrust};
use crate::view::{self, LineCache, Modal, Screen};
use crossterm::event::{
    DisableBracketedPaste, EnableBracketedPaste, Event, KeyCode, KeyEvent, KeyEventKind,
    KeyModifiers,
};
use crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use keel_agent::InboxMode;
use keel_host::{AgentSource, ProjectTrust, SessionEntry, SourceError};
use keel_protocol::{Question, SessionEvent, ToolCallBlock};
use keel_tools::{ApprovalOutcome, UserAnswer};
use question::{Form, QuestionAsk};
use std::collections::{HashSet, VecDeque};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the UI asks the front end for: an agent on a new session or on an existing one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Target {
    /// Continue this session file (`None`: a new session).
    pub resume: Option<PathBuf>,
    /// Use this model instead of the configured one.
    pub model: Option<String>,
}

/// How the UI starts.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The first prompt, sent at once.
    pub prompt: Option<String>,
    /// The session to continue.
    pub resume: Option<PathBuf>,
    /// Start in plan mode.
    pub plan: bool,
    /// Ask which session to continue first (`keel resume` in a terminal).
    pub pick: bool,
    /// Draw on the alternate screen (the UI scrolls the conversation itself) instead of
    /// printing the conversation into the terminal's own scrollback.
    pub alternate_screen: bool,
    /// What the exit hint's `keel resume ID` needs besides the id, as shell words (already
    /// quoted): the flags the session's log does not remember, such as `--api-key-env VAR`.
    pub resume_flags: Vec<String>,
}

/// A question for the person, from the agent's approval seam.
struct Ask {
    call: ToolCallBlock,
    reason: String,
    reply: tokio::sync::oneshot::Sender<ApprovalOutcome>,
}

enum Msg {
    Term(Event),
    Agent(Box<SessionEvent>),
    Ask(Ask),
    /// `ask_user_question`'s questions, answered in a form.
    Question(QuestionAsk),
    /// The session went idle (`Err`: why it stopped).
    Idle(Result<(), driver::DriverError>),
    /// A plugin queued a turn (a schedule fired): run it when idle.
    Woken,
    /// A background job of the UI finished (/compact, /diff): what to show.
    Show(Cell),
    /// A plugin command expanded to this prompt: send it.
    Send(String),
    /// The request of this tool call was answered elsewhere (another client of `keel serve`):
    /// its modal closes.
    Resolved(String),
    /// The link to the `keel serve` of an attached session: what to say about it under the
    /// editor until it changes ("reconnecting to …"); `None`: following the session.
    Link(Option<String>),
    /// SIGTERM or SIGHUP: leave.
    Quit,
}

/// What an open modal is for.
enum Pending {
    Approval(Ask),
    Plan(Ask),
    Question(Form),
    /// The Esc Esc rewind list.
    Rewind(rewind::RewindStep),
}

/// The terminal put into raw mode (on the alternate screen with `--alt-screen`), restored on
/// drop (and by the panic hook).
struct TerminalGuard;

/// Whether the UI entered the alternate screen (the panic hook reads it).
static ALTERNATE: AtomicBool = AtomicBool::new(false);

fn restore_terminal() {
    let _ = disable_raw_mode();
    let mut out = std::io::stdout();
    let _ = crossterm::execute!(out, DisableBracketedPaste, crossterm::cursor::Show);
    if ALTERNATE.swap(false, Ordering::SeqCst) {
        let _ = crossterm::execute!(out, LeaveAlternateScreen);
    }
}

impl TerminalGuard {
    fn enter(alternate: bool) -> std::io::Result<TerminalGuard> {
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore_terminal();
            hook(info);
        }));
        enable_raw_mode()?;
        crossterm::execute!(std::io::stdout(), EnableBracketedPaste)?;
        if alternate {
            ALTERNATE.store(true, Ordering::SeqCst);
            crossterm::execute!(std::io::stdout(), EnterAlternateScreen)?;
        }
        Ok(TerminalGuard)
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore_terminal();
    }
}

use keel_protocol::time::now_ms;

/// The UI state.
struct App<'s> {
    source: &'s dyn AgentSource,
    runtime: tokio::runtime::Runtime,
    tx: Sender<Msg>,
    /// The session, through the seam a remote session will also take.
    driver: Box<dyn SessionDriver<'s> + 's>,
    cells: Cells,
    cache: LineCache,
    /// The terminal.
    canvas: Canvas,
    /// Cells printed into the terminal's scrollback (the live area shows the rest).
    committed: usize,
    input: Input,
    scroll: usize,
    running: bool,
    queued: Vec<String>,
    /// What was typed during a turn and waits for it to end: a command that needs an idle
    /// agent (`/clear`, `/model NAME`…), and whatever was typed after one, in order.
    held: VecDeque<String>,
    /// The command being run, while it runs: held by [`App::busy`] when it needs an idle agent.
    typed: Option<String>,
    pending: Option<(Pending, Modal)>,
    show_reasoning: bool,
    completions: Vec<(String, String)>,
    completion: usize,
    hint: Option<(String, Instant)>,
    last_ctrl_c: Option<Instant>,
    /// The last Esc with nothing typed (a second one soon after opens the rewind list).
    last_esc: Option<Instant>,
    quit: bool,
    cwd: PathBuf,
    /// The slash commands of this agent.
    slash: Slash,
    /// The model `/model` chose for this agent (`None`: the configured one); a rebuild over the
    /// same session (`/trust`) keeps it.
    model: Option<String>,
    /// An attached session's link to its server, when there is something to say about it
    /// ("reconnecting to …"): shown under the editor while no hint is.
    link: Option<String>,
    /// The last event [`App::load_history`] showed of a session whose events all come as
    /// messages ([`SessionDriver::replays_history`]): those up to it are not shown twice.
    shown_upto: Option<u64>,
}

/// Whether the history of the session an agent is switched to is on screen already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum History {
    /// Another session, or one resumed by `/resume`: render it.
    Render,
    /// The same session rebuilt (another model, a trust decision): it is printed already.
    Printed,
}

/// Why the UI could not start or stopped early. The message of each variant already holds
/// the underlying error's (so none is also given as its `source`, which would print it twice
/// in a `{:#}` chain).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The tokio runtime that drives the agent did not start.
    #[error("cannot start the async runtime: {0}")]
    Runtime(std::io::Error),
    /// The terminal could not be put into the UI's mode (raw mode, alternate screen).
    #[error("cannot set up the terminal: {0}")]
    Terminal(std::io::Error),
    /// The thread that reads terminal events did not start.
    #[error("cannot start the input thread: {0}")]
    InputThread(std::io::Error),
    /// Writing a frame to the terminal failed.
    #[error("cannot draw: {0}")]
    Draw(std::io::Error),
    /// The front end could not build the agent.
    #[error("{0}")]
    Agent(SourceError),
    /// The `keel serve` of `keel attach` could not open the session.
    #[error("{0}")]
    Remote(String),
}

/// The session `keel attach` shows: one a running `keel serve` hosts.
pub struct Remote {
    /// The server's HTTP client.
    pub link: Arc<dyn ServerLink>,
    /// The session's id (`None`: a new session in the front end's workspace).
    pub session: Option<String>,
}

/// Run the UI on a session of a `keel serve` until the person leaves (detaches: the session
/// goes on on the server). `source` answers what the UI asks of this machine (the sessions
/// `/resume` lists, prices); the session itself is the server's. Needs a terminal.
pub fn attach(source: &dyn AgentSource, remote: Remote, options: Options) -> Result<(), Error> {
    run_on(source, options, Some(remote))
}

/// Run the UI until the person leaves. Needs a terminal on stdin and stdout.
pub fn run(source: &dyn AgentSource, options: Options) -> Result<(), Error> {
    run_on(source, options, None)
}

fn run_on(source: &dyn AgentSource, options: Options, remote: Option<Remote>) -> Result<(), Error> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(Error::Runtime)?;
    let (tx, rx) = std::sync::mpsc::channel::<Msg>();
    let approver = Arc::new(UiApprover {
        tx: tx.clone(),
        allowed: Mutex::new(HashSet::new()),
    });
    // The terminal first: the session picker draws before any agent exists.
    let setup = Error::Terminal;
    let guard = TerminalGuard::enter(options.alternate_screen).map_err(setup)?;
    let mut canvas = if options.alternate_screen {
        Canvas::alternate().map_err(setup)?
    } else {
        // Where the shell left the cursor, asked before the input thread reads the terminal.
        let row = crossterm::cursor::position().map_or(u16::MAX, |(_, row)| row);
        Canvas::inline(row).map_err(setup)?
    };
    // Terminal events on their own thread.
    {
        let input_tx = tx.clone();
        std::thread::Builder::new()
            .name("keel-tui-input".into())
            .spawn(move || {
                while let Ok(event) = crossterm::event::read() {
                    if input_tx.send(Msg::Term(event)).is_err() {
                        break;
                    }
                }
            })
            .map_err(Error::InputThread)?;
    }
    let mut resume = options.resume.clone();
    if options.pick && remote.is_none() {
        let search = |query: &str| source.search_sessions(source.workspace(), query);
        match pick_session(
            &mut canvas,
            &rx,
            &source.sessions(source.workspace()),
            &search,
        )? {
            Picked::Session(path) => resume = Some(path),
            Picked::New => resume = None,
            Picked::Quit => return Ok(()),
        }
    }
    // The trust question, before the first agent: what that agent may run depends on it.
    // Attached, the server's trust decides what its session may run.
    let answer = match source.trust(source.workspace()) {
        Ok(ws) if ws.should_ask() && remote.is_none() => Some(ask_trust(&mut canvas, &rx, &ws)?),
        _ => None,
    };
    let recorded = match answer {
        Some(Answer::Trust) => Some(source.record_trust(source.workspace(), ProjectTrust::Trusted)),
        Some(Answer::Distrust) => {
            Some(source.record_trust(source.workspace(), ProjectTrust::Untrusted))
        }
        Some(Answer::Dismissed) | None => None,
    };
    let target = Target {
        resume: resume.clone(),
        model: None,
    };
    let attached = remote.is_some();
    let driver: Box<dyn SessionDriver<'_> + '_> = match remote {
        None => Box::new(
            LocalDriver::open(source, &target, &tx, &approver, runtime.handle().clone())
                .map_err(Error::Agent)?,
        ),
        Some(remote) => Box::new(
            RemoteDriver::open(
                remote.link,
                remote.session,
                source.workspace().to_path_buf(),
                &tx,
                runtime.handle().clone(),
            )
            .map_err(|e| Error::Remote(e.to_string()))?,
        ),
    };
    let cwd = driver.cwd();
    let slash = driver.slash();
    let mut app = App {
        source,
        runtime,
        tx: tx.clone(),
        driver,
        cells: Cells::with_presenters(&keel_host::presenters()),
        cache: LineCache::default(),
        canvas,
        committed: 0,
        input: Input::new(),
        scroll: 0,
        running: false,
        queued: Vec::new(),
        held: VecDeque::new(),
        typed: None,
        pending: None,
        show_reasoning: false,
        completions: Vec::new(),
        completion: 0,
        hint: None,
        last_ctrl_c: None,
        last_esc: None,
        quit: false,
        cwd,
        slash,
        model: None,
        link: None,
        shown_upto: None,
    };
    // Attached, the event stream replays the history (as `Msg::Agent`).
    app.load_history(resume.is_some() && !attached);
    if resume.is_none() && app.driver.turns() == 0 {
        app.welcome(attached);
    }
    // What the trust question decided, and what this agent leaves alone: in the transcript
    // (never on stderr, which is the terminal the UI draws on).
    if let Some(Err(e)) = recorded {
        app.cells.notice(Level::Error, e.to_string());
    }
    // Attached, the server's notice: its configuration decides what its session may run.
    match app.driver.trust_notice() {
        Some(notice) => {
            if let Some(line) = notice {
                app.cells.notice(Level::Info, line);
            }
        }
        None => {
            if let Ok(ws) = source.trust(source.workspace()) {
                if let Some(answer) = answer {
                    app.cells.notice(Level::Info, trust::answered(&ws, answer));
                }
                if let Some(line) = ws.notice() {
                    app.cells.notice(Level::Info, line);
                }
            }
        }
    }
    if options.plan {
        app.set_plan_mode(true);
    }
    // Signals that end a terminal session.
    {
        let tx = tx.clone();
        app.runtime.spawn(async move {
            use tokio::signal::unix::{SignalKind, signal};
            let (Ok(mut term), Ok(mut hup)) = (
                signal(SignalKind::terminate()),
                signal(SignalKind::hangup()),
            ) else {
                return;
            };
            tokio::select! {
                _ = term.recv() => {}
                _ = hup.recv() => {}
            }
            let _ = tx.send(Msg::Quit);
        });
    }
    if let Some(prompt) = options.prompt {
        app.submit(prompt, false);
    }
    let outcome = app.event_loop(&rx);
    let _ = app.canvas.leave();
    drop(guard);
    let id = app.driver.session_id();
    let mut err = std::io::stderr();
    if attached {
        // Detached: the session goes on on the server (never cancelled nor closed here).
        let _ = writeln!(
            err,
            "keel: detached from session {id}, which stays on the server — attach again \
             with: keel attach {id}"
        );
        return outcome;
    }
    app.driver.cancel();
    app.wait_turn_end(&rx);
    app.driver.kill_jobs();
    // A session without a turn holds nothing to continue (the front end may remove it).
    if app.driver.turns() > 0 {
        let flags: String = options
            .resume_flags
            .iter()
            .map(|f| format!(" {f}"))
            .collect();
        let _ = writeln!(
            err,
            "keel: session {id} — continue it with: keel resume {id}{flags}"
        );
    }
    outcome
}

impl App<'_> {
    fn event_loop(&mut self, rx: &Receiver<Msg>) -> Result<(), Error> {
        let mut dirty = true;
        let mut last_draw = Instant::now() - Duration::from_secs(1);
        const FRAME: Duration = Duration::from_millis(16);
        while !self.quit {
            if dirty && last_draw.elapsed() >= FRAME {
                self.draw()?;
                last_draw = Instant::now();
                dirty = false;
            }
            // Animate while a step runs (spinner, elapsed time); otherwise wait for input.
            let timeout = if dirty {
                FRAME.saturating_sub(last_draw.elapsed())
            } else if self.cells.busy() || self.hint.is_some() {
                Duration::from_millis(100)
            } else {
                Duration::from_secs(3600)
            };
            match rx.recv_timeout(timeout) {
                Ok(msg) => {
                    self.handle(msg);
                    // Take whatever else is waiting before the next frame.
                    while let Ok(msg) = rx.try_recv() {
                        self.handle(msg);
                    }
                    dirty = true;
                }
                Err(RecvTimeoutError::Timeout) => {
                    if self
                        .hint
                        .as_ref()
                        .is_some_and(|(_, at)| at.elapsed() > Duration::from_secs(3))
                    {
                        self.hint = None;
                    }
                    dirty |= self.cells.busy() || self.hint.is_none();
                }
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        Ok(())
    }

    fn draw(&mut self) -> Result<(), Error> {
        let failed = Error::Draw;
        let (cols, rows) = self.canvas.size();
        let inline = self.canvas.is_inline();
        let now = now_ms();
        if inline {
            // Cells that can no longer change go into the terminal's scrollback, once.
            let upto = view::settled_until(&self.cells, self.committed);
            if upto > self.committed {
                let lines: Vec<_> = self.cells.cells[self.committed..upto]
                    .iter()
                    .flat_map(|c| view::cell_lines(c, cols, now, self.show_reasoning))
                    .collect();
                self.canvas.print_above(lines).map_err(failed)?;
                self.committed = upto;
            }
        }
        let modal = self.pending.as_ref().map(|(_, m)| m);
        let screen = Screen {
            cells: &self.cells,
            input: &self.input,
            scroll: self.scroll,
            from: if inline { self.committed } else { 0 },
            modal,
            now,
            show_reasoning: self.show_reasoning,
            completions: &self.completions,
            completion: self.completion,
            queued: self.queued.len() + self.held.len(),
            hint: self
                .hint
                .as_ref()
                .map(|(h, _)| h.as_str())
                .or(self.link.as_deref()),
        };
        let cache = &mut self.cache;
        let height = if inline {
            view::live_height(&screen, cache, cols, rows)
        } else {
            rows
        };
        self.canvas
            .draw(height, |frame| view::draw(frame, &screen, cache))
            .map_err(failed)
    }

    fn say(&mut self, hint: impl Into<String>) {
        self.hint = Some((hint.into(), Instant::now()));
    }

    fn handle(&mut self, msg: Msg) {
        match msg {
            Msg::Term(Event::Key(key)) if key.kind != KeyEventKind::Release => self.key(key),
            Msg::Term(Event::Paste(text)) => {
                self.input.insert(&text);
                self.update_completions();
            }
            Msg::Term(Event::Resize(cols, rows)) => {
                self.cache.clear();
                self.canvas.resized(cols, rows);
            }
            Msg::Term(_) => {}
            Msg::Agent(ev) if self.shown_upto.is_some_and(|upto| ev.seq.0 <= upto) => {}
            Msg::Agent(ev) => {
                if let keel_protocol::EventBody::UserMessage(m) = &ev.body
                    && m.source.is_user()
                {
                    let text = m.text();
                    if let Some(i) = self.queued.iter().position(|q| *q == text) {
                        self.queued.remove(i);
                    }
                }
                let plan_decided = matches!(&ev.body, keel_protocol::EventBody::PlanMode(p) if p.approved.is_some());
                self.cells.apply(&ev);
                if plan_decided {
                    self.cache.clear();
                }
            }
            Msg::Ask(ask) => self.ask(ask),
            Msg::Question(ask) => self.open_form(ask),
            Msg::Idle(outcome) => {
                self.running = false;
                self.queued.clear();
                if let Err(e) = outcome {
                    self.cells.notice(Level::Error, e.to_string());
                }
                self.release_held();
                if !self.running && self.driver.has_pending_turn() {
                    // Queued by a plugin as the run ended (a schedule firing).
                    self.start();
                }
            }
            Msg::Woken => {
                if !self.running && self.driver.has_pending_turn() {
                    self.start();
                }
            }
            Msg::Show(cell) => self.cells.cells.push(cell),
            Msg::Send(prompt) => self.submit(prompt, false),
            Msg::Resolved(call) => {
                let open = match &self.pending {
                    Some((Pending::Approval(ask) | Pending::Plan(ask), _)) => ask.call.id == call,
                    Some((Pending::Question(form), _)) => form.call_id() == Some(call.as_str()),
                    _ => false,
                };
                if open {
                    self.pending = None;
                    self.say("answered by another client of the server");
                }
            }
            Msg::Link(status) => self.link = status,
            Msg::Quit => self.quit = true,
        }
    }

    fn ask(&mut self, ask: Ask) {
        if ask.call.name == "exit_plan_mode" {
            let args: serde_json::Value =
                serde_json::from_str(&ask.call.arguments).unwrap_or_default();
            let plan = args
                .get("plan")
                .and_then(|p| p.as_str())
                .unwrap_or("(no plan given)")
                .to_owned();
            let modal = Modal {
                title: "Approve this plan?".into(),
                body: plan,
                options: vec![
                    "Approve and start".into(),
                    "Keep planning (type feedback first, then choose)".into(),
                ],
                selected: 0,
                markdown: true,
            };
            self.pending = Some((Pending::Plan(ask), modal));
            return;
        }
        let args: serde_json::Value = serde_json::from_str(&ask.call.arguments).unwrap_or_default();
        let what = match ask.call.name.as_str() {
            "bash" => args
                .get("command")
                .and_then(|c| c.as_str())
                .unwrap_or("")
                .to_owned(),
            _ => serde_json::to_string_pretty(&args).unwrap_or_default(),
        };
        let escalates = args
            .as_object()
            .is_some_and(keel_tools::escalation::requested);
        let session_option = if escalates {
            "Allow this exact call outside the sandbox for the session".to_owned()
        } else if ask.call.name == "bash" {
            "Allow this command for the session".to_owned()
        } else {
            format!("Allow '{}' for the session", ask.call.name)
        };
        let title = if escalates {
            format!("Run {} outside the sandbox?", ask.call.name)
        } else {
            format!("Allow {}?", ask.call.name)
        };
        let modal = Modal {
            title,
            body: format!("{what}\n\n{}", ask.reason),
            options: vec![
                "Allow once".into(),
                session_option,
                "Deny (what you typed is sent as the reason)".into(),
            ],
            selected: 0,
            markdown: false,
        };
        self.pending = Some((Pending::Approval(ask), modal));
    }

    fn answer(&mut self, choice: usize) {
        let Some((pending, _)) = self.pending.take() else {
            return;
        };
        let typed = self.input.text().trim().to_owned();
        let reason = (!typed.is_empty()).then_some(typed);
        let (ask, outcome, consumed) = match pending {
            Pending::Rewind(step) => {
                self.rewind_answer(step, choice);
                return;
            }
            Pending::Question(form) => {
                // Answered through its own keys (question.rs); put back untouched.
                let modal = form.modal();
                self.pending = Some((Pending::Question(form), modal));
                return;
            }
            Pending::Approval(ask) => match choice {
                0 => (ask, ApprovalOutcome::Approved, false),
                1 => {
                    self.driver.allow_for_session(&ask.call);
                    (ask, ApprovalOutcome::Approved, false)
                }
                _ => {
                    let consumed = reason.is_some();
                    (ask, ApprovalOutcome::Denied { reason }, consumed)
                }
            },
            Pending::Plan(ask) => match choice {
                0 => (ask, ApprovalOutcome::Approved, false),
                _ => {
                    let consumed = reason.is_some();
                    let reason = Some(match reason {
                        Some(feedback) => format!("Keep planning. Feedback: {feedback}"),
                        None => "Keep planning: the plan was not approved yet.".to_owned(),
                    });
                    (ask, ApprovalOutcome::Denied { reason }, consumed)
                }
            },
        };
        if consumed {
            self.input.take();
        }
        let _ = ask.reply.send(outcome);
    }

    /// Send `text`: a slash command, a steer into the running turn, or a follow-up.
    fn submit(&mut self, text: String, steer: bool) {
        if text.trim().is_empty() {
            return;
        }
        self.scroll = 0;
        // Behind a held command, what is typed next waits too: it runs in the order typed.
        if self.running && !steer && !self.held.is_empty() {
            self.held.push_back(text);
            self.say("queued: it runs when this turn ends, after the command before it");
            return;
        }
        if text.starts_with('/') && !text.starts_with("//") {
            self.command(&text);
            return;
        }
        // `//text` is a message that starts with `/`.
        let text = crate::commands::unescape(&text).unwrap_or(text);
        // `@image.png` words attach the images; nothing is sent when one cannot be.
        if self.running {
            let mode = if steer {
                InboxMode::Steer
            } else {
                InboxMode::Followup
            };
            match self.driver.send(mode, &text) {
                Ok(()) if steer => self.say("sent into the running turn"),
                Ok(()) => {
                    self.queued.push(text);
                    self.say("queued: it runs when this turn ends (Ctrl-S steers instead)");
                }
                Err(e) => self.cells.notice(Level::Error, e.to_string()),
            }
            return;
        }
        if let Err(e) = self.driver.send(InboxMode::Followup, &text) {
            self.cells.notice(Level::Error, e.to_string());
            return;
        }
        self.start();
    }
}
