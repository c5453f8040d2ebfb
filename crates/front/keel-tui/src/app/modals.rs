//! The modals shown before the conversation: the session picker and the trust question,
//! drawn alone by one key loop ([`modal_key`]).

// The App's own module: its types and the imports they share.
use super::*;

pub(super) enum Picked {
    Session(PathBuf),
    New,
    Quit,
}

/// The session picker: newest first; Enter continues the highlighted one, `n` starts a new
/// session, Esc / Ctrl-C leaves.
pub(super) fn pick_session(
    canvas: &mut Canvas,
    rx: &Receiver<Msg>,
    sessions: &[SessionEntry],
) -> Result<Picked, Error> {
    if sessions.is_empty() {
        return Ok(Picked::New);
    }
    let mut modal = view::picker(sessions, now_ms());
    loop {
        let Some(key) = modal_key(canvas, rx, &modal)? else {
            return Ok(Picked::Quit);
        };
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Up => modal.selected = modal.selected.saturating_sub(1),
            KeyCode::Down => modal.selected = (modal.selected + 1).min(modal.options.len() - 1),
            KeyCode::PageUp => modal.selected = modal.selected.saturating_sub(10),
            KeyCode::PageDown => {
                modal.selected = (modal.selected + 10).min(modal.options.len() - 1);
            }
            KeyCode::Enter => return Ok(Picked::Session(sessions[modal.selected].path.clone())),
            KeyCode::Char('n') if !ctrl => return Ok(Picked::New),
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
            KeyCode::Enter => return Ok(trust::answer_of(modal.selected)),
            KeyCode::Char('y' | 'Y' | '1') if !ctrl => return Ok(Answer::Trust),
            KeyCode::Char('n' | 'N' | '2') if !ctrl => return Ok(Answer::Distrust),
            KeyCode::Esc => return Ok(Answer::Dismissed),
            KeyCode::Char('c' | 'd') if ctrl => return Ok(Answer::Dismissed),
            _ => {}
        }
    }
}
