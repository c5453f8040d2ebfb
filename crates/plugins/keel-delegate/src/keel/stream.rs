//! A keel delegate's stdout: its session records as JSON lines (`keel run --json`). Read as
//! they arrive, with bounded memory whatever the delegate writes: the session id from the
//! header, one log line per tool call, result and answer (the last lines in memory, the rest in
//! `log.txt` up to its cap), the answer, how the turn ended, and the inbox insertions that
//! acknowledge a steer.
//!
//! Each line is read as keel reads its own session log (keel-session's `parse_record`): the
//! [`SessionHeader`](keel_protocol::SessionHeader), or a typed [`SessionEvent`] whose
//! [`EventBody`] says what it is; a line that is no record is logged and skipped, a record of
//! another kind (or whose data does not fit its type) is passed over.

use keel_acp_client::lines::{BoundedLog, LOG_LINE_CHARS, LineBuffer, Piece};
use keel_protocol::sync::Locked;
use keel_protocol::text::one_line as cut;
use keel_protocol::{ContentBlock, EventBody, LogRecord, RecordError, SessionEvent, TurnEndReason};
use keel_session::store::parse_record;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};
use tokio::sync::oneshot;

/// Longest record read whole; a longer one is skipped (and said so in the log).
const MAX_LINE: usize = 8 << 20;
/// Bytes of the answer kept (the tools bound what the model sees far below this).
const MAX_ANSWER: usize = 256 * 1024;

struct State {
    lines: LineBuffer,
    rec: Record,
}

#[derive(Default)]
struct Record {
    session_id: Option<String>,
    answer: Option<String>,
    answer_truncated: bool,
    turn_end: Option<String>,
    calls: HashMap<String, String>,
    log: BoundedLog,
    acks: Vec<(String, oneshot::Sender<()>)>,
}

/// The reader of one delegate's stdout.
pub(super) struct Stream {
    state: Mutex<State>,
}

/// The text blocks of `content`, one line apart.
fn text_of(content: &[ContentBlock]) -> String {
    content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// What a turn that did not complete says of why (`None` for a kind that says nothing more).
fn turn_detail(reason: &TurnEndReason) -> Option<&str> {
    match reason {
        TurnEndReason::Error { message, .. } => Some(message),
        TurnEndReason::Aborted { reason } => Some(reason),
        TurnEndReason::Blocked { reason } => reason.as_deref(),
        TurnEndReason::Completed | TurnEndReason::MaxTokens | TurnEndReason::Interrupted => None,
    }
}

impl Stream {
    /// A reader logging to `log_path` (created on the first line) up to `max_log` bytes and
    /// keeping the last `tail_lines` log lines in memory.
    pub(super) fn new(log_path: PathBuf, max_log: u64, tail_lines: usize) -> Self {
        let log = BoundedLog::create(&log_path, max_log, tail_lines);
        Stream {
            state: Mutex::new(State {
                lines: LineBuffer::new(MAX_LINE),
                rec: Record {
                    log,
                    ..Record::default()
                },
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.locked()
    }

    /// Bytes as read from the delegate's stdout.
    pub(super) fn feed(&self, bytes: &[u8]) {
        let mut guard = self.state();
        let State { lines, rec } = &mut *guard;
        lines.feed(bytes, |piece| self.piece(rec, piece));
    }

    /// The end of the stream: a last line without a newline is read too.
    pub(super) fn flush(&self) {
        let mut guard = self.state();
        let State { lines, rec } = &mut *guard;
        lines.finish(|piece| self.piece(rec, piece));
        rec.log.flush();
    }

    fn piece(&self, s: &mut Record, piece: Piece<'_>) {
        match piece {
            Piece::Line(line) => self.record(s, line),
            Piece::Oversized => {
                self.log(s, format!("(a record over {MAX_LINE} bytes was skipped)"))
            }
        }
    }

    fn record(&self, s: &mut Record, line: &[u8]) {
        let record = std::str::from_utf8(line)
            .map_err(|_| None)
            .and_then(|l| parse_record(l).map_err(Some));
        match record {
            Ok(LogRecord::Header(h)) => s.session_id = Some(h.id.0),
            Ok(LogRecord::Event(e)) => self.event(s, e),
            // Packed chunks, or a record whose data does not fit its type: passed over.
            Ok(LogRecord::Packed(_))
            | Err(Some(RecordError::Payload { .. } | RecordError::MissingField(_))) => {}
            // Not UTF-8, not JSON, or no record type.
            Err(None | Some(RecordError::Envelope(_))) => {
                let text = String::from_utf8_lossy(line);
                if !text.trim().is_empty() {
                    self.log(
                        s,
                        format!("(not a session record) {}", cut(&text, LOG_LINE_CHARS)),
                    );
                }
            }
        }
    }

    fn event(&self, s: &mut Record, event: SessionEvent) {
        match event.body {
            EventBody::AssistantMessage(m) => {
                let text = text_of(&m.message.content);
                if !text.trim().is_empty() {
                    self.log(s, format!("assistant: {}", cut(&text, LOG_LINE_CHARS)));
                    let mut text = text;
                    s.answer_truncated = text.len() > MAX_ANSWER;
                    if s.answer_truncated {
                        let mut end = MAX_ANSWER;
                        while !text.is_char_boundary(end) {
                            end -= 1;
                        }
                        text.truncate(end);
                    }
                    s.answer = Some(text);
                }
            }
            EventBody::ToolCall(c) => {
                self.log(
                    s,
                    format!("→ {} {}", c.name, cut(&c.arguments, LOG_LINE_CHARS)),
                );
                s.calls.insert(c.call_id, c.name);
            }
            EventBody::ToolResult(r) => {
                for b in r.message.tool_results() {
                    let name = s
                        .calls
                        .remove(&b.tool_call_id)
                        .unwrap_or_else(|| "?".into());
                    let text = text_of(&b.content);
                    let first = text.lines().next().unwrap_or("");
                    let how = if b.is_error { "error" } else { "ok" };
                    self.log(s, format!("← {name} {how}: {}", cut(first, LOG_LINE_CHARS)));
                }
            }
            EventBody::TurnEnd(end) => {
                let kind = end.reason.kind();
                self.log(s, format!("turn ended: {kind}"));
                if end.reason != TurnEndReason::Completed {
                    let detail = turn_detail(&end.reason)
                        .map(|d| format!(": {}", cut(d, 500)))
                        .unwrap_or_default();
                    s.turn_end = Some(format!("the delegate's turn ended {kind}{detail}"));
                }
            }
            EventBody::InboxSpliced(spliced) => {
                let texts: Vec<String> = spliced
                    .inserted
                    .iter()
                    .map(|m| text_of(&m.content))
                    .collect();
                if texts.is_empty() {
                    return;
                }
                let acks = std::mem::take(&mut s.acks);
                for (want, tx) in acks {
                    if texts.contains(&want) {
                        let _ = tx.send(());
                    } else {
                        s.acks.push((want, tx));
                    }
                }
            }
            _ => {}
        }
    }

    fn log(&self, s: &mut Record, line: String) {
        s.log.push(line);
    }

    /// The last `n` log lines (all kept when `None`).
    pub(super) fn tail(&self, n: Option<usize>) -> String {
        self.state().rec.log.tail(n)
    }

    /// The delegate's session id (from its header).
    pub(super) fn session_id(&self) -> Option<String> {
        self.state().rec.session_id.clone()
    }

    /// The answer (the last assistant text) and whether it was cut.
    pub(super) fn answer(&self) -> (Option<String>, bool) {
        let s = &self.state().rec;
        (s.answer.clone(), s.answer_truncated)
    }

    /// How the turn ended, when it did not complete.
    pub(super) fn turn_end(&self) -> Option<String> {
        self.state().rec.turn_end.clone()
    }

    /// Resolves when a message with exactly `text` enters the delegate's inbox.
    pub(super) fn expect_inbox(&self, text: &str) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        self.state().rec.acks.push((text.to_owned(), tx));
        rx
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn stream(dir: &tempfile::TempDir, max_log: u64) -> Stream {
        Stream::new(dir.path().join("log.txt"), max_log, 3)
    }

    fn line(v: Value) -> Vec<u8> {
        let mut b = serde_json::to_vec(&v).unwrap();
        b.push(b'\n');
        b
    }

    #[test]
    fn records_split_anywhere_are_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let s = stream(&dir, 1 << 20);
        let mut bytes = line(json!({"type": "session", "id": "s-1", "version": 0, "createdAt": 0}));
        bytes.extend(line(json!({"type": "assistant/message", "seq": 1, "time": 0, "data": {"turn": 1, "step": 1, "message": {"role": "assistant", "content": [{"type": "text", "text": "done ✓"}], "source": {"kind": "model", "provider": "p", "model": "m"}, "id": "m1"}}})));
        for chunk in bytes.chunks(7) {
            s.feed(chunk);
        }
        s.flush();
        assert_eq!(s.session_id().as_deref(), Some("s-1"));
        assert_eq!(s.answer(), (Some("done ✓".into()), false));
        assert_eq!(s.tail(None), "assistant: done ✓");
    }

    #[test]
    fn memory_and_the_log_file_stay_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let s = stream(&dir, 100);
        for i in 0..50 {
            s.feed(&line(json!({"type": "tool/call", "seq": i + 1, "time": 0, "data": {"turn": 1, "step": 1, "callId": format!("c{i}"), "name": "bash", "arguments": "x".repeat(1000)}})));
        }
        // Garbage and an over-long record are skipped, not kept.
        s.feed(b"not json\n");
        s.feed(&vec![b'a'; MAX_LINE + 10]);
        s.feed(b"tail\n");
        s.flush();
        let tail = s.tail(None);
        assert_eq!(tail.lines().count(), 4, "3 kept + the cap note: {tail}");
        assert!(
            tail.contains("skipped") && tail.contains("reached its cap"),
            "{tail}"
        );
        let file = std::fs::read_to_string(dir.path().join("log.txt")).unwrap();
        assert!(file.len() <= 100, "{}", file.len());
        assert!(s.state().lines.held() <= MAX_LINE + 64 * 1024);
    }

    #[test]
    fn a_failed_turn_and_a_steer_ack_are_seen() {
        let dir = tempfile::tempdir().unwrap();
        let s = stream(&dir, 1 << 20);
        let mut ack = s.expect_inbox("go left");
        s.feed(&line(json!({"type": "agent/inbox/spliced", "seq": 1, "time": 0, "data": {"target": "next-step", "start": 0, "inserted": [{"role": "user", "content": [{"type": "text", "text": "go right"}], "source": {"kind": "user"}, "id": "u1"}]}})));
        assert!(ack.try_recv().is_err());
        s.feed(&line(json!({"type": "agent/inbox/spliced", "seq": 2, "time": 0, "data": {"target": "next-step", "start": 0, "inserted": [{"role": "user", "content": [{"type": "text", "text": "go left"}], "source": {"kind": "user"}, "id": "u2"}]}})));
        assert!(ack.try_recv().is_ok());
        s.feed(&line(json!({"type": "turn/end", "seq": 3, "time": 0, "data": {"turn": 1, "reason": {"kind": "error", "code": "AUTH", "message": "AUTH: bad key"}}})));
        assert_eq!(
            s.turn_end().as_deref(),
            Some("the delegate's turn ended error: AUTH: bad key")
        );
    }
}
