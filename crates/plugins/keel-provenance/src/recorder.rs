//! The capture API: one method per pipeline stage, turning what the stage observed into a
//! receipt, chaining it, and compiling it into the graph at once.
//!
//! Call order for one tool call (stages that did not happen are simply not called):
//!
//! ```text
//! assistant_message(event)                   once per committed assistant event
//!   assistant_tool_call(message, call, …)    once per call block, raw argument string
//!   tool_call_event(call, event)             the durable tool/call event
//!   pre_execute_enter(call, view)            the call as policy saw it
//!   pre_execute_decision(call, decision)     allow / deny / ask → approved | denied
//!   guard_denial(call, guard, reason)        each guard that denied
//!   execute_enter(call, Dispatch{token, parent_token, arguments})
//!   subagent_join(call, ChildLink)           a child session's result joining this call
//!   execute_result(token, value | error)
//!   post_execute(call, incoming, decision)   accept / replace value / replace content / block
//!   settled(call, SettledResult)             the frozen final result (inside tools/settled)
//!   tool_result_event(call, event_id, event) aliases = [call id, event id]
//! ```
//!
//! Every stage after `assistant_tool_call` continues the call's chain from its last outcome
//! (bindings name that outcome's node id), so interleaved stages of concurrent calls keep
//! independent chains. `settled` classifies a call that did not reach a result into an explicit
//! disposition (see [`classify`]).
//!
//! Capture never fails the caller: methods return nothing. A payload that cannot be
//! canonicalized (lone surrogate, NaN, too deep…) is replaced by a `capture/failure` receipt,
//! which marks the graph incomplete (`complete: false`, `failures`); the tool result is
//! untouched. Failures are receipts too, so a journal replays to the same snapshot.

pub use crate::capture::{
    Approval, CallFacts, ChildLink, Dispatch, ExecuteResult, PostDecision, PreDecision,
    SettledResult, classify,
};
use crate::fxhash::FxMap as HashMap;
use crate::graph::{CompileError, Snapshot};
use crate::model::{Binding, Disposition, Origin, Stage};
use crate::node::Id;
use crate::receipt::{Encoder, RECEIPT_PREFIX, Receipt, ReceiptInput, ReceiptView};
use keel_jcs::{JcsError, Payload};

/// What the recorder knows about one open call.
#[derive(Debug, Clone, Default)]
struct CallState {
    last: Option<Id>,
    /// Calls dispatched inside this call's dispatch (a `run_code` program's sub-calls), in
    /// the order they were dispatched.
    nested: Vec<Id>,
    denied: bool,
    executed: bool,
    exec_failed: bool,
    blocked: bool,
    done: bool,
}

/// In-memory capture: receipts, hash chain and graph. Pending journal lines accumulate until
/// the [`crate::Journal`] writes them at flush (or [`Recorder::drain_lines`]).
#[derive(Debug)]
pub struct Recorder {
    graph: Snapshot,
    run_id: String,
    encoder: Encoder,
    /// Journal lines not yet written, each ending in a newline.
    pending: Vec<u8>,
    pending_count: usize,
    /// `false`: memory-only capture, no journal lines are kept (hashes are still computed).
    keep_lines: bool,
    calls: HashMap<Id, CallState>,
    /// Chain outcome id → call id (the newest outcome of each call only).
    outcome_call: HashMap<Id, Id>,
    tokens: HashMap<String, Id>,
    /// Execution token → its `tools/execute:enter` outcome (parents of nested dispatch).
    token_outcome: HashMap<String, Id>,
    /// `tools/execute:enter` outcome → its call (to find the call a nested dispatch is in).
    dispatch_call: HashMap<Id, Id>,
    messages: HashMap<String, Id>,
}

const CALL_SOURCE: &str = "call:";
/// The role of a nested dispatch's binding to the dispatch it runs in.
const NESTED_IN: &str = "nested_in";

/// The fields of a compiled receipt that call bookkeeping reads.
#[derive(Debug, Clone, Copy)]
struct Observed<'a> {
    stage: Stage,
    native_id: &'a str,
    transform: &'a str,
    bindings: &'a [Binding],
}

impl Recorder {
    /// A recorder for run (session) `run_id`. Nothing time- or random-dependent is hashed: the
    /// same workload gives the same bytes.
    pub fn new(run_id: &str) -> Recorder {
        Recorder {
            graph: Snapshot::new(run_id),
            run_id: run_id.to_owned(),
            encoder: Encoder::default(),
            pending: Vec::new(),
            pending_count: 0,
            keep_lines: true,
            calls: HashMap::default(),
            outcome_call: HashMap::default(),
            tokens: HashMap::default(),
            token_outcome: HashMap::default(),
            dispatch_call: HashMap::default(),
            messages: HashMap::default(),
        }
    }

    /// A recorder that keeps no journal lines (memory-only capture): receipts are still hashed
    /// and chained, so the graph is the same.
    pub fn without_lines(mut self) -> Recorder {
        self.keep_lines = false;
        self
    }

    /// Rebuild the recorder state from decoded receipts (replay of a journal).
    pub fn replay(
        run_id: &str,
        receipts: &[Receipt],
    ) -> Result<Recorder, crate::graph::CompileError> {
        let mut r = Recorder::new(run_id);
        for receipt in receipts {
            let primary = r.graph.apply_receipt(receipt.view())?;
            let seen = Observed {
                stage: receipt.stage,
                native_id: &receipt.native_id,
                transform: &receipt.transform,
                bindings: &receipt.bindings,
            };
            r.observe(seen, primary.as_ref());
        }
        Ok(r)
    }

    /// The graph so far.
    pub fn snapshot(&self) -> &Snapshot {
        &self.graph
    }

    /// Journal lines not yet written, oldest first.
    pub fn pending_lines(&self) -> Vec<&str> {
        std::str::from_utf8(&self.pending)
            .unwrap_or_default()
            .lines()
            .collect()
    }

    /// The pending journal lines as bytes, each ending in a newline, and how many there are.
    pub fn pending_bytes(&self) -> (&[u8], usize) {
        (&self.pending, self.pending_count)
    }

    /// Forget the pending journal lines (written, or not wanted).
    pub fn clear_pending(&mut self) {
        self.pending.clear();
        self.pending_count = 0;
    }

    /// Take the pending journal lines.
    pub fn drain_lines(&mut self) -> Vec<String> {
        let lines = self
            .pending_lines()
            .into_iter()
            .map(str::to_owned)
            .collect();
        self.clear_pending();
        lines
    }

    /// Call ids with no `tool/result` (or close) captured yet.
    pub fn open_calls(&self) -> Vec<&str> {
        let mut open: Vec<&str> = self
            .calls
            .iter()
            .filter(|(_, s)| !s.done)
            .map(|(k, _)| &**k)
            .collect();
        open.sort_unstable();
        open
    }

    /// Encode a receipt, append its line and compile it. Returns the primary outcome node id,
    /// or why it failed (nothing is kept then).
    fn record(
        &mut self,
        stage: Stage,
        native_id: &str,
        transform: &str,
        payload: &Payload<'_>,
        bindings: &[Binding],
        aliases: &[String],
    ) -> Result<Option<Id>, RecordError> {
        let sequence = self.graph.receipts().len() as u64;
        let previous = self
            .graph
            .receipts()
            .last()
            .map(|r| r.receipt_id.get(RECEIPT_PREFIX.len()..).unwrap_or(""));
        let input = ReceiptInput {
            run_id: &self.run_id,
            sequence,
            stage,
            native_id,
            transform,
            bindings,
            outcome_aliases: aliases,
            previous,
        };
        let mark = self.pending.len();
        let line = if self.keep_lines {
            Some(&mut self.pending)
        } else {
            None
        };
        let encoded = self
            .encoder
            .encode(input, payload, line)
            .map_err(RecordError::Payload)?;
        let view = ReceiptView {
            receipt_id: &encoded.receipt_id,
            run_id: &self.run_id,
            sequence,
            stage,
            native_id,
            transform,
            bindings,
            outcome_aliases: aliases,
            payload_sha256: encoded.payload_sha256.as_str(),
        };
        match self.graph.apply_receipt(view) {
            Ok(primary) => {
                if self.keep_lines {
                    self.pending_count += 1;
                }
                let seen = Observed {
                    stage,
                    native_id,
                    transform,
                    bindings,
                };
                self.observe(seen, primary.as_ref());
                Ok(primary)
            }
            Err(e) => {
                self.pending.truncate(mark);
                Err(RecordError::Compile(e))
            }
        }
    }

    /// Record a receipt; on a payload or compile failure record a `capture/failure` instead.
    /// Returns the primary outcome node id.
    fn capture(
        &mut self,
        stage: Stage,
        native_id: &str,
        transform: &str,
        payload: &Payload<'_>,
        bindings: &[Binding],
        aliases: &[String],
    ) -> Option<Id> {
        match self.record(stage, native_id, transform, payload, bindings, aliases) {
            Ok(primary) => primary,
            Err(reason) => {
                self.failure(stage, native_id, &reason.to_string());
                None
            }
        }
    }

    /// Record a capture failure receipt (marks the graph incomplete).
    pub(crate) fn failure(&mut self, stage: Stage, native_id: &str, detail: &str) {
        let code = detail.split(':').next().unwrap_or("capture_failed");
        let members = [
            ("stage", Payload::Str(stage.as_str())),
            ("detail", Payload::Str(detail)),
        ];
        // Only strings we control: encoding cannot fail, and neither can applying (no bindings).
        let _ = self.record(
            Stage::CaptureFailure,
            native_id,
            code,
            &Payload::Obj(&members),
            &[],
            &[],
        );
    }

    /// Update call bookkeeping from a compiled receipt (shared by live capture and replay).
    fn observe(&mut self, r: Observed<'_>, primary: Option<&Id>) {
        let call_id: Option<Id> = match r.stage {
            Stage::AssistantMessage => {
                if let Some(p) = primary {
                    self.messages.insert(r.native_id.to_owned(), p.clone());
                }
                return;
            }
            Stage::CaptureFailure | Stage::AssistantAttempt => return,
            Stage::AssistantToolCall => {
                let c = Id::from(r.native_id);
                self.calls.insert(c.clone(), CallState::default());
                Some(c)
            }
            _ => match r.bindings.first().map(|b| &b.origin) {
                Some(Origin::Outcome {
                    outcome,
                    run_id: None,
                }) => self.outcome_call.remove(&**outcome),
                Some(Origin::Source { source }) => source.strip_prefix(CALL_SOURCE).map(|c| {
                    let c = Id::from(c);
                    self.calls.insert(c.clone(), CallState::default());
                    c
                }),
                _ => None,
            },
        };
        let Some(call_id) = call_id else { return };
        if let Some(p) = primary {
            self.outcome_call.insert(p.clone(), call_id.clone());
        }
        if r.stage == Stage::ExecuteEnter {
            self.tokens.insert(r.native_id.to_owned(), call_id.clone());
            if let Some(p) = primary {
                self.token_outcome.insert(r.native_id.to_owned(), p.clone());
                self.dispatch_call.insert(p.clone(), call_id.clone());
            }
            let parent = r.bindings.iter().find_map(|b| match &b.origin {
                Origin::Outcome {
                    outcome,
                    run_id: None,
                } if b.relation_role == NESTED_IN => self.dispatch_call.get(&**outcome).cloned(),
                _ => None,
            });
            if let Some(parent) = parent.and_then(|p| self.calls.get_mut(&p)) {
                parent.nested.push(call_id.clone());
            }
        }
        let Some(state) = self.calls.get_mut(&call_id) else {
            return;
        };
        if let Some(p) = primary {
            state.last = Some(p.clone());
        }
        match r.stage {
            Stage::PreExecute if r.transform == "deny" || r.transform == "ask:denied" => {
                state.denied = true
            }
            Stage::Guard => state.denied = true,
            Stage::Execute => {
                state.executed = true;
                state.exec_failed = r.transform == "error";
            }
            Stage::PostExecute if r.transform == "block" => state.blocked = true,
            Stage::ToolResult | Stage::Close => state.done = true,
            _ => {}
        }
    }

    /// The binding continuing `call_id`'s chain (a `call:` source when its start was not seen).
    fn chain(&self, call_id: &str, role: &'static str) -> Binding {
        match self.calls.get(call_id).and_then(|s| s.last.as_ref()) {
            Some(last) => Binding::continues(last, role),
            None => Binding::from_source(format!("{CALL_SOURCE}{call_id}"), role),
        }
    }

    /// `assistant/message`: the committed assistant event that proposes calls.
    pub fn assistant_message(&mut self, event_id: &str, event: Payload<'_>) {
        let b = [Binding::from_source(
            format!("model:{event_id}"),
            "generates",
        )];
        self.capture(Stage::AssistantMessage, event_id, "commit", &event, &b, &[]);
    }

    /// `assistant/attempt`: an assistant attempt that never became a surface message (e.g. a
    /// stream cut before commit); records the `no_surface_message` disposition.
    pub fn assistant_attempt_abandoned(&mut self, attempt_id: &str, detail: Payload<'_>) {
        let mut b = Binding::from_source(format!("model:{attempt_id}"), "generates");
        b.disposition = Some(Disposition::NoSurfaceMessage);
        self.capture(
            Stage::AssistantAttempt,
            attempt_id,
            "abandon",
            &detail,
            &[b],
            &[],
        );
    }

    /// `assistant/tool-call`: one call block of the message, with the raw argument string.
    pub fn assistant_tool_call(
        &mut self,
        message_event_id: &str,
        call_id: &str,
        tool_name: &str,
        raw_arguments: &str,
    ) {
        let b = match self.messages.get(message_event_id) {
            Some(m) => Binding::continues(m, "proposes"),
            None => Binding::from_source(format!("model:{message_event_id}"), "proposes"),
        };
        let members = [
            ("arguments", Payload::Str(raw_arguments)),
            ("call_id", Payload::Str(call_id)),
            ("message_event_id", Payload::Str(message_event_id)),
            ("name", Payload::Str(tool_name)),
        ];
        self.capture(
            Stage::AssistantToolCall,
            call_id,
            "propose",
            &Payload::Obj(&members),
            &[b],
            &[],
        );
    }

    /// `tool/call`: the durable event.
    pub fn tool_call_event(&mut self, call_id: &str, event_id: &str, event: Payload<'_>) {
        let b = [self.chain(call_id, "records")];
        let members = [("event", event), ("event_id", Payload::Str(event_id))];
        self.capture(
            Stage::ToolCall,
            call_id,
            "record",
            &Payload::Obj(&members),
            &b,
            &[],
        );
    }

    /// `tools/pre-execute:enter`: the call as the policy saw it.
    pub fn pre_execute_enter(&mut self, call_id: &str, call: Payload<'_>) {
        let b = [self.chain(call_id, "submits")];
        self.capture(Stage::PreExecuteEnter, call_id, "enter", &call, &b, &[]);
    }

    /// `tools/pre-execute`: the actual decision.
    pub fn pre_execute_decision(&mut self, call_id: &str, decision: PreDecision<'_>) {
        let b = [self.chain(call_id, "decides")];
        let (transform, reason) = match decision {
            PreDecision::Allow => ("allow", None),
            PreDecision::Deny { reason } => ("deny", Some(reason)),
            PreDecision::Ask(Approval::Approved) => ("ask:approved", None),
            PreDecision::Ask(Approval::Denied) => ("ask:denied", None),
        };
        let mut members = vec![("decision", Payload::Str(transform))];
        if let Some(r) = reason {
            members.push(("reason", Payload::Str(r)));
        }
        self.capture(
            Stage::PreExecute,
            call_id,
            transform,
            &Payload::Obj(&members),
            &b,
            &[],
        );
    }

    /// `tools/guard`: a guard denied the call.
    pub fn guard_denial(&mut self, call_id: &str, guard: &str, reason: &str) {
        let b = [self.chain(call_id, "guards")];
        let members = [
            ("guard", Payload::Str(guard)),
            ("reason", Payload::Str(reason)),
        ];
        self.capture(
            Stage::Guard,
            call_id,
            "deny",
            &Payload::Obj(&members),
            &b,
            &[],
        );
    }

    /// `tools/execute:enter`: the body is dispatched with these effective arguments.
    pub fn execute_enter(&mut self, call_id: &str, dispatch: Dispatch<'_>) {
        let mut b = vec![self.chain(call_id, "dispatches")];
        if let Some(parent) = dispatch
            .parent_token
            .and_then(|t| self.token_outcome.get(t))
        {
            b.push(Binding::continues(parent, NESTED_IN));
        }
        let mut members = vec![
            ("arguments", dispatch.arguments),
            ("call_id", Payload::Str(call_id)),
            ("token", Payload::Str(dispatch.token)),
        ];
        if let Some(p) = dispatch.parent_token {
            members.push(("parent_token", Payload::Str(p)));
        }
        self.capture(
            Stage::ExecuteEnter,
            dispatch.token,
            "dispatch",
            &Payload::Obj(&members),
            &b,
            &[],
        );
    }

    /// `subagent/join`: a child session's node becomes part of this call's formation.
    pub fn subagent_join(&mut self, call_id: &str, child: ChildLink<'_>) {
        let child_origin = Binding {
            origin: Origin::Outcome {
                outcome: Id::from(child.node_id),
                run_id: Some(Id::from(child.run_id)),
            },
            outcome: 0,
            relation_role: "joins_child".into(),
            disposition: None,
        };
        let b = [self.chain(call_id, "awaits"), child_origin];
        let members = [
            ("child_graph_id", Payload::Str(child.graph_id)),
            ("child_node_id", Payload::Str(child.node_id)),
            ("child_run_id", Payload::Str(child.run_id)),
        ];
        self.capture(
            Stage::SubagentJoin,
            child.run_id,
            "join",
            &Payload::Obj(&members),
            &b,
            &[],
        );
    }

    /// `tools/execute`: what the body returned (value or error).
    pub fn execute_result(&mut self, token: &str, result: ExecuteResult<'_>) {
        let call_id = self
            .tokens
            .get(token)
            .cloned()
            .unwrap_or_else(|| Id::from(token));
        let b = [self.chain(&call_id, "returns")];
        let code = match result {
            ExecuteResult::Error { code: Some(c), .. } => Some(c.as_str()),
            _ => None,
        };
        let (transform, members) = match result {
            ExecuteResult::Value(v) => ("return", vec![("value", v)]),
            ExecuteResult::Error { message, .. } => {
                let mut m = vec![("error", Payload::Str(message))];
                if let Some(c) = code {
                    m.push(("code", Payload::Str(c)));
                }
                ("error", m)
            }
        };
        self.capture(
            Stage::Execute,
            token,
            transform,
            &Payload::Obj(&members),
            &b,
            &[],
        );
    }

    /// `tools/post-execute`: the incoming result and what post-execute did to it. The journal
    /// keeps `incoming` even when it was replaced; queries never show payloads.
    pub fn post_execute(
        &mut self,
        call_id: &str,
        incoming: Payload<'_>,
        decision: PostDecision<'_>,
    ) {
        let b = [self.chain(call_id, "transforms")];
        let (transform, extra) = match decision {
            PostDecision::Accept => ("accept", None),
            PostDecision::ReplaceValue(v) => ("replace_value", Some(("replacement", v))),
            PostDecision::ReplaceContent(c) => ("replace_content", Some(("replacement", c))),
            PostDecision::Block { reason } => ("block", Some(("reason", Payload::Str(reason)))),
        };
        let mut members = vec![
            ("decision", Payload::Str(transform)),
            ("incoming", incoming),
        ];
        members.extend(extra);
        self.capture(
            Stage::PostExecute,
            call_id,
            transform,
            &Payload::Obj(&members),
            &b,
            &[],
        );
    }

    /// `tools/settled`: the frozen final result. A call that did not reach a result gets its
    /// explicit disposition here.
    /// The results of calls nested in this one (a `run_code` program's sub-calls) are bound
    /// to it too (`incorporates_nested`), so a trace of the result reaches them.
    pub fn settled(&mut self, call_id: &str, result: SettledResult<'_>) {
        let mut b = self.chain(call_id, "settles");
        let state = self.calls.get(call_id).cloned().unwrap_or_default();
        b.disposition = classify(&state_view(&state), result.is_error, result.error_code);
        let mut bindings = vec![b];
        for child in &state.nested {
            if self.calls.get(child).is_some_and(|c| c.last.is_some()) {
                bindings.push(self.chain(child, "incorporates_nested"));
            }
        }
        let mut members = vec![
            ("content", result.content),
            ("is_error", Payload::Bool(result.is_error)),
            ("value", result.value),
        ];
        if let Some(c) = result.error_code {
            members.push(("error_code", Payload::Str(c.as_str())));
        }
        let transform = bindings[0]
            .disposition
            .map_or("settle", Disposition::as_str);
        self.capture(
            Stage::Settled,
            call_id,
            transform,
            &Payload::Obj(&members),
            &bindings,
            &[],
        );
    }

    /// `tool/result`: the durable event; its outcome is aliased by the call id and the event id.
    pub fn tool_result_event(&mut self, call_id: &str, event_id: &str, event: Payload<'_>) {
        let b = [self.chain(call_id, "commits")];
        let aliases = [call_id.to_owned(), event_id.to_owned()];
        let members = [("event", event), ("event_id", Payload::Str(event_id))];
        self.capture(
            Stage::ToolResult,
            call_id,
            "commit",
            &Payload::Obj(&members),
            &b,
            &aliases,
        );
    }

    /// Close every open call (no `tool/result` captured) with `outcome_unobserved`. Called at
    /// journal close and after a resume; `reason` is recorded (`close`, `resume`).
    pub fn close_open_calls(&mut self, reason: &str) {
        let open: Vec<String> = self.open_calls().into_iter().map(str::to_owned).collect();
        for call_id in open {
            let mut b = self.chain(&call_id, "closes");
            b.disposition = Some(Disposition::OutcomeUnobserved);
            let members = [
                ("call_id", Payload::Str(&call_id)),
                ("reason", Payload::Str(reason)),
            ];
            self.capture(
                Stage::Close,
                &call_id,
                reason,
                &Payload::Obj(&members),
                &[b],
                &[],
            );
        }
    }
}

fn state_view(s: &CallState) -> CallFacts {
    CallFacts {
        denied: s.denied,
        executed: s.executed,
        execution_failed: s.exec_failed,
        blocked: s.blocked,
    }
}

/// Why a receipt was not recorded: `code: message`, the code (before the colon) being the
/// `capture/failure` receipt's transform.
#[derive(Debug, thiserror::Error)]
enum RecordError {
    /// The payload cannot be encoded as canonical JSON.
    #[error("{}: {}", payload_code(.0), .0)]
    Payload(JcsError),
    /// The receipt does not compile into the graph.
    #[error("compile: {0}")]
    Compile(CompileError),
}

/// The failure code of a payload that cannot be encoded.
fn payload_code(e: &JcsError) -> &'static str {
    match e {
        JcsError::NonFinite { .. } => "payload_not_canonical",
        JcsError::LoneSurrogate { .. } => "payload_not_canonical",
        JcsError::DuplicateKey { .. } => "payload_not_canonical",
        JcsError::TooDeep => "payload_too_deep",
        JcsError::Syntax { .. } => "payload_not_json",
    }
}
