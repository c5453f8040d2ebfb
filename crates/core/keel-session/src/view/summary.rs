//! One line saying what an event holds, for event listings (`keel sessions show --events`),
//! transcript notes and the events a crash repair would append.
//!
//! Data flow: an event (plus the call-id → tool-name map of its session, from
//! [`super::call_names`]) in, a short string out; text is shortened with [`super::text`].

use super::text::{compact_args, one_line};
use keel_protocol::{EventBody, SessionEvent, StreamChunk, SurfaceOp, TodoStatus};
use std::collections::HashMap;

/// One line saying what `ev` holds. `names` maps call ids to tool names (for `tool/result`s,
/// which carry only the call id); an unknown call is shown as `?`.
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
            (true, Some(false)) => "plan not approved (yet); plan mode on".to_owned(),
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
        EventBody::QuestionAsked(q) => {
            let texts: Vec<String> = q
                .questions
                .iter()
                .map(|x| format!("{}: {}", x.id, one_line(&x.question, 60)))
                .collect();
            format!("[{}] {}", q.call_id, texts.join("; "))
        }
        EventBody::QuestionAnswered(a) => {
            let answers: Vec<String> = a
                .answers
                .iter()
                .map(|(id, v)| match v {
                    keel_protocol::QuestionAnswer::One(s) => format!("{id}: {}", one_line(s, 40)),
                    keel_protocol::QuestionAnswer::Many(v) => format!("{id}: {}", v.join(", ")),
                })
                .collect();
            match &a.reason {
                Some(r) if answers.is_empty() => {
                    format!("[{}] {}: {}", a.call_id, a.by, one_line(r, 80))
                }
                _ => format!("[{}] {}: {}", a.call_id, a.by, answers.join("; ")),
            }
        }
        EventBody::SessionTitle(t) => one_line(&t.title, 80),
        EventBody::CompactionSummary(c) | EventBody::CompactionPrune(c) => format!(
            "shadows #{}..#{} (~{} tokens)",
            c.shadowed_range.start, c.shadowed_range.end, c.shadowed_token_count
        ),
        EventBody::CompactionEnd(c) => c.outcome.clone(),
        EventBody::SurfaceRewind(r) => {
            let undo = if r.reason.as_deref() == Some("undo") {
                " (undo of a rewind)"
            } else {
                ""
            };
            match r.turn {
                Some(t) => format!(
                    "conversation rewound to just before turn {t} (#{}){undo}",
                    r.to_seq
                ),
                None => format!("conversation rewound to just before #{}{undo}", r.to_seq),
            }
        }
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
