//! The agent as the tool pipeline's host: `tool/call` and `tool/result` events, durability
//! checkpoints before tool bodies, approvals, and events emitted by tools.

use crate::agent::{Agent, ApprovalPolicy};
use crate::error::AgentError;
use crate::repeat::{RepeatNotice, Verdict};
use crate::seams::FlushPoint;
use async_trait::async_trait;
use keel_protocol::sync::Locked;
use keel_protocol::{
    ApprovalAsked, ApprovalDecided, ContentBlock, EventBody, Message, MessageSource, Question,
    QuestionAnswered, QuestionAsked, Role, Seq, StepNo, SurfaceOp, ToolCallBlock, ToolCallEvent,
    ToolResultBlock, ToolResultEvent, TurnNo,
};
use keel_tools::{
    ApprovalOutcome, CallerId, Handoff, JobControl, NO_PERSON_PRESENT, ToolCaller, ToolOutcome,
    UserAnswer,
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Hint shown to the model (and the user) when a headless run cannot ask.
pub const HEADLESS_DENIAL: &str = "keel is running without a terminal to ask for approval, so this action was refused; \
the user can allow such actions with --approval allow (or a wider --sandbox)";

/// One step's view of the agent, handed to the pipeline.
pub(crate) struct StepCaller<'a> {
    pub(crate) agent: &'a Agent,
    pub(crate) turn: TurnNo,
    pub(crate) step: StepNo,
    calls: Mutex<HashMap<String, Seq>>,
    error: Mutex<Option<AgentError>>,
    stop: Mutex<Option<RepeatNotice>>,
    handoff: Mutex<Option<Handoff>>,
}

impl<'a> StepCaller<'a> {
    /// Log `approval/asked`, get the answer, log `approval/decided`. `person_only` (a sandbox
    /// escalation): the `auto` policy does not answer, a person must.
    async fn ask(&self, call: &ToolCallBlock, reason: &str, person_only: bool) -> ApprovalOutcome {
        self.keep(
            self.agent
                .push(EventBody::ApprovalAsked(Box::new(ApprovalAsked {
                    call_id: call.id.clone(),
                    tool: call.name.clone(),
                    reason: reason.to_owned(),
                }))),
        );
        // Nobody is asked under `never`, nor without an approver: the answer is `Unanswered`,
        // which a call needing it now takes as a refusal and `exit_plan_mode` as "hand the
        // plan to the user".
        let policy = match self.agent.approval() {
            ApprovalPolicy::Allow if person_only => ApprovalPolicy::Ask,
            policy => policy,
        };
        let (outcome, by) = match (policy, &self.agent.inner.approver) {
            (ApprovalPolicy::Allow, _) => (ApprovalOutcome::Approved, "policy"),
            (ApprovalPolicy::Deny, _) => (
                ApprovalOutcome::Unanswered {
                    reason: Some(format!(
                        "approval prompts are disabled by {}; do not retry this action",
                        self.agent.approval_source()
                    )),
                },
                "policy",
            ),
            (ApprovalPolicy::Ask, Some(approver)) => (approver.decide(call, reason).await, "user"),
            (ApprovalPolicy::Ask, None) if person_only => (
                ApprovalOutcome::Unanswered {
                    reason: Some("no person can be asked in this run".to_owned()),
                },
                "headless",
            ),
            (ApprovalPolicy::Ask, None) => (
                ApprovalOutcome::Unanswered {
                    reason: Some(format!(
                        "{HEADLESS_DENIAL} (approval ask: {})",
                        self.agent.approval_source()
                    )),
                },
                "headless",
            ),
        };
        let (approved, why) = match &outcome {
            ApprovalOutcome::Approved => (true, None),
            ApprovalOutcome::Denied { reason } | ApprovalOutcome::Unanswered { reason } => {
                (false, reason.clone())
            }
        };
        self.keep(
            self.agent
                .push(EventBody::ApprovalDecided(Box::new(ApprovalDecided {
                    call_id: call.id.clone(),
                    approved,
                    by: by.to_owned(),
                    reason: why,
                }))),
        );
        outcome
    }

    pub(crate) fn new(agent: &'a Agent, turn: TurnNo, step: StepNo) -> Self {
        StepCaller {
            agent,
            turn,
            step,
            calls: Mutex::new(HashMap::new()),
            error: Mutex::new(None),
            stop: Mutex::new(None),
            handoff: Mutex::new(None),
        }
    }

    fn keep(&self, r: Result<Seq, AgentError>) -> Option<Seq> {
        match r {
            Ok(seq) => Some(seq),
            Err(e) => {
                let mut slot = self.error.locked();
                slot.get_or_insert(e);
                None
            }
        }
    }

    /// The repeated failure that must stop the turn after this step, if one happened.
    pub(crate) fn take_stop(&self) -> Option<RepeatNotice> {
        self.stop.locked().take()
    }

    /// The hand-off a tool asked for in this step, if any (the turn then ends after it).
    pub(crate) fn take_handoff(&self) -> Option<Handoff> {
        self.handoff.locked().take()
    }

    /// The first error any host method hit (the batch must then stop the turn).
    pub(crate) fn take_error(&self) -> Option<AgentError> {
        self.error.locked().take()
    }

    /// Append the `tool/result` of `outcome` (also used for results the loop makes itself,
    /// e.g. `ABORTED_BEFORE_DISPATCH` for calls of an interrupted message).
    pub(crate) fn commit_result(
        &self,
        call_id: &str,
        outcome: &ToolOutcome,
    ) -> Result<Seq, AgentError> {
        let call_seq = self.calls.locked().get(call_id).copied();
        let message = Message {
            role: Role::User,
            content: vec![ContentBlock::ToolResult(ToolResultBlock {
                tool_call_id: call_id.to_owned(),
                content: outcome.content.clone(),
                is_error: outcome.is_error,
            })],
            source: MessageSource::tool(call_id),
            id: uuid::Uuid::new_v4().to_string(),
        };
        let body = EventBody::ToolResult(Box::new(ToolResultEvent {
            turn: self.turn,
            step: self.step,
            message,
            meta: outcome.meta.clone(),
        }));
        self.agent
            .push_surface(body, SurfaceOp::Append, call_seq.into_iter().collect())
    }
}

#[async_trait]
impl ToolCaller for StepCaller<'_> {
    fn caller(&self) -> Option<CallerId> {
        self.agent.inner.caller.id()
    }

    async fn call_started(&self, call: &ToolCallBlock) {
        let body = EventBody::ToolCall(Box::new(ToolCallEvent {
            turn: self.turn,
            step: self.step,
            call_id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
        }));
        if let Some(seq) = self.keep(self.agent.push(body)) {
            self.calls.locked().insert(call.id.clone(), seq);
        }
    }

    async fn checkpoint(&self) {
        if let Err(e) = self.agent.flush(FlushPoint::BeforeToolBody).await {
            self.keep(Err(e));
        }
    }

    async fn ask_approval(&self, call: &ToolCallBlock, reason: &str) -> ApprovalOutcome {
        self.ask(call, reason, false).await
    }

    async fn ask_escalation(&self, call: &ToolCallBlock, reason: &str) -> ApprovalOutcome {
        self.ask(call, reason, true).await
    }

    async fn ask_user(&self, call: &ToolCallBlock, questions: &[Question]) -> UserAnswer {
        self.keep(
            self.agent
                .push(EventBody::QuestionAsked(Box::new(QuestionAsked {
                    call_id: call.id.clone(),
                    questions: questions.to_vec(),
                }))),
        );
        // Flushed before anyone is asked: a person may take minutes, and the question must be
        // on disk for a crash or a reader meanwhile.
        self.checkpoint().await;
        let answer = match &self.agent.inner.asker {
            Some(asker) => asker.ask(call, questions).await,
            None => UserAnswer::Unanswered {
                reason: NO_PERSON_PRESENT.to_owned(),
            },
        };
        let (by, answers, reason) = match &answer {
            UserAnswer::Answered(a) => ("user", a.clone(), None),
            UserAnswer::Declined { reason } => ("declined", Default::default(), reason.clone()),
            UserAnswer::Unanswered { reason } => {
                ("headless", Default::default(), Some(reason.clone()))
            }
        };
        self.keep(
            self.agent
                .push(EventBody::QuestionAnswered(Box::new(QuestionAnswered {
                    call_id: call.id.clone(),
                    by: by.to_owned(),
                    answers,
                    reason,
                }))),
        );
        answer
    }

    async fn emit(&self, body: EventBody) {
        self.keep(self.agent.push(body));
    }

    async fn commit_result(&self, call: &ToolCallBlock, outcome: &ToolOutcome) {
        let limit = self.agent.config().repeat_failure_limit;
        let verdict = self
            .agent
            .state()
            .repeats
            .observe(limit, self.turn, call, outcome);
        let r = match verdict {
            Verdict::Pass => self.commit_result(&call.id, outcome),
            Verdict::Warn(notice) => self.commit_result(&call.id, &notice.apply(outcome)),
            Verdict::Stop(notice) => {
                let r = self.commit_result(&call.id, &notice.apply(outcome));
                self.stop.locked().get_or_insert(notice);
                r
            }
        };
        self.keep(r);
    }

    fn jobs(&self) -> Option<Arc<dyn JobControl>> {
        self.agent.jobs()
    }

    fn hand_off(&self, handoff: Handoff) {
        self.handoff.locked().get_or_insert(handoff);
    }
}
