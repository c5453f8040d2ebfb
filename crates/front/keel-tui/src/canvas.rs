//! Where frames go: the terminal's own screen, with the conversation printed into its
//! scrollback above a live area (the default), or the alternate screen (`--alt-screen`).
//!
//! In the terminal's own screen, a cell that can no longer change is printed once above the
//! live area and scrolls away with the terminal, so the terminal's scrollback, search and
//! copy/paste work on the conversation. The live area (the cells still changing, the todo
//! panel, the editor, the status line, an open question) is a ratatui viewport placed right
//! under what was printed, as tall as its content. ratatui's inline viewport has a fixed height
//! and asks the terminal where the cursor is when it changes (a reply the input thread would
//! swallow); this one is a fixed viewport moved and resized here, which needs neither.

use crossterm::cursor::MoveTo;
use crossterm::style::Print;
use crossterm::terminal::{Clear, ClearType};
use ratatui::backend::{Backend, CrosstermBackend};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Widget};
use ratatui::{Frame, Terminal, TerminalOptions, Viewport};
use std::io::{Stdout, Write};

type Term = Terminal<CrosstermBackend<Stdout>>;

/// The terminal the UI draws on.
pub enum Canvas {
    /// The alternate screen: the UI owns the whole screen and scrolls the conversation itself.
    Alternate(Term),
    /// The terminal's own screen: history above, the live area under it.
    Inline(Inline),
}

/// The terminal's own screen, with history printed above a live area.
pub struct Inline {
    terminal: Term,
    cols: u16,
    rows: u16,
    /// The first row under the printed history.
    bottom: u16,
    /// The live area as the terminal knows it; `None` after anything moved it.
    area: Option<Rect>,
}

fn stdout_term(viewport: Viewport) -> std::io::Result<Term> {
    Terminal::with_options(
        CrosstermBackend::new(std::io::stdout()),
        TerminalOptions { viewport },
    )
}

impl Canvas {
    /// The alternate screen (already entered by the caller).
    pub fn alternate() -> std::io::Result<Canvas> {
        Ok(Canvas::Alternate(Terminal::new(CrosstermBackend::new(
            std::io::stdout(),
        ))?))
    }

    /// The terminal's own screen, history starting at the cursor's row.
    pub fn inline(cursor_row: u16) -> std::io::Result<Canvas> {
        let (cols, rows) = crossterm::terminal::size()?;
        let rows = rows.max(1);
        let area = Rect::new(0, cursor_row.min(rows - 1), cols, 1);
        Ok(Canvas::Inline(Inline {
            terminal: stdout_term(Viewport::Fixed(area))?,
            cols,
            rows,
            bottom: cursor_row.min(rows - 1),
            area: None,
        }))
    }

    /// Whether the conversation lives in the terminal's scrollback.
    pub fn is_inline(&self) -> bool {
        matches!(self, Canvas::Inline(_))
    }

    /// Columns and rows of the screen.
    pub fn size(&self) -> (u16, u16) {
        match self {
            Canvas::Alternate(t) => t.size().map_or((80, 24), |s| (s.width, s.height)),
            Canvas::Inline(i) => (i.cols, i.rows),
        }
    }

    /// The screen changed size.
    pub fn resized(&mut self, cols: u16, rows: u16) {
        if let Canvas::Inline(i) = self {
            i.cols = cols;
            i.rows = rows.max(1);
            i.bottom = i.bottom.min(i.rows - 1);
            i.area = None;
        }
    }

    /// Print `lines` (rendered at the screen's width) above the live area, for good.
    pub fn print_above(&mut self, lines: Vec<Line<'static>>) -> std::io::Result<()> {
        match self {
            Canvas::Alternate(_) => Ok(()),
            Canvas::Inline(i) => i.print_above(lines),
        }
    }

    /// Draw a frame `height` rows tall (the whole screen on the alternate screen).
    pub fn draw(
        &mut self,
        height: u16,
        render: impl FnOnce(&mut Frame<'_>),
    ) -> std::io::Result<()> {
        let terminal = match self {
            Canvas::Alternate(t) => t,
            Canvas::Inline(i) => {
                i.place(height)?;
                &mut i.terminal
            }
        };
        terminal.draw(render).map(|_| ())
    }

    /// Leave the screen as a shell expects it: the live area wiped and the cursor under the
    /// printed history.
    pub fn leave(&mut self) -> std::io::Result<()> {
        if let Canvas::Inline(i) = self {
            i.wipe_live_area()?;
            let mut out = std::io::stdout();
            crossterm::queue!(out, MoveTo(0, i.bottom))?;
            out.flush()?;
        }
        Ok(())
    }
}

impl Inline {
    /// Blank every row under the history, one line at a time: clearing to the end of the
    /// screen from its top-left corner counts as clearing the whole screen, which tmux
    /// (`scroll-on-clear`) and VTE terminals first copy into the scrollback.
    fn wipe_live_area(&mut self) -> std::io::Result<()> {
        let mut out = std::io::stdout();
        for row in self.bottom..self.rows {
            crossterm::queue!(out, MoveTo(0, row), Clear(ClearType::CurrentLine))?;
        }
        self.area = None;
        Ok(())
    }

    /// Scroll the whole screen up by `n` rows (the top rows go into the scrollback).
    fn scroll_up(&mut self, n: u16) -> std::io::Result<()> {
        if n == 0 {
            return Ok(());
        }
        let mut out = std::io::stdout();
        crossterm::queue!(out, MoveTo(0, self.rows - 1))?;
        for _ in 0..n {
            crossterm::queue!(out, Print("\n"))?;
        }
        self.bottom = self.bottom.saturating_sub(n);
        self.area = None;
        Ok(())
    }

    fn print_above(&mut self, lines: Vec<Line<'static>>) -> std::io::Result<()> {
        if lines.is_empty() {
            return Ok(());
        }
        // The live area goes (it is drawn again under the new lines).
        self.wipe_live_area()?;
        // Keep the rows the live area had free under the history, when there are any.
        let room = self.rows.saturating_sub(1).max(1);
        let mut rest = lines.as_slice();
        while !rest.is_empty() {
            let chunk = rest.len().min(usize::from(room));
            let (now, later) = rest.split_at(chunk);
            let chunk = chunk as u16;
            let over = (self.bottom + chunk).saturating_sub(room);
            self.scroll_up(over)?;
            let area = Rect::new(0, self.bottom, self.cols, chunk);
            let mut buffer = Buffer::empty(area);
            Paragraph::new(now.to_vec()).render(area, &mut buffer);
            // Only what is not blank: the rows were wiped or scrolled in blank.
            let blank = Buffer::empty(area);
            let updates = blank.diff(&buffer);
            let backend = self.terminal.backend_mut();
            backend.draw(updates.into_iter())?;
            Backend::flush(backend)?;
            self.bottom += chunk;
            rest = later;
        }
        crossterm::queue!(std::io::stdout(), crossterm::style::ResetColor)?;
        Ok(())
    }

    /// Make the live area `height` rows right under the history, scrolling the screen when
    /// they do not fit.
    fn place(&mut self, height: u16) -> std::io::Result<()> {
        let height = height.clamp(1, self.rows);
        let over = (self.bottom + height).saturating_sub(self.rows);
        self.scroll_up(over)?;
        let area = Rect::new(0, self.bottom, self.cols, height);
        if self.area != Some(area) {
            // Wipe what was there; a new viewport draws every cell of its first frame that is
            // not blank, so the rest must already be blank.
            self.wipe_live_area()?;
            self.terminal = stdout_term(Viewport::Fixed(area))?;
            self.area = Some(area);
        }
        Ok(())
    }
}
