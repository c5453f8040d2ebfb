//! Markdown to terminal lines: the assistant's answers as the conversation view shows them.
//!
//! [`render`] parses CommonMark plus the GitHub extensions models use (tables, strikethrough,
//! task lists) with pulldown-cmark and lays the document out as styled ratatui lines no wider
//! than the view:
//!
//! - paragraphs are word-wrapped (a word wider than the view is broken), blocks are separated
//!   by one blank line; headings are bold (level 1 also underlined) without their `#` markers;
//! - emphasis is italic, strong bold, strikethrough crossed out, inline code yellow; a link is
//!   its text followed by the URL, dimmed in parentheses, when the two differ;
//! - list items get `• ` or their number (`3. `), task items `[ ]`/`[x]`, and every line of an
//!   item after the first is indented under its text; nested lists indent by the marker width;
//! - block quotes are prefixed by a dim `│ `;
//! - code blocks are indented by 2 and never wrapped (a longer line is cut with `…`), with a dim
//!   label line for the language and a small token highlighter (keywords, strings, comments,
//!   numbers) for the common languages;
//! - tables get columns sized to their content, shrunk (widest first) to fit, cells cut with
//!   `…`, a bold header, a `─` separator line and ` │ ` between columns;
//! - a thematic break is a dim `─` line across the view; HTML is shown as plain text.
//!
//! The text may be a stream cut anywhere (an unclosed fence renders as a code block); the whole
//! answer is rendered again on each redraw, so this is a single pass over the parser's events.

use pulldown_cmark::{Alignment, CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

mod highlight;
mod layout;

use highlight::{Highlighter, Lang};
use layout::{
    chars_width, cut, expand_tabs, fit_columns, sanitize_label, spaces, spans_width, str_width,
    trim_end, wrap,
};
const DIM: Style = Style::new().add_modifier(Modifier::DIM);
const BOLD: Style = Style::new().add_modifier(Modifier::BOLD);
const H1: Style = Style::new().add_modifier(Modifier::BOLD.union(Modifier::UNDERLINED));
const ITALIC: Style = Style::new().add_modifier(Modifier::ITALIC);
const CROSSED: Style = Style::new().add_modifier(Modifier::CROSSED_OUT);
const INLINE_CODE: Style = Style::new().fg(Color::Yellow);
const LINK: Style = Style::new()
    .fg(Color::LightBlue)
    .add_modifier(Modifier::UNDERLINED);
const CHECKED: Style = Style::new().fg(Color::Green);
const KEYWORD: Style = Style::new().fg(Color::Magenta);
const STRING: Style = Style::new().fg(Color::Green);
const COMMENT: Style = Style::new()
    .fg(Color::DarkGray)
    .add_modifier(Modifier::ITALIC);
const NUMBER: Style = Style::new().fg(Color::Cyan);
const ADDED: Style = Style::new().fg(Color::Green);
const REMOVED: Style = Style::new().fg(Color::Red);
const HUNK: Style = Style::new().fg(Color::Cyan);

/// Indentation of code block lines (and their language label).
const CODE_INDENT: &str = "  ";

/// `text` (CommonMark, as the model streams it: possibly cut mid-construct) as styled lines at
/// most `width` columns wide.
///
/// Never panics, whatever the input or width (a width of 0 yields only empty lines).
pub fn render(text: &str, width: u16) -> Vec<Line<'static>> {
    let options =
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    let mut renderer = Renderer::new(usize::from(width));
    for event in Parser::new_ext(text, options) {
        renderer.event(event);
    }
    renderer.finish()
}

/// Inline text being laid out: one string (free of control characters; `\n` is a hard break)
/// and the styles of its consecutive runs.
#[derive(Default)]
struct Inline {
    text: String,
    /// `(end, style)`: the run ending at byte `end` (exclusive), starting where the previous
    /// one ends.
    runs: Vec<(usize, Style)>,
}

impl Inline {
    fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    fn len(&self) -> usize {
        self.text.len()
    }

    /// Appends `text` in `style`: tabs become spaces, other control characters are dropped,
    /// and line feeds are hard breaks when `newlines` (spaces otherwise).
    fn push(&mut self, text: &str, style: Style, newlines: bool) {
        let before = self.text.len();
        let clean = if text.is_ascii() {
            !text.bytes().any(|b| b.is_ascii_control())
        } else {
            !text.chars().any(char::is_control)
        };
        if clean {
            self.text.push_str(text);
        } else {
            for ch in text.chars() {
                match ch {
                    '\n' if newlines => self.text.push('\n'),
                    '\n' | '\t' => self.text.push(' '),
                    c if c.is_control() => {}
                    c => self.text.push(c),
                }
            }
        }
        let end = self.text.len();
        if end == before {
            return;
        }
        match self.runs.last_mut() {
            Some((last_end, last_style)) if *last_style == style => *last_end = end,
            _ => self.runs.push((end, style)),
        }
    }

    /// Drops the text from byte `at` (a character boundary) on.
    fn truncate(&mut self, at: usize) {
        if at >= self.text.len() {
            return;
        }
        self.text.truncate(at);
        let keep = self.runs.partition_point(|(end, _)| *end < at);
        self.runs.truncate(keep + 1);
        if let Some((end, _)) = self.runs.last_mut() {
            *end = at;
        }
        if at == 0 {
            self.runs.clear();
        }
    }

    /// The text of bytes `start..end` as spans, one per style run.
    fn spans(&self, start: usize, end: usize) -> Vec<Span<'static>> {
        let mut spans = Vec::new();
        let mut index = self.runs.partition_point(|(run_end, _)| *run_end <= start);
        let mut from = start;
        while from < end {
            let Some(&(run_end, style)) = self.runs.get(index) else {
                break;
            };
            let to = run_end.min(end);
            if let Some(text) = self.text.get(from..to) {
                spans.push(Span::styled(text.to_owned(), style));
            }
            from = to;
            index += 1;
        }
        spans
    }

    /// Display width (the sum of the characters' widths).
    fn width(&self) -> usize {
        chars_width(&self.text)
    }
}

/// A block that prefixes each of its lines: a list item or a block quote.
struct Container {
    /// Prefix of the container's first line (`• `, `12. `, `│ `).
    first: Vec<Span<'static>>,
    /// Prefix of its other lines (as wide as `first`).
    rest: Vec<Span<'static>>,
    /// Display width of either prefix.
    width: usize,
    /// Whether the first line was emitted (the next ones take `rest`).
    started: bool,
    kind: ContainerKind,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ContainerKind {
    /// A list item; `loose` once a paragraph is among its direct children.
    Item {
        loose: bool,
    },
    Quote,
}

struct CodeBlock {
    label: Option<String>,
    text: String,
}

#[derive(Default)]
struct Table {
    aligns: Vec<Alignment>,
    rows: Vec<Vec<Inline>>,
    /// Number of header rows at the top of `rows` (0 or 1).
    header: usize,
    row: Vec<Inline>,
}

struct Renderer {
    width: usize,
    out: Vec<Line<'static>>,
    containers: Vec<Container>,
    /// Next number of each open list (`None` for bullet lists).
    lists: Vec<Option<u64>>,
    /// A block ended: the next line emitted is preceded by a blank one.
    pending_blank: bool,
    /// The inline content of the paragraph, heading, tight item or table cell being read.
    inline: Inline,
    /// Inline style stack (emphasis, links, headings…); the top is the current style.
    styles: Vec<Style>,
    /// Open links and images: where their text starts in `inline` (byte), and the destination.
    links: Vec<(usize, String)>,
    code: Option<CodeBlock>,
    table: Option<Table>,
    in_html: bool,
}

impl Renderer {
    fn new(width: usize) -> Self {
        Self {
            width,
            out: Vec::new(),
            containers: Vec::new(),
            lists: Vec::new(),
            pending_blank: false,
            inline: Inline::default(),
            styles: Vec::new(),
            links: Vec::new(),
            code: None,
            table: None,
            in_html: false,
        }
    }

    fn finish(mut self) -> Vec<Line<'static>> {
        // The parser balances its events, even for a cut stream; this is only a safety net.
        self.flush();
        if let Some(code) = self.code.take() {
            self.code_block(code);
        }
        if let Some(table) = self.table.take() {
            self.render_table(table);
        }
        self.out
    }

    fn style(&self) -> Style {
        self.styles.last().copied().unwrap_or_default()
    }

    fn push_style(&mut self, style: Style) {
        let patched = self.style().patch(style);
        self.styles.push(patched);
    }

    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(end) => self.end(end),
            Event::Text(text) => {
                if let Some(code) = &mut self.code {
                    code.text.push_str(&text);
                } else {
                    self.push_inline(&text, self.style(), self.in_html);
                }
            }
            Event::Code(text) => self.push_inline(&text, self.style().patch(INLINE_CODE), false),
            Event::InlineMath(text) | Event::DisplayMath(text) => {
                self.push_inline(&text, self.style(), false);
            }
            Event::Html(text) => self.push_inline(&text, self.style(), true),
            Event::InlineHtml(text) => self.push_inline(&text, self.style(), false),
            Event::FootnoteReference(label) => {
                self.push_inline(&format!("[^{label}]"), self.style(), false);
            }
            Event::SoftBreak => self.push_inline(" ", self.style(), false),
            Event::HardBreak => self.push_inline("\n", self.style(), true),
            Event::Rule => {
                self.flush();
                let rule = "─".repeat(self.content_width());
                self.emit(vec![Span::styled(rule, DIM)]);
                self.pending_blank = true;
            }
            Event::TaskListMarker(done) => self.task_marker(done),
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph => {
                self.flush();
                if let Some(Container {
                    kind: ContainerKind::Item { loose },
                    ..
                }) = self.containers.last_mut()
                {
                    *loose = true;
                }
            }
            Tag::Heading { level, .. } => {
                self.flush();
                self.push_style(if level == HeadingLevel::H1 { H1 } else { BOLD });
            }
            Tag::BlockQuote(_) => {
                self.flush();
                let bar = vec![Span::styled("│ ", DIM)];
                self.containers.push(Container {
                    first: bar.clone(),
                    rest: bar,
                    width: 2,
                    started: false,
                    kind: ContainerKind::Quote,
                });
            }
            Tag::CodeBlock(kind) => {
                self.flush();
                let label = match kind {
                    CodeBlockKind::Fenced(info) => info
                        .split(|c: char| c == ',' || c == '{' || c.is_whitespace())
                        .next()
                        .filter(|l| !l.is_empty())
                        .map(sanitize_label),
                    CodeBlockKind::Indented => None,
                };
                self.code = Some(CodeBlock {
                    label,
                    text: String::new(),
                });
            }
            Tag::HtmlBlock => {
                self.flush();
                self.in_html = true;
            }
            Tag::List(start) => {
                self.flush();
                self.lists.push(start);
            }
            Tag::Item => {
                self.flush();
                let marker = match self.lists.last_mut() {
                    Some(Some(n)) => {
                        let marker = format!("{n}. ");
                        *n = n.saturating_add(1);
                        marker
                    }
                    _ => "• ".to_owned(),
                };
                let width = str_width(&marker);
                self.containers.push(Container {
                    first: vec![Span::raw(marker)],
                    rest: vec![spaces(width)],
                    width,
                    started: false,
                    kind: ContainerKind::Item { loose: false },
                });
            }
            Tag::Table(aligns) => {
                self.flush();
                self.table = Some(Table {
                    aligns,
                    ..Table::default()
                });
            }
            Tag::TableHead | Tag::TableRow => {
                if let Some(table) = &mut self.table {
                    table.row.clear();
                }
            }
            Tag::TableCell => self.inline = Inline::default(),
            Tag::Emphasis => self.push_style(ITALIC),
            Tag::Strong => self.push_style(BOLD),
            Tag::Strikethrough => self.push_style(CROSSED),
            Tag::Superscript | Tag::Subscript => self.push_style(Style::new()),
            Tag::Link { dest_url, .. } => {
                self.push_style(LINK);
                self.links.push((self.inline.len(), dest_url.into_string()));
            }
            Tag::Image { dest_url, .. } => {
                self.push_style(Style::new());
                self.links.push((self.inline.len(), dest_url.into_string()));
            }
            Tag::FootnoteDefinition(_)
            | Tag::DefinitionList
            | Tag::DefinitionListTitle
            | Tag::DefinitionListDefinition
            | Tag::MetadataBlock(_) => self.flush(),
        }
    }

    fn end(&mut self, end: TagEnd) {
        match end {
            TagEnd::Paragraph | TagEnd::FootnoteDefinition | TagEnd::DefinitionList => {
                self.flush();
                self.pending_blank = true;
            }
            TagEnd::DefinitionListTitle
            | TagEnd::DefinitionListDefinition
            | TagEnd::MetadataBlock(_) => self.flush(),
            TagEnd::Heading(_) => {
                self.flush();
                self.styles.pop();
                self.pending_blank = true;
            }
            TagEnd::BlockQuote(_) => {
                self.flush();
                self.close_container();
                self.pending_blank = true;
            }
            TagEnd::CodeBlock => {
                if let Some(code) = self.code.take() {
                    self.code_block(code);
                }
                self.pending_blank = true;
            }
            TagEnd::HtmlBlock => {
                self.flush();
                self.in_html = false;
                self.pending_blank = true;
            }
            TagEnd::List(_) => {
                self.flush();
                self.lists.pop();
                self.pending_blank = true;
            }
            TagEnd::Item => {
                self.flush();
                // A tight list has no blank lines between its items, whatever they hold.
                self.pending_blank =
                    self.close_container() == Some(ContainerKind::Item { loose: true });
            }
            TagEnd::Table => {
                if let Some(table) = self.table.take() {
                    self.render_table(table);
                }
                self.pending_blank = true;
            }
            TagEnd::TableHead => {
                if let Some(table) = &mut self.table {
                    table.rows.push(std::mem::take(&mut table.row));
                    table.header = 1;
                }
            }
            TagEnd::TableRow => {
                if let Some(table) = &mut self.table {
                    table.rows.push(std::mem::take(&mut table.row));
                }
            }
            TagEnd::TableCell => {
                let cell = std::mem::take(&mut self.inline);
                if let Some(table) = &mut self.table {
                    table.row.push(cell);
                }
            }
            TagEnd::Emphasis
            | TagEnd::Strong
            | TagEnd::Strikethrough
            | TagEnd::Superscript
            | TagEnd::Subscript => {
                self.styles.pop();
            }
            TagEnd::Link => {
                self.styles.pop();
                if let Some((start, url)) = self.links.pop() {
                    self.link_url(start, &url);
                }
            }
            TagEnd::Image => {
                self.styles.pop();
                if let Some((start, url)) = self.links.pop() {
                    let alt = self.inline_text(start).to_owned();
                    self.inline.truncate(start);
                    let shown = if alt.is_empty() {
                        "[image]".to_owned()
                    } else {
                        format!("[image: {alt}]")
                    };
                    self.push_inline(&shown, self.style(), false);
                    self.link_url(start, &url);
                }
            }
        }
    }

    /// The text of `inline` from byte `start` on.
    fn inline_text(&self, start: usize) -> &str {
        self.inline.text.get(start..).unwrap_or_default()
    }

    /// After a link's text (from segment `start`): its URL, dimmed in parentheses, unless it
    /// says the same (autolinks) or is only an anchor in the document.
    fn link_url(&mut self, start: usize, url: &str) {
        if url.is_empty() || url.starts_with('#') {
            return;
        }
        let text = self.inline_text(start);
        if text == url || url.strip_prefix("mailto:") == Some(text) {
            return;
        }
        self.push_inline(" ", self.style(), false);
        self.push_inline(&format!("({url})"), self.style().patch(DIM), false);
    }

    fn task_marker(&mut self, done: bool) {
        let Some(item) = self.containers.last_mut() else {
            return;
        };
        if item.started || !matches!(item.kind, ContainerKind::Item { .. }) {
            return;
        }
        let (text, style) = if done {
            ("[x]", CHECKED)
        } else {
            ("[ ]", Style::new())
        };
        item.first.push(Span::styled(text, style));
        item.first.push(Span::raw(" "));
        item.width += 4;
        item.rest = vec![spaces(item.width)];
    }

    /// Pops the innermost container (giving its kind), emitting its bare prefix first if it
    /// held nothing yet (a list item just begun in the stream still shows its bullet).
    fn close_container(&mut self) -> Option<ContainerKind> {
        if self.containers.last().is_some_and(|c| !c.started) {
            self.emit(Vec::new());
        }
        self.containers.pop().map(|c| c.kind)
    }

    fn push_inline(&mut self, text: &str, style: Style, newlines: bool) {
        self.inline.push(text, style, newlines);
    }

    /// Width of the prefixes of the open containers.
    fn prefix_width(&self) -> usize {
        self.containers.iter().map(|c| c.width).sum()
    }

    /// Columns left for content inside the open containers (at least 1).
    fn content_width(&self) -> usize {
        self.width.saturating_sub(self.prefix_width()).max(1)
    }

    /// Wraps and emits the pending inline content, if any.
    fn flush(&mut self) {
        if self.inline.is_empty() {
            return;
        }
        let mut inline = std::mem::take(&mut self.inline);
        for (start, end) in wrap(&inline.text, self.content_width()) {
            self.emit(inline.spans(start, end));
        }
        // Keep the buffer's allocation for the next block.
        inline.text.clear();
        inline.runs.clear();
        self.inline = inline;
    }

    /// Emits one line of content under the open containers' prefixes (preceded by the pending
    /// blank line, if any), cut to the width as a last resort.
    fn emit(&mut self, content: Vec<Span<'static>>) {
        if std::mem::take(&mut self.pending_blank) && !self.out.is_empty() {
            // Only containers already shown continue across the blank line.
            let mut spans: Vec<Span<'static>> = self
                .containers
                .iter()
                .take_while(|c| c.started)
                .flat_map(|c| c.rest.iter().cloned())
                .collect();
            trim_end(&mut spans);
            self.out.push(Line::from(cut(spans, self.width)));
        }
        let mut spans = Vec::with_capacity(self.containers.len() + content.len());
        for c in &mut self.containers {
            if c.started {
                spans.extend(c.rest.iter().cloned());
            } else {
                spans.extend(c.first.iter().cloned());
                c.started = true;
            }
        }
        spans.extend(content);
        // No trailing blanks (the prefix of an empty line, an empty last table cell).
        trim_end(&mut spans);
        self.out.push(Line::from(cut(spans, self.width)));
    }

    fn code_block(&mut self, code: CodeBlock) {
        let avail = self.content_width().saturating_sub(CODE_INDENT.len());
        if let Some(label) = &code.label {
            self.emit(vec![
                Span::raw(CODE_INDENT),
                Span::styled(label.clone(), DIM),
            ]);
        }
        let lang = Lang::of(code.label.as_deref());
        let mut state = Highlighter::default();
        for line in code.text.lines() {
            let line = expand_tabs(line);
            if line.is_empty() {
                self.emit(Vec::new());
                continue;
            }
            let mut spans = vec![Span::raw(CODE_INDENT)];
            spans.extend(cut(state.line(&line, lang), avail));
            self.emit(spans);
        }
    }

    fn render_table(&mut self, table: Table) {
        let columns = table
            .rows
            .iter()
            .map(Vec::len)
            .max()
            .unwrap_or(0)
            .max(table.aligns.len());
        if columns == 0 {
            return;
        }
        let mut natural = vec![1; columns];
        for row in &table.rows {
            for (column, cell) in row.iter().enumerate() {
                if let Some(n) = natural.get_mut(column) {
                    *n = (*n).max(cell.width());
                }
            }
        }
        let separators = 3 * (columns - 1);
        let widths = fit_columns(&natural, self.content_width().saturating_sub(separators));
        let no_cell = Inline::default();
        for (index, row) in table.rows.iter().enumerate() {
            let header = index < table.header;
            let mut spans = Vec::new();
            for (column, &w) in widths.iter().enumerate() {
                if column > 0 {
                    spans.push(Span::styled(" │ ", DIM));
                }
                let cell = row.get(column).unwrap_or(&no_cell);
                let mut content = cell.spans(0, cell.len());
                if header {
                    for span in &mut content {
                        span.style = span.style.patch(BOLD);
                    }
                }
                let content = cut(content, w);
                let pad = w.saturating_sub(spans_width(&content));
                let last = column + 1 == columns;
                let (left, right) = match table.aligns.get(column) {
                    Some(Alignment::Right) => (pad, 0),
                    Some(Alignment::Center) => (pad / 2, if last { 0 } else { pad - pad / 2 }),
                    _ => (0, if last { 0 } else { pad }),
                };
                if left > 0 {
                    spans.push(spaces(left));
                }
                spans.extend(content);
                if right > 0 {
                    spans.push(spaces(right));
                }
            }
            self.emit(spans);
            if header && index + 1 == table.header {
                let rule: Vec<String> = widths.iter().map(|&w| "─".repeat(w)).collect();
                self.emit(vec![Span::styled(rule.join("─┼─"), DIM)]);
            }
        }
    }
}
