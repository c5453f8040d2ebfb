//! What an ACP agent showed of its work: `session/update` notifications and permission
//! answers become log lines (the last ones in memory for `logs`, all of them in `log.txt` up to
//! its cap), the answer, and the reports worth an event.
//!
//! | update | kept as |
//! |---|---|
//! | `agent_message_chunk` (text) | the answer: the agent's last message — text after its last tool call, or after a new `messageId`; each finished message is a log line `assistant: …` |
//! | `tool_call` | `→ KIND TITLE` (and the call's kind, for a later permission request) |
//! | `tool_call_update` completed / failed | `← TITLE ok/failed: first line of its text` |
//! | `plan` | `plan: [x] done; [>] doing; [ ] to do` and a `progress` report |
//! | a permission answer | `permission allowed/rejected (AUTHORITY): KIND TITLE` |
//!
//! Thought chunks, mode, command and usage updates are not kept. Memory and the file stay
//! bounded whatever the agent sends.

use crate::lines::{BoundedLog, LOG_LINE_CHARS};
use crate::permission::kind_name;
use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, Plan, PlanEntryStatus, SessionUpdate, ToolCallContent,
    ToolCallStatus, ToolKind,
};
use keel_protocol::sync::Locked;
use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

/// Bytes of the answer kept (the tools bound what the model sees far below this).
const MAX_ANSWER: usize = 256 * 1024;
/// Tool calls whose kind and title are remembered (the oldest are forgotten past this).
const MAX_CALLS: usize = 4096;

/// A report worth an event of the caller's (a plan, as it changes).
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// One line for the supervisor.
    pub message: String,
    /// The structured form (untrusted).
    pub data: serde_json::Value,
}

#[derive(Default)]
struct State {
    log: BoundedLog,
    answer: String,
    answer_truncated: bool,
    /// The next text starts a new message (a tool call came between).
    closed: bool,
    /// Text of the message being streamed not yet logged.
    unlogged: String,
    message_id: Option<String>,
    calls: HashMap<String, (ToolKind, String)>,
    call_order: VecDeque<String>,
}

/// What the agent showed (see the module docs).
pub struct Account {
    state: Mutex<State>,
}

/// `text` as one log line of at most `chars` characters (the project's one rule: trimmed,
/// line breaks as `⏎`).
fn cut(text: &str, chars: usize) -> String {
    keel_protocol::text::one_line(text, chars)
}

fn content_text(content: &[ToolCallContent]) -> String {
    content
        .iter()
        .filter_map(|c| match c {
            ToolCallContent::Content(c) => match &c.content {
                ContentBlock::Text(t) => Some(t.text.as_str()),
                _ => None,
            },
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

impl Account {
    /// A account logging to `log_path` up to `max_log` bytes, keeping the last `tail_lines`
    /// log lines in memory.
    pub fn new(log_path: PathBuf, max_log: u64, tail_lines: usize) -> Self {
        Account {
            state: Mutex::new(State {
                log: BoundedLog::create(&log_path, max_log, tail_lines),
                ..State::default()
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.locked()
    }

    /// Take one update; a plan comes back as a report.
    pub fn update(&self, update: &SessionUpdate) -> Option<Report> {
        let mut guard = self.state();
        let s = &mut *guard;
        match update {
            SessionUpdate::AgentMessageChunk(ContentChunk {
                content: ContentBlock::Text(t),
                message_id,
                ..
            }) => {
                let id = message_id.as_ref().map(|m| m.0.to_string());
                if id.is_some() && id != s.message_id {
                    self.close(s);
                    s.message_id = id;
                }
                if s.closed {
                    s.answer.clear();
                    s.answer_truncated = false;
                    s.closed = false;
                }
                push_bounded(&mut s.answer, &mut s.answer_truncated, &t.text);
                if s.unlogged.len() < LOG_LINE_CHARS * 4 {
                    s.unlogged.push_str(&t.text);
                }
                None
            }
            SessionUpdate::ToolCall(call) => {
                self.close(s);
                let id = call.tool_call_id.0.to_string();
                remember(s, id, call.kind, call.title.clone());
                let line = format!(
                    "→ {} {}",
                    kind_name(&call.kind),
                    cut(&call.title, LOG_LINE_CHARS)
                );
                self.log(s, line);
                None
            }
            SessionUpdate::ToolCallUpdate(u) => {
                let id = u.tool_call_id.0.to_string();
                if let Some(kind) = u.fields.kind {
                    let title = u.fields.title.clone().unwrap_or_else(|| {
                        s.calls.get(&id).map(|c| c.1.clone()).unwrap_or_default()
                    });
                    remember(s, id.clone(), kind, title);
                }
                let how = match u.fields.status {
                    Some(ToolCallStatus::Completed) => "ok",
                    Some(ToolCallStatus::Failed) => "failed",
                    _ => return None,
                };
                let title = u
                    .fields
                    .title
                    .clone()
                    .or_else(|| s.calls.get(&id).map(|c| c.1.clone()))
                    .unwrap_or_else(|| id.clone());
                let text = u.fields.content.as_deref().map(content_text);
                let first = text.as_deref().unwrap_or("").lines().next().unwrap_or("");
                let line = format!(
                    "← {} {how}: {}",
                    cut(&title, 80),
                    cut(first, LOG_LINE_CHARS)
                );
                self.log(s, line);
                None
            }
            SessionUpdate::Plan(plan) => {
                let message = plan_line(plan);
                self.log(s, message.clone());
                Some(Report {
                    message,
                    data: serde_json::to_value(plan).unwrap_or_default(),
                })
            }
            _ => None,
        }
    }

    /// The kind and title the agent announced for tool call `id`.
    pub fn call(&self, id: &str) -> Option<(ToolKind, String)> {
        self.state().calls.get(id).cloned()
    }

    /// Log a line of the run's own (a permission answer, a steer, an ending).
    pub fn note(&self, line: String) {
        let mut s = self.state();
        self.close(&mut s);
        self.log(&mut s, line);
    }

    /// A new prompt on the session (a steer): the answer is what comes after it.
    pub fn new_prompt(&self) {
        let mut s = self.state();
        self.close(&mut s);
    }

    /// The end of the run: the last message is logged and the file flushed.
    pub fn flush(&self) {
        let mut s = self.state();
        self.close(&mut s);
        s.log.flush();
    }

    /// The answer (the agent's last message) and whether it was cut.
    pub fn answer(&self) -> (Option<String>, bool) {
        let s = self.state();
        let text = s.answer.trim();
        (
            (!text.is_empty()).then(|| text.to_owned()),
            s.answer_truncated,
        )
    }

    /// The last `n` log lines (all kept when `None`).
    pub fn tail(&self, n: Option<usize>) -> String {
        self.state().log.tail(n)
    }

    /// The message being streamed is over: log it, and let the next text start a new one.
    fn close(&self, s: &mut State) {
        s.closed = true;
        let text = std::mem::take(&mut s.unlogged);
        if !text.trim().is_empty() {
            self.log(s, format!("assistant: {}", cut(&text, LOG_LINE_CHARS)));
        }
    }

    fn log(&self, s: &mut State, line: String) {
        s.log.push(line);
    }
}

fn remember(s: &mut State, id: String, kind: ToolKind, title: String) {
    if s.calls.insert(id.clone(), (kind, title)).is_none() {
        s.call_order.push_back(id);
        if s.call_order.len() > MAX_CALLS
            && let Some(old) = s.call_order.pop_front()
        {
            s.calls.remove(&old);
        }
    }
}

fn push_bounded(answer: &mut String, truncated: &mut bool, text: &str) {
    if *truncated {
        return;
    }
    if answer.len() + text.len() <= MAX_ANSWER {
        answer.push_str(text);
        return;
    }
    let mut end = MAX_ANSWER - answer.len();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    answer.push_str(&text[..end]);
    *truncated = true;
}

fn plan_line(plan: &Plan) -> String {
    let entries: Vec<String> = plan
        .entries
        .iter()
        .map(|e| {
            let mark = match e.status {
                PlanEntryStatus::Completed => "[x]",
                PlanEntryStatus::InProgress => "[>]",
                _ => "[ ]",
            };
            format!("{mark} {}", cut(&e.content, 80))
        })
        .collect();
    format!("plan: {}", entries.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn update(v: serde_json::Value) -> SessionUpdate {
        serde_json::from_value(v).unwrap()
    }

    fn text(t: &str) -> SessionUpdate {
        update(
            json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": t}}),
        )
    }

    #[test]
    fn the_answer_is_the_last_message_and_the_log_tells_the_story() {
        let dir = tempfile::tempdir().unwrap();
        let t = Account::new(dir.path().join("log.txt"), 1 << 20, 100);
        t.update(&text("Let me look "));
        t.update(&text("at add.sh."));
        t.update(&update(json!({"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "read add.sh", "kind": "read", "status": "in_progress"})));
        t.update(&update(json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed", "content": [{"type": "content", "content": {"type": "text", "text": "1 #!/bin/sh\n2 echo"}}]})));
        let report = t.update(&update(json!({"sessionUpdate": "plan", "entries": [
            {"content": "read", "priority": "high", "status": "completed"},
            {"content": "fix", "priority": "high", "status": "in_progress"}]})));
        t.update(&text("It subtracts ✓"));
        t.update(&text(" instead of adding."));
        t.flush();
        assert_eq!(
            t.answer(),
            (Some("It subtracts ✓ instead of adding.".into()), false)
        );
        assert_eq!(t.call("c1").map(|c| c.1), Some("read add.sh".into()));
        assert_eq!(
            report.map(|r| r.message),
            Some("plan: [x] read; [>] fix".into())
        );
        let expected = "assistant: Let me look at add.sh.\n→ read read add.sh\n← read add.sh ok: 1 #!/bin/sh\nplan: [x] read; [>] fix\nassistant: It subtracts ✓ instead of adding.";
        assert_eq!(t.tail(None), expected);
        let file = std::fs::read_to_string(dir.path().join("log.txt")).unwrap();
        assert_eq!(file.trim_end(), expected);
    }

    #[test]
    fn a_new_message_id_or_prompt_starts_a_new_answer() {
        let dir = tempfile::tempdir().unwrap();
        let t = Account::new(dir.path().join("log.txt"), 1 << 20, 100);
        t.update(&update(json!({"sessionUpdate": "agent_message_chunk", "messageId": "m1", "content": {"type": "text", "text": "first"}})));
        t.update(&update(json!({"sessionUpdate": "agent_message_chunk", "messageId": "m2", "content": {"type": "text", "text": "second"}})));
        assert_eq!(t.answer().0.as_deref(), Some("second"));
        t.new_prompt();
        assert_eq!(
            t.answer().0.as_deref(),
            Some("second"),
            "kept until new text"
        );
        t.update(&text("steered"));
        assert_eq!(t.answer().0.as_deref(), Some("steered"));
    }

    #[test]
    fn memory_and_the_log_file_stay_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let t = Account::new(dir.path().join("log.txt"), 100, 3);
        for i in 0..50 {
            t.update(&update(json!({"sessionUpdate": "tool_call", "toolCallId": format!("c{i}"), "title": "x".repeat(1000), "kind": "execute"})));
        }
        let big = "y".repeat(MAX_ANSWER);
        t.update(&text(&big));
        t.update(&text("é more"));
        t.flush();
        assert_eq!(t.tail(None).lines().count(), 4, "3 kept + the cap note");
        let file = std::fs::read_to_string(dir.path().join("log.txt")).unwrap();
        assert!(file.len() <= 100, "{}", file.len());
        let (answer, truncated) = t.answer();
        assert!(truncated);
        assert_eq!(answer.unwrap().len(), MAX_ANSWER);
    }
}
