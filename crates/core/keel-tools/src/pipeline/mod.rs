//! The execution pipeline: schedules a batch of tool calls and runs each through the phases
//! described in the crate docs (see `call.rs` for one call's phases).
//!
//! Scheduling: the batch is cut, in model order, into segments — a run of consecutive
//! [`ExecMode::Parallel`] calls, or a single [`ExecMode::Exclusive`] call. A segment starts
//! after the previous one has finished; a parallel segment runs at most `max_parallel` calls
//! at once. The caller hears `call_started` for every call of a segment, in order, before the
//! segment runs, and `settled` for every call in model order. Cancellation stops calls that
//! have not dispatched their body (`ABORTED_BEFORE_DISPATCH`); bodies in flight see the token
//! and are abandoned (`ABORTED`) if they have not stopped after `abort_grace`.

mod call;

#[doc(hidden)]
pub use call::{ArgsError, parse_and_validate};

use crate::caller::{ToolCaller, ToolOutcome};
use crate::plan::PlanState;
use crate::registry::ToolRegistry;
use crate::seams::{ExecToken, HookContext, ToolHooks, ToolInfo};
use crate::spill::SpillConfig;
use crate::subprocess::{SubprocessConfig, SubprocessService};
use crate::tool::ExecMode;
use crate::workspace::{SandboxMode, Workspace};
use futures::StreamExt;
use futures::future::BoxFuture;
use keel_protocol::ToolCallBlock;
use keel_protocol::sync::RwLocked;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Default bound on concurrently running parallel calls.
pub const DEFAULT_MAX_PARALLEL: usize = 8;

/// Default time a cancelled body is given to stop before it is abandoned.
pub const DEFAULT_ABORT_GRACE: Duration = Duration::from_secs(3);

/// Per-batch options.
#[derive(Debug, Clone, Default)]
pub struct BatchOptions {
    /// Cancels the batch.
    pub cancel: CancellationToken,
    /// The dispatch this batch is nested in (a tool running tools), for hooks.
    pub parent: Option<ExecToken>,
}

/// Runs tool calls. Cheap to share (`Arc`); holds no per-batch state.
pub struct Pipeline {
    /// Replaced only by [`Pipeline::refresh_tools`] (at turn boundaries); each call reads one
    /// snapshot.
    registry: RwLock<Arc<ToolRegistry>>,
    hooks: ToolHooks,
    workspace: Workspace,
    subprocess: SubprocessService,
    spill: SpillConfig,
    plan: Arc<PlanState>,
    max_parallel: usize,
    abort_grace: Duration,
    /// The sandbox narrowed to read-only at run time ([`Pipeline::set_read_only`]).
    read_only: AtomicBool,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("tools", &self.registry().names().collect::<Vec<_>>())
            .field("hooks", &self.hooks)
            .field("workspace", &self.workspace)
            .field("max_parallel", &self.max_parallel)
            .finish_non_exhaustive()
    }
}

/// Builds a [`Pipeline`].
pub struct PipelineBuilder {
    registry: Arc<ToolRegistry>,
    workspace: Workspace,
    hooks: ToolHooks,
    subprocess: Option<SubprocessService>,
    spill: Option<SpillConfig>,
    plan: Option<Arc<PlanState>>,
    max_parallel: usize,
    abort_grace: Duration,
}

impl PipelineBuilder {
    /// Hooks (global ones layered with the agent's; see [`ToolHooks::layered`]).
    pub fn hooks(mut self, hooks: ToolHooks) -> Self {
        self.hooks = hooks;
        self
    }
    /// Subprocess service (default: process environment, no forwards, spill dir as below).
    pub fn subprocess(mut self, service: SubprocessService) -> Self {
        self.subprocess = Some(service);
        self
    }
    /// Spill configuration (default: a fresh private temporary directory, 50,000 bytes).
    pub fn spill(mut self, spill: SpillConfig) -> Self {
        self.spill = Some(spill);
        self
    }
    /// Plan-mode flag (default: the one the registry's built-ins were made with).
    pub fn plan_state(mut self, plan: Arc<PlanState>) -> Self {
        self.plan = Some(plan);
        self
    }
    /// Bound on concurrently running parallel calls (at least 1).
    pub fn max_parallel(mut self, n: usize) -> Self {
        self.max_parallel = n.max(1);
        self
    }
    /// Time a cancelled body gets to stop before it is abandoned.
    pub fn abort_grace(mut self, grace: Duration) -> Self {
        self.abort_grace = grace;
        self
    }

    /// Build: creates the spill directory (0700) and lets file tools read it.
    pub fn build(self) -> io::Result<Pipeline> {
        let spill = match self.spill {
            Some(s) => s,
            None => {
                let dir = tempfile::Builder::new()
                    .prefix("keel-spill-")
                    .tempdir()?
                    .keep();
                SpillConfig::new(dir)
            }
        };
        spill.ensure_dir()?;
        let mut workspace = self.workspace;
        workspace.add_readable(&spill.dir)?;
        let subprocess = self.subprocess.unwrap_or_else(|| {
            SubprocessService::new(SubprocessConfig::from_process_env(spill.dir.clone()))
        });
        let plan = self.plan.unwrap_or_else(|| self.registry.plan_state());
        Ok(Pipeline {
            registry: RwLock::new(self.registry),
            hooks: self.hooks,
            workspace,
            subprocess,
            spill,
            plan,
            max_parallel: self.max_parallel,
            abort_grace: self.abort_grace,
            read_only: AtomicBool::new(false),
        })
    }
}

/// A call's final result before `tools/settled`, with what the settled hooks need.
struct Dispatched {
    outcome: ToolOutcome,
    token: ExecToken,
    tool: Option<ToolInfo>,
}

impl Pipeline {
    /// Start building a pipeline over `registry` in `workspace`.
    pub fn builder(registry: Arc<ToolRegistry>, workspace: Workspace) -> PipelineBuilder {
        PipelineBuilder {
            registry,
            workspace,
            hooks: ToolHooks::default(),
            subprocess: None,
            spill: None,
            plan: None,
            max_parallel: DEFAULT_MAX_PARALLEL,
            abort_grace: DEFAULT_ABORT_GRACE,
        }
    }

    /// The tools now (a snapshot: [`Pipeline::refresh_tools`] may replace them later).
    pub fn registry(&self) -> Arc<ToolRegistry> {
        self.registry.read_locked().clone()
    }

    /// Re-read the registry's tool sources ([`ToolRegistry::refreshed`]); the agent calls this
    /// between turns only. Returns whether the tools changed, and the tools left out.
    pub fn refresh_tools(&self) -> (bool, Vec<crate::RegistryError>) {
        let current = self.registry();
        match current.refreshed() {
            None => (false, Vec::new()),
            Some((next, errors)) => {
                *self.registry.write_locked() = Arc::new(next);
                (true, errors)
            }
        }
    }

    /// The sandbox mode in force: the workspace's, or read-only while narrowed.
    pub fn sandbox(&self) -> SandboxMode {
        if self.read_only.load(Ordering::Acquire) {
            SandboxMode::ReadOnly
        } else {
            self.workspace.sandbox()
        }
    }

    /// Narrow the sandbox to read-only (file changes refused, every command asked about) or
    /// back to the workspace's mode, between calls (an editor's "read-only" session mode).
    /// Commands that are approved still run in the workspace's OS confinement.
    pub fn set_read_only(&self, on: bool) {
        self.read_only.store(on, Ordering::Release);
    }

    /// The schemas a request offers: the registry's offered tools ([`ToolRegistry::offered_schemas`])
    /// less those a `tools/expose` hook hides from the model.
    pub fn offered_schemas(&self) -> Vec<keel_protocol::ToolSchema> {
        let mut schemas = self.registry().offered_schemas();
        if !self.hooks.expose.is_empty() {
            schemas.retain(|s| self.hooks.hidden(&s.name).is_none());
        }
        schemas
    }

    /// The workspace and sandbox mode.
    pub fn workspace(&self) -> &Workspace {
        &self.workspace
    }

    /// The spill configuration.
    pub fn spill_config(&self) -> &SpillConfig {
        &self.spill
    }

    /// The subprocess service (reusable for command hooks).
    pub fn subprocess(&self) -> &SubprocessService {
        &self.subprocess
    }

    /// The plan-mode flag.
    pub fn plan_state(&self) -> &Arc<PlanState> {
        &self.plan
    }

    /// Run the calls of one assistant message; one outcome per call, in model order.
    pub async fn run_batch(
        &self,
        calls: &[ToolCallBlock],
        caller: &dyn ToolCaller,
        cancel: CancellationToken,
    ) -> Vec<ToolOutcome> {
        self.run_batch_with(
            calls,
            caller,
            BatchOptions {
                cancel,
                parent: None,
            },
        )
        .await
    }

    /// [`Pipeline::run_batch`] with a parent dispatch (nested tool runs).
    pub async fn run_batch_with(
        &self,
        calls: &[ToolCallBlock],
        caller: &dyn ToolCaller,
        opts: BatchOptions,
    ) -> Vec<ToolOutcome> {
        let mut outcomes = Vec::with_capacity(calls.len());
        let mut start = 0;
        while start < calls.len() {
            let parallel = |c: &ToolCallBlock| self.mode_of(c) == ExecMode::Parallel;
            let end = if parallel(&calls[start]) {
                start + calls[start..].iter().take_while(|c| parallel(c)).count()
            } else {
                start + 1
            };
            let segment = &calls[start..end];
            for call in segment {
                caller.call_started(call).await;
            }
            if let [call] = segment {
                let done = self.run_call(call, caller, &opts).await;
                outcomes.push(self.settle(call, done, caller, &opts).await);
            } else {
                // Boxed so the batch future is provably `Send` (a closure-made stream of
                // opaque futures is not, to the compiler, for every lifetime), which lets a
                // tool body run a whole agent (subagents).
                let calls: Vec<BoxFuture<'_, Dispatched>> = segment
                    .iter()
                    .map(|call| Box::pin(self.run_call(call, caller, &opts)) as BoxFuture<'_, _>)
                    .collect();
                let mut running = futures::stream::iter(calls).buffered(self.max_parallel);
                let mut i = 0;
                while let Some(done) = running.next().await {
                    outcomes.push(self.settle(&segment[i], done, caller, &opts).await);
                    i += 1;
                }
            }
            start = end;
        }
        outcomes
    }

    fn mode_of(&self, call: &ToolCallBlock) -> ExecMode {
        // Unknown tools fail before dispatch and cannot conflict with anything.
        self.registry()
            .get(&call.name)
            .map_or(ExecMode::Parallel, |t| t.info().mode)
    }

    async fn settle(
        &self,
        call: &ToolCallBlock,
        done: Dispatched,
        caller: &dyn ToolCaller,
        opts: &BatchOptions,
    ) -> ToolOutcome {
        let ctx = HookContext {
            call,
            tool: done.tool,
            token: done.token,
            parent: opts.parent,
            sandbox: self.sandbox(),
        };
        for hook in &self.hooks.settled {
            hook.settled(&ctx, &done.outcome).await;
        }
        caller.commit_result(call, &done.outcome).await;
        done.outcome
    }
}
