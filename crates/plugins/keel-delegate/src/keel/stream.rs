//! A keel delegate's stdout: its session records as JSON lines (`keel run --json`). Read as
//! they arrive, with bounded memory whatever the delegate writes: the session id from the
//! header, one log line per tool call, result and answer (the last lines in memory, the rest in
//! `log.txt` up to its cap), the answer, how the turn ended, and the inbox insertions that
//! acknowledge a steer.

use keel_acp_client::lines::{LineBuffer, Piece};
use keel_acp_client::lines::{BoundedLog, LOG_LINE_CHARS, one_line as cut};
use keel_protocol::sync::Locked;
use serde_json::Value;
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

/// The text blocks of a message (`{content: [{type: text, text}]}`), joined.
fn text_of(message: &Value) -> String {
    message
        .get("content")
        .and_then(Value::as_array)
        .map(|blocks| {
            blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
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
        let Ok(v) = serde_json::from_slice::<Value>(line) else {
            let text = String::from_utf8_lossy(line);
            if !text.trim().is_empty() {
                self.log(
                    s,
                    format!("(not a session record) {}", cut(&text, LOG_LINE_CHARS)),
                );
            }
            return;
        };
        let data = v.get("data").unwrap_or(&Value::Null);
        match v.get("type").and_then(Value::as_str).unwrap_or_default() {
            "session" => {
                s.session_id = v.get("id").and_then(Value::as_str).map(str::to_owned);
            }
            "assistant/message" => {
                let text = text_of(data.get("message").unwrap_or(&Value::Null));
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
            "tool/call" => {
                let name = data.get("name").and_then(Value::as_str).unwrap_or("?");
                let args = data.get("arguments").and_then(Value::as_str).unwrap_or("");
                if let Some(id) = data.get("callId").and_then(Value::as_str) {
                    s.calls.insert(id.to_owned(), name.to_owned());
                }
                self.log(s, format!("→ {name} {}", cut(args, LOG_LINE_CHARS)));
            }
            "tool/result" => {
                let blocks = data
                    .pointer("/message/content")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                for b in blocks {
                    let id = b.get("toolCallId").and_then(Value::as_str).unwrap_or("");
                    let name = s.calls.remove(id).unwrap_or_else(|| "?".into());
                    let error = b.get("isError").and_then(Value::as_bool) == Some(true);
                    let text = text_of(&b);
                    let first = text.lines().next().unwrap_or("");
                    let how = if error { "error" } else { "ok" };
                    self.log(s, format!("← {name} {how}: {}", cut(first, LOG_LINE_CHARS)));
                }
            }
            "turn/end" => {
                let reason = data.get("reason").unwrap_or(&Value::Null);
                let kind = reason.get("kind").and_then(Value::as_str).unwrap_or("?");
                self.log(s, format!("turn ended: {kind}"));
                if kind != "completed" {
                    let detail = ["message", "reason", "code"]
                        .iter()
                        .find_map(|k| reason.get(*k).and_then(Value::as_str))
                        .map(|d| format!(": {}", cut(d, 500)))
                        .unwrap_or_default();
                    s.turn_end = Some(format!("the delegate's turn ended {kind}{detail}"));
                }
            }
            "agent/inbox/spliced" => {
                let texts: Vec<String> = data
                    .get("inserted")
                    .and_then(Value::as_array)
                    .map(|ms| ms.iter().map(text_of).collect())
                    .unwrap_or_default();
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
    use serde_json::json;

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
        let mut bytes = line(json!({"type": "session", "id": "s-1", "version": 0}));
        bytes.extend(line(json!({"type": "assistant/message", "data": {"message": {"role": "assistant", "content": [{"type": "text", "text": "done ✓"}]}}})));
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
            s.feed(&line(json!({"type": "tool/call", "data": {"callId": format!("c{i}"), "name": "bash", "arguments": "x".repeat(1000)}})));
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
        s.feed(&line(json!({"type": "agent/inbox/spliced", "data": {"target": "next-step", "start": 0, "inserted": [{"role": "user", "content": [{"type": "text", "text": "go right"}]}]}})));
        assert!(ack.try_recv().is_err());
        s.feed(&line(json!({"type": "agent/inbox/spliced", "data": {"target": "next-step", "start": 0, "inserted": [{"role": "user", "content": [{"type": "text", "text": "go left"}]}]}})));
        assert!(ack.try_recv().is_ok());
        s.feed(&line(json!({"type": "turn/end", "data": {"turn": 1, "reason": {"kind": "error", "code": "AUTH", "message": "AUTH: bad key"}}})));
        assert_eq!(
            s.turn_end().as_deref(),
            Some("the delegate's turn ended error: AUTH: bad key")
        );
    }
}
