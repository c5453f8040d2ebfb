//! Request assembly for one step: system prompt, tools, runtime context, history projection,
//! `request/header` and `request/context` events.
//!
//! The request is a pure function of the log plus the agent's configuration and hooks, so every
//! request can be rebuilt from the log. The non-history part (system prompt, tool schemas, call
//! config) is logged as `request/header` only when it changes, which is also what keeps the
//! provider's prompt cache warm: history is append-only, the header rarely changes.

use crate::agent::Agent;
use crate::error::AgentError;
use crate::prompt::{self, PromptInputs, PromptSection};
use crate::seams::{CallConfig, ContextRequest, Projection, PromptCtx, RuntimeContext};
use futures::FutureExt;
use keel_llm::ChatRequest;
use keel_protocol::{
    ContentBlock, ContextProjection, EventBody, KnownSource, Message, MessageSource,
    RequestContext, RequestHeader, Role, Seq, SeqRuns, StepNo, SurfaceOp, TurnNo,
};
use keel_session::DerivedMessage;
use keel_tools::SandboxMode;
use serde_json::{Map, Value, json};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

pub use crate::state::RUNTIME_CONTEXT_PLUGIN;

/// First line of every runtime-context message.
pub const RUNTIME_CONTEXT_PREAMBLE: &str =
    "Current runtime context. This snapshot supersedes earlier runtime-context snapshots.";

impl Agent {
    pub(crate) fn prompt_ctx(&self) -> PromptCtx {
        PromptCtx {
            model: self.inner.config.model.clone(),
            session: self.session_id(),
            plan_mode: self.inner.pipeline.plan_state().is_active(),
        }
    }

    /// The system prompt as it would be sent now.
    pub fn system_prompt(&self) -> String {
        let ctx = self.prompt_ctx();
        let mut contributed: Vec<PromptSection> = Vec::new();
        for c in &self.inner.hooks.prompt_sections {
            contributed.extend(c(&ctx));
        }
        let cfg = &self.inner.config;
        let sections = prompt::sections(&PromptInputs {
            persona: &cfg.persona,
            model: &cfg.model,
            cwd: &cfg.cwd,
            plan_mode: ctx.plan_mode,
            contributed,
            instructions: &self.inner.instructions,
        });
        prompt::render(&sections)
    }

    /// Estimated tokens of the part of every request that is not history: the system prompt as
    /// it would be sent now plus the tool schemas, by the conservative estimate requests are
    /// capped with (three bytes a token, [`prompt_estimate`]).
    pub fn fixed_prompt_tokens(&self) -> u64 {
        crate::compaction::meter::base_tokens(
            &self.system_prompt(),
            &self.inner.pipeline.offered_schemas(),
        )
        .saturating_mul(4)
            / 3
    }

    /// The runtime-context facts as they are now.
    pub fn runtime_facts(&self) -> Vec<PromptSection> {
        let mut facts = vec![
            PromptSection::new("sandbox", sandbox_fact(self.sandbox())),
            PromptSection::new("approval", approval_fact(self.approval())),
        ];
        let ctx = self.prompt_ctx();
        for c in &self.inner.hooks.prompt_context {
            facts.extend(c(&ctx));
        }
        facts
    }

    /// A runtime-context message when the facts changed since the last one logged.
    pub(crate) fn runtime_context_message(&self) -> Option<Message> {
        let facts = self.runtime_facts();
        let mut text = RUNTIME_CONTEXT_PREAMBLE.to_owned();
        for f in &facts {
            text.push_str("\n\n");
            text.push_str(&f.text);
        }
        let mut state = self.state();
        if state.last_runtime.as_deref() == Some(text.as_str()) {
            return None;
        }
        state.last_runtime = Some(text.clone());
        let mut extra = Map::new();
        extra.insert("form".into(), json!("snapshot"));
        extra.insert(
            "sections".into(),
            Value::Array(
                facts
                    .iter()
                    .map(|f| json!({"name": f.name, "text": f.text}))
                    .collect(),
            ),
        );
        Some(Message {
            role: Role::User,
            content: vec![ContentBlock::text(text)],
            source: MessageSource::Known(KnownSource::Plugin {
                plugin: RUNTIME_CONTEXT_PLUGIN.into(),
                extra,
            }),
            id: uuid::Uuid::new_v4().to_string(),
        })
    }

    /// Append the runtime context if it changed, then what the `agent/runtime-context` hooks
    /// add.
    pub(crate) fn push_runtime_context(
        &self,
        turn: TurnNo,
        step: StepNo,
        attempt: u32,
    ) -> Result<(), AgentError> {
        if let Some(m) = self.runtime_context_message() {
            self.push_surface(
                EventBody::UserMessage(Box::new(m)),
                SurfaceOp::Append,
                Vec::new(),
            )?;
        }
        let hooks = &self.inner.hooks.runtime_context;
        if hooks.is_empty() {
            return Ok(());
        }
        let input = RuntimeContext {
            agent: self.handle(),
            turn,
            step,
            attempt,
        };
        for hook in hooks {
            for m in hook(&input)? {
                self.push_surface(
                    EventBody::UserMessage(Box::new(m)),
                    SurfaceOp::Append,
                    Vec::new(),
                )?;
            }
        }
        Ok(())
    }

    /// Build the step's request: call config (`agent/request`), projection (`agent/context`),
    /// header/context events when changed.
    pub(crate) async fn build_request(
        &self,
        turn: TurnNo,
        step: StepNo,
        turn_start: Seq,
    ) -> Result<ChatRequest, AgentError> {
        let cfg = &self.inner.config;
        let base = CallConfig {
            model: cfg.model.clone(),
            max_tokens: cfg.max_tokens,
            thinking: cfg.thinking,
            reasoning_effort: cfg.reasoning_effort.clone(),
            temperature: cfg.temperature,
        };
        let call = if self.inner.hooks.request.is_empty() {
            base
        } else {
            self.inner
                .hooks
                .request
                .run(base, &|c| async move { c }.boxed())
                .await
        };
        let system = self.system_prompt();
        let tools = self.inner.pipeline.offered_schemas();

        let projected = self.project(turn, step, Some(turn_start)).await;
        let messages = projected.messages();
        let info = cfg.model_info;
        let ceiling = call
            .max_tokens
            .unwrap_or(info.max_output)
            .min(info.max_output);
        // The header records what goes out: reasoning settings the model does not take are
        // not sent, so not logged either.
        let sent = keel_llm::sent_reasoning(call.thinking, call.reasoning_effort.as_deref(), &info);
        let header = json!({
            "config": {
                "provider": cfg.provider_name,
                "model": call.model,
                "maxTokens": ceiling,
                "thinking": sent.thinking,
                "reasoningEffort": sent.effort,
                "temperature": call.temperature,
            },
            "system": system,
            "tools": tools,
        });
        let context = RequestContext {
            provider: cfg.provider_name.clone(),
            model: call.model.clone(),
            context_window: info.context_window,
            max_output: Some(info.max_output),
        };
        let (header_changed, context_changed) = {
            let mut state = self.state();
            let h = state.last_header.as_ref() != Some(&header);
            let c = state.last_context.as_ref() != Some(&context);
            if h {
                state.last_header = Some(header.clone());
            }
            if c {
                state.last_context = Some(context.clone());
            }
            (h, c)
        };
        if header_changed {
            self.push(EventBody::RequestHeader(Box::new(RequestHeader {
                header,
                extra: Map::new(),
            })))?;
        }
        if context_changed {
            self.push(EventBody::RequestContext(Box::new(context)))?;
        }
        let mut request = ChatRequest {
            model: call.model,
            system,
            messages,
            tools,
            max_tokens: None,
            thinking: call.thinking,
            reasoning_effort: call.reasoning_effort,
            temperature: call.temperature,
            stop: Vec::new(),
        };
        let estimate = prompt_estimate(&request);
        let prompt = {
            let mut state = self.state();
            state.last_estimate = Some((turn, step, estimate));
            calibrated(estimate, state.prompt_factor)
        };
        request.max_tokens = Some(output_budget(ceiling, info.context_window, prompt));
        if let Some((policy, reason)) = &projected.refused {
            self.push_ignorable(
                PROJECTION_REFUSED_EVENT,
                json!({"turn": turn, "step": step, "policy": policy, "reason": reason}),
            )?;
        }
        if projected.policy != DEFAULT_POLICY {
            let surface: Vec<Seq> = projected.nodes.iter().map(|d| d.seq).collect();
            self.push(EventBody::ContextProjection(Box::new(ContextProjection {
                turn,
                step,
                surface_generation: projected.generation,
                policy: projected.policy.clone(),
                revision: projected.revision.clone(),
                include: SeqRuns::encode(&surface, &projected.include),
                omitted_count: (surface.len() - projected.include.len()) as u64,
                max_tokens: request.max_tokens,
            })))?;
        }
        Ok(request)
    }

    /// The history one request of `turn`/`step` carries: the `agent/context` projection,
    /// checked by the host ([`check_projection`]; a refused one is replaced by the whole
    /// surface and reported), recomputed when the surface is replaced while a listener runs
    /// (up to [`PROJECTION_RETRIES`] times). Without a listener: the whole surface. The token
    /// meter measures the same.
    pub async fn project(&self, turn: TurnNo, step: StepNo, turn_start: Option<Seq>) -> Projected {
        let mut attempt = 0;
        loop {
            let (nodes, generation, start) = {
                let mut log = self.log();
                let generation = log.session().surface().generation();
                let start = turn_start.or_else(|| self::turn_start(log.session(), turn));
                let nodes: Arc<[DerivedMessage]> = log.derive_messages().to_vec().into();
                (nodes, generation, start)
            };
            let all: Vec<Seq> = nodes.iter().map(|d| d.seq).collect();
            let whole = |refused| Projected {
                nodes: nodes.clone(),
                generation,
                include: all.clone(),
                policy: DEFAULT_POLICY.into(),
                revision: None,
                refused,
            };
            if self.inner.hooks.context.is_empty() {
                return whole(None);
            }
            let required: Vec<Seq> = match start {
                Some(start) => all.iter().copied().filter(|s| *s > start).collect(),
                None => Vec::new(),
            };
            let req = ContextRequest {
                agent: self.handle(),
                turn,
                step,
                generation,
                nodes: nodes.clone(),
                required: required.clone(),
            };
            let default = Projection::whole(all.clone());
            let projection = self
                .inner
                .hooks
                .context
                .run(req, &move |_| std::future::ready(default.clone()).boxed())
                .await;
            if self.log().session().surface().generation() != generation
                && attempt < PROJECTION_RETRIES
            {
                attempt += 1;
                continue; // replaced while the listener ran: its seqs may be stale
            }
            if projection.policy == DEFAULT_POLICY && projection.include == all {
                return whole(None);
            }
            return match check_projection(&nodes, &required, &projection.include) {
                Ok(include) => Projected {
                    nodes,
                    generation,
                    include,
                    policy: projection.policy,
                    revision: projection.revision,
                    refused: None,
                },
                Err(reason) => whole(Some((projection.policy, reason.to_string()))),
            };
        }
    }
}

/// Policy name of the whole surface (nothing logged).
pub const DEFAULT_POLICY: &str = "default";

/// How many times a projection is recomputed when the surface is replaced while a listener
/// runs; after that the last one is checked as it is.
pub const PROJECTION_RETRIES: usize = 3;

/// An ignorable event: a listener's projection broke a host invariant and the whole surface
/// was sent instead — `{turn, step, policy, reason}`.
pub const PROJECTION_REFUSED_EVENT: &str = "context/projection-refused";

/// The history of one request, as the host accepted it.
#[derive(Debug, Clone)]
pub struct Projected {
    /// The surface it was chosen from.
    pub nodes: Arc<[DerivedMessage]>,
    /// That surface's generation.
    pub generation: u64,
    /// Included seqs, in surface order.
    pub include: Vec<Seq>,
    /// The policy ([`DEFAULT_POLICY`] for the whole surface).
    pub policy: String,
    /// The policy's revision string.
    pub revision: Option<String>,
    /// A listener's projection the host refused: `(policy, reason)`.
    pub refused: Option<(String, String)>,
}

impl Projected {
    /// The included messages, in order.
    pub fn messages(&self) -> Vec<Message> {
        if self.include.len() == self.nodes.len() {
            return self.nodes.iter().map(|d| d.message.clone()).collect();
        }
        let set: BTreeSet<Seq> = self.include.iter().copied().collect();
        self.nodes
            .iter()
            .filter(|d| set.contains(&d.seq))
            .map(|d| d.message.clone())
            .collect()
    }
}

/// The seq of `turn`'s `turn/start` (the latest such), if the log has it.
pub(crate) fn turn_start(session: &keel_session::Session, turn: TurnNo) -> Option<Seq> {
    (0..session.len()).rev().map(Seq).find(|&seq| {
        session
            .whole_event(seq)
            .is_some_and(|e| matches!(&e.body, EventBody::TurnStart(t) if t.turn == turn))
    })
}

/// Smallest output budget keel asks for (a quarter of the window when that is smaller): below
/// it the model cannot finish a useful answer; when even this does not fit, the provider
/// reports the overflow and compaction takes over.
pub const MIN_OUTPUT_TOKENS: u64 = 1024;

/// A deliberately high estimate of a request's prompt tokens: three bytes a token (code and
/// JSON are denser than the four of English prose), so the output budget errs small.
pub fn prompt_estimate(request: &ChatRequest) -> u64 {
    crate::compaction::meter::request_tokens(request).saturating_mul(4) / 3
}

/// `estimate` scaled by what the provider counted for an earlier request (`factor`, ≥ 1), so a
/// tokenizer denser than 3 bytes a token does not push `prompt + max_tokens` past the window.
pub fn calibrated(estimate: u64, factor: Option<f64>) -> u64 {
    match factor {
        Some(f) if f > 1.0 => (estimate as f64 * f).ceil() as u64,
        _ => estimate,
    }
}

/// Provider prompt tokens per estimated token for a request estimated at `estimate` that the
/// provider reported as `reported` prompt tokens: at least 1, at most 3.
pub fn prompt_factor(reported: u64, estimate: u64) -> Option<f64> {
    (reported > 0 && estimate > 0).then(|| (reported as f64 / estimate as f64).clamp(1.0, 3.0))
}

/// `max_tokens` for a request: the configured `ceiling`, capped by what the window leaves after
/// the prompt (`window − prompt`), but never below [`MIN_OUTPUT_TOKENS`] (or a quarter of the
/// window, when smaller).
pub fn output_budget(ceiling: u64, window: u64, prompt: u64) -> u64 {
    let floor = MIN_OUTPUT_TOKENS.min(window / 4).max(1);
    window.saturating_sub(prompt).max(floor).min(ceiling)
}

/// Why the host refused a listener's projection ([`check_projection`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProjectionRefused {
    /// An included seq is no current surface node.
    #[error("seq {} is not on the current surface", .seq.0)]
    NotOnSurface {
        /// The seq.
        seq: Seq,
    },
    /// A seq is included twice.
    #[error("seq {} is included twice", .seq.0)]
    Twice {
        /// The seq.
        seq: Seq,
    },
    /// Two seqs are included in the reverse of their surface order.
    #[error(
        "seq {} comes after seq {} but precedes it on the surface (order must be kept)",
        .seq.0,
        .after.0
    )]
    OutOfOrder {
        /// The seq out of place.
        seq: Seq,
        /// The seq included before it.
        after: Seq,
    },
    /// An assistant message with tool calls and its results are not all in or all out.
    #[error(
        "the tool calls of assistant seq {} and their results are split (seq {} is left out): include the whole unit or none of it",
        .assistant.0,
        .missing.0
    )]
    SplitUnit {
        /// The assistant message with the calls.
        assistant: Seq,
        /// The member of its unit that is left out.
        missing: Seq,
    },
}

/// The host's invariants over a listener's `include`: only current surface nodes, each once,
/// in surface order, and an assistant message with tool calls together with its results (all
/// or none). A violation is refused with the reason (the caller sends the whole surface
/// instead). Then the required seqs are merged, with the units they belong to, and the result
/// comes back in surface order.
pub fn check_projection(
    nodes: &[DerivedMessage],
    required: &[Seq],
    include: &[Seq],
) -> Result<Vec<Seq>, ProjectionRefused> {
    // Walk the surface and `include` together: each included seq must be found ahead of the
    // previous one. On a miss, find out why (the error path may be slow).
    let mut chosen = vec![false; nodes.len()];
    let mut at = 0usize;
    for (k, &s) in include.iter().enumerate() {
        match nodes[at..].iter().position(|d| d.seq == s) {
            Some(p) => {
                chosen[at + p] = true;
                at += p + 1;
            }
            None => {
                return Err(match nodes.iter().position(|d| d.seq == s) {
                    None => ProjectionRefused::NotOnSurface { seq: s },
                    Some(_) if include[..k].contains(&s) => ProjectionRefused::Twice { seq: s },
                    Some(_) => ProjectionRefused::OutOfOrder {
                        seq: s,
                        after: include[k - 1],
                    },
                });
            }
        }
    }
    // Units: an assistant message with tool calls and the results answering them. Unit ids are
    // positions of their first node.
    let mut owner_of_call: HashMap<&str, usize> = HashMap::new();
    let mut unit_of: Vec<usize> = (0..nodes.len()).collect();
    for (i, d) in nodes.iter().enumerate() {
        if let Some(owner) = d
            .message
            .tool_results()
            .find_map(|r| owner_of_call.get(r.tool_call_id.as_str()).copied())
        {
            unit_of[i] = owner;
        }
        for call in d.message.tool_calls() {
            owner_of_call.insert(call.id.as_str(), i);
        }
    }
    // Each unit all in or all out: compare every member with its unit's first node.
    for (i, &u) in unit_of.iter().enumerate() {
        if u != i && chosen[i] != chosen[u] {
            let missing = if chosen[u] {
                nodes[i].seq
            } else {
                nodes[u].seq
            };
            return Err(ProjectionRefused::SplitUnit {
                assistant: nodes[u].seq,
                missing,
            });
        }
    }
    // Required seqs, with their whole units.
    if !required.is_empty() {
        let want: BTreeSet<Seq> = required.iter().copied().collect();
        let mut units: Vec<usize> = Vec::new();
        for (i, d) in nodes.iter().enumerate() {
            if want.contains(&d.seq) {
                chosen[i] = true;
                units.push(unit_of[i]);
            }
        }
        units.sort_unstable();
        units.dedup();
        for (i, u) in unit_of.iter().enumerate() {
            if units.binary_search(u).is_ok() {
                chosen[i] = true;
            }
        }
    }
    Ok(nodes
        .iter()
        .zip(&chosen)
        .filter(|(_, c)| **c)
        .map(|(d, _)| d.seq)
        .collect())
}

fn sandbox_fact(mode: SandboxMode) -> String {
    match mode {
        SandboxMode::ReadOnly => "File sandbox: read-only. File tools may read inside the workspace only; writes and edits are refused, and commands need approval.".into(),
        SandboxMode::WorkspaceWrite => "File sandbox: workspace-write. File tools may read and write inside the workspace only; paths outside it are refused.".into(),
        SandboxMode::FullAccess => "File sandbox: full-access. File tools may reach any path.".into(),
    }
}

fn approval_fact(policy: crate::agent::ApprovalPolicy) -> String {
    use crate::agent::ApprovalPolicy::*;
    match policy {
        Ask => "Approval: actions that need approval are put to the user; if nobody can answer they are refused.".into(),
        Deny => "Approval prompts are disabled: actions that need approval are refused; do not retry them.".into(),
        Allow => "Approval: actions that need approval are approved automatically.".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_protocol::{ToolCallBlock, ToolResultBlock};

    fn node(seq: u64, message: Message) -> DerivedMessage {
        DerivedMessage {
            seq: Seq(seq),
            message,
        }
    }

    fn user(t: &str) -> Message {
        Message::user_text(t, MessageSource::user(), t)
    }

    #[test]
    fn the_prompt_estimate_grows_with_what_the_provider_counted_and_never_shrinks() {
        assert_eq!(prompt_factor(0, 100), None);
        assert_eq!(prompt_factor(100, 0), None);
        // A tokenizer at 2.7 bytes a token counts ~11% more than the 3-byte estimate.
        let f = prompt_factor(2_610, 2_350);
        assert_eq!(calibrated(3_000, f), 3_332);
        // Fewer tokens than estimated: the estimate stands (never relaxed).
        assert_eq!(calibrated(3_000, prompt_factor(1_000, 2_000)), 3_000);
        // Clamped at 3.
        assert_eq!(calibrated(1_000, prompt_factor(100_000, 1_000)), 3_000);
        assert_eq!(calibrated(1_000, None), 1_000);
        // What the cap does with it in a 4096 window: 764 left, so the floor (a quarter of the
        // window) is asked for and the provider reports the overflow if even that is too much.
        assert_eq!(output_budget(8_000, 4_096, calibrated(3_000, f)), 1_024);
        assert_eq!(output_budget(8_000, 8_192, calibrated(3_000, f)), 4_860);
    }

    #[test]
    fn output_budget_is_capped_by_the_window() {
        let cases = [
            // ceiling, window, prompt → max_tokens
            (8_000, 128_000, 3_000, 8_000),
            (8_000, 10_000, 3_000, 7_000),
            (8_000, 512, 3_000, 128),
            (8_000, 6_144, 6_000, 1_024),
            (256_000, 1_000_000, 20_000, 256_000),
            (500, 6_144, 6_000, 500),
            (8_000, 0, 10, 1),
        ];
        for (ceiling, window, prompt, want) in cases {
            assert_eq!(
                output_budget(ceiling, window, prompt),
                want,
                "{ceiling} {window} {prompt}"
            );
        }
    }

    #[test]
    fn projection_keeps_required_pairs_and_order() {
        let call = Message {
            role: Role::Assistant,
            content: vec![ContentBlock::ToolCall(ToolCallBlock {
                id: "c1".into(),
                name: "read".into(),
                arguments: "{}".into(),
            })],
            source: MessageSource::model("p", "m"),
            id: "a".into(),
        };
        let result = Message {
            role: Role::User,
            content: vec![ContentBlock::ToolResult(ToolResultBlock {
                tool_call_id: "c1".into(),
                content: vec![],
                is_error: false,
            })],
            source: MessageSource::tool("c1"),
            id: "r".into(),
        };
        let nodes = vec![
            node(1, user("a")),
            node(3, call),
            node(5, result),
            node(7, user("b")),
            node(9, user("c")),
        ];
        // A whole unit and a required seq: accepted, the required seq merged in order.
        let got = check_projection(&nodes, &[Seq(9)], &[Seq(3), Seq(5)]).unwrap();
        assert_eq!(got, vec![Seq(3), Seq(5), Seq(9)]);
        // A required tool result brings its call along.
        let got = check_projection(&nodes, &[Seq(5)], &[Seq(7)]).unwrap();
        assert_eq!(got, vec![Seq(3), Seq(5), Seq(7)]);
        // Each invariant, refused with its reason.
        let refused = |include: &[Seq]| {
            check_projection(&nodes, &[], include)
                .unwrap_err()
                .to_string()
        };
        assert!(refused(&[Seq(5)]).contains("assistant seq 3"), "split");
        assert!(refused(&[Seq(42)]).contains("seq 42 is not on the current surface"));
        assert!(refused(&[Seq(7), Seq(7)]).contains("seq 7 is included twice"));
        assert!(refused(&[Seq(9), Seq(7)]).contains("order must be kept"));
    }

    #[test]
    fn seq_runs_round_trip_over_the_surface() {
        let surface = [1, 3, 5, 7, 9, 11].map(Seq);
        let include = [1, 3, 7, 11].map(Seq);
        let runs = SeqRuns::encode(&surface, &include);
        assert_eq!(runs.0, vec![[1, 2], [7, 1], [11, 1]]);
        assert_eq!(runs.decode(&surface).unwrap(), include);
        assert_eq!(SeqRuns(vec![[2, 1]]).decode(&surface), None);
        assert_eq!(SeqRuns(vec![[9, 3]]).decode(&surface), None);
    }
}
