//! `ask_user_question` over ACP. A client that declared form elicitation
//! (`clientCapabilities.elicitation.form`) gets one `elicitation/create` form for all the
//! questions: a string enum for a single-select question, an array of enum strings for a
//! multi-select one, a free string for one without options. Any other client gets one
//! `session/request_permission` per question with options, one option per label plus "Skip"
//! (a multi-select question then takes the one label picked); a question without options
//! cannot be asked that way and gets no answer (the model reads why).

use crate::map;
use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    CreateElicitationRequest, ElicitationAction, ElicitationContentValue, PermissionOption,
    PermissionOptionKind, RequestPermissionOutcome, RequestPermissionRequest, SessionId,
};
use futures::FutureExt;
use futures::future::BoxFuture;
use keel_agent::Asker;
use keel_protocol::{Question, QuestionAnswer, ToolCallBlock};
use keel_tools::UserAnswer;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

/// Option id of the permission fallback: leave this question unanswered.
pub const SKIP: &str = "skip";

/// Why a free-text question gets no answer from a client without form elicitation.
pub const NO_FREE_TEXT: &str =
    "the editor cannot take free-text answers (it offers no form elicitation)";

/// Asks the ACP client.
pub struct AcpAsker {
    cx: ConnectionTo<Client>,
    session: Arc<OnceLock<SessionId>>,
    cwd: PathBuf,
    forms: bool,
}

impl AcpAsker {
    /// An asker over `cx` for the session whose id is set in `session` once known; `forms`:
    /// the client declared form elicitation.
    pub fn new(
        cx: ConnectionTo<Client>,
        session: Arc<OnceLock<SessionId>>,
        cwd: PathBuf,
        forms: bool,
    ) -> Self {
        AcpAsker {
            cx,
            session,
            cwd,
            forms,
        }
    }

    async fn by_form(
        &self,
        session: SessionId,
        call: &ToolCallBlock,
        questions: &[Question],
    ) -> UserAnswer {
        let request = match form_request(&session, call, questions) {
            Ok(r) => r,
            Err(e) => {
                return UserAnswer::Unanswered {
                    reason: format!("keel could not build the form: {e}"),
                };
            }
        };
        match self.cx.send_request(request).block_task().await {
            Ok(answer) => match answer.action {
                ElicitationAction::Accept(accepted) => {
                    let content = accepted.content.unwrap_or_default();
                    UserAnswer::Answered(form_answers(questions, &content))
                }
                ElicitationAction::Decline => UserAnswer::Declined { reason: None },
                ElicitationAction::Cancel => UserAnswer::Declined {
                    reason: Some("cancelled".into()),
                },
                _ => UserAnswer::Unanswered {
                    reason: "the editor gave an answer keel does not know".into(),
                },
            },
            Err(e) => UserAnswer::Unanswered {
                reason: format!("the editor could not be asked: {}", e.message),
            },
        }
    }

    async fn by_permission(
        &self,
        session: SessionId,
        call: &ToolCallBlock,
        questions: &[Question],
    ) -> UserAnswer {
        let mut answers = BTreeMap::new();
        let mut free = 0;
        for q in questions {
            if q.options.is_empty() {
                free += 1;
                continue;
            }
            let mut subject =
                map::permission_subject(&self.cwd, &call.id, &call.name, &call.arguments);
            subject.fields.title = Some(match &q.header {
                Some(h) => format!("{h}: {}", q.question),
                None => q.question.clone(),
            });
            let described: Vec<String> = q
                .options
                .iter()
                .filter_map(|o| Some(format!("{}: {}", o.label, o.description.as_ref()?)))
                .collect();
            subject.fields.content = Some(if described.is_empty() {
                Vec::new()
            } else {
                vec![map::text_content(described.join("\n"))]
            });
            let mut options: Vec<PermissionOption> = q
                .options
                .iter()
                .enumerate()
                .map(|(i, o)| {
                    PermissionOption::new(
                        format!("option-{i}"),
                        o.label.clone(),
                        PermissionOptionKind::AllowOnce,
                    )
                })
                .collect();
            options.push(PermissionOption::new(
                SKIP,
                "Skip",
                PermissionOptionKind::RejectOnce,
            ));
            let asked = self
                .cx
                .send_request(RequestPermissionRequest::new(
                    session.clone(),
                    subject,
                    options,
                ))
                .block_task()
                .await;
            match asked {
                Ok(answer) => match answer.outcome {
                    RequestPermissionOutcome::Selected(s) => {
                        let picked = s
                            .option_id
                            .0
                            .strip_prefix("option-")
                            .and_then(|i| i.parse::<usize>().ok())
                            .and_then(|i| q.options.get(i));
                        if let Some(o) = picked {
                            let label = o.label.clone();
                            let answer = if q.multi_select {
                                QuestionAnswer::Many(vec![label])
                            } else {
                                QuestionAnswer::One(label)
                            };
                            answers.insert(q.id.clone(), answer);
                        }
                    }
                    RequestPermissionOutcome::Cancelled => {
                        return UserAnswer::Declined {
                            reason: Some("cancelled".into()),
                        };
                    }
                    _ => {}
                },
                Err(e) => {
                    return UserAnswer::Unanswered {
                        reason: format!("the editor could not be asked: {}", e.message),
                    };
                }
            }
        }
        if free == questions.len() {
            return UserAnswer::Unanswered {
                reason: NO_FREE_TEXT.to_owned(),
            };
        }
        UserAnswer::Answered(answers)
    }
}

impl Asker for AcpAsker {
    fn ask<'a>(
        &'a self,
        call: &'a ToolCallBlock,
        questions: &'a [Question],
    ) -> BoxFuture<'a, UserAnswer> {
        async move {
            let Some(session) = self.session.get().cloned() else {
                return UserAnswer::Unanswered {
                    reason: "the ACP session is not open yet".into(),
                };
            };
            if self.forms {
                self.by_form(session, call, questions).await
            } else {
                self.by_permission(session, call, questions).await
            }
        }
        .boxed()
    }
}

/// The `elicitation/create` form of `questions`: one property per question, keyed by its id.
fn form_request(
    session: &SessionId,
    call: &ToolCallBlock,
    questions: &[Question],
) -> Result<CreateElicitationRequest, serde_json::Error> {
    let mut properties = serde_json::Map::new();
    for q in questions {
        let title = match &q.header {
            Some(h) => format!("{h}: {}", q.question),
            None => q.question.clone(),
        };
        let labels: Vec<&str> = q.options.iter().map(|o| o.label.as_str()).collect();
        let described: Vec<String> = q
            .options
            .iter()
            .filter_map(|o| Some(format!("{}: {}", o.label, o.description.as_ref()?)))
            .collect();
        let mut schema = if q.options.is_empty() {
            json!({"type": "string", "title": title})
        } else if q.multi_select {
            json!({"type": "array", "title": title, "items": {"type": "string", "enum": labels}})
        } else {
            json!({"type": "string", "title": title, "enum": labels})
        };
        if !described.is_empty() {
            schema["description"] = Value::String(described.join("\n"));
        }
        properties.insert(q.id.clone(), schema);
    }
    let message = if questions.len() == 1 {
        questions[0].question.clone()
    } else {
        format!("The agent has {} questions for you.", questions.len())
    };
    serde_json::from_value(json!({
        "mode": "form",
        "sessionId": session.0.as_ref(),
        "toolCallId": call.id,
        "message": message,
        "requestedSchema": {"type": "object", "properties": properties},
    }))
}

/// The accepted form's content as answers (values of other shapes, and ids of no question,
/// are left out).
fn form_answers(
    questions: &[Question],
    content: &BTreeMap<String, ElicitationContentValue>,
) -> BTreeMap<String, QuestionAnswer> {
    let mut out = BTreeMap::new();
    for q in questions {
        let answer = match content.get(&q.id) {
            Some(ElicitationContentValue::String(s)) if q.multi_select && !q.options.is_empty() => {
                QuestionAnswer::Many(vec![s.clone()])
            }
            Some(ElicitationContentValue::String(s)) => QuestionAnswer::One(s.clone()),
            Some(ElicitationContentValue::StringArray(v)) => QuestionAnswer::Many(v.clone()),
            _ => continue,
        };
        out.insert(q.id.clone(), answer);
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use keel_protocol::QuestionOption;

    fn q(id: &str, labels: &[&str], multi: bool) -> Question {
        Question {
            id: id.into(),
            question: format!("{id}?"),
            header: None,
            options: labels
                .iter()
                .map(|l| QuestionOption {
                    label: (*l).into(),
                    description: None,
                })
                .collect(),
            multi_select: multi,
        }
    }

    #[test]
    fn the_form_has_one_property_per_question() {
        let call = ToolCallBlock {
            id: "c1".into(),
            name: "ask_user_question".into(),
            arguments: "{}".into(),
        };
        let qs = [
            q("lang", &["Rust", "Go"], false),
            q("f", &["a", "b"], true),
            q("name", &[], false),
        ];
        let req = form_request(&SessionId::new("s"), &call, &qs).unwrap();
        let wire = serde_json::to_value(&req).unwrap();
        assert_eq!(wire["mode"], "form");
        assert_eq!(wire["sessionId"], "s");
        assert_eq!(wire["toolCallId"], "c1");
        let props = &wire["requestedSchema"]["properties"];
        assert_eq!(props["lang"]["enum"], json!(["Rust", "Go"]));
        assert_eq!(props["f"]["items"]["enum"], json!(["a", "b"]));
        assert_eq!(props["name"]["type"], "string");
    }
}
