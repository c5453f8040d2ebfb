//! The turn and step algorithm.
//!
//! ```text
//! turn/start ─► claim inbox ─► per step: claim step input ─► agent/pre-step ─► step/start
//!   ─► user/message events (+ runtime context when changed) ─► request (agent/request,
//!   agent/context, request/header) ─► llm/request ─► flush ─► llm/stream ─► assistant/chunk
//!   ─► assistant/message ─► tools (tool/call … tool/result, model order) ─► step/end ─► flush
//!   ─► another step while tools owe a request or step input waits
//! ─► agent/turn-stopping ─► turn/end ─► flush
//! ```
//! A tool may hand the work back to the user ([`keel_tools::Handoff`]: `exit_plan_mode` when
//! nobody can approve the plan now): the turn then ends after that step, `blocked` with the
//! tool's reason, without another request and without `agent/turn-stopping`.
//! Model failures go through `agent/request-error` (default: the retry policy) inside the same
//! step; each retry is logged as `llm/retry` and rebuilds the request (runtime context
//! included). Cancellation keeps streamed text as an interrupted assistant message and answers
//! its complete tool calls with `ABORTED_BEFORE_DISPATCH`, so the next request is valid.

use crate::agent::Agent;
use crate::background::IdleWait;
use crate::caller::StepCaller;
use crate::error::AgentError;
use crate::seams::{
    ErrorDecision, FlushPoint, PreStep, PreStepOutcome, RequestError, StopDecision, StreamCall,
    TurnStopping,
};
use futures::FutureExt;
use keel_llm::{Assembled, ChatRequest, Interrupted, RetryDecision};
use keel_protocol::sync::Locked;
use keel_protocol::{
    AssistantChunk, AssistantMessageEvent, ContentBlock, EventBody, FinishReason, LlmRetry,
    Message, MessageSource, Role, Seq, StepNo, StepRef, SurfaceOp, ToolCallBlock, ToolErrorCode,
    TurnEnd, TurnEndReason, TurnNo, TurnStart,
};
use keel_tools::ToolOutcome;
use std::sync::Mutex;
use tokio_util::sync::CancellationToken;

/// How a turn ended.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutcome {
    /// Turn number.
    pub turn: TurnNo,
    /// Why it ended.
    pub reason: TurnEndReason,
    /// The last assistant text of the turn; after a hand-off, what was handed to the user
    /// (the plan).
    pub final_text: String,
    /// The turn ended because a tool handed the work back to the user (`exit_plan_mode` when
    /// nobody could approve the plan now, see [`keel_tools::Handoff`]): `reason` is `blocked`
    /// with the tool's reason. Not a failure: the user decides how it goes on.
    pub handed_off: bool,
}

impl TurnOutcome {
    /// True when the turn completed normally.
    pub fn completed(&self) -> bool {
        self.reason == TurnEndReason::Completed
    }
}

enum StepEnd {
    /// Another step is owed.
    Continue,
    /// The turn ends.
    EndTurn(TurnEndReason),
    /// A tool handed the work back to the user: the turn ends without another request.
    HandOff(keel_tools::Handoff),
}

impl Agent {
    /// An assistant message of this agent's model.
    fn model_message(&self, content: Vec<ContentBlock>) -> Message {
        Message {
            role: Role::Assistant,
            content,
            source: MessageSource::model(
                self.config().provider_name.clone(),
                self.config().model.clone(),
            ),
            id: uuid::Uuid::new_v4().to_string(),
        }
    }

    /// Run turns while follow-ups wait in the inbox. Returns the last turn's outcome (`None`
    /// when nothing was waiting).
    pub async fn run_pending(&self) -> Result<Option<TurnOutcome>, AgentError> {
        let mut last = None;
        loop {
            let claimed = self.state().inbox.has_turn();
            if !claimed {
                return Ok(last);
            }
            let outcome = self.run_turn().await;
            // A turn that failed with an error is not running any more either.
            self.state().running = false;
            last = Some(outcome?);
        }
    }

    /// [`Agent::run_until_idle`], stopped when `cancel` resolves: the running turn is cancelled
    /// ([`Agent::cancel_turn`]: it ends `aborted`, the log stays valid) and background jobs are
    /// killed, then the cancel is repeated every `every` until the agent is idle — a cancel that
    /// lands between two turns (or before the first starts) would otherwise be lost, since every
    /// turn takes a fresh cancellation token. The front ends that host agents (ACP, the MCP
    /// server, `keel serve`) drive their turns with it.
    pub async fn run_until_idle_cancellable(
        &self,
        cancel: impl std::future::Future<Output = ()>,
        every: std::time::Duration,
    ) -> Result<Option<TurnOutcome>, AgentError> {
        let run = self.run_until_idle();
        tokio::pin!(run);
        tokio::pin!(cancel);
        let mut cancelling = false;
        loop {
            tokio::select! {
                out = &mut run => break out,
                () = &mut cancel, if !cancelling => {
                    cancelling = true;
                    self.cancel_turn();
                    self.kill_jobs();
                }
                () = tokio::time::sleep(every), if cancelling => self.cancel_turn(),
            }
        }
    }

    /// Run pending turns, then, while background work of this agent may still wake it, wait
    /// for it: each notice that wakes the agent queues a follow-up turn, which runs here — a
    /// follow-up queued by any [`Agent::deliver`] (a delegation's report) wakes the wait too.
    /// Returns the last turn's outcome (`None` when no turn ran). Without a background service
    /// this is [`Agent::run_pending`]. Work still running when it returns keeps running; see
    /// [`Agent::kill_jobs`].
    pub async fn run_until_idle(&self) -> Result<Option<TurnOutcome>, AgentError> {
        let mut last = None;
        loop {
            if let Some(outcome) = self.run_pending().await? {
                last = Some(outcome);
            }
            let Some(service) = self.background().cloned() else {
                return Ok(last);
            };
            let session = self.session_id();
            if self.has_pending_turn() {
                continue;
            }
            tokio::select! {
                wait = service.idle(&session) => {
                    if wait == IdleWait::Done && !self.has_pending_turn() {
                        return Ok(last);
                    }
                }
                () = self.inner.woken.notified() => {}
            }
        }
    }

    /// Run one turn from the inbox's next follow-up.
    async fn run_turn(&self) -> Result<TurnOutcome, AgentError> {
        // A turn boundary: tool sources that changed since the last turn take effect now (the
        // next request header shows the new tools), never in the middle of a turn.
        self.refresh_tools()?;
        let cancel = self.new_turn_token();
        let turn = {
            let mut state = self.state();
            state.turn = state.turn.next();
            state.running = true;
            state.turn
        };
        let turn_start = self.push(EventBody::TurnStart(TurnStart { turn }))?;
        let mut pending: Vec<Message> = Vec::new();
        let claimed = self.state().inbox.claim_turn();
        if let Some((message, splice)) = claimed {
            self.push(EventBody::InboxSpliced(Box::new(splice)))?;
            pending.push(message);
        }
        let mut final_text = String::new();
        let mut handed_off = false;
        let mut step = StepNo(0);
        let reason = loop {
            step = step.next();
            if step.0 > self.config().max_steps {
                break TurnEndReason::Blocked {
                    reason: Some(format!(
                        "the turn reached its step limit ({}); raise agent.max_steps to go further",
                        self.config().max_steps
                    )),
                };
            }
            let claimed = self.state().inbox.claim_step();
            if let Some((messages, splice)) = claimed {
                self.push(EventBody::InboxSpliced(Box::new(splice)))?;
                pending.extend(messages);
            }
            match self
                .run_step(
                    turn,
                    step,
                    turn_start,
                    std::mem::take(&mut pending),
                    &cancel,
                    &mut final_text,
                )
                .await?
            {
                StepEnd::Continue => continue,
                StepEnd::EndTurn(TurnEndReason::Completed) => {
                    let stopping = TurnStopping {
                        agent: self.handle(),
                        turn,
                        reason: TurnEndReason::Completed,
                        final_text: final_text.clone(),
                    };
                    let decisions = self.hooks().turn_stopping.run(&stopping).await;
                    let more: Vec<Message> = decisions
                        .into_iter()
                        .flat_map(|d| match d {
                            StopDecision::Continue(m) => m,
                            StopDecision::Stop => Vec::new(),
                        })
                        .collect();
                    if cancel.is_cancelled() {
                        break TurnEndReason::Completed;
                    }
                    if more.is_empty() {
                        // Input that arrived for the next step meanwhile (a job notice) gets
                        // another step; checked and marked idle under one lock, so a notice
                        // arriving later wakes the agent with a follow-up instead.
                        let mut state = self.state();
                        if !state.inbox.has_step_input() {
                            state.running = false;
                            break TurnEndReason::Completed;
                        }
                    }
                    pending = more;
                }
                StepEnd::EndTurn(TurnEndReason::MaxTokens) => {
                    // The hooks hear of it (a bounded continuation queues a new turn); the turn
                    // ends at the limit whatever they decide.
                    if !self.hooks().turn_stopping.is_empty() {
                        let stopping = TurnStopping {
                            agent: self.handle(),
                            turn,
                            reason: TurnEndReason::MaxTokens,
                            final_text: final_text.clone(),
                        };
                        self.hooks().turn_stopping.run(&stopping).await;
                    }
                    break TurnEndReason::MaxTokens;
                }
                StepEnd::EndTurn(reason) => break reason,
                StepEnd::HandOff(handoff) => {
                    final_text = handoff.answer;
                    handed_off = true;
                    break TurnEndReason::Blocked {
                        reason: Some(handoff.reason),
                    };
                }
            }
        };
        self.state().running = false;
        self.push(EventBody::TurnEnd(TurnEnd {
            turn,
            reason: reason.clone(),
        }))?;
        self.flush(FlushPoint::TurnBoundary).await?;
        Ok(TurnOutcome {
            turn,
            reason,
            final_text,
            handed_off,
        })
    }

    async fn run_step(
        &self,
        turn: TurnNo,
        step: StepNo,
        turn_start: Seq,
        claimed: Vec<Message>,
        cancel: &CancellationToken,
        final_text: &mut String,
    ) -> Result<StepEnd, AgentError> {
        let entered = if self.hooks().pre_step.is_empty() {
            claimed
        } else {
            let input = PreStep {
                agent: self.handle(),
                turn,
                step,
                messages: claimed,
            };
            match self
                .hooks()
                .pre_step
                .run(input, &|p| {
                    std::future::ready(PreStepOutcome::Enter(p.messages)).boxed()
                })
                .await
            {
                PreStepOutcome::Enter(m) => m,
                PreStepOutcome::Reject(reason) => {
                    return Ok(StepEnd::EndTurn(TurnEndReason::Blocked {
                        reason: Some(reason),
                    }));
                }
            }
        };
        let step_ref = StepRef { turn, step };
        self.push(EventBody::StepStart(step_ref))?;
        // The runtime context goes before the step's input: merged into one user message on
        // the wire (no two user messages in a row), the human's words come last, which is what
        // the model answers; and appending only after it keeps every sent byte stable.
        self.push_runtime_context(turn, step, 0)?;
        for m in entered {
            self.push_surface(
                EventBody::UserMessage(Box::new(m)),
                SurfaceOp::Append,
                Vec::new(),
            )?;
        }

        let mut attempt = 0u32;
        let streamed = loop {
            let request = self.build_request(turn, step, turn_start).await?;
            let observed = crate::seams::LlmRequest {
                session: self.session_id(),
                turn,
                step,
                attempt,
                request: request.clone(),
            };
            self.hooks().llm_request.run(&observed).await;
            self.flush(FlushPoint::BeforeRequest).await?;
            let (result, chunk_seqs) = self.stream(turn, step, request, cancel).await?;
            match result {
                Ok(assembled) => break Ok((assembled, chunk_seqs)),
                Err(interrupted) if cancel.is_cancelled() => {
                    break Err((interrupted, chunk_seqs, true));
                }
                Err(interrupted) => {
                    let input = RequestError {
                        agent: self.handle(),
                        turn,
                        step,
                        attempt,
                        failure: interrupted.failure.clone(),
                    };
                    let policy = self.config().retry.clone();
                    let decision = self
                        .hooks()
                        .request_error
                        .run(input, &move |e| {
                            let d = match policy.decide(e.attempt + 1, &e.failure) {
                                RetryDecision::Retry { delay } => ErrorDecision::Retry { delay },
                                RetryDecision::GiveUp => ErrorDecision::GiveUp,
                            };
                            std::future::ready(d).boxed()
                        })
                        .await;
                    match decision {
                        ErrorDecision::Retry { delay } => {
                            attempt += 1;
                            self.push(EventBody::LlmRetry(Box::new(LlmRetry {
                                turn,
                                step,
                                attempt,
                                delay_ms: delay.as_millis() as u64,
                                failure: interrupted.failure.clone(),
                            })))?;
                            tokio::select! {
                                _ = tokio::time::sleep(delay) => {}
                                _ = cancel.cancelled() => break Err((interrupted, chunk_seqs, true)),
                            }
                            // A same-step retry rebuilds the runtime context.
                            self.push_runtime_context(turn, step, attempt)?;
                        }
                        ErrorDecision::GiveUp => break Err((interrupted, chunk_seqs, false)),
                    }
                }
            }
        };

        let (assembled, chunk_seqs) = match streamed {
            Ok(ok) => ok,
            Err((interrupted, chunk_seqs, true)) => {
                return self.abort_step(step_ref, interrupted, chunk_seqs).await;
            }
            Err((interrupted, _, false)) => {
                self.push(EventBody::StepEnd(step_ref))?;
                self.flush(FlushPoint::StepBoundary).await?;
                let f = interrupted.failure;
                return Ok(StepEnd::EndTurn(TurnEndReason::Error {
                    code: f.code.as_str().to_owned(),
                    message: f.detail(),
                }));
            }
        };

        let Assembled {
            content,
            usage,
            finish,
        } = assembled;
        if let Some(u) = &usage {
            let mut state = self.state();
            if let Some((t, s, estimate)) = state.last_estimate
                && (t, s) == (turn, step)
                && let Some(f) = crate::request::prompt_factor(u.prompt_tokens(), estimate)
            {
                state.prompt_factor = Some(f);
            }
        }
        let message = self.model_message(content);
        let calls: Vec<ToolCallBlock> = message.tool_calls().cloned().collect();
        let text = message.text();
        if !text.is_empty() {
            *final_text = text;
        }
        let max_tokens = finish == Some(FinishReason::MaxTokens);
        self.push_surface(
            EventBody::AssistantMessage(Box::new(AssistantMessageEvent {
                turn,
                step,
                message,
                usage,
                finish,
                interrupted: false,
            })),
            SurfaceOp::Append,
            chunk_seqs,
        )?;

        let mut handoff = None;
        if !calls.is_empty() {
            let host = StepCaller::new(self, turn, step);
            self.pipeline()
                .run_batch(&calls, &host, cancel.clone())
                .await;
            if let Some(e) = host.take_error() {
                return Err(e);
            }
            if let Some(notice) = host.take_stop() {
                self.push(EventBody::StepEnd(step_ref))?;
                self.flush(FlushPoint::StepBoundary).await?;
                return Ok(StepEnd::EndTurn(TurnEndReason::Error {
                    code: crate::repeat::REPEATED_TOOL_FAILURE.to_owned(),
                    message: notice.stop_message(),
                }));
            }
            handoff = host.take_handoff();
        }
        self.push(EventBody::StepEnd(step_ref))?;
        self.flush(FlushPoint::StepBoundary).await?;
        if cancel.is_cancelled() {
            return Ok(StepEnd::EndTurn(TurnEndReason::Aborted {
                reason: "cancelled by the user".into(),
            }));
        }
        if let Some(handoff) = handoff {
            return Ok(StepEnd::HandOff(handoff));
        }
        if max_tokens {
            return Ok(StepEnd::EndTurn(TurnEndReason::MaxTokens));
        }
        if !calls.is_empty() || self.state().inbox.has_step_input() {
            return Ok(StepEnd::Continue);
        }
        Ok(StepEnd::EndTurn(TurnEndReason::Completed))
    }

    /// Stream one model call, logging every chunk. The outer error is a log failure.
    async fn stream(
        &self,
        turn: TurnNo,
        step: StepNo,
        request: ChatRequest,
        cancel: &CancellationToken,
    ) -> Result<(Result<Assembled, Interrupted>, Vec<Seq>), AgentError> {
        let mut request = request;
        crate::images::resolve_images(
            &mut request,
            &self.config().model_info,
            self.attachments().as_ref(),
        );
        let call = StreamCall {
            request,
            cancel: cancel.clone(),
        };
        let provider = self.provider().clone();
        let stream = if self.hooks().llm_stream.is_empty() {
            provider.stream(call.request, call.cancel)
        } else {
            self.hooks()
                .llm_stream
                .run(call, &move |c| {
                    std::future::ready(provider.stream(c.request, c.cancel)).boxed()
                })
                .await
        };
        let seqs = Mutex::new(Vec::new());
        let failure: Mutex<Option<AgentError>> = Mutex::new(None);
        let result = keel_llm::assemble(stream, |chunk| {
            let body = EventBody::AssistantChunk(Box::new(AssistantChunk {
                turn,
                step,
                chunk: chunk.clone(),
            }));
            match self.push(body) {
                Ok(seq) => seqs.locked().push(seq),
                Err(e) => {
                    failure.locked().get_or_insert(e);
                }
            }
        })
        .await;
        if let Some(e) = failure.into_inner().unwrap_or_else(|p| p.into_inner()) {
            return Err(e);
        }
        Ok((result, seqs.into_inner().unwrap_or_else(|p| p.into_inner())))
    }

    /// Cancellation mid-stream: keep what streamed as an interrupted assistant message, answer
    /// its complete tool calls with `ABORTED_BEFORE_DISPATCH`, close the step.
    async fn abort_step(
        &self,
        step_ref: StepRef,
        interrupted: Interrupted,
        chunk_seqs: Vec<Seq>,
    ) -> Result<StepEnd, AgentError> {
        let content: Vec<ContentBlock> = interrupted.partial;
        if !content.is_empty() {
            let message = self.model_message(content);
            let calls: Vec<ToolCallBlock> = message.tool_calls().cloned().collect();
            self.push_surface(
                EventBody::AssistantMessage(Box::new(AssistantMessageEvent {
                    turn: step_ref.turn,
                    step: step_ref.step,
                    message,
                    usage: None,
                    finish: None,
                    interrupted: true,
                })),
                SurfaceOp::Append,
                chunk_seqs,
            )?;
            let host = StepCaller::new(self, step_ref.turn, step_ref.step);
            for call in calls {
                let outcome = ToolOutcome::error(
                    &call.id,
                    ToolErrorCode::AbortedBeforeDispatch,
                    "the turn was cancelled before this call was dispatched; it did not run",
                );
                host.commit_result(&call.id, &outcome)?;
            }
        }
        self.push(EventBody::StepEnd(step_ref))?;
        self.flush(FlushPoint::StepBoundary).await?;
        Ok(StepEnd::EndTurn(TurnEndReason::Aborted {
            reason: "cancelled by the user".into(),
        }))
    }
}
