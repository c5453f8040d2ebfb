//! `ask_user_question` in the UI: a form, one question at a time. A question with options
//! lists them numbered (Enter or the number picks one); a multi-select question toggles them
//! with Space or the number and Enter submits; a question without options takes what is typed
//! in the editor (Enter sends it). Esc declines the whole form; the answers go back when the
//! last question is answered.

// The App's own module: its types and the imports they share.
use super::*;
use keel_protocol::QuestionAnswer;
use std::collections::BTreeMap;

/// Questions from the agent's asker seam, and where the answer goes.
pub(super) struct QuestionAsk {
    pub(super) questions: Vec<Question>,
    pub(super) reply: tokio::sync::oneshot::Sender<UserAnswer>,
    /// The `ask_user_question` call, when known (a remote session's request names it).
    pub(super) call_id: Option<String>,
}

/// The open form: which question is shown and what was answered so far.
pub(super) struct Form {
    ask: QuestionAsk,
    index: usize,
    answers: BTreeMap<String, QuestionAnswer>,
    /// The highlighted option.
    selected: usize,
    /// Toggled options of a multi-select question.
    picked: Vec<bool>,
}

impl Form {
    /// The tool call whose questions these are, when known.
    pub(super) fn call_id(&self) -> Option<&str> {
        self.ask.call_id.as_deref()
    }

    fn new(ask: QuestionAsk) -> Form {
        let mut form = Form {
            ask,
            index: 0,
            answers: BTreeMap::new(),
            selected: 0,
            picked: Vec::new(),
        };
        form.reset();
        form
    }

    fn question(&self) -> &Question {
        &self.ask.questions[self.index]
    }

    fn multi(&self) -> bool {
        let q = self.question();
        q.multi_select && !q.options.is_empty()
    }

    fn reset(&mut self) {
        self.selected = 0;
        self.picked = vec![false; self.question().options.len()];
    }

    /// The modal showing the current question.
    pub(super) fn modal(&self) -> Modal {
        let q = self.question();
        let total = self.ask.questions.len();
        let title = match (&q.header, total) {
            (Some(h), 1) => h.clone(),
            (Some(h), n) => format!("{h} ({}/{n})", self.index + 1),
            (None, 1) => "Question".to_owned(),
            (None, n) => format!("Question {}/{n}", self.index + 1),
        };
        let hint = if q.options.is_empty() {
            "Type your answer, then Enter · Esc declines"
        } else if self.multi() {
            "Space or a number toggles · Enter submits · Esc declines"
        } else {
            "Enter or a number picks · Esc declines"
        };
        let options = if q.options.is_empty() {
            vec!["Send what you typed".to_owned()]
        } else {
            q.options
                .iter()
                .enumerate()
                .map(|(i, o)| {
                    let mark = match (self.multi(), self.picked.get(i).copied()) {
                        (true, Some(true)) => "[x] ",
                        (true, _) => "[ ] ",
                        (false, _) => "",
                    };
                    match &o.description {
                        Some(d) => format!("{mark}{} — {d}", o.label),
                        None => format!("{mark}{}", o.label),
                    }
                })
                .collect()
        };
        Modal {
            title,
            body: format!("{}\n\n{hint}", q.question),
            options,
            selected: self.selected,
            markdown: false,
        }
    }

    /// Record `answer` for the current question and move on; true when the form is done.
    fn record(&mut self, answer: Option<QuestionAnswer>) -> bool {
        if let Some(answer) = answer {
            let id = self.question().id.clone();
            self.answers.insert(id, answer);
        }
        self.index += 1;
        if self.index >= self.ask.questions.len() {
            return true;
        }
        self.reset();
        false
    }

    /// Send the answers.
    fn submit(self) {
        let _ = self.ask.reply.send(UserAnswer::Answered(self.answers));
    }

    /// Decline the whole form.
    pub(super) fn decline(self, reason: Option<String>) {
        let _ = self.ask.reply.send(UserAnswer::Declined { reason });
    }
}

impl App<'_> {
    pub(super) fn open_form(&mut self, ask: QuestionAsk) {
        if ask.questions.is_empty() {
            let _ = ask.reply.send(UserAnswer::Answered(BTreeMap::new()));
            return;
        }
        let form = Form::new(ask);
        let modal = form.modal();
        self.pending = Some((Pending::Question(form), modal));
    }

    /// A key while the form is open.
    pub(super) fn form_key(&mut self, key: KeyEvent) {
        let Some((Pending::Question(mut form), _)) = self.pending.take() else {
            return;
        };
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let count = form.question().options.len();
        let free = count == 0;
        let mut done = false;
        match key.code {
            KeyCode::Esc => {
                form.decline(None);
                return;
            }
            KeyCode::Up if !free => form.selected = form.selected.saturating_sub(1),
            KeyCode::Down | KeyCode::Tab if !free => {
                form.selected = (form.selected + 1).min(count - 1);
            }
            KeyCode::Char(' ') if form.multi() => {
                if let Some(p) = form.picked.get_mut(form.selected) {
                    *p = !*p;
                }
            }
            KeyCode::Char(c @ '1'..='9') if !ctrl && !free => {
                let i = c as usize - '1' as usize;
                if i < count {
                    form.selected = i;
                    if form.multi() {
                        form.picked[i] = !form.picked[i];
                    } else {
                        let label = form.question().options[i].label.clone();
                        done = form.record(Some(QuestionAnswer::One(label)));
                    }
                }
            }
            KeyCode::Enter => {
                let q = form.question();
                let answer = if free {
                    let text = self.input.take().trim().to_owned();
                    (!text.is_empty()).then_some(QuestionAnswer::One(text))
                } else if form.multi() {
                    let labels = q
                        .options
                        .iter()
                        .zip(&form.picked)
                        .filter(|(_, p)| **p)
                        .map(|(o, _)| o.label.clone())
                        .collect();
                    Some(QuestionAnswer::Many(labels))
                } else {
                    q.options
                        .get(form.selected)
                        .map(|o| QuestionAnswer::One(o.label.clone()))
                };
                done = form.record(answer);
            }
            // A free-text answer is typed in the editor.
            KeyCode::Char(c) if !ctrl && free => self.input.insert(&c.to_string()),
            KeyCode::Backspace if free => self.input.backspace(),
            _ => {}
        }
        if done {
            form.submit();
        } else {
            let modal = form.modal();
            self.pending = Some((Pending::Question(form), modal));
        }
    }
}
