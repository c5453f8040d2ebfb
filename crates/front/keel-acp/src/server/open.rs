//! Opening sessions: the build options a session's agent gets (the client's approvals, files
//! and MCP servers, the update feed), `session/new`, `session/load`, and an agent built over a
//! stored session (replaying its history to the client when asked).

use super::modes::{agent_modes, modes, settle_mode};
use super::params::{mcp_servers, working_dir};
use super::turns::watch_wakes;
use super::{Live, Server, UpdateFeed, err, send};
use crate::approve::AcpApprover;
use crate::ask::AcpAsker;
use crate::files::ClientFiles;
use crate::map::{Feed, Mapper};
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    ErrorCode, LoadSessionRequest, LoadSessionResponse, McpServer, NewSessionRequest,
    NewSessionResponse, SessionId,
};
use agent_client_protocol::{Client, Error};
use keel_agent::Agent;
use keel_host::BuildOptions;
use keel_host::{AgentSource, SessionRef, SessionSpec, SourceError};
use keel_protocol::SessionEvent;
use keel_protocol::sync::Locked;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use tokio::sync::Notify;

impl<S: AgentSource + 'static> Server<S> {
    /// Build options feeding `feed`, asking the client for approvals, reading and writing
    /// files through it when it offered to, with the session's own MCP servers.
    pub(super) fn options(
        &self,
        feed: &Arc<UpdateFeed>,
        cwd: &Path,
        servers: &[McpServer],
    ) -> Result<BuildOptions, Error> {
        let mut options = BuildOptions {
            mcp_servers: mcp_servers(servers)?,
            ..BuildOptions::default()
        };
        let fs = self.client_fs.locked().clone();
        if let Some(files) = ClientFiles::offered(feed.cx.clone(), feed.session.clone(), &fs) {
            options.text_files = Some(Arc::new(files));
        }
        let observer = feed.clone();
        options
            .agent_hooks
            .session_event
            .push(Arc::new(move |ev: &SessionEvent| observer.observe(ev)));
        let wake = feed.wake.clone();
        options.agent_hooks.inbox_inserted.push(Arc::new(
            move |m: &keel_agent::seams::InboxInserted| {
                if m.mode == keel_agent::InboxMode::Followup && !m.message.source.is_user() {
                    wake.notify_one();
                }
            },
        ));
        options.approver = Some(Arc::new(AcpApprover::new(
            feed.cx.clone(),
            feed.session.clone(),
            cwd.to_path_buf(),
        )));
        options.asker = Some(Arc::new(AcpAsker::new(
            feed.cx.clone(),
            feed.session.clone(),
            cwd.to_path_buf(),
            self.client_forms.load(Ordering::SeqCst),
        )));
        Ok(options)
    }

    pub(super) fn feed(cx: ConnectionTo<Client>, cwd: &Path, on: bool) -> Arc<UpdateFeed> {
        Arc::new(UpdateFeed {
            cx,
            session: Arc::new(OnceLock::new()),
            mapper: Mutex::new(Mapper::new(
                cwd,
                if on { Feed::Live } else { Feed::Replay },
                &keel_host::presenters(),
            )),
            on: AtomicBool::new(on),
            wake: Arc::new(Notify::new()),
            models: OnceLock::new(),
        })
    }

    /// Put `agent` in the table of open sessions (replacing an agent of the same session).
    pub(super) fn open(
        &self,
        agent: Agent,
        feed: Arc<UpdateFeed>,
        cwd: PathBuf,
        servers: Vec<McpServer>,
    ) -> Arc<Live> {
        let id = SessionId::new(agent.session_id().as_str());
        feed.mapper.locked().set_modes(agent_modes(&agent));
        let _ = feed.session.set(id.clone());
        let _ = feed.models.set(self.models_of(&agent));
        let live = Arc::new(Live {
            id: id.clone(),
            agent,
            running: AtomicBool::new(false),
            cancelled: AtomicBool::new(false),
            cancel: Notify::new(),
            feed,
            custom: OnceLock::new(),
            source: self.source.clone(),
            cwd,
            servers,
            waker: OnceLock::new(),
        });
        let waker = tokio::spawn(watch_wakes(Arc::downgrade(&live), live.feed.wake.clone()));
        let _ = live.waker.set(waker.abort_handle());
        self.sessions().insert(id.0, live.clone());
        live
    }

    pub(super) async fn new_session(
        &self,
        req: NewSessionRequest,
        cx: ConnectionTo<Client>,
    ) -> Result<(NewSessionResponse, Arc<Live>), Error> {
        let cwd = working_dir(&req.cwd)?;
        let feed = Self::feed(cx, &cwd, true);
        let options = self.options(&feed, &cwd, &req.mcp_servers)?;
        let servers = req.mcp_servers;
        let source = self.source.clone();
        let dir = cwd.clone();
        let built =
            tokio::task::spawn_blocking(move || source.create(&SessionSpec::in_dir(dir), options))
                .await
                .map_err(|e| err(ErrorCode::InternalError, format!("keel: {e}")))?;
        let agent = built.map_err(|e| err(ErrorCode::InternalError, e.to_string()))?;
        let modes = modes(&agent);
        let live = self.open(agent, feed, cwd, servers);
        let options = self.config_options(&live);
        Ok((
            NewSessionResponse::new(live.id.clone())
                .modes(modes)
                .config_options(options),
            live,
        ))
    }

    pub(super) async fn load_session(
        &self,
        req: LoadSessionRequest,
        cx: ConnectionTo<Client>,
    ) -> Result<(LoadSessionResponse, Arc<Live>), Error> {
        let cwd = working_dir(&req.cwd)?;
        let live = self
            .reopen(&req.session_id, cwd, req.mcp_servers, cx, true)
            .await?;
        let answer = LoadSessionResponse::new()
            .modes(modes(&live.agent))
            .config_options(self.config_options(&live));
        Ok((answer, live))
    }

    /// The open session `id`, or an agent built over it (`session/load`, `session/resume`,
    /// `session/fork`'s new session), with its history sent as updates when `replay`.
    pub(super) async fn reopen(
        &self,
        id: &SessionId,
        cwd: PathBuf,
        servers: Vec<McpServer>,
        cx: ConnectionTo<Client>,
        replay: bool,
    ) -> Result<Arc<Live>, Error> {
        let open = self.sessions().get(&id.0).cloned();
        if let Some(live) = open {
            if !replay {
                return Ok(live);
            }
            // Open here already: its history again, from the agent that has it (a second
            // agent would write the same log).
            if live.running.load(Ordering::Acquire) {
                return Err(err(
                    ErrorCode::InvalidParams,
                    format!("session {} is running a prompt: cancel it first", &*id.0),
                ));
            }
            let updates = {
                let log = live.agent.log();
                let mut mapper = Mapper::new(&cwd, Feed::Replay, &keel_host::presenters());
                let mut updates = Vec::new();
                for event in log.session().events() {
                    updates.extend(mapper.map(&event));
                }
                updates.extend(settle_mode(&mapper, &live.agent));
                updates
            };
            for update in updates {
                send(&cx, id, update);
            }
            return Ok(live);
        }
        let feed = Self::feed(cx.clone(), &cwd, false);
        let _ = feed.session.set(id.clone());
        let options = self.options(&feed, &cwd, &servers)?;
        let agent = self
            .build_over(id, SessionSpec::in_dir(cwd.clone()), options)
            .await?;
        // Replay the history, then go live.
        let updates = {
            let log = agent.log();
            let mut mapper = feed.mapper.locked();
            let mut updates = Vec::new();
            if replay {
                for event in log.session().events() {
                    updates.extend(mapper.map(&event));
                }
                updates.extend(settle_mode(&mapper, &agent));
            }
            mapper.set_feed(Feed::Live);
            updates
        };
        for update in updates {
            send(&cx, id, update);
        }
        feed.on.store(true, Ordering::Release);
        Ok(self.open(agent, feed, cwd, servers))
    }

    /// An agent over the stored session `id` under `spec` (cold resume with crash repair).
    pub(super) async fn build_over(
        &self,
        id: &SessionId,
        spec: SessionSpec,
        options: BuildOptions,
    ) -> Result<Agent, Error> {
        let source = self.source.clone();
        let name = id.0.to_string();
        let built = tokio::task::spawn_blocking(move || {
            source.resume(SessionRef::Id(&name), &spec, options)
        })
        .await
        .map_err(|e| err(ErrorCode::InternalError, format!("keel: {e}")))?;
        built.map_err(|e| match e {
            SourceError::NotFound(m) => err(
                ErrorCode::ResourceNotFound,
                format!(
                    "{m}: pass the id of a keel session (session/list, keel sessions list --all)"
                ),
            ),
            SourceError::Failed(m) | SourceError::Unsupported(m) | SourceError::Busy(m) => {
                err(ErrorCode::InvalidParams, m)
            }
        })
    }
}
