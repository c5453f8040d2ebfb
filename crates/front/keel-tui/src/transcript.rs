//! The conversation as the UI shows it, built from session events only: the same events give
//! the same cells whether they arrive live (the agent's `session/event` feed) or from a session
//! file being resumed, so a resumed session looks as it looked live.

use keel_protocol::{EventBody, SessionEvent, StreamChunk, TimeMs, TodoItem, TurnEndReason};
use serde_json::Value;
use std::collections::HashMap;

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
    /// The argument a person recognises the call by (path, command, pattern…).
    pub key_arg: String,
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
}

/// A notice's weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Something went wrong: what and what to do.
    Error,
    /// Worth knowing.
    Info,
}

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

/// The conversation (see the module docs).
#[derive(Debug, Default)]
pub struct Transcript {
    /// The cells, oldest first.
    pub cells: Vec<Cell>,
    /// Token figures.
    pub usage: Usage,
    /// The todo list, when one is current.
    pub todos: Vec<TodoItem>,
    /// Plan mode is on.
    pub plan_mode: bool,
    /// The running step `(turn, step, started)`, while a turn runs.
    pub step: Option<(u32, u32, TimeMs)>,
    /// Sandbox mode in force, as logged.
    pub sandbox: String,
    /// Approval policy in force, as logged.
    pub approval: String,
    /// Cell index of each call id's card.
    tools: HashMap<String, usize>,
    /// Index of the streaming answer / reasoning cell of the current step.
    answer: Option<usize>,
    reasoning: Option<usize>,
}

/// The argument a call is recognised by.
fn key_arg(name: &str, args: &Value) -> String {
    let field = |k: &str| args.get(k).and_then(Value::as_str).map(str::to_owned);
    let picked = match name {
        "bash" => field("command"),
        "read" | "write" | "edit" => field("path"),
        "glob" | "grep" => field("pattern"),
        "todo_write" => args
            .get("todos")
            .and_then(Value::as_array)
            .map(|t| format!("{} item(s)", t.len())),
        "subagent" | "delegate" => field("description")
            .or_else(|| field("label"))
            .or_else(|| field("prompt")),
        _ => None,
    };
    let text = picked.unwrap_or_else(|| {
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
    one_line(&text, 200)
}

/// `s` on one line, at most `max` characters.
pub fn one_line(s: &str, max: usize) -> String {
    let flat: String = s
        .chars()
        .map(|c| if c == '\n' || c == '\t' { ' ' } else { c })
        .collect();
    let flat = flat.trim();
    if flat.chars().count() <= max {
        flat.to_owned()
    } else {
        let cut: String = flat.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    }
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

/// Lines of a command's output kept on its card.
const TAIL: usize = 5;
/// Lines of a diff kept on its card.
const DIFF_LINES: usize = 40;

impl Transcript {
    /// An empty conversation.
    pub fn new() -> Self {
        Self::default()
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

    /// Take one committed event into the view.
    pub fn apply(&mut self, event: &SessionEvent) {
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
                self.finish_streams();
            }
            EventBody::TurnEnd(end) => {
                self.finish_streams();
                self.step = None;
                for card in self.running_cards() {
                    if let Cell::Tool(t) = &mut self.cells[card] {
                        t.state = ToolState::Failed;
                        t.summary = "did not finish".into();
                    }
                }
                match &end.reason {
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
            EventBody::AssistantChunk(c) => match &c.chunk {
                StreamChunk::TextDelta { text, .. } => self.stream_text(text, false),
                StreamChunk::ReasoningDelta { text, .. } => self.stream_text(text, true),
                _ => {}
            },
            EventBody::AssistantMessage(m) => {
                let text = m.message.text();
                let reasoning = m.message.reasoning();
                // The message is the authority: it replaces what streamed.
                if !reasoning.is_empty() {
                    self.set_stream(true, reasoning);
                }
                if !text.is_empty() {
                    self.set_stream(false, text);
                }
                self.finish_streams();
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
                    key_arg: key_arg(&c.name, &args),
                    started: event.time,
                    finished: None,
                    state: ToolState::Running,
                    summary: String::new(),
                    detail,
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
                let meta = r.meta.as_ref();
                for block in r.message.tool_results() {
                    let Some(&at) = self.tools.get(&block.tool_call_id) else {
                        continue;
                    };
                    let Some(Cell::Tool(card)) = self.cells.get_mut(at) else {
                        continue;
                    };
                    let text = block.text();
                    card.finished = Some(event.time);
                    if block.is_error {
                        card.state = if card.state == ToolState::Denied {
                            ToolState::Denied
                        } else {
                            ToolState::Failed
                        };
                        card.summary = one_line(text.lines().next().unwrap_or("failed"), 200);
                        if matches!(card.detail, Detail::Diff(_)) {
                            card.detail = Detail::None;
                        }
                    } else {
                        card.state = ToolState::Done;
                        let lines = text.lines().count();
                        card.summary = match card.name.as_str() {
                            "edit" | "write" => one_line(text.lines().next().unwrap_or(""), 200),
                            _ => format!("{lines} line{}", if lines == 1 { "" } else { "s" }),
                        };
                    }
                    if card.name == "bash" {
                        let exit = meta.and_then(|m| m.get("exitCode")).and_then(Value::as_i64);
                        let all: Vec<&str> = text.lines().collect();
                        let tail = all[all.len().saturating_sub(TAIL)..]
                            .iter()
                            .map(|l| (*l).to_owned())
                            .collect();
                        card.detail = Detail::Output { exit, tail };
                    }
                }
            }
            EventBody::ApprovalDecided(d) => {
                if let Some(&at) = self.tools.get(&d.call_id)
                    && let Some(Cell::Tool(card)) = self.cells.get_mut(at)
                    && !d.approved
                {
                    card.state = ToolState::Denied;
                }
            }
            EventBody::PlanMode(p) => {
                self.plan_mode = p.active;
                if let Some(approved) = p.approved
                    && let Some(Cell::Plan { approved: a, .. }) = self
                        .cells
                        .iter_mut()
                        .rev()
                        .find(|c| matches!(c, Cell::Plan { .. }))
                {
                    *a = Some(approved);
                }
            }
            EventBody::TodoWrite(t) => self.todos = t.todos.clone(),
            EventBody::CompactionEnd(c) => {
                if c.error.is_none() {
                    self.marker(format!(
                        "history compacted ({}): ~{} → ~{} tokens",
                        c.outcome, c.before_tokens, c.after_tokens
                    ));
                } else {
                    self.notice(
                        Level::Error,
                        format!(
                            "Compaction failed: {}",
                            c.error.as_deref().unwrap_or_default()
                        ),
                    );
                }
            }
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
                    card.key_arg = one_line(&s.description, 200);
                }
            }
            EventBody::Other(o) if o.type_name == "mcp/server" => {
                let f = |k: &str| o.data.get(k).and_then(Value::as_str).unwrap_or("");
                if f("status") == "failed" {
                    self.notice(
                        Level::Error,
                        format!(
                            "MCP server '{}' is not available: {}. Check it with: keel mcp test {}",
                            f("server"),
                            one_line(f("error"), 300),
                            f("server")
                        ),
                    );
                }
            }
            _ => {}
        }
    }

    fn running_cards(&self) -> Vec<usize> {
        self.cells
            .iter()
            .enumerate()
            .filter(|(_, c)| matches!(c, Cell::Tool(t) if t.state == ToolState::Running))
            .map(|(i, _)| i)
            .collect()
    }

    fn stream_text(&mut self, delta: &str, reasoning: bool) {
        let slot = if reasoning {
            self.reasoning
        } else {
            self.answer
        };
        match slot.and_then(|i| self.cells.get_mut(i)) {
            Some(Cell::Assistant { text, .. } | Cell::Reasoning { text, .. }) => {
                text.push_str(delta);
            }
            _ => {
                let cell = if reasoning {
                    Cell::Reasoning {
                        text: delta.to_owned(),
                        streaming: true,
                    }
                } else {
                    Cell::Assistant {
                        text: delta.to_owned(),
                        streaming: true,
                    }
                };
                let at = self.push(cell);
                if reasoning {
                    self.reasoning = Some(at);
                } else {
                    self.answer = Some(at);
                }
            }
        }
    }

    fn set_stream(&mut self, reasoning: bool, full: String) {
        let slot = if reasoning {
            self.reasoning
        } else {
            self.answer
        };
        match slot.and_then(|i| self.cells.get_mut(i)) {
            Some(Cell::Assistant { text, .. } | Cell::Reasoning { text, .. }) => *text = full,
            _ => {
                self.stream_text(&full, reasoning);
            }
        }
    }

    fn finish_streams(&mut self) {
        for i in [self.answer, self.reasoning].into_iter().flatten() {
            if let Some(Cell::Assistant { streaming, .. } | Cell::Reasoning { streaming, .. }) =
                self.cells.get_mut(i)
            {
                *streaming = false;
            }
        }
    }

    /// Whether anything is still arriving or running (the view animates then).
    pub fn busy(&self) -> bool {
        self.step.is_some()
    }
}
