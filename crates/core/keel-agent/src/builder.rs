//! Building an [`Agent`]: [`AgentBuilder`] assembles its tool pipeline, seams and loop state
//! (rebuilt from the log when the session is resumed).

use crate::agent::{Agent, CallerEntry, Inner};
use crate::config::{AgentConfig, Approver, Asker, ToolSetup};
use crate::error::AgentError;
use crate::nested::{NESTED_INSTRUCTIONS_BUDGET, NestedInstructions};
use crate::prompt;
use crate::seams::HookRegistry;
use crate::session_modes::{KeptModes, kept_modes, last_plan_mode};
use crate::state::LoopState;
use keel_llm::Provider;
use keel_protocol::{ApprovalPolicyEvent, EventBody, SandboxModeEvent};
use keel_session::PersistentSession;
use keel_tools::Pipeline;
use std::sync::{Arc, Mutex, OnceLock};
use tokio_util::sync::CancellationToken;

/// Builds an [`Agent`]: its tool pipeline (from a [`ToolSetup`] and the agent's tool seams),
/// its seams (global, then agent-scoped) and its loop state. The one place where an agent is
/// assembled: `keel-host`'s factory and child agents (subagents) both come through here.
pub struct AgentBuilder {
    config: AgentConfig,
    provider: Arc<dyn Provider>,
    tools: ToolSetup,
    log: PersistentSession,
    hooks: HookRegistry,
    agent_hooks: HookRegistry,
    approver: Option<Arc<dyn Approver>>,
    asker: Option<Arc<dyn Asker>>,
    commands: Vec<Arc<dyn crate::plugin::CommandSource>>,
}

impl AgentBuilder {
    /// Global hooks: this agent's and, inherited, its children's (subagents).
    pub fn hooks(mut self, hooks: HookRegistry) -> Self {
        self.hooks = hooks;
        self
    }

    /// Hooks for this agent only, run after the global ones and not inherited by children
    /// (a front end's progress printer, a per-session journal).
    pub fn agent_hooks(mut self, hooks: HookRegistry) -> Self {
        self.agent_hooks = hooks;
        self
    }

    /// The approver used when the policy is `ask`. Without one, `ask` denies (headless).
    pub fn approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.approver = Some(approver);
        self
    }

    /// Who answers `ask_user_question`. Without one, nobody is present (headless).
    pub fn asker(mut self, asker: Arc<dyn Asker>) -> Self {
        self.asker = Some(asker);
        self
    }

    /// Slash commands the plugins offer front ends ([`Agent::commands`]).
    pub fn commands(mut self, commands: Vec<Arc<dyn crate::plugin::CommandSource>>) -> Self {
        self.commands = commands;
        self
    }

    /// Build. A fresh session gets `sandbox/mode` and `approval/policy` events; a resumed one
    /// has its loop state (turn counter, inbox, last runtime context and request header)
    /// rebuilt from the log and keeps its modes: plan mode as its last `plan/mode` left it,
    /// the sandbox narrowing and approval policy changed during it
    /// ([`crate::session_modes`], [`Agent::kept_modes`]).
    pub fn build(self) -> Result<Agent, AgentError> {
        let hooks = HookRegistry::layered(&self.hooks, &self.agent_hooks);
        let ToolSetup {
            registry,
            workspace,
            plan_state,
            spill,
            subprocess,
        } = self.tools;
        let nested = NestedInstructions::new(
            workspace.roots(),
            &workspace.cwd(),
            NESTED_INSTRUCTIONS_BUDGET,
        );
        let tool_hooks = hooks.tools.clone().post_execute(Arc::new(nested));
        let mut pipeline = Pipeline::builder(Arc::new(registry), workspace).hooks(tool_hooks);
        if let Some(plan_state) = plan_state {
            pipeline = pipeline.plan_state(plan_state);
        }
        if let Some(spill) = spill {
            pipeline = pipeline.spill(spill);
        }
        if let Some(subprocess) = subprocess {
            pipeline = pipeline.subprocess(subprocess);
        }
        let pipeline = pipeline.build().map_err(AgentError::ToolSetup)?;
        let instructions = prompt::load_instructions(
            self.config.keel_home.as_deref(),
            &self.config.cwd,
            &pipeline.workspace().cwd(),
            self.config.instructions_budget,
        );
        let fresh = self.log.session().is_empty();
        let state = LoopState::rebuild(self.log.session());
        let kept = if fresh {
            KeptModes::default()
        } else {
            kept_modes(
                self.log.session().whole_event_iter(),
                pipeline.workspace().sandbox(),
                self.config.approval,
            )
        };
        if kept.read_only {
            pipeline.set_read_only(true);
        }
        let approval = kept.approval.unwrap_or(self.config.approval);
        let approval_source = match kept.approval {
            Some(p) if p != self.config.approval => {
                format!(
                    "this session's mode (approval {}, set before it was resumed)",
                    p.as_str()
                )
            }
            _ => self.config.approval_source.clone(),
        };
        let agent = Agent {
            inner: Arc::new(Inner {
                config: self.config,
                provider: self.provider,
                pipeline,
                hooks,
                global_hooks: self.hooks,
                approver: self.approver,
                asker: self.asker,
                commands: self.commands,
                instructions: instructions.files,
                skipped_instructions: instructions.skipped,
                log: Mutex::new(self.log),
                state: Mutex::new(state),
                turn_cancel: Mutex::new(CancellationToken::new()),
                background: OnceLock::new(),
                woken: tokio::sync::Notify::new(),
                approval: Mutex::new(approval),
                approval_source: Mutex::new(approval_source),
                kept_modes: kept,
                caller: CallerEntry::default(),
                side_work: Default::default(),
            }),
        };
        agent.inner.caller.register(&agent);
        if !fresh && let Some(mode) = last_plan_mode(agent.log().session()) {
            // A resumed session stays in (or out of) plan mode as its log left it.
            agent.inner.pipeline.plan_state().set_active(mode.active);
        }
        if fresh {
            let sandbox = agent.sandbox();
            let confinement = agent.inner.pipeline.workspace().confinement();
            agent.push(EventBody::SandboxMode(Box::new(SandboxModeEvent {
                mode: sandbox.as_str().to_owned(),
                enforcement: Some(confinement.enforcement().to_string()),
            })))?;
            let policy = agent.inner.config.approval.as_str().to_owned();
            agent.push(EventBody::ApprovalPolicy(Box::new(ApprovalPolicyEvent {
                policy,
            })))?;
        }
        Ok(agent)
    }
}

impl Agent {
    /// Start building an agent over a session log, with `tools` as its tool set.
    pub fn builder(
        config: AgentConfig,
        provider: Arc<dyn Provider>,
        tools: ToolSetup,
        log: PersistentSession,
    ) -> AgentBuilder {
        AgentBuilder {
            config,
            provider,
            tools,
            log,
            hooks: HookRegistry::default(),
            agent_hooks: HookRegistry::default(),
            approver: None,
            asker: None,
            commands: Vec::new(),
        }
    }
}
