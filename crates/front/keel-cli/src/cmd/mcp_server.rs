//! `keel mcp-server`: keel as an MCP server on stdin/stdout ([`keel_mcp::server`]). Each
//! `keel` call builds an agent on a new session the way `keel run` does, in the call's `cwd`
//! with its `sandbox`, `approval` and `model` over the global flags; each `keel_reply` resumes
//! a session the way `keel resume` does. Stdout carries only the protocol: every diagnostic
//! goes to stderr.

use super::Ctx;
use super::run::{discard_new_session, keep_session_modes};
use crate::cli::McpServerArgs;
use anyhow::Result;
use keel_agent::{Agent, ApprovalPolicy};
use keel_host::{AgentFactory, BuildOptions, Flags, LogFormat, ModelSource};
use keel_mcp::server::{
    self, Answer, ProgressUpdate, ReplyRequest, TaskRequest, TaskRunner, TurnControl,
};
use keel_protocol::sync::Locked;
use keel_session::{PersistentSession, WriterOptions};
use keel_tools::SandboxMode;
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// `keel mcp-server`.
pub fn run(ctx: &Ctx, args: McpServerArgs) -> Result<ExitCode> {
    let flags = ctx.flags()?;
    let model = super::run::server_model(ctx, &flags, args.script.as_deref())?;
    let runner = Runner {
        inner: Arc::new(Inner {
            ctx: ctx.clone(),
            flags,
            model,
            sessions: Mutex::new(HashMap::new()),
        }),
    };
    let rt = super::run::runtime()?;
    let _ = writeln!(
        std::io::stderr(),
        "keel: MCP server on stdio (tools keel, keel_reply; workspace {})",
        ctx.cwd.display()
    );
    let served = rt.block_on(server::serve_stdio(runner));
    // Calls that outlived the shutdown grace are abandoned with the process.
    rt.shutdown_timeout(Duration::from_secs(1));
    served?;
    Ok(ExitCode::SUCCESS)
}

/// What a session started by this server runs under, so that `keel_reply` continues it alike.
#[derive(Debug, Clone)]
struct Settings {
    cwd: PathBuf,
    sandbox: Option<SandboxMode>,
    approval: Option<ApprovalPolicy>,
    model: Option<String>,
}

struct Runner {
    inner: Arc<Inner>,
}

struct Inner {
    ctx: Ctx,
    flags: Flags,
    model: ModelSource,
    /// Sessions this server started, by id.
    sessions: Mutex<HashMap<String, Settings>>,
}

/// A failure as the tool result's text: the whole cause chain.
fn failure(e: impl Into<anyhow::Error>) -> String {
    format!("keel: {:#}", e.into())
}

impl TaskRunner for Runner {
    async fn run(&self, task: TaskRequest, control: TurnControl) -> Result<Answer, String> {
        let inner = self.inner.clone();
        let rt = tokio::runtime::Handle::current();
        // Building an agent reads configuration and files, and its turns run here too: a
        // blocking thread per call keeps the protocol's workers free.
        tokio::task::spawn_blocking(move || inner.run_task(task, &control, &rt))
            .await
            .map_err(|e| format!("keel: the call failed: {e}"))?
    }

    async fn reply(&self, reply: ReplyRequest, control: TurnControl) -> Result<Answer, String> {
        let inner = self.inner.clone();
        let rt = tokio::runtime::Handle::current();
        tokio::task::spawn_blocking(move || inner.reply_task(reply, &control, &rt))
            .await
            .map_err(|e| format!("keel: the call failed: {e}"))?
    }
}

impl Inner {
    /// The context and flags of a call under `settings`.
    fn setup(&self, settings: &Settings) -> (Ctx, Flags) {
        let mut ctx = self.ctx.clone();
        ctx.cwd = settings.cwd.clone();
        let mut flags = self.flags.clone();
        if settings.sandbox.is_some() {
            flags.sandbox = settings.sandbox;
        }
        if settings.approval.is_some() {
            flags.approval = settings.approval;
        }
        if settings.model.is_some() {
            flags.model = settings.model.clone();
        }
        (ctx, flags)
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, HashMap<String, Settings>> {
        self.sessions.locked()
    }

    fn run_task(
        &self,
        task: TaskRequest,
        control: &TurnControl,
        rt: &tokio::runtime::Handle,
    ) -> Result<Answer, String> {
        let cwd = match &task.cwd {
            Some(dir) => {
                let path = self.ctx.cwd.join(dir);
                let cwd = path
                    .canonicalize()
                    .map_err(|e| format!("keel: cwd {}: {e}", path.display()))?;
                if !cwd.is_dir() {
                    return Err(format!("keel: cwd {} is not a directory", cwd.display()));
                }
                cwd
            }
            None => self.ctx.cwd.clone(),
        };
        let settings = Settings {
            cwd,
            sandbox: task.sandbox,
            approval: task.approval,
            model: task.model,
        };
        let (ctx, flags) = self.setup(&settings);
        let host = ctx.host().map_err(failure)?;
        ctx.warn_untrusted(&host);
        let factory = host.factory(flags, self.model.clone()).map_err(failure)?;
        let log = factory
            .new_session_with(LogFormat::Plain, |h| h.origin = Some("mcp".into()))
            .map_err(failure)?;
        let path = log.writer().path().to_path_buf();
        let agent = match build_agent(&factory, log, control) {
            Ok(agent) => agent,
            Err(e) => {
                // Nothing ran: leave no empty session behind.
                discard_new_session(&ctx, &path);
                return Err(e);
            }
        };
        let id = agent.session_id().as_str().to_owned();
        self.sessions().insert(id.clone(), settings);
        start(&agent, id, &task.prompt, control, rt)
    }

    fn reply_task(
        &self,
        reply: ReplyRequest,
        control: &TurnControl,
        rt: &tokio::runtime::Handle,
    ) -> Result<Answer, String> {
        let id = reply.session_id.as_str();
        let path = self.find_session(id)?;
        let (log, load, repair) = PersistentSession::resume(&path, WriterOptions::default())
            .map_err(|e| failure(anyhow::Error::new(e).context(format!("cannot resume {id}"))))?;
        let _ = super::run::say_resumed(&path, &load, &repair, Some(id));
        let known = self.sessions().get(id).cloned();
        let settings = known.unwrap_or_else(|| {
            // A session of another keel: its own workspace, the server's defaults.
            let cwd = log
                .session()
                .header()
                .cwd
                .as_deref()
                .map(PathBuf::from)
                .filter(|d| d.is_dir())
                .unwrap_or_else(|| self.ctx.cwd.clone());
            Settings {
                cwd,
                sandbox: None,
                approval: None,
                model: None,
            }
        });
        let (ctx, mut flags) = self.setup(&settings);
        keep_session_modes(&mut flags, &log);
        let host = ctx.host().map_err(failure)?;
        ctx.warn_untrusted(&host);
        let factory = host.factory(flags, self.model.clone()).map_err(failure)?;
        let agent = build_agent(&factory, log, control)?;
        start(&agent, id.to_owned(), &reply.prompt, control, rt)
    }

    /// The session file of `id`: a whole session id (no prefix, no path) of the store.
    fn find_session(&self, id: &str) -> Result<PathBuf, String> {
        let unknown = || {
            format!(
                "keel: no session {id:?} in {}: pass the sessionId of an earlier keel answer",
                self.ctx.store.home().join("sessions").display()
            )
        };
        if id.is_empty()
            || !id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(unknown());
        }
        match self.ctx.store.resolve(id, &self.ctx.cwd) {
            Ok(path) if session_dir_name(&path) == Some(id) => Ok(path),
            Ok(_) | Err(keel_session::StoreError::NotFound { .. }) => Err(unknown()),
            Err(keel_session::StoreError::Ambiguous { .. }) => Err(unknown()),
            Err(e) => Err(failure(e)),
        }
    }
}

fn session_dir_name(path: &Path) -> Option<&str> {
    path.parent()?.file_name()?.to_str()
}

/// Build the agent over `log` with the call's progress observer.
fn build_agent(
    factory: &AgentFactory<'_>,
    log: PersistentSession,
    control: &TurnControl,
) -> Result<Agent, String> {
    let mut options = BuildOptions::default();
    server::observe_progress(&mut options.agent_hooks, control);
    let agent = factory.build(log, options).map_err(failure)?;
    let enforcement = agent.sandbox_enforcement();
    if !enforcement.is_complete() {
        let _ = writeln!(
            std::io::stderr(),
            "keel: warning: session {}: sandbox {}: {enforcement}",
            agent.session_id().as_str(),
            agent.sandbox()
        );
    }
    // A resumed session keeps the modes set during it (keel_agent::session_modes): say so.
    for note in &agent.kept_modes().notes {
        let _ = writeln!(
            std::io::stderr(),
            "keel: session {} {note}",
            agent.session_id().as_str()
        );
    }
    Ok(agent)
}

/// Report the session, queue `prompt` and run the turn under `control`.
fn start(
    agent: &Agent,
    id: String,
    prompt: &str,
    control: &TurnControl,
    rt: &tokio::runtime::Handle,
) -> Result<Answer, String> {
    control.report(ProgressUpdate::Started { session_id: id });
    agent.followup(prompt).map_err(failure)?;
    rt.block_on(server::drive(agent, control))
}
