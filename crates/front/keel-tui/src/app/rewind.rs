//! Esc Esc (with nothing typed, between turns): the session's prompts, newest first, each with
//! the files its turn changed; then what to return to just before it: the files and the
//! conversation, the conversation, the files, or a new session forked there. The turns and
//! the rewinding are the checkpoints plugin's `/rewind` command (its choices and its action,
//! through the command seam: the UI knows no plugin); a rewound conversation puts the prompt
//! back in the editor.

// The App's own module: its types and the imports they share.
use super::*;
use driver::{CommandRun, DriverError};
use keel_agent::plugin::CommandChoice;
use keel_session::view::text::one_line;

/// The command that rewinds.
const REWIND: &str = "rewind";

/// What the UI says when the session has no rewind.
const OFF: &str = "rewind needs the checkpoints plugin, which is off here";

/// Where the rewind list is.
pub(super) enum RewindStep {
    /// Choosing the turn (newest first, as the options).
    Turns(Vec<CommandChoice>),
    /// Choosing what to do just before it.
    Action(CommandChoice),
}

const ACTIONS: [&str; 5] = [
    "Restore code and conversation",
    "Restore conversation",
    "Restore code",
    "Fork a new session from here",
    "Cancel",
];

impl App<'_> {
    /// Open the list of the session's prompts.
    pub(super) fn open_rewind(&mut self) {
        if self.running {
            self.busy("wait for the turn to end (or Ctrl-C it) first");
            return;
        }
        let Some(points) = self.driver.choices(REWIND) else {
            let why = self.driver.no_choices().unwrap_or_else(|| OFF.to_owned());
            self.cells.notice(Level::Error, why);
            return;
        };
        if points.is_empty() {
            self.say("nothing to rewind: the session has no turn yet");
            return;
        }
        let mut options: Vec<String> = points.iter().map(|p| p.label.clone()).collect();
        options.push("Cancel".into());
        let modal = Modal {
            title: "Rewind to just before…".into(),
            body: "This session's prompts, newest first, with the files each turn changed.".into(),
            options,
            selected: 0,
            markdown: false,
        };
        self.pending = Some((Pending::Rewind(RewindStep::Turns(points)), modal));
    }

    /// The answer to one step of the rewind list.
    pub(super) fn rewind_answer(&mut self, step: RewindStep, choice: usize) {
        match step {
            RewindStep::Turns(mut points) => {
                if choice >= points.len() {
                    return;
                }
                let point = points.swap_remove(choice);
                let modal = Modal {
                    title: format!(
                        "Just before turn {}: {}",
                        point.args,
                        one_line(point.text.as_deref().unwrap_or(""), 50)
                    ),
                    body: format!(
                        "{}\nFiles changed since the agent's last turn (by hand) are kept. Undo with /rewind undo.",
                        point.detail
                    ),
                    options: ACTIONS.iter().map(|a| (*a).to_owned()).collect(),
                    selected: 0,
                    markdown: false,
                };
                self.pending = Some((Pending::Rewind(RewindStep::Action(point)), modal));
            }
            RewindStep::Action(point) => match choice {
                0 => self.rewind_to(&point, ""),
                1 => self.rewind_to(&point, " --conversation"),
                2 => self.rewind_to(&point, " --files"),
                3 => self.fork_here(&point),
                _ => {}
            },
        }
    }

    /// `/rewind N FLAGS` through the checkpoints plugin; a rewound conversation puts turn
    /// N's prompt back in the editor.
    fn rewind_to(&mut self, point: &CommandChoice, flags: &str) {
        match self
            .driver
            .command(REWIND, &format!("{}{flags}", point.args))
        {
            Ok(CommandRun::Said(said)) => {
                self.cells.notice(Level::Info, said);
                if flags != " --files"
                    && self.input.is_empty()
                    && let Some(prompt) = &point.text
                {
                    self.input.set(prompt);
                }
            }
            Err(DriverError::Unavailable(_)) => self.cells.notice(Level::Error, OFF.to_owned()),
            Err(e) => self.cells.notice(Level::Error, e.to_string()),
            // A remote session's rewind runs on the server (the local plugin's acts at once).
            Ok(CommandRun::Later(later)) => {
                self.run_later(REWIND, later);
                if flags != " --files"
                    && self.input.is_empty()
                    && let Some(prompt) = &point.text
                {
                    self.input.set(prompt);
                }
            }
        }
    }

    /// A new session seeded with this one up to just before the turn, continued here.
    fn fork_here(&mut self, point: &CommandChoice) {
        match self.driver.fork(point.seq) {
            Ok(path) => {
                let target = Target {
                    resume: Some(path),
                    model: self.model.clone(),
                };
                if self.switch(target, History::Render) {
                    self.cells.notice(
                        Level::Info,
                        format!(
                            "Forked just before turn {} of the last session; the files were not changed (/rewind {} --files does that).",
                            point.args, point.args
                        ),
                    );
                    if self.input.is_empty()
                        && let Some(prompt) = &point.text
                    {
                        self.input.set(prompt);
                    }
                }
            }
            Err(e) => self.cells.notice(Level::Error, e.to_string()),
        }
    }
}
