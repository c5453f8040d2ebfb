//! The session methods beyond new/load: `session/list` (keel's sessions of a directory, newest
//! first), `session/resume` (a load without the replay), `session/close` and the unstable
//! `session/fork` (`keel fork`: a new session seeded with the parent's completed turns).

use super::params::working_dir;
use super::{Live, RECANCEL_EVERY, SHUTDOWN_GRACE, Server, durable, err, modes};
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    CloseSessionRequest, CloseSessionResponse, ErrorCode, ForkSessionRequest, ForkSessionResponse,
    ListSessionsRequest, ListSessionsResponse, ResumeSessionRequest, ResumeSessionResponse,
    SessionCapabilities, SessionCloseCapabilities, SessionForkCapabilities, SessionId, SessionInfo,
    SessionListCapabilities, SessionResumeCapabilities,
};
use agent_client_protocol::{Client, Error};
use keel_host::{AgentSource, SourceError};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use tokio::time::Instant;

/// Sessions per `session/list` page.
pub(super) const PAGE: usize = 100;

/// What `initialize` says of the session methods.
pub(super) fn capabilities() -> SessionCapabilities {
    SessionCapabilities::new()
        .list(SessionListCapabilities::new())
        .resume(SessionResumeCapabilities::new())
        .close(SessionCloseCapabilities::new())
        .fork(SessionForkCapabilities::new())
}

impl<S: AgentSource + 'static> Server<S> {
    /// `session/list`: keel's sessions of the request's `cwd` (the workspace `keel acp` was
    /// started in when it names none), newest first, [`PAGE`] at a time; the cursor is the
    /// index of the next page's first session.
    pub(super) async fn list_sessions(
        &self,
        req: ListSessionsRequest,
    ) -> Result<ListSessionsResponse, Error> {
        let cwd = match &req.cwd {
            Some(cwd) => working_dir(cwd)?,
            None => self.source.workspace().to_path_buf(),
        };
        let from = match req.cursor.as_deref() {
            None => 0,
            Some(c) => c.parse::<usize>().map_err(|_| {
                err(
                    ErrorCode::InvalidParams,
                    format!(
                        "session/list: cursor {c:?} is not one keel gave (pass the nextCursor of \
                         the previous page, or none for the first)"
                    ),
                )
            })?,
        };
        let source = self.source.clone();
        let dir = cwd.clone();
        let all = tokio::task::spawn_blocking(move || source.sessions(&dir))
            .await
            .map_err(|e| err(ErrorCode::InternalError, format!("keel: {e}")))?;
        let sessions = all
            .iter()
            .skip(from)
            .take(PAGE)
            .map(|s| {
                let title = Some(s.title.clone()).filter(|t| !t.is_empty());
                SessionInfo::new(s.id.clone(), cwd.clone())
                    .title(title)
                    .updated_at(Some(keel_protocol::ids::utc_rfc3339(s.modified)))
            })
            .collect();
        let next = from.saturating_add(PAGE);
        Ok(ListSessionsResponse::new(sessions)
            .next_cursor((next < all.len()).then(|| next.to_string())))
    }

    /// `session/resume`: `session/load` without the replay.
    pub(super) async fn resume_session(
        &self,
        req: ResumeSessionRequest,
        cx: ConnectionTo<Client>,
    ) -> Result<(ResumeSessionResponse, Arc<Live>), Error> {
        let cwd = working_dir(&req.cwd)?;
        let live = self
            .reopen(&req.session_id, cwd, req.mcp_servers, cx, false)
            .await?;
        let answer = ResumeSessionResponse::new()
            .modes(modes(&live.agent))
            .config_options(self.config_options(&live));
        Ok((answer, live))
    }

    /// `session/close`: the running prompt cancelled (and awaited), background jobs killed,
    /// the agent dropped. The session stays in the store (`session/load` opens it again).
    pub(super) async fn close_session(
        &self,
        req: &CloseSessionRequest,
    ) -> Result<CloseSessionResponse, Error> {
        let Some(live) = self.sessions().remove(&req.session_id.0) else {
            return Err(err(
                ErrorCode::ResourceNotFound,
                format!(
                    "no open session {:?} to close (session/list names the stored ones)",
                    &*req.session_id.0
                ),
            ));
        };
        if live.running.load(Ordering::Acquire) {
            live.cancelled.store(true, Ordering::Release);
            live.cancel.notify_one();
            let deadline = Instant::now() + SHUTDOWN_GRACE;
            while live.running.load(Ordering::Acquire) && Instant::now() < deadline {
                tokio::time::sleep(RECANCEL_EVERY / 4).await;
            }
        }
        live.agent.kill_jobs();
        // The agent ends off the async threads (its log writer joins its thread).
        drop(tokio::task::spawn_blocking(move || drop(live)));
        Ok(CloseSessionResponse::new())
    }

    /// `session/fork`: a new session seeded with the parent's completed turns (`keel fork`),
    /// opened here without a replay; the parent is untouched.
    pub(super) async fn fork_session(
        &self,
        req: ForkSessionRequest,
        cx: ConnectionTo<Client>,
    ) -> Result<(ForkSessionResponse, Arc<Live>), Error> {
        let cwd = working_dir(&req.cwd)?;
        let parent = req.session_id.clone();
        // An open parent's log is read from disk: all of it there first.
        let open = self.sessions().get(&parent.0).cloned();
        if let Some(live) = open {
            durable(&live, "log before the fork").await?;
        }
        let source = self.source.clone();
        let (id, dir) = (parent.0.to_string(), cwd.clone());
        let forked = tokio::task::spawn_blocking(move || {
            source
                .fork(keel_host::SessionRef::Id(&id), &dir, None)
                .map(|(id, _)| id)
        })
        .await
        .map_err(|e| err(ErrorCode::InternalError, format!("keel: {e}")))?;
        let child = forked.map_err(|e| match e {
            SourceError::NotFound(m) => err(
                ErrorCode::ResourceNotFound,
                format!("{m}: pass the id of a keel session (session/list)"),
            ),
            SourceError::Failed(m) | SourceError::Busy(m) => err(ErrorCode::InvalidParams, m),
            SourceError::Unsupported(m) => err(ErrorCode::MethodNotFound, m),
        })?;
        let child = SessionId::new(child.as_str());
        let live = self.reopen(&child, cwd, req.mcp_servers, cx, false).await?;
        let answer = ForkSessionResponse::new(live.id.clone())
            .modes(modes(&live.agent))
            .config_options(self.config_options(&live));
        Ok((answer, live))
    }
}
