//! The calls' runner over an [`AgentSource`]: a `keel` call builds an agent on a new session
//! the way `keel run` does, in the call's `cwd` with its `sandbox`, `approval` and `model`; a
//! `keel_reply` resumes a session the way `keel resume` does, under the settings it was started
//! with here (or, for a session of another keel, in its own workspace with the defaults).

use crate::{Answer, ProgressUpdate, ReplyRequest, TaskRequest, TaskRunner, TurnControl};
use keel_agent::Agent;
use keel_host::{AgentSource, BuildOptions, SessionRef, SessionSpec, SourceError};
use keel_protocol::sync::Locked;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Runs the server's calls with agents from `S`.
pub(crate) struct Runner<S> {
    inner: Arc<Inner<S>>,
}

struct Inner<S> {
    source: S,
    /// What the sessions this server started run under, by id, so that `keel_reply`
    /// continues them alike.
    sessions: Mutex<HashMap<String, SessionSpec>>,
}

impl<S: AgentSource + 'static> Runner<S> {
    /// A runner building agents with `source`.
    pub(crate) fn new(source: S) -> Self {
        Runner {
            inner: Arc::new(Inner {
                source,
                sessions: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// Run `job` on a blocking thread: building an agent reads configuration and files, and
    /// its turns run there too, which keeps the protocol's workers free.
    async fn blocking(
        &self,
        job: impl FnOnce(&Inner<S>, &tokio::runtime::Handle) -> Result<Answer, SourceError>
        + Send
        + 'static,
    ) -> Result<Answer, SourceError> {
        let inner = self.inner.clone();
        let rt = tokio::runtime::Handle::current();
        tokio::task::spawn_blocking(move || job(&inner, &rt))
            .await
            .map_err(|e| SourceError::Failed(format!("keel: the call failed: {e}")))?
    }
}

impl<S: AgentSource + 'static> TaskRunner for Runner<S> {
    async fn run(&self, task: TaskRequest, control: TurnControl) -> Result<Answer, SourceError> {
        self.blocking(move |inner, rt| inner.run_task(task, &control, rt))
            .await
    }

    async fn reply(
        &self,
        reply: ReplyRequest,
        control: TurnControl,
    ) -> Result<Answer, SourceError> {
        self.blocking(move |inner, rt| inner.reply_task(reply, &control, rt))
            .await
    }
}

impl<S: AgentSource> Inner<S> {
    fn run_task(
        &self,
        task: TaskRequest,
        control: &TurnControl,
        rt: &tokio::runtime::Handle,
    ) -> Result<Answer, SourceError> {
        let cwd = match &task.cwd {
            Some(dir) => {
                let path = self.source.workspace().join(dir);
                let cwd = path.canonicalize().map_err(|e| {
                    SourceError::Failed(format!("keel: cwd {}: {e}", path.display()))
                })?;
                if !cwd.is_dir() {
                    return Err(SourceError::Failed(format!(
                        "keel: cwd {} is not a directory",
                        cwd.display()
                    )));
                }
                cwd
            }
            None => self.source.workspace().to_path_buf(),
        };
        let spec = SessionSpec {
            cwd: Some(cwd),
            sandbox: task.sandbox,
            approval: task.approval,
            model: task.model,
            effort: None,
        };
        let agent = self.source.create(&spec, options(control))?;
        let id = agent.session_id().as_str().to_owned();
        self.sessions.locked().insert(id.clone(), spec);
        start(&agent, id, &task.prompt, control, rt)
    }

    fn reply_task(
        &self,
        reply: ReplyRequest,
        control: &TurnControl,
        rt: &tokio::runtime::Handle,
    ) -> Result<Answer, SourceError> {
        let id = reply.session_id.as_str();
        // A session of another keel: its own workspace, the server's defaults.
        let spec = self.sessions.locked().get(id).cloned().unwrap_or_default();
        let agent = self
            .source
            .resume(SessionRef::Id(id), &spec, options(control))
            .map_err(|e| match e {
                SourceError::NotFound(m) => SourceError::NotFound(format!(
                    "{m}: pass the sessionId of an earlier keel answer"
                )),
                e => e,
            })?;
        start(&agent, id.to_owned(), &reply.prompt, control, rt)
    }
}

/// The build options of a call's agent: its session events reported to `control`.
fn options(control: &TurnControl) -> BuildOptions {
    let mut options = BuildOptions::default();
    crate::observe_progress(&mut options.agent_hooks, control);
    options
}

/// Report the session, queue `prompt` and run the turn under `control`.
fn start(
    agent: &Agent,
    id: String,
    prompt: &str,
    control: &TurnControl,
    rt: &tokio::runtime::Handle,
) -> Result<Answer, SourceError> {
    control.report(ProgressUpdate::Started { session_id: id });
    agent
        .followup(prompt)
        .map_err(|e| SourceError::Failed(format!("keel: {e}")))?;
    rt.block_on(crate::drive(agent, control))
}
