//! Elicitation: a server asking the person for input while one of its tools runs, in both
//! forms — a 2025-11-25 `elicitation/create` request (form mode with a restricted JSON
//! schema, or URL mode), and a 2026-07-28 `tools/call` result of `resultType:
//! "input_required"` whose input requests are elicitations (answered, then the call is sent
//! again with the responses and the echoed `requestState`).
//!
//! keel asks through the seam every front end already implements for `ask_user_question`:
//! [`keel_tools::ToolCaller::ask_user`] of the call that is running (the terminal UI's form,
//! an ACP client's form elicitation or permission request, `--inbox-stdin`'s answers;
//! headless: nobody, so the request is declined, as before). A form becomes one question per
//! field: a choice for an enum (several for a multi-select array, "yes"/"no" for a boolean),
//! free text for a string or number, checked against the field's constraints before the
//! answer goes back. A schema keel cannot ask (a nested object, an array of free values) is
//! declined, and the model reads why, naming the server and the field. A request that comes
//! while none of the server's calls runs is declined (nobody is there to attach it to).

use keel_protocol::{Question, QuestionAnswer, QuestionOption};
use keel_tools::{ToolContext, UserAnswer};
use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::{mpsc, oneshot};

mod error;
pub use error::{AnswerError, FormError};

/// Fields of one form keel asks at most.
const MAX_FIELDS: usize = 20;

/// What reaches a running call.
pub enum Pending {
    /// A request waiting for the person.
    Ask {
        /// The request.
        params: Box<ElicitRequestParams>,
        /// Where the answer goes.
        reply: oneshot::Sender<ElicitResult>,
    },
    /// A request keel declined on its own; the model reads why.
    Declined(String),
}

/// Where a server's elicitation requests go: to the calls of that server running now.
#[derive(Clone)]
pub struct Route {
    tx: mpsc::UnboundedSender<Pending>,
    rx: Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<Pending>>>,
    calls: Arc<AtomicUsize>,
}

impl Default for Route {
    fn default() -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        Route {
            tx,
            rx: Arc::new(tokio::sync::Mutex::new(rx)),
            calls: Arc::new(AtomicUsize::new(0)),
        }
    }
}

impl std::fmt::Debug for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Route")
            .field("calls", &self.calls.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

fn declined() -> ElicitResult {
    ElicitResult::new(ElicitationAction::Decline)
}

impl Route {
    /// The answer to `params` (from the server, on the MCP runtime): asked through the
    /// running call, or declined when no call runs.
    pub async fn request(&self, params: ElicitRequestParams) -> ElicitResult {
        if self.calls.load(Ordering::Acquire) == 0 {
            return declined();
        }
        let (reply, answer) = oneshot::channel();
        let params = Box::new(params);
        if self.tx.send(Pending::Ask { params, reply }).is_err() {
            return declined();
        }
        // A call that ends (or is cancelled) first drops the sender: the request is cancelled.
        answer
            .await
            .unwrap_or_else(|_| ElicitResult::new(ElicitationAction::Cancel))
    }

    /// A call starts: requests are put to it until the guard drops. Taken before the call is
    /// sent, so a request that comes at once finds it.
    pub fn running(&self) -> Running {
        self.calls.fetch_add(1, Ordering::AcqRel);
        Running(self.calls.clone())
    }

    /// A raw `elicitation/create` that rmcp could not read as a request (a schema outside the
    /// spec's restricted subset, such as a nested object): declined, and the running call's
    /// result says why, naming `server` and the field.
    pub fn undecodable(&self, server: &str, params: Option<&Value>) -> Value {
        let schema = params.and_then(|p| p.get("requestedSchema"));
        let why = match schema.map(Form::parse) {
            Some(Err(why)) => why.to_string(),
            _ => "the request could not be read".to_owned(),
        };
        if self.calls.load(Ordering::Acquire) > 0 {
            let _ = self.tx.send(Pending::Declined(format!(
                "[keel declined MCP server '{server}''s request for input: {why}]"
            )));
        }
        json!({"action": "decline"})
    }
}

/// Counts a running call while alive ([`Route::running`]).
#[derive(Debug)]
pub struct Running(Arc<AtomicUsize>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Await `call` (a call to the server `server` of `route`, begun under [`Route::running`]),
/// answering the server's elicitation requests meanwhile through `ctx`'s caller. Returns the call's output and what
/// the model should read about requests keel declined on its own.
pub async fn serve_while<F: std::future::Future>(
    call: F,
    route: &Route,
    server: &str,
    ctx: &ToolContext<'_>,
) -> (F::Output, Vec<String>) {
    let mut notes = Vec::new();
    tokio::pin!(call);
    loop {
        let next = async { route.rx.lock().await.recv().await };
        // Requests first: a note sent just before the server answered the call is kept.
        tokio::select! {
            biased;
            pending = next => match pending {
                Some(Pending::Ask { params, reply }) => {
                    let (result, note) = answer(*params, server, ctx).await;
                    notes.extend(note);
                    let _ = reply.send(result);
                }
                Some(Pending::Declined(note)) => notes.push(note),
                None => {}
            },
            out = &mut call => return (out, notes),
        }
    }
}

/// Ask the person `params` through `ctx`; the result and, when keel declined on its own, why.
async fn answer(
    params: ElicitRequestParams,
    server: &str,
    ctx: &ToolContext<'_>,
) -> (ElicitResult, Option<String>) {
    match params {
        ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } => {
            let schema = serde_json::to_value(&requested_schema).unwrap_or(Value::Null);
            let form = match Form::parse(&schema) {
                Ok(f) => f,
                Err(why) => {
                    return (
                        declined(),
                        Some(format!(
                            "[keel declined MCP server '{server}''s request for input: {why}]"
                        )),
                    );
                }
            };
            let questions = form.questions(server, &message);
            match ctx.caller.ask_user(ctx.call, &questions).await {
                UserAnswer::Answered(answers) => match form.content(&answers) {
                    Ok(content) => (
                        ElicitResult::new(ElicitationAction::Accept).with_content(content),
                        None,
                    ),
                    Err(why) => (
                        declined(),
                        Some(format!(
                            "[keel declined MCP server '{server}''s request for input: {why}]"
                        )),
                    ),
                },
                UserAnswer::Declined { .. } => (declined(), None),
                UserAnswer::Unanswered { .. } => (declined(), None),
            }
        }
        ElicitRequestParams::UrlElicitationParams { message, url, .. } => {
            let question = Question {
                id: "open".into(),
                question: format!(
                    "[MCP server {server}] {message}\nIt asks you to open {url} (in your browser)."
                ),
                header: Some(format!("{server}: open a link")),
                options: vec![
                    QuestionOption {
                        label: "Opened it".into(),
                        description: Some(format!("I will complete it at {url}")),
                    },
                    QuestionOption {
                        label: "Decline".into(),
                        description: None,
                    },
                ],
                multi_select: false,
            };
            match ctx.caller.ask_user(ctx.call, &[question]).await {
                UserAnswer::Answered(a) if matches!(a.get("open"), Some(QuestionAnswer::One(l)) if l == "Opened it") => {
                    (ElicitResult::new(ElicitationAction::Accept), None)
                }
                _ => (declined(), None),
            }
        }
        _ => (
            declined(),
            Some(format!(
                "[keel declined MCP server '{server}''s request for input: a mode keel does not know]"
            )),
        ),
    }
}

/// Most `input_required` rounds of one call (rmcp's default).
const MAX_ROUNDS: usize = rmcp::model::DEFAULT_MRTR_MAX_ROUNDS;

/// `tools/call` through `peer`, driving 2026-07-28 `input_required` rounds: elicitations are
/// asked through `route` (as a server's `elicitation/create` is), `roots/list` is answered with
/// no roots, sampling is refused; then the call is sent again with the responses and the
/// echoed `requestState`.
pub async fn call_tool(
    peer: &rmcp::Peer<rmcp::RoleClient>,
    mut params: rmcp::model::CallToolRequestParams,
    route: &Route,
) -> Result<rmcp::model::CallToolResult, rmcp::ServiceError> {
    use rmcp::model::{CallToolResponse, ErrorData, InputRequest};
    for _ in 0..MAX_ROUNDS {
        match peer.call_tool_once(params.clone()).await? {
            CallToolResponse::Complete(result) => return Ok(result),
            CallToolResponse::InputRequired(asked) => {
                let mut responses = rmcp::model::InputResponses::new();
                for (key, request) in asked.input_requests.unwrap_or_default() {
                    let response = match request {
                        InputRequest::Elicitation(r) => {
                            serde_json::to_value(route.request(r.params).await)
                                .unwrap_or(Value::Null)
                        }
                        InputRequest::ListRoots(_) => json!({"roots": []}),
                        _ => {
                            return Err(rmcp::ServiceError::McpError(ErrorData::invalid_request(
                                format!(
                                    "the server asked for input keel does not give (sampling) under key {key:?}"
                                ),
                                None,
                            )));
                        }
                    };
                    responses.insert(key, response);
                }
                params.input_responses = Some(responses);
                params.request_state = asked.request_state;
            }
            _ => return Err(rmcp::ServiceError::UnexpectedResponse),
        }
    }
    Err(rmcp::ServiceError::InputRequiredRoundsExceeded {
        max_rounds: MAX_ROUNDS,
    })
}

/// One field's kind.
#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Text {
        min: Option<u64>,
        max: Option<u64>,
        format: Option<String>,
    },
    Number {
        integer: bool,
        min: Option<f64>,
        max: Option<f64>,
    },
    Bool,
    /// (label shown, value sent)
    Choice(Vec<(String, String)>),
    Multi {
        values: Vec<(String, String)>,
        min: Option<u64>,
        max: Option<u64>,
    },
}

/// One field of a form.
#[derive(Debug, Clone, PartialEq)]
struct Field {
    name: String,
    title: Option<String>,
    description: Option<String>,
    required: bool,
    default: Option<Value>,
    kind: Kind,
}

/// A form keel can ask.
#[derive(Debug, Clone, PartialEq)]
pub struct Form {
    fields: Vec<Field>,
}

const YES: &str = "yes";
const NO: &str = "no";

fn choices(
    schema: &Map<String, Value>,
    field: &str,
) -> Result<Option<Vec<(String, String)>>, FormError> {
    if let Some(values) = schema.get("enum") {
        let Some(values) = values.as_array() else {
            return Err(FormError::NotAnArray {
                field: field.to_owned(),
                key: "enum",
            });
        };
        let names = schema.get("enumNames").and_then(Value::as_array);
        let mut out = Vec::new();
        for (i, v) in values.iter().enumerate() {
            let Some(v) = v.as_str() else {
                return Err(FormError::EnumNotString {
                    field: field.to_owned(),
                    value: v.clone(),
                });
            };
            let label = names
                .and_then(|n| n.get(i))
                .and_then(Value::as_str)
                .unwrap_or(v);
            out.push((label.to_owned(), v.to_owned()));
        }
        return Ok(Some(out));
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(values) = schema.get(key) {
            let Some(values) = values.as_array() else {
                return Err(FormError::NotAnArray {
                    field: field.to_owned(),
                    key,
                });
            };
            let mut out = Vec::new();
            for v in values {
                let Some(c) = v.get("const").and_then(Value::as_str) else {
                    return Err(FormError::NoConst {
                        field: field.to_owned(),
                        key,
                    });
                };
                let label = v.get("title").and_then(Value::as_str).unwrap_or(c);
                out.push((label.to_owned(), c.to_owned()));
            }
            return Ok(Some(out));
        }
    }
    Ok(None)
}

impl Form {
    /// The form of `schema` (an object schema of primitive fields), or why keel cannot ask it,
    /// naming the field.
    pub fn parse(schema: &Value) -> Result<Form, FormError> {
        let Some(obj) = schema.as_object() else {
            return Err(FormError::NotAnObject);
        };
        if let Some(t) = obj.get("type")
            && t != "object"
        {
            return Err(FormError::NotObjectType(t.clone()));
        }
        let props = match obj.get("properties") {
            None => Map::new(),
            Some(Value::Object(p)) => p.clone(),
            Some(other) => return Err(FormError::Properties(other.clone())),
        };
        if props.len() > MAX_FIELDS {
            return Err(FormError::TooMany {
                fields: props.len(),
            });
        }
        let required: Vec<&str> = obj
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut fields = Vec::new();
        for (name, prop) in &props {
            let Some(p) = prop.as_object() else {
                return Err(FormError::NotASchema(name.clone()));
            };
            let ty = p.get("type").and_then(Value::as_str);
            let uint = |k: &str| p.get(k).and_then(Value::as_u64);
            let num = |k: &str| p.get(k).and_then(Value::as_f64);
            let kind = match ty {
                Some("string") => match choices(p, name)? {
                    Some(values) => Kind::Choice(values),
                    None => Kind::Text {
                        min: uint("minLength"),
                        max: uint("maxLength"),
                        format: p.get("format").and_then(Value::as_str).map(str::to_owned),
                    },
                },
                Some("number") => Kind::Number {
                    integer: false,
                    min: num("minimum"),
                    max: num("maximum"),
                },
                Some("integer") => Kind::Number {
                    integer: true,
                    min: num("minimum"),
                    max: num("maximum"),
                },
                Some("boolean") => Kind::Bool,
                Some("array") => {
                    let items = p.get("items").and_then(Value::as_object);
                    match items.map(|i| choices(i, name)).transpose()?.flatten() {
                        Some(values) => Kind::Multi {
                            values,
                            min: uint("minItems"),
                            max: uint("maxItems"),
                        },
                        None => return Err(FormError::FreeArray(name.clone())),
                    }
                }
                Some(other) => {
                    return Err(FormError::Unaskable {
                        field: name.clone(),
                        ty: other.to_owned(),
                    });
                }
                None => return Err(FormError::NoType(name.clone())),
            };
            fields.push(Field {
                name: name.clone(),
                title: p.get("title").and_then(Value::as_str).map(str::to_owned),
                description: p
                    .get("description")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                required: required.contains(&name.as_str()),
                default: p.get("default").cloned(),
                kind,
            });
        }
        Ok(Form { fields })
    }

    /// The questions to put: the server's message with the first one.
    pub fn questions(&self, server: &str, message: &str) -> Vec<Question> {
        let intro = format!("[MCP server {server}] {message}");
        if self.fields.is_empty() {
            return vec![Question {
                id: "confirm".into(),
                question: intro,
                header: Some(server.to_owned()),
                options: vec![
                    QuestionOption {
                        label: YES.into(),
                        description: None,
                    },
                    QuestionOption {
                        label: NO.into(),
                        description: None,
                    },
                ],
                multi_select: false,
            }];
        }
        self.fields
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let mut text = f
                    .description
                    .clone()
                    .or_else(|| f.title.clone())
                    .unwrap_or_else(|| f.name.clone());
                let mut notes = Vec::new();
                if f.required {
                    notes.push("required".to_owned());
                }
                match &f.kind {
                    Kind::Text { min, max, format } => {
                        if let Some(fm) = format {
                            notes.push(fm.clone());
                        }
                        if let Some(m) = min {
                            notes.push(format!("at least {m} characters"));
                        }
                        if let Some(m) = max {
                            notes.push(format!("at most {m} characters"));
                        }
                    }
                    Kind::Number { integer, min, max } => {
                        notes.push(
                            if *integer {
                                "a whole number"
                            } else {
                                "a number"
                            }
                            .into(),
                        );
                        if let Some(m) = min {
                            notes.push(format!("≥ {m}"));
                        }
                        if let Some(m) = max {
                            notes.push(format!("≤ {m}"));
                        }
                    }
                    _ => {}
                }
                if let Some(d) = &f.default {
                    notes.push(format!("default {d}"));
                }
                if !notes.is_empty() {
                    text.push_str(&format!(" ({})", notes.join(", ")));
                }
                if i == 0 {
                    text = format!("{intro}\n{text}");
                }
                let labels = |values: &[(String, String)]| {
                    values
                        .iter()
                        .map(|(label, _)| QuestionOption {
                            label: label.clone(),
                            description: None,
                        })
                        .collect()
                };
                let (options, multi_select) = match &f.kind {
                    Kind::Bool => (
                        vec![
                            QuestionOption {
                                label: YES.into(),
                                description: None,
                            },
                            QuestionOption {
                                label: NO.into(),
                                description: None,
                            },
                        ],
                        false,
                    ),
                    Kind::Choice(values) => (labels(values), false),
                    Kind::Multi { values, .. } => (labels(values), true),
                    _ => (Vec::new(), false),
                };
                Question {
                    id: f.name.clone(),
                    question: text,
                    header: Some(f.title.clone().unwrap_or_else(|| f.name.clone())),
                    options,
                    multi_select,
                }
            })
            .collect()
    }

    /// The answers as the form's content, checked against each field; or why not, naming the
    /// field.
    pub fn content(
        &self,
        answers: &BTreeMap<String, QuestionAnswer>,
    ) -> Result<Value, AnswerError> {
        let mut out = Map::new();
        for f in &self.fields {
            let field = || f.name.clone();
            let given = match answers.get(&f.name) {
                Some(QuestionAnswer::One(s)) if s.trim().is_empty() => None,
                Some(QuestionAnswer::Many(v)) if v.is_empty() && !f.required => None,
                other => other,
            };
            let Some(given) = given else {
                if let Some(d) = &f.default {
                    out.insert(f.name.clone(), d.clone());
                } else if f.required {
                    return Err(AnswerError::Required(field()));
                }
                continue;
            };
            let value = match (&f.kind, given) {
                (Kind::Text { min, max, format }, QuestionAnswer::One(s)) => {
                    let n = s.chars().count() as u64;
                    if min.is_some_and(|m| n < m) || max.is_some_and(|m| n > m) {
                        return Err(AnswerError::Length { field: field(), n });
                    }
                    if format.as_deref() == Some("email") && !s.contains('@') {
                        return Err(AnswerError::NotEmail(field()));
                    }
                    json!(s)
                }
                (Kind::Number { integer, min, max }, QuestionAnswer::One(s)) => {
                    let t = s.trim();
                    let v: Value = if *integer {
                        t.parse::<i64>()
                            .map(Value::from)
                            .map_err(|_| AnswerError::NotWhole {
                                field: field(),
                                given: t.to_owned(),
                            })?
                    } else {
                        t.parse::<f64>()
                            .ok()
                            .filter(|x| x.is_finite())
                            .map(Value::from)
                            .ok_or_else(|| AnswerError::NotNumber {
                                field: field(),
                                given: t.to_owned(),
                            })?
                    };
                    let x = v.as_f64().unwrap_or_default();
                    if min.is_some_and(|m| x < m) || max.is_some_and(|m| x > m) {
                        return Err(AnswerError::OutOfRange {
                            field: field(),
                            given: t.to_owned(),
                        });
                    }
                    v
                }
                (Kind::Bool, QuestionAnswer::One(s)) => {
                    match s.trim().to_ascii_lowercase().as_str() {
                        YES | "true" | "y" => json!(true),
                        NO | "false" | "n" => json!(false),
                        _ => return Err(AnswerError::NotYesOrNo(field())),
                    }
                }
                (Kind::Choice(values), QuestionAnswer::One(s)) => {
                    match values
                        .iter()
                        .find(|(label, value)| label == s || value == s)
                    {
                        Some((_, value)) => json!(value),
                        None => {
                            return Err(AnswerError::NotAChoice {
                                field: field(),
                                given: s.clone(),
                            });
                        }
                    }
                }
                (Kind::Multi { values, min, max }, answer) => {
                    let picked: Vec<&String> = match answer {
                        QuestionAnswer::Many(v) => v.iter().collect(),
                        QuestionAnswer::One(s) => vec![s],
                    };
                    let mut sent = Vec::new();
                    for p in picked {
                        match values
                            .iter()
                            .find(|(label, value)| label == p || value == p)
                        {
                            Some((_, value)) => sent.push(json!(value)),
                            None => {
                                return Err(AnswerError::NotAChoice {
                                    field: field(),
                                    given: p.clone(),
                                });
                            }
                        }
                    }
                    let n = sent.len() as u64;
                    if min.is_some_and(|m| n < m) || max.is_some_and(|m| n > m) {
                        return Err(AnswerError::ChoiceCount { field: field(), n });
                    }
                    Value::Array(sent)
                }
                (_, QuestionAnswer::Many(_)) => {
                    return Err(AnswerError::NotSeveral(field()));
                }
            };
            out.insert(f.name.clone(), value);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(s: &str) -> QuestionAnswer {
        QuestionAnswer::One(s.into())
    }

    #[test]
    fn a_form_becomes_questions_and_answers_become_its_content() {
        let schema = json!({"type": "object", "required": ["name", "age"], "properties": {
            "name": {"type": "string", "title": "Name", "minLength": 1},
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
            "subscribe": {"type": "boolean", "default": false},
            "color": {"type": "string", "oneOf": [{"const": "r", "title": "Red"}, {"const": "g", "title": "Green"}]},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}}
        }});
        let form = Form::parse(&schema).unwrap();
        let qs = form.questions("srv", "Who are you?");
        assert_eq!(qs.len(), 5);
        assert!(qs[0].question.starts_with("[MCP server srv] Who are you?"));
        let color = qs.iter().find(|q| q.id == "color").unwrap();
        assert_eq!(
            color
                .options
                .iter()
                .map(|o| o.label.as_str())
                .collect::<Vec<_>>(),
            ["Red", "Green"]
        );
        assert!(qs.iter().find(|q| q.id == "tags").unwrap().multi_select);
        let answers = BTreeMap::from([
            ("name".to_owned(), one("Ada")),
            ("age".to_owned(), one("36")),
            ("color".to_owned(), one("Green")),
            ("tags".to_owned(), QuestionAnswer::Many(vec!["b".into()])),
        ]);
        assert_eq!(
            form.content(&answers).unwrap(),
            json!({"name": "Ada", "age": 36, "subscribe": false, "color": "g", "tags": ["b"]})
        );
        let bad = BTreeMap::from([
            ("name".to_owned(), one("Ada")),
            ("age".to_owned(), one("old")),
        ]);
        let why = form.content(&bad).unwrap_err().to_string();
        assert!(
            why.contains("'age'") && why.contains("whole number"),
            "{why}"
        );
        let missing = BTreeMap::from([("name".to_owned(), one("Ada"))]);
        assert!(
            form.content(&missing)
                .unwrap_err()
                .to_string()
                .contains("'age' is required")
        );
    }

    #[test]
    fn schemas_keel_cannot_ask_are_refused_naming_the_field() {
        let nested = json!({"type": "object", "properties": {"address": {"type": "object"}}});
        let why = Form::parse(&nested).unwrap_err().to_string();
        assert!(why.contains("'address'") && why.contains("object"), "{why}");
        let free = json!({"type": "object", "properties": {"xs": {"type": "array", "items": {"type": "string"}}}});
        assert!(Form::parse(&free).unwrap_err().to_string().contains("'xs'"));
        assert!(Form::parse(&json!({"type": "array"})).is_err());
    }
}
