//! Background jobs as tools see them: the [`JobControl`] interface and the data crossing it.
//!
//! A tool that starts long-running work (`bash` with `run_in_background`, a background
//! `subagent`) asks its caller for job control ([`crate::ToolCaller::jobs`]). A caller without a
//! job service answers `None` and the tool refuses with a clear error. The service itself (ids,
//! capped output buffers, settlement, wake-ups of the owning agent) lives with the agent
//! (`keel_agent::jobs`); this module only declares what a tool may ask of it.
//!
//! A job is a future ([`JobSpec::run`]) the service spawns with a [`JobIo`]: a cancellation
//! token (fired by `job_kill`) and an [`OutputSink`] that appends to the job's capped output
//! buffer. The future's [`JobResult`] settles the job, unless a kill settled it first (the
//! first settlement wins). The [`JobControl`] a caller hands out is scoped to the calling agent:
//! it lists, reads and kills only that agent's jobs.

pub use crate::subprocess::OutputSink;
use async_trait::async_trait;
use futures::future::BoxFuture;
use serde::Serialize;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The work of a job: given its [`JobIo`], a future producing its [`JobResult`].
pub type JobRun = Box<dyn FnOnce(JobIo) -> BoxFuture<'static, JobResult> + Send>;

/// A job to start.
pub struct JobSpec {
    /// Kind, the prefix of the id (`bash` → `bash-1`). Lowercase ASCII letters and `_`.
    pub kind: String,
    /// One line saying what it does (the command, the subagent's description).
    pub description: String,
    /// The work.
    pub run: JobRun,
}

impl std::fmt::Debug for JobSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobSpec")
            .field("kind", &self.kind)
            .field("description", &self.description)
            .finish_non_exhaustive()
    }
}

/// What a running job is given.
#[derive(Debug, Clone)]
pub struct JobIo {
    /// Fired when the job is killed (or its owner goes away); stop promptly.
    pub cancel: CancellationToken,
    /// Appends to the job's output buffer (a capped tail).
    pub output: OutputSink,
    /// Talks to the owner between settlements (a continuable subagent's answers).
    pub events: JobEvents,
}

/// What a long-lived job (a background subagent that stays alive between its turns) tells
/// its owner before it settles. Implemented by the job service.
pub trait JobEventSink: Send + Sync {
    /// Deliver `text` to the owner now, as a notice from this job (it joins a running turn,
    /// or wakes an idle owner within the service's wake budget).
    fn notify(&self, text: String);
    /// `true`: the job waits for its owner (a message) and cannot finish or notify by
    /// itself, so the owner's driver does not wait for it; `false`: it works again.
    fn set_waiting(&self, waiting: bool);
}

/// A job's link to its owner between settlements ([`JobEventSink`]); [`JobEvents::none`]
/// ignores everything (a job run outside a service).
#[derive(Clone)]
pub struct JobEvents(Option<std::sync::Arc<dyn JobEventSink>>);

impl std::fmt::Debug for JobEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("JobEvents").field(&self.0.is_some()).finish()
    }
}

impl JobEvents {
    /// Events delivered to `sink`.
    pub fn new(sink: std::sync::Arc<dyn JobEventSink>) -> Self {
        JobEvents(Some(sink))
    }

    /// Events that go nowhere.
    pub fn none() -> Self {
        JobEvents(None)
    }

    /// See [`JobEventSink::notify`].
    pub fn notify(&self, text: impl Into<String>) {
        if let Some(sink) = &self.0 {
            sink.notify(text.into());
        }
    }

    /// See [`JobEventSink::set_waiting`].
    pub fn set_waiting(&self, waiting: bool) {
        if let Some(sink) = &self.0 {
            sink.set_waiting(waiting);
        }
    }
}

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum JobStatus {
    /// Still running.
    Running,
    /// Finished by itself and succeeded (commands: exit code 0).
    Completed,
    /// Finished by itself and failed (non-zero exit, timeout, could not start, the subagent's
    /// turn did not complete).
    Failed,
    /// Killed (`job_kill`) before it finished.
    Killed,
}

impl JobStatus {
    /// Spelling in tool results and notices.
    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Running => "running",
            JobStatus::Completed => "completed",
            JobStatus::Failed => "failed",
            JobStatus::Killed => "killed",
        }
    }
}

/// How a job's work ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobResult {
    /// [`JobStatus::Completed`] or [`JobStatus::Failed`] (anything else counts as failed).
    pub status: JobStatus,
    /// One line for notices and `job_output` (`exit code 0`, `timed out after 600000 ms`).
    pub summary: String,
}

impl JobResult {
    /// The work succeeded.
    pub fn completed(summary: impl Into<String>) -> Self {
        JobResult {
            status: JobStatus::Completed,
            summary: summary.into(),
        }
    }

    /// The work failed.
    pub fn failed(summary: impl Into<String>) -> Self {
        JobResult {
            status: JobStatus::Failed,
            summary: summary.into(),
        }
    }
}

/// A job's identity and state, without its output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobInfo {
    /// `<kind>-<n>`.
    pub id: String,
    /// Kind (`bash`, `subagent`).
    pub kind: String,
    /// What it does.
    pub description: String,
    /// Session id of the agent that owns it.
    pub owner: String,
    /// Where it is.
    pub status: JobStatus,
    /// How it ended (absent while running).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Running, but waiting for a message from its owner (a continuable subagent between
    /// turns).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub waiting: bool,
    /// Bytes of output it produced in all (the buffer keeps a capped tail).
    pub output_bytes: u64,
    /// Milliseconds it has run (until it settled).
    pub elapsed_ms: u64,
}

/// A job's state with the buffered tail of its output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobOutput {
    /// The job.
    pub info: JobInfo,
    /// The buffered tail of its output (lossy UTF-8).
    pub text: String,
    /// True when bytes were dropped from the front of the buffer.
    pub truncated: bool,
}

/// Why a job request failed. Surfaced to the model as a tool error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobError {
    /// No job with this id belongs to the caller; the model should check `job_list`.
    #[error("no job with id '{0}' (see job_list)")]
    NoSuchJob(String),
    /// Too many jobs are running; the model should wait for or kill one first.
    #[error(
        "{running} background jobs are already running (the limit); wait for one or kill one with job_kill"
    )]
    TooMany {
        /// Jobs running now.
        running: usize,
    },
    /// The job service cannot take jobs for this caller (e.g. its agent is gone).
    #[error("background jobs are not available: {0}")]
    Unavailable(String),
}

/// Job control scoped to one owner (the calling agent). Handed out by
/// [`crate::ToolCaller::jobs`].
#[async_trait]
pub trait JobControl: Send + Sync {
    /// Start a job; returns its id at once.
    fn spawn(&self, spec: JobSpec) -> Result<String, JobError>;

    /// The caller's jobs, oldest first.
    fn list(&self) -> Vec<JobInfo>;

    /// State and buffered output of one job.
    fn output(&self, id: &str) -> Result<JobOutput, JobError>;

    /// Like [`JobControl::output`], after waiting up to `timeout` for the job to settle (less if
    /// `cancel` fires). A job still running at the deadline is reported as running.
    async fn wait(
        &self,
        id: &str,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<JobOutput, JobError>;

    /// Kill a job: fire its cancellation and settle it as killed, unless it already settled
    /// (then its state is returned unchanged).
    fn kill(&self, id: &str) -> Result<JobInfo, JobError>;

    /// How many of the caller's jobs still count as running: those whose status is
    /// [`JobStatus::Running`] and that are not waiting for a message. A service that holds a
    /// settled job back while its notice is being delivered counts it too.
    fn running(&self) -> usize {
        self.list()
            .iter()
            .filter(|j| j.status == JobStatus::Running && !j.waiting)
            .count()
    }
}
