//! Approvals and questions the agent asks through the UI ([`UiApprover`]): each goes on the
//! UI's channel as a [`Msg`] and waits for the person's answer; "for the session" answers are
//! remembered here.

use super::{Ask, Msg, QuestionAsk};
use futures::FutureExt;
use futures::future::BoxFuture;
use keel_agent::{Approver, Asker, allow_key};
use keel_protocol::sync::Locked;
use keel_protocol::{Question, ToolCallBlock};
use keel_tools::{ApprovalOutcome, UserAnswer};
use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::mpsc::Sender;

/// Approvals asked in the UI; "for the session" answers are remembered here.
pub(super) struct UiApprover {
    pub(super) tx: Sender<Msg>,
    pub(super) allowed: Mutex<HashSet<String>>,
}

impl Approver for UiApprover {
    fn decide<'a>(
        &'a self,
        call: &'a ToolCallBlock,
        reason: &'a str,
    ) -> BoxFuture<'a, ApprovalOutcome> {
        let allowed = self.allowed.locked().contains(&allow_key(call));
        if allowed && call.name != "exit_plan_mode" {
            return futures::future::ready(ApprovalOutcome::Approved).boxed();
        }
        let (reply, answer) = tokio::sync::oneshot::channel();
        let sent = self.tx.send(Msg::Ask(Ask {
            call: call.clone(),
            reason: reason.to_owned(),
            reply,
        }));
        async move {
            if sent.is_err() {
                return ApprovalOutcome::Denied {
                    reason: Some("the terminal UI has closed".into()),
                };
            }
            answer.await.unwrap_or(ApprovalOutcome::Denied {
                reason: Some("the terminal UI has closed".into()),
            })
        }
        .boxed()
    }
}

impl Asker for UiApprover {
    fn ask<'a>(
        &'a self,
        _call: &'a ToolCallBlock,
        questions: &'a [Question],
    ) -> BoxFuture<'a, UserAnswer> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let sent = self.tx.send(Msg::Question(QuestionAsk {
            questions: questions.to_vec(),
            reply,
            call_id: None,
        }));
        let closed = || UserAnswer::Unanswered {
            reason: "the terminal UI has closed".into(),
        };
        async move {
            if sent.is_err() {
                return closed();
            }
            answer.await.unwrap_or_else(|_| closed())
        }
        .boxed()
    }
}
