//! `keel run --inbox-stdin`: `ask_user_question` answered by the script on stdin. The
//! `question/asked` event (printed with `--json`) opens a slot for its call; a line
//! `{"answer": {"call_id": ID, "answers": {QUESTION_ID: ANSWER}}}` fills it; when stdin closes,
//! every open and later question is answered "no person answered".

use anyhow::{Context, Result, anyhow, bail};
use keel_agent::Asker;
use keel_protocol::sync::Locked;
use keel_protocol::{EventBody, Question, QuestionAnswer, SessionEvent, ToolCallBlock};
use keel_tools::UserAnswer;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use tokio::sync::oneshot;

/// Why a question got no answer once stdin closed.
const STDIN_CLOSED: &str = "no person answered (stdin closed)";

/// Questions waiting for an answer on stdin.
#[derive(Default)]
pub(super) struct StdinAnswers {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    closed: bool,
    waiting: HashMap<String, Slot>,
}

struct Slot {
    questions: Vec<Question>,
    reply: Option<oneshot::Sender<UserAnswer>>,
    answer: Option<oneshot::Receiver<UserAnswer>>,
}

impl StdinAnswers {
    /// A `session/event` observer: a `question/asked` opens its slot before the event is
    /// printed, so a script that answers at once finds it.
    pub(super) fn observe(&self, ev: &SessionEvent) {
        if let EventBody::QuestionAsked(q) = &ev.body {
            let mut state = self.state.locked();
            if state.closed {
                return;
            }
            let (reply, answer) = oneshot::channel();
            state.waiting.insert(
                q.call_id.clone(),
                Slot {
                    questions: q.questions.clone(),
                    reply: Some(reply),
                    answer: Some(answer),
                },
            );
        }
    }

    /// stdin closed: nobody will answer.
    pub(super) fn close(&self) {
        let mut state = self.state.locked();
        state.closed = true;
        for slot in state.waiting.values_mut() {
            slot.reply.take();
        }
    }

    /// Take the `answer` object of an inbox line; an error names what is wrong (the question
    /// keeps waiting).
    pub(super) fn answer(&self, line: &Value) -> Result<()> {
        let obj = line
            .as_object()
            .context("'answer' must be an object {\"call_id\": ID, \"answers\": {...}}")?;
        let call_id = obj
            .get("call_id")
            .or_else(|| obj.get("callId"))
            .and_then(|v| v.as_str())
            .context("'answer' needs \"call_id\": the callId of the question/asked event")?;
        let mut state = self.state.locked();
        let slot = state
            .waiting
            .get_mut(call_id)
            .filter(|s| s.reply.is_some())
            .with_context(|| format!("no question is waiting for call_id '{call_id}'"))?;
        let answer = if obj.get("declined").and_then(|v| v.as_bool()) == Some(true) {
            UserAnswer::Declined { reason: None }
        } else {
            UserAnswer::Answered(parse_answers(&slot.questions, obj.get("answers"))?)
        };
        if let Some(reply) = slot.reply.take() {
            let _ = reply.send(answer);
        }
        Ok(())
    }
}

/// The `answers` object, checked against the questions: keys are question ids; a value is a
/// string (a label or free text) or, for a multi-select question, an array of labels.
fn parse_answers(
    questions: &[Question],
    answers: Option<&Value>,
) -> Result<BTreeMap<String, QuestionAnswer>> {
    let map = answers.and_then(|a| a.as_object()).context(
        "'answer' needs \"answers\": an object from question id to a string (or an array of \
         labels for a multi-select question)",
    )?;
    let mut out = BTreeMap::new();
    for (id, value) in map {
        let q = questions.iter().find(|q| &q.id == id).ok_or_else(|| {
            let ids: Vec<&str> = questions.iter().map(|q| q.id.as_str()).collect();
            anyhow!(
                "no question has the id '{id}' (the ids are: {})",
                ids.join(", ")
            )
        })?;
        let answer = match value {
            Value::String(s) if q.multi_select && !q.options.is_empty() => {
                QuestionAnswer::Many(vec![s.clone()])
            }
            Value::String(s) => QuestionAnswer::One(s.clone()),
            Value::Array(items) if q.multi_select && !q.options.is_empty() => {
                let labels: Option<Vec<String>> = items
                    .iter()
                    .map(|v| v.as_str().map(str::to_owned))
                    .collect();
                QuestionAnswer::Many(labels.with_context(|| {
                    format!("the answer to '{id}' must be an array of label strings")
                })?)
            }
            Value::Array(_) => bail!("question '{id}' takes one answer (a string), not an array"),
            _ => bail!("the answer to '{id}' must be a string"),
        };
        out.insert(id.clone(), answer);
    }
    Ok(out)
}

impl Asker for StdinAnswers {
    fn ask<'a>(
        &'a self,
        call: &'a ToolCallBlock,
        _questions: &'a [Question],
    ) -> Pin<Box<dyn Future<Output = UserAnswer> + Send + 'a>> {
        let answer = self
            .state
            .locked()
            .waiting
            .get_mut(&call.id)
            .and_then(|s| s.answer.take());
        Box::pin(async move {
            let got = match answer {
                Some(rx) => rx.await.ok(),
                None => None,
            };
            self.state.locked().waiting.remove(&call.id);
            got.unwrap_or(UserAnswer::Unanswered {
                reason: STDIN_CLOSED.to_owned(),
            })
        })
    }
}
