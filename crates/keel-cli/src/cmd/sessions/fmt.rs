//! Small text helpers shared by the `sessions` commands: shortening, one-line event summaries
//! (`sessions show --events`) and UTC timestamps. Everything here counts characters, never
//! bytes, so multi-byte text is never cut inside a character.

use keel_protocol::{EventBody, SessionEvent, StreamChunk, SurfaceOp, TimeMs, TodoStatus};
use std::collections::HashMap;

/// `text` on one line (newlines shown as `⏎`), cut to `max` characters with the full length
/// noted when cut.
pub fn one_line(text: &str, max: usize) -> String {
    let flat: String = text
        .trim()
        .chars()
        .map(|c| match c {
            '\n' => '⏎',
            '\r' | '\t' => ' ',
            c => c,
        })
        .collect();
    cut(&flat, max)
}

/// Like [`one_line`], noting how long the whole text was when cut.
pub fn abbrev(text: &str, max: usize) -> String {
    let n = text.trim().chars().count();
    if n <= max {
        one_line(text, max)
    } else {
        format!("{} [{n} chars]", one_line(text, max))
    }
}

fn cut(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

/// The first `lines` lines of `text`, each cut to `width` characters, with a last line saying
/// how much was left out.
pub fn first_lines(text: &str, lines: usize, width: usize) -> String {
    let total_lines = text.lines().count();
    let mut out = String::new();
    for line in text.lines().take(lines) {
        out.push_str(&cut(line, width));
        out.push('\n');
    }
    if total_lines > lines {
        out.push_str(&format!(
            "… ({total_lines} lines, {} chars in all)\n",
            text.chars().count()
        ));
    } else if total_lines == 0 {
        out.push_str("(empty)\n");
    }
    out
}

/// Tool-call arguments as compact JSON (or the raw string when it is not JSON), cut to `max`.
pub fn compact_args(raw: &str, max: usize) -> String {
    match serde_json::from_str::<serde_json::Value>(raw) {
        Ok(v) => one_line(&v.to_string(), max),
        Err(_) => format!("{} (not JSON)", one_line(raw, max)),
    }
}

/// `YYYY-MM-DD HH:MM:SS UTC` for ms since the Unix epoch.
pub fn format_time(ms: TimeMs) -> String {
    let secs = ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Gregorian date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z.saturating_add(719_468);
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// One line saying what an event holds (`sessions show --events`). `names` maps call ids to
/// tool names.
pub fn event_summary(ev: &SessionEvent, names: &HashMap<String, String>) -> String {
    let mut s = match &ev.body {
        EventBody::TurnStart(t) => format!("turn {}", t.turn),
        EventBody::TurnEnd(t) => format!("turn {}: {}", t.turn, t.reason.kind()),
        EventBody::StepStart(s) | EventBody::StepEnd(s) => format!("step {}.{}", s.turn, s.step),
        EventBody::UserMessage(m) => {
            let who = if m.source.is_user() {
                "human".to_owned()
            } else {
                m.source.plugin_id().unwrap_or("other").to_owned()
            };
            format!("[{who}] {}", one_line(&m.text(), 80))
        }
        EventBody::AssistantChunk(c) => {
            format!("{}.{} {}", c.turn, c.step, chunk_summary(&c.chunk))
        }
        EventBody::AssistantMessage(a) => {
            let calls: Vec<&str> = a.message.tool_calls().map(|c| c.name.as_str()).collect();
            let mut s = format!("{}.{} {}", a.turn, a.step, one_line(&a.message.text(), 60));
            if !calls.is_empty() {
                s.push_str(&format!(" + calls: {}", calls.join(", ")));
            }
            s
        }
        EventBody::ToolCall(c) => format!(
            "{}.{} {} {} [{}]",
            c.turn,
            c.step,
            c.name,
            compact_args(&c.arguments, 60),
            c.call_id
        ),
        EventBody::ToolResult(r) => {
            let parts: Vec<String> = r
                .message
                .tool_results()
                .map(|b| {
                    let name = names.get(&b.tool_call_id).map_or("?", String::as_str);
                    let status = if b.is_error { "error" } else { "ok" };
                    format!("{name} {status}: {}", one_line(&b.text(), 60))
                })
                .collect();
            let code = r
                .meta
                .as_ref()
                .and_then(|m| m.get("code"))
                .and_then(|c| c.as_str())
                .map(|c| format!(" ({c})"))
                .unwrap_or_default();
            format!("{}.{} {}{code}", r.turn, r.step, parts.join("; "))
        }
        EventBody::TodoWrite(t) => {
            let items: Vec<String> = t
                .todos
                .iter()
                .map(|i| {
                    let mark = match i.status {
                        TodoStatus::Pending => "[ ]",
                        TodoStatus::InProgress => "[~]",
                        TodoStatus::Completed => "[x]",
                    };
                    format!("{mark} {}", one_line(&i.content, 40))
                })
                .collect();
            format!("{} items: {}", t.todos.len(), items.join(", "))
        }
        EventBody::PlanMode(p) => match (p.active, p.approved) {
            (true, _) => "plan mode on".to_owned(),
            (false, Some(true)) => "plan approved".to_owned(),
            (false, Some(false)) => "plan rejected".to_owned(),
            (false, None) => "plan mode off".to_owned(),
        },
        EventBody::ApprovalAsked(a) => {
            format!("{} [{}]: {}", a.tool, a.call_id, one_line(&a.reason, 80))
        }
        EventBody::ApprovalDecided(a) => format!(
            "[{}] {} by {}",
            a.call_id,
            if a.approved { "approved" } else { "denied" },
            a.by
        ),
        EventBody::SessionTitle(t) => one_line(&t.title, 80),
        EventBody::CompactionSummary(c) | EventBody::CompactionPrune(c) => format!(
            "shadows #{}..#{} (~{} tokens)",
            c.shadowed_range.start, c.shadowed_range.end, c.shadowed_token_count
        ),
        EventBody::CompactionEnd(c) => c.outcome.clone(),
        _ => data_summary(ev),
    };
    if let Some(SurfaceOp::Replace { start, end }) = ev.surface_op {
        s.push_str(&format!(" (replaces #{start}..#{end})"));
    }
    if ev.ignorable {
        s.push_str(" (ignorable)");
    }
    s
}

fn chunk_summary(c: &StreamChunk) -> String {
    match c {
        StreamChunk::BlockStart {
            index,
            block_type,
            name,
            ..
        } => {
            let name = name.as_deref().map(|n| format!(" {n}")).unwrap_or_default();
            format!("block-start {index} {block_type:?}{name}")
        }
        StreamChunk::TextDelta { text, .. } => format!("text {}", one_line(text, 50)),
        StreamChunk::ReasoningDelta { text, .. } => format!("reasoning {}", one_line(text, 50)),
        StreamChunk::ToolCallDelta {
            arguments_delta, ..
        } => {
            format!("args {}", one_line(arguments_delta, 50))
        }
        StreamChunk::BlockEnd { index, .. } => format!("block-end {index}"),
        StreamChunk::Usage { usage } => format!(
            "usage in {} out {} cached {}",
            usage.input_tokens, usage.output_tokens, usage.cache_read_tokens
        ),
        StreamChunk::Finish { reason } => format!("finish {reason:?}"),
    }
}

/// The event's `data` as compact JSON, shortened.
fn data_summary(ev: &SessionEvent) -> String {
    match serde_json::to_value(ev) {
        Ok(v) => v
            .get("data")
            .map(|d| one_line(&d.to_string(), 100))
            .unwrap_or_default(),
        Err(e) => format!("(cannot encode: {e})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn times_are_utc_calendar_dates() {
        assert_eq!(format_time(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(format_time(951_782_400_000), "2000-02-29 00:00:00 UTC");
        assert_eq!(format_time(1_796_002_876_989), "2026-11-30 01:41:16 UTC");
        assert_eq!(format_time(-1000), "1969-12-31 23:59:59 UTC");
    }

    #[test]
    fn shortening_counts_characters() {
        assert_eq!(one_line("héllo\nwörld", 7), "héllo⏎w…");
        assert_eq!(abbrev("abcdef", 3), "abc… [6 chars]");
        assert_eq!(
            first_lines("a\nb\nc\n", 2, 10),
            "a\nb\n… (3 lines, 6 chars in all)\n"
        );
        assert_eq!(compact_args("{ \"a\" : 1 }", 50), "{\"a\":1}");
        assert_eq!(compact_args("{oops", 50), "{oops (not JSON)");
    }
}
