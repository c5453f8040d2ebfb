//! Rendering a [`Transcript`] (keel-session's transcript view) for people: indented plain text (`keel sessions show`) and
//! Markdown (`keel sessions export --format markdown`). Both walk the same model in the same
//! order; long material is shortened here (reasoning, runtime context, tool results), never in
//! the model, which `--json` prints whole.

use super::fmt::{abbrev, compact_args, first_lines, format_time, one_line};
use keel_session::view::transcript::{Block, Entry, Fate, Item, Origin, Transcript};
use std::fmt::Write as _;

/// Characters of reasoning shown.
const REASONING_CHARS: usize = 240;
/// Characters of a runtime-context or plugin-sourced user message shown.
const CONTEXT_CHARS: usize = 100;
/// Lines of a tool result shown.
const RESULT_LINES: usize = 4;
/// Characters per shown tool-result line.
const RESULT_LINE_CHARS: usize = 160;
/// Characters of compact tool-call arguments shown.
const ARGS_CHARS: usize = 160;

fn fate_marks(fate: &Fate) -> String {
    let mut s = String::new();
    if !fate.replaces.is_empty() {
        let seqs: Vec<String> = fate.replaces.iter().map(|q| format!("#{q}")).collect();
        let _ = write!(s, " [replaces {}]", seqs.join(", "));
    }
    if let Some(sh) = fate.shadowed_by {
        let _ = write!(s, " [{} → #{}]", sh.how, sh.seq);
    }
    s
}

/// Append `text` to `out`, every line prefixed by `indent`.
fn indented(out: &mut String, indent: &str, text: &str) {
    for line in text.lines() {
        let _ = writeln!(out, "{indent}{line}");
    }
}

fn result_status(is_error: bool, code: Option<&str>) -> String {
    match (is_error, code) {
        (true, Some(c)) => format!("error {c}"),
        (true, None) => "error".to_owned(),
        (false, Some(c)) => format!("ok ({c})"),
        (false, None) => "ok".to_owned(),
    }
}

/// The transcript as indented plain text (what `keel sessions show` prints).
pub fn render_text(t: &Transcript) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "session {}", t.id);
    if let Some(title) = &t.title {
        let _ = writeln!(out, "  title    {}", one_line(title, 120));
    }
    let _ = writeln!(out, "  cwd      {}", t.cwd.as_deref().unwrap_or("(none)"));
    let _ = writeln!(out, "  created  {}", format_time(t.created));
    if let Some(p) = &t.parent {
        let _ = writeln!(out, "  parent   {p}");
    }
    let _ = writeln!(out, "  events   {}", t.events);
    for block in &t.blocks {
        match block {
            Block::Item(item) => text_item(&mut out, "", item),
            Block::Turn(turn) => {
                let _ = writeln!(out, "\nturn {} (#{})", turn.turn, turn.seq);
                for entry in &turn.entries {
                    match entry {
                        Entry::Item(item) => text_item(&mut out, "  ", item),
                        Entry::Step(step) => {
                            let _ =
                                writeln!(out, "  step {}.{} (#{})", step.turn, step.step, step.seq);
                            for item in &step.items {
                                text_item(&mut out, "    ", item);
                            }
                            if step.ended.is_none() {
                                let _ = writeln!(out, "    (step not closed)");
                            }
                        }
                    }
                }
                match &turn.end {
                    Some(end) => {
                        let detail = end
                            .detail
                            .as_deref()
                            .map(|d| format!(": {}", one_line(d, 200)));
                        let _ = writeln!(
                            out,
                            "  turn {} ended: {}{} (#{})",
                            turn.turn,
                            end.reason,
                            detail.unwrap_or_default(),
                            end.seq
                        );
                    }
                    None => {
                        let _ = writeln!(out, "  turn {} is still open (no turn/end)", turn.turn);
                    }
                }
            }
        }
    }
    out
}

fn text_item(out: &mut String, ind: &str, item: &Item) {
    let more = format!("{ind}    ");
    match item {
        Item::User {
            seq,
            origin,
            plugin,
            text,
            fate,
        } => {
            let marks = fate_marks(fate);
            match origin {
                Origin::Human => {
                    let _ = writeln!(out, "{ind}#{seq} user{marks}:");
                    indented(out, &more, text);
                }
                Origin::Summary => {
                    let _ = writeln!(out, "{ind}#{seq} summary{marks}:");
                    indented(out, &more, text);
                }
                Origin::Plugin | Origin::Other => {
                    let from = plugin.as_deref().unwrap_or("other source");
                    let _ = writeln!(
                        out,
                        "{ind}#{seq} context ({from}){marks}: {}",
                        abbrev(text, CONTEXT_CHARS)
                    );
                }
            }
        }
        Item::Assistant {
            seq,
            reasoning,
            text,
            calls,
            interrupted,
            fate,
        } => {
            let marks = fate_marks(fate);
            if !reasoning.is_empty() {
                let _ = writeln!(
                    out,
                    "{ind}#{seq} reasoning: {}",
                    abbrev(reasoning, REASONING_CHARS)
                );
            }
            let cut = if *interrupted { " (interrupted)" } else { "" };
            if !text.is_empty() {
                let _ = writeln!(out, "{ind}#{seq} assistant{cut}{marks}:");
                indented(out, &more, text);
            } else if calls.is_empty() {
                let _ = writeln!(out, "{ind}#{seq} assistant{cut}{marks}: (empty)");
            }
            for c in calls {
                let state = match (c.started, c.result) {
                    (_, Some(_)) => "",
                    (Some(_), None) => " (started, no result)",
                    (None, None) => " (not started, no result)",
                };
                let _ = writeln!(
                    out,
                    "{ind}#{seq} call {} {} [{}]{state}",
                    c.name,
                    compact_args(&c.arguments, ARGS_CHARS),
                    c.id
                );
            }
        }
        Item::ToolResult {
            seq,
            call_id,
            tool,
            is_error,
            code,
            text,
            fate,
        } => {
            let name = tool.as_deref().unwrap_or(call_id);
            let _ = writeln!(
                out,
                "{ind}#{seq} result {name} {}{}:",
                result_status(*is_error, code.as_deref()),
                fate_marks(fate)
            );
            indented(
                out,
                &more,
                &first_lines(text, RESULT_LINES, RESULT_LINE_CHARS),
            );
        }
        Item::Compaction { seq, phase, detail } => {
            let _ = writeln!(out, "{ind}#{seq} compaction/{phase}: {detail}");
        }
        Item::Note { seq, event, text } => {
            let _ = writeln!(out, "{ind}#{seq} {event}: {text}");
        }
    }
}

/// A code fence longer than any backtick run in `text`.
fn fence(text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    "`".repeat((longest + 1).max(3))
}

/// Inline code for `text`, safe for backticks inside it.
fn code(text: &str) -> String {
    let ticks = if text.contains('`') { "``" } else { "`" };
    format!("{ticks}{text}{ticks}")
}

/// The transcript as Markdown (what `keel sessions export --format markdown` writes).
pub fn render_markdown(t: &Transcript) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Session {}\n", code(&t.id));
    if let Some(title) = &t.title {
        let _ = writeln!(out, "- title: {}", one_line(title, 200));
    }
    if let Some(cwd) = &t.cwd {
        let _ = writeln!(out, "- cwd: {}", code(cwd));
    }
    let _ = writeln!(out, "- created: {}", format_time(t.created));
    if let Some(p) = &t.parent {
        let _ = writeln!(out, "- parent: {}", code(p));
    }
    let _ = writeln!(out, "- events: {}\n", t.events);
    for block in &t.blocks {
        match block {
            Block::Item(item) => md_item(&mut out, item),
            Block::Turn(turn) => {
                let _ = writeln!(out, "## Turn {}\n", turn.turn);
                for entry in &turn.entries {
                    match entry {
                        Entry::Item(item) => md_item(&mut out, item),
                        Entry::Step(step) => {
                            let _ = writeln!(out, "### Step {}.{}\n", step.turn, step.step);
                            for item in &step.items {
                                md_item(&mut out, item);
                            }
                            if step.ended.is_none() {
                                let _ = writeln!(out, "*(step not closed)*\n");
                            }
                        }
                    }
                }
                match &turn.end {
                    Some(end) => {
                        let detail = end
                            .detail
                            .as_deref()
                            .map(|d| format!(": {}", one_line(d, 200)));
                        let _ = writeln!(
                            out,
                            "*Turn {} ended: **{}**{}*\n",
                            turn.turn,
                            end.reason,
                            detail.unwrap_or_default()
                        );
                    }
                    None => {
                        let _ = writeln!(out, "*Turn {} is still open (no turn/end)*\n", turn.turn);
                    }
                }
            }
        }
    }
    out
}

fn md_item(out: &mut String, item: &Item) {
    match item {
        Item::User {
            seq,
            origin,
            plugin,
            text,
            fate,
        } => {
            let marks = fate_marks(fate);
            match origin {
                Origin::Human | Origin::Summary => {
                    let who = if *origin == Origin::Human {
                        "User"
                    } else {
                        "Compaction summary"
                    };
                    let _ = writeln!(out, "**{who}** (#{seq}){marks}:\n");
                    let _ = writeln!(out, "{}\n", text.trim_end());
                }
                Origin::Plugin | Origin::Other => {
                    let from = plugin.as_deref().map_or("other source".to_owned(), code);
                    let _ = writeln!(
                        out,
                        "> context from {from} (#{seq}){marks}: {}\n",
                        abbrev(text, CONTEXT_CHARS)
                    );
                }
            }
        }
        Item::Assistant {
            seq,
            reasoning,
            text,
            calls,
            interrupted,
            fate,
        } => {
            let marks = fate_marks(fate);
            if !reasoning.is_empty() {
                let _ = writeln!(
                    out,
                    "> *reasoning* (#{seq}): {}\n",
                    abbrev(reasoning, REASONING_CHARS)
                );
            }
            let cut = if *interrupted { " (interrupted)" } else { "" };
            if !text.is_empty() {
                let _ = writeln!(out, "**Assistant** (#{seq}){cut}{marks}:\n");
                let _ = writeln!(out, "{}\n", text.trim_end());
            }
            if !calls.is_empty() {
                for c in calls {
                    let state = if c.result.is_some() {
                        ""
                    } else {
                        " — no result"
                    };
                    let _ = writeln!(
                        out,
                        "- tool call {} {} ({}){state}",
                        code(&c.name),
                        code(&compact_args(&c.arguments, ARGS_CHARS)),
                        code(&c.id)
                    );
                }
                out.push('\n');
            }
        }
        Item::ToolResult {
            seq,
            call_id,
            tool,
            is_error,
            code: err,
            text,
            fate,
        } => {
            let name = tool.as_deref().unwrap_or(call_id);
            let shown = first_lines(text, RESULT_LINES, RESULT_LINE_CHARS);
            let f = fence(&shown);
            let _ = writeln!(
                out,
                "Result of {} (#{seq}, {}){}:\n\n{f}text\n{}\n{f}\n",
                code(name),
                result_status(*is_error, err.as_deref()),
                fate_marks(fate),
                shown.trim_end()
            );
        }
        Item::Compaction { seq, phase, detail } => {
            let _ = writeln!(out, "*compaction/{phase}* (#{seq}): {detail}\n");
        }
        Item::Note { seq, event, text } => {
            let _ = writeln!(out, "*{event}* (#{seq}): {}\n", one_line(text, 300));
        }
    }
}
