//! The conversation as a person sees it, built from session events only: the cells a session's
//! events become (the person's messages, the model's answers and reasoning, tool calls paired
//! with their results and approvals, plans, boundaries and notices), plus the state the events
//! leave (todo list, plan mode, usage, sandbox and approval policy). The same events give the
//! same cells whether they arrive live (the agent's `session/event` feed, deltas and all) or
//! from a session file being resumed, so a resumed session looks as it looked live.
//!
//! Plugins' own events reach the cells only as the generic items their presenters give
//! ([`keel_protocol::present`]): notices, markers, progress under a call, status items,
//! presented files, outcomes. Nothing here knows a plugin's event names.
//!
//! Data flow: a front end makes the cells with the plugins' presenters
//! ([`Cells::with_presenters`]) and feeds each committed event to [`Cells::apply`], which changes
//! the cells and says what changed ([`Change`]): a front end that redraws everything (keel-tui)
//! ignores the answer, one that sends increments (keel-acp's `session/update`s) maps each change
//! to an update. Nothing here draws or writes; text is shortened with [`super::text`].

use super::text::one_line;
use keel_protocol::present::{File, Item, Outcome, PresenterSet, Presenters};
use keel_protocol::{
    EventBody, SessionEvent, StepNo, StreamChunk, TimeMs, TodoItem, TurnEndReason, TurnNo,
};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};

/// How a tool call stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolState {
    /// Started, no result yet.
    Running,
    /// Finished without error.
    Done,
    /// Finished with an error result.
    Failed,
    /// Refused by an approval or a policy.
    Denied,
}

/// What a finished tool card shows under its title.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Detail {
    /// Nothing more than the summary.
    None,
    /// A change to a file: `(-|+| , text)` lines.
    Diff(Vec<(char, String)>),
    /// A command's exit code and the last lines of its output.
    Output {
        /// Exit code, when the command ran.
        exit: Option<i64>,
        /// The tail of the output.
        tail: Vec<String>,
    },
}

/// One tool call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCard {
    /// The call id.
    pub call_id: String,
    /// The tool.
    pub name: String,
    /// The argument a person recognises the call by (path, command, pattern…), on one line.
    pub key_arg: String,
    /// The raw argument string, as the model wrote it.
    pub arguments: String,
    /// When it started (event time, ms).
    pub started: TimeMs,
    /// When it finished.
    pub finished: Option<TimeMs>,
    /// Its state.
    pub state: ToolState,
    /// One line about the result.
    pub summary: String,
    /// More about it.
    pub detail: Detail,
    /// What its children are doing (workflow, ralph): shown while it runs.
    pub progress: Box<super::progress::Progress>,
}

pub use keel_protocol::present::Level;

/// One element of the conversation view.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    /// What the person typed.
    User(String),
    /// The model's answer (Markdown), `streaming` while it arrives.
    Assistant {
        /// The text so far.
        text: String,
        /// Still arriving.
        streaming: bool,
    },
    /// The model's reasoning (collapsed to one line by default).
    Reasoning {
        /// The text so far.
        text: String,
        /// Still arriving.
        streaming: bool,
    },
    /// A tool call.
    Tool(ToolCard),
    /// A boundary: compaction, resume, a turn cancelled.
    Marker(String),
    /// A banner.
    Notice(Level, String),
    /// Files the model presented in a turn, listed when the turn ends.
    Presented(Vec<File>),
    /// A plan proposed with `exit_plan_mode`, and whether it was approved.
    Plan {
        /// The plan (Markdown).
        text: String,
        /// `None` while it waits.
        approved: Option<bool>,
    },
}

/// Figures for the status line and `/status`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Usage {
    /// Model in force.
    pub model: String,
    /// Its context window (tokens).
    pub context_window: u64,
    /// Prompt tokens of the last request (the context in use).
    pub last_prompt: u64,
    /// Prompt tokens over the session.
    pub prompt: u64,
    /// Of which served from the provider's cache.
    pub cached: u64,
    /// Output tokens over the session.
    pub output: u64,
    /// Model requests answered.
    pub requests: u64,
}

impl Usage {
    /// Share of the context window in use, in percent (0 when unknown).
    pub fn context_percent(&self) -> u64 {
        (self.last_prompt * 100)
            .checked_div(self.context_window)
            .unwrap_or(0)
    }

    /// Share of prompt tokens served from the cache, in percent.
    pub fn cache_percent(&self) -> u64 {
        (self.cached * 100).checked_div(self.prompt).unwrap_or(0)
    }
}

/// What [`Cells::apply`] changed, in the order it changed it.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// A cell was added at this index (a message whole, or the first delta of a streamed one).
    Added(usize),
    /// Text was appended to the streaming message or reasoning cell at `at`.
    Streamed {
        /// The cell.
        at: usize,
        /// What was appended.
        delta: String,
    },
    /// The cell at this index changed otherwise (a message replaced what streamed of it, a
    /// plan was decided, a card settled or renamed, a stream ended).
    Updated(usize),
    /// A call's result arrived (also for a call without a card here).
    ToolResult {
        /// The call.
        call_id: String,
        /// The result is an error.
        is_error: bool,
        /// The whole result text.
        output: String,
    },
    /// A call was refused at approval.
    Refused {
        /// The call.
        call_id: String,
        /// Why, if the decision said.
        reason: Option<String>,
    },
    /// The todo list was rewritten ([`Cells::todos`]).
    Todos,
    /// A status item changed ([`Cells::status`]).
    Status,
    /// A plugin's presenter added the cell at this index (a notice, a marker, an outcome):
    /// reported instead of [`Change::Added`], so a front end that shows the core's own notices
    /// in other ways (ACP: a turn's stop reason) still shows every plugin's.
    Shown(usize),
}

/// The conversation (see the module docs).
#[derive(Debug, Default)]
pub struct Cells {
    /// The cells, oldest first.
    pub cells: Vec<Cell>,
    /// Token figures.
    pub usage: Usage,
    /// The todo list, when one is current.
    pub todos: Vec<TodoItem>,
    /// Plan mode is on.
    pub plan_mode: bool,
    /// The running step `(turn, step, started)`, while a turn runs.
    pub step: Option<(TurnNo, StepNo, TimeMs)>,
    /// Sandbox mode in force, as logged.
    pub sandbox: String,
    /// Approval policy in force, as logged.
    pub approval: String,
    /// Plugins' status items by key (`goal` → `goal g1 round 2/10`), shown while set.
    pub status: BTreeMap<String, String>,
    /// The last outcome a plugin gave (how the goal ended).
    pub outcome: Option<Outcome>,
    /// Files presented in the running turn, listed when it ends.
    presented: Vec<File>,
    /// The plugins' presenters.
    presenters: Presenters,
    /// Cell index of each call id's card.
    tools: HashMap<String, usize>,
    /// Index of the streaming answer / reasoning cell of the current step.
    answer: Option<usize>,
    reasoning: Option<usize>,
}

/// The argument a person recognises a call to a known tool by (the command, path, pattern, a
/// subagent's description…), whole; `None` for other tools.
pub fn key_arg(name: &str, args: &Value) -> Option<String> {
    let field = |k: &str| args.get(k).and_then(Value::as_str).map(str::to_owned);
    match name {
        "bash" => field("command"),
        // `file_path` since keel took dsh's tool contract; `path` in older sessions.
        "read" | "write" | "edit" => field("file_path").or_else(|| field("path")),
        "glob" | "grep" => field("pattern"),
        "todo_write" => args
            .get("todos")
            .and_then(Value::as_array)
            .map(|t| format!("{} item(s)", t.len())),
        "subagent" | "delegate" => field("description")
            .or_else(|| field("label"))
            .or_else(|| field("prompt")),
        // The first question, and how many more.
        "ask_user_question" => {
            let questions = args.get("questions").and_then(Value::as_array)?;
            let first = questions.first()?.get("question").and_then(Value::as_str)?;
            Some(match questions.len() {
                1 => first.to_owned(),
                n => format!("{first} (+{} more)", n - 1),
            })
        }
        _ => None,
    }
}

/// What a tool card shows a call by: its [`key_arg`], else its first string argument, else its
/// compact JSON, on one line.
fn card_arg(name: &str, args: &Value) -> String {
    let text = key_arg(name, args).unwrap_or_else(|| {
        // The first string argument, or the compact JSON.
        args.as_object()
            .and_then(|o| o.values().find_map(|v| v.as_str().map(str::to_owned)))
            .unwrap_or_else(|| {
                if args.as_object().is_some_and(|o| o.is_empty()) {
                    String::new()
                } else {
                    args.to_string()
                }
            })
    });
    one_line(&text, KEY_ARG_CHARS)
}

/// Lines of a change to a file, from the call's arguments (`edit`: old → new; `write`: the
/// new content), at most `max` lines.
fn diff_of(name: &str, args: &Value, max: usize) -> Vec<(char, String)> {
    let field = |k: &str| args.get(k).and_then(Value::as_str).unwrap_or("");
    let mut lines: Vec<(char, String)> = match name {
        "edit" => field("old_string")
            .lines()
            .map(|l| ('-', l.to_owned()))
            .chain(field("new_string").lines().map(|l| ('+', l.to_owned())))
            .collect(),
        "write" => field("content")
            .lines()
            .map(|l| ('+', l.to_owned()))
            .collect(),
        _ => Vec::new(),
    };
    if lines.len() > max {
        let more = lines.len() - max;
        lines.truncate(max);
        lines.push((' ', format!("… {more} more line(s)")));
    }
    lines
}

/// Characters of a card's argument and result summary.
const KEY_ARG_CHARS: usize = 200;
/// Lines of a command's output kept on its card.
const TAIL: usize = 5;
/// Lines of a diff kept on its card.
const DIFF_LINES: usize = 40;

impl Cells {
    /// An empty conversation that shows no plugin's events (see [`Cells::with_presenters`]).
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty conversation showing plugins' events through `presenters`.
    pub fn with_presenters(presenters: &PresenterSet) -> Self {
        Cells {
            presenters: presenters.make(),
            ..Self::default()
        }
    }

    fn push(&mut self, cell: Cell) -> usize {
        self.cells.push(cell);
        self.cells.len() - 1
    }

    /// A boundary marker (the UI adds "resumed" itself; events add compaction and cancels).
    pub fn marker(&mut self, text: impl Into<String>) {
        self.push(Cell::Marker(text.into()));
    }

    /// A banner.
    pub fn notice(&mut self, level: Level, text: impl Into<String>) {
        self.push(Cell::Notice(level, text.into()));
    }

    /// Take one committed event into the view; what changed, in order.
    pub fn apply(&mut self, event: &SessionEvent) -> Vec<Change> {
        let before = self.cells.len();
        let mut changes = Vec::new();
        match &event.body {
            EventBody::UserMessage(m) if m.source.is_user() => {
                let text = m.text();
                if !text.trim().is_empty() {
                    self.push(Cell::User(text));
                }
            }
            EventBody::StepStart(s) => {
                self.step = Some((s.turn, s.step, event.time));
                self.answer = None;
                self.reasoning = None;
            }
            EventBody::StepEnd(_) => {
                self.finish_streams(&mut changes);
            }
            EventBody::TurnEnd(end) => {
                self.finish_streams(&mut changes);
                self.step = None;
                for card in self.running_cards() {
                    if let Cell::Tool(t) = &mut self.cells[card] {
                        t.state = ToolState::Failed;
                        t.summary = "did not finish".into();
                        changes.push(Change::Updated(card));
                    }
                }
                if !self.presented.is_empty() {
                    let files = std::mem::take(&mut self.presented);
                    self.push(Cell::Presented(files));
                }
                self.turn_end(&end.reason);
            }
            EventBody::AssistantChunk(c) => match &c.chunk {
                StreamChunk::TextDelta { text, .. } => {
                    changes.push(self.stream_text(text, false));
                }
                StreamChunk::ReasoningDelta { text, .. } => {
                    changes.push(self.stream_text(text, true));
                }
                _ => {}
            },
            EventBody::AssistantMessage(m) => {
                let text = m.message.text();
                let reasoning = m.message.reasoning();
                // The message is the authority: it replaces what streamed.
                if !reasoning.is_empty() {
                    changes.push(self.set_stream(true, reasoning));
                }
                if !text.is_empty() {
                    changes.push(self.set_stream(false, text));
                }
                self.finish_streams(&mut changes);
                // What follows in the step (another message) starts cells of its own.
                self.answer = None;
                self.reasoning = None;
                if let Some(u) = &m.usage {
                    self.usage.requests += 1;
                    self.usage.last_prompt = u.prompt_tokens();
                    self.usage.prompt += u.prompt_tokens();
                    self.usage.cached += u.cache_read_tokens;
                    self.usage.output += u.output_tokens;
                }
            }
            EventBody::ToolCall(c) => {
                let args: Value = serde_json::from_str(&c.arguments).unwrap_or(Value::Null);
                let detail = match c.name.as_str() {
                    "edit" | "write" => Detail::Diff(diff_of(&c.name, &args, DIFF_LINES)),
                    _ => Detail::None,
                };
                let at = self.push(Cell::Tool(ToolCard {
                    call_id: c.call_id.clone(),
                    name: c.name.clone(),
                    key_arg: card_arg(&c.name, &args),
                    arguments: c.arguments.clone(),
                    started: event.time,
                    finished: None,
                    state: ToolState::Running,
                    summary: String::new(),
                    detail,
                    progress: Default::default(),
                }));
                self.tools.insert(c.call_id.clone(), at);
                if c.name == "exit_plan_mode" {
                    let plan = args
                        .get("plan")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned();
                    self.push(Cell::Plan {
                        text: plan,
                        approved: None,
                    });
                }
            }
            EventBody::ToolResult(r) => {
                let exit = r
                    .meta
                    .as_ref()
                    .and_then(|m| m.get("exitCode"))
                    .and_then(Value::as_i64);
                for block in r.message.tool_results() {
                    let text = block.text();
                    if let Some(at) = self.finish_card(
                        &block.tool_call_id,
                        block.is_error,
                        &text,
                        exit,
                        event.time,
                    ) {
                        changes.push(Change::Updated(at));
                    }
                    changes.push(Change::ToolResult {
                        call_id: block.tool_call_id.clone(),
                        is_error: block.is_error,
                        output: text,
                    });
                }
            }
            EventBody::ApprovalDecided(d) => {
                if let Some(&at) = self.tools.get(&d.call_id)
                    && let Some(Cell::Tool(card)) = self.cells.get_mut(at)
                    && !d.approved
                {
                    card.state = ToolState::Denied;
                    changes.push(Change::Updated(at));
                }
                if !d.approved {
                    changes.push(Change::Refused {
                        call_id: d.call_id.clone(),
                        reason: d.reason.clone(),
                    });
                }
            }
            EventBody::PlanMode(p) => {
                self.plan_mode = p.active;
                if let Some(approved) = p.approved
                    && let Some((at, Cell::Plan { approved: a, .. })) = self
                        .cells
                        .iter_mut()
                        .enumerate()
                        .rev()
                        .find(|(_, c)| matches!(c, Cell::Plan { .. }))
                {
                    *a = Some(approved);
                    changes.push(Change::Updated(at));
                }
            }
            EventBody::TodoWrite(t) => {
                self.todos = t.todos.clone();
                changes.push(Change::Todos);
            }
            EventBody::CompactionEnd(c) => match &c.error {
                None => self.marker(format!(
                    "history compacted ({}): ~{} → ~{} tokens",
                    c.outcome, c.before_tokens, c.after_tokens
                )),
                Some(e) => self.notice(Level::Error, format!("Compaction failed: {e}")),
            },
            EventBody::RequestContext(c) => {
                self.usage.model = c.model.clone();
                self.usage.context_window = c.context_window;
            }
            EventBody::LlmRetry(r) => self.notice(
                Level::Info,
                format!(
                    "model call failed ({}), retry {} in {} ms",
                    r.failure.code, r.attempt, r.delay_ms
                ),
            ),
            EventBody::SandboxMode(s) => self.sandbox = s.mode.clone(),
            EventBody::ApprovalPolicy(p) => self.approval = p.policy.clone(),
            EventBody::SubagentDescriptor(s) => {
                if let Some(call) = &s.call_id
                    && let Some(&at) = self.tools.get(call)
                    && let Some(Cell::Tool(card)) = self.cells.get_mut(at)
                {
                    card.key_arg = one_line(&s.description, KEY_ARG_CHARS);
                    changes.push(Change::Updated(at));
                }
            }
            _ => {}
        }
        let from_plugins = self.cells.len();
        for item in self.presenters.present(event) {
            self.show(item, &mut changes);
        }
        let shown: Vec<usize> = (from_plugins..self.cells.len()).collect();
        // Cells pushed whole (the person's messages, cards, plans, markers, notices).
        let streamed: Vec<usize> = changes
            .iter()
            .filter_map(|c| match c {
                Change::Added(at) => Some(*at),
                _ => None,
            })
            .collect();
        changes.extend(
            (before..self.cells.len())
                .filter(|at| !streamed.contains(at))
                .map(|at| match shown.contains(&at) {
                    true => Change::Shown(at),
                    false => Change::Added(at),
                }),
        );
        changes
    }

    /// Show one item of a plugin's presenter.
    fn show(&mut self, item: Item, changes: &mut Vec<Change>) {
        match item {
            Item::Notice {
                level,
                text,
                detail,
            } => {
                let mut text = text;
                for line in detail {
                    text.push('\n');
                    text.push_str(&line);
                }
                self.notice(level, text);
            }
            Item::Marker(text) => self.marker(text),
            Item::Progress { call_id, step } => {
                if let Some(&at) = self.tools.get(&call_id)
                    && let Some(Cell::Tool(card)) = self.cells.get_mut(at)
                {
                    card.progress.apply(&step);
                    changes.push(Change::Updated(at));
                }
            }
            Item::Status { key, status } => {
                match status {
                    Some(s) => self.status.insert(key, s.text),
                    None => self.status.remove(&key),
                };
                changes.push(Change::Status);
            }
            Item::Files(files) => self.presented.extend(files),
            Item::Outcome(outcome) => {
                let level = if outcome.code == 0 {
                    Level::Info
                } else {
                    Level::Error
                };
                self.notice(level, outcome.text.clone());
                self.outcome = Some(outcome);
            }
        }
    }

    /// The boundary or notice a turn's end shows, if any.
    fn turn_end(&mut self, reason: &TurnEndReason) {
        match reason {
            TurnEndReason::Completed => {}
            TurnEndReason::Aborted { reason } => {
                self.marker(format!("turn cancelled ({reason})"));
            }
            TurnEndReason::Interrupted => self.marker("turn interrupted"),
            TurnEndReason::Blocked { reason } => self.notice(
                Level::Info,
                format!(
                    "The turn stopped: {}",
                    reason.as_deref().unwrap_or("no reason given")
                ),
            ),
            TurnEndReason::MaxTokens => self.notice(
                Level::Error,
                "The model hit its output limit. Ask it to continue, or raise \
                 agent.max_tokens.",
            ),
            TurnEndReason::Error { code, message } => self.notice(
                Level::Error,
                format!(
                    "{code}: {}. Check the model settings (/status) and try again.",
                    message
                        .strip_prefix(code.as_str())
                        .and_then(|m| m.strip_prefix(": "))
                        .unwrap_or(message)
                ),
            ),
        }
    }

    /// Settle the card of `call_id` with its result; its index, if it has a card.
    fn finish_card(
        &mut self,
        call_id: &str,
        is_error: bool,
        text: &str,
        exit: Option<i64>,
        time: TimeMs,
    ) -> Option<usize> {
        let &at = self.tools.get(call_id)?;
        let Some(Cell::Tool(card)) = self.cells.get_mut(at) else {
            return None;
        };
        card.finished = Some(time);
        if is_error {
            card.state = if card.state == ToolState::Denied {
                ToolState::Denied
            } else {
                ToolState::Failed
            };
            card.summary = one_line(text.lines().next().unwrap_or("failed"), KEY_ARG_CHARS);
            if matches!(card.detail, Detail::Diff(_)) {
                card.detail = Detail::None;
            }
        } else {
            card.state = ToolState::Done;
            let lines = text.lines().count();
            card.summary = match card.name.as_str() {
                "edit" | "write" => one_line(text.lines().next().unwrap_or(""), KEY_ARG_CHARS),
                _ => format!("{lines} line{}", if lines == 1 { "" } else { "s" }),
            };
        }
        if card.name == "bash" {
            // A failure's first line is the summary already: the tail starts after it (a
            // denied call's `DENIED: reason` is shown once).
            let all: Vec<&str> = text.lines().skip(usize::from(is_error)).collect();
            let tail = all[all.len().saturating_sub(TAIL)..]
                .iter()
                .map(|l| (*l).to_owned())
                .collect();
            card.detail = Detail::Output { exit, tail };
        }
        Some(at)
    }

    fn running_cards(&self) -> Vec<usize> {
        self.cells
            .iter()
            .enumerate()
            .filter(|(_, c)| matches!(c, Cell::Tool(t) if t.state == ToolState::Running))
            .map(|(i, _)| i)
            .collect()
    }

    /// The index and text of the current step's answer (or reasoning) cell, if it has one.
    fn stream_cell(&mut self, reasoning: bool) -> Option<(usize, &mut String)> {
        let at = if reasoning {
            self.reasoning
        } else {
            self.answer
        }?;
        match self.cells.get_mut(at)? {
            Cell::Assistant { text, .. } | Cell::Reasoning { text, .. } => Some((at, text)),
            _ => None,
        }
    }

    /// Append `delta` to the streaming answer (or reasoning) cell, starting one if none is.
    fn stream_text(&mut self, delta: &str, reasoning: bool) -> Change {
        if let Some((at, text)) = self.stream_cell(reasoning) {
            text.push_str(delta);
            return Change::Streamed {
                at,
                delta: delta.to_owned(),
            };
        }
        let text = delta.to_owned();
        let cell = if reasoning {
            Cell::Reasoning {
                text,
                streaming: true,
            }
        } else {
            Cell::Assistant {
                text,
                streaming: true,
            }
        };
        let at = self.push(cell);
        if reasoning {
            self.reasoning = Some(at);
        } else {
            self.answer = Some(at);
        }
        Change::Added(at)
    }

    /// Replace what streamed of the answer (or reasoning) with `full`, or start its cell.
    fn set_stream(&mut self, reasoning: bool, full: String) -> Change {
        if let Some((at, text)) = self.stream_cell(reasoning) {
            *text = full;
            return Change::Updated(at);
        }
        self.stream_text(&full, reasoning)
    }

    fn finish_streams(&mut self, changes: &mut Vec<Change>) {
        for at in [self.answer, self.reasoning].into_iter().flatten() {
            if let Some(Cell::Assistant { streaming, .. } | Cell::Reasoning { streaming, .. }) =
                self.cells.get_mut(at)
                && *streaming
            {
                *streaming = false;
                if !changes.contains(&Change::Updated(at)) && !changes.contains(&Change::Added(at))
                {
                    changes.push(Change::Updated(at));
                }
            }
        }
    }

    /// Whether anything is still arriving or running (the view animates then).
    pub fn busy(&self) -> bool {
        self.step.is_some()
    }
}

#[cfg(test)]
#[path = "cells_tests.rs"]
mod tests;
