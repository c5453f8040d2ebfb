//! The MCP server handler: lists the two tools, runs calls through the [`TaskRunner`] with
//! progress notifications and cancellation, and shapes answers into tool results.

use super::tools::{KEEL_TOOL, REPLY_TOOL, parse_reply, parse_task, tools};
use super::{Answer, ProgressUpdate, ReplyRequest, TaskRequest, TaskRunner, TurnControl};
use keel_protocol::TurnEndReason;
use keel_protocol::sync::Locked;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorCode,
    Implementation, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
    ProgressToken, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler};
use serde_json::json;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

const INSTRUCTIONS: &str = "keel is a coding agent. Call the keel tool to delegate a task: it \
runs to the end in its own session and answers with keel's final message and a sessionId. Call \
keel_reply with that sessionId to continue the same session. Calls may run concurrently; \
cancelling a call stops its turn.";

/// The MCP server: the `keel` and `keel_reply` tools over a [`TaskRunner`]. Cheap to clone
/// (clones share the runner and the calls in flight).
pub(crate) struct KeelServer<R> {
    inner: Arc<Inner<R>>,
}

impl<R> Clone for KeelServer<R> {
    fn clone(&self) -> Self {
        KeelServer {
            inner: self.inner.clone(),
        }
    }
}

impl<R> std::fmt::Debug for KeelServer<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeelServer")
            .field("in_flight", &self.inner.calls.len())
            .finish_non_exhaustive()
    }
}

struct Inner<R> {
    runner: Arc<R>,
    /// Sessions with a turn running in this server.
    busy: Mutex<HashSet<String>>,
    /// The runner calls in flight (each on its own task, so a call whose request was
    /// cancelled or abandoned still finishes its turn and is waited for at shutdown).
    calls: TaskTracker,
    /// Cancelled at shutdown: every call's token is a child of it.
    shutdown: CancellationToken,
}

enum Job {
    Task(TaskRequest),
    Reply(ReplyRequest),
}

/// Releases a session marked busy by a call, when the call ends (or its handler is dropped).
struct BusyGuard<'a> {
    busy: &'a Mutex<HashSet<String>>,
    held: Vec<String>,
}

impl BusyGuard<'_> {
    /// Mark `id` busy for this call; false when another call holds it.
    fn claim(&mut self, id: &str) -> bool {
        if self.held.iter().any(|h| h == id) {
            return true;
        }
        let mut busy = self.busy.locked();
        if busy.insert(id.to_owned()) {
            self.held.push(id.to_owned());
            true
        } else {
            false
        }
    }
}

impl Drop for BusyGuard<'_> {
    fn drop(&mut self) {
        let mut busy = self.busy.locked();
        for id in &self.held {
            busy.remove(id);
        }
    }
}

impl<R: TaskRunner> KeelServer<R> {
    /// A server running calls through `runner`.
    pub(crate) fn new(runner: R) -> Self {
        KeelServer {
            inner: Arc::new(Inner {
                runner: Arc::new(runner),
                busy: Mutex::new(HashSet::new()),
                calls: TaskTracker::new(),
                shutdown: CancellationToken::new(),
            }),
        }
    }

    /// Cancel every call in flight and wait at most `grace` for them to end.
    pub(crate) async fn shutdown(&self, grace: Duration) {
        self.inner.shutdown.cancel();
        self.inner.calls.close();
        let _ = tokio::time::timeout(grace, self.inner.calls.wait()).await;
    }

    /// Run one call: `job` on its own task, progress forwarded to `peer` under `token` (when
    /// the client asked for progress), the runner's control cancelled with `request_ct`.
    async fn call(
        &self,
        job: Job,
        token: Option<ProgressToken>,
        peer: &Peer<RoleServer>,
        request_ct: CancellationToken,
    ) -> CallToolResult {
        let inner = &self.inner;
        let mut busy = BusyGuard {
            busy: &inner.busy,
            held: Vec::new(),
        };
        if let Job::Reply(r) = &job
            && !busy.claim(&r.session_id)
        {
            return CallToolResult::error(vec![ContentBlock::text(format!(
                "keel: session {} is running a turn for another call; wait for that call to \
                 answer, then reply",
                r.session_id
            ))]);
        }
        let (tx, mut rx) = mpsc::unbounded_channel::<ProgressUpdate>();
        let cancel = inner.shutdown.child_token();
        // A dropped handler (the connection went away) cancels its call too.
        let _cancel_on_drop = cancel.clone().drop_guard();
        let control = TurnControl::new(
            Arc::new(move |update| {
                let _ = tx.send(update);
            }),
            cancel.clone(),
        );
        let runner = inner.runner.clone();
        let mut running = inner.calls.spawn(async move {
            match job {
                Job::Task(task) => runner.run(task, control).await,
                Job::Reply(reply) => runner.reply(reply, control).await,
            }
        });
        let mut progress = Progress {
            token,
            peer,
            count: 0,
            request_ct: request_ct.clone(),
        };
        let joined = loop {
            tokio::select! {
                biased;
                joined = &mut running => break joined,
                () = request_ct.cancelled(), if !cancel.is_cancelled() => cancel.cancel(),
                Some(update) = rx.recv() => {
                    if let ProgressUpdate::Started { session_id } = &update {
                        busy.claim(session_id);
                    }
                    progress.send(update).await;
                }
            }
        };
        // Updates reported before the answer go out before it.
        while let Ok(update) = rx.try_recv() {
            progress.send(update).await;
        }
        match joined {
            Ok(Ok(answer)) => answer_result(&answer),
            Ok(Err(e)) => CallToolResult::error(vec![ContentBlock::text(e.to_string())]),
            Err(e) => CallToolResult::error(vec![ContentBlock::text(format!(
                "keel: the call failed: {e}"
            ))]),
        }
    }
}

/// Forwards a call's progress updates as MCP progress notifications, until the client
/// cancels the request (it no longer knows the token then).
struct Progress<'a> {
    token: Option<ProgressToken>,
    peer: &'a Peer<RoleServer>,
    count: u32,
    request_ct: CancellationToken,
}

impl Progress<'_> {
    async fn send(&mut self, update: ProgressUpdate) {
        let Some(token) = &self.token else { return };
        if self.request_ct.is_cancelled() {
            return;
        }
        self.count += 1;
        let param = ProgressNotificationParam::new(token.clone(), f64::from(self.count))
            .with_message(update.to_string());
        // A client that went away is noticed by the service loop; progress is best effort.
        let _ = self.peer.notify_progress(param).await;
    }
}

/// What went wrong, in a sentence, for a turn that did not complete.
fn describe(reason: &TurnEndReason) -> String {
    match reason {
        TurnEndReason::Completed => "completed".into(),
        TurnEndReason::Aborted { reason } if reason.is_empty() => "aborted".into(),
        TurnEndReason::Aborted { reason } => format!("aborted ({reason})"),
        TurnEndReason::Blocked { reason } => format!(
            "blocked ({})",
            reason.as_deref().unwrap_or("no reason given")
        ),
        TurnEndReason::Error { code, message } => {
            let detail = message
                .strip_prefix(code.as_str())
                .and_then(|m| m.strip_prefix(": "))
                .unwrap_or(message);
            format!("error {code}: {detail}")
        }
        TurnEndReason::MaxTokens => "the model hit its output limit (max-tokens)".into(),
        TurnEndReason::Interrupted => "interrupted".into(),
    }
}

/// The tool result for `answer`: the final text and a line naming the session as text
/// content, `{sessionId, finalText, turnEnd}` (plus `detail` when the turn did not complete)
/// as structured content; an error result unless the turn completed.
pub fn answer_result(answer: &Answer) -> CallToolResult {
    let session = &answer.session_id;
    let kind = answer.turn_end.kind();
    if answer.completed() {
        let text = if answer.final_text.is_empty() {
            "(keel ended the turn without a message)".to_owned()
        } else {
            answer.final_text.clone()
        };
        let mut result = CallToolResult::success(vec![
            ContentBlock::text(text),
            ContentBlock::text(format!(
                "[keel session {session}: continue it with keel_reply]"
            )),
        ]);
        result.structured_content = Some(json!({
            "sessionId": session,
            "finalText": answer.final_text,
            "turnEnd": kind,
        }));
        return result;
    }
    let detail = describe(&answer.turn_end);
    let mut content = vec![ContentBlock::text(format!(
        "keel: the turn ended {detail} (session {session})"
    ))];
    if !answer.final_text.is_empty() {
        content.push(ContentBlock::text(answer.final_text.clone()));
    }
    let mut result = CallToolResult::error(content);
    result.structured_content = Some(json!({
        "sessionId": session,
        "finalText": answer.final_text,
        "turnEnd": kind,
        "detail": detail,
    }));
    result
}

impl<R: TaskRunner> ServerHandler for KeelServer<R> {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(
                Implementation::new("keel", env!("CARGO_PKG_VERSION")).with_title("keel"),
            )
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        tools().into_iter().find(|t| t.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        // Arguments that do not fit the schema are a tool error the calling model can read and
        // correct (MCP 2025-11-25: input validation errors are tool results, not protocol
        // errors); an unknown tool stays a protocol error.
        let parsed = match request.name.as_ref() {
            KEEL_TOOL => parse_task(&args).map(Job::Task),
            REPLY_TOOL => parse_reply(&args).map(Job::Reply),
            other => {
                return Err(ErrorData::invalid_params(
                    format!("unknown tool {other:?}; this server has {KEEL_TOOL} and {REPLY_TOOL}"),
                    None,
                ));
            }
        };
        let job = match parsed {
            Ok(job) => job,
            Err(e) => {
                return Ok(CallToolResult::error(vec![ContentBlock::text(e.message)]).into());
            }
        };
        let token = context.meta.get_progress_token();
        Ok(self
            .call(job, token, &context.peer, context.ct.clone())
            .await
            .into())
    }
}

/// The server as rmcp serves it: [`KeelServer`], with "method not found" (-32601) answers that
/// say more than the method's name (rmcp's own message is only the name).
#[derive(Debug, Clone)]
pub(crate) struct Explained<S>(pub S);

/// `error` with a message naming what the server offers, when it is a bare -32601.
fn explain_error(error: ErrorData) -> ErrorData {
    if error.code != ErrorCode::METHOD_NOT_FOUND || error.message.contains(' ') {
        return error;
    }
    let method = error.message.clone();
    ErrorData::new(
        ErrorCode::METHOD_NOT_FOUND,
        format!(
            "method not found: keel mcp-server does not offer {method} (it offers the tools \
             {KEEL_TOOL} and {REPLY_TOOL}: tools/list and tools/call; no resources, prompts, \
             completions or logging)"
        ),
        error.data,
    )
}

impl<S: rmcp::Service<RoleServer>> rmcp::Service<RoleServer> for Explained<S> {
    async fn handle_request(
        &self,
        request: rmcp::model::ClientRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ServerResult, ErrorData> {
        self.0
            .handle_request(request, context)
            .await
            .map_err(explain_error)
    }

    async fn handle_notification(
        &self,
        notification: rmcp::model::ClientNotification,
        context: rmcp::service::NotificationContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.0.handle_notification(notification, context).await
    }

    fn get_info(&self) -> ServerConfig {
        self.0.get_info()
    }

    fn supported_protocol_versions(
        &self,
    ) -> std::borrow::Cow<'static, [rmcp::model::ProtocolVersion]> {
        self.0.supported_protocol_versions()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_bare_method_not_found_says_what_the_server_offers() {
        let e = explain_error(ErrorData::new(
            ErrorCode::METHOD_NOT_FOUND,
            "resources/list",
            None,
        ));
        assert_eq!(e.code, ErrorCode::METHOD_NOT_FOUND);
        assert!(
            e.message.contains("does not offer resources/list") && e.message.contains("keel_reply"),
            "{}",
            e.message
        );
        let other = ErrorData::invalid_params("bad", None);
        assert_eq!(explain_error(other.clone()), other);
    }

    #[test]
    fn a_completed_answer_is_text_plus_structured_content() {
        let r = answer_result(&Answer {
            session_id: "s1".into(),
            final_text: "done".into(),
            turn_end: TurnEndReason::Completed,
        });
        assert_eq!(r.is_error, Some(false));
        assert_eq!(
            r.structured_content,
            Some(json!({"sessionId": "s1", "finalText": "done", "turnEnd": "completed"}))
        );
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["content"][0]["text"], "done");
        assert!(v["content"][1]["text"].as_str().unwrap().contains("s1"));
    }

    #[test]
    fn a_failed_turn_is_an_error_result_naming_the_reason() {
        let r = answer_result(&Answer {
            session_id: "s2".into(),
            final_text: String::new(),
            turn_end: TurnEndReason::Error {
                code: "AUTH".into(),
                message: "AUTH: bad key".into(),
            },
        });
        assert_eq!(r.is_error, Some(true));
        let v = serde_json::to_value(&r).unwrap();
        let text = v["content"][0]["text"].as_str().unwrap();
        assert!(text.contains("error AUTH: bad key"), "{text}");
        assert_eq!(v["structuredContent"]["turnEnd"], "error");
        assert_eq!(v["structuredContent"]["detail"], "error AUTH: bad key");
    }
}
