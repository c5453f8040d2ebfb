//! The bridge: each `await tools.x(args)` of a program becomes one call through the agent's
//! whole tool pipeline (validation, seams, approvals, guards, provenance, spill, sandbox), as a
//! child dispatch of the `run_code` call.
//!
//! A sub-call's id is `<parent call id>:code:<n>`. It is not a model-visible call: instead of
//! `tool/call` / `tool/result` the host logs `tool/code-dispatch-start` when it enters the
//! pipeline and `tool/code-dispatch` when it settles (the DeepSeek Harness's names and
//! payloads), both ignorable and never on the surface. Durability checkpoints, approvals,
//! events tools emit, background jobs and hand-offs go to the enclosing call's host, so a
//! sub-call is asked about, flushed and guarded exactly like a direct one.

use crate::RUN_CODE;
use crate::engine::{Bridge, SubCall, SubResult};
use async_trait::async_trait;
use keel_agent::AgentHandle;
use keel_protocol::{
    CODE_DISPATCH_EVENT, CODE_DISPATCH_START_EVENT, ContentBlock, EventBody, Question,
    ToolCallBlock,
};
use keel_tools::{
    ApprovalOutcome, BatchOptions, CallerId, ExecMode, ExecToken, Handoff, JobControl, Pipeline,
    ToolCaller, ToolOutcome, UserAnswer,
};
use serde_json::{Value, json};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Code of a sub-call the bridge refuses itself (`run_code` inside `run_code`).
pub const NESTED_CODE: &str = "CODE_NESTED";

/// The sub-call id of the program's `n`th call inside call `parent`.
pub fn sub_call_id(parent: &str, n: u32) -> String {
    format!("{parent}:code:{n}")
}

/// Runs a program's calls through `pipeline` as children of the `run_code` dispatch.
pub struct PipelineBridge<'a> {
    pipeline: &'a Pipeline,
    host: SubCaller<'a>,
    parent_token: ExecToken,
}

impl<'a> PipelineBridge<'a> {
    /// A bridge for the `run_code` call `parent` (dispatch `parent_token`), whose events and
    /// approvals go to `host` and are logged in `agent`'s session.
    pub fn new(
        pipeline: &'a Pipeline,
        host: &'a dyn ToolCaller,
        agent: Option<&'a AgentHandle>,
        parent: &'a ToolCallBlock,
        parent_token: ExecToken,
    ) -> Self {
        PipelineBridge {
            pipeline,
            host: SubCaller {
                parent: host,
                agent,
                parent_id: &parent.id,
            },
            parent_token,
        }
    }
}

#[async_trait]
impl Bridge for PipelineBridge<'_> {
    fn mode(&self, name: &str) -> ExecMode {
        self.pipeline
            .registry()
            .get(name)
            .map_or(ExecMode::Parallel, |t| t.info().mode)
    }

    async fn call(&self, call: SubCall, cancel: CancellationToken) -> SubResult {
        if call.name == RUN_CODE {
            return SubResult {
                ok: false,
                text: "run_code cannot be called from inside run_code: call the tools directly \
                       in this program"
                    .into(),
                code: Some(NESTED_CODE.into()),
            };
        }
        let block = ToolCallBlock {
            id: sub_call_id(self.host.parent_id, call.n),
            name: call.name,
            arguments: call.arguments,
        };
        let opts = BatchOptions {
            cancel,
            parent: Some(self.parent_token),
        };
        let outcomes = self
            .pipeline
            .run_batch_with(std::slice::from_ref(&block), &self.host, opts)
            .await;
        match outcomes.into_iter().next() {
            Some(outcome) => sub_result(&outcome),
            None => SubResult {
                ok: false,
                text: "the pipeline returned no result".into(),
                code: Some("TOOL_FAILED".into()),
            },
        }
    }
}

/// What the program sees of an outcome: the text (images as a placeholder); on failure the
/// message without its `CODE: ` prefix, and the code (a tool's own code before the generic one).
fn sub_result(outcome: &ToolOutcome) -> SubResult {
    let text = content_text(&outcome.content);
    if !outcome.is_error {
        return SubResult {
            ok: true,
            text,
            code: None,
        };
    }
    let code = outcome
        .meta
        .as_ref()
        .and_then(|m| m.get("error").and_then(Value::as_str))
        .or_else(|| outcome.code())
        .unwrap_or("TOOL_FAILED")
        .to_owned();
    let message = text
        .strip_prefix(&format!("{code}: "))
        .map(str::to_owned)
        .unwrap_or(text);
    SubResult {
        ok: false,
        text: message,
        code: Some(code),
    }
}

fn content_text(content: &[ContentBlock]) -> String {
    let mut out = String::new();
    for block in content {
        match block {
            ContentBlock::Text { text } => out.push_str(text),
            ContentBlock::Image(_) => out.push_str("[image]"),
            _ => {}
        }
    }
    out
}

/// The pipeline host of sub-calls: logs the dispatch events, hands everything else to the
/// host of the enclosing `run_code` call.
struct SubCaller<'a> {
    parent: &'a dyn ToolCaller,
    agent: Option<&'a AgentHandle>,
    parent_id: &'a str,
}

impl SubCaller<'_> {
    fn log(&self, type_name: &str, data: Value) {
        if let Some(agent) = self.agent {
            // A failed append (the log is closed) loses only this record; the sub-call's
            // result still reaches the program and the run's own result is committed as usual.
            let _ = agent.push_ignorable(type_name, data);
        }
    }

    fn ids(&self, call: &ToolCallBlock) -> serde_json::Map<String, Value> {
        let mut m = serde_json::Map::new();
        m.insert("rootCallId".into(), json!(self.parent_id));
        m.insert("parentCallId".into(), json!(self.parent_id));
        m.insert("subCallId".into(), json!(call.id));
        m.insert("name".into(), json!(call.name));
        m
    }
}

#[async_trait]
impl ToolCaller for SubCaller<'_> {
    async fn call_started(&self, call: &ToolCallBlock) {
        let mut data = self.ids(call);
        let arguments = serde_json::from_str::<Value>(&call.arguments)
            .unwrap_or_else(|_| Value::String(call.arguments.clone()));
        data.insert("arguments".into(), arguments);
        self.log(CODE_DISPATCH_START_EVENT, Value::Object(data));
    }

    async fn checkpoint(&self) {
        self.parent.checkpoint().await;
    }

    async fn ask_approval(&self, call: &ToolCallBlock, reason: &str) -> ApprovalOutcome {
        self.parent.ask_approval(call, reason).await
    }

    async fn ask_escalation(&self, call: &ToolCallBlock, reason: &str) -> ApprovalOutcome {
        self.parent.ask_escalation(call, reason).await
    }

    async fn ask_user(&self, call: &ToolCallBlock, questions: &[Question]) -> UserAnswer {
        self.parent.ask_user(call, questions).await
    }

    async fn emit(&self, body: EventBody) {
        self.parent.emit(body).await;
    }

    async fn commit_result(&self, call: &ToolCallBlock, outcome: &ToolOutcome) {
        let mut data = self.ids(call);
        data.insert("isError".into(), json!(outcome.is_error));
        data.insert(
            "content".into(),
            serde_json::to_value(&outcome.content).unwrap_or(Value::Null),
        );
        if let Some(meta) = &outcome.meta {
            data.insert("meta".into(), meta.clone());
        }
        self.log(CODE_DISPATCH_EVENT, Value::Object(data));
    }

    fn hand_off(&self, handoff: Handoff) {
        self.parent.hand_off(handoff);
    }

    fn jobs(&self) -> Option<Arc<dyn JobControl>> {
        self.parent.jobs()
    }

    fn caller(&self) -> Option<CallerId> {
        self.parent.caller()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_protocol::ToolErrorCode;
    use pretty_assertions::assert_eq;

    #[test]
    fn outcomes_become_what_the_program_sees() {
        let ok = ToolOutcome {
            call_id: "c".into(),
            content: vec![ContentBlock::text("hello")],
            is_error: false,
            meta: None,
        };
        assert_eq!(
            sub_result(&ok),
            SubResult {
                ok: true,
                text: "hello".into(),
                code: None
            }
        );
        let denied = ToolOutcome::error("c", ToolErrorCode::Denied, "not here");
        assert_eq!(
            sub_result(&denied),
            SubResult {
                ok: false,
                text: "not here".into(),
                code: Some("DENIED".into())
            }
        );
        assert_eq!(sub_call_id("call_1", 3), "call_1:code:3");
    }
}
