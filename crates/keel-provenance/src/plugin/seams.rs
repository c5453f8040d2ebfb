//! The plugin's seam handlers: each turns what one seam observed into a [`Recorder`] call.
//!
//! `session/event` gives the durable events (`assistant/message` → `assistant/tool-call` per
//! call block, `tool/call`, `tool/result`); `tools/observe` the pipeline's actual decisions;
//! `tools/settled` the frozen final result, after which the journal is flushed and fsynced
//! before the host appends `tool/result`; `session/flush` writes pending receipts and, at step
//! and turn boundaries, fsyncs them and publishes `graph.json`.
//!
//! Handlers lock the shared state briefly and never across an await; they return nothing, so
//! capture cannot change a tool result.

use super::{Durability, Provenance, QUERY_TOOLS, State};
use crate::capture::{Approval, Dispatch, ExecuteResult, PostDecision, PreDecision, SettledResult};
use crate::jcs::Payload;
use crate::model::Stage;
use crate::recorder::Recorder;
use async_trait::async_trait;
use keel_agent::HookRegistry;
use keel_agent::seams::FlushPoint;
use keel_protocol::{ContentBlock, EventBody, SessionEvent, ToolErrorCode};
use keel_tools::{
    ApprovalOutcome, ExecToken, HookContext, PipelineObserver, ResultDraft, SettledHook, ToolError,
    ToolOutcome, ToolOutput,
};
use serde_json::{Map, Value};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Identity bookkeeping of the seam handlers.
#[derive(Debug, Default)]
pub(crate) struct Bookkeeping {
    /// Execution token → its deterministic label (`dispatch:<call id>[#n]`), while in flight.
    tokens: HashMap<ExecToken, String>,
    /// Call id → dispatches so far (repeated call ids get `#n` labels).
    dispatches: HashMap<String, u32>,
    /// Call ids of query-tool calls (not captured), until their `tool/result`.
    query_calls: HashSet<String>,
}

impl Bookkeeping {
    fn label(&mut self, token: ExecToken, call_id: &str) -> String {
        let n = self.dispatches.entry(call_id.to_owned()).or_insert(0);
        *n += 1;
        let label = if *n == 1 {
            format!("dispatch:{call_id}")
        } else {
            format!("dispatch:{call_id}#{n}")
        };
        self.tokens.insert(token, label.clone());
        label
    }
}

impl State {
    /// The recorder, the bookkeeping and the session id, borrowed together.
    fn parts(&mut self) -> Option<(&mut Recorder, &mut Bookkeeping, &str)> {
        let State {
            sink,
            session,
            seams,
        } = self;
        let recorder = match sink {
            super::Sink::Unbound => return None,
            super::Sink::Memory(r) => r,
            super::Sink::Journal(j) => j.recorder_mut(),
        };
        Some((recorder, seams, session.as_str()))
    }
}

fn is_query(name: &str) -> bool {
    QUERY_TOOLS.contains(&name)
}

/// Register every handler of `p` on `hooks`.
pub(crate) fn install(p: &Provenance, hooks: &mut HookRegistry) {
    let capture = Arc::new(Capture(p.clone()));
    hooks.tools = std::mem::take(&mut hooks.tools)
        .observe(capture.clone())
        .settled(capture);
    let events = p.clone();
    hooks
        .session_event
        .push(Arc::new(move |ev: &SessionEvent| events.on_event(ev)));
    let flush = p.clone();
    hooks
        .session_flush
        .push(Arc::new(move |point: &FlushPoint| {
            let durability = match point {
                FlushPoint::StepBoundary | FlushPoint::TurnBoundary => Durability::Graph,
                FlushPoint::BeforeRequest | FlushPoint::BeforeToolBody => Durability::Write,
            };
            flush.lock().flush(durability);
            Box::pin(std::future::ready(()))
        }));
}

/// A committed event as recorded: the envelope minus its wall-clock `time` and the random
/// message `id`.
fn event_payload(ev: &SessionEvent) -> Result<Value, serde_json::Error> {
    let mut v = serde_json::to_value(ev)?;
    if let Value::Object(m) = &mut v {
        m.remove("time");
        if let Some(Value::Object(msg)) = m.get_mut("data").and_then(|d| d.get_mut("message")) {
            msg.remove("id");
        }
    }
    Ok(v)
}

impl Provenance {
    /// `session/event`: record `assistant/message` (+ its call blocks), `tool/call`,
    /// `tool/result`.
    fn on_event(&self, ev: &SessionEvent) {
        let relevant = matches!(
            ev.body,
            EventBody::AssistantMessage(_) | EventBody::ToolCall(_) | EventBody::ToolResult(_)
        );
        if !relevant {
            return;
        }
        let mut state = self.lock();
        let Some((r, bk, session)) = state.parts() else {
            return;
        };
        let event_id = format!("{session}:{}", ev.seq.0);
        match &ev.body {
            EventBody::AssistantMessage(m) => {
                let calls: Vec<_> = m.message.tool_calls().collect();
                for c in calls.iter().filter(|c| is_query(&c.name)) {
                    bk.query_calls.insert(c.id.clone());
                }
                if calls.iter().all(|c| is_query(&c.name)) {
                    return;
                }
                let Some(payload) = payload_or_failure(r, ev, &event_id) else {
                    return;
                };
                r.assistant_message(&event_id, Payload::Value(&payload));
                for c in calls.iter().filter(|c| !is_query(&c.name)) {
                    r.assistant_tool_call(&event_id, &c.id, &c.name, &c.arguments);
                }
            }
            EventBody::ToolCall(c) => {
                if is_query(&c.name) || bk.query_calls.contains(&c.call_id) {
                    return;
                }
                if let Some(payload) = payload_or_failure(r, ev, &event_id) {
                    r.tool_call_event(&c.call_id, &event_id, Payload::Value(&payload));
                }
            }
            EventBody::ToolResult(res) => {
                let Some(call_id) = res.message.content.iter().find_map(|b| match b {
                    ContentBlock::ToolResult(t) => Some(t.tool_call_id.as_str()),
                    _ => None,
                }) else {
                    return;
                };
                if bk.query_calls.remove(call_id) {
                    return;
                }
                if let Some(payload) = payload_or_failure(r, ev, &event_id) {
                    r.tool_result_event(call_id, &event_id, Payload::Value(&payload));
                }
            }
            _ => {}
        }
    }
}

fn payload_or_failure(r: &mut Recorder, ev: &SessionEvent, event_id: &str) -> Option<Value> {
    match event_payload(ev) {
        Ok(v) => Some(v),
        Err(e) => {
            let stage = match ev.body {
                EventBody::AssistantMessage(_) => Stage::AssistantMessage,
                EventBody::ToolCall(_) => Stage::ToolCall,
                _ => Stage::ToolResult,
            };
            r.failure(stage, event_id, &format!("payload_not_json: {e}"));
            None
        }
    }
}

/// `{content, is_error, code?, value}` of a draft.
fn draft_value(d: &ResultDraft) -> Value {
    let mut m = Map::new();
    m.insert("content".into(), content_value(&d.content));
    m.insert("is_error".into(), Value::Bool(d.is_error));
    if let Some(c) = d.code {
        m.insert("code".into(), Value::from(c.as_str()));
    }
    m.insert("value".into(), d.value.clone().unwrap_or(Value::Null));
    Value::Object(m)
}

fn content_value(content: &[ContentBlock]) -> Value {
    serde_json::to_value(content).unwrap_or(Value::Null)
}

/// The `tools/observe` and `tools/settled` handler.
struct Capture(Provenance);

impl Capture {
    /// Run `f` on the recorder unless the call is a query tool's or capture is unbound.
    fn record(&self, ctx: &HookContext<'_>, f: impl FnOnce(&mut Recorder, &mut Bookkeeping, &str)) {
        if is_query(&ctx.call.name) {
            return;
        }
        let mut state = self.0.lock();
        if let Some((r, bk, _)) = state.parts() {
            f(r, bk, &ctx.call.id);
        }
    }
}

impl PipelineObserver for Capture {
    fn pre_execute_entered(&self, ctx: &HookContext<'_>, args: &Value) {
        self.record(ctx, |r, _, call_id| {
            let members = [
                ("arguments", Payload::Value(args)),
                ("name", Payload::Str(&ctx.call.name)),
            ];
            r.pre_execute_enter(call_id, Payload::Obj(&members));
        });
    }

    fn pre_execute_decided(
        &self,
        ctx: &HookContext<'_>,
        decision: &keel_tools::PreDecision,
        approval: Option<&ApprovalOutcome>,
    ) {
        use keel_tools::PreDecision as D;
        let decision = match (decision, approval) {
            (D::Allow, _) => PreDecision::Allow,
            (D::Deny(reason), _) => PreDecision::Deny { reason },
            (D::Ask(_), Some(ApprovalOutcome::Approved)) => PreDecision::Ask(Approval::Approved),
            (D::Ask(_), Some(ApprovalOutcome::Denied { .. })) => PreDecision::Ask(Approval::Denied),
            (D::Ask(_), None) => return,
        };
        self.record(ctx, |r, _, call_id| {
            r.pre_execute_decision(call_id, decision)
        });
    }

    fn guard_denied(&self, ctx: &HookContext<'_>, guard: usize, reason: &str) {
        self.record(ctx, |r, _, call_id| {
            r.guard_denial(call_id, &format!("guard#{guard}"), reason);
        });
    }

    fn body_dispatched(&self, ctx: &HookContext<'_>, args: &Value) {
        self.record(ctx, |r, bk, call_id| {
            let label = bk.label(ctx.token, call_id);
            let parent = ctx.parent.map(|p| match bk.tokens.get(&p) {
                Some(l) => l.clone(),
                None => p.to_string(),
            });
            let dispatch = Dispatch {
                token: &label,
                parent_token: parent.as_deref(),
                arguments: Payload::Value(args),
            };
            r.execute_enter(call_id, dispatch);
        });
    }

    fn body_returned(&self, ctx: &HookContext<'_>, result: &Result<ToolOutput, ToolError>) {
        self.record(ctx, |r, bk, call_id| {
            let label = bk
                .tokens
                .get(&ctx.token)
                .cloned()
                .unwrap_or_else(|| format!("dispatch:{call_id}"));
            match result {
                Ok(out) => {
                    let mut m = Map::new();
                    m.insert("content".into(), content_value(&out.content));
                    m.insert("value".into(), out.value.clone().unwrap_or(Value::Null));
                    let v = Value::Object(m);
                    r.execute_result(&label, ExecuteResult::Value(Payload::Value(&v)));
                }
                Err(e) => {
                    let message = e.to_string();
                    let err = ExecuteResult::Error {
                        code: Some(e.code()),
                        message: &message,
                    };
                    r.execute_result(&label, err);
                }
            }
        });
    }

    fn post_executed(
        &self,
        ctx: &HookContext<'_>,
        incoming: &ResultDraft,
        decisions: &[keel_tools::PostDecision],
    ) {
        use keel_tools::PostDecision as D;
        self.record(ctx, |r, _, call_id| {
            let mut current = incoming.clone();
            let mut recorded = false;
            for d in decisions {
                let before = draft_value(&current);
                match d {
                    D::Accept => continue,
                    D::ReplaceValue(v) => {
                        r.post_execute(
                            call_id,
                            Payload::Value(&before),
                            PostDecision::ReplaceValue(Payload::Value(v)),
                        );
                        current.value = Some(v.clone());
                    }
                    D::ReplaceContent(blocks) => {
                        let c = content_value(blocks);
                        r.post_execute(
                            call_id,
                            Payload::Value(&before),
                            PostDecision::ReplaceContent(Payload::Value(&c)),
                        );
                        current.content = blocks.clone();
                    }
                    D::Block(reason) => {
                        r.post_execute(
                            call_id,
                            Payload::Value(&before),
                            PostDecision::Block { reason },
                        );
                    }
                }
                recorded = true;
            }
            if !recorded {
                let before = draft_value(&current);
                r.post_execute(call_id, Payload::Value(&before), PostDecision::Accept);
            }
        });
    }
}

#[async_trait]
impl SettledHook for Capture {
    async fn settled(&self, ctx: &HookContext<'_>, outcome: &ToolOutcome) {
        let mut state = self.0.lock();
        if let Some((_, bk, _)) = state.parts() {
            bk.tokens.remove(&ctx.token);
        }
        if is_query(&ctx.call.name) {
            return;
        }
        let Some((r, _, _)) = state.parts() else {
            return;
        };
        let content = content_value(&outcome.content);
        let code = outcome
            .code()
            .and_then(|c| serde_json::from_value::<ToolErrorCode>(Value::from(c)).ok());
        let value = match &outcome.meta {
            Some(m) => Payload::Value(m),
            None => Payload::Null,
        };
        r.settled(
            &ctx.call.id,
            SettledResult {
                value,
                content: Payload::Value(&content),
                is_error: outcome.is_error,
                error_code: code,
            },
        );
        // Durable before the host appends `tool/result`.
        state.flush(Durability::Sync);
    }
}
