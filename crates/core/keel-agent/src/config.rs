//! An agent's static settings: its [`AgentConfig`], its [`ToolSetup`], and how approvals are
//! decided ([`ApprovalPolicy`], [`Approver`]). Plain data: nothing here knows the running
//! agent.

use crate::prompt;
use futures::future::BoxFuture;
use keel_llm::{ModelInfo, RetryPolicy};
use keel_protocol::{Question, ToolCallBlock};
use keel_tools::escalation;
use keel_tools::spill::SpillConfig;
use keel_tools::subprocess::SubprocessService;
use keel_tools::{ApprovalOutcome, PlanState, ToolRegistry, UserAnswer, Workspace};
use std::path::PathBuf;
use std::sync::Arc;

/// What happens when a tool call needs approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ApprovalPolicy {
    /// Ask the user (a headless run cannot, so the call is denied with a hint).
    #[default]
    Ask,
    /// Never ask: calls that need approval are denied.
    Never,
    /// Approve automatically.
    Auto,
}

impl ApprovalPolicy {
    /// Spelling used in flags, config and `approval/policy` events.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalPolicy::Ask => "ask",
            ApprovalPolicy::Never => "never",
            ApprovalPolicy::Auto => "auto",
        }
    }

    /// Parse `ask`, `never` or `auto`.
    pub fn parse(s: &str) -> Option<ApprovalPolicy> {
        match s {
            "ask" => Some(ApprovalPolicy::Ask),
            "never" => Some(ApprovalPolicy::Never),
            "auto" => Some(ApprovalPolicy::Auto),
            _ => None,
        }
    }

    /// The stricter of `self` and `other`: `never` (refuses what needs approval) over `ask`
    /// (a person decides) over `auto` (approves it).
    pub fn stricter(self, other: ApprovalPolicy) -> ApprovalPolicy {
        let rank = |p: ApprovalPolicy| match p {
            ApprovalPolicy::Auto => 0,
            ApprovalPolicy::Ask => 1,
            ApprovalPolicy::Never => 2,
        };
        if rank(other) > rank(self) {
            other
        } else {
            self
        }
    }
}

/// Answers approval requests when the policy is `ask` (an interactive front end). Without one
/// (headless) every request is [`ApprovalOutcome::Unanswered`]: a call that needs approval is
/// refused, and a plan submitted with `exit_plan_mode` is handed to the user as the turn's
/// answer (the turn ends; see [`Agent::approve_plan`]). An approver may answer `Unanswered`
/// itself to leave a decision for later.
pub trait Approver: Send + Sync {
    /// Decide on `call`; `reason` says why approval is needed. For `exit_plan_mode` the plan is
    /// the call's `plan` argument.
    fn decide<'a>(
        &'a self,
        call: &'a ToolCallBlock,
        reason: &'a str,
    ) -> BoxFuture<'a, ApprovalOutcome>;
}

/// Puts `ask_user_question`'s questions to a person (the terminal UI's form, an ACP client,
/// a script on `keel run --inbox-stdin`). Without one every question is answered
/// [`UserAnswer::Unanswered`] (headless: nobody is present), and the model goes on with its
/// own judgement. Asked whatever the approval policy: a question is not an approval.
pub trait Asker: Send + Sync {
    /// Ask `questions` (already checked: at least one, ids unique, text present) for `call`.
    fn ask<'a>(
        &'a self,
        call: &'a ToolCallBlock,
        questions: &'a [Question],
    ) -> BoxFuture<'a, UserAnswer>;
}

/// What an interactive approver's "allow for the session" remembers of `call`: the exact
/// command for `bash`, the tool otherwise; for a call asking to run outside the sandbox
/// (`sandbox_permissions`), its exact arguments, so that allowing a tool never lets later
/// calls of it leave the sandbox unasked.
pub fn allow_key(call: &ToolCallBlock) -> String {
    let args: serde_json::Value = serde_json::from_str(&call.arguments).unwrap_or_default();
    if args.as_object().is_some_and(escalation::requested) {
        return format!("escalate:{}:{}", call.name, call.arguments);
    }
    if call.name == "bash" {
        let command = args.get("command").and_then(|c| c.as_str()).unwrap_or("");
        format!("bash:{command}")
    } else {
        call.name.clone()
    }
}

/// Static settings of an agent.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// Provider name (for message sources and `request/context`).
    pub provider_name: String,
    /// Model name.
    pub model: String,
    /// What keel knows of the model (context window, output budget, reasoning).
    pub model_info: ModelInfo,
    /// Workspace root and working directory.
    pub cwd: PathBuf,
    /// `$KEEL_HOME` (user instructions).
    pub keel_home: Option<PathBuf>,
    /// Persona template.
    pub persona: String,
    /// Thinking on/off.
    pub thinking: Option<bool>,
    /// Reasoning effort.
    pub reasoning_effort: Option<String>,
    /// Temperature.
    pub temperature: Option<f64>,
    /// Output budget per request (model default when `None`).
    pub max_tokens: Option<u64>,
    /// Steps per turn before the turn ends `blocked`.
    pub max_steps: u32,
    /// Identical failing tool calls in a row before the model is told to change course; at
    /// twice this the turn is stopped (`REPEATED_TOOL_FAILURE`). 0 = off. See
    /// [`crate::repeat`].
    pub repeat_failure_limit: u32,
    /// Approval policy.
    pub approval: ApprovalPolicy,
    /// Byte budget for AGENTS.md / CLAUDE.md.
    pub instructions_budget: usize,
    /// Retry policy of the default `agent/request-error` listener.
    pub retry: RetryPolicy,
}

impl AgentConfig {
    /// Defaults for `model` in `cwd`.
    pub fn new(
        provider_name: impl Into<String>,
        model: impl Into<String>,
        model_info: ModelInfo,
        cwd: PathBuf,
    ) -> Self {
        AgentConfig {
            provider_name: provider_name.into(),
            model: model.into(),
            model_info,
            cwd,
            keel_home: None,
            persona: prompt::DEFAULT_PERSONA.to_owned(),
            thinking: None,
            reasoning_effort: None,
            temperature: None,
            max_tokens: None,
            max_steps: 200,
            repeat_failure_limit: 3,
            approval: ApprovalPolicy::Ask,
            instructions_budget: prompt::DEFAULT_INSTRUCTIONS_BUDGET,
            retry: RetryPolicy::default(),
        }
    }
}

/// The tools of an agent and how they run: what [`AgentBuilder`] turns into the agent's
/// [`Pipeline`]. The pipeline's seams are not set here: they are the agent's own
/// ([`HookRegistry::tools`], global then agent-scoped), so the pipeline and the agent cannot
/// disagree about which tool hooks run.
pub struct ToolSetup {
    /// The registered tools.
    pub registry: ToolRegistry,
    /// Workspace roots and sandbox mode.
    pub workspace: Workspace,
    /// Plan-mode state shared with `exit_plan_mode` and the prompt (`None`: the registry's).
    pub plan_state: Option<Arc<PlanState>>,
    /// Where large results spill (`None`: the pipeline's default).
    pub spill: Option<SpillConfig>,
    /// The subprocess service tools run commands with (`None`: the pipeline's default).
    pub subprocess: Option<SubprocessService>,
}

impl ToolSetup {
    /// `registry` in `workspace`, with the registry's plan state and the pipeline's defaults.
    pub fn new(registry: ToolRegistry, workspace: Workspace) -> Self {
        ToolSetup {
            registry,
            workspace,
            plan_state: None,
            spill: None,
            subprocess: None,
        }
    }
}
