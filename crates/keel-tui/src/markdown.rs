//! Markdown to terminal lines: the assistant's answers as the conversation view shows them.
//! (Being written: see `render`.)

use ratatui::text::Line;

/// `text` (CommonMark, as the model streams it: possibly cut mid-construct) as styled lines at
/// most `width` columns wide.
pub fn render(text: &str, width: u16) -> Vec<Line<'static>> {
    let _ = width;
    text.lines().map(|l| Line::raw(l.to_owned())).collect()
}
