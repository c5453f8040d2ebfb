//! `ask_user_question` (dsh's `dsh-tool-ask-user` schema): puts questions to the user through
//! the caller ([`crate::ToolCaller::ask_user`]) and answers the model one line per question.
//! Nobody to ask (headless) is an answer, not a failure: the model is told to go on with its
//! best judgement and say what it assumed.

use super::parse;
use crate::caller::UserAnswer;
use crate::error::ToolError;
use crate::tool::{ExecMode, Tool, ToolContext, ToolEffect, ToolOutput};
use async_trait::async_trait;
use keel_protocol::{Question, QuestionAnswer, ToolSchema};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::HashSet;

/// The `ask_user_question` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct AskUserTool;

#[derive(Deserialize)]
struct AskArgs {
    questions: Vec<Question>,
}

/// Check what the schema cannot: at least one question, ids and labels neither empty nor
/// repeated, every question has text.
pub fn check_questions(questions: &[Question]) -> Result<(), ToolError> {
    if questions.is_empty() {
        return Err(ToolError::InvalidArgs(
            "'questions' is empty: send at least one question".into(),
        ));
    }
    let mut ids = HashSet::new();
    for (i, q) in questions.iter().enumerate() {
        if q.id.trim().is_empty() {
            return Err(ToolError::InvalidArgs(format!(
                "questions[{i}] has an empty 'id': give each question a short unique id"
            )));
        }
        if !ids.insert(q.id.as_str()) {
            return Err(ToolError::InvalidArgs(format!(
                "two questions have the id '{}': ids must differ",
                q.id
            )));
        }
        if q.question.trim().is_empty() {
            return Err(ToolError::InvalidArgs(format!(
                "question '{}' has no text: 'question' must say what you ask",
                q.id
            )));
        }
        let mut labels = HashSet::new();
        for o in &q.options {
            if o.label.trim().is_empty() {
                return Err(ToolError::InvalidArgs(format!(
                    "question '{}' has an option with an empty 'label'",
                    q.id
                )));
            }
            if !labels.insert(o.label.as_str()) {
                return Err(ToolError::InvalidArgs(format!(
                    "question '{}' has two options labelled '{}'",
                    q.id, o.label
                )));
            }
        }
    }
    Ok(())
}

/// What the model reads for `answer` to `questions` (see docs/tools.md).
pub fn answer_text(questions: &[Question], answer: &UserAnswer) -> String {
    match answer {
        UserAnswer::Answered(answers) => {
            let mut out = String::from("The user answered:");
            for q in questions {
                let value = match answers.get(&q.id) {
                    Some(QuestionAnswer::One(text)) if !text.trim().is_empty() => text.clone(),
                    Some(QuestionAnswer::Many(labels)) if !labels.is_empty() => labels.join(", "),
                    Some(QuestionAnswer::Many(_)) => "(none picked)".to_owned(),
                    _ => "(no answer)".to_owned(),
                };
                out.push_str(&format!("\n{}: {value}", q.id));
            }
            out
        }
        UserAnswer::Declined { reason } => format!(
            "The user declined to answer{}. Go on with your best judgement and state the \
             assumptions you make.",
            reason
                .as_deref()
                .map(|r| format!(" (they said: {r})"))
                .unwrap_or_default()
        ),
        UserAnswer::Unanswered { reason } => format!(
            "No answer: {reason}. Go on with your best judgement, state the assumptions you \
             make, and do not ask again in this turn."
        ),
    }
}

#[async_trait]
impl Tool for AskUserTool {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "ask_user_question".into(),
            description: "Ask the user questions you cannot settle yourself and wait for the \
                          answers. Give options to pick from, or none for a free-text answer."
                .into(),
            parameters: json!({"type":"object","properties":{
                "questions":{"type":"array","items":{"type":"object","properties":{
                    "id":{"type":"string"},
                    "question":{"type":"string"},
                    "header":{"type":"string"},
                    "options":{"type":"array","items":{"type":"object","properties":{
                        "label":{"type":"string"},
                        "description":{"type":"string"}
                    },"required":["label"]}},
                    "multi_select":{"type":"boolean"}
                },"required":["id","question"]}}
            },"required":["questions"]}),
        }
    }
    fn mode(&self) -> ExecMode {
        ExecMode::Exclusive
    }
    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }
    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let a: AskArgs = parse(args)?;
        check_questions(&a.questions)?;
        let answer = ctx.caller.ask_user(ctx.call, &a.questions).await;
        let text = answer_text(&a.questions, &answer);
        let value = match &answer {
            UserAnswer::Answered(answers) => json!({"answered": true, "answers": answers}),
            UserAnswer::Declined { .. } => json!({"answered": false, "declined": true}),
            UserAnswer::Unanswered { .. } => json!({"answered": false}),
        };
        Ok(ToolOutput::text(text).with_value(value))
    }
}
