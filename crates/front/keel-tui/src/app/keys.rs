//! Keys of the composer and the conversation view: editing, history, completion, scrolling,
//! the approval modal's answers, and Ctrl-C / Esc handling.

// The App's own module: its types and the imports they share.
use super::*;

impl App<'_> {
    pub(super) fn key(&mut self, key: KeyEvent) {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let alt = key.modifiers.contains(KeyModifiers::ALT);
        let shift = key.modifiers.contains(KeyModifiers::SHIFT);
        // Ctrl-C: cancel the turn; twice (or when idle with nothing typed twice) leave.
        if ctrl && key.code == KeyCode::Char('c') {
            let again = self
                .last_ctrl_c
                .is_some_and(|t| t.elapsed() < Duration::from_millis(1500));
            if again {
                self.quit = true;
                return;
            }
            self.last_ctrl_c = Some(Instant::now());
            if let Some((pending, _)) = self.pending.take() {
                match pending {
                    Pending::Approval(ask) | Pending::Plan(ask) => {
                        let _ = ask.reply.send(ApprovalOutcome::Denied {
                            reason: Some("cancelled by the user".into()),
                        });
                    }
                    Pending::Question(form) => form.decline(Some("cancelled by the user".into())),
                    Pending::Rewind(_) => {}
                }
            }
            if self.running {
                self.driver.cancel();
                self.say("cancelling the turn — Ctrl-C again to exit");
            } else if !self.input.is_empty() {
                self.input.take();
                self.say("cleared — Ctrl-C again to exit");
            } else {
                self.say("Ctrl-C again (or Ctrl-D) to exit");
            }
            return;
        }
        if matches!(self.pending, Some((Pending::Question(_), _))) {
            self.form_key(key);
            return;
        }
        if let Some((_, modal)) = self.pending.as_mut() {
            match key.code {
                KeyCode::Up => modal.selected = modal.selected.saturating_sub(1),
                KeyCode::Down | KeyCode::Tab => {
                    modal.selected = (modal.selected + 1).min(modal.options.len() - 1);
                }
                KeyCode::Enter => {
                    let choice = modal.selected;
                    self.answer(choice);
                }
                KeyCode::Char(c @ '1'..='9') if !ctrl => {
                    let choice = c as usize - '1' as usize;
                    if choice < modal.options.len() {
                        self.answer(choice);
                    }
                }
                KeyCode::Esc => {
                    let last = modal.options.len() - 1;
                    self.answer(last);
                }
                // Typing goes to the editor: a reason or feedback for the answer.
                KeyCode::Char(c) if !ctrl => self.input.insert(&c.to_string()),
                KeyCode::Backspace => self.input.backspace(),
                _ => {}
            }
            return;
        }
        match key.code {
            KeyCode::Char('d') if ctrl => {
                if self.input.is_empty() {
                    self.quit = true;
                } else {
                    self.input.delete();
                }
            }
            KeyCode::Enter if alt || shift => self.input.insert("\n"),
            KeyCode::Char('j') if ctrl => self.input.insert("\n"),
            KeyCode::Enter => {
                // On an `@path` completion Enter takes the path; on a slash command it runs
                // the highlighted command.
                let at_path = self.input.at_word().is_some();
                if !self.completions.is_empty() && self.accept_completion() && at_path {
                    return;
                }
                let text = self.input.take();
                self.submit(text, false);
            }
            // Ctrl-S: send what is typed into the running turn (steer).
            KeyCode::Char('s') if ctrl => {
                let text = self.input.take();
                self.submit(text, true);
            }
            KeyCode::BackTab => {
                let on = !self.cells.plan_mode;
                self.set_plan_mode(on);
            }
            KeyCode::Char('r') if ctrl => {
                self.show_reasoning = !self.show_reasoning;
            }
            KeyCode::Char('u') if ctrl => self.input.kill_to_start(),
            KeyCode::Char('w') if ctrl => self.input.kill_word(),
            KeyCode::Char('a') if ctrl => self.input.home(),
            KeyCode::Char('e') if ctrl => self.input.end(),
            KeyCode::Char(c) if !ctrl => self.input.insert(&c.to_string()),
            KeyCode::Backspace => self.input.backspace(),
            KeyCode::Delete => self.input.delete(),
            KeyCode::Left => self.input.left(),
            KeyCode::Right => self.input.right(),
            KeyCode::Home => self.input.home(),
            KeyCode::End => self.input.end(),
            KeyCode::Tab => {
                self.accept_completion();
            }
            KeyCode::Up if !self.completions.is_empty() => {
                self.completion = self.completion.saturating_sub(1);
                return;
            }
            KeyCode::Down if !self.completions.is_empty() => {
                self.completion = (self.completion + 1).min(self.completions.len() - 1);
                return;
            }
            KeyCode::Up => self.input.up(),
            KeyCode::Down => self.input.down(),
            KeyCode::PageUp | KeyCode::PageDown if self.canvas.is_inline() => {
                self.say("the conversation is in the terminal's scrollback: scroll the terminal");
            }
            KeyCode::PageUp => self.scroll += 10,
            KeyCode::PageDown => self.scroll = self.scroll.saturating_sub(10),
            KeyCode::Esc => {
                self.completions.clear();
                self.scroll = 0;
                // Esc Esc with nothing typed: the rewind list.
                let again = self
                    .last_esc
                    .is_some_and(|t| t.elapsed() < Duration::from_millis(1000));
                if self.input.is_empty() && again {
                    self.last_esc = None;
                    self.open_rewind();
                    return;
                }
                self.last_esc = self.input.is_empty().then(Instant::now);
            }
            _ => {}
        }
        self.update_completions();
    }

    /// Offer completions for a slash command or an `@path` being typed.
    pub(super) fn update_completions(&mut self) {
        self.completions.clear();
        let text = self.input.text();
        if text.starts_with('/') && !text.contains(char::is_whitespace) {
            self.completions = self.slash.complete(text);
        } else if let Some((_, partial)) = self.input.at_word() {
            self.completions = crate::slash::complete_path(&self.cwd, partial)
                .into_iter()
                .map(|p| (format!("@{p}"), String::new()))
                .collect();
        }
        if self.completion >= self.completions.len() {
            self.completion = 0;
        }
    }

    /// Put the highlighted completion in the editor; false when there was none.
    pub(super) fn accept_completion(&mut self) -> bool {
        let Some((name, _)) = self.completions.get(self.completion).cloned() else {
            return false;
        };
        if let Some((start, _)) = self.input.at_word() {
            let end = if name.ends_with('/') { "" } else { " " };
            self.input.replace_word(start, &format!("{name}{end}"));
        } else {
            self.input.set(&format!("{name} "));
        }
        self.completions.clear();
        self.update_completions();
        true
    }
}
