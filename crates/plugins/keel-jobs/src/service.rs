//! The [`JobService`]: job ids, per-job state and capped output, settlement, kill, waits, and
//! the owners (agents) whose jobs it holds.
//!
//! Data flow: [`JobService::spawn`] registers a running job (`<kind>-N`, one counter for all
//! kinds), hands its future a [`JobIo`] and runs it on the tokio runtime. The first settlement
//! wins: the future's own [`JobResult`] ([`JobService::finish`]) or a kill
//! ([`JobService::kill`]); the loser is ignored. Every settlement signals the owner's driver
//! ([`keel_agent::Agent::run_until_idle`], waiting in [`Background::idle`]); a natural one also delivers a notice to the owner
//! ([`super::wake`]) unless a `job_output` call was waiting for it (that call reports it).
//! Locks are never held across an await, and the service lock is released before the owner's
//! log is touched.

use crate::JobsConfig;
use crate::notice::JobNotice;
use crate::wake;
use futures::FutureExt;
use futures::future::BoxFuture;
use keel_agent::background::WakeLedger;
use keel_agent::background::{Background, IdleWait};
use keel_agent::{AgentHandle, WeakHandle};
use keel_protocol::sync::Locked;
use keel_protocol::{Message, SessionId};
use keel_tools::jobs::OutputSink;
use keel_tools::{
    JobControl, JobError, JobEventSink, JobEvents, JobInfo, JobIo, JobOutput, JobResult, JobSpec,
    JobStatus,
};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

/// A capped tail of a job's output.
#[derive(Debug)]
pub(crate) struct TailBuffer {
    buf: VecDeque<u8>,
    total: u64,
    cap: usize,
}

impl TailBuffer {
    fn new(cap: usize) -> Self {
        TailBuffer {
            buf: VecDeque::new(),
            total: 0,
            cap,
        }
    }

    fn push(&mut self, chunk: &[u8]) {
        self.total += chunk.len() as u64;
        let keep = chunk.len().min(self.cap);
        self.buf.extend(&chunk[chunk.len() - keep..]);
        let excess = self.buf.len().saturating_sub(self.cap);
        self.buf.drain(..excess);
    }

    fn truncated(&self) -> bool {
        self.total > self.buf.len() as u64
    }

    /// The tail as text; a character cut at the front is dropped.
    fn text(&mut self) -> String {
        let bytes = self.buf.make_contiguous();
        let mut start = 0;
        if self.total > bytes.len() as u64 {
            while start < bytes.len().min(3) && (bytes[start] & 0xC0) == 0x80 {
                start += 1;
            }
        }
        String::from_utf8_lossy(&bytes[start..]).into_owned()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.locked()
}

struct Job {
    id: String,
    kind: String,
    description: String,
    owner: SessionId,
    started: Instant,
    ended: Option<Instant>,
    status: JobStatus,
    summary: Option<String>,
    output: Arc<Mutex<TailBuffer>>,
    cancel: CancellationToken,
    settled: watch::Sender<bool>,
    waiters: usize,
    /// Waiting for a message from its owner ([`keel_tools::JobEventSink::set_waiting`]).
    waiting: bool,
}

impl Job {
    fn info(&self) -> JobInfo {
        let end = self.ended.unwrap_or_else(Instant::now);
        JobInfo {
            id: self.id.clone(),
            kind: self.kind.clone(),
            description: self.description.clone(),
            owner: self.owner.0.clone(),
            status: self.status,
            summary: self.summary.clone(),
            waiting: self.waiting,
            output_bytes: lock(&self.output).total,
            elapsed_ms: end.duration_since(self.started).as_millis() as u64,
        }
    }

    fn snapshot(&self) -> JobOutput {
        let info = self.info();
        let mut out = lock(&self.output);
        JobOutput {
            info,
            truncated: out.truncated(),
            text: out.text(),
        }
    }

    /// Settle if still running; false when an earlier settlement won.
    fn settle(&mut self, status: JobStatus, summary: String) -> bool {
        if self.status != JobStatus::Running {
            return false;
        }
        self.status = status;
        self.summary = Some(summary);
        self.ended = Some(Instant::now());
        self.settled.send_replace(true);
        true
    }
}

/// What delivering to an owner needs: its handle, its driver's signal and its wake ledger.
type OwnerParts = (WeakHandle, Arc<Notify>, Arc<Mutex<WakeLedger>>);

/// One agent whose jobs the service holds.
pub(crate) struct Owner {
    pub(crate) agent: WeakHandle,
    pub(crate) signal: Arc<Notify>,
    pub(crate) ledger: Arc<Mutex<WakeLedger>>,
    /// Settled jobs whose notice is being delivered: still counted as running, so a driver
    /// never stops between a settlement and the wake-up it causes.
    delivering: usize,
}

#[derive(Default)]
struct State {
    jobs: Vec<Job>,
    owners: HashMap<SessionId, Owner>,
}

impl State {
    fn job_mut(&mut self, owner: &SessionId, id: &str) -> Result<&mut Job, JobError> {
        self.jobs
            .iter_mut()
            .find(|j| j.id == id && &j.owner == owner)
            .ok_or_else(|| JobError::NoSuchJob(id.to_owned()))
    }
}

/// Background jobs of one or more owner agents. Shared (`Arc`); see the module docs.
pub struct JobService {
    /// Itself, for the job control handed out through the background seam.
    me: std::sync::Weak<JobService>,
    config: JobsConfig,
    next: AtomicU64,
    state: Mutex<State>,
}

impl std::fmt::Debug for JobService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = lock(&self.state);
        f.debug_struct("JobService")
            .field("jobs", &state.jobs.len())
            .field("owners", &state.owners.len())
            .finish()
    }
}

/// Drops a waiter count when a wait ends (or its future is dropped).
struct Waiting<'a> {
    service: &'a JobService,
    owner: &'a SessionId,
    id: &'a str,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if let Ok(job) = lock(&self.service.state).job_mut(self.owner, self.id) {
            job.waiters = job.waiters.saturating_sub(1);
        }
    }
}

impl JobService {
    /// A service with no jobs and no owners.
    pub fn new(config: JobsConfig) -> Arc<JobService> {
        Arc::new_cyclic(|me| JobService {
            me: me.clone(),
            config,
            next: AtomicU64::new(0),
            state: Mutex::new(State::default()),
        })
    }

    /// Its settings.
    pub fn config(&self) -> &JobsConfig {
        &self.config
    }

    /// Make `agent` an owner: its tools get job control ([`keel_tools::ToolCaller::jobs`]),
    /// its finished jobs notify or wake it, and [`keel_agent::Agent::run_until_idle`] waits for them. An
    /// agent attaches to one service; attaching it to a second one is ignored.
    pub fn attach(self: &Arc<Self>, agent: &AgentHandle) {
        if !agent.attach_background(self.clone()) {
            return;
        }
        let owner = Owner {
            agent: agent.downgrade(),
            signal: Arc::new(Notify::new()),
            ledger: Arc::new(Mutex::new(wake::ledger())),
            delivering: 0,
        };
        lock(&self.state).owners.insert(agent.session_id(), owner);
    }

    /// Start a job owned by `owner`; returns its id at once. Needs a tokio runtime.
    pub fn spawn(self: &Arc<Self>, owner: &SessionId, spec: JobSpec) -> Result<String, JobError> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| JobError::Unavailable("no async runtime to run the job on".into()))?;
        let output = Arc::new(Mutex::new(TailBuffer::new(self.config.output_cap)));
        let cancel = CancellationToken::new();
        let id = {
            let mut state = lock(&self.state);
            if !state.owners.contains_key(owner) {
                return Err(JobError::Unavailable(format!(
                    "session {owner} is not attached to the job service"
                )));
            }
            let running = state
                .jobs
                .iter()
                .filter(|j| j.status == JobStatus::Running)
                .count();
            if running >= self.config.max_running {
                return Err(JobError::TooMany { running });
            }
            let n = self.next.fetch_add(1, Ordering::Relaxed) + 1;
            let id = format!("{}-{n}", spec.kind);
            state.jobs.push(Job {
                id: id.clone(),
                kind: spec.kind.clone(),
                description: spec.description.clone(),
                owner: owner.clone(),
                started: Instant::now(),
                ended: None,
                status: JobStatus::Running,
                summary: None,
                output: output.clone(),
                cancel: cancel.clone(),
                settled: watch::channel(false).0,
                waiters: 0,
                waiting: false,
            });
            id
        };
        let sink = OutputSink::new(move |bytes| lock(&output).push(bytes));
        let events = JobEvents::new(Arc::new(JobLink {
            service: self.me.clone(),
            owner: owner.clone(),
            id: id.clone(),
        }));
        let work = (spec.run)(JobIo {
            cancel,
            output: sink,
            events,
        });
        let service = self.clone();
        let (job_owner, job_id) = (owner.clone(), id.clone());
        runtime.spawn(async move {
            let result = std::panic::AssertUnwindSafe(work)
                .catch_unwind()
                .await
                .unwrap_or_else(|_| JobResult::failed("the job panicked (a bug in keel)"));
            service.finish(&job_owner, &job_id, result);
        });
        Ok(id)
    }

    /// Settle a job with its own result (ignored if a kill settled it first), signal the owner
    /// and, unless a `job_output` call is waiting for it, deliver a notice.
    fn finish(&self, owner: &SessionId, id: &str, result: JobResult) {
        let status = match result.status {
            JobStatus::Completed => JobStatus::Completed,
            _ => JobStatus::Failed,
        };
        let (notice, target) = {
            let mut state = lock(&self.state);
            let Ok(job) = state.job_mut(owner, id) else {
                return;
            };
            if !job.settle(status, result.summary) {
                return;
            }
            let notice = (job.waiters == 0).then(|| JobNotice::new(&job.snapshot()).message());
            (notice, Self::start_delivery(&mut state, owner))
        };
        self.end_delivery(owner, target, notice);
    }

    /// Deliver a running job's interim notice to its owner (as a finished job's notice is:
    /// joining a running turn, or waking an idle owner within the wake budget).
    fn notify(&self, owner: &SessionId, id: &str, text: String) {
        let target = {
            let mut state = lock(&self.state);
            let live = state
                .job_mut(owner, id)
                .is_ok_and(|j| j.status == JobStatus::Running);
            if !live {
                return;
            }
            Self::start_delivery(&mut state, owner)
        };
        self.end_delivery(owner, target, Some(JobNotice::interim(id, text)));
    }

    /// Count a delivery to `owner` as running (so its driver never stops between a job's
    /// settlement or answer and the wake-up it causes); the owner's parts to deliver with.
    fn start_delivery(state: &mut State, owner: &SessionId) -> Option<OwnerParts> {
        state.owners.get_mut(owner).map(|o| {
            o.delivering += 1;
            (o.agent.clone(), o.signal.clone(), o.ledger.clone())
        })
    }

    /// Deliver `notice` (if any) to the owner [`JobService::start_delivery`] found, end the
    /// delivery and signal the owner's driver.
    fn end_delivery(&self, owner: &SessionId, target: Option<OwnerParts>, notice: Option<Message>) {
        let Some((agent, signal, ledger)) = target else {
            return;
        };
        if let (Some(notice), Some(agent)) = (notice, agent.upgrade()) {
            wake::deliver(&agent, &ledger, self.config.max_wakeups, notice);
        }
        if let Some(o) = lock(&self.state).owners.get_mut(owner) {
            o.delivering = o.delivering.saturating_sub(1);
        }
        signal.notify_one();
    }

    /// Mark a running job as waiting for its owner (or working again) and signal the owner's
    /// driver, which stops waiting for a job that cannot wake it.
    fn set_waiting(&self, owner: &SessionId, id: &str, waiting: bool) {
        let signal = {
            let mut state = lock(&self.state);
            match state.job_mut(owner, id) {
                Ok(job) if job.status == JobStatus::Running => job.waiting = waiting,
                _ => return,
            }
            state.owners.get(owner).map(|o| o.signal.clone())
        };
        if let Some(signal) = signal {
            signal.notify_one();
        }
    }

    /// Kill `owner`'s job `id` (see [`JobControl::kill`]). No notice is delivered: the caller
    /// knows.
    pub fn kill(&self, owner: &SessionId, id: &str) -> Result<JobInfo, JobError> {
        let (info, signal) = {
            let mut state = lock(&self.state);
            let job = state.job_mut(owner, id)?;
            if job.settle(JobStatus::Killed, "killed".into()) {
                job.cancel.cancel();
            }
            let info = job.info();
            (info, state.owners.get(owner).map(|o| o.signal.clone()))
        };
        if let Some(signal) = signal {
            signal.notify_one();
        }
        Ok(info)
    }

    /// Kill every running job of `owner` (e.g. when its front end exits). Returns their ids.
    pub fn kill_owned(&self, owner: &SessionId) -> Vec<String> {
        let running: Vec<String> = lock(&self.state)
            .jobs
            .iter()
            .filter(|j| &j.owner == owner && j.status == JobStatus::Running)
            .map(|j| j.id.clone())
            .collect();
        running
            .into_iter()
            .filter(|id| self.kill(owner, id).is_ok())
            .collect()
    }

    /// `owner`'s jobs, oldest first.
    pub fn list(&self, owner: &SessionId) -> Vec<JobInfo> {
        lock(&self.state)
            .jobs
            .iter()
            .filter(|j| &j.owner == owner)
            .map(Job::info)
            .collect()
    }

    /// State and buffered output of `owner`'s job `id`.
    pub fn output(&self, owner: &SessionId, id: &str) -> Result<JobOutput, JobError> {
        Ok(lock(&self.state).job_mut(owner, id)?.snapshot())
    }

    /// Wait up to `timeout` (or until `cancel`) for `owner`'s job `id` to settle, then report
    /// it. While anyone waits, the job's settlement delivers no notice.
    pub async fn wait(
        &self,
        owner: &SessionId,
        id: &str,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<JobOutput, JobError> {
        let mut settled = {
            let mut state = lock(&self.state);
            let job = state.job_mut(owner, id)?;
            if job.status != JobStatus::Running {
                return Ok(job.snapshot());
            }
            job.waiters += 1;
            job.settled.subscribe()
        };
        let waiting = Waiting {
            service: self,
            owner,
            id,
        };
        tokio::select! {
            _ = tokio::time::timeout(timeout, settled.wait_for(|done| *done)) => {}
            () = cancel.cancelled() => {}
        }
        drop(waiting);
        self.output(owner, id)
    }

    /// Number of `owner`'s jobs still running (or settled with their notice not yet delivered).
    pub fn running(&self, owner: &SessionId) -> usize {
        let state = lock(&self.state);
        let delivering = state.owners.get(owner).map_or(0, |o| o.delivering);
        delivering
            + state
                .jobs
                .iter()
                .filter(|j| &j.owner == owner && j.status == JobStatus::Running && !j.waiting)
                .count()
    }

    /// The owner's handle, wake signal and ledger.
    pub(crate) fn owner_parts(&self, owner: &SessionId) -> Option<OwnerParts> {
        lock(&self.state)
            .owners
            .get(owner)
            .map(|o| (o.agent.clone(), o.signal.clone(), o.ledger.clone()))
    }
}

impl Background for JobService {
    fn control(&self, owner: &SessionId) -> Option<Arc<dyn JobControl>> {
        let service = lock(&self.state)
            .owners
            .contains_key(owner)
            .then(|| self.me.upgrade())??;
        Some(Arc::new(OwnerView {
            service,
            owner: owner.clone(),
        }))
    }

    fn idle<'a>(&'a self, owner: &'a SessionId) -> BoxFuture<'a, IdleWait> {
        Box::pin(async move {
            let Some((agent, signal, ledger)) = self.owner_parts(owner) else {
                return IdleWait::Done;
            };
            let may_wake = {
                let mut ledger = ledger.locked();
                if let Some(agent) = agent.upgrade() {
                    agent.with_session(|s| ledger.catch_up(s));
                }
                ledger.consecutive() < self.config.max_wakeups
            };
            if self.running(owner) == 0 || !may_wake {
                return IdleWait::Done;
            }
            // Every settlement of an owned job signals (`notify_one` keeps a permit, so one
            // that lands between the checks above and this wait is not lost).
            signal.notified().await;
            IdleWait::Settled
        })
    }

    fn stop_owned(&self, owner: &SessionId) -> Vec<String> {
        self.kill_owned(owner)
    }
}

/// A job's link back to the service ([`keel_tools::JobEventSink`]).
struct JobLink {
    service: std::sync::Weak<JobService>,
    owner: SessionId,
    id: String,
}

impl JobEventSink for JobLink {
    fn notify(&self, text: String) {
        if let Some(service) = self.service.upgrade() {
            service.notify(&self.owner, &self.id, text);
        }
    }
    fn set_waiting(&self, waiting: bool) {
        if let Some(service) = self.service.upgrade() {
            service.set_waiting(&self.owner, &self.id, waiting);
        }
    }
}

/// [`JobControl`] for one owner, handed to its tools.
pub(crate) struct OwnerView {
    pub(crate) service: Arc<JobService>,
    pub(crate) owner: SessionId,
}

#[async_trait::async_trait]
impl JobControl for OwnerView {
    fn spawn(&self, spec: JobSpec) -> Result<String, JobError> {
        self.service.spawn(&self.owner, spec)
    }
    fn list(&self) -> Vec<JobInfo> {
        self.service.list(&self.owner)
    }
    fn output(&self, id: &str) -> Result<JobOutput, JobError> {
        self.service.output(&self.owner, id)
    }
    async fn wait(
        &self,
        id: &str,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<JobOutput, JobError> {
        self.service.wait(&self.owner, id, timeout, cancel).await
    }
    fn kill(&self, id: &str) -> Result<JobInfo, JobError> {
        self.service.kill(&self.owner, id)
    }
    fn running(&self) -> usize {
        self.service.running(&self.owner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_settlement_wins() {
        let mut job = Job {
            id: "bash-1".into(),
            kind: "bash".into(),
            description: "d".into(),
            owner: SessionId("s".into()),
            started: Instant::now(),
            ended: None,
            status: JobStatus::Running,
            summary: None,
            output: Arc::new(Mutex::new(TailBuffer::new(8))),
            cancel: CancellationToken::new(),
            settled: watch::channel(false).0,
            waiters: 0,
            waiting: false,
        };
        let seen = job.settled.subscribe();
        assert!(job.settle(JobStatus::Killed, "killed".into()));
        assert!(!job.settle(JobStatus::Completed, "exit code 0".into()));
        assert_eq!(
            (job.status, job.summary.as_deref(), *seen.borrow()),
            (JobStatus::Killed, Some("killed"), true)
        );
    }

    #[test]
    fn tail_buffer_keeps_the_last_cap_bytes_and_counts_all() {
        let mut b = TailBuffer::new(4);
        b.push(b"ab");
        assert_eq!((b.text(), b.truncated()), ("ab".to_owned(), false));
        b.push(b"cdef");
        assert_eq!(
            (b.text(), b.total, b.truncated()),
            ("cdef".to_owned(), 6, true)
        );
        b.push(b"0123456789");
        assert_eq!(b.text(), "6789");
        // A multi-byte character cut at the front is dropped, not garbled.
        let mut b = TailBuffer::new(3);
        b.push("éa!".as_bytes()); // 4 bytes: the tail starts inside 'é'
        assert_eq!(b.text(), "a!");
        b.push("b".as_bytes());
        assert_eq!(b.text(), "a!b");
    }
}
