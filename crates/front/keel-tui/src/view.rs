//! Drawing: the conversation, the todo panel, completions, the prompt editor, the status line
//! and modals. Pure functions of the UI state, so ratatui's test backend can snapshot them.

use crate::cells::{Cell, Cells, Detail, Level, ToolCard, ToolState, one_line};
use crate::input::Input;
use crate::markdown;
use keel_protocol::{TimeMs, TodoStatus};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Position, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};
use unicode_width::UnicodeWidthStr;

/// Spinner frames of a running tool or step.
const SPINNER: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

/// A question the UI asks in a modal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Modal {
    /// Title.
    pub title: String,
    /// What is asked about (lines, Markdown for a plan).
    pub body: String,
    /// The choices.
    pub options: Vec<String>,
    /// The highlighted choice.
    pub selected: usize,
    /// The body is a plan (rendered as Markdown).
    pub markdown: bool,
}

/// Everything a frame shows.
#[derive(Debug)]
pub struct Screen<'a> {
    /// The conversation.
    pub cells: &'a Cells,
    /// The prompt editor.
    pub input: &'a Input,
    /// Lines scrolled up from the bottom of the conversation.
    pub scroll: usize,
    /// The first cell the conversation area shows: 0 on the alternate screen; in the
    /// terminal's own scrollback, the first cell not yet printed above the live area.
    pub from: usize,
    /// An open question.
    pub modal: Option<&'a Modal>,
    /// Now (ms since the epoch), for elapsed times and the spinner.
    pub now: TimeMs,
    /// Reasoning shown whole (not collapsed to one line).
    pub show_reasoning: bool,
    /// Completions offered for what is typed: `(name, description)`.
    pub completions: &'a [(String, String)],
    /// The highlighted completion.
    pub completion: usize,
    /// How many prompts and commands wait behind the running turn.
    pub queued: usize,
    /// A one-line hint under the editor (Ctrl-C again to exit…).
    pub hint: Option<&'a str>,
}

fn dim() -> Style {
    Style::default().add_modifier(Modifier::DIM)
}

/// Wrap plain `text` to `width` columns (words kept whole when they fit).
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let mut out = Vec::new();
    for para in text.split('\n') {
        let mut line = String::new();
        let mut used = 0;
        for word in para.split(' ') {
            let w = word.width();
            if used > 0 && used + 1 + w > width {
                out.push(std::mem::take(&mut line));
                used = 0;
            }
            if used > 0 {
                line.push(' ');
                used += 1;
            }
            if w > width {
                // Break a long word.
                for c in word.chars() {
                    let cw = unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
                    if used + cw > width && used > 0 {
                        out.push(std::mem::take(&mut line));
                        used = 0;
                    }
                    line.push(c);
                    used += cw;
                }
            } else {
                line.push_str(word);
                used += w;
            }
        }
        out.push(line);
    }
    out
}

fn elapsed(from: TimeMs, to: TimeMs) -> String {
    let ms = (to - from).max(0);
    if ms < 60_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else {
        format!("{}m{:02}s", ms / 60_000, (ms / 1000) % 60)
    }
}

fn spinner(now: TimeMs) -> &'static str {
    SPINNER[((now / 80).rem_euclid(SPINNER.len() as i64)) as usize]
}

/// The lines of one tool card.
fn tool_lines(card: &ToolCard, width: usize, now: TimeMs) -> Vec<Line<'static>> {
    let (mark, style) = match card.state {
        ToolState::Running => (spinner(now), Style::default().fg(Color::Cyan)),
        ToolState::Done => ("✓", Style::default().fg(Color::Green)),
        ToolState::Failed => ("✗", Style::default().fg(Color::Red)),
        ToolState::Denied => ("⊘", Style::default().fg(Color::Yellow)),
    };
    let time = match card.finished {
        Some(end) => elapsed(card.started, end),
        None => elapsed(card.started, now),
    };
    let head_room = width.saturating_sub(card.name.width() + time.width() + 8);
    let mut lines = vec![Line::from(vec![
        Span::raw("  "),
        Span::styled(mark.to_owned(), style),
        Span::raw(" "),
        Span::styled(
            card.name.clone(),
            Style::default().add_modifier(Modifier::BOLD),
        ),
        Span::raw(" "),
        Span::raw(one_line(&card.key_arg, head_room.saturating_sub(1))),
        Span::styled(format!(" ({time})"), dim()),
    ])];
    if card.state == ToolState::Running {
        for line in card.progress.lines() {
            // `one_line` trims: keep the tree's indentation apart.
            let text = line.trim_start();
            let indent = line.len() - text.len();
            lines.push(Line::from(vec![
                Span::styled("    │ ", dim()),
                Span::raw(" ".repeat(indent)),
                Span::raw(one_line(text, width.saturating_sub(7 + indent))),
            ]));
        }
    }
    if !card.summary.is_empty() {
        let style = match card.state {
            ToolState::Failed | ToolState::Denied => Style::default().fg(Color::Red),
            _ => dim(),
        };
        lines.push(Line::from(vec![
            Span::styled("    ⎿ ", dim()),
            Span::styled(one_line(&card.summary, width.saturating_sub(7)), style),
        ]));
    }
    match &card.detail {
        Detail::None => {}
        Detail::Diff(diff) => {
            for (sign, text) in diff {
                let style = match sign {
                    '-' => Style::default().fg(Color::Red),
                    '+' => Style::default().fg(Color::Green),
                    _ => dim(),
                };
                lines.push(Line::from(vec![
                    Span::raw("      "),
                    Span::styled(
                        one_line(&format!("{sign} {text}"), width.saturating_sub(7)),
                        style,
                    ),
                ]));
            }
        }
        Detail::Output { exit, tail } => {
            if let Some(code) = exit {
                let style = if *code == 0 {
                    dim()
                } else {
                    Style::default().fg(Color::Red)
                };
                lines.push(Line::from(vec![
                    Span::raw("      "),
                    Span::styled(format!("exit {code}"), style),
                ]));
            }
            for l in tail {
                lines.push(Line::from(vec![
                    Span::raw("      "),
                    Span::styled(one_line(l, width.saturating_sub(7)), dim()),
                ]));
            }
        }
    }
    lines
}

/// The lines of one cell at `width` columns.
pub fn cell_lines(
    cell: &Cell,
    width: u16,
    now: TimeMs,
    show_reasoning: bool,
) -> Vec<Line<'static>> {
    let w = usize::from(width).max(4);
    let mut lines = match cell {
        Cell::User(text) => wrap(text, w - 2)
            .into_iter()
            .enumerate()
            .map(|(i, l)| {
                let lead = if i == 0 { "› " } else { "  " };
                Line::from(vec![
                    Span::styled(
                        lead,
                        Style::default()
                            .fg(Color::Cyan)
                            .add_modifier(Modifier::BOLD),
                    ),
                    Span::styled(l, Style::default().add_modifier(Modifier::BOLD)),
                ])
            })
            .collect(),
        Cell::Assistant { text, .. } => markdown::render(text, width.saturating_sub(2).max(1))
            .into_iter()
            .map(|l| {
                let mut spans = vec![Span::raw("  ")];
                spans.extend(l.spans);
                Line::from(spans)
            })
            .collect(),
        Cell::Reasoning { text, streaming } => {
            let style = dim().add_modifier(Modifier::ITALIC);
            if show_reasoning {
                wrap(text, w - 4)
                    .into_iter()
                    .map(|l| {
                        Line::from(vec![Span::raw("  "), Span::styled(format!("┆ {l}"), style)])
                    })
                    .collect()
            } else {
                let label = if *streaming { "Thinking" } else { "Thought" };
                vec![Line::from(vec![
                    Span::raw("  "),
                    Span::styled(
                        one_line(&format!("✻ {label}: {text}"), w.saturating_sub(5)),
                        style,
                    ),
                ])]
            }
        }
        Cell::Tool(card) => tool_lines(card, w, now),
        Cell::Marker(text) => {
            let label = format!(" {text} ");
            let side = w.saturating_sub(label.width()) / 2;
            vec![Line::styled(
                format!("{}{label}{}", "─".repeat(side), "─".repeat(side)),
                dim(),
            )]
        }
        Cell::Notice(level, text) => {
            let (mark, style) = match level {
                Level::Error => (
                    "✗ ",
                    Style::default().fg(Color::Red).add_modifier(Modifier::BOLD),
                ),
                Level::Info => ("• ", Style::default().fg(Color::Yellow)),
            };
            wrap(text, w - 2)
                .into_iter()
                .enumerate()
                .map(|(i, l)| {
                    Line::from(vec![
                        Span::styled(if i == 0 { mark } else { "  " }, style),
                        Span::styled(l, style),
                    ])
                })
                .collect()
        }
        Cell::Presented(files) => {
            let style = Style::default().fg(Color::Cyan);
            let mut lines = vec![Line::styled("▣ Files presented:", style)];
            for file in files {
                let text = file.to_string();
                lines.extend(
                    wrap(&text, w.saturating_sub(4))
                        .into_iter()
                        .map(|l| Line::from(vec![Span::raw("  "), Span::styled(l, style)])),
                );
            }
            lines
        }
        Cell::Plan { text, approved } => {
            let state = match approved {
                None => "proposed plan — waiting for approval",
                Some(true) => "plan approved",
                Some(false) => "plan not approved — still planning",
            };
            let mut lines = vec![Line::from(Span::styled(
                format!("  ▌ {state}"),
                Style::default()
                    .fg(Color::Magenta)
                    .add_modifier(Modifier::BOLD),
            ))];
            lines.extend(
                markdown::render(text, width.saturating_sub(4).max(1))
                    .into_iter()
                    .map(|l| {
                        let mut spans =
                            vec![Span::styled("  ▌ ", Style::default().fg(Color::Magenta))];
                        spans.extend(l.spans);
                        Line::from(spans)
                    }),
            );
            lines
        }
    };
    lines.push(Line::raw(""));
    lines
}

/// Whether a cell's lines can be kept between frames (nothing in it moves).
pub fn settled(cell: &Cell) -> bool {
    match cell {
        Cell::Assistant { streaming, .. } | Cell::Reasoning { streaming, .. } => !streaming,
        Cell::Tool(t) => t.state != ToolState::Running,
        Cell::Plan { approved, .. } => approved.is_some(),
        _ => true,
    }
}

/// Rendered lines of settled cells, kept between frames (a long session redraws only what
/// changes).
#[derive(Debug, Default)]
pub struct LineCache {
    width: u16,
    show_reasoning: bool,
    cells: Vec<Option<Vec<Line<'static>>>>,
}

impl LineCache {
    /// The last `needed` lines of the conversation at `width` (fewer when it is shorter),
    /// oldest first. Only the cells those lines come from are rendered; settled ones once.
    pub fn tail(&mut self, screen: &Screen<'_>, width: u16, needed: usize) -> Vec<Line<'static>> {
        if self.width != width || self.show_reasoning != screen.show_reasoning {
            self.cells.clear();
            self.width = width;
            self.show_reasoning = screen.show_reasoning;
        }
        let cells = &screen.cells.cells;
        self.cells.resize(cells.len(), None);
        let mut chunks: Vec<Vec<Line<'static>>> = Vec::new();
        let mut have = 0;
        for (i, cell) in cells.iter().enumerate().skip(screen.from).rev() {
            if have >= needed {
                break;
            }
            let lines = match &self.cells[i] {
                Some(lines) => lines.clone(),
                None => {
                    let lines = cell_lines(cell, width, screen.now, screen.show_reasoning);
                    if settled(cell) {
                        self.cells[i] = Some(lines.clone());
                    }
                    lines
                }
            };
            have += lines.len();
            chunks.push(lines);
        }
        let mut out: Vec<Line<'static>> = chunks.into_iter().rev().flatten().collect();
        let extra = out.len().saturating_sub(needed);
        out.drain(..extra);
        out
    }

    /// Forget everything (a cell changed in place: an approval decided a plan…).
    pub fn clear(&mut self) {
        self.cells.clear();
    }
}

/// The status line.
pub fn status_line(screen: &Screen<'_>) -> Line<'static> {
    let t = screen.cells;
    let mut spans = vec![Span::styled(
        format!(
            " {} ",
            if t.usage.model.is_empty() {
                "model"
            } else {
                &t.usage.model
            }
        ),
        Style::default().fg(Color::Black).bg(Color::Cyan),
    )];
    let mut part = |text: String, style: Style| {
        spans.push(Span::styled(" · ", dim()));
        spans.push(Span::styled(text, style));
    };
    if !t.sandbox.is_empty() {
        part(t.sandbox.clone(), Style::default());
    }
    if !t.approval.is_empty() {
        // Sessions logged before keel's approval words changed say `never`/`auto`.
        let word = keel_agent::ApprovalPolicy::respell(&t.approval);
        part(format!("approval {word}"), Style::default());
    }
    if t.plan_mode {
        part(
            "plan mode".into(),
            Style::default()
                .fg(Color::Magenta)
                .add_modifier(Modifier::BOLD),
        );
    }
    // Plugins' status items (the goal's round).
    for text in t.status.values() {
        part(text.clone(), Style::default().fg(Color::Green));
    }
    if t.usage.context_window > 0 {
        part(
            format!("context {}%", t.usage.context_percent()),
            Style::default(),
        );
    }
    if let Some((turn, step, started)) = t.step {
        part(
            format!(
                "{} turn {turn} step {step} {}",
                spinner(screen.now),
                elapsed(started, screen.now)
            ),
            Style::default().fg(Color::Cyan),
        );
    }
    if screen.queued > 0 {
        part(
            format!("{} queued", screen.queued),
            Style::default().fg(Color::Yellow),
        );
    }
    // What the approval word means under this sandbox, last: a narrow terminal cuts it first.
    if let Some(unasked) = keel_agent::ApprovalPolicy::unasked_words(&t.approval, &t.sandbox) {
        part(unasked.to_owned(), dim());
    }
    Line::from(spans)
}

fn todo_lines(t: &Cells) -> Vec<Line<'static>> {
    let mut lines = vec![Line::styled(
        " Todo",
        Style::default().add_modifier(Modifier::BOLD),
    )];
    for item in &t.todos {
        let (mark, style) = match item.status {
            TodoStatus::Completed => ("☒", dim().add_modifier(Modifier::CROSSED_OUT)),
            TodoStatus::InProgress => ("◐", Style::default().fg(Color::Cyan)),
            _ => ("☐", Style::default()),
        };
        let text = match (&item.status, &item.active_form) {
            (TodoStatus::InProgress, Some(active)) => active.clone(),
            _ => item.content.clone(),
        };
        lines.push(Line::from(vec![
            Span::raw(format!("  {mark} ")),
            Span::styled(text, style),
        ]));
    }
    lines
}

/// Whether the todo panel shows (a list with something left to do).
fn todo_open(t: &Cells) -> bool {
    t.todos.iter().any(|i| i.status != TodoStatus::Completed)
}

/// The heights of what sits under the conversation: the todo panel, completions, the editor's
/// lines, the hint.
fn chrome(screen: &Screen<'_>) -> (u16, u16, u16, u16) {
    let input_lines = screen.input.lines().len().clamp(1, 8) as u16;
    let todo_height = if todo_open(screen.cells) {
        (screen.cells.todos.len() as u16 + 1).min(8)
    } else {
        0
    };
    let completion_height = (screen.completions.len() as u16).min(8);
    let hint_height = u16::from(screen.hint.is_some());
    (todo_height, completion_height, input_lines, hint_height)
}

/// The first cell at or after `from` that may still change: the cells before it can be printed
/// into the terminal's scrollback for good.
pub fn settled_until(transcript: &Cells, from: usize) -> usize {
    transcript
        .cells
        .iter()
        .skip(from)
        .position(|c| !settled(c))
        .map_or(transcript.cells.len(), |i| from + i)
}

/// Rows the live area needs at `width` on a screen of `rows`: the cells from `screen.from`
/// (at least one row), the panels under them, and room for an open question.
pub fn live_height(screen: &Screen<'_>, cache: &mut LineCache, width: u16, rows: u16) -> u16 {
    let (todo, completions, input, hint) = chrome(screen);
    let under = todo + completions + input + 2 + hint + 1;
    let conversation = cache.tail(screen, width, usize::from(rows)).len().max(1) as u16;
    let mut height = under.saturating_add(conversation);
    if let Some(modal) = screen.modal {
        let wanted = if modal.markdown {
            rows
        } else {
            let inner = width.saturating_sub(4).clamp(20, 100).saturating_sub(4);
            let body = wrap(&modal.body, usize::from(inner)).len() as u16;
            // As draw_modal lays it out: borders, a blank line, the options, a margin.
            body + modal.options.len() as u16 + 6
        };
        height = height.max(wanted);
    }
    height.clamp(1, rows.max(1))
}

/// Draw a frame.
pub fn draw(frame: &mut Frame<'_>, screen: &Screen<'_>, cache: &mut LineCache) {
    let area = frame.area();
    let (todo_height, completion_height, input_lines, hint_height) = chrome(screen);
    let [conversation, todo, completions, editor, hint, status] = Layout::vertical([
        Constraint::Min(1),
        Constraint::Length(todo_height),
        Constraint::Length(completion_height),
        Constraint::Length(input_lines + 2),
        Constraint::Length(hint_height),
        Constraint::Length(1),
    ])
    .areas(area);

    // The conversation, bottom-anchored, scrolled up by `scroll` lines.
    let height = usize::from(conversation.height);
    let lines = cache.tail(screen, conversation.width, height + screen.scroll);
    // Scrolled past the top: the top.
    let scroll = screen.scroll.min(lines.len().saturating_sub(height));
    let end = lines.len() - scroll;
    let start = end.saturating_sub(height);
    let visible: Vec<Line<'static>> = lines[start..end].to_vec();
    let pad = height.saturating_sub(visible.len()) as u16;
    let shown = Rect {
        y: conversation.y + pad,
        height: conversation.height - pad,
        ..conversation
    };
    frame.render_widget(Paragraph::new(visible), shown);

    if todo_height > 0 {
        frame.render_widget(Paragraph::new(todo_lines(screen.cells)), todo);
    }
    if completion_height > 0 {
        let rows: Vec<Line<'static>> = screen
            .completions
            .iter()
            .take(8)
            .enumerate()
            .map(|(i, (name, desc))| {
                let style = if i == screen.completion {
                    Style::default().fg(Color::Black).bg(Color::Cyan)
                } else {
                    Style::default()
                };
                Line::from(vec![
                    Span::styled(format!("  {name:<20}"), style),
                    Span::styled(format!(" {desc}"), dim()),
                ])
            })
            .collect();
        frame.render_widget(Paragraph::new(rows), completions);
    }

    // The editor: the lines around the cursor.
    let (line, col) = screen.input.cursor_line_col();
    let all = screen.input.lines();
    let first = line.saturating_sub(usize::from(input_lines) - 1);
    let inner_width = usize::from(editor.width.saturating_sub(4)).max(1);
    let skip = col.saturating_sub(inner_width - 1);
    let text: Vec<Line<'static>> = all
        .iter()
        .skip(first)
        .take(usize::from(input_lines))
        .map(|l| {
            let shown: String = if skip > 0 {
                l.chars().skip(skip).collect()
            } else {
                (*l).to_owned()
            };
            Line::raw(shown)
        })
        .collect();
    let title = if screen.cells.plan_mode {
        " plan › "
    } else {
        " › "
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(dim())
        .title(title);
    frame.render_widget(Paragraph::new(text).block(block), editor);
    if screen.modal.is_none() {
        frame.set_cursor_position(Position {
            x: editor.x + 1 + (col - skip) as u16,
            y: editor.y + 1 + (line - first) as u16,
        });
    }
    if let Some(h) = screen.hint {
        frame.render_widget(Paragraph::new(Line::styled(format!(" {h}"), dim())), hint);
    }
    frame.render_widget(Paragraph::new(status_line(screen)), status);

    if let Some(modal) = screen.modal {
        draw_modal(frame, modal, area);
    }
}

/// The session picker as a modal: one option per session, newest first (title, age, size).
pub fn picker(sessions: &[crate::SessionEntry], now: TimeMs) -> Modal {
    let options = sessions
        .iter()
        .map(|s| {
            let title = if s.title.is_empty() {
                "(no prompt yet)"
            } else {
                &s.title
            };
            format!(
                "{:<52} {:>5} ago {:>8}",
                one_line(title, 51),
                age(now - s.modified),
                size(s.bytes)
            )
        })
        .collect();
    Modal {
        title: "Continue which session?".into(),
        body:
            "Enter continues the highlighted session · / searches · n starts a new one · Esc leaves"
                .into(),
        options,
        selected: 0,
        markdown: false,
    }
}

/// `ms` as a short age: 42s, 5m, 3h, 2d.
pub fn age(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86400),
    }
}

/// `bytes` as a short size: 512 B, 12 KiB, 3 MiB.
pub fn size(bytes: u64) -> String {
    match bytes {
        0..1024 => format!("{bytes} B"),
        1024..1_048_576 => format!("{} KiB", bytes / 1024),
        _ => format!("{} MiB", bytes / 1_048_576),
    }
}

/// Draw `modal` centred in `area`.
pub fn draw_modal(frame: &mut Frame<'_>, modal: &Modal, area: Rect) {
    let width = area.width.saturating_sub(4).clamp(20, 100);
    let inner = width.saturating_sub(4);
    let mut body: Vec<Line<'static>> = if modal.markdown {
        markdown::render(&modal.body, inner)
    } else {
        wrap(&modal.body, usize::from(inner))
            .into_iter()
            .map(Line::raw)
            .collect()
    };
    let max_body = usize::from(area.height.saturating_sub(modal.options.len() as u16 + 6)).max(1);
    if body.len() > max_body {
        body.truncate(max_body.saturating_sub(1));
        body.push(Line::styled("…", dim()));
    }
    body.push(Line::raw(""));
    for (i, option) in modal.options.iter().enumerate() {
        let selected = i == modal.selected;
        let style = if selected {
            Style::default().fg(Color::Black).bg(Color::Cyan)
        } else {
            Style::default()
        };
        body.push(Line::styled(
            format!("{} {}. {option}", if selected { "›" } else { " " }, i + 1),
            style,
        ));
    }
    let height = (body.len() as u16 + 2).min(area.height);
    let rect = Rect {
        x: area.x + (area.width.saturating_sub(width)) / 2,
        y: area.y + (area.height.saturating_sub(height)) / 2,
        width: width.min(area.width),
        height,
    };
    frame.render_widget(Clear, rect);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(Style::default().fg(Color::Yellow))
        .title(format!(" {} ", modal.title));
    frame.render_widget(Paragraph::new(body).block(block), rect);
}
