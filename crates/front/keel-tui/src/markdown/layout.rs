//! Layout arithmetic of the Markdown renderer: column widths of a table, word wrap by display
//! width, cutting styled spans to a width with `…`, and the text clean-ups (tab stops, control
//! characters) code lines and labels get before they are measured.

use super::DIM;
use std::borrow::Cow;

use ratatui::text::Span;

/// Column widths for natural widths `natural` within `budget` columns: unchanged when they
/// fit, else the widest are shrunk to a common cap (at least 1 each).
pub(super) fn fit_columns(natural: &[usize], budget: usize) -> Vec<usize> {
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
pub(super) fn wrap(text: &str, width: usize) -> Vec<(usize, usize)> {
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
pub(super) fn spaces(n: usize) -> Span<'static> {
    const SPACES: &str = "                                                                ";
    match SPACES.get(..n) {
        Some(short) => Span::raw(short),
        None => Span::raw(" ".repeat(n)),
    }
}

/// Display width of a string as ratatui measures it.
pub(super) fn str_width(text: &str) -> usize {
    if text.is_ascii() {
        return text.len();
    }
    Span::raw(text).width()
}

/// The sum of the widths of the characters of `text` (which wrapping and cutting go by).
pub(super) fn chars_width(text: &str) -> usize {
    if text.is_ascii() {
        return text.len();
    }
    text.chars().map(char_width).sum()
}

pub(super) fn spans_width(spans: &[Span<'_>]) -> usize {
    spans.iter().map(|s| str_width(&s.content)).sum()
}

/// `spans` cut to at most `max` columns, ending with a dim `…` when something was cut.
pub(super) fn cut(mut spans: Vec<Span<'static>>, max: usize) -> Vec<Span<'static>> {
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
pub(super) fn trim_end(spans: &mut Vec<Span<'static>>) {
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
pub(super) fn sanitize_label(label: &str) -> String {
    label.chars().filter(|c| !c.is_control()).collect()
}

/// A code line with tabs expanded (stops every 4 columns) and other control characters dropped.
pub(super) fn expand_tabs(line: &str) -> Cow<'_, str> {
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
