//! Approvals and questions put to the clients of a served session. The session's agent is
//! built with a [`ServeApprover`] and a [`ServeAsker`]: each request they get is opened in the
//! session's [`Requests`] under a new `requestId`, announced to every event stream of the
//! session (a `pending` snapshot when a stream starts, then a `request` and a `resolved`
//! message per request) and listed by `GET …/pending`, and waits for the first answer
//! (`POST …/approvals/{requestId}`, `POST …/questions/{requestId}`). One answer wins: the
//! request is resolved under the registry's lock, and any later answer is refused. A request
//! still open when its turn is cancelled, its session closed or the server stopped resolves as
//! denied (an approval) or unanswered (a question), and so does one whose turn stopped waiting
//! for it.

use crate::ApiError;
use futures::FutureExt;
use futures::future::BoxFuture;
use keel_agent::{Approver, Asker, allow_key};
use keel_protocol::sync::Locked;
use keel_protocol::{Question, QuestionAnswer, ToolCallBlock};
use keel_tools::{ApprovalOutcome, UserAnswer, escalation};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use tokio::sync::{oneshot, watch};

/// `by` of a request resolved by an answer over the API.
const BY_CLIENT: &str = "client";
/// `by` of a request resolved because its turn was cancelled (or stopped waiting).
pub(crate) const BY_CANCEL: &str = "cancelled";
/// `by` of a request resolved because its session was closed or the server stopped.
pub(crate) const BY_CLOSE: &str = "closed";

/// An approval's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Decision {
    /// Allow this call.
    Allow,
    /// Allow this call and, for the rest of the session, the same command (`bash`) or tool.
    AllowAlways,
    /// Refuse this call.
    Deny,
}

impl Decision {
    fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::AllowAlways => "allow_always",
            Decision::Deny => "deny",
        }
    }
}

/// The body of `POST …/approvals/{requestId}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ApprovalBody {
    decision: Decision,
    /// Why (a denial's reason is shown to the model).
    note: Option<String>,
}

/// The body of `POST …/questions/{requestId}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct QuestionBody {
    /// Question id → a label or free text, or an array of labels (multi-select).
    answers: Option<Map<String, Value>>,
    /// The person dismisses the questions.
    #[serde(default)]
    declined: bool,
    /// What they said when declining.
    note: Option<String>,
}

/// What the waiting approver or asker receives.
enum Reply {
    Approval(Decision, Option<String>),
    Question(UserAnswer),
    /// Nobody answers: why.
    Gone(String),
}

/// What an open request waits for.
enum Kind {
    Approval { options: Vec<Decision> },
    Question { questions: Vec<Question> },
}

impl Kind {
    fn name(&self) -> &'static str {
        match self {
            Kind::Approval { .. } => "approval",
            Kind::Question { .. } => "question",
        }
    }
}

struct Open {
    id: String,
    call_id: String,
    kind: Kind,
    view: Arc<Value>,
    reply: oneshot::Sender<Reply>,
}

/// A change the event streams announce.
#[derive(Clone)]
pub(crate) enum Note {
    /// A request was opened: its view.
    Asked(Arc<Value>),
    /// A request was resolved: how.
    Resolved(Arc<Value>),
}

#[derive(Default)]
struct State {
    /// Open requests, in the order they were asked.
    open: Vec<Open>,
    /// Resolved requests: id → kind and how (`resolved` message).
    resolved: HashMap<String, (&'static str, Arc<Value>)>,
    /// Every change, in order: the streams' cursor is an index.
    notes: Vec<Note>,
}

/// The open and resolved requests of one session (kept while the server runs: a session
/// closed and resumed keeps its registry, so an old request is never answered).
pub(crate) struct Requests {
    state: Mutex<State>,
    /// The number of notes, for streams to wait on.
    changed: watch::Sender<usize>,
}

impl Default for Requests {
    fn default() -> Self {
        Requests {
            state: Mutex::new(State::default()),
            changed: watch::channel(0).0,
        }
    }
}

impl Requests {
    fn note(&self, state: &mut State, note: Note) {
        state.notes.push(note);
        let n = state.notes.len();
        self.changed.send_replace(n);
    }

    /// A receiver told of each change (subscribe before [`Requests::snapshot`]).
    pub(crate) fn subscribe(&self) -> watch::Receiver<usize> {
        self.changed.subscribe()
    }

    /// The open requests' views, and the cursor of the next change.
    pub(crate) fn snapshot(&self) -> (Vec<Arc<Value>>, usize) {
        let state = self.state.locked();
        let views = state.open.iter().map(|o| o.view.clone()).collect();
        (views, state.notes.len())
    }

    /// The changes from `*cursor` on, advancing it.
    pub(crate) fn since(&self, cursor: &mut usize) -> Vec<Note> {
        let state = self.state.locked();
        let from = (*cursor).min(state.notes.len());
        *cursor = state.notes.len();
        state.notes[from..].to_vec()
    }

    /// Open a request for `call`; `fields` are the view's kind-specific fields.
    fn open(
        &self,
        call: &ToolCallBlock,
        kind: Kind,
        fields: Map<String, Value>,
    ) -> (String, oneshot::Receiver<Reply>) {
        let id = new_request_id();
        let mut view = Map::new();
        view.insert("requestId".into(), json!(id));
        view.insert("kind".into(), json!(kind.name()));
        view.insert("callId".into(), json!(call.id));
        view.extend(fields);
        view.insert("askedAt".into(), json!(keel_protocol::now_ms()));
        let view = Arc::new(Value::Object(view));
        let (reply, rx) = oneshot::channel();
        let mut state = self.state.locked();
        state.open.push(Open {
            id: id.clone(),
            call_id: call.id.clone(),
            kind,
            view: view.clone(),
            reply,
        });
        self.note(&mut state, Note::Asked(view));
        (id, rx)
    }

    /// Resolve the open request at `index` with `reply`, described by `how`; its view.
    fn resolve(&self, state: &mut State, index: usize, reply: Reply, how: Map<String, Value>) {
        let open = state.open.remove(index);
        let mut resolved = Map::new();
        resolved.insert("requestId".into(), json!(open.id));
        resolved.insert("kind".into(), json!(open.kind.name()));
        resolved.insert("callId".into(), json!(open.call_id));
        resolved.extend(how);
        let resolved = Arc::new(Value::Object(resolved));
        state
            .resolved
            .insert(open.id.clone(), (open.kind.name(), resolved.clone()));
        self.note(state, Note::Resolved(resolved.clone()));
        let _ = open.reply.send(reply);
    }

    /// Resolve every open request as nobody's: approvals denied, questions unanswered, `by`
    /// saying why (`cancelled`, `closed`), `reason` shown to the model.
    pub(crate) fn resolve_all(&self, by: &str, reason: &str) {
        let mut state = self.state.locked();
        while !state.open.is_empty() {
            self.resolve_gone(&mut state, 0, by, reason);
        }
    }

    fn resolve_gone(&self, state: &mut State, index: usize, by: &str, reason: &str) {
        let mut how = Map::new();
        how.insert("by".into(), json!(by));
        match state.open[index].kind {
            Kind::Approval { .. } => how.insert("decision".into(), json!("deny")),
            Kind::Question { .. } => how.insert("outcome".into(), json!("unanswered")),
        };
        how.insert("reason".into(), json!(reason));
        self.resolve(state, index, Reply::Gone(reason.to_owned()), how);
    }

    /// The request `id` no longer waits (its turn stopped waiting): resolve it as cancelled if
    /// still open.
    fn abandon(&self, id: &str) {
        let mut state = self.state.locked();
        if let Some(i) = state.open.iter().position(|o| o.id == id) {
            self.resolve_gone(
                &mut state,
                i,
                BY_CANCEL,
                "the turn stopped waiting for an answer",
            );
        }
    }

    /// The open request `id` of kind `kind`, else the error for an unknown or resolved one.
    fn find(&self, state: &State, id: &str, kind: &str) -> Result<usize, ApiError> {
        if let Some(i) = state
            .open
            .iter()
            .position(|o| o.id == id && o.kind.name() == kind)
        {
            return Ok(i);
        }
        match state.resolved.get(id) {
            Some((k, how)) if *k == kind => Err(already_answered(id, how)),
            _ => Err(ApiError::not_found(format!("no {kind} request {id}"))),
        }
    }

    /// Answer the approval `id`; the `resolved` view.
    pub(crate) fn answer_approval(
        &self,
        id: &str,
        body: ApprovalBody,
    ) -> Result<Arc<Value>, ApiError> {
        let mut state = self.state.locked();
        let i = self.find(&state, id, "approval")?;
        if let Kind::Approval { options } = &state.open[i].kind
            && !options.contains(&body.decision)
        {
            let offered: Vec<&str> = options.iter().map(|d| d.as_str()).collect();
            return Err(ApiError::bad_request(format!(
                "decision {:?} is not offered for approval {id} (its options: {})",
                body.decision.as_str(),
                offered.join(", ")
            )));
        }
        let mut how = Map::new();
        how.insert("by".into(), json!(BY_CLIENT));
        how.insert("decision".into(), json!(body.decision.as_str()));
        if let Some(note) = &body.note {
            how.insert("note".into(), json!(note));
        }
        self.resolve(
            &mut state,
            i,
            Reply::Approval(body.decision, body.note),
            how,
        );
        Ok(resolved_view(&state, id))
    }

    /// Answer the question request `id`; the `resolved` view.
    pub(crate) fn answer_question(
        &self,
        id: &str,
        body: QuestionBody,
    ) -> Result<Arc<Value>, ApiError> {
        let mut state = self.state.locked();
        let i = self.find(&state, id, "question")?;
        let Kind::Question { questions } = &state.open[i].kind else {
            return Err(ApiError::not_found(format!("no question request {id}")));
        };
        let mut how = Map::new();
        how.insert("by".into(), json!(BY_CLIENT));
        let answer = match (body.declined, body.answers) {
            (true, Some(_)) => {
                return Err(ApiError::bad_request(
                    "give either \"answers\" or \"declined\": true, not both",
                ));
            }
            (true, None) => {
                how.insert("outcome".into(), json!("declined"));
                if let Some(note) = &body.note {
                    how.insert("reason".into(), json!(note));
                }
                UserAnswer::Declined { reason: body.note }
            }
            (false, None) => {
                return Err(ApiError::bad_request(
                    "the body needs \"answers\" (question id → answer) or \"declined\": true",
                ));
            }
            (false, Some(answers)) => {
                let answers = parse_answers(questions, &answers)?;
                how.insert("outcome".into(), json!("answered"));
                how.insert("answers".into(), json!(answers));
                UserAnswer::Answered(answers)
            }
        };
        self.resolve(&mut state, i, Reply::Question(answer), how);
        Ok(resolved_view(&state, id))
    }
}

fn resolved_view(state: &State, id: &str) -> Arc<Value> {
    state
        .resolved
        .get(id)
        .map_or_else(|| Arc::new(Value::Null), |(_, v)| v.clone())
}

/// 409 `already_answered` for the resolved request `id`.
pub(crate) fn already_answered(id: &str, how: &Value) -> ApiError {
    let by = how["by"].as_str().unwrap_or("someone");
    let what = match by {
        BY_CLIENT => "it was answered".to_owned(),
        BY_CANCEL => "its turn was cancelled".to_owned(),
        BY_CLOSE => "its session was closed".to_owned(),
        other => format!("it was resolved by {other}"),
    };
    ApiError::new(
        axum::http::StatusCode::CONFLICT,
        "already_answered",
        format!("request {id} is resolved: {what}; no other answer is taken"),
    )
}

/// The `answers` object checked against `questions`: keys are question ids; a question with
/// options takes one of its labels (an array of them when multi-select), one without takes
/// free text.
fn parse_answers(
    questions: &[Question],
    answers: &Map<String, Value>,
) -> Result<BTreeMap<String, QuestionAnswer>, ApiError> {
    let bad = ApiError::bad_request;
    let mut out = BTreeMap::new();
    for (id, value) in answers {
        let Some(q) = questions.iter().find(|q| &q.id == id) else {
            let ids: Vec<&str> = questions.iter().map(|q| q.id.as_str()).collect();
            return Err(bad(format!(
                "no question has the id {id:?} (the ids are: {})",
                ids.join(", ")
            )));
        };
        let offered =
            |label: &str| q.options.is_empty() || q.options.iter().any(|o| o.label == label);
        let labels: Vec<&str> = q.options.iter().map(|o| o.label.as_str()).collect();
        let not_offered = |label: &str| {
            bad(format!(
                "{label:?} is not an option of question {id:?} (its options: {})",
                labels.join(", ")
            ))
        };
        let answer = match value {
            Value::String(s) if q.multi_select => {
                return Err(bad(format!(
                    "question {id:?} is multi-select: answer with an array of labels, not {s:?}"
                )));
            }
            Value::String(s) if !offered(s) => return Err(not_offered(s)),
            Value::String(s) => QuestionAnswer::One(s.clone()),
            Value::Array(items) if q.multi_select => {
                let mut picked = Vec::with_capacity(items.len());
                for item in items {
                    let Some(label) = item.as_str() else {
                        return Err(bad(format!(
                            "the answer to {id:?} must be an array of label strings"
                        )));
                    };
                    if !offered(label) {
                        return Err(not_offered(label));
                    }
                    picked.push(label.to_owned());
                }
                QuestionAnswer::Many(picked)
            }
            Value::Array(_) => {
                return Err(bad(format!(
                    "question {id:?} takes one answer (a string), not an array"
                )));
            }
            _ => return Err(bad(format!("the answer to {id:?} must be a string"))),
        };
        out.insert(id.clone(), answer);
    }
    Ok(out)
}

/// A new request id: 16 random bytes as 32 hex digits (never reused, even across sessions).
fn new_request_id() -> String {
    use std::fmt::Write;
    let bytes: [u8; 16] = rand::random();
    bytes.iter().fold(String::with_capacity(32), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Resolves its request as cancelled when the waiting future is dropped unanswered (the
/// pipeline drops an approval it stops waiting for when the turn is cancelled).
struct Waiting<'a> {
    requests: &'a Requests,
    id: String,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.requests.abandon(&self.id);
    }
}

/// Open a request and wait for its reply (or for it to be resolved as nobody's).
async fn ask(
    requests: &Requests,
    call: &ToolCallBlock,
    kind: Kind,
    fields: Map<String, Value>,
) -> Reply {
    let (id, rx) = requests.open(call, kind, fields);
    let _waiting = Waiting { requests, id };
    rx.await
        .unwrap_or_else(|_| Reply::Gone("the server stopped asking".to_owned()))
}

/// The approver of a served session: asks its clients.
pub(crate) struct ServeApprover {
    requests: Arc<Requests>,
    /// What "allow always" allowed ([`allow_key`]).
    allowed: Mutex<HashSet<String>>,
}

impl ServeApprover {
    pub(crate) fn new(requests: Arc<Requests>) -> Self {
        ServeApprover {
            requests,
            allowed: Mutex::new(HashSet::new()),
        }
    }
}

impl Approver for ServeApprover {
    fn decide<'a>(
        &'a self,
        call: &'a ToolCallBlock,
        reason: &'a str,
    ) -> BoxFuture<'a, ApprovalOutcome> {
        let plan = call.name == "exit_plan_mode";
        let parsed = serde_json::from_str::<Value>(&call.arguments).ok();
        // A call asking to leave the sandbox is allowed once at most.
        let escalates = parsed
            .as_ref()
            .and_then(|a| a.as_object().map(escalation::requested))
            .unwrap_or(false);
        if !plan && self.allowed.locked().contains(&allow_key(call)) {
            return futures::future::ready(ApprovalOutcome::Approved).boxed();
        }
        async move {
            let mut options = vec![Decision::Allow];
            if !plan && !escalates {
                options.push(Decision::AllowAlways);
            }
            options.push(Decision::Deny);
            let mut fields = Map::new();
            fields.insert("tool".into(), json!(call.name));
            fields.insert(
                "arguments".into(),
                parsed.clone().unwrap_or_else(|| json!(call.arguments)),
            );
            fields.insert("reason".into(), json!(reason));
            fields.insert(
                "options".into(),
                json!(options.iter().map(|d| d.as_str()).collect::<Vec<_>>()),
            );
            fields.insert("escalation".into(), json!(escalates));
            if plan {
                let text = parsed.as_ref().and_then(|a| a.get("plan")).cloned();
                fields.insert("plan".into(), text.unwrap_or(Value::Null));
            }
            let kind = Kind::Approval { options };
            match ask(&self.requests, call, kind, fields).await {
                Reply::Approval(Decision::Allow, _) => ApprovalOutcome::Approved,
                Reply::Approval(Decision::AllowAlways, _) => {
                    self.allowed.locked().insert(allow_key(call));
                    ApprovalOutcome::Approved
                }
                Reply::Approval(Decision::Deny, note) => ApprovalOutcome::Denied {
                    reason: Some(match note {
                        Some(note) => format!("the user denied this call: {note}"),
                        None => "the user denied this call".to_owned(),
                    }),
                },
                Reply::Gone(why) => ApprovalOutcome::Denied { reason: Some(why) },
                Reply::Question(_) => ApprovalOutcome::Denied {
                    reason: Some("the answer was not an approval".to_owned()),
                },
            }
        }
        .boxed()
    }
}

/// The asker of a served session: puts `ask_user_question` to its clients.
pub(crate) struct ServeAsker {
    requests: Arc<Requests>,
}

impl ServeAsker {
    pub(crate) fn new(requests: Arc<Requests>) -> Self {
        ServeAsker { requests }
    }
}

impl Asker for ServeAsker {
    fn ask<'a>(
        &'a self,
        call: &'a ToolCallBlock,
        questions: &'a [Question],
    ) -> BoxFuture<'a, UserAnswer> {
        async move {
            let mut fields = Map::new();
            fields.insert("questions".into(), json!(questions));
            let kind = Kind::Question {
                questions: questions.to_vec(),
            };
            match ask(&self.requests, call, kind, fields).await {
                Reply::Question(answer) => answer,
                Reply::Gone(reason) => UserAnswer::Unanswered { reason },
                Reply::Approval(..) => UserAnswer::Unanswered {
                    reason: "the answer was not one to these questions".to_owned(),
                },
            }
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests;
