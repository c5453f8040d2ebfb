//! The `provenance` plugin: capture through the host's seams, the `trace` / `get_node` tools,
//! and the [`Plugin`] row (`[[plugins]] use = "provenance"`, off by default, or `--provenance`).
//!
//! Data flow: the plugin installs one shared [`Provenance`] handle on these seams —
//!
//! | seam | stage recorded |
//! |---|---|
//! | `session/event` `assistant/message` | `assistant/message`, then one `assistant/tool-call` per call block (raw argument string) |
//! | `session/event` `tool/call` | `tool/call` |
//! | `tools/observe` | `tools/pre-execute:enter`, `tools/pre-execute`, `tools/guard`, `tools/execute:enter`, `tools/execute`, `tools/post-execute` (buffered per dispatch) |
//! | `tools/settled` (awaited, model order) | the call's buffered stages, `tools/settled`; then the journal is flushed and fsynced |
//! | `session/event` `tool/result` | `tool/result` (aliases: call id, event id) |
//! | `session/flush` | pending receipts written; at step and turn boundaries also fsynced and `graph.json` published (when new receipts changed it) |
//!
//! — and, once the agent exists (`on_agent`), binds it to the session: the journal
//! `$KEEL_HOME/provenance/<session id>/` is created or resumed (a resumed journal closes calls
//! left open by a crash as `outcome_unobserved`). Event ids are `<session id>:<seq>`; execution
//! tokens are recorded as `dispatch:<call id>` (`#n` appended for the n-th re-dispatch of a
//! repeated call id), so the same workload gives the same bytes.
//!
//! Event payloads are the committed event minus its wall-clock `time` and the random message
//! `id` (both are in the session log; the event id names the event exactly).
//!
//! Failure policy: capture never changes, delays past its own I/O, or blocks a tool result. A
//! journal I/O error is logged through `tracing` and recorded as a `capture/failure` receipt
//! (`journal_io`), which marks the graph incomplete; unwritten receipts stay pending and are
//! retried at the next flush. Calls of the query tools themselves are not captured.

mod seams;
mod stages;
mod tools;

use crate::graph::Snapshot;
use crate::journal::{Journal, JournalError, ResumeReport};
use crate::model::Stage;
use crate::query::QueryScope;
use crate::recorder::Recorder;
use keel_agent::plugin::{InstallContext, Plugin, PluginError, PluginId, plugin_config};
use keel_protocol::SessionId;
use keel_protocol::sync::Locked;
use serde::Deserialize;
use serde_json::Value;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

pub use tools::{
    GET_NODE_TOOL, GetNodeTool, QUERY_TOOLS, TRACE_ANSWER_BUDGET, TRACE_TOOL, TraceTool,
};

/// Where captured receipts go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreMode {
    /// `$KEEL_HOME/provenance/<session id>/` (default).
    #[default]
    Journal,
    /// In memory only: queries work for the process's lifetime, nothing is written.
    Memory,
}

/// Whether `tools/settled` fsyncs the journal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Fsync {
    /// fsync before every `tool/result` (default): receipts are durable first.
    #[default]
    Always,
    /// Write only (the OS flushes later); for benchmarks and throwaway sessions. Step and turn
    /// boundaries still fsync and publish `graph.json`.
    Never,
}

/// The `[plugins.config]` table of a `provenance` row.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProvenanceConfig {
    /// `journal` (default) or `memory`.
    #[serde(default)]
    pub store: StoreMode,
    /// `always` (default) or `never`.
    #[serde(default)]
    pub fsync: Fsync,
}

/// The plugin's identity: row id `provenance`.
pub const ID: PluginId = keel_agent::plugin_id!("provenance");

/// The plugin set's entry: `use = "provenance"`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProvenancePlugin;

impl Plugin for ProvenancePlugin {
    fn id(&self) -> PluginId {
        ID
    }

    fn description(&self) -> &'static str {
        "record how every tool result was formed (hash-chained receipts); trace and get_node tools"
    }

    fn enabled_by_default(&self) -> bool {
        false
    }

    fn install(&self, ctx: &mut InstallContext, config: Value) -> Result<(), PluginError> {
        let config: ProvenanceConfig = plugin_config(ID, config)?;
        let provenance = match config.store {
            StoreMode::Journal => {
                Provenance::journal(ctx.keel_home.clone()).with_fsync(config.fsync)
            }
            StoreMode::Memory => Provenance::in_memory(),
        };
        provenance.install(ctx);
        Ok(())
    }
}

/// What the capture writes into.
#[derive(Debug)]
enum Sink {
    /// Not bound to a session yet (the agent is being built).
    Unbound,
    Memory(Recorder),
    Journal(Journal),
}

/// Shared capture state; never locked across an await.
#[derive(Debug)]
pub(crate) struct State {
    sink: Sink,
    /// The bound session (prefix of event ids).
    session: String,
    /// fsync in `tools/settled`.
    pub(crate) fsync: Fsync,
    seams: stages::Bookkeeping,
}

impl State {
    fn snapshot(&self) -> Option<&Snapshot> {
        match &self.sink {
            Sink::Unbound => None,
            Sink::Memory(r) => Some(r.snapshot()),
            Sink::Journal(j) => Some(j.snapshot()),
        }
    }

    fn recorder(&mut self) -> Option<&mut Recorder> {
        match &mut self.sink {
            Sink::Unbound => None,
            Sink::Memory(r) => Some(r),
            Sink::Journal(j) => Some(j.recorder_mut()),
        }
    }

    /// Record a journal I/O error: logged, and a `capture/failure` receipt (graph incomplete).
    fn journal_failed(&mut self, what: &str, e: &JournalError) {
        tracing::warn!(session = %self.session, "provenance journal {what} failed: {e}");
        if let Some(r) = self.recorder() {
            r.failure(Stage::CaptureFailure, what, &format!("journal_io: {e}"));
        }
    }

    /// Write pending receipts; with `durable`, fsync them and publish `graph.json` as well
    /// (`graph` = false skips the graph).
    fn flush(&mut self, durability: Durability) {
        let j = match &mut self.sink {
            Sink::Journal(j) => j,
            // Nothing is written in memory mode; drop the journal lines so they do not pile up.
            Sink::Memory(r) => {
                r.clear_pending();
                return;
            }
            Sink::Unbound => return,
        };
        let mut result = j.flush().map(|_| ());
        if result.is_ok() && durability != Durability::Write {
            result = j.sync();
        }
        if result.is_ok() && durability == Durability::Graph {
            result = j.write_graph().map(|_| ());
        }
        if let Err(e) = result {
            self.journal_failed("flush", &e);
        }
    }
}

/// How far a flush goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Durability {
    /// Append pending lines (one `write`).
    Write,
    /// Append and fsync.
    Sync,
    /// Append, fsync and publish `graph.json`.
    Graph,
}

/// The capture handle shared by every seam and tool of one agent. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Provenance {
    state: Arc<Mutex<State>>,
    home: Option<PathBuf>,
    /// Captures of this agent's subagents (child session id → its handle), in spawn order.
    children: Arc<Mutex<Vec<(String, Provenance)>>>,
}

impl Provenance {
    /// Choose whether `tools/settled` fsyncs (default [`Fsync::Always`]).
    pub fn with_fsync(self, fsync: Fsync) -> Provenance {
        self.lock().fsync = fsync;
        self
    }
}

impl Provenance {
    /// Capture into `$KEEL_HOME/provenance/<session id>/` (`home` = `$KEEL_HOME`) once bound.
    pub fn journal(home: PathBuf) -> Provenance {
        Provenance::with_home(Some(home))
    }

    /// Capture in memory only.
    pub fn in_memory() -> Provenance {
        Provenance::with_home(None)
    }

    fn with_home(home: Option<PathBuf>) -> Provenance {
        Provenance {
            state: Arc::new(Mutex::new(State {
                sink: Sink::Unbound,
                session: String::new(),
                fsync: Fsync::Always,
                seams: stages::Bookkeeping::default(),
            })),
            home,
            children: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// A capture for a subagent of this agent: same store and fsync policy, unbound.
    pub(crate) fn for_child(&self) -> Provenance {
        let child = Provenance::with_home(self.home.clone());
        child.lock().fsync = self.lock().fsync;
        child
    }

    fn children(&self) -> MutexGuard<'_, Vec<(String, Provenance)>> {
        self.children.locked()
    }

    /// Remember `child`'s capture under its session id.
    pub(crate) fn add_child(&self, session: &str, child: Provenance) {
        self.children().push((session.to_owned(), child));
    }

    /// The capture of child session `session`, if this agent spawned it.
    pub(crate) fn child(&self, session: &str) -> Option<Provenance> {
        self.children()
            .iter()
            .find(|(id, _)| id == session)
            .map(|(_, p)| p.clone())
    }

    /// This capture and every descendant's (subagents, their subagents…), parents first.
    fn family(&self) -> Vec<Provenance> {
        let mut all = vec![self.clone()];
        let mut i = 0;
        while i < all.len() {
            let kids: Vec<Provenance> = all[i].children().iter().map(|(_, p)| p.clone()).collect();
            all.extend(kids);
            i += 1;
        }
        all
    }

    /// Run `f` on a query scope of this session and its subagents' sessions (`None` before
    /// binding). Locks are taken parents first, as everywhere else.
    pub fn with_scope<R>(&self, f: impl FnOnce(&QueryScope<'_>) -> R) -> Option<R> {
        let family = self.family();
        let guards: Vec<MutexGuard<'_, State>> = family.iter().map(Provenance::lock).collect();
        let mut snapshots = guards.iter().filter_map(|g| g.snapshot());
        let mut scope = QueryScope::new(snapshots.next()?);
        for child in snapshots {
            scope = scope.with_child(child);
        }
        Some(f(&scope))
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.locked()
    }

    /// Register the seams and the query tools on `ctx`, and bind to the session once the
    /// agent is built.
    pub fn install(&self, ctx: &mut InstallContext) {
        // Agent-scoped: the journal belongs to this session; a subagent must not write into it.
        seams::install(self, &mut ctx.agent_hooks);
        ctx.tools.push(Arc::new(TraceTool::new(self.clone())));
        ctx.tools.push(Arc::new(GetNodeTool::new(self.clone())));
        let me = self.clone();
        ctx.on_agent.push(Box::new(move |agent| {
            if let Err(e) = me.bind(&agent.session_id()) {
                tracing::warn!("provenance disabled for this session: {e}");
            }
        }));
    }

    /// Bind to `session`: open (create or resume) its journal, or start an in-memory recorder.
    /// On a journal error capture falls back to memory with a `capture/failure` receipt (so
    /// queries answer `CAPTURE_INCOMPLETE`) and the error is returned for logging.
    pub fn bind(&self, session: &SessionId) -> Result<Option<ResumeReport>, JournalError> {
        let mut state = self.lock();
        state.session = session.as_str().to_owned();
        let Some(home) = &self.home else {
            state.sink = Sink::Memory(Recorder::new(session.as_str()).without_lines());
            return Ok(None);
        };
        match Journal::open_in_home(home, session) {
            Ok(journal) => {
                let report = journal.resume_report().clone();
                state.sink = Sink::Journal(journal);
                Ok(Some(report))
            }
            Err(e) => {
                let mut recorder = Recorder::new(session.as_str()).without_lines();
                recorder.failure(
                    Stage::CaptureFailure,
                    "journal",
                    &format!("journal_io: {e}"),
                );
                state.sink = Sink::Memory(recorder);
                Err(e)
            }
        }
    }

    /// The journal directory, when bound to a journal.
    pub fn journal_dir(&self) -> Option<PathBuf> {
        match &self.lock().sink {
            Sink::Journal(j) => Some(j.dir().to_owned()),
            _ => None,
        }
    }

    /// Run `f` on the current snapshot (`None` before binding).
    pub fn with_snapshot<R>(&self, f: impl FnOnce(&Snapshot) -> R) -> Option<R> {
        let mut state = self.lock();
        state.recorder().map(|r| f(r.snapshot()))
    }

    /// Write pending receipts, fsync and publish `graph.json` now (also done at every step and
    /// turn boundary). Errors are recorded as capture failures.
    pub fn checkpoint(&self) {
        self.lock().flush(Durability::Graph);
    }

    /// [`Provenance::checkpoint`], then the newest outcome node and the `graph_id` of the
    /// snapshot (as published, in journal mode): what a parent joins. `None` before binding or
    /// when nothing produced an outcome.
    pub(crate) fn publish(&self) -> Option<(String, String)> {
        let mut state = self.lock();
        state.flush(Durability::Graph);
        let graph_id = match &state.sink {
            Sink::Journal(j) => j.published_graph_id().map(str::to_owned),
            _ => None,
        };
        let s = state.snapshot()?;
        let node = s.last_outcome()?.to_owned();
        Some((node, graph_id.unwrap_or_else(|| s.graph_id())))
    }
}
