//! Rendering a [`Transcript`] (keel-session's transcript view) for people: indented plain text
//! (`keel sessions show`) and Markdown (`keel sessions export --format markdown`).
//!
//! Data flow: one walk ([`walk`]) goes through the model in log order and hands each thing to
//! show to a renderer as a [`Part`], already shortened (reasoning, runtime context, tool
//! arguments and results, with keel-session's one set of shortening rules), so the two
//! renderers ([`Text`], [`Markdown`]) only choose the words and the markup. The model itself is
//! never shortened: `--json` prints it whole.

use super::fmt::{abbrev, compact_args, first_lines, format_time, one_line};
use keel_protocol::Seq;
use keel_session::view::transcript::{
    Block, Call, Entry, Fate, Item, Origin, Step, Transcript, Turn,
};
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
/// Characters of a turn's end detail shown.
const DETAIL_CHARS: usize = 200;

/// Who wrote a message shown whole.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Who {
    User,
    Summary,
    Assistant,
}

impl Who {
    /// How a renderer names the writer: lower case in text, a title in Markdown.
    fn word(self, title: bool) -> &'static str {
        match (self, title) {
            (Who::User, false) => "user",
            (Who::Summary, false) => "summary",
            (Who::Assistant, false) => "assistant",
            (Who::User, true) => "User",
            (Who::Summary, true) => "Compaction summary",
            (Who::Assistant, true) => "Assistant",
        }
    }
}

/// One thing the walk shows, shortened, with how deep it sits (0 outside turns, 1 in a turn,
/// 2 in a step).
enum Part<'a> {
    TurnStart(&'a Turn),
    StepStart(&'a Step),
    StepOpen,
    TurnEnd {
        turn: keel_protocol::TurnNo,
        seq: Seq,
        reason: &'a str,
        /// `: detail` when the end has one, else empty.
        detail: String,
    },
    TurnOpen(keel_protocol::TurnNo),
    Message {
        seq: Seq,
        who: Who,
        interrupted: bool,
        marks: String,
        text: &'a str,
    },
    /// An assistant message with neither text nor calls.
    EmptyAnswer {
        seq: Seq,
        interrupted: bool,
        marks: String,
    },
    Context {
        seq: Seq,
        plugin: Option<&'a str>,
        marks: String,
        text: String,
    },
    Reasoning {
        seq: Seq,
        text: String,
    },
    Calls {
        seq: Seq,
        calls: Vec<(&'a Call, String)>,
    },
    Result {
        seq: Seq,
        name: &'a str,
        status: String,
        marks: String,
        shown: String,
    },
    Compaction {
        seq: Seq,
        phase: &'a str,
        detail: &'a str,
    },
    Note {
        seq: Seq,
        event: &'a str,
        text: &'a str,
    },
}

/// A renderer: writes the header, then each [`Part`] of the walk.
trait Render {
    fn header(&mut self, t: &Transcript);
    fn part(&mut self, depth: usize, part: &Part<'_>);
}

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

fn result_status(is_error: bool, code: Option<&str>) -> String {
    match (is_error, code) {
        (true, Some(c)) => format!("error {c}"),
        (true, None) => "error".to_owned(),
        (false, Some(c)) => format!("ok ({c})"),
        (false, None) => "ok".to_owned(),
    }
}

/// Walk `t` in log order, handing every part to `r`.
fn walk(t: &Transcript, r: &mut impl Render) {
    r.header(t);
    for block in &t.blocks {
        match block {
            Block::Item(item) => item_parts(r, 0, item),
            Block::Turn(turn) => {
                r.part(1, &Part::TurnStart(turn));
                for entry in &turn.entries {
                    match entry {
                        Entry::Item(item) => item_parts(r, 1, item),
                        Entry::Step(step) => {
                            r.part(1, &Part::StepStart(step));
                            for item in &step.items {
                                item_parts(r, 2, item);
                            }
                            if step.ended.is_none() {
                                r.part(2, &Part::StepOpen);
                            }
                        }
                    }
                }
                let end = match &turn.end {
                    Some(end) => Part::TurnEnd {
                        turn: turn.turn,
                        seq: end.seq,
                        reason: &end.reason,
                        detail: end
                            .detail
                            .as_deref()
                            .map(|d| format!(": {}", one_line(d, DETAIL_CHARS)))
                            .unwrap_or_default(),
                    },
                    None => Part::TurnOpen(turn.turn),
                };
                r.part(1, &end);
            }
        }
    }
}

/// The parts of one item.
fn item_parts(r: &mut impl Render, depth: usize, item: &Item) {
    match item {
        Item::User {
            seq,
            origin,
            plugin,
            text,
            fate,
        } => {
            let marks = fate_marks(fate);
            let part = match origin {
                Origin::Human | Origin::Summary => Part::Message {
                    seq: *seq,
                    who: if *origin == Origin::Human {
                        Who::User
                    } else {
                        Who::Summary
                    },
                    interrupted: false,
                    marks,
                    text,
                },
                Origin::Plugin | Origin::Other => Part::Context {
                    seq: *seq,
                    plugin: plugin.as_deref(),
                    marks,
                    text: abbrev(text, CONTEXT_CHARS),
                },
            };
            r.part(depth, &part);
        }
        Item::Assistant {
            seq,
            reasoning,
            text,
            calls,
            interrupted,
            fate,
        } => {
            let seq = *seq;
            let interrupted = *interrupted;
            if !reasoning.is_empty() {
                let text = abbrev(reasoning, REASONING_CHARS);
                r.part(depth, &Part::Reasoning { seq, text });
            }
            let marks = fate_marks(fate);
            if !text.is_empty() {
                let who = Who::Assistant;
                r.part(
                    depth,
                    &Part::Message {
                        seq,
                        who,
                        interrupted,
                        marks,
                        text,
                    },
                );
            } else if calls.is_empty() {
                r.part(
                    depth,
                    &Part::EmptyAnswer {
                        seq,
                        interrupted,
                        marks,
                    },
                );
            }
            if !calls.is_empty() {
                let calls = calls
                    .iter()
                    .map(|c| (c, compact_args(&c.arguments, ARGS_CHARS)))
                    .collect();
                r.part(depth, &Part::Calls { seq, calls });
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
        } => r.part(
            depth,
            &Part::Result {
                seq: *seq,
                name: tool.as_deref().unwrap_or(call_id),
                status: result_status(*is_error, code.as_deref()),
                marks: fate_marks(fate),
                shown: first_lines(text, RESULT_LINES, RESULT_LINE_CHARS),
            },
        ),
        Item::Compaction { seq, phase, detail } => r.part(
            depth,
            &Part::Compaction {
                seq: *seq,
                phase,
                detail,
            },
        ),
        Item::Note { seq, event, text } => r.part(
            depth,
            &Part::Note {
                seq: *seq,
                event,
                text,
            },
        ),
    }
}

/// The transcript as indented plain text (what `keel sessions show` prints).
pub fn render_text(t: &Transcript) -> String {
    let mut r = Text(String::new());
    walk(t, &mut r);
    r.0
}

/// The transcript as Markdown (what `keel sessions export --format markdown` writes).
pub fn render_markdown(t: &Transcript) -> String {
    let mut r = Markdown(String::new());
    walk(t, &mut r);
    r.0
}

/// Indented plain text: every part on its own line, `#seq` first, message text indented
/// below.
struct Text(String);

/// Append `text` to `out`, every line prefixed by `indent`.
fn indented(out: &mut String, indent: &str, text: &str) {
    for line in text.lines() {
        let _ = writeln!(out, "{indent}{line}");
    }
}

fn cut_mark(interrupted: bool) -> &'static str {
    if interrupted { " (interrupted)" } else { "" }
}

impl Render for Text {
    fn header(&mut self, t: &Transcript) {
        let out = &mut self.0;
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
    }

    fn part(&mut self, depth: usize, part: &Part<'_>) {
        let out = &mut self.0;
        let ind = "  ".repeat(depth);
        let more = format!("{ind}    ");
        let _ = match part {
            Part::TurnStart(turn) => writeln!(out, "\nturn {} (#{})", turn.turn, turn.seq),
            Part::StepStart(s) => writeln!(out, "{ind}step {}.{} (#{})", s.turn, s.step, s.seq),
            Part::StepOpen => writeln!(out, "{ind}(step not closed)"),
            Part::TurnEnd {
                turn,
                seq,
                reason,
                detail,
            } => writeln!(out, "{ind}turn {turn} ended: {reason}{detail} (#{seq})"),
            Part::TurnOpen(turn) => writeln!(out, "{ind}turn {turn} is still open (no turn/end)"),
            Part::Message {
                seq,
                who,
                interrupted,
                marks,
                text,
            } => {
                let who = who.word(false);
                let _ = writeln!(out, "{ind}#{seq} {who}{}{marks}:", cut_mark(*interrupted));
                indented(out, &more, text);
                Ok(())
            }
            Part::EmptyAnswer {
                seq,
                interrupted,
                marks,
            } => writeln!(
                out,
                "{ind}#{seq} assistant{}{marks}: (empty)",
                cut_mark(*interrupted)
            ),
            Part::Context {
                seq,
                plugin,
                marks,
                text,
            } => {
                let from = plugin.unwrap_or("other source");
                writeln!(out, "{ind}#{seq} context ({from}){marks}: {text}")
            }
            Part::Reasoning { seq, text } => writeln!(out, "{ind}#{seq} reasoning: {text}"),
            Part::Calls { seq, calls } => {
                for (c, args) in calls {
                    let state = match (c.started, c.result) {
                        (_, Some(_)) => "",
                        (Some(_), None) => " (started, no result)",
                        (None, None) => " (not started, no result)",
                    };
                    let _ = writeln!(out, "{ind}#{seq} call {} {args} [{}]{state}", c.name, c.id);
                }
                Ok(())
            }
            Part::Result {
                seq,
                name,
                status,
                marks,
                shown,
            } => {
                let _ = writeln!(out, "{ind}#{seq} result {name} {status}{marks}:");
                indented(out, &more, shown);
                Ok(())
            }
            Part::Compaction { seq, phase, detail } => {
                writeln!(out, "{ind}#{seq} compaction/{phase}: {detail}")
            }
            Part::Note { seq, event, text } => writeln!(out, "{ind}#{seq} {event}: {text}"),
        };
    }
}

/// Markdown: a heading per turn and step, messages as paragraphs, calls as a list, results
/// fenced.
struct Markdown(String);

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

impl Render for Markdown {
    fn header(&mut self, t: &Transcript) {
        let out = &mut self.0;
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
    }

    fn part(&mut self, _depth: usize, part: &Part<'_>) {
        let out = &mut self.0;
        let _ = match part {
            Part::TurnStart(turn) => writeln!(out, "## Turn {}\n", turn.turn),
            Part::StepStart(s) => writeln!(out, "### Step {}.{}\n", s.turn, s.step),
            Part::StepOpen => writeln!(out, "*(step not closed)*\n"),
            Part::TurnEnd {
                turn,
                reason,
                detail,
                ..
            } => writeln!(out, "*Turn {turn} ended: **{reason}**{detail}*\n"),
            Part::TurnOpen(turn) => writeln!(out, "*Turn {turn} is still open (no turn/end)*\n"),
            Part::Message {
                seq,
                who,
                interrupted,
                marks,
                text,
            } => {
                let who = who.word(true);
                let _ = writeln!(
                    out,
                    "**{who}** (#{seq}){}{marks}:\n",
                    cut_mark(*interrupted)
                );
                writeln!(out, "{}\n", text.trim_end())
            }
            Part::EmptyAnswer { .. } => Ok(()),
            Part::Context {
                seq,
                plugin,
                marks,
                text,
            } => {
                let from = plugin.map_or("other source".to_owned(), code);
                writeln!(out, "> context from {from} (#{seq}){marks}: {text}\n")
            }
            Part::Reasoning { seq, text } => writeln!(out, "> *reasoning* (#{seq}): {text}\n"),
            Part::Calls { calls, .. } => {
                for (c, args) in calls {
                    let state = if c.result.is_some() {
                        ""
                    } else {
                        " — no result"
                    };
                    let _ = writeln!(
                        out,
                        "- tool call {} {} ({}){state}",
                        code(&c.name),
                        code(args),
                        code(&c.id)
                    );
                }
                writeln!(out)
            }
            Part::Result {
                seq,
                name,
                status,
                marks,
                shown,
            } => {
                let f = fence(shown);
                writeln!(
                    out,
                    "Result of {} (#{seq}, {status}){marks}:\n\n{f}text\n{}\n{f}\n",
                    code(name),
                    shown.trim_end()
                )
            }
            Part::Compaction { seq, phase, detail } => {
                writeln!(out, "*compaction/{phase}* (#{seq}): {detail}\n")
            }
            Part::Note { seq, event, text } => {
                writeln!(out, "*{event}* (#{seq}): {}\n", one_line(text, 300))
            }
        };
    }
}
