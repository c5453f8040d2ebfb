//! `keel acp`: keel as an Agent Client Protocol agent on stdin/stdout ([`keel_acp`]), for
//! editors such as Zed. Every ACP session's agent is built here like `keel run`'s (a new
//! session in the client's `cwd`) or `keel resume`'s (`session/load` of any keel session id).
//! Stdout carries only the protocol: every diagnostic goes to stderr.

use super::Ctx;
use super::run::{discard_new_session, keep_session_modes};
use crate::cli::AcpArgs;
use anyhow::Result;
use keel_acp::{AgentSource, LoadError};
use keel_agent::Agent;
use keel_host::{BuildOptions, Flags, LogFormat, ModelSource};
use keel_session::{PersistentSession, StoreError, WriterOptions};
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

/// `keel acp`.
pub fn run(ctx: &Ctx, args: AcpArgs) -> Result<ExitCode> {
    let flags = ctx.flags()?;
    let model = super::run::server_model(ctx, &flags, args.script.as_deref())?;
    let lineage = args.delegated_from.map(|parent| {
        (
            keel_protocol::SessionId(parent),
            args.delegation_depth.unwrap_or(1),
        )
    });
    let source = Source {
        ctx: ctx.clone(),
        flags,
        model,
        lineage,
    };
    let rt = super::run::runtime()?;
    let _ = writeln!(
        std::io::stderr(),
        "keel: ACP agent on stdio (workspace {})",
        ctx.cwd.display()
    );
    let served = rt.block_on(keel_acp::serve_stdio(source));
    rt.shutdown_timeout(Duration::from_secs(1));
    served.map_err(|e| anyhow::anyhow!("ACP connection failed: {}", e.message))?;
    Ok(ExitCode::SUCCESS)
}

struct Source {
    ctx: Ctx,
    flags: Flags,
    model: ModelSource,
    /// `--delegated-from` (and depth): the parent new sessions name.
    lineage: Option<(keel_protocol::SessionId, u32)>,
}

impl Source {
    fn ctx_in(&self, cwd: &Path) -> Ctx {
        let mut ctx = self.ctx.clone();
        ctx.cwd = cwd.to_path_buf();
        ctx
    }

    fn warn_sandbox(agent: &Agent) {
        let enforcement = agent.sandbox_enforcement();
        if !enforcement.is_complete() {
            let _ = writeln!(
                std::io::stderr(),
                "keel: warning: session {}: sandbox {}: {enforcement}",
                agent.session_id().as_str(),
                agent.sandbox()
            );
        }
    }
}

impl AgentSource for Source {
    fn create(&self, cwd: &Path, options: BuildOptions) -> Result<Agent, String> {
        let ctx = self.ctx_in(cwd);
        let failure = |e: anyhow::Error| format!("keel: {e:#}");
        let host = ctx.host().map_err(failure)?;
        let factory = host
            .factory(self.flags.clone(), self.model.clone())
            .map_err(|e| failure(e.into()))?;
        let log = factory
            .new_session_with(LogFormat::Plain, |h| {
                h.origin = Some("acp".into());
                if let Some((parent, depth)) = &self.lineage {
                    h.parent_session = Some(parent.clone());
                    h.delegation_depth = *depth;
                }
            })
            .map_err(|e| failure(e.into()))?;
        let path = log.writer().path().to_path_buf();
        match factory.build(log, options) {
            Ok(agent) => {
                Self::warn_sandbox(&agent);
                Ok(agent)
            }
            Err(e) => {
                // Nothing ran: leave no empty session behind.
                discard_new_session(&ctx, &path);
                Err(failure(e.into()))
            }
        }
    }

    fn trust_notice(&self, cwd: &Path) -> Option<String> {
        super::trust::notice(&self.ctx_in(cwd))
    }

    fn trust(&self, cwd: &Path, args: &str) -> Result<String, String> {
        super::trust::slash(&self.ctx_in(cwd), args).map_err(|e| format!("{e:#}"))
    }

    fn load(&self, id: &str, cwd: &Path, options: BuildOptions) -> Result<Agent, LoadError> {
        let home = self.ctx.store.home().join("sessions");
        let unknown = || {
            LoadError::NotFound(format!(
                "keel: no session {id:?} in {}: pass the id of a keel session (keel sessions list --all)",
                home.display()
            ))
        };
        if id.is_empty()
            || !id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(unknown());
        }
        let path = match self.ctx.store.resolve(id, cwd) {
            Ok(path)
                if path
                    .parent()
                    .and_then(|d| d.file_name())
                    .and_then(|n| n.to_str())
                    == Some(id) =>
            {
                path
            }
            Ok(_) | Err(StoreError::NotFound { .. }) | Err(StoreError::Ambiguous { .. }) => {
                return Err(unknown());
            }
            Err(e) => return Err(LoadError::Unusable(format!("keel: session {id}: {e}"))),
        };
        let unusable = |e: anyhow::Error| LoadError::Unusable(format!("keel: session {id}: {e:#}"));
        let (log, load, repair) = PersistentSession::resume(&path, WriterOptions::default())
            .map_err(|e| {
                LoadError::Unusable(format!(
                    "keel: session {id} ({}) cannot be loaded: {e}",
                    path.display()
                ))
            })?;
        let _ = super::run::say_resumed(&path, &load, &repair, Some(id));
        let mut flags = self.flags.clone();
        keep_session_modes(&mut flags, &log);
        let ctx = self.ctx_in(cwd);
        let host = ctx.host().map_err(unusable)?;
        let factory = host
            .factory(flags, self.model.clone())
            .map_err(|e| unusable(e.into()))?;
        let agent = factory
            .build(log, options)
            .map_err(|e| unusable(e.into()))?;
        // A resumed session keeps the modes set during it (keel_agent::session_modes): say so.
        for note in &agent.kept_modes().notes {
            let _ = writeln!(std::io::stderr(), "keel: session {id} {note}");
        }
        Self::warn_sandbox(&agent);
        Ok(agent)
    }
}
