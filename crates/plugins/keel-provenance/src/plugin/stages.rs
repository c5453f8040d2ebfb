//! The pipeline stages of one call (`tools/observe`) and its `tools/settled`.
//!
//! Parallel calls run their phases concurrently, so the order in which their stages are
//! *observed* depends on scheduling. To keep the journal a pure function of the workload (same
//! workload, same bytes), each dispatch's observed stages are buffered under its execution token
//! and committed to the recorder at its `tools/settled`, which the pipeline calls in model order.
//! The one exception is nested dispatch: when a body dispatches calls of its own, the parent's
//! buffered stages are committed first, so the child's `tools/execute:enter` can bind to the
//! parent's dispatch (`nested_in`). Nothing is lost by buffering: `tools/settled` is awaited
//! before `tool/result`, and a crash before it leaves the call open (`outcome_unobserved` on
//! resume), exactly as an unobserved stage should.

use super::Durability;
use super::Provenance;
use super::seams::is_query;
use crate::capture::{
    Approval, ChildLink, Dispatch, ExecuteResult, PostDecision, PreDecision, SettledResult,
};
use crate::recorder::Recorder;
use async_trait::async_trait;
use keel_jcs::Payload;
use keel_protocol::{ContentBlock, ToolErrorCode};
use keel_tools::{
    ApprovalOutcome, ExecToken, HookContext, PipelineObserver, ResultDraft, SettledHook, ToolError,
    ToolOutcome, ToolOutput,
};
use serde_json::{Map, Value};
use std::collections::{HashMap, HashSet};

/// One observed stage, owned until it is committed.
#[derive(Debug)]
enum Stage {
    PreEnter(Value),
    PreDecision {
        transform: PreKind,
        reason: Option<String>,
    },
    Guard {
        guard: String,
        reason: String,
    },
    ExecEnter {
        label: String,
        parent: Option<String>,
        args: Value,
    },
    ExecResult {
        label: String,
        result: Result<Value, (ToolErrorCode, String)>,
    },
    Post {
        incoming: Value,
        decision: PostKind,
    },
    Join {
        node: String,
        run: String,
        graph: String,
    },
}

#[derive(Debug, Clone, Copy)]
enum PreKind {
    Allow,
    Deny,
    Approved,
    Refused,
}

#[derive(Debug)]
enum PostKind {
    Accept,
    Value(Value),
    Content(Value),
    Block(String),
}

/// The stages of one dispatch not yet committed.
#[derive(Debug)]
struct Buffered {
    call_id: String,
    stages: Vec<Stage>,
}

/// Identity bookkeeping of the seam handlers.
#[derive(Debug, Default)]
pub(crate) struct Bookkeeping {
    /// Execution token → its deterministic label (`dispatch:<call id>[#n]`), while in flight.
    tokens: HashMap<ExecToken, String>,
    /// Call id → dispatches so far (repeated call ids get `#n` labels).
    dispatches: HashMap<String, u32>,
    /// Call ids of query-tool calls (not captured), until their `tool/result`.
    pub(crate) query_calls: HashSet<String>,
    /// Stages observed but not committed, per dispatch.
    buffered: HashMap<ExecToken, Buffered>,
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

    fn push(&mut self, ctx: &HookContext<'_>, stage: Stage) {
        self.buffered
            .entry(ctx.token)
            .or_insert_with(|| Buffered {
                call_id: ctx.call.id.clone(),
                stages: Vec::new(),
            })
            .stages
            .push(stage);
    }

    /// A child session's outcome joins `call_id`: buffered with the call's running dispatch
    /// (committed in order at its `tools/settled`), or recorded now when none is running.
    pub(crate) fn join(
        &mut self,
        r: &mut Recorder,
        call_id: &str,
        node: String,
        run: String,
        graph: String,
    ) {
        let running = self.buffered.values_mut().find(|b| b.call_id == call_id);
        let stage = Stage::Join { node, run, graph };
        match running {
            Some(b) => b.stages.push(stage),
            None => replay(r, call_id, stage),
        }
    }

    /// Commit the buffered stages of `token` to `r`, in observation order.
    fn commit(&mut self, token: ExecToken, r: &mut Recorder) {
        let Some(b) = self.buffered.remove(&token) else {
            return;
        };
        for stage in b.stages {
            replay(r, &b.call_id, stage);
        }
    }
}

fn replay(r: &mut Recorder, call_id: &str, stage: Stage) {
    match stage {
        Stage::PreEnter(v) => r.pre_execute_enter(call_id, Payload::Value(&v)),
        Stage::PreDecision { transform, reason } => {
            let decision = match transform {
                PreKind::Allow => PreDecision::Allow,
                PreKind::Deny => PreDecision::Deny {
                    reason: reason.as_deref().unwrap_or(""),
                },
                PreKind::Approved => PreDecision::Ask(Approval::Approved),
                PreKind::Refused => PreDecision::Ask(Approval::Denied),
            };
            r.pre_execute_decision(call_id, decision);
        }
        Stage::Guard { guard, reason } => r.guard_denial(call_id, &guard, &reason),
        Stage::ExecEnter {
            label,
            parent,
            args,
        } => r.execute_enter(
            call_id,
            Dispatch {
                token: &label,
                parent_token: parent.as_deref(),
                arguments: Payload::Value(&args),
            },
        ),
        Stage::ExecResult { label, result } => match &result {
            Ok(v) => r.execute_result(&label, ExecuteResult::Value(Payload::Value(v))),
            Err((code, message)) => r.execute_result(
                &label,
                ExecuteResult::Error {
                    code: Some(*code),
                    message,
                },
            ),
        },
        Stage::Post { incoming, decision } => {
            let incoming = Payload::Value(&incoming);
            let decision = match &decision {
                PostKind::Accept => PostDecision::Accept,
                PostKind::Value(v) => PostDecision::ReplaceValue(Payload::Value(v)),
                PostKind::Content(c) => PostDecision::ReplaceContent(Payload::Value(c)),
                PostKind::Block(reason) => PostDecision::Block { reason },
            };
            r.post_execute(call_id, incoming, decision);
        }
        Stage::Join { node, run, graph } => r.subagent_join(
            call_id,
            ChildLink {
                node_id: &node,
                run_id: &run,
                graph_id: &graph,
            },
        ),
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

pub(crate) fn content_value(content: &[ContentBlock]) -> Value {
    serde_json::to_value(content).unwrap_or(Value::Null)
}

/// The `tools/observe` and `tools/settled` handler.
pub(crate) struct Capture(Provenance);

impl Capture {
    pub(crate) fn new(p: Provenance) -> Capture {
        Capture(p)
    }

    /// Run `f` on the bookkeeping (and recorder) unless the call is a query tool's or capture
    /// is unbound.
    fn with(&self, ctx: &HookContext<'_>, f: impl FnOnce(&mut Recorder, &mut Bookkeeping)) {
        if is_query(&ctx.call.name) {
            return;
        }
        let mut state = self.0.lock();
        if let Some((r, bk, _)) = state.parts() {
            f(r, bk);
        }
    }
}

impl PipelineObserver for Capture {
    fn pre_execute_entered(&self, ctx: &HookContext<'_>, args: &Value) {
        self.with(ctx, |_, bk| {
            let mut m = Map::new();
            m.insert("arguments".into(), args.clone());
            m.insert("name".into(), Value::from(ctx.call.name.as_str()));
            bk.push(ctx, Stage::PreEnter(Value::Object(m)));
        });
    }

    fn pre_execute_decided(
        &self,
        ctx: &HookContext<'_>,
        decision: &keel_tools::PreDecision,
        approval: Option<&ApprovalOutcome>,
    ) {
        use keel_tools::PreDecision as D;
        let (transform, reason) = match (decision, approval) {
            (D::Allow, _) => (PreKind::Allow, None),
            (D::Deny(reason), _) => (PreKind::Deny, Some(reason.clone())),
            (D::Ask(_), Some(ApprovalOutcome::Approved)) => (PreKind::Approved, None),
            (
                D::Ask(_),
                Some(ApprovalOutcome::Denied { .. } | ApprovalOutcome::Unanswered { .. }),
            ) => (PreKind::Refused, None),
            (D::Ask(_), None) => return,
        };
        self.with(ctx, |_, bk| {
            bk.push(ctx, Stage::PreDecision { transform, reason });
        });
    }

    fn guard_denied(&self, ctx: &HookContext<'_>, guard: usize, reason: &str) {
        self.with(ctx, |_, bk| {
            let stage = Stage::Guard {
                guard: format!("guard#{guard}"),
                reason: reason.to_owned(),
            };
            bk.push(ctx, stage);
        });
    }

    fn body_dispatched(&self, ctx: &HookContext<'_>, args: &Value) {
        self.with(ctx, |r, bk| {
            let label = bk.label(ctx.token, &ctx.call.id);
            let parent = ctx.parent.map(|p| {
                // The parent's dispatch must be in the graph before a child binds to it.
                bk.commit(p, r);
                match bk.tokens.get(&p) {
                    Some(l) => l.clone(),
                    None => p.to_string(),
                }
            });
            let stage = Stage::ExecEnter {
                label,
                parent,
                args: args.clone(),
            };
            bk.push(ctx, stage);
        });
    }

    fn body_returned(&self, ctx: &HookContext<'_>, result: &Result<ToolOutput, ToolError>) {
        self.with(ctx, |_, bk| {
            let label = bk
                .tokens
                .get(&ctx.token)
                .cloned()
                .unwrap_or_else(|| format!("dispatch:{}", ctx.call.id));
            let result = match result {
                Ok(out) => {
                    let mut m = Map::new();
                    m.insert("content".into(), content_value(&out.content));
                    m.insert("value".into(), out.value.clone().unwrap_or(Value::Null));
                    Ok(Value::Object(m))
                }
                Err(e) => Err((e.code(), e.to_string())),
            };
            bk.push(ctx, Stage::ExecResult { label, result });
        });
    }

    fn post_executed(
        &self,
        ctx: &HookContext<'_>,
        incoming: &ResultDraft,
        decisions: &[keel_tools::PostDecision],
    ) {
        use keel_tools::PostDecision as D;
        self.with(ctx, |_, bk| {
            let mut current = incoming.clone();
            let mut recorded = false;
            for d in decisions {
                let decision = match d {
                    D::Accept => continue,
                    D::ReplaceValue(v) => PostKind::Value(v.clone()),
                    D::ReplaceContent(c) => PostKind::Content(content_value(c)),
                    D::Block(reason) => PostKind::Block(reason.clone()),
                };
                let before = draft_value(&current);
                bk.push(
                    ctx,
                    Stage::Post {
                        incoming: before,
                        decision,
                    },
                );
                match d {
                    D::ReplaceValue(v) => current.value = Some(v.clone()),
                    D::ReplaceContent(c) => current.content = c.clone(),
                    _ => {}
                }
                recorded = true;
            }
            if !recorded {
                let stage = Stage::Post {
                    incoming: draft_value(&current),
                    decision: PostKind::Accept,
                };
                bk.push(ctx, stage);
            }
        });
    }
}

#[async_trait]
impl SettledHook for Capture {
    async fn settled(&self, ctx: &HookContext<'_>, outcome: &ToolOutcome) {
        let mut state = self.0.lock();
        let Some((r, bk, _)) = state.parts() else {
            return;
        };
        bk.tokens.remove(&ctx.token);
        if is_query(&ctx.call.name) {
            bk.buffered.remove(&ctx.token);
            return;
        }
        bk.commit(ctx.token, r);
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
        let durability = match state.fsync {
            super::Fsync::Always => Durability::Sync,
            super::Fsync::Never => Durability::Write,
        };
        state.flush(durability);
    }
}
