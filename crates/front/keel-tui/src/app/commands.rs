//! What the UI does for a submitted slash command (built-in, custom or a plugin's), and the
//! session switches some of them make (`/new`, `/resume`, `/model`, `/trust` rebuild the agent
//! over a session), with `/diff`'s card.

// The App's own module: its types and the imports they share.
use super::*;
use driver::{CommandDone, CommandRun};

/// How long leaving waits for a cancelled turn to close its log.
const LEAVE_WAIT: Duration = Duration::from_secs(5);
/// How often leaving cancels the turn again (a cancel can land between two of its steps).
const RECANCEL_EVERY: Duration = Duration::from_millis(200);

impl App<'_> {
    /// After a cancel, wait (at most [`LEAVE_WAIT`]) until the turn running has ended, so that
    /// leaving mid-turn (Ctrl-D as an answer streams, SIGTERM) closes it in the log with its
    /// `turn/end` instead of leaving it open for the next resume's crash repair.
    pub(super) fn wait_turn_end(&mut self, rx: &Receiver<Msg>) {
        let deadline = Instant::now() + LEAVE_WAIT;
        while self.running {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                return;
            };
            match rx.recv_timeout(left.min(RECANCEL_EVERY)) {
                Ok(Msg::Idle(_)) => self.running = false,
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => self.driver.cancel(),
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
    }

    /// Drive the agent until it is idle, on the runtime.
    pub(super) fn start(&mut self) {
        self.running = true;
        let idle = self.driver.run_until_idle();
        let tx = self.tx.clone();
        self.runtime.spawn(async move {
            let _ = tx.send(Msg::Idle(idle.await));
        });
    }

    pub(super) fn set_plan_mode(&mut self, on: bool) {
        if self.running {
            self.busy("plan mode changes between turns: wait for this turn or Ctrl-C it");
            return;
        }
        match self.driver.set_plan_mode(on) {
            Ok(()) => self.say(if on {
                "plan mode on: the agent explores and proposes a plan (Shift-Tab to leave)"
            } else {
                "plan mode off"
            }),
            Err(e) => self.cells.notice(Level::Error, e.to_string()),
        }
    }

    /// The history of a resumed session, as it was seen live.
    pub(super) fn load_history(&mut self, resumed: bool) {
        let mut events: Vec<SessionEvent> = Vec::new();
        self.driver
            .with_session(&mut |s| events = s.events().map(|e| e.into_owned()).collect());
        // A driver whose events all come as messages (its stream replays the history): those
        // shown here are not shown again when their message comes.
        self.shown_upto = if self.driver.replays_history() {
            events.last().map(|e| e.seq.0)
        } else {
            None
        };
        for ev in &events {
            self.cells.apply(ev);
        }
        // The status line shows what this agent enforces: a resumed session's log holds the
        // modes of the agent that started it, and a trust decision or another configuration
        // may have changed them since.
        self.cells.sandbox = self.driver.sandbox();
        self.cells.approval = self.driver.approval();
        self.show_route();
        if resumed {
            self.cells
                .marker(format!("resumed session {}", self.driver.session_id()));
        }
    }

    /// Replace the agent (new session, resumed session, other model, a trust decision);
    /// false when it stayed (a turn runs, or the build failed: said in the transcript).
    pub(super) fn switch(&mut self, target: Target, history: History) -> bool {
        if self.running {
            self.busy("wait for the turn to end (or Ctrl-C it) first");
            return false;
        }
        // One process writes a session, through one writer: an agent rebuilt over this
        // session (another model, a trust decision) opens it after this one lets go of it.
        let current = self.driver.session_file();
        let same = target.resume.as_deref() == Some(current.as_path());
        if same && let Err(e) = self.driver.release() {
            self.cells.notice(Level::Error, e.to_string());
            return false;
        }
        let built = if same {
            self.driver.rebuild(target.model.clone()).map(|()| None)
        } else {
            self.driver.open(&target).map(Some)
        };
        match built {
            Ok(other) => {
                if let Some(other) = other {
                    self.driver.kill_jobs();
                    self.driver = other;
                }
                self.slash = self.driver.slash();
                self.model = target.model;
                self.cells = Cells::with_presenters(&keel_host::presenters());
                self.cache.clear();
                self.load_history(target.resume.is_some());
                if target.resume.is_none() {
                    self.cells
                        .marker(format!("new session {}", self.driver.session_id()));
                }
                self.committed = match history {
                    History::Printed => self.cells.cells.len(),
                    History::Render => 0,
                };
                true
            }
            Err(e) => {
                self.cells.notice(Level::Error, e.to_string());
                if same {
                    self.reopen();
                }
                false
            }
        }
    }

    /// After a failed rebuild over this session: the session again, as it was built.
    fn reopen(&mut self) {
        match self.driver.rebuild(self.model.clone()) {
            Ok(()) => self.slash = self.driver.slash(),
            Err(e) => self.cells.notice(
                Level::Error,
                format!("this session could not be opened again ({e}); /resume opens it"),
            ),
        }
    }

    /// `/trust [yes|no]`: show the workspace's decision, or record one and rebuild the agent
    /// over the same session when what it may run changed.
    pub(super) fn trust(&mut self, args: &str) {
        let asked = match TrustArg::parse(args) {
            Ok(TrustArg::Record(level)) => Some(level),
            Ok(TrustArg::Show) => None,
            Err(e) => {
                self.cells.notice(Level::Error, e.to_string());
                return;
            }
        };
        if asked.is_some() && self.running {
            self.busy("trust changes between turns: wait for this turn or Ctrl-C it");
            return;
        }
        // Attached: the server's trust, for the session's workspace there.
        if let Some(said) = self.driver.trust(asked) {
            match said {
                Ok(text) => self.cells.notice(Level::Info, text),
                Err(e) => self.cells.notice(Level::Error, e.to_string()),
            }
            return;
        }
        let level = match asked {
            Some(level) => level,
            None => {
                match self.source.trust(self.source.workspace()) {
                    Ok(ws) => self.cells.notice(Level::Info, ws.describe()),
                    Err(e) => self.cells.notice(Level::Error, e.to_string()),
                }
                return;
            }
        };
        let here = self.source.workspace();
        let before = match self.source.trust(here) {
            Ok(ws) => ws.decision.trust,
            Err(e) => {
                self.cells.notice(Level::Error, e.to_string());
                return;
            }
        };
        let after = self
            .source
            .record_trust(here, level)
            .and_then(|_| self.source.trust(here));
        let after = match after {
            Ok(ws) => ws,
            Err(e) => {
                self.cells.notice(Level::Error, e.to_string());
                return;
            }
        };
        if after.decision.trust != before {
            // Hooks and servers are installed when an agent is built: build it again over
            // this session, so the decision holds from the next turn.
            let target = Target {
                resume: Some(self.driver.session_file()),
                model: self.model.clone(),
            };
            if !self.switch(target, History::Printed) {
                let text = format!(
                    "Workspace {} is now {}, but this session's agent could not be rebuilt \
                     (above): it keeps the previous decision until the session is opened again.",
                    after.decision.root.display(),
                    after.decision.describe()
                );
                self.cells.notice(Level::Error, text);
                return;
            }
        }
        self.cells.notice(Level::Info, after.changed(before));
    }

    pub(super) fn command(&mut self, text: &str) {
        let (name, args) = match text.split_once(char::is_whitespace) {
            Some((n, a)) => (n, a.trim()),
            None => (text.trim(), ""),
        };
        self.typed = Some(text.to_owned());
        match self.slash.parse(name, args) {
            Ok(crate::slash::Action::Prompt(prompt)) => self.submit(prompt, false),
            Ok(crate::slash::Action::External { name, args }) => self.external(name, args),
            Ok(crate::slash::Action::Ui(name)) => self.ui_command(&name),
            Ok(crate::slash::Action::Builtin(b)) => self.builtin(b, args),
            Err(e) => self.cells.notice(Level::Error, e.to_string()),
        }
        self.typed = None;
    }

    /// What needs an idle agent was asked for during a turn: a typed command waits for the
    /// turn to end (it runs then, as typed); a key is refused with `why`.
    pub(super) fn busy(&mut self, why: &str) {
        match self.typed.take() {
            Some(text) => {
                self.say(format!("queued: {text} runs when this turn ends"));
                self.held.push_back(text);
            }
            None => self.say(why.to_owned()),
        }
    }

    /// The turn ended: run what was held, in order, until one of them starts a turn.
    pub(super) fn release_held(&mut self) {
        while !self.running
            && self.pending.is_none()
            && let Some(text) = self.held.pop_front()
        {
            self.submit(text, false);
        }
    }

    /// Expand a plugin command through its source, then send the prompt.
    pub(super) fn external(&mut self, name: String, args: String) {
        let later = match self.driver.command(&name, &args) {
            Ok(CommandRun::Said(said)) => {
                self.cells.notice(Level::Info, said);
                return;
            }
            Ok(CommandRun::Later(later)) => later,
            Err(e) => {
                self.cells.notice(Level::Error, e.to_string());
                return;
            }
        };
        self.run_later(&name, later);
    }

    /// A command that runs in the background (a remote session's, a delegated review): what
    /// it gives is shown, or sent when it is a prompt.
    pub(super) fn run_later(
        &mut self,
        name: &str,
        later: futures::future::BoxFuture<'static, Result<CommandDone, super::driver::DriverError>>,
    ) {
        let tx = self.tx.clone();
        self.say(format!("running /{name}…"));
        self.runtime.spawn(async move {
            let msg = match later.await {
                Ok(CommandDone::Said(said)) => Msg::Show(Cell::Notice(Level::Info, said)),
                Ok(CommandDone::Prompt(prompt)) => Msg::Send(prompt),
                Err(e) => Msg::Show(Cell::Notice(Level::Error, e.to_string())),
            };
            let _ = tx.send(msg);
        });
    }

    pub(super) fn builtin(&mut self, which: Builtin, args: &str) {
        match which {
            Builtin::Help => {
                let help = self.slash.help();
                self.cells.notice(Level::Info, help);
            }
            Builtin::Quit => self.quit = true,
            Builtin::New => {
                self.switch(Target::default(), History::Render);
            }
            Builtin::Resume => match self
                .source
                .resolve(self.source.workspace(), (!args.is_empty()).then_some(args))
            {
                Ok(path) => {
                    self.switch(
                        Target {
                            resume: Some(path),
                            model: None,
                        },
                        History::Render,
                    );
                }
                Err(e) => self.cells.notice(Level::Error, e.to_string()),
            },
            Builtin::Sessions => {
                let list = self.source.sessions(self.source.workspace());
                let text = if list.is_empty() {
                    "No sessions in this directory yet.".to_owned()
                } else {
                    let now = now_ms();
                    let mut s = "Sessions (newest first; /resume ID continues one):".to_owned();
                    for e in list.iter().take(20) {
                        s.push_str(&format!(
                            "\n{}  {:>6}  {:>7}  {}",
                            &e.id,
                            view::age(now - e.modified),
                            view::size(e.bytes),
                            crate::cells::one_line(&e.title, 59)
                        ));
                    }
                    s
                };
                self.cells.notice(Level::Info, text);
            }
            Builtin::Model => self.model_command(args),
            Builtin::Plan => {
                let on = !self.cells.plan_mode;
                self.set_plan_mode(on);
            }
            Builtin::Todo => {
                let t = &self.cells.todos;
                let text = if t.is_empty() {
                    "No todo list yet.".to_owned()
                } else {
                    t.iter()
                        .map(|i| format!("[{:?}] {}", i.status, i.content))
                        .collect::<Vec<_>>()
                        .join("\n")
                };
                self.cells.notice(Level::Info, text);
            }
            Builtin::Status => self.status(),
            Builtin::Compact => {
                if self.running {
                    self.busy("wait for the turn to end (or Ctrl-C it) first");
                    return;
                }
                let done = self.driver.compact();
                let tx = self.tx.clone();
                self.say("compacting…");
                self.runtime.spawn(async move {
                    if let Err(e) = done.await {
                        let _ = tx.send(Msg::Show(Cell::Notice(
                            Level::Error,
                            format!("Compaction failed: {e}"),
                        )));
                    }
                });
            }
            Builtin::Diff => {
                let cwd = self.cwd.clone();
                let tx = self.tx.clone();
                self.runtime.spawn(async move {
                    let _ = tx.send(Msg::Show(git_diff(&cwd).await));
                });
            }
            Builtin::Trust => self.trust(args),
        }
    }
}

/// `git diff` of the workspace as a card (keel's hardened git: nothing the repository's
/// configuration names runs, and it is read-only confined).
async fn git_diff(cwd: &Path) -> Cell {
    let out = match keel_tools::git::Git::new(cwd)
        .args(["diff", "--no-color"])
        .read_only()
        .tokio_command()
        .await
    {
        Ok(mut cmd) => cmd.output().await,
        Err(e) => Err(std::io::Error::other(e)),
    };
    let (state, summary, lines) = match out {
        Ok(o) if o.status.success() => {
            let text = String::from_utf8_lossy(&o.stdout).into_owned();
            let files = text.lines().filter(|l| l.starts_with("diff --git")).count();
            let lines: Vec<(char, String)> = text
                .lines()
                .filter(|l| !l.starts_with("diff --git") && !l.starts_with("index "))
                .take(200)
                .map(|l| {
                    let sign = match l.chars().next() {
                        Some('+') if !l.starts_with("+++") => '+',
                        Some('-') if !l.starts_with("---") => '-',
                        _ => ' ',
                    };
                    let body = if sign == ' ' { l } else { &l[1..] };
                    (sign, body.to_owned())
                })
                .collect();
            let summary = if files == 0 {
                "no changes".to_owned()
            } else {
                format!("{files} file(s) changed")
            };
            (ToolState::Done, summary, lines)
        }
        Ok(o) => (
            ToolState::Failed,
            String::from_utf8_lossy(&o.stderr).trim().to_owned(),
            Vec::new(),
        ),
        Err(e) => (
            ToolState::Failed,
            format!("cannot run git: {e}"),
            Vec::new(),
        ),
    };
    let now = now_ms();
    Cell::Tool(ToolCard {
        call_id: String::new(),
        name: "git diff".into(),
        key_arg: cwd.display().to_string(),
        arguments: String::new(),
        started: now,
        finished: Some(now),
        state,
        summary,
        detail: Detail::Diff(lines),
        progress: Default::default(),
    })
}
