//! The [`Compactor`]: measures, prunes and summarises, and wires itself into the seams.
//!
//! Flow of one run: calibrate ([`Compactor::calibration`]) → measure the request
//! ([`Compactor::measure`]) → pressure below the limit: done, nothing logged → otherwise
//! `compaction/start` → prune ([`super::prune`]) → re-measure; pressure now below the limit:
//! done → plan the span ([`super::plan::summary_span`]) under the log lock → summary request
//! (no lock held) → check the span is still on the surface → `compaction/summary` + replacing
//! `user/message` → `compaction/end`.
//!
//! The compactor remembers, per session, the raw estimate of the last request sent (from
//! `llm/request`) to calibrate against the `usage` of the answer, the last step it recovered
//! from an overflow in (once per step), and a [`SurfaceIndex`] of the surface (for the few
//! sessions used last), brought up to date under the log lock before each use: O(new nodes)
//! per step, O(n) over plain arrays after a replace, so that measuring, planning and pruning
//! never look up every surface event again.

use super::index::SurfaceIndex;
use super::meter::{self, Calibration};
use super::plan::{SpanRules, SummarySpan, summary_span};
use super::prune::{self, PruneRules};
use super::summary::{self, SummaryMessage};
use super::{
    CompactionConfig, CompactionError, CompactionOutcome, CompactionReason, CompactionReport,
};
use crate::agent::Agent;
use crate::modes::{SerialHook, middleware};
use crate::request::turn_start;
use crate::seams::{ErrorDecision, HookRegistry, LlmRequest, PreStep, RequestError};
use futures::FutureExt;
use keel_protocol::sync::Locked;
use keel_protocol::{
    CompactionEnd, CompactionSpan, CompactionStart, EventBody, FailureCode, Message, Seq, SeqSpan,
    SessionId, StepRef, SurfaceOp,
};
use keel_protocol::{StepNo, TurnNo};
use keel_session::Session;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// Raw estimate of the last request sent in a session.
#[derive(Debug, Clone, Copy)]
struct Sent {
    turn: TurnNo,
    step: StepNo,
    raw: u64,
}

#[derive(Debug, Default)]
struct Memory {
    sent: Mutex<HashMap<SessionId, Sent>>,
    overflow: Mutex<HashMap<SessionId, StepRef>>,
    /// Locked after the log, never before.
    indexes: Mutex<Indexes>,
}

/// Surface indexes kept: the sessions compacted last (a subagent's session ends; its index
/// should not stay for the life of the compactor).
const KEPT_INDEXES: usize = 8;

/// The surface indexes of the sessions used last, with when each was last used.
#[derive(Debug, Default)]
struct Indexes {
    clock: u64,
    by_session: HashMap<SessionId, (u64, SurfaceIndex)>,
}

impl Indexes {
    /// `session`'s index, synced with it.
    fn synced(&mut self, session: &Session) -> &mut SurfaceIndex {
        self.clock += 1;
        let id = &session.header().id;
        if !self.by_session.contains_key(id) && self.by_session.len() >= KEPT_INDEXES {
            let oldest = self
                .by_session
                .iter()
                .min_by_key(|(_, (used, _))| *used)
                .map(|(id, _)| id.clone());
            if let Some(oldest) = oldest {
                self.by_session.remove(&oldest);
            }
        }
        let (used, index) = self.by_session.entry(id.clone()).or_default();
        *used = self.clock;
        index.sync(session);
        index
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.locked()
}

/// Where in the session a run happens, and what it must leave alone.
struct Run<'a> {
    reason: CompactionReason,
    turn: TurnNo,
    step: StepNo,
    /// Messages claimed for the step, not yet on the surface (pressure only).
    pending: &'a [Message],
    /// Nodes at or after this seq stay (the open step's own nodes, overflow only).
    protect_from: Option<Seq>,
    /// The window the result must fit: the model's, or less when an overflow showed the
    /// server's is smaller.
    window: u64,
}

/// Compaction with one configuration. Clone to share (the calibration memory is shared).
#[derive(Debug, Clone)]
pub struct Compactor {
    config: CompactionConfig,
    memory: Arc<Memory>,
}

impl Compactor {
    /// A compactor with `config` (see [`CompactionConfig::validate`]).
    pub fn new(config: CompactionConfig) -> Compactor {
        Compactor {
            config,
            memory: Arc::default(),
        }
    }

    /// Its settings.
    pub fn config(&self) -> &CompactionConfig {
        &self.config
    }

    /// Register the `agent/pre-step`, `agent/request-error` and `llm/request` hooks.
    pub fn install(&self, hooks: &mut HookRegistry) {
        let c = self.clone();
        hooks.pre_step.push(middleware(move |input: PreStep, next| {
            let c = c.clone();
            Box::pin(async move {
                let run = Run {
                    reason: CompactionReason::Pressure,
                    turn: input.turn,
                    step: input.step,
                    pending: &input.messages,
                    protect_from: None,
                    window: input.agent.config().model_info.context_window,
                };
                // A refused event is already reported by `compaction/end {failed}`; the step
                // goes on uncompacted rather than dying for it.
                let _ = c.run(input.agent.agent(), run).await;
                next.run(input).await
            })
        }));
        let c = self.clone();
        hooks
            .request_error
            .push(middleware(move |input: RequestError, next| {
                let c = c.clone();
                Box::pin(async move {
                    if input.failure.code != FailureCode::ContextWindowExceeded {
                        return next.run(input).await;
                    }
                    match c.recover_overflow(&input).await {
                        Some(decision) => decision,
                        None => next.run(input).await,
                    }
                })
            }));
        let memory = self.memory.clone();
        let observe: SerialHook<LlmRequest, ()> = Arc::new(move |r: &LlmRequest| {
            let sent = Sent {
                turn: r.turn,
                step: r.step,
                raw: meter::request_tokens(&r.request),
            };
            lock(&memory.sent).insert(r.session.clone(), sent);
            std::future::ready(()).boxed()
        });
        hooks.llm_request.push(observe);
    }

    /// Compact between turns (`/compact`, `keel compact SESSION`). `Pressure` compacts only
    /// above the threshold, `Overflow` as much as possible, `Manual` always.
    pub async fn compact_now(
        &self,
        agent: &Agent,
        reason: CompactionReason,
    ) -> Result<CompactionReport, CompactionError> {
        let state = agent.log().session().turn_state();
        if let Some(turn) = state.open_turn {
            return Err(CompactionError::TurnOpen { turn });
        }
        let run = Run {
            reason,
            turn: state.last_turn,
            step: keel_protocol::StepNo(0),
            pending: &[],
            protect_from: None,
            window: agent.config().model_info.context_window,
        };
        self.run(agent, run).await
    }

    /// Prune every oversized surface tool result now (logged as `compaction/prune` + the
    /// replacing `tool/result`). Returns the seqs of the results pruned; a second call prunes
    /// nothing.
    pub fn prune_now(&self, agent: &Agent) -> Result<Vec<Seq>, CompactionError> {
        let cal = self.calibration(agent);
        self.prune(agent, cal)
    }

    /// The calibration in force: the last reported prompt tokens over the raw estimate of the
    /// request that produced them (identity when nothing comparable is known).
    pub fn calibration(&self, agent: &Agent) -> Calibration {
        let sent = lock(&self.memory.sent).get(&agent.session_id()).copied();
        let base = meter::base_tokens(&agent.system_prompt(), &agent.pipeline().offered_schemas());
        self.indexed(agent, |session, index| {
            let Some(pos) = index.last_with_usage() else {
                return Calibration::IDENTITY;
            };
            let seq = index.seqs()[pos];
            let Some(EventBody::AssistantMessage(a)) = session.whole_event(seq).map(|e| &e.body)
            else {
                return Calibration::IDENTITY;
            };
            let Some(usage) = a.usage.filter(|u| u.prompt_tokens() > 0) else {
                return Calibration::IDENTITY;
            };
            let raw = match sent {
                Some(s) if (s.turn, s.step) == (a.turn, a.step) => s.raw,
                // Rebuilt from the log: valid while nothing before it was replaced since.
                _ if index.seqs()[..pos].iter().all(|&s| s < seq) => {
                    base + index.node_tokens()[..pos].iter().sum::<u64>()
                }
                _ => return Calibration::IDENTITY,
            };
            Calibration::from_report(usage.prompt_tokens(), raw)
        })
    }

    /// Run `f` on the agent's session and its surface index, brought up to date, under the log
    /// lock.
    fn indexed<R>(&self, agent: &Agent, f: impl FnOnce(&Session, &mut SurfaceIndex) -> R) -> R {
        let log = agent.log();
        let session = log.session();
        let mut indexes = lock(&self.memory.indexes);
        f(session, indexes.synced(session))
    }

    /// Calibrated tokens of the request a step of `turn` would send now, with `pending` messages
    /// still to enter; measured on the `agent/context` projection when one is registered.
    async fn measure(&self, agent: &Agent, run: &Run<'_>, cal: Calibration) -> u64 {
        let base = meter::base_tokens(&agent.system_prompt(), &agent.pipeline().offered_schemas());
        let pending: u64 = run.pending.iter().map(meter::message_tokens).sum();
        let history = if agent.hooks().context.is_empty() {
            self.indexed(agent, |_, index| index.tokens())
        } else {
            projected_tokens(agent, run.turn, run.step).await
        };
        cal.tokens(base + history + pending)
    }

    async fn recover_overflow(&self, input: &RequestError) -> Option<ErrorDecision> {
        let agent = input.agent.agent();
        let here = StepRef {
            turn: input.turn,
            step: input.step,
        };
        {
            let mut done = lock(&self.memory.overflow);
            let id = agent.session_id();
            if done.get(&id) == Some(&here) {
                return None;
            }
            done.insert(id, here);
        }
        let protect_from = step_start(agent.log().session(), here);
        // The request did not fit: the server's window is at most what it reports, and (in
        // keel's calibrated estimate) below the estimate of the request that failed.
        let configured = agent.config().model_info.context_window;
        let reported = keel_llm::classify::reported_context_window(&input.failure.message);
        let cal = self.calibration(agent);
        let failed = lock(&self.memory.sent)
            .get(&agent.session_id())
            .filter(|s| (s.turn, s.step) == (here.turn, here.step))
            .map(|s| cal.tokens(s.raw));
        let window = [Some(configured), reported, failed]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(configured);
        let run = Run {
            reason: CompactionReason::Overflow,
            turn: input.turn,
            step: input.step,
            pending: &[],
            protect_from,
            window,
        };
        match self.run(agent, run).await {
            Ok(report) if report.shrank() => Some(ErrorDecision::Retry {
                delay: Duration::ZERO,
            }),
            _ => None,
        }
    }

    async fn run(&self, agent: &Agent, run: Run<'_>) -> Result<CompactionReport, CompactionError> {
        let window = run.window;
        let cal = self.calibration(agent);
        let before = self.measure(agent, &run, cal).await;
        let mut report = CompactionReport {
            reason: run.reason,
            outcome: CompactionOutcome::NotNeeded,
            before_tokens: before,
            after_tokens: before,
            pruned: Vec::new(),
            summarised: None,
            summary_seq: None,
        };
        if run.reason == CompactionReason::Pressure && before < self.config.limit(window) {
            return Ok(report);
        }
        agent.push(EventBody::CompactionStart(Box::new(CompactionStart {
            reason: run.reason.as_str().to_owned(),
            estimated_tokens: before,
            context_window: window,
        })))?;
        let body = self.compact(agent, &run, cal, &mut report).await;
        if !report.pruned.is_empty() || report.summary_seq.is_some() {
            report.after_tokens = self.measure(agent, &run, cal).await;
        }
        let error = match (&body, &report.outcome) {
            (Err(e), _) => Some(e.to_string()),
            (Ok(()), CompactionOutcome::Failed { error }) => Some(error.clone()),
            _ => None,
        };
        if body.is_err() {
            report.outcome = CompactionOutcome::Failed {
                error: error.clone().unwrap_or_default(),
            };
        }
        let end = agent.push(EventBody::CompactionEnd(Box::new(CompactionEnd {
            outcome: report.outcome.as_str().to_owned(),
            before_tokens: report.before_tokens,
            after_tokens: report.after_tokens,
            error,
        })));
        body?;
        end?;
        Ok(report)
    }

    /// Prune, then summarise if pruning alone does not bring the request under the limit
    /// (pressure and overflow; a manual compaction always summarises). Sets the report's
    /// outcome.
    async fn compact(
        &self,
        agent: &Agent,
        run: &Run<'_>,
        cal: Calibration,
        report: &mut CompactionReport,
    ) -> Result<(), CompactionError> {
        let window = run.window;
        if self.config.prune {
            report.pruned = self.prune(agent, cal)?;
            if !report.pruned.is_empty() {
                report.outcome = CompactionOutcome::Compacted;
                let now = self.measure(agent, run, cal).await;
                if run.reason != CompactionReason::Manual && now < self.config.limit(window) {
                    return Ok(());
                }
            }
        }
        // The current turn's own prompt is never summarised away: the span stops before the
        // turn when that leaves something to summarise; otherwise (one long turn) the prompt
        // is carried word for word in the summary message.
        let turn_from = match run.reason {
            CompactionReason::Manual => None,
            _ => turn_start(agent.log().session(), run.turn),
        };
        let planned = self.indexed(agent, |session, index| {
            let tail_budget = match run.reason {
                CompactionReason::Overflow => 0,
                CompactionReason::Pressure => cal.raw(self.config.tail_budget(window)),
                // Asked for: compact even a session far below the window, keeping at most a
                // quarter of its history.
                CompactionReason::Manual => cal
                    .raw(self.config.tail_budget(window))
                    .min(index.tokens() / 4),
            };
            let protect_from = run
                .protect_from
                .map_or(usize::MAX, |s| index.first_at_or_after(s));
            let rules = |protect_from| SpanRules {
                tail_budget,
                protect_from,
                min_nodes: 2,
            };
            let before_turn = turn_from.map(|s| index.first_at_or_after(s).min(protect_from));
            let span = before_turn
                .and_then(|p| summary_span(index, rules(p)))
                .or_else(|| summary_span(index, rules(protect_from)));
            span.map(|span| {
                let shadowed = index.seqs()[..span.len].to_vec();
                let kept: Vec<String> = session
                    .whole_events(
                        shadowed
                            .iter()
                            .copied()
                            .filter(|&s| turn_from.is_some_and(|t| s > t)),
                    )
                    .filter_map(|(_, e)| e?.body.surface_message())
                    .filter(|m| m.source.is_user())
                    .map(|m| m.text())
                    .collect();
                let sent = shadowed
                    .iter()
                    .zip(index.node_tokens())
                    .filter(|&(_, &tokens)| tokens > 0)
                    .map(|(&seq, _)| seq);
                let prefix: Vec<Message> = session
                    .whole_events(sent)
                    .filter_map(|(_, e)| e?.body.surface_message().cloned())
                    .collect();
                (span, shadowed, prefix, kept)
            })
        });
        let Some((span, shadowed, prefix, kept)) = planned else {
            if report.pruned.is_empty() {
                report.outcome = CompactionOutcome::Skipped;
            }
            return Ok(());
        };
        let budget = self.config.summary_budget(window);
        let request = summary::summary_request(agent, prefix, budget);
        let text = match summary::request_summary(agent, request).await {
            Ok(text) => text,
            Err(e) => {
                report.outcome = CompactionOutcome::Failed {
                    error: e.to_string(),
                };
                return Ok(());
            }
        };
        let still_there = {
            let log = agent.log();
            log.session().surface().nodes().starts_with(&shadowed)
        };
        if !still_there {
            let error = "the surface changed during the summary request".to_owned();
            report.outcome = CompactionOutcome::Failed { error };
            return Ok(());
        }
        let summary = SummaryMessage::new(&text, summary_cap(budget)).keeping(&kept);
        self.apply_summary(agent, &span, shadowed, summary, cal, report)
    }

    fn apply_summary(
        &self,
        agent: &Agent,
        span: &SummarySpan,
        shadowed: Vec<Seq>,
        summary: SummaryMessage,
        cal: Calibration,
        report: &mut CompactionReport,
    ) -> Result<(), CompactionError> {
        let range = SeqSpan {
            start: span.start,
            end: span.end,
        };
        agent.push(EventBody::CompactionSummary(Box::new(CompactionSpan {
            shadowed_range: range,
            shadowed_seqs: shadowed.clone(),
            shadowed_token_count: cal.tokens(span.tokens),
        })))?;
        let message = summary.into_message();
        let seq = agent.push_surface(
            EventBody::UserMessage(Box::new(message)),
            SurfaceOp::Replace {
                start: span.start,
                end: span.end,
            },
            shadowed,
        )?;
        report.summarised = Some(range);
        report.summary_seq = Some(seq);
        report.outcome = CompactionOutcome::Compacted;
        Ok(())
    }

    fn prune(&self, agent: &Agent, cal: Calibration) -> Result<Vec<Seq>, CompactionError> {
        let rules = PruneRules {
            over_raw_tokens: cal.raw(self.config.prune_over_tokens),
            head_bytes: self.config.prune_head_bytes,
            tail_bytes: self.config.prune_tail_bytes,
        };
        let planned: Vec<_> = self.indexed(agent, |session, index| {
            let targets = prune::prune_plan(index, session, rules);
            let originals = session.whole_events(targets.iter().map(|t| t.seq));
            targets
                .iter()
                .zip(originals)
                .filter_map(|(&t, (_, event))| {
                    let EventBody::ToolResult(r) = &event?.body else {
                        return None;
                    };
                    prune::pruned_result(r, rules).map(|new| (t, new))
                })
                .collect()
        });
        let mut pruned = Vec::with_capacity(planned.len());
        for (target, replacement) in planned {
            let span = SeqSpan {
                start: target.seq,
                end: target.seq,
            };
            agent.push(EventBody::CompactionPrune(Box::new(CompactionSpan {
                shadowed_range: span,
                shadowed_seqs: vec![target.seq],
                shadowed_token_count: cal.tokens(target.tokens),
            })))?;
            agent.push_surface(
                EventBody::ToolResult(Box::new(replacement)),
                SurfaceOp::Replace {
                    start: target.seq,
                    end: target.seq,
                },
                vec![target.seq],
            )?;
            pruned.push(target.seq);
        }
        Ok(pruned)
    }
}

/// Bytes a summary of a `budget`-token summary request may keep.
fn summary_cap(budget: u64) -> usize {
    usize::try_from(budget.saturating_mul(8)).unwrap_or(usize::MAX)
}

/// Seq of the `step/start` of `step`, scanning back from the end of the log.
fn step_start(session: &Session, step: StepRef) -> Option<Seq> {
    (0..session.len()).rev().map(Seq).find(|&seq| {
        session
            .whole_event(seq)
            .is_some_and(|e| matches!(&e.body, EventBody::StepStart(s) if *s == step))
    })
}

/// Raw tokens of the history the `agent/context` projection would send.
async fn projected_tokens(agent: &Agent, turn: TurnNo, step: StepNo) -> u64 {
    let projected = agent.project(turn, step, None).await;
    let include: BTreeSet<Seq> = projected.include.iter().copied().collect();
    projected
        .nodes
        .iter()
        .filter(|d| include.contains(&d.seq))
        .map(|d| meter::message_tokens(&d.message))
        .sum()
}
