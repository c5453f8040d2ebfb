//! The binary's one [`AgentSource`]: the agents of the terminal UI, `keel acp` and
//! `keel mcp-server`, built like `keel run`'s (a new session) and `keel resume`'s (a cold
//! resume that keeps the session's modes), from the configuration layers and the global flags.
//! What differs between the front ends is set when the source is made: the header's `origin`,
//! a delegation lineage, whether diagnostics go to stderr.

use super::Ctx;
use super::run::{discard_new_session, keep_session_modes};
use keel_agent::Agent;
use keel_host::{
    AgentSource, BuildOptions, Flags, LogFormat, ModelSource, ProjectTrust, SessionEntry,
    SessionRef, SessionSpec, SourceError, WorkspaceTrust,
};
use keel_protocol::SessionId;
use keel_protocol::sync::Locked;
use keel_session::{PersistentSession, StoreError, WriterOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// What goes to stderr as agents are built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Say {
    /// Nothing: the terminal belongs to the UI, which shows what matters in its transcript.
    Nothing,
    /// The resumed session, an incomplete sandbox, the modes a resumed session keeps (ACP
    /// shows the workspace's trust notice in the session itself).
    Notes,
    /// [`Say::Notes`] and the untrusted workspace's notice (headless servers).
    NotesAndTrust,
}

/// The binary's agent source.
pub(crate) struct Source {
    ctx: Ctx,
    flags: Flags,
    model: ModelSource,
    /// The session header's `origin` for new sessions (`acp`, `mcp`).
    origin: Option<&'static str>,
    /// `--delegated-from` (and depth): the parent new sessions name.
    lineage: Option<(SessionId, u32)>,
    say: Say,
    /// The run's own trust decision (`--trust-project`), until the person records one
    /// ([`AgentSource::record_trust`]): from then on the recorded decision holds.
    trust_flag: Mutex<Option<ProjectTrust>>,
    /// The session files [`AgentSource::create`] made in this process, for
    /// [`Source::discard_unused`].
    created: Mutex<Vec<PathBuf>>,
}

impl Source {
    /// Agents in `ctx`'s workspace built with `flags` and `model`.
    pub(crate) fn new(ctx: &Ctx, flags: Flags, model: ModelSource, say: Say) -> Self {
        Self {
            trust_flag: Mutex::new(ctx.project_trust()),
            ctx: ctx.clone(),
            flags,
            model,
            origin: None,
            lineage: None,
            say,
            created: Mutex::new(Vec::new()),
        }
    }

    /// Remove the sessions this source created that never got a turn (the UI opened and left
    /// without a prompt), so `keel resume` and the picker do not offer them. Call once their
    /// agents are gone: a session still open for writing (its lock held) is kept, and so is
    /// one that cannot be loaded. Returns the files removed.
    pub(crate) fn discard_unused(&self) -> Vec<PathBuf> {
        let created = match self.created.lock() {
            Ok(mut created) => std::mem::take(&mut *created),
            Err(_) => return Vec::new(),
        };
        created
            .into_iter()
            .filter(|path| {
                let Ok(lock) = keel_session::Store::lock(path) else {
                    return false;
                };
                let unused = keel_session::Store::load(path)
                    .is_ok_and(|loaded| loaded.session.turn_count() == 0);
                if unused {
                    let _ = std::fs::remove_file(path);
                    drop(lock);
                    if let Some(dir) = path.parent() {
                        let _ = std::fs::remove_file(dir.join(keel_session::SUMMARY_FILE));
                    }
                    discard_new_session(&self.ctx, path);
                }
                unused
            })
            .collect()
    }

    /// New sessions record `origin` in their header.
    pub(crate) fn origin(mut self, origin: &'static str) -> Self {
        self.origin = Some(origin);
        self
    }

    /// New sessions name `parent` (at delegation `depth`) as the session they were delegated
    /// from.
    pub(crate) fn lineage(mut self, lineage: Option<(SessionId, u32)>) -> Self {
        self.lineage = lineage;
        self
    }

    /// The context agents in `cwd` are built in: the command line's, with the run's trust
    /// flag as it stands now.
    fn ctx_in(&self, cwd: Option<&Path>) -> Ctx {
        let mut ctx = self.ctx.clone();
        if let Some(cwd) = cwd {
            ctx.cwd = cwd.to_path_buf();
        }
        let flag = *self.trust_flag.locked();
        if flag != ctx.project_trust() {
            ctx.common.trust_project = false;
            ctx.common.project_trust = flag.map(|t| t.as_str().to_owned());
        }
        ctx
    }

    /// The flags of an agent under `spec`.
    fn flags_for(&self, spec: &SessionSpec) -> Flags {
        let mut flags = self.flags.clone();
        if spec.sandbox.is_some() {
            flags.sandbox = spec.sandbox;
        }
        if spec.approval.is_some() {
            flags.approval = spec.approval;
        }
        if spec.model.is_some() {
            flags.model = spec.model.clone();
        }
        if spec.effort.is_some() {
            flags.reasoning_effort = spec.effort.clone();
        }
        flags
    }

    /// The host of `ctx`.
    fn host(&self, ctx: &Ctx) -> Result<keel_host::Host, SourceError> {
        let host = ctx.host().map_err(failed)?;
        if self.say == Say::NotesAndTrust {
            ctx.warn_untrusted(&host);
        }
        Ok(host)
    }

    /// Say on stderr what a front end without a transcript should know about `agent`.
    fn say_built(&self, agent: &Agent) {
        if self.say == Say::Nothing {
            return;
        }
        let id = agent.session_id();
        let id = id.as_str();
        let enforcement = agent.sandbox_enforcement();
        if !enforcement.is_complete() {
            let _ = writeln!(
                std::io::stderr(),
                "keel: warning: session {id}: sandbox {}: {enforcement}",
                agent.sandbox()
            );
        }
        // A resumed session keeps the modes set during it (keel_agent::session_modes): say so.
        for note in &agent.kept_modes().notes {
            let _ = writeln!(std::io::stderr(), "keel: session {id} {note}");
        }
        for skipped in agent.skipped_instructions() {
            let _ = writeln!(std::io::stderr(), "keel: warning: {skipped}");
        }
    }

    /// The session file of `id`: a whole session id (no prefix, no path) of the store.
    fn find(&self, id: &str, cwd: &Path) -> Result<PathBuf, SourceError> {
        let unknown = || {
            SourceError::NotFound(format!(
                "no session {id:?} in {}",
                self.ctx.store.home().join("sessions").display()
            ))
        };
        if id.is_empty()
            || !id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(unknown());
        }
        match self.ctx.store.resolve(id, cwd) {
            Ok(path)
                if path
                    .parent()
                    .and_then(|d| d.file_name())
                    .and_then(|n| n.to_str())
                    == Some(id) =>
            {
                Ok(path)
            }
            Ok(_) | Err(StoreError::NotFound { .. }) | Err(StoreError::Ambiguous { .. }) => {
                Err(unknown())
            }
            Err(e) => Err(SourceError::Failed(format!("session {id}: {e}"))),
        }
    }
}

/// A failure as a person reads it: the whole cause chain.
fn failed(e: impl Into<anyhow::Error>) -> SourceError {
    SourceError::Failed(format!("{:#}", e.into()))
}

impl AgentSource for Source {
    fn reads_images(&self) -> bool {
        let ctx = self.ctx_in(None);
        let Ok(host) = ctx.host() else {
            return false;
        };
        host.factory(self.flags.clone(), self.model.clone())
            .is_ok_and(|f| f.route().info.vision)
    }

    fn create(&self, spec: &SessionSpec, options: BuildOptions) -> Result<Agent, SourceError> {
        let ctx = self.ctx_in(spec.cwd.as_deref());
        let host = self.host(&ctx)?;
        let factory = host
            .factory(self.flags_for(spec), self.model.clone())
            .map_err(failed)?;
        let log = factory
            .new_session_with(LogFormat::Plain, |h| {
                if let Some(origin) = self.origin {
                    h.origin = Some(origin.into());
                }
                if let Some((parent, depth)) = &self.lineage {
                    h.parent_session = Some(parent.clone());
                    h.delegation_depth = *depth;
                }
            })
            .map_err(failed)?;
        let path = log.writer().path().to_path_buf();
        match factory.build(log, options) {
            Ok(agent) => {
                self.say_built(&agent);
                if let Ok(mut created) = self.created.lock() {
                    created.push(path);
                }
                Ok(agent)
            }
            Err(e) => {
                // Nothing ran: leave no empty session behind.
                discard_new_session(&ctx, &path);
                Err(failed(e))
            }
        }
    }

    fn resume(
        &self,
        session: SessionRef<'_>,
        spec: &SessionSpec,
        options: BuildOptions,
    ) -> Result<Agent, SourceError> {
        let (path, id) = match session {
            SessionRef::Id(id) => {
                let cwd = spec.cwd.as_deref().unwrap_or(&self.ctx.cwd);
                (self.find(id, cwd)?, Some(id))
            }
            SessionRef::Path(path) => (path.to_path_buf(), None),
        };
        let (log, load, repair) = PersistentSession::resume(&path, WriterOptions::default())
            .map_err(|e| {
                if let keel_session::PersistentError::Store(busy @ StoreError::Busy { .. }) = &e {
                    return SourceError::Busy(busy.to_string());
                }
                SourceError::Failed(match id {
                    Some(id) => format!("session {id} ({}) cannot be loaded: {e}", path.display()),
                    None => format!("cannot resume {}: {e}", path.display()),
                })
            })?;
        if self.say != Say::Nothing {
            let _ = super::run::say_resumed(&path, &load, &repair, id);
        }
        // No workspace asked for: the session's own, while it exists.
        let cwd = spec.cwd.clone().or_else(|| {
            log.session()
                .header()
                .cwd
                .as_deref()
                .map(PathBuf::from)
                .filter(|d| d.is_dir())
        });
        let ctx = self.ctx_in(cwd.as_deref());
        let mut flags = self.flags_for(spec);
        // The model chosen during the session (an editor's selector) is the session's, as its
        // modes are: it wins over the configured one unless the front end asks for another.
        if spec.model.is_none()
            && let Some(model) = keel_agent::session_modes::last_model(log.session())
        {
            flags.model = Some(model);
        }
        if spec.effort.is_none()
            && let Some(effort) = keel_agent::session_modes::last_effort(log.session())
        {
            flags.reasoning_effort = Some(effort);
        }
        keep_session_modes(&mut flags, &log);
        let host = self.host(&ctx)?;
        // The provider, model and server the session logged, unless the front end names others.
        let flags = keel_host::resume_flags(&host, flags, log.session());
        let factory = host.factory(flags, self.model.clone()).map_err(failed)?;
        let agent = factory.build(log, options).map_err(failed)?;
        self.say_built(&agent);
        Ok(agent)
    }

    fn workspace(&self) -> &Path {
        &self.ctx.cwd
    }

    fn models(&self) -> Vec<String> {
        let ctx = self.ctx_in(None);
        let configured = ctx.host().ok().map(|host| {
            let c = &host.config().config;
            let first = self
                .flags
                .model
                .clone()
                .or_else(|| c.model.clone())
                .unwrap_or_else(|| keel_llm::DEFAULT_MODEL.to_owned());
            (first, c.models.keys().cloned().collect::<Vec<_>>())
        });
        let (first, declared) = configured.unwrap_or_else(|| {
            let first = self
                .flags
                .model
                .clone()
                .unwrap_or_else(|| keel_llm::DEFAULT_MODEL.to_owned());
            (first, Vec::new())
        });
        let catalogue = keel_llm::ModelCatalogue::default();
        let mut out = vec![first];
        for name in declared
            .into_iter()
            .chain(catalogue.names().map(str::to_owned))
        {
            if !out.contains(&name) {
                out.push(name);
            }
        }
        out
    }

    fn fork(
        &self,
        session: SessionRef<'_>,
        cwd: &Path,
        at: Option<u64>,
    ) -> Result<(String, PathBuf), SourceError> {
        use super::sessions::{fork_at, fork_boundary, load};
        let file = match session {
            SessionRef::Id(id) => self.find(id, cwd)?,
            SessionRef::Path(path) => path.to_path_buf(),
        };
        let ctx = self.ctx_in(Some(cwd));
        let loaded = load(&file).map_err(failed)?;
        let parent = &loaded.session;
        let at = at.map(|seq| format!("seq:{seq}"));
        let boundary = fork_boundary(parent, at.as_deref(), "the fork point").map_err(failed)?;
        let (child, path, _) = fork_at(&ctx, &file, parent, boundary).map_err(failed)?;
        Ok((child.as_str().to_owned(), path))
    }

    fn resolve(&self, cwd: &Path, query: Option<&str>) -> Result<PathBuf, SourceError> {
        let ctx = self.ctx_in(Some(cwd));
        match query {
            None => super::run::latest_session(&ctx).map_err(failed),
            Some(q) => ctx
                .store
                .resolve(q, cwd)
                .map_err(|e| SourceError::NotFound(e.to_string())),
        }
    }

    fn sessions(&self, cwd: &Path) -> Vec<SessionEntry> {
        let mut list = self.ctx.store.list(Some(cwd));
        // A session opened and left without a prompt holds nothing to continue.
        list.retain(|s| s.problem.is_none() && s.turns > 0);
        list.sort_by_key(|s| std::cmp::Reverse((s.last_modified, s.created)));
        list.into_iter()
            .map(|s| SessionEntry {
                bytes: std::fs::metadata(&s.path).map_or(0, |m| m.len()),
                modified: s
                    .last_modified
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(s.created, |d| d.as_millis() as i64),
                title: s.title.or(s.first_prompt).unwrap_or_default(),
                id: s.id,
                path: s.path,
            })
            .collect()
    }

    fn search_sessions(
        &self,
        cwd: &Path,
        query: &str,
    ) -> Result<Vec<(PathBuf, String)>, SourceError> {
        let mut index = keel_search::Index::open(self.ctx.store.home()).map_err(failed)?;
        index.refresh(&self.ctx.store).map_err(failed)?;
        let project = keel_session::Store::project_key(cwd);
        let hits = index.search(query, Some(&project), 200).map_err(failed)?;
        let mut out: Vec<(PathBuf, String)> = Vec::new();
        for hit in hits {
            if !out.iter().any(|(p, _)| *p == hit.path) {
                out.push((hit.path, hit.snippet));
            }
        }
        Ok(out)
    }

    fn trust(&self, cwd: &Path) -> Result<WorkspaceTrust, SourceError> {
        let ctx = self.ctx_in(Some(cwd));
        let host = ctx.host().map_err(failed)?;
        let loaded = host.config();
        Ok(WorkspaceTrust {
            decision: loaded.trust.clone(),
            files: loaded.governed.clone(),
        })
    }

    fn record_trust(
        &self,
        cwd: &Path,
        level: ProjectTrust,
    ) -> Result<(PathBuf, PathBuf), SourceError> {
        let file = self.ctx.home.join("config.toml");
        let root = keel_host::trust::record(&file, cwd, level).map_err(failed)?;
        *self.trust_flag.locked() = None;
        Ok((root, file))
    }

    fn endpoint(&self) -> Result<keel_host::Endpoint, SourceError> {
        let ctx = self.ctx_in(None);
        let host = ctx.host().map_err(failed)?;
        host.endpoint(&self.flags).map_err(failed)
    }

    fn extensions(&self, cwd: &Path) -> Result<keel_host::switches::Extensions, SourceError> {
        let ctx = self.ctx_in(Some(cwd));
        let host = ctx.host().map_err(failed)?;
        let root = ctx.cwd.clone();
        Ok(keel_host::switches::extensions(
            host.config(),
            &keel_host::plugins::builtin(),
            &root,
            &ctx.home,
        ))
    }

    fn switch(
        &self,
        cwd: &Path,
        kind: keel_host::switches::SwitchKind,
        name: &str,
        enabled: bool,
    ) -> Result<(PathBuf, PathBuf), SourceError> {
        let file = self.ctx.home.join("config.toml");
        let root = keel_host::switches::record(&file, cwd, kind, name, enabled).map_err(failed)?;
        Ok((root, file))
    }

    fn price(&self, model: &str) -> Option<keel_llm::Price> {
        let host = self.ctx.host().ok()?;
        host.config().config.price(model)
    }
}
