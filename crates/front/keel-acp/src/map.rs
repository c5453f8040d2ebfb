//! keel session events → ACP `session/update`s. The same mapping serves a live turn (events from
//! the agent's `session_event` feed as they are appended) and a `session/load` replay (events
//! read back from the session log), so a loaded session shows as it showed live.
//!
//! | keel event | ACP update |
//! |---|---|
//! | `user/message` (the person's; replay only) | `user_message_chunk` |
//! | `assistant/chunk` text / reasoning delta (live only) | `agent_message_chunk` / `agent_thought_chunk` |
//! | `assistant/message` | the text and reasoning that did not stream (a replay: all of it) |
//! | `tool/call` | `tool_call` (kind, title, locations, raw input; a diff for `edit`/`write`) |
//! | `approval/decided` refused | `tool_call_update` failed (the call's one: its result sends none) |
//! | `tool/result` | `tool_call_update` completed/failed with the output as content |
//! | `todo/write` | `plan` (the whole list) |
//! | `tool/code-dispatch-start` / `tool/code-dispatch` (Code Mode) | `tool_call` / `tool_call_update` of the sub-call |
//! | a plugin's event shown as progress under a call (a workflow's agents) | `tool_call_update` in progress, the children's tree as content |
//! | a plugin's event shown as a notice or marker, a turn's error, a retry, a compaction | `agent_message_chunk`: a quoted line |
//! | a plugin's files presented, at the turn's end | `agent_message_chunk`: a list of links |
//! | `plan/mode`, `sandbox/mode`, `approval/policy` | `current_mode_update` when the mode changed |
//!
//! Data flow: the conversation events go through keel-session's shared cell model
//! ([`keel_session::view::cells`], the one keel-tui draws) and each [`Change`] it reports becomes
//! an update: a cell added (the person's message, a message or its first delta, a tool call),
//! text streamed into a cell, a result, a refusal, the todo list, a notice. Plugins' events reach
//! the cells through the plugins' presenters ([`keel_protocol::present`]), so an editor shows
//! what the terminal UI shows. What the cells do not hold (Code Mode's sub-calls, the session
//! mode) is mapped from the event itself. Status items have no ACP update and are not sent.

use agent_client_protocol::v1::schema::CurrentModeUpdate;
use agent_client_protocol::v1::schema::{
    ContentBlock as AcpBlock, ContentChunk, Diff, Plan, PlanEntry, PlanEntryPriority,
    PlanEntryStatus, SessionUpdate, TextContent, ToolCall, ToolCallContent, ToolCallLocation,
    ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields, ToolKind,
};
use keel_agent::ApprovalPolicy;
use keel_protocol::present::{File, PresenterSet};
use keel_protocol::{
    CODE_DISPATCH_EVENT, CODE_DISPATCH_START_EVENT, EventBody, SessionEvent, TodoStatus,
};
use keel_session::view::cells::{Cell, Cells, Change, Level, ToolState, key_arg};
use keel_session::view::text::one_line;
use keel_tools::SandboxMode;
use serde_json::Value;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

pub use keel_host::modes::{MODE_AUTO, MODE_DEFAULT, MODE_PLAN, MODE_READ_ONLY};

/// Where the events come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feed {
    /// A turn running now: the client sent the prompt and knows it.
    Live,
    /// A session read back for `session/load`: the person's messages are replayed too.
    Replay,
}

/// Turns session events into ACP updates, one event at a time (its cells remember what
/// streamed).
#[derive(Debug)]
pub struct Mapper {
    cwd: PathBuf,
    feed: Feed,
    cells: Cells,
    modes: Modes,
    /// Calls refused at approval: their `failed` update is sent then, so the result that
    /// follows (the refusal as the model reads it) sends none.
    refused: HashSet<String>,
}

/// What decides the session mode, as the events so far left it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Modes {
    /// Plan mode is on.
    pub plan: bool,
    /// The sandbox is read-only.
    pub read_only: bool,
    /// Approvals are automatic.
    pub auto: bool,
}

impl Modes {
    /// The session mode id: plan mode first, then the read-only sandbox, then automatic
    /// approvals.
    pub fn id(self) -> &'static str {
        if self.plan {
            MODE_PLAN
        } else if self.read_only {
            MODE_READ_ONLY
        } else if self.auto {
            MODE_AUTO
        } else {
            MODE_DEFAULT
        }
    }

    /// The `current_mode_update` announcing this mode.
    pub fn update(self) -> SessionUpdate {
        SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(self.id()))
    }
}

/// The files a turn presented, as Markdown after the answer: a list of links.
pub(crate) fn presented_text(files: &[File]) -> String {
    let mut text = String::from("\n\n**Files presented:**\n");
    for File { path, description } in files {
        text.push_str(&format!("- `{path}`"));
        if let Some(d) = description {
            text.push_str(&format!(" — {d}"));
        }
        text.push('\n');
    }
    text
}

impl Mapper {
    /// A mapper for a session working in `cwd` (relative paths of tool calls are resolved
    /// against it: ACP locations are absolute).
    /// Plugins' events show through `presenters`.
    pub fn new(cwd: impl Into<PathBuf>, feed: Feed, presenters: &PresenterSet) -> Self {
        Self {
            cwd: cwd.into(),
            feed,
            cells: Cells::with_presenters(presenters),
            modes: Modes::default(),
            refused: HashSet::new(),
        }
    }

    /// Start from `modes` (what the agent is in when its events start to flow).
    pub fn set_modes(&mut self, modes: Modes) {
        self.modes = modes;
    }

    /// The mode the events so far left.
    pub fn modes(&self) -> Modes {
        self.modes
    }

    /// Switch between replay and live (after a `session/load` replay, its turns are live).
    pub fn set_feed(&mut self, feed: Feed) {
        self.feed = feed;
    }

    /// The updates `event` shows as (none for bookkeeping events).
    pub fn map(&mut self, event: &SessionEvent) -> Vec<SessionUpdate> {
        let mut out = Vec::new();
        match &event.body {
            // A replay shows each message whole (from its `assistant/message`): one update
            // instead of one per delta.
            EventBody::AssistantChunk(_) if self.feed == Feed::Replay => {}
            // Code Mode's sub-calls (a `run_code` program's `await tools.x(…)`): shown as
            // tool calls of their own, so an approval one of them needs names a known call.
            EventBody::Other(o) if o.type_name == CODE_DISPATCH_START_EVENT => {
                let field = |k: &str| o.data.get(k).and_then(Value::as_str).unwrap_or_default();
                let arguments = match o.data.get("arguments") {
                    Some(Value::String(raw)) => raw.clone(),
                    Some(v) => v.to_string(),
                    None => String::new(),
                };
                out.push(SessionUpdate::ToolCall(tool_call(
                    &self.cwd,
                    field("subCallId"),
                    field("name"),
                    &arguments,
                )));
            }
            EventBody::Other(o) if o.type_name == CODE_DISPATCH_EVENT => {
                let id = o.data.get("subCallId").and_then(Value::as_str);
                let failed = o.data.get("isError").and_then(Value::as_bool) == Some(true);
                let text: String = o
                    .data
                    .get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|b| b.get("text").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("\n");
                if let Some(id) = id
                    && !self.refused.remove(id)
                {
                    out.push(result_update(id.to_owned(), failed, text));
                }
            }
            EventBody::PlanMode(p) => {
                self.cells.apply(event);
                self.modes.plan = p.active;
                out.push(self.modes.update());
            }
            EventBody::SandboxMode(m) => {
                let read_only = m.mode == SandboxMode::ReadOnly.as_str();
                if read_only != self.modes.read_only {
                    self.modes.read_only = read_only;
                    out.push(self.modes.update());
                }
            }
            EventBody::ApprovalPolicy(p) => {
                let auto = p.policy == ApprovalPolicy::Allow.as_str();
                if auto != self.modes.auto {
                    self.modes.auto = auto;
                    out.push(self.modes.update());
                }
            }
            _ => {
                for change in self.cells.apply(event) {
                    match &change {
                        Change::Refused { call_id, .. } => {
                            self.refused.insert(call_id.clone());
                        }
                        Change::ToolResult { call_id, .. } if self.refused.remove(call_id) => {
                            continue;
                        }
                        _ => {}
                    }
                    out.extend(self.update(change));
                }
            }
        }
        out
    }

    /// The update a change of the cells shows as, if any.
    fn update(&self, change: Change) -> Option<SessionUpdate> {
        match change {
            Change::Added(at) => match self.cells.cells.get(at)? {
                // The person's messages: the client sent them in a live turn.
                Cell::User(text) if self.feed == Feed::Replay => {
                    Some(SessionUpdate::UserMessageChunk(chunk(text.clone())))
                }
                Cell::Assistant { text, .. } if !text.is_empty() => {
                    Some(SessionUpdate::AgentMessageChunk(chunk(text.clone())))
                }
                Cell::Reasoning { text, .. } if !text.is_empty() => {
                    Some(SessionUpdate::AgentThoughtChunk(chunk(text.clone())))
                }
                Cell::Tool(card) => Some(SessionUpdate::ToolCall(tool_call(
                    &self.cwd,
                    &card.call_id,
                    &card.name,
                    &card.arguments,
                ))),
                // The files the model presented, after its answer.
                Cell::Presented(files) => Some(SessionUpdate::AgentMessageChunk(chunk(
                    presented_text(files),
                ))),
                _ => None,
            },
            Change::Streamed { at, delta } if !delta.is_empty() => {
                match self.cells.cells.get(at)? {
                    Cell::Assistant { .. } => Some(SessionUpdate::AgentMessageChunk(chunk(delta))),
                    Cell::Reasoning { .. } => Some(SessionUpdate::AgentThoughtChunk(chunk(delta))),
                    _ => None,
                }
            }
            Change::ToolResult {
                call_id,
                is_error,
                output,
            } => Some(result_update(call_id, is_error, output)),
            Change::Refused { call_id, reason } => {
                let why = reason.as_deref().unwrap_or("refused");
                Some(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                    call_id,
                    ToolCallUpdateFields::new()
                        .status(ToolCallStatus::Failed)
                        .content(vec![text_content(format!("not approved: {why}"))]),
                )))
            }
            Change::Todos => {
                let entries = self
                    .cells
                    .todos
                    .iter()
                    .map(|item| {
                        let status = match item.status {
                            TodoStatus::Pending => PlanEntryStatus::Pending,
                            TodoStatus::InProgress => PlanEntryStatus::InProgress,
                            TodoStatus::Completed => PlanEntryStatus::Completed,
                        };
                        PlanEntry::new(item.content.clone(), PlanEntryPriority::Medium, status)
                    })
                    .collect();
                Some(SessionUpdate::Plan(Plan::new(entries)))
            }
            // A call running children (workflow, ralph): its tree as the call's content.
            Change::Updated(at) => match self.cells.cells.get(at)? {
                Cell::Tool(card)
                    if card.state == ToolState::Running && !card.progress.is_empty() =>
                {
                    Some(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                        card.call_id.clone(),
                        ToolCallUpdateFields::new()
                            .status(ToolCallStatus::InProgress)
                            .content(vec![text_content(card.progress.lines().join("\n"))]),
                    )))
                }
                _ => None,
            },
            // What plugins' presenters showed (the core's own notices and markers reach an
            // editor otherwise: a turn's stop reason, `/compact`'s answer).
            Change::Shown(at) => match self.cells.cells.get(at)? {
                // Notices and boundaries: a quoted line of their own.
                Cell::Notice(level, text) => {
                    let mark = match level {
                        Level::Error => "⚠ ",
                        Level::Info => "",
                    };
                    let quoted = text.lines().collect::<Vec<_>>().join("\n> ");
                    Some(SessionUpdate::AgentMessageChunk(chunk(format!(
                        "\n\n> {mark}{quoted}\n\n"
                    ))))
                }
                Cell::Marker(text) => Some(SessionUpdate::AgentMessageChunk(chunk(format!(
                    "\n\n— {text} —\n\n"
                )))),
                _ => None,
            },
            Change::Streamed { .. } | Change::Status => None,
        }
    }
}

/// The `tool_call_update` settling a call with its result.
fn result_update(call_id: String, failed: bool, output: String) -> SessionUpdate {
    let status = if failed {
        ToolCallStatus::Failed
    } else {
        ToolCallStatus::Completed
    };
    SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
        call_id,
        ToolCallUpdateFields::new()
            .status(status)
            .content(vec![text_content(output)]),
    ))
}

pub(crate) fn chunk(text: String) -> ContentChunk {
    ContentChunk::new(AcpBlock::Text(TextContent::new(text)))
}

pub(crate) fn text_content(text: String) -> ToolCallContent {
    ToolCallContent::Content(agent_client_protocol::v1::schema::Content::new(
        AcpBlock::Text(TextContent::new(text)),
    ))
}

/// What kind of tool `name` is, for the client's icon and grouping.
pub fn tool_kind(name: &str) -> ToolKind {
    match name {
        "read" => ToolKind::Read,
        "write" | "edit" => ToolKind::Edit,
        "bash" => ToolKind::Execute,
        "glob" | "grep" => ToolKind::Search,
        "fetch" | "web_fetch" => ToolKind::Fetch,
        "todo_write" => ToolKind::Think,
        "exit_plan_mode" | "enter_plan_mode" => ToolKind::SwitchMode,
        _ => ToolKind::Other,
    }
}

/// Characters of a call's key argument in its title.
const TITLE_CHARS: usize = 120;

/// The title a client shows for a call: the tool and its key argument.
pub fn tool_title(name: &str, args: &Value) -> String {
    match key_arg(name, args) {
        Some(arg) if !arg.is_empty() => format!("{name} {}", one_line(&arg, TITLE_CHARS)),
        _ => name.to_owned(),
    }
}

fn absolute(cwd: &Path, path: &str) -> PathBuf {
    let p = Path::new(path);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        cwd.join(p)
    }
}

/// Locations and content of a call to `name` with `args`: the file it touches and, for
/// `edit`/`write`, the change as a diff.
fn call_detail(
    cwd: &Path,
    name: &str,
    args: &Value,
) -> (Vec<ToolCallLocation>, Vec<ToolCallContent>) {
    let field = |k: &str| args.get(k).and_then(Value::as_str);
    // `file_path` is the name since keel took dsh's tool contract; `path` is in older sessions.
    let file = field("file_path").or_else(|| field("path"));
    let Some(path) = file.filter(|_| matches!(name, "read" | "write" | "edit")) else {
        return (Vec::new(), Vec::new());
    };
    let path = absolute(cwd, path);
    let mut location = ToolCallLocation::new(path.clone());
    if name == "read"
        && let Some(line) = args.get("offset").and_then(Value::as_u64)
    {
        location = location.line(u32::try_from(line).ok());
    }
    let content = match name {
        "edit" => vec![ToolCallContent::Diff(
            Diff::new(path, field("new_string").unwrap_or_default())
                .old_text(field("old_string").map(str::to_owned)),
        )],
        "write" => vec![ToolCallContent::Diff(Diff::new(
            path,
            field("content").unwrap_or_default(),
        ))],
        _ => Vec::new(),
    };
    (vec![location], content)
}

/// The `tool_call` update of a call.
pub fn tool_call(cwd: &Path, call_id: &str, name: &str, arguments: &str) -> ToolCall {
    let args: Value = serde_json::from_str(arguments).unwrap_or(Value::Null);
    let (locations, content) = call_detail(cwd, name, &args);
    ToolCall::new(call_id.to_owned(), tool_title(name, &args))
        .kind(tool_kind(name))
        .status(ToolCallStatus::InProgress)
        .locations(locations)
        .content(content)
        .raw_input(Some(args))
}

/// The tool call a permission request is about (the same fields as its `tool_call`).
pub fn permission_subject(
    cwd: &Path,
    call_id: &str,
    name: &str,
    arguments: &str,
) -> ToolCallUpdate {
    let args: Value = serde_json::from_str(arguments).unwrap_or(Value::Null);
    let (locations, content) = call_detail(cwd, name, &args);
    ToolCallUpdate::new(
        call_id.to_owned(),
        ToolCallUpdateFields::new()
            .title(tool_title(name, &args))
            .kind(tool_kind(name))
            .status(ToolCallStatus::Pending)
            .locations(locations)
            .content(content)
            .raw_input(Some(args)),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use keel_protocol::Seq;
    use serde_json::json;

    fn ev(ty: &str, data: Value) -> SessionEvent {
        SessionEvent::new(Seq(1), 0, EventBody::parse(ty, &data.to_string()).unwrap())
    }

    /// A presenter of made-up events standing for a plugin's: `x/step` → progress under its
    /// call, `x/note` → an error notice.
    fn presenters() -> PresenterSet {
        use keel_protocol::present::{Item, Step, stateless};
        PresenterSet::new(vec![stateless(|e, out| {
            let EventBody::Other(o) = &e.body else { return };
            let s = |k: &str| {
                o.data
                    .get(k)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned()
            };
            match o.type_name.as_str() {
                "x/step" => out.push(Item::Progress {
                    call_id: s("callId"),
                    step: match s("label").as_str() {
                        "" => Step::Title(s("title")),
                        label => Step::Child {
                            key: label.into(),
                            label: label.into(),
                            state: s("status"),
                            error: String::new(),
                        },
                    },
                }),
                "x/note" => out.push(Item::notice(Level::Error, s("text"))),
                _ => {}
            }
        })])
    }

    fn wire(updates: Vec<SessionUpdate>) -> Value {
        serde_json::to_value(updates).unwrap()
    }

    fn user(text: &str) -> SessionEvent {
        ev(
            "user/message",
            json!({"role": "user", "content": [{"type": "text", "text": text}], "source": {"kind": "user"}, "id": "u"}),
        )
    }

    fn answer(text: &str) -> SessionEvent {
        ev(
            "assistant/message",
            json!({"turn": 1, "step": 1, "message": {"role": "assistant", "content": [{"type": "reasoning", "text": "hmm"}, {"type": "text", "text": text}], "source": {"kind": "model", "provider": "p", "model": "m"}, "id": "a"}}),
        )
    }

    #[test]
    fn the_person_s_messages_show_in_a_replay_only() {
        let mut live = Mapper::new("/w", Feed::Live, &presenters());
        assert_eq!(wire(live.map(&user("hi"))), json!([]));
        let mut replay = Mapper::new("/w", Feed::Replay, &presenters());
        assert_eq!(
            wire(replay.map(&user("hi"))),
            json!([{"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "hi"}}])
        );
    }

    #[test]
    fn a_message_repeats_nothing_that_streamed() {
        let mut m = Mapper::new("/w", Feed::Live, &presenters());
        m.map(&ev("step/start", json!({"turn": 1, "step": 1})));
        let chunk = m.map(&ev(
            "assistant/chunk",
            json!({"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "Hel"}}),
        ));
        assert_eq!(
            wire(chunk),
            json!([{"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Hel"}}])
        );
        // The text streamed, the reasoning did not: only the reasoning comes from the message.
        assert_eq!(
            wire(m.map(&answer("Hello"))),
            json!([{"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "hmm"}}])
        );
        // A message nothing streamed for shows whole; a replay never streams.
        assert_eq!(
            wire(m.map(&answer("Bye"))),
            json!([
                {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "hmm"}},
                {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Bye"}}
            ])
        );
        let mut replay = Mapper::new("/w", Feed::Replay, &presenters());
        let delta = ev(
            "assistant/chunk",
            json!({"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "By"}}),
        );
        assert_eq!(wire(replay.map(&delta)), json!([]));
        assert_eq!(
            wire(replay.map(&answer("Bye"))).as_array().unwrap().len(),
            2
        );
    }

    #[test]
    fn code_mode_sub_calls_show_as_tool_calls_of_their_own() {
        let mut m = Mapper::new("/w", Feed::Live, &presenters());
        let start = m.map(&ev(
            "tool/code-dispatch-start",
            json!({"rootCallId": "c1", "parentCallId": "c1", "subCallId": "c1:code:1",
                   "name": "read", "arguments": {"path": "a.txt"}}),
        ));
        let [SessionUpdate::ToolCall(call)] = &start[..] else {
            panic!("{start:?}")
        };
        assert_eq!(call.tool_call_id.0.as_ref(), "c1:code:1");
        assert_eq!(call.title, "read a.txt");
        assert_eq!(call.kind, ToolKind::Read);
        let settled = m.map(&ev(
            "tool/code-dispatch",
            json!({"rootCallId": "c1", "parentCallId": "c1", "subCallId": "c1:code:1",
                   "name": "read", "isError": true,
                   "content": [{"type": "text", "text": "DENIED: no"}]}),
        ));
        let [SessionUpdate::ToolCallUpdate(update)] = &settled[..] else {
            panic!("{settled:?}")
        };
        assert_eq!(update.tool_call_id.0.as_ref(), "c1:code:1");
        assert_eq!(update.fields.status, Some(ToolCallStatus::Failed));
    }

    #[test]
    fn a_call_s_progress_shows_as_its_content_and_notices_as_quoted_lines() {
        let mut m = Mapper::new("/w", Feed::Live, &presenters());
        let args = json!({"script": "return 1;"});
        m.map(&ev(
            "tool/call",
            json!({"turn": 1, "step": 1, "callId": "w1", "name": "workflow", "arguments": args.to_string()}),
        ));
        m.map(&ev("x/step", json!({"callId": "w1", "title": "fan: two"})));
        let running = m.map(&ev(
            "x/step",
            json!({"callId": "w1", "label": "a.rs", "status": "running"}),
        ));
        assert_eq!(
            wire(running),
            json!([{"sessionUpdate": "tool_call_update", "toolCallId": "w1", "status": "in_progress",
                    "content": [{"type": "content", "content": {"type": "text", "text": "fan: two\n… a.rs"}}]}])
        );
        let done = m.map(&ev(
            "x/step",
            json!({"callId": "w1", "label": "a.rs", "status": "completed"}),
        ));
        assert!(wire(done).to_string().contains("✓ a.rs"));
        // Another call's steps change nothing here.
        assert_eq!(
            wire(m.map(&ev(
                "x/step",
                json!({"callId": "other", "label": "r", "status": "running"})
            ))),
            json!([])
        );
        assert_eq!(
            wire(m.map(&ev("x/note", json!({"text": "server down\ncheck it"})))),
            json!([{"sessionUpdate": "agent_message_chunk",
                    "content": {"type": "text", "text": "\n\n> ⚠ server down\n> check it\n\n"}}])
        );
    }

    #[test]
    fn tool_calls_carry_kind_title_location_and_diff() {
        let mut m = Mapper::new("/w", Feed::Live, &presenters());
        let args = json!({"path": "src/a.rs", "old_string": "a", "new_string": "b"}).to_string();
        let call = m.map(&ev(
            "tool/call",
            json!({"turn": 1, "step": 1, "callId": "c1", "name": "edit", "arguments": args}),
        ));
        assert_eq!(
            wire(call),
            json!([{
                "sessionUpdate": "tool_call", "toolCallId": "c1", "title": "edit src/a.rs",
                "kind": "edit", "status": "in_progress",
                "content": [{"type": "diff", "path": "/w/src/a.rs", "oldText": "a", "newText": "b"}],
                "locations": [{"path": "/w/src/a.rs"}],
                "rawInput": {"path": "src/a.rs", "old_string": "a", "new_string": "b"}
            }])
        );
        let result = m.map(&ev(
            "tool/result",
            json!({"turn": 1, "step": 1, "message": {"role": "user", "content": [{"type": "tool-result", "toolCallId": "c1", "content": [{"type": "text", "text": "no match"}], "isError": true}], "source": {"kind": "tool", "callId": "c1"}, "id": "r"}}),
        ));
        assert_eq!(
            wire(result),
            json!([{
                "sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "failed",
                "content": [{"type": "content", "content": {"type": "text", "text": "no match"}}]
            }])
        );
        assert_eq!(tool_kind("bash"), ToolKind::Execute);
        // One rule for one-line text everywhere: a line break shows as `⏎`.
        assert_eq!(
            tool_title("bash", &json!({"command": "cargo\ntest"})),
            "bash cargo⏎test"
        );
    }

    /// A refused call settles once: the refusal's `failed`, not a second one for the result
    /// that tells the model (live and replayed, a tool call and a Code Mode sub-call).
    #[test]
    fn a_refused_call_fails_once() {
        for feed in [Feed::Live, Feed::Replay] {
            let mut m = Mapper::new("/w", feed, &presenters());
            let mut updates = m.map(&ev(
                "tool/call",
                json!({"turn": 1, "step": 1, "callId": "c1", "name": "bash", "arguments": "{\"command\":\"rm x\"}"}),
            ));
            updates.extend(m.map(&ev(
                "approval/decided",
                json!({"callId": "c1", "approved": false, "by": "user", "reason": "no"}),
            )));
            updates.extend(m.map(&ev(
                "tool/result",
                json!({"turn": 1, "step": 1, "message": {"role": "user", "content": [{"type": "tool-result", "toolCallId": "c1", "content": [{"type": "text", "text": "The user rejected this call"}], "isError": true}], "source": {"kind": "tool", "callId": "c1"}, "id": "r"}}),
            )));
            updates.extend(m.map(&ev(
                "tool/code-dispatch-start",
                json!({"rootCallId": "c2", "parentCallId": "c2", "subCallId": "c2:code:1", "name": "bash", "arguments": {"command": "rm y"}}),
            )));
            updates.extend(m.map(&ev(
                "approval/decided",
                json!({"callId": "c2:code:1", "approved": false, "by": "user"}),
            )));
            updates.extend(m.map(&ev(
                "tool/code-dispatch",
                json!({"rootCallId": "c2", "parentCallId": "c2", "subCallId": "c2:code:1", "name": "bash", "isError": true, "content": [{"type": "text", "text": "DENIED"}]}),
            )));
            let failed: Vec<(String, String)> = updates
                .iter()
                .filter_map(|u| match u {
                    SessionUpdate::ToolCallUpdate(t)
                        if t.fields.status == Some(ToolCallStatus::Failed) =>
                    {
                        Some((
                            t.tool_call_id.0.to_string(),
                            serde_json::to_string(&t.fields.content).unwrap(),
                        ))
                    }
                    _ => None,
                })
                .collect();
            assert_eq!(failed.len(), 2, "{feed:?}: {failed:?}");
            assert_eq!(failed[0].0, "c1");
            assert!(failed[0].1.contains("not approved: no"), "{failed:?}");
            assert_eq!(failed[1].0, "c2:code:1");
            // A later call of the same id (a new turn reusing it) settles again.
            let again = m.map(&ev(
                "tool/result",
                json!({"turn": 2, "step": 1, "message": {"role": "user", "content": [{"type": "tool-result", "toolCallId": "c1", "content": [{"type": "text", "text": "ok"}], "isError": false}], "source": {"kind": "tool", "callId": "c1"}, "id": "r2"}}),
            ));
            assert_eq!(again.len(), 1, "{again:?}");
        }
    }

    #[test]
    fn todos_become_a_plan_and_plan_mode_a_mode() {
        let mut m = Mapper::new("/w", Feed::Live, &presenters());
        let plan = m.map(&ev(
            "todo/write",
            json!({"todos": [{"content": "a", "status": "completed"}, {"content": "b", "status": "pending"}]}),
        ));
        assert_eq!(
            wire(plan),
            json!([{"sessionUpdate": "plan", "entries": [
                {"content": "a", "priority": "medium", "status": "completed"},
                {"content": "b", "priority": "medium", "status": "pending"}
            ]}])
        );
        assert_eq!(
            wire(m.map(&ev("plan/mode", json!({"active": true})))),
            json!([{"sessionUpdate": "current_mode_update", "currentModeId": "plan"}])
        );
    }
}
