//! The presenter seam: how a plugin's own events reach people without any front end knowing
//! the plugin's words.
//!
//! A plugin that logs events of its own (`mcp/server`, `schedule/fired`, `workflow/agent` …)
//! hands the host a [`Presenter`]; the presenter turns each of those events into generic
//! [`Item`]s — a notice, a boundary marker, a step of progress under a call, a status item,
//! files presented, the outcome of what the plugin drove. Every front end (the terminal UI's
//! cells, `keel run`'s progress and final lines, ACP updates, MCP progress, the transcript and
//! the HTML page) renders those items and nothing else of a plugin, so one log looks the same
//! everywhere, and a fifth front end is one more renderer of the same items.
//!
//! Data flow: a view owns one [`Presenters`] (a fresh state per view, made from the plugins'
//! presenters); it feeds every committed event to [`Presenters::present`] in log order and
//! renders what comes back. A presenter may keep state across events (the goal's round count);
//! it sees every event, core ones included, and answers only for its own. Nothing here performs
//! I/O.

use crate::{Seq, SessionEvent};
use std::sync::Arc;

/// A notice's weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Something went wrong: what and what to do.
    Error,
    /// Worth knowing.
    Info,
}

/// One step of what a call that runs children is doing (a workflow's agents, ralph's rounds),
/// folded by the views into a tree under the call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// The tree's title (`name: description`).
    Title(String),
    /// A heading (a phase); children and log lines after it are indented under it.
    Heading(String),
    /// A child, updated in place by later steps with the same `key`.
    Child {
        /// What tells this child from the others of the call.
        key: String,
        /// How it is shown.
        label: String,
        /// `running`, `completed`, `failed`, or a word of the plugin's own (shown as is).
        state: String,
        /// Why it failed, empty when it did not.
        error: String,
    },
    /// A log line.
    Log(String),
}

/// A file the model presented to the person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct File {
    /// Its path as given.
    pub path: String,
    /// What it is, if said.
    pub description: Option<String>,
}

impl std::fmt::Display for File {
    /// `path — description`, or the path alone.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.description {
            Some(d) => write!(f, "{} — {d}", self.path),
            None => f.write_str(&self.path),
        }
    }
}

/// A plugin's state worth keeping in sight: a status line item, and what continuity
/// re-projects of it once the events that set it left the model's history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// The status line's words (`goal g1 round 2/10`).
    pub text: String,
    /// What survives compaction, if anything.
    pub carry: Option<Carry>,
}

/// A block continuity re-projects for a status item (see the continuity spec).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Carry {
    /// The block's heading.
    pub title: String,
    /// Its text.
    pub body: String,
    /// Seq of the event the state comes from.
    pub seq: Seq,
    /// While the event at this seq is on the model's surface, the model sees the state and it
    /// is not re-projected (`None`: re-project whenever the state's own event is gone).
    pub anchor: Option<Seq>,
}

/// How something a plugin drove ended (a goal: complete, blocked, out of rounds): the last one
/// decides a headless run's exit code when the run was started for it (`keel run --goal`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// 0 when it succeeded, else a code of the plugin's (documented with its flag).
    pub code: u8,
    /// One line saying how it ended.
    pub text: String,
}

/// What one event shows, whatever the front end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// A banner; `detail` lines go under it where there is room (a terminal's stderr).
    Notice {
        /// Its weight.
        level: Level,
        /// What to say (and what to do about it).
        text: String,
        /// More lines, for front ends that show them.
        detail: Vec<String>,
    },
    /// A boundary in the conversation (a scheduled prompt started a turn).
    Marker(String),
    /// A step of progress under the call `call_id`.
    Progress {
        /// The call running children.
        call_id: String,
        /// What it did.
        step: Step,
    },
    /// A status item under `key` (one per key), or its end (`None`).
    Status {
        /// Which item (`goal`).
        key: String,
        /// The item, `None` to clear it.
        status: Option<Status>,
    },
    /// Files presented in the running turn (listed when the turn ends).
    Files(Vec<File>),
    /// How something the plugin drove ended.
    Outcome(Outcome),
}

impl Item {
    /// The item as one line of text, for front ends that print lines (`keel run`'s stderr, MCP
    /// progress, the transcript); `None` for a status item cleared.
    pub fn line(&self) -> Option<String> {
        Some(match self {
            Item::Notice { text, .. } | Item::Marker(text) => text.clone(),
            Item::Progress { step, .. } => match step {
                Step::Title(t) => t.clone(),
                Step::Heading(t) => format!("▸ {t}"),
                Step::Log(t) => format!("· {t}"),
                Step::Child {
                    label,
                    state,
                    error,
                    ..
                } if error.is_empty() => format!("{label}: {state}"),
                Step::Child {
                    label,
                    state,
                    error,
                    ..
                } => format!("{label}: {state}: {error}"),
            },
            Item::Status { status, .. } => status.as_ref()?.text.clone(),
            Item::Files(files) => format!(
                "files presented: {}",
                files
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Item::Outcome(o) => o.text.clone(),
        })
    }

    /// A notice without detail lines.
    pub fn notice(level: Level, text: impl Into<String>) -> Item {
        Item::Notice {
            level,
            text: text.into(),
            detail: Vec::new(),
        }
    }
}

/// A plugin's presenter: its events in, generic items out (see the module docs).
pub trait Presenter: Send {
    /// Add the items `event` shows to `out` (nothing for events that are not the plugin's).
    fn present(&mut self, event: &SessionEvent, out: &mut Vec<Item>);
}

/// Makes a fresh presenter (one per view: presenters may keep state).
pub type MakePresenter = Arc<dyn Fn() -> Box<dyn Presenter> + Send + Sync>;

/// The presenters of a view, one per plugin that has one.
#[derive(Default)]
pub struct Presenters {
    list: Vec<Box<dyn Presenter>>,
}

impl std::fmt::Debug for Presenters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Presenters({})", self.list.len())
    }
}

impl Presenters {
    /// Fresh presenters from `makers`.
    pub fn new(makers: &[MakePresenter]) -> Presenters {
        Presenters {
            list: makers.iter().map(|make| make()).collect(),
        }
    }

    /// The items `event` shows, in presenter order.
    pub fn present(&mut self, event: &SessionEvent) -> Vec<Item> {
        let mut out = Vec::new();
        for p in &mut self.list {
            p.present(event, &mut out);
        }
        out
    }
}

/// A set of presenter makers, cheap to clone and hand to every view of a process.
#[derive(Clone, Default)]
pub struct PresenterSet {
    makers: Arc<Vec<MakePresenter>>,
}

impl std::fmt::Debug for PresenterSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PresenterSet({})", self.makers.len())
    }
}

impl PresenterSet {
    /// A set of `makers`.
    pub fn new(makers: Vec<MakePresenter>) -> PresenterSet {
        PresenterSet {
            makers: Arc::new(makers),
        }
    }

    /// Fresh presenters for one view.
    pub fn make(&self) -> Presenters {
        Presenters::new(&self.makers)
    }

    /// Present a whole log, in order: every item with the seq of the event that showed it.
    pub fn present_all<'a>(
        &self,
        events: impl Iterator<Item = &'a SessionEvent>,
    ) -> Vec<(Seq, Item)> {
        let mut p = self.make();
        let mut out = Vec::new();
        for event in events {
            out.extend(p.present(event).into_iter().map(|i| (event.seq, i)));
        }
        out
    }
}

/// A presenter from a function of one event (for plugins whose events need no state).
pub fn stateless(f: fn(&SessionEvent, &mut Vec<Item>)) -> MakePresenter {
    struct Stateless(fn(&SessionEvent, &mut Vec<Item>));
    impl Presenter for Stateless {
        fn present(&mut self, event: &SessionEvent, out: &mut Vec<Item>) {
            (self.0)(event, out)
        }
    }
    Arc::new(move || Box::new(Stateless(f)))
}

/// The data of `event` when it is of type `type_name` (a plugin's own, unmodelled event).
pub fn data_of<'a>(event: &'a SessionEvent, type_name: &str) -> Option<&'a serde_json::Value> {
    match &event.body {
        crate::EventBody::Other(o) if o.type_name == type_name => Some(&o.data),
        _ => None,
    }
}

/// A string field of an event's data, `""` when absent.
pub fn field<'a>(data: &'a serde_json::Value, key: &str) -> &'a str {
    data.get(key)
        .and_then(serde_json::Value::as_str)
        .unwrap_or("")
}
