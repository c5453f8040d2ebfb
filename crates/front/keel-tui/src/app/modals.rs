//! The modals shown before the conversation: the session picker and the trust question,
//! drawn alone by one key loop ([`modal_key`]).

// The App's own module: its types and the imports they share.
use super::*;
use keel_session::view::text::one_line;

pub(super) enum Picked {
    Session(PathBuf),
    New,
    Quit,
}

/// Finds the sessions that mention a query: their files, best first, each with a snippet.
pub(super) type SessionSearch<'a> = &'a dyn Fn(&str) -> Result<Vec<(PathBuf, String)>, SourceError>;

/// The session picker: newest first; Enter continues the highlighted one, `n` starts a new
/// session, `/` searches the sessions' logs (`keel sessions search`) and narrows the list to
/// those that mention the words, Esc clears the search, then leaves; Ctrl-C leaves.
pub(super) fn pick_session(
    canvas: &mut Canvas,
    rx: &Receiver<Msg>,
    sessions: &[SessionEntry],
    search: SessionSearch<'_>,
) -> Result<Picked, Error> {
    if sessions.is_empty() {
        return Ok(Picked::New);
    }
    let all = view::picker(sessions, now_ms());
    let mut modal = all.clone();
    // The sessions listed now (indices into `sessions`) and the search being typed.
    let mut shown: Vec<usize> = (0..sessions.len()).collect();
    let mut typing: Option<String> = None;
    let mut filtered = false;
    loop {
        let Some(key) = modal_key(canvas, rx, &modal)? else {
            return Ok(Picked::Quit);
        };
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if let Some(text) = typing.as_mut() {
            match key.code {
                KeyCode::Char('c' | 'd') if ctrl => return Ok(Picked::Quit),
                KeyCode::Char(c) if !ctrl => text.push(c),
                KeyCode::Backspace => {
                    text.pop();
                }
                KeyCode::Esc => {
                    typing = None;
                    modal.body = all.body.clone();
                    continue;
                }
                KeyCode::Enter if !text.trim().is_empty() => {
                    let query = text.trim().to_owned();
                    typing = None;
                    match search(&query) {
                        Ok(hits) => {
                            let found: Vec<(usize, String)> = hits
                                .iter()
                                .filter_map(|(path, snippet)| {
                                    let i = sessions.iter().position(|s| &s.path == path)?;
                                    Some((i, snippet.clone()))
                                })
                                .collect();
                            if found.is_empty() {
                                modal.body = format!(
                                    "No session here mentions \"{query}\" · / searches again · Esc shows all"
                                );
                            } else {
                                shown = found.iter().map(|(i, _)| *i).collect();
                                modal.options = found
                                    .iter()
                                    .map(|(i, snippet)| {
                                        let title = &sessions[*i].title;
                                        format!(
                                            "{:<30} {}",
                                            one_line(title, 29),
                                            one_line(snippet, 70)
                                        )
                                    })
                                    .collect();
                                modal.selected = 0;
                                modal.body = format!(
                                    "Sessions mentioning \"{query}\" · Enter continues · Esc shows all"
                                );
                                filtered = true;
                            }
                        }
                        Err(e) => modal.body = format!("Search failed: {e} · Esc shows all"),
                    }
                    continue;
                }
                _ => {}
            }
            if let Some(text) = &typing {
                modal.body = format!("Search: {text}▏ · Enter searches · Esc cancels");
            }
            continue;
        }
        match key.code {
            KeyCode::Up => modal.selected = modal.selected.saturating_sub(1),
            KeyCode::Down => modal.selected = (modal.selected + 1).min(modal.options.len() - 1),
            KeyCode::PageUp => modal.selected = modal.selected.saturating_sub(10),
            KeyCode::PageDown => {
                modal.selected = (modal.selected + 10).min(modal.options.len() - 1);
            }
            KeyCode::Enter => {
                let i = shown.get(modal.selected).copied().unwrap_or(0);
                return Ok(Picked::Session(sessions[i].path.clone()));
            }
            KeyCode::Char('/') if !ctrl => {
                typing = Some(String::new());
                modal.body = "Search: ▏ · Enter searches · Esc cancels".into();
            }
            KeyCode::Char('n') if !ctrl => return Ok(Picked::New),
            KeyCode::Esc if filtered => {
                modal = all.clone();
                shown = (0..sessions.len()).collect();
                filtered = false;
            }
            KeyCode::Esc | KeyCode::Char('q') => return Ok(Picked::Quit),
            KeyCode::Char('c' | 'd') if ctrl => return Ok(Picked::Quit),
            _ => {}
        }
    }
}

/// Draw `modal` alone and wait for the next key press (resizes redraw; releases are skipped).
/// `None` when the terminal goes away or the UI is told to quit.
pub(super) fn modal_key(
    canvas: &mut Canvas,
    rx: &Receiver<Msg>,
    modal: &view::Modal,
) -> Result<Option<KeyEvent>, Error> {
    loop {
        let (_, rows) = canvas.size();
        canvas
            .draw(rows, |frame| view::draw_modal(frame, modal, frame.area()))
            .map_err(Error::Draw)?;
        let Ok(msg) = rx.recv() else {
            return Ok(None);
        };
        match msg {
            Msg::Term(Event::Key(key)) if key.kind != KeyEventKind::Release => {
                return Ok(Some(key));
            }
            Msg::Term(Event::Resize(cols, rows)) => canvas.resized(cols, rows),
            Msg::Quit => return Ok(None),
            _ => {}
        }
    }
}

/// The trust question: `y`/`1` trusts, `n`/`2` keeps the files inert, Up/Down and Enter
/// choose; Esc or Ctrl-C (or the terminal going away) decides nothing.
pub(super) fn ask_trust(
    canvas: &mut Canvas,
    rx: &Receiver<Msg>,
    ws: &WorkspaceTrust,
) -> Result<Answer, Error> {
    let mut modal = trust::question(ws);
    loop {
        let Some(key) = modal_key(canvas, rx, &modal)? else {
            return Ok(Answer::Dismissed);
        };
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Up => modal.selected = modal.selected.saturating_sub(1),
            KeyCode::Down | KeyCode::Tab => {
                modal.selected = (modal.selected + 1).min(modal.options.len() - 1);
            }
            KeyCode::Enter => return Ok(trust::answer_of(ws, modal.selected)),
            KeyCode::Char('y' | 'Y' | '1') if !ctrl => return Ok(Answer::Trust),
            KeyCode::Char('n' | 'N' | '2') if !ctrl => return Ok(trust::answer_of(ws, 1)),
            KeyCode::Esc => return Ok(Answer::Dismissed),
            KeyCode::Char('c' | 'd') if ctrl => return Ok(Answer::Dismissed),
            _ => {}
        }
    }
}
