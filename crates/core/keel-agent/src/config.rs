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

/// What happens when a tool call needs approval. The words are Claude Code's permission-rule
/// words (`ask`, `deny`, `allow`), which no peer reads the other way; keel's first words
/// `never` (= `deny`) and `auto` (= `allow`) are still read, in flags, configuration files and
/// session logs written before, and mean what they meant. Codex's `approval_policy = "never"`
/// ("never ask") is not keel's old `never` ("refuse what would be asked"): see
/// [`ApprovalPolicy::misread`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ApprovalPolicy {
    /// Ask the user (a headless run cannot, so the call is denied with a hint).
    #[default]
    Ask,
    /// Ask nobody: calls that need approval are refused (Claude Code's `dontAsk`).
    Deny,
    /// Approve automatically (a sandbox escalation still asks a person).
    Allow,
}

impl ApprovalPolicy {
    /// Spelling used in flags, config and `approval/policy` events.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalPolicy::Ask => "ask",
            ApprovalPolicy::Deny => "deny",
            ApprovalPolicy::Allow => "allow",
        }
    }

    /// Parse `ask`, `deny` or `allow`, or the old words `never` (`deny`) and `auto` (`allow`).
    pub fn parse(s: &str) -> Option<ApprovalPolicy> {
        match s {
            "ask" => Some(ApprovalPolicy::Ask),
            "deny" | "never" => Some(ApprovalPolicy::Deny),
            "allow" | "auto" => Some(ApprovalPolicy::Allow),
            _ => None,
        }
    }

    /// `word` as keel spells it now: `deny` for the old `never`, `allow` for `auto`; any other
    /// word as it is (a log's word keel does not know).
    pub fn respell(word: &str) -> &str {
        match ApprovalPolicy::parse(word) {
            Some(p) => p.as_str(),
            None => word,
        }
    }

    /// The words [`ApprovalPolicy::parse`] takes, for an error message.
    pub const EXPECTED: &'static str = "ask, deny or allow (the old never and auto still work)";

    /// A note for a setting written with the old word `never`, which Codex users read as
    /// "never ask, just run": keel reads it as `deny`. `None` for any other word.
    pub fn misread(word: &str) -> Option<&'static str> {
        (word == "never").then_some(
            "approval \"never\" is keel's old word for \"deny\": what needs approval is refused \
             without asking (Codex's \"never\" runs it); write deny, or allow to approve it \
             automatically",
        )
    }

    /// What runs without asking, and what asks or is refused, under `sandbox` with this
    /// policy, in a few words: the status line's explanation of the word (a hook that asks, or
    /// a command asking for a wider sandbox, still asks under `ask` and `allow`).
    pub fn unasked(self, sandbox: keel_tools::SandboxMode) -> &'static str {
        use keel_tools::SandboxMode::*;
        match (sandbox, self) {
            (ReadOnly, ApprovalPolicy::Ask) => "reads run unasked; commands ask; edits refused",
            (ReadOnly, ApprovalPolicy::Deny) => "only reads run; commands and edits refused",
            (ReadOnly, ApprovalPolicy::Allow) => "reads and commands run unasked; edits refused",
            (WorkspaceWrite, ApprovalPolicy::Deny) => {
                "edits and commands in the workspace run; nothing asks"
            }
            (WorkspaceWrite, _) => "edits and commands in the workspace run unasked",
            (FullAccess, ApprovalPolicy::Deny) => "everything runs; nothing asks",
            (FullAccess, _) => "everything runs unasked",
        }
    }

    /// [`ApprovalPolicy::unasked`] for the words a front end holds (an `approval/policy` and
    /// a `sandbox/mode` event's, old words included); `None` when either is not one.
    pub fn unasked_words(approval: &str, sandbox: &str) -> Option<&'static str> {
        let policy = ApprovalPolicy::parse(approval)?;
        Some(policy.unasked(sandbox.parse().ok()?))
    }

    /// The stricter of `self` and `other`: `deny` (refuses what needs approval) over `ask`
    /// (a person decides) over `allow` (approves it).
    pub fn stricter(self, other: ApprovalPolicy) -> ApprovalPolicy {
        let rank = |p: ApprovalPolicy| match p {
            ApprovalPolicy::Allow => 0,
            ApprovalPolicy::Ask => 1,
            ApprovalPolicy::Deny => 2,
        };
        if rank(other) > rank(self) {
            other
        } else {
            self
        }
    }
}

/// [`AgentConfig::approval_source`] when nothing set the policy.
pub const DEFAULT_APPROVAL_SOURCE: &str = "keel's default";

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
    /// Where [`AgentConfig::approval`] came from, named when it refuses a call: `--approval
    /// deny`, `approval = "deny" in FILE`, `keel's default`…
    pub approval_source: String,
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
            approval_source: DEFAULT_APPROVAL_SOURCE.to_owned(),
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
