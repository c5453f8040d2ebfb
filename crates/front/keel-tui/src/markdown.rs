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

use std::borrow::Cow;

use pulldown_cmark::{Alignment, CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

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

/// Column widths for natural widths `natural` within `budget` columns: unchanged when they
/// fit, else the widest are shrunk to a common cap (at least 1 each).
fn fit_columns(natural: &[usize], budget: usize) -> Vec<usize> {
    if natural.iter().sum::<usize>() <= budget {
        return natural.to_vec();
    }
    let capped = |cap: usize| natural.iter().map(|&n| n.min(cap)).sum::<usize>();
    // The largest cap that fits (binary search over 1..=max).
    let (mut low, mut high) = (1, natural.iter().copied().max().unwrap_or(1));
    if capped(low) > budget {
        return vec![1; natural.len()];
    }
    while low < high {
        let mid = low + (high - low).div_ceil(2);
        if capped(mid) <= budget {
            low = mid;
        } else {
            high = mid - 1;
        }
    }
    let mut spare = budget - capped(low);
    natural
        .iter()
        .map(|&n| {
            if n > low && spare > 0 {
                spare -= 1;
                low + 1
            } else {
                n.min(low)
            }
        })
        .collect()
}

/// Greedy word wrap of `text` to `width` columns (at least 1), as byte ranges: lines break at
/// spaces (dropped there) and hard breaks (`\n`); a word wider than a line is broken.
fn wrap(text: &str, width: usize) -> Vec<(usize, usize)> {
    let mut lines = Vec::new();
    let mut offset = 0;
    for logical in text.split('\n') {
        wrap_line(logical, offset, width, &mut lines);
        offset += logical.len() + 1;
    }
    // Trailing hard breaks (the end of an HTML block) leave no empty lines.
    while lines.len() > 1 && lines.last().is_some_and(|(s, e)| s == e) {
        lines.pop();
    }
    lines
}

/// Wraps one logical line (at byte `offset` of the whole text) into byte ranges.
fn wrap_line(line: &str, offset: usize, width: usize, out: &mut Vec<(usize, usize)>) {
    let bytes = line.as_bytes();
    let n = bytes.len();
    let mut current: Option<(usize, usize)> = None;
    let mut current_width = 0;
    let mut i = 0;
    while i < n {
        let space_start = i;
        while i < n && bytes[i] == b' ' {
            i += 1;
        }
        if i == n {
            break;
        }
        let space = i - space_start;
        let word_start = i;
        i = line[i..].find(' ').map_or(n, |p| i + p);
        let word = &line[word_start..i];
        let word_width = chars_width(word);
        match current {
            Some((s, _)) if current_width + space + word_width <= width => {
                current = Some((s, offset + i));
                current_width += space + word_width;
            }
            _ => {
                if let Some(full) = current.take() {
                    out.push(full);
                }
                // The word starts a line; if too wide, it fills whole lines first.
                let mut s = word_start;
                let mut w = 0;
                if word_width > width {
                    for (j, ch) in word.char_indices() {
                        let cw = char_width(ch);
                        let at = word_start + j;
                        if w + cw > width && at > s {
                            out.push((offset + s, offset + at));
                            s = at;
                            w = 0;
                        }
                        w += cw;
                    }
                } else {
                    w = word_width;
                }
                current = Some((offset + s, offset + i));
                current_width = w;
            }
        }
    }
    out.push(current.unwrap_or((offset, offset)));
}

/// Display width of one character (control characters: 0).
fn char_width(ch: char) -> usize {
    if ch.is_ascii() {
        return usize::from(!ch.is_ascii_control());
    }
    let mut buf = [0; 4];
    Span::raw(&*ch.encode_utf8(&mut buf)).width()
}

/// `n` spaces, borrowed when short (prefixes and padding are cloned for every line).
fn spaces(n: usize) -> Span<'static> {
    const SPACES: &str = "                                                                ";
    match SPACES.get(..n) {
        Some(short) => Span::raw(short),
        None => Span::raw(" ".repeat(n)),
    }
}

/// Display width of a string as ratatui measures it.
fn str_width(text: &str) -> usize {
    if text.is_ascii() {
        return text.len();
    }
    Span::raw(text).width()
}

/// The sum of the widths of the characters of `text` (which wrapping and cutting go by).
fn chars_width(text: &str) -> usize {
    if text.is_ascii() {
        return text.len();
    }
    text.chars().map(char_width).sum()
}

fn spans_width(spans: &[Span<'_>]) -> usize {
    spans.iter().map(|s| str_width(&s.content)).sum()
}

/// `spans` cut to at most `max` columns, ending with a dim `…` when something was cut.
fn cut(mut spans: Vec<Span<'static>>, max: usize) -> Vec<Span<'static>> {
    if spans_width(&spans) <= max {
        return spans;
    }
    let keep = max.saturating_sub(1);
    let mut width = 0;
    let mut kept = 0;
    for span in &mut spans {
        let w = str_width(&span.content);
        if width + w <= keep {
            width += w;
            kept += 1;
            continue;
        }
        let mut text = String::new();
        for ch in span.content.chars() {
            let cw = char_width(ch);
            if width + cw > keep {
                break;
            }
            width += cw;
            text.push(ch);
        }
        if !text.is_empty() {
            span.content = Cow::Owned(text);
            kept += 1;
        }
        break;
    }
    spans.truncate(kept);
    // Character widths may undercount a sequence (emoji + variation selector): trim until the
    // measured width fits.
    while spans_width(&spans) > keep {
        let Some(last) = spans.last_mut() else {
            break;
        };
        let mut text = last.content.to_string();
        text.pop();
        if text.is_empty() {
            spans.pop();
        } else {
            last.content = Cow::Owned(text);
        }
    }
    if max > 0 {
        // `some …` reads worse than `some…`.
        trim_end(&mut spans);
        spans.push(Span::styled("…", DIM));
    }
    spans
}

/// Removes trailing spaces from the last spans (the prefix of a line with no content).
fn trim_end(spans: &mut Vec<Span<'static>>) {
    while let Some(last) = spans.last_mut() {
        let trimmed = last.content.trim_end_matches(' ');
        if trimmed.is_empty() {
            spans.pop();
        } else {
            if trimmed.len() != last.content.len() {
                last.content = Cow::Owned(trimmed.to_owned());
            }
            break;
        }
    }
}

/// A code block's language label, free of control characters.
fn sanitize_label(label: &str) -> String {
    label.chars().filter(|c| !c.is_control()).collect()
}

/// A code line with tabs expanded (stops every 4 columns) and other control characters dropped.
fn expand_tabs(line: &str) -> Cow<'_, str> {
    if !line.chars().any(char::is_control) {
        return Cow::Borrowed(line);
    }
    let mut out = String::with_capacity(line.len() + 8);
    let mut column = 0;
    for ch in line.chars() {
        match ch {
            '\t' => {
                let n = 4 - column % 4;
                out.extend(std::iter::repeat_n(' ', n));
                column += n;
            }
            c if c.is_control() => {}
            c => {
                out.push(c);
                column += char_width(c);
            }
        }
    }
    Cow::Owned(out)
}

/// The highlighting rules of a code block, from its language label.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Lang {
    Rust,
    Python,
    Js,
    Go,
    Shell,
    Sql,
    C,
    /// `#` comments, strings and numbers (TOML, YAML, Ruby…).
    Hash,
    /// No label or an unknown one: every rule, cautiously.
    Generic,
    Diff,
    /// Text, output: no highlighting.
    Plain,
}

impl Lang {
    fn of(label: Option<&str>) -> Self {
        let Some(label) = label else {
            return Self::Generic;
        };
        match label.to_ascii_lowercase().as_str() {
            "rust" | "rs" => Self::Rust,
            "python" | "py" | "python3" | "pycon" => Self::Python,
            "js" | "javascript" | "jsx" | "mjs" | "cjs" | "ts" | "typescript" | "tsx" | "json"
            | "jsonc" => Self::Js,
            "go" | "golang" => Self::Go,
            "sh" | "bash" | "shell" | "zsh" | "fish" | "ksh" => Self::Shell,
            "sql" | "lua" | "haskell" | "hs" => Self::Sql,
            "c" | "h" | "cpp" | "c++" | "cc" | "hpp" | "java" | "kotlin" | "kt" | "cs"
            | "csharp" | "swift" | "zig" | "scala" | "dart" => Self::C,
            "toml" | "yaml" | "yml" | "ini" | "ruby" | "rb" | "perl" | "pl" | "r" | "make"
            | "makefile" | "dockerfile" | "cmake" | "nix" | "elixir" | "ex" => Self::Hash,
            "diff" | "patch" => Self::Diff,
            "text" | "txt" | "plain" | "plaintext" | "console" | "output" | "log" | "md"
            | "markdown" => Self::Plain,
            _ => Self::Generic,
        }
    }

    fn slash_comments(self) -> bool {
        matches!(
            self,
            Self::Rust | Self::Js | Self::Go | Self::C | Self::Generic
        )
    }

    fn hash_comments(self) -> bool {
        matches!(
            self,
            Self::Python | Self::Shell | Self::Hash | Self::Generic
        )
    }

    fn dash_comments(self) -> bool {
        matches!(self, Self::Sql | Self::Generic)
    }

    /// `'…'` is a string (else only a one-character literal like `'x'` or `'\n'`).
    fn quote_strings(self) -> bool {
        matches!(
            self,
            Self::Python | Self::Js | Self::Shell | Self::Sql | Self::Hash | Self::Go
        )
    }

    fn backtick_strings(self) -> bool {
        matches!(self, Self::Js | Self::Go | Self::Shell)
    }

    fn is_keyword(self, word: &str) -> bool {
        match self {
            Self::Rust => rust_keyword(word),
            Self::Python => python_keyword(word),
            Self::Js => js_keyword(word),
            Self::Go => go_keyword(word),
            Self::Shell => shell_keyword(word),
            Self::Sql => sql_keyword(&word.to_ascii_lowercase()),
            Self::C => c_keyword(word),
            Self::Hash => matches!(word, "true" | "false" | "nil" | "null" | "def" | "end"),
            Self::Generic => {
                rust_keyword(word)
                    || python_keyword(word)
                    || js_keyword(word)
                    || go_keyword(word)
                    || shell_keyword(word)
            }
            Self::Diff | Self::Plain => false,
        }
    }
}

fn rust_keyword(w: &str) -> bool {
    matches!(
        w,
        "as" | "async"
            | "await"
            | "break"
            | "const"
            | "continue"
            | "crate"
            | "dyn"
            | "else"
            | "enum"
            | "extern"
            | "false"
            | "fn"
            | "for"
            | "if"
            | "impl"
            | "in"
            | "let"
            | "loop"
            | "match"
            | "mod"
            | "move"
            | "mut"
            | "pub"
            | "ref"
            | "return"
            | "self"
            | "Self"
            | "static"
            | "struct"
            | "super"
            | "trait"
            | "true"
            | "type"
            | "unsafe"
            | "use"
            | "where"
            | "while"
    )
}

fn python_keyword(w: &str) -> bool {
    matches!(
        w,
        "False"
            | "None"
            | "True"
            | "and"
            | "as"
            | "assert"
            | "async"
            | "await"
            | "break"
            | "class"
            | "continue"
            | "def"
            | "del"
            | "elif"
            | "else"
            | "except"
            | "finally"
            | "for"
            | "from"
            | "global"
            | "if"
            | "import"
            | "in"
            | "is"
            | "lambda"
            | "nonlocal"
            | "not"
            | "or"
            | "pass"
            | "raise"
            | "return"
            | "self"
            | "try"
            | "while"
            | "with"
            | "yield"
    )
}

fn js_keyword(w: &str) -> bool {
    matches!(
        w,
        "as" | "async"
            | "await"
            | "break"
            | "case"
            | "catch"
            | "class"
            | "const"
            | "continue"
            | "default"
            | "delete"
            | "do"
            | "else"
            | "enum"
            | "export"
            | "extends"
            | "false"
            | "finally"
            | "for"
            | "from"
            | "function"
            | "if"
            | "implements"
            | "import"
            | "in"
            | "instanceof"
            | "interface"
            | "let"
            | "new"
            | "null"
            | "of"
            | "private"
            | "protected"
            | "public"
            | "readonly"
            | "return"
            | "static"
            | "super"
            | "switch"
            | "this"
            | "throw"
            | "true"
            | "try"
            | "type"
            | "typeof"
            | "undefined"
            | "var"
            | "void"
            | "while"
            | "yield"
    )
}

fn go_keyword(w: &str) -> bool {
    matches!(
        w,
        "break"
            | "case"
            | "chan"
            | "const"
            | "continue"
            | "default"
            | "defer"
            | "else"
            | "fallthrough"
            | "false"
            | "for"
            | "func"
            | "go"
            | "goto"
            | "if"
            | "import"
            | "interface"
            | "iota"
            | "map"
            | "nil"
            | "package"
            | "range"
            | "return"
            | "select"
            | "struct"
            | "switch"
            | "true"
            | "type"
            | "var"
    )
}

fn shell_keyword(w: &str) -> bool {
    matches!(
        w,
        "case"
            | "do"
            | "done"
            | "elif"
            | "else"
            | "esac"
            | "export"
            | "fi"
            | "for"
            | "function"
            | "if"
            | "in"
            | "local"
            | "readonly"
            | "return"
            | "then"
            | "until"
            | "while"
    )
}

fn sql_keyword(w: &str) -> bool {
    matches!(
        w,
        "and"
            | "as"
            | "by"
            | "create"
            | "delete"
            | "desc"
            | "drop"
            | "from"
            | "group"
            | "having"
            | "in"
            | "insert"
            | "into"
            | "is"
            | "join"
            | "left"
            | "limit"
            | "not"
            | "null"
            | "on"
            | "or"
            | "order"
            | "select"
            | "set"
            | "table"
            | "update"
            | "values"
            | "where"
            | "with"
            // Lua
            | "local"
            | "function"
            | "end"
            | "then"
            | "if"
            | "else"
            | "return"
    )
}

fn c_keyword(w: &str) -> bool {
    matches!(
        w,
        "auto"
            | "bool"
            | "break"
            | "case"
            | "char"
            | "class"
            | "const"
            | "continue"
            | "default"
            | "do"
            | "double"
            | "else"
            | "enum"
            | "extern"
            | "false"
            | "float"
            | "for"
            | "if"
            | "import"
            | "int"
            | "long"
            | "namespace"
            | "new"
            | "null"
            | "nullptr"
            | "private"
            | "protected"
            | "public"
            | "return"
            | "short"
            | "static"
            | "struct"
            | "switch"
            | "template"
            | "this"
            | "true"
            | "typedef"
            | "unsigned"
            | "var"
            | "void"
            | "while"
    )
}

/// Token-by-token highlighting of a code block's lines; carries `/* … */` across lines.
#[derive(Default)]
struct Highlighter {
    in_block_comment: bool,
}

impl Highlighter {
    fn line(&mut self, line: &str, lang: Lang) -> Vec<Span<'static>> {
        match lang {
            Lang::Plain => return vec![Span::raw(line.to_owned())],
            Lang::Diff => {
                let style = if line.starts_with("@@") {
                    HUNK
                } else if line.starts_with('+') {
                    ADDED
                } else if line.starts_with('-') {
                    REMOVED
                } else {
                    Style::new()
                };
                return vec![Span::styled(line.to_owned(), style)];
            }
            _ => {}
        }
        // Tokens only start and end at ASCII bytes, which are always character boundaries.
        let bytes = line.as_bytes();
        let n = bytes.len();
        let at = |i: usize| bytes.get(i).copied().unwrap_or(0);
        let mut spans = Vec::new();
        let mut plain = 0;
        let mut i = 0;
        let token = |spans: &mut Vec<Span<'static>>,
                     plain: &mut usize,
                     s: usize,
                     e: usize,
                     style: Style| {
            if *plain < s {
                spans.push(Span::raw(line[*plain..s].to_owned()));
            }
            spans.push(Span::styled(line[s..e].to_owned(), style));
            *plain = e;
        };
        while i < n {
            if self.in_block_comment {
                let end = match line[i..].find("*/") {
                    Some(p) => {
                        self.in_block_comment = false;
                        i + p + 2
                    }
                    None => n,
                };
                token(&mut spans, &mut plain, i, end, COMMENT);
                i = end;
                continue;
            }
            let c = bytes[i];
            let prev = if i == 0 { b' ' } else { bytes[i - 1] };
            let after_space = prev == b' ' || i == 0;
            if lang.slash_comments() && c == b'/' && at(i + 1) == b'/' && prev != b':' {
                token(&mut spans, &mut plain, i, n, COMMENT);
                break;
            }
            if lang.slash_comments() && c == b'/' && at(i + 1) == b'*' {
                if plain < i {
                    spans.push(Span::raw(line[plain..i].to_owned()));
                    plain = i;
                }
                self.in_block_comment = true;
                // The opening `/*` must not close itself (`/*/`).
                let end = match line.get(i + 2..).and_then(|rest| rest.find("*/")) {
                    Some(p) => {
                        self.in_block_comment = false;
                        i + 2 + p + 2
                    }
                    None => n,
                };
                token(&mut spans, &mut plain, i, end, COMMENT);
                i = end;
                continue;
            }
            if lang.hash_comments() && c == b'#' && after_space {
                token(&mut spans, &mut plain, i, n, COMMENT);
                break;
            }
            if lang.dash_comments()
                && c == b'-'
                && at(i + 1) == b'-'
                && after_space
                && matches!(at(i + 2), 0 | b' ')
            {
                token(&mut spans, &mut plain, i, n, COMMENT);
                break;
            }
            let quoted = c == b'"'
                || (c == b'\'' && lang.quote_strings())
                || (c == b'`' && lang.backtick_strings());
            if quoted {
                let end = string_end(bytes, i);
                token(&mut spans, &mut plain, i, end, STRING);
                i = end;
                continue;
            }
            if c == b'\'' {
                if let Some(end) = char_literal_end(line, i) {
                    token(&mut spans, &mut plain, i, end, STRING);
                    i = end;
                } else {
                    i += 1;
                }
                continue;
            }
            if c.is_ascii_digit() && !is_ident_byte(prev) {
                let mut end = i + 1;
                while end < n
                    && (is_ident_byte(bytes[end])
                        || (bytes[end] == b'.' && at(end + 1).is_ascii_digit()))
                {
                    end += 1;
                }
                token(&mut spans, &mut plain, i, end, NUMBER);
                i = end;
                continue;
            }
            if c.is_ascii_alphabetic() || c == b'_' {
                let mut end = i + 1;
                while end < n && is_ident_byte(bytes[end]) {
                    end += 1;
                }
                // An identifier glued to non-ASCII letters is not a keyword.
                let glued = prev >= 0x80 || at(end) >= 0x80;
                if !glued && lang.is_keyword(&line[i..end]) {
                    token(&mut spans, &mut plain, i, end, KEYWORD);
                }
                i = end;
                continue;
            }
            i += 1;
        }
        if plain < n {
            spans.push(Span::raw(line[plain..].to_owned()));
        }
        spans
    }
}

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// End (exclusive) of the string opening at `bytes[start]`: after its unescaped closing quote,
/// or the end of the line.
fn string_end(bytes: &[u8], start: usize) -> usize {
    let quote = bytes[start];
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b if b == quote => return i + 1,
            _ => i += 1,
        }
    }
    bytes.len()
}

/// End of a one-character literal (`'x'`, `'\n'`, `'\u{1F600}'`) opening at `start`, if it is
/// one (else a lifetime or an apostrophe).
fn char_literal_end(line: &str, start: usize) -> Option<usize> {
    let rest = line.get(start + 1..)?;
    if let Some(escaped) = rest.strip_prefix('\\') {
        let close = escaped.get(1..)?.find('\'')?;
        return (close <= 9).then_some(start + 4 + close);
    }
    let ch = rest.chars().next()?;
    let after = start + 1 + ch.len_utf8();
    (ch != '\'' && line.as_bytes().get(after) == Some(&b'\'')).then_some(after + 1)
}
