//! The plugin's seam handlers: each turns what one seam observed into a [`Recorder`] call.
//!
//! `session/event` gives the durable events (`assistant/message` → `assistant/tool-call` per
//! call block, `tool/call`, `tool/result`); `tools/observe` the pipeline's actual decisions
//! (buffered per dispatch, see `stages.rs`); `tools/settled` the frozen final result, after which
//! the journal is flushed and fsynced before the host appends `tool/result`; `session/flush`
//! writes pending receipts and, at step and turn boundaries, fsyncs them and publishes
//! `graph.json`.
//!
//! Handlers lock the shared state briefly and never across an await; they return nothing, so
//! capture cannot change a tool result.

use super::stages::{Bookkeeping, Capture};
use super::{Durability, GetNodeTool, Provenance, QUERY_TOOLS, State, TraceTool};
use crate::model::Stage;
use crate::recorder::Recorder;
use keel_agent::HookRegistry;
use keel_agent::seams::{ChildBuild, ChildSetup, FlushPoint, SubagentNotice};
use keel_jcs::Payload;
use keel_protocol::{CODE_DISPATCH_EVENT, ContentBlock, EventBody, SessionEvent};
use serde_json::Value;
use std::sync::Arc;

impl State {
    /// The recorder, the bookkeeping and the session id, borrowed together.
    pub(crate) fn parts(&mut self) -> Option<(&mut Recorder, &mut Bookkeeping, &str)> {
        let State {
            sink,
            session,
            seams,
            ..
        } = self;
        let recorder = match sink {
            super::Sink::Unbound => return None,
            super::Sink::Memory(r) => r,
            super::Sink::Journal(j) => j.recorder_mut(),
        };
        Some((recorder, seams, session.as_str()))
    }
}

/// A call of a query tool (never captured).
pub(crate) fn is_query(name: &str) -> bool {
    QUERY_TOOLS.contains(&name)
}

/// Register every handler of `p` on `hooks`.
pub(crate) fn install(p: &Provenance, hooks: &mut HookRegistry) {
    let capture = Arc::new(Capture::new(p.clone()));
    hooks.tools = std::mem::take(&mut hooks.tools)
        .observe(capture.clone())
        .settled(capture);
    let events = p.clone();
    hooks
        .session_event
        .push(Arc::new(move |ev: &SessionEvent| events.on_event(ev)));
    // Subagents: each child gets its own capture (its own journal), scoped to the child agent;
    // when it finishes, its newest outcome joins the spawning call's chain.
    let parent = p.clone();
    hooks
        .subagent_build
        .push(Arc::new(move |info: &ChildBuild, setup: &mut ChildSetup| {
            let child = parent.for_child();
            install(&child, &mut setup.hooks);
            // The child's trace/get_node answer over its own session (and its subagents').
            setup.tools.push(Arc::new(TraceTool::new(child.clone())));
            setup.tools.push(Arc::new(GetNodeTool::new(child.clone())));
            if let Err(e) = child.bind(&info.child) {
                tracing::warn!(child = %info.child, "provenance of the subagent is in memory only: {e}");
            }
            parent.add_child(info.child.as_str(), child);
        }));
    let joins = p.clone();
    hooks
        .subagent_finished
        .push(Arc::new(move |n: &SubagentNotice| {
            joins.on_child_finished(n)
        }));
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
    /// `subagent/finished`: publish the child's graph and join its newest outcome to the call
    /// that spawned it (inside that call's formation when the call is still running, i.e. a
    /// foreground subagent; after its result for a background job).
    fn on_child_finished(&self, n: &SubagentNotice) {
        let (Some(call_id), Some(child)) = (&n.call_id, self.child(n.child.as_str())) else {
            return;
        };
        let Some((node, graph)) = child.publish() else {
            // The child captured nothing (no tool calls): there is no chain to join.
            return;
        };
        let mut state = self.lock();
        let Some((r, bk, _)) = state.parts() else {
            return;
        };
        bk.join(
            r,
            call_id.as_str(),
            node,
            n.child.as_str().to_owned(),
            graph,
        );
    }

    /// `session/event`: record `assistant/message` (+ its call blocks), `tool/call`,
    /// `tool/result`, and Code Mode's `tool/code-dispatch` (the settled result of a sub-call a
    /// `run_code` program made: its durable record, aliased by the sub-call id).
    fn on_event(&self, ev: &SessionEvent) {
        let relevant = match &ev.body {
            EventBody::AssistantMessage(_) | EventBody::ToolCall(_) | EventBody::ToolResult(_) => {
                true
            }
            EventBody::Other(o) => o.type_name == CODE_DISPATCH_EVENT,
            _ => false,
        };
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
            EventBody::Other(o) => {
                let Some(sub_call) = o.data.get("subCallId").and_then(Value::as_str) else {
                    return;
                };
                if let Some(payload) = payload_or_failure(r, ev, &event_id) {
                    r.tool_result_event(sub_call, &event_id, Payload::Value(&payload));
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
