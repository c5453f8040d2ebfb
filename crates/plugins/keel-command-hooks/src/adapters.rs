//! The five events on keel's seams.
//!
//! | event | seam | effect |
//! |---|---|---|
//! | `SessionStart` | `agent/pre-step`, first step this install sees | context → a `keel/hooks` user message before the step's input |
//! | `UserPromptSubmit` | `agent/pre-step`, once per human message claimed | block → [`PreStepOutcome::Reject`]; context → a `keel/hooks` user message after the prompt |
//! | `PreToolUse` | `tools/pre-execute` | deny → [`PreDecision::Deny`], ask → [`PreDecision::Ask`], else allow |
//! | `PostToolUse` | `tools/post-execute` | block reason / exit-2 stderr / context → appended to the result's content |
//! | `Stop` | `agent/turn-stopping` | block → [`StopDecision::Continue`] with the reason as a `keel/hooks` user message |
//!
//! `continue: false` from any hook stops the work: a `Stop` hook lets the turn end; a
//! `SessionStart` or `UserPromptSubmit` hook rejects the step; a tool hook denies (pre) or keeps
//! (post) its call and records the stop reason, which rejects the next step of the same turn.
//! Only the bound agent (see the module docs of `command_hooks`) runs `SessionStart`,
//! `UserPromptSubmit` and `Stop`; a child agent inheriting the registry skips them, while its
//! tool calls do run `PreToolUse`/`PostToolUse` (as in Claude Code), logged in the bound
//! agent's session.
//! `Stop` runs at most [`super::HooksOptions::max_stop_continuations`] continuations per turn;
//! the payload's `stop_hook_active` is true once a `Stop` hook has continued the turn.

use crate::config::HookEvent;
use crate::names;
use crate::output::{Effect, HookContextMessage, PostToolFeedback, StopHookReason};
use crate::runner::Shared;
use async_trait::async_trait;
use keel_agent::AgentHandle;
use keel_agent::modes::{Middleware, SerialHook, middleware};
use keel_agent::seams::{PreStep, PreStepOutcome, StopDecision, TurnStopping};
use keel_protocol::{ContentBlock, Message, MessageSource};
use keel_tools::{
    HookContext, PostDecision, PostExecuteHook, PreDecision, PreExecuteHook, ResultDraft,
};
use serde_json::{Map, Value, json};
use std::sync::Arc;

fn hook_message(text: String) -> Message {
    Message::user_text(
        text,
        MessageSource::plugin(crate::ID.source()),
        uuid::Uuid::new_v4().to_string(),
    )
}

fn joined<'a>(parts: impl Iterator<Item = &'a str>) -> Option<String> {
    let v: Vec<&str> = parts.collect();
    if v.is_empty() {
        None
    } else {
        Some(v.join("\n"))
    }
}

fn first_halt(effects: &[Effect]) -> Option<String> {
    effects.iter().find_map(|e| e.halt.clone())
}

/// Why a step does not run ([`PreStepOutcome::Reject`]'s reason).
#[derive(Debug, thiserror::Error)]
enum StepRefused {
    /// A hook said `continue: false` (now or on an earlier tool call of the turn): its
    /// `stopReason`.
    #[error("{0}")]
    Halted(String),
    /// A `UserPromptSubmit` hook blocked the prompt: its reason.
    #[error("a UserPromptSubmit hook blocked the prompt: {0}")]
    Blocked(String),
}

/// `tool_name`, `keel_tool_name` and `tool_input`.
fn tool_fields(payload: &mut Map<String, Value>, name: &str, args: &Value) {
    payload.insert(
        "tool_name".into(),
        Value::String(names::claude_name(name).unwrap_or(name).to_owned()),
    );
    payload.insert("keel_tool_name".into(), Value::String(name.to_owned()));
    payload.insert("tool_input".into(), names::tool_input(name, args));
}

impl Shared {
    /// Remember a `continue: false` from a tool hook for the next step of the bound agent's turn.
    fn set_halt(&self, agent: Option<&AgentHandle>, reason: String) {
        let turn = agent.map_or(0, |a| a.current_turn().0);
        self.state().halt = Some((turn, reason));
    }

    /// `SessionStart` and `UserPromptSubmit` around one step's claimed input.
    async fn before_step(&self, input: &PreStep) -> Result<Vec<Message>, StepRefused> {
        let agent = Some(&input.agent);
        let halt = self.state().halt.take();
        if let Some((turn, reason)) = halt
            && turn == input.turn.0
        {
            return Err(StepRefused::Halted(reason));
        }
        let mut before = Vec::new();
        let first = !std::mem::replace(&mut self.state().session_started, true);
        if first && self.config.has(HookEvent::SessionStart) {
            let source = if input.turn.0 == 1 && input.step.0 == 1 {
                "startup"
            } else {
                "resume"
            };
            let commands = self.config.commands(HookEvent::SessionStart, &[source]);
            let mut payload = self.base_payload(agent, HookEvent::SessionStart);
            payload.insert("source".into(), Value::String(source.into()));
            let effects = self
                .dispatch(agent, HookEvent::SessionStart, None, commands, payload)
                .await;
            if let Some(reason) = first_halt(&effects) {
                return Err(StepRefused::Halted(reason));
            }
            if let Some(text) = joined(effects.iter().filter_map(|e| e.context.as_deref())) {
                before.push(hook_message(
                    HookContextMessage {
                        event: HookEvent::SessionStart,
                        text: &text,
                    }
                    .render(),
                ));
            }
        }
        let mut after = Vec::new();
        if self.config.has(HookEvent::UserPromptSubmit) {
            for m in input.messages.iter().filter(|m| m.source.is_user()) {
                let commands = self.config.commands(HookEvent::UserPromptSubmit, &[]);
                let mut payload = self.base_payload(agent, HookEvent::UserPromptSubmit);
                payload.insert("prompt".into(), Value::String(m.text()));
                let effects = self
                    .dispatch(agent, HookEvent::UserPromptSubmit, None, commands, payload)
                    .await;
                if let Some(reason) = first_halt(&effects) {
                    return Err(StepRefused::Halted(reason));
                }
                if let Some(b) = joined(effects.iter().filter_map(|e| e.block.as_deref())) {
                    return Err(StepRefused::Blocked(b));
                }
                if let Some(text) = joined(effects.iter().filter_map(|e| e.context.as_deref())) {
                    after.push(hook_message(
                        HookContextMessage {
                            event: HookEvent::UserPromptSubmit,
                            text: &text,
                        }
                        .render(),
                    ));
                }
            }
        }
        if before.is_empty() && after.is_empty() {
            return Ok(input.messages.clone());
        }
        before.extend(input.messages.iter().cloned());
        before.extend(after);
        Ok(before)
    }

    /// `Stop` when the turn has nothing more owed.
    async fn on_stop(&self, t: &TurnStopping) -> StopDecision {
        if !self.is_bound(&t.agent) {
            // A child agent's turn (Claude Code's `SubagentStop`, which keel does not run).
            return StopDecision::Stop;
        }
        let previous = match self.state().stop_continued {
            Some((turn, n)) if turn == t.turn.0 => n,
            _ => 0,
        };
        if previous >= self.options.max_stop_continuations {
            return StopDecision::Stop;
        }
        let agent = Some(&t.agent);
        let commands = self.config.commands(HookEvent::Stop, &[]);
        let mut payload = self.base_payload(agent, HookEvent::Stop);
        payload.insert("stop_hook_active".into(), Value::Bool(previous > 0));
        let effects = self
            .dispatch(agent, HookEvent::Stop, None, commands, payload)
            .await;
        if first_halt(&effects).is_some() {
            return StopDecision::Stop;
        }
        match joined(effects.iter().filter_map(|e| e.block.as_deref())) {
            Some(reason) => {
                self.state().stop_continued = Some((t.turn.0, previous + 1));
                StopDecision::Continue(vec![hook_message(
                    StopHookReason { text: &reason }.render(),
                )])
            }
            None => StopDecision::Stop,
        }
    }
}

/// The `agent/pre-step` middleware: binds the agent, applies a pending stop, runs
/// `SessionStart` and `UserPromptSubmit`.
pub(crate) fn pre_step(shared: Arc<Shared>) -> Arc<dyn Middleware<PreStep, PreStepOutcome>> {
    middleware(move |input: PreStep, next| {
        let s = shared.clone();
        Box::pin(async move {
            s.bind(&input.agent);
            if !s.is_bound(&input.agent) {
                // A child agent that inherited these hooks: Claude Code runs neither
                // `SessionStart` nor `UserPromptSubmit` for subagents.
                return next.run(input).await;
            }
            match s.before_step(&input).await {
                Ok(messages) => next.run(PreStep { messages, ..input }).await,
                Err(refused) => PreStepOutcome::Reject(refused.to_string()),
            }
        })
    })
}

/// The `agent/turn-stopping` hook running `Stop`.
pub(crate) fn stop(shared: Arc<Shared>) -> SerialHook<TurnStopping, StopDecision> {
    Arc::new(move |t: &TurnStopping| {
        let s = shared.clone();
        Box::pin(async move {
            // `Stop` is for a turn that completed (only those reached this seam before); a
            // turn cut at the output limit does not run it.
            if t.reason != keel_protocol::TurnEndReason::Completed {
                return StopDecision::Stop;
            }
            s.on_stop(t).await
        })
    })
}

/// `PreToolUse` on `tools/pre-execute`.
pub(crate) struct PreToolUse(pub(crate) Arc<Shared>);

#[async_trait]
impl PreExecuteHook for PreToolUse {
    async fn pre_execute(&self, ctx: &HookContext<'_>, args: &Value) -> PreDecision {
        let s = &self.0;
        let name = ctx.call.name.as_str();
        let commands = s
            .config
            .commands(HookEvent::PreToolUse, &names::match_names(name));
        if commands.is_empty() {
            return PreDecision::Allow;
        }
        let agent = s.agent();
        let mut payload = s.base_payload(agent.as_ref(), HookEvent::PreToolUse);
        tool_fields(&mut payload, name, args);
        let effects = s
            .dispatch(
                agent.as_ref(),
                HookEvent::PreToolUse,
                Some(name),
                commands,
                payload,
            )
            .await;
        if let Some(reason) = first_halt(&effects) {
            s.set_halt(agent.as_ref(), reason.clone());
            return PreDecision::Deny(format!("a PreToolUse hook stopped the work: {reason}"));
        }
        if let Some(b) = joined(effects.iter().filter_map(|e| e.block.as_deref())) {
            return PreDecision::Deny(format!("a PreToolUse hook refused this call: {b}"));
        }
        if let Some(a) = joined(effects.iter().filter_map(|e| e.ask.as_deref())) {
            return PreDecision::Ask(a);
        }
        PreDecision::Allow
    }
}

/// `PostToolUse` on `tools/post-execute`.
pub(crate) struct PostToolUse(pub(crate) Arc<Shared>);

#[async_trait]
impl PostExecuteHook for PostToolUse {
    async fn post_execute(&self, ctx: &HookContext<'_>, result: &ResultDraft) -> PostDecision {
        let s = &self.0;
        let name = ctx.call.name.as_str();
        let commands = s
            .config
            .commands(HookEvent::PostToolUse, &names::match_names(name));
        if commands.is_empty() {
            return PostDecision::Accept;
        }
        let agent = s.agent();
        let args: Value = serde_json::from_str(&ctx.call.arguments).unwrap_or(Value::Null);
        let mut payload = s.base_payload(agent.as_ref(), HookEvent::PostToolUse);
        tool_fields(&mut payload, name, &args);
        payload.insert("tool_response".into(), tool_response(result));
        let effects = s
            .dispatch(
                agent.as_ref(),
                HookEvent::PostToolUse,
                Some(name),
                commands,
                payload,
            )
            .await;
        if let Some(reason) = first_halt(&effects) {
            s.set_halt(agent.as_ref(), reason);
        }
        let mut extra: Vec<ContentBlock> = Vec::new();
        for e in &effects {
            if let Some(b) = &e.block {
                extra.push(ContentBlock::text(
                    PostToolFeedback {
                        blocking: true,
                        text: b,
                    }
                    .render(),
                ));
            }
            if let Some(c) = &e.context {
                extra.push(ContentBlock::text(
                    PostToolFeedback {
                        blocking: false,
                        text: c,
                    }
                    .render(),
                ));
            }
        }
        if extra.is_empty() {
            return PostDecision::Accept;
        }
        let mut content = result.content.clone();
        content.extend(extra);
        PostDecision::ReplaceContent(content)
    }
}

/// `tool_response`: the result's text, success flag, error code and keel's structured value.
fn tool_response(result: &ResultDraft) -> Value {
    let mut output = String::new();
    for block in &result.content {
        if let ContentBlock::Text { text } = block {
            output.push_str(text);
        }
    }
    let mut r = json!({"output": output, "success": !result.is_error, "is_error": result.is_error});
    if let Some(code) = result.code {
        r["error_code"] = Value::String(code.to_string());
    }
    if let Some(value) = &result.value {
        r["value"] = value.clone();
    }
    r
}
