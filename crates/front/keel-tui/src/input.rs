//! The prompt editor: multi-line text with a cursor, and the history of sent prompts.

/// The editor (see the module docs).
#[derive(Debug, Default, Clone)]
pub struct Input {
    text: String,
    /// Byte offset of the cursor in `text` (always on a char boundary).
    cursor: usize,
    history: Vec<String>,
    /// Position while browsing the history (`None`: editing a new prompt).
    browsing: Option<usize>,
    /// The unsent prompt kept while browsing.
    draft: String,
}

impl Input {
    /// An empty editor.
    pub fn new() -> Self {
        Self::default()
    }

    /// The text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// True when nothing is typed.
    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    /// Replace the text (cursor at the end).
    pub fn set(&mut self, text: &str) {
        self.text = text.to_owned();
        self.cursor = self.text.len();
    }

    /// Insert `s` at the cursor (a paste arrives whole, newlines and all).
    pub fn insert(&mut self, s: &str) {
        // Carriage returns from pasted Windows text become newlines.
        let s = s.replace("\r\n", "\n").replace('\r', "\n");
        self.text.insert_str(self.cursor, &s);
        self.cursor += s.len();
        self.browsing = None;
    }

    /// Delete the character before the cursor.
    pub fn backspace(&mut self) {
        if let Some(c) = self.text[..self.cursor].chars().next_back() {
            self.cursor -= c.len_utf8();
            self.text.remove(self.cursor);
        }
    }

    /// Delete the character under the cursor.
    pub fn delete(&mut self) {
        if self.cursor < self.text.len() {
            self.text.remove(self.cursor);
        }
    }

    /// Move one character left.
    pub fn left(&mut self) {
        if let Some(c) = self.text[..self.cursor].chars().next_back() {
            self.cursor -= c.len_utf8();
        }
    }

    /// Move one character right.
    pub fn right(&mut self) {
        if let Some(c) = self.text[self.cursor..].chars().next() {
            self.cursor += c.len_utf8();
        }
    }

    /// Start of the current line.
    pub fn home(&mut self) {
        self.cursor = self.text[..self.cursor].rfind('\n').map_or(0, |i| i + 1);
    }

    /// End of the current line.
    pub fn end(&mut self) {
        self.cursor = self.text[self.cursor..]
            .find('\n')
            .map_or(self.text.len(), |i| self.cursor + i);
    }

    /// Delete from the start of the line to the cursor (Ctrl-U).
    pub fn kill_to_start(&mut self) {
        let start = self.text[..self.cursor].rfind('\n').map_or(0, |i| i + 1);
        self.text.replace_range(start..self.cursor, "");
        self.cursor = start;
    }

    /// Delete the word before the cursor (Ctrl-W).
    pub fn kill_word(&mut self) {
        let before = &self.text[..self.cursor];
        let trimmed = before.trim_end();
        let start = trimmed.rfind(char::is_whitespace).map_or(0, |i| {
            i + trimmed[i..].chars().next().map_or(1, char::len_utf8)
        });
        self.text.replace_range(start..self.cursor, "");
        self.cursor = start;
    }

    /// `(line, column in chars)` of the cursor.
    pub fn cursor_line_col(&self) -> (usize, usize) {
        let before = &self.text[..self.cursor];
        let line = before.matches('\n').count();
        let col = before
            .rsplit('\n')
            .next()
            .map_or(0, unicode_width::UnicodeWidthStr::width);
        (line, col)
    }

    /// The text's lines (at least one).
    pub fn lines(&self) -> Vec<&str> {
        self.text.split('\n').collect()
    }

    /// Up: the line above, or (on the first line) the previous prompt of the history.
    pub fn up(&mut self) {
        let (line, _) = self.cursor_line_col();
        if line > 0 {
            self.vertical(-1);
            return;
        }
        let next = match self.browsing {
            None if self.history.is_empty() => return,
            None => {
                self.draft = self.text.clone();
                self.history.len() - 1
            }
            Some(0) => return,
            Some(i) => i - 1,
        };
        self.browsing = Some(next);
        let text = self.history[next].clone();
        self.text = text;
        self.cursor = self.text.len();
    }

    /// Down: the line below, or (on the last line) the next prompt of the history.
    pub fn down(&mut self) {
        let (line, _) = self.cursor_line_col();
        if line + 1 < self.lines().len() {
            self.vertical(1);
            return;
        }
        match self.browsing {
            None => {}
            Some(i) if i + 1 < self.history.len() => {
                self.browsing = Some(i + 1);
                self.text = self.history[i + 1].clone();
                self.cursor = self.text.len();
            }
            Some(_) => {
                self.browsing = None;
                self.text = std::mem::take(&mut self.draft);
                self.cursor = self.text.len();
            }
        }
    }

    fn vertical(&mut self, delta: isize) {
        let (line, col) = self.cursor_line_col();
        let target = line.saturating_add_signed(delta);
        let mut offset = 0;
        for (i, l) in self.text.split('\n').enumerate() {
            if i == target {
                // The same column, or the line's end.
                let mut width = 0;
                let mut at = l.len();
                for (b, c) in l.char_indices() {
                    if width >= col {
                        at = b;
                        break;
                    }
                    width += unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
                }
                self.cursor = offset + at;
                return;
            }
            offset += l.len() + 1;
        }
    }

    /// Take the text to send: it joins the history and the editor is cleared.
    pub fn take(&mut self) -> String {
        let text = std::mem::take(&mut self.text);
        self.cursor = 0;
        self.browsing = None;
        self.draft.clear();
        if !text.trim().is_empty() && self.history.last() != Some(&text) {
            self.history.push(text.clone());
        }
        text
    }

    /// The `@path` word being typed at the cursor, if any: `(byte start of the word, the
    /// partial path after '@')`.
    pub fn at_word(&self) -> Option<(usize, &str)> {
        let before = &self.text[..self.cursor];
        let start = before
            .rfind(|c: char| c.is_whitespace())
            .map_or(0, |i| i + 1);
        before[start..].strip_prefix('@').map(|p| (start, p))
    }

    /// Replace the word starting at `start` (up to the cursor) with `with`.
    pub fn replace_word(&mut self, start: usize, with: &str) {
        self.text.replace_range(start..self.cursor, with);
        self.cursor = start + with.len();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn editing_moves_over_characters_not_bytes() {
        let mut i = Input::new();
        i.insert("héllo");
        i.left();
        i.left();
        i.backspace();
        assert_eq!(i.text(), "hélo");
        i.home();
        i.right();
        i.delete();
        assert_eq!(i.text(), "hlo");
    }

    #[test]
    fn up_and_down_move_between_lines_then_through_history() {
        let mut i = Input::new();
        i.insert("first");
        assert_eq!(i.take(), "first");
        i.insert("second");
        i.take();
        i.insert("draft\nline two");
        i.up();
        assert_eq!(i.cursor_line_col(), (0, 5));
        i.up();
        assert_eq!(i.text(), "second");
        i.up();
        assert_eq!(i.text(), "first");
        i.down();
        i.down();
        assert_eq!(i.text(), "draft\nline two");
    }

    #[test]
    fn paste_keeps_newlines_and_at_words_are_found() {
        let mut i = Input::new();
        i.insert("a\r\nb");
        assert_eq!(i.lines(), vec!["a", "b"]);
        i.insert(" see @src/ma");
        assert_eq!(i.at_word(), Some((8, "src/ma")));
        i.replace_word(8, "@src/main.rs ");
        assert_eq!(i.text(), "a\nb see @src/main.rs ");
        i.kill_word();
        assert_eq!(i.text(), "a\nb see ");
    }
}
