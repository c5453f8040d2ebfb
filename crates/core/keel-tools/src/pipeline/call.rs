//! One call through the pipeline: resolve the tool, parse and validate the arguments, the
//! sandbox escalation a call asks for (a person approves it), the built-in policy and
//! `tools/pre-execute` (with approval), `tools/guard`, the checkpoint, the
//! `tools/execute` chain around the body (timeout, cancellation), `tools/post-execute`, spill.
//! Every failure becomes an error [`ToolOutcome`] with its code; nothing here panics on input.

use super::{BatchOptions, Dispatched, Pipeline};
use crate::caller::{ApprovalOutcome, ToolCaller, ToolOutcome};
use crate::error::ToolError;
use crate::escalation::{self, Escalation};
use crate::plan::plan_mode_denial;
use crate::registry::{ArgsShape, RegisteredTool};
use crate::schema;
use crate::seams::{
    BodyRunner, ExecToken, ExecuteNext, GuardDecision, HookContext, PipelineObserver, PostDecision,
    PreDecision, ResultDraft,
};
use crate::tool::{Tool, ToolContext, ToolEffect, ToolOutput};
use crate::workspace::SandboxMode;
use futures::future::BoxFuture;
use keel_protocol::{ContentBlock, ToolCallBlock, ToolErrorCode};
use serde_json::{Map, Value};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The innermost step of the execute chain: the body under its timeout and the cancel token.
struct Body<'a> {
    tool: &'a dyn Tool,
    ctx: &'a ToolContext<'a>,
    name: &'a str,
    timeout: Option<Duration>,
    cancel: &'a CancellationToken,
    grace: Duration,
    hook_ctx: &'a HookContext<'a>,
    observers: &'a [Arc<dyn PipelineObserver>],
}

impl BodyRunner for Body<'_> {
    fn run(&self, args: Value) -> BoxFuture<'_, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            for o in self.observers {
                o.body_dispatched(self.hook_ctx, &args);
            }
            let body = self.tool.execute(args, self.ctx);
            let timed = async {
                match self.timeout {
                    Some(limit) => match tokio::time::timeout(limit, body).await {
                        Ok(result) => result,
                        Err(_) => Err(ToolError::Timeout {
                            message: format!(
                                "'{}' did not finish within {:.1}s and was stopped",
                                self.name,
                                limit.as_secs_f64()
                            ),
                            meta: None,
                        }),
                    },
                    None => body.await,
                }
            };
            let abandoned = async {
                self.cancel.cancelled().await;
                tokio::time::sleep(self.grace).await;
            };
            let result = tokio::select! {
                biased;
                result = timed => result,
                () = abandoned => Err(ToolError::Aborted(format!(
                    "'{}' was cancelled while running and was stopped",
                    self.name
                ))),
            };
            for o in self.observers {
                o.body_returned(self.hook_ctx, &result);
            }
            result
        })
    }
}

fn parse_args(raw: &str) -> Result<Value, serde_json::Error> {
    if raw.trim().is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    serde_json::from_str(raw)
}

/// The pipeline's first phase for one call: parse the model's raw `arguments` string of tool
/// `name` (blank means `{}`), read earlier parameter names as the new ones, and validate it
/// against the tool's `parameters` schema (closed to undeclared properties when `shape` says
/// so). `Err` is the `INVALID_ARGS` message the model gets back. Public so the fuzz target
/// (`fuzz/fuzz_targets/tool_args.rs`) drives exactly this code; not a stable API.
#[doc(hidden)]
pub fn parse_and_validate(
    name: &str,
    parameters: &Value,
    shape: ArgsShape,
    raw: &str,
) -> Result<Value, ArgsError> {
    let mut args = parse_args(raw).map_err(|source| ArgsError::NotJson {
        tool: name.to_owned(),
        source,
    })?;
    if let Value::Object(map) = &mut args {
        for &(old, new) in shape.aliases {
            let Some(v) = map.remove(old) else { continue };
            if map.contains_key(new) {
                return Err(ArgsError::Schema {
                    tool: name.to_owned(),
                    violations: format!(
                        "/{old}: '{old}' is the earlier name of '{new}'; send '{new}' only"
                    ),
                });
            }
            map.insert(new.to_owned(), v);
        }
    }
    let violations = if shape.closed {
        schema::validate_closed(parameters, &args)
    } else {
        schema::validate(parameters, &args)
    };
    if !violations.is_empty() {
        return Err(ArgsError::Schema {
            tool: name.to_owned(),
            violations: schema::describe(&violations),
        });
    }
    Ok(args)
}

/// Why a call's arguments were refused (`INVALID_ARGS`); the text is what the model reads.
#[derive(Debug, thiserror::Error)]
pub enum ArgsError {
    /// The `arguments` string is not JSON.
    #[error(
        "arguments for '{tool}' are not valid JSON ({source}); send one JSON object matching the tool's parameters"
    )]
    NotJson {
        /// The tool called.
        tool: String,
        /// The parse error.
        source: serde_json::Error,
    },
    /// The arguments do not match the tool's parameter schema.
    #[error("arguments for '{tool}' do not match its parameters: {violations}")]
    Schema {
        /// The tool called.
        tool: String,
        /// The violations, as the model reads them (`/offset: expected integer, …`).
        violations: String,
    },
}

fn error_draft(code: ToolErrorCode, message: &str) -> ResultDraft {
    ResultDraft {
        content: vec![ContentBlock::text(format!("{code}: {message}"))],
        is_error: true,
        code: Some(code),
        value: None,
    }
}

impl Pipeline {
    pub(super) async fn run_call(
        &self,
        call: &ToolCallBlock,
        caller: &dyn ToolCaller,
        opts: &BatchOptions,
    ) -> Dispatched {
        let token = ExecToken::fresh();
        let registry = self.registry();
        let direct = opts.parent.is_none();
        let entry = registry.get(&call.name);
        let hidden = entry
            .filter(|_| direct)
            .and_then(|_| self.hooks.hidden(&call.name));
        if let Some(hint) = hidden {
            let message = format!("'{}' cannot be called directly: {hint}", call.name);
            return Dispatched {
                outcome: ToolOutcome::error(&call.id, ToolErrorCode::UnknownTool, &message),
                token,
                tool: None,
            };
        }
        let Some(entry) = entry else {
            let names: Vec<&str> = registry
                .names()
                .filter(|n| !direct || self.hooks.hidden(n).is_none())
                .collect();
            let message = format!(
                "no tool named '{}'. Available tools: {}",
                call.name,
                names.join(", ")
            );
            return Dispatched {
                outcome: ToolOutcome::error(&call.id, ToolErrorCode::UnknownTool, &message),
                token,
                tool: None,
            };
        };
        let info = entry.info();
        let ctx = HookContext {
            call,
            tool: Some(info),
            token,
            parent: opts.parent,
            sandbox: self.sandbox(),
        };
        let draft = self.phases(&ctx, entry, caller, opts).await;
        let outcome = self.finish(call, draft);
        Dispatched {
            outcome,
            token,
            tool: Some(info),
        }
    }

    async fn phases(
        &self,
        ctx: &HookContext<'_>,
        entry: &RegisteredTool,
        caller: &dyn ToolCaller,
        opts: &BatchOptions,
    ) -> ResultDraft {
        let call = ctx.call;
        let name = call.name.as_str();
        let parameters = &entry.schema().parameters;
        let mut args = match parse_and_validate(name, parameters, entry.shape(), &call.arguments) {
            Ok(v) => v,
            Err(e) => return error_draft(ToolErrorCode::InvalidArgs, &e.to_string()),
        };
        let escalation = match entry.tool().escalates() {
            true => match Escalation::take(&mut args) {
                Ok(e) => e.filter(|e| e.widens(ctx.sandbox)),
                Err(e) => {
                    let message = format!("arguments for '{name}' do not match: {e}");
                    return error_draft(ToolErrorCode::InvalidArgs, &message);
                }
            },
            false => None,
        };
        let cancelled = || {
            error_draft(
                ToolErrorCode::AbortedBeforeDispatch,
                &format!("the turn was cancelled before '{name}' started; it did not run"),
            )
        };
        if opts.cancel.is_cancelled() {
            return cancelled();
        }
        // An approved escalation runs this one call in a workspace of the wider mode, and the
        // hooks see that mode.
        let wider_workspace;
        let wider_ctx;
        let (ctx, workspace) = match &escalation {
            None => (ctx, &self.workspace),
            Some(e) => {
                if let Err(refused) = self.escalate(ctx, e, &args, caller, &opts.cancel).await {
                    return refused.unwrap_or_else(cancelled);
                }
                wider_workspace = self.workspace.with_sandbox(e.mode);
                wider_ctx = HookContext {
                    sandbox: e.mode,
                    ..*ctx
                };
                (&wider_ctx, &wider_workspace)
            }
        };
        let observers = self.hooks.observers.as_slice();
        for o in observers {
            o.pre_execute_entered(ctx, &args);
        }
        let decision = self.pre_execute(ctx, &args).await;
        if let PreDecision::Allow | PreDecision::Deny(_) = &decision {
            for o in observers {
                o.pre_execute_decided(ctx, &decision, None);
            }
        }
        match decision {
            PreDecision::Allow => {}
            PreDecision::Deny(reason) => return error_draft(ToolErrorCode::Denied, &reason),
            PreDecision::Ask(reason) => {
                let decided = tokio::select! {
                    d = caller.ask_approval(call, &reason) => d,
                    () = opts.cancel.cancelled() => return cancelled(),
                };
                if !observers.is_empty() {
                    let asked = PreDecision::Ask(reason.clone());
                    for o in observers {
                        o.pre_execute_decided(ctx, &asked, Some(&decided));
                    }
                }
                if let ApprovalOutcome::Denied { reason: why }
                | ApprovalOutcome::Unanswered { reason: why } = decided
                {
                    let mut msg = format!("the user did not approve '{name}' ({reason})");
                    if let Some(why) = why {
                        msg.push_str(": ");
                        msg.push_str(&why);
                    }
                    return error_draft(ToolErrorCode::Denied, &msg);
                }
            }
        }
        for (i, guard) in self.hooks.guard.iter().enumerate() {
            if let GuardDecision::Deny(reason) = guard.check(ctx, &args).await {
                for o in observers {
                    o.guard_denied(ctx, i, &reason);
                }
                return error_draft(ToolErrorCode::Denied, &reason);
            }
        }
        if opts.cancel.is_cancelled() {
            return cancelled();
        }
        caller.checkpoint().await;
        if opts.cancel.is_cancelled() {
            return cancelled();
        }
        let tool_ctx = ToolContext {
            workspace,
            cancel: opts.cancel.clone(),
            subprocess: &self.subprocess,
            spill: &self.spill,
            caller,
            call,
            token: ctx.token,
        };
        let body = Body {
            tool: entry.tool(),
            ctx: &tool_ctx,
            name,
            timeout: entry.timeout(),
            cancel: &opts.cancel,
            grace: self.abort_grace,
            hook_ctx: ctx,
            observers,
        };
        let next = ExecuteNext {
            rest: &self.hooks.execute,
            ctx,
            body: &body,
        };
        let mut draft = match next.run(args).await {
            Ok(out) if out.content.iter().all(is_result_block) => ResultDraft {
                content: out.content,
                is_error: false,
                code: None,
                value: out.value,
            },
            Ok(_) => error_draft(
                ToolErrorCode::InvalidToolOutput,
                &format!("'{name}' produced content that is not text or images"),
            ),
            Err(e) => ResultDraft {
                content: vec![ContentBlock::text(e.model_text())],
                is_error: true,
                code: Some(e.code()),
                value: e.meta().cloned(),
            },
        };
        if let Some(e) = &escalation {
            let mut value = match draft.value.take() {
                Some(Value::Object(fields)) => fields,
                Some(Value::Null) | None => Map::new(),
                Some(other) => Map::from_iter([("value".to_owned(), other)]),
            };
            value.insert("sandboxEscalated".into(), Value::from(e.mode_name()));
            draft.value = Some(Value::Object(value));
        }
        let incoming = (!observers.is_empty()).then(|| draft.clone());
        let mut decisions = Vec::new();
        for hook in &self.hooks.post {
            let decision = hook.post_execute(ctx, &draft).await;
            if incoming.is_some() {
                decisions.push(decision.clone());
            }
            match decision {
                PostDecision::Accept => {}
                PostDecision::ReplaceContent(content) => draft.content = content,
                PostDecision::ReplaceValue(value) => draft.value = Some(value),
                PostDecision::Block(reason) => {
                    draft = error_draft(ToolErrorCode::Denied, &reason);
                    break;
                }
            }
        }
        if let Some(incoming) = &incoming {
            for o in observers {
                o.post_executed(ctx, incoming, &decisions);
            }
        }
        draft
    }

    /// Ask a person to let this one call run in the wider sandbox `e` asks for. `Err(None)`:
    /// the turn was cancelled while asking; `Err(Some(draft))`: refused, the draft says why.
    async fn escalate(
        &self,
        ctx: &HookContext<'_>,
        e: &Escalation,
        args: &Value,
        caller: &dyn ToolCaller,
        cancel: &CancellationToken,
    ) -> Result<(), Option<ResultDraft>> {
        let name = ctx.call.name.as_str();
        let flag = escalation::SANDBOX_PERMISSIONS;
        if self.plan.is_active() {
            let message = format!(
                "'{flag}' is not available in plan mode: '{name}' did not run. Plan mode only \
                 reads; finish the plan with exit_plan_mode first"
            );
            return Err(Some(error_draft(ToolErrorCode::Denied, &message)));
        }
        let mut reason = e.reason(name, ctx.sandbox);
        // A file tool's call on a protected path says which, and what it could change.
        let raw = args
            .get("file_path")
            .or_else(|| args.get("path"))
            .and_then(Value::as_str);
        if let Some(raw) = raw {
            let target = crate::workspace::normalize(&self.workspace.cwd().join(raw));
            if let Some(p) = self.workspace.protected(&target) {
                reason.push_str(&format!(
                    ". It writes '{raw}', a protected path: {} holds {}",
                    p.name, p.controls
                ));
            }
        }
        let decided = tokio::select! {
            d = caller.ask_escalation(ctx.call, &reason) => d,
            () = cancel.cancelled() => return Err(None),
        };
        let current = ctx.sandbox;
        let mode = e.mode_name();
        let message = match decided {
            ApprovalOutcome::Approved => return Ok(()),
            ApprovalOutcome::Denied { reason: why } => format!(
                "the user did not approve running '{name}' with {flag}={mode}{}; it did not \
                 run. Do not ask again for this call: work inside the {current} sandbox",
                why.map(|w| format!(" ({w})")).unwrap_or_default()
            ),
            ApprovalOutcome::Unanswered { reason: why } => format!(
                "'{flag}' needs a person to approve it and nobody could{}; '{name}' did not \
                 run. Work inside the {current} sandbox, or the user can run keel with a wider \
                 --sandbox",
                why.map(|w| format!(" ({w})")).unwrap_or_default()
            ),
        };
        Err(Some(error_draft(ToolErrorCode::Denied, &message)))
    }

    /// Built-in policy (plan mode, read-only sandbox), then the hooks; first non-allow wins.
    async fn pre_execute(&self, ctx: &HookContext<'_>, args: &Value) -> PreDecision {
        let name = ctx.call.name.as_str();
        let effect = ctx.tool.map_or(ToolEffect::Executes, |t| t.effect);
        if effect != ToolEffect::ReadOnly && self.plan.is_active() {
            return PreDecision::Deny(plan_mode_denial(name));
        }
        if ctx.sandbox == SandboxMode::ReadOnly {
            match effect {
                ToolEffect::ReadOnly => {}
                ToolEffect::Writes => {
                    return PreDecision::Deny(format!(
                        "the sandbox is read-only: '{name}' may not change files in this session"
                    ));
                }
                // MCP servers' tools (`mcp__SERVER__TOOL`) not annotated read-only are
                // `Executes` too; they are not commands.
                ToolEffect::Executes if name.starts_with("mcp__") => {
                    return PreDecision::Ask(format!(
                        "the sandbox is read-only and '{name}' is an MCP server's tool not \
                         marked read-only: it could change things"
                    ));
                }
                ToolEffect::Executes => {
                    return PreDecision::Ask(format!(
                        "the sandbox is read-only and '{name}' runs commands that could change \
                         files"
                    ));
                }
            }
        }
        for hook in &self.hooks.pre {
            match hook.pre_execute(ctx, args).await {
                PreDecision::Allow => {}
                other => return other,
            }
        }
        PreDecision::Allow
    }

    /// Spill oversized text blocks and compose the outcome's `meta`.
    fn finish(&self, call: &ToolCallBlock, mut draft: ResultDraft) -> ToolOutcome {
        let mut spilled: Vec<PathBuf> = Vec::new();
        for block in &mut draft.content {
            let ContentBlock::Text { text } = block else {
                continue;
            };
            if text.len() <= self.spill.threshold {
                continue;
            }
            match self.spill.spill_text(text, &call.name) {
                Ok(Some((short, path))) => {
                    *text = short;
                    spilled.push(path);
                }
                Ok(None) => {}
                Err(e) => *text = truncate_unspilled(text, self.spill.head, self.spill.tail, &e),
            }
        }
        let mut meta = Map::new();
        match draft.value {
            Some(Value::Object(fields)) => meta.extend(fields),
            Some(Value::Null) | None => {}
            Some(other) => {
                meta.insert("value".into(), other);
            }
        }
        if let Some(code) = draft.code {
            meta.insert("code".into(), Value::from(code.as_str()));
        }
        match spilled.len() {
            0 => {}
            1 => {
                meta.insert(
                    "spill".into(),
                    Value::from(spilled[0].display().to_string()),
                );
            }
            _ => {
                let paths = spilled
                    .iter()
                    .map(|p| Value::from(p.display().to_string()))
                    .collect();
                meta.insert("spill".into(), Value::Array(paths));
            }
        }
        ToolOutcome {
            call_id: call.id.clone(),
            content: draft.content,
            is_error: draft.is_error,
            meta: (!meta.is_empty()).then_some(Value::Object(meta)),
        }
    }
}

fn is_result_block(block: &ContentBlock) -> bool {
    matches!(block, ContentBlock::Text { .. } | ContentBlock::Image(_))
}

fn truncate_unspilled(text: &str, head: usize, tail: usize, err: &std::io::Error) -> String {
    let h = text.floor_char_boundary(head);
    let t = text
        .ceil_char_boundary(text.len().saturating_sub(tail))
        .max(h);
    format!(
        "{}\n\n[… {} bytes omitted; the full output could not be saved ({err}) …]\n\n{}",
        &text[..h],
        t - h,
        &text[t..]
    )
}
