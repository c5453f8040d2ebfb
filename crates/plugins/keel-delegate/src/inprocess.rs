//! A tiny in-process [`DelegationService`]: no process, no network. Each delegation takes the
//! next scripted [`Outcome`] (or a default one that completes at once echoing its prompt).
//! A held outcome keeps its job running until [`InProcessProvider::finish`]; reports are made
//! with [`InProcessProvider::emit`]. Used by tests to prove the tools depend only on the seam,
//! and selectable as `provider = "inprocess"` for demos.
//!
//! Jobs belong to the session that submitted them: another session asking about one gets
//! `unknown-job`.

use crate::events::{EventLog, Fired};
use crate::seam::{
    Artifacts, Caller, Capabilities, DelegateSpec, DelegationError, DelegationEvent, DelegationJob,
    DelegationResult, DelegationService, ErrorCode, EventListener, EventType, JobStatus,
    SteerOutcome, Urgency,
};
use async_trait::async_trait;
use keel_protocol::sync::Locked;
use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::watch;

/// How a steer of a running job is answered.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum SteerScript {
    /// Accepted (echoed as a `steer` report).
    #[default]
    Accept,
    /// Refused with this detail.
    Refuse(String),
}

/// What one delegation does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Stay running until [`InProcessProvider::finish`].
    pub hold: bool,
    /// Final status.
    pub status: JobStatus,
    /// The provider's raw status word (with [`JobStatus::Unknown`]).
    pub raw_status: Option<String>,
    /// Final answer (`None`: echo the prompt).
    pub final_text: Option<String>,
    /// Error message.
    pub error_message: Option<String>,
    /// Artifacts.
    pub artifacts: Artifacts,
    /// Log text.
    pub logs: String,
    /// How steers are answered.
    pub steer: SteerScript,
}

impl Default for Outcome {
    fn default() -> Self {
        Outcome {
            hold: false,
            status: JobStatus::Completed,
            raw_status: None,
            final_text: None,
            error_message: None,
            artifacts: Artifacts::default(),
            logs: String::new(),
            steer: SteerScript::Accept,
        }
    }
}

impl Outcome {
    /// Completes at once with `text`.
    pub fn completed(text: impl Into<String>) -> Self {
        Outcome {
            final_text: Some(text.into()),
            ..Outcome::default()
        }
    }

    /// Stays running until finished.
    pub fn held(mut self) -> Self {
        self.hold = true;
        self
    }
}

struct Job {
    owner: String,
    job: DelegationJob,
    prompt: String,
    outcome: Outcome,
    events: EventLog,
    steered: Vec<String>,
}

#[derive(Default)]
struct State {
    next: u64,
    script: VecDeque<Outcome>,
    jobs: HashMap<String, Job>,
}

/// The in-process provider; see the module docs.
pub struct InProcessProvider {
    capabilities: Mutex<Capabilities>,
    state: Mutex<State>,
    changed: watch::Sender<u64>,
}

impl std::fmt::Debug for InProcessProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InProcessProvider").finish_non_exhaustive()
    }
}

impl Default for InProcessProvider {
    fn default() -> Self {
        Self::new()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.locked()
}

fn now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format!("@{secs}")
}

impl InProcessProvider {
    /// Ready, steerable, reporting, no review; declares the extension key `sandbox`.
    pub fn new() -> Self {
        let mut extensions = std::collections::BTreeMap::new();
        extensions.insert(
            "sandbox".to_owned(),
            "confinement: confined|inherit".to_owned(),
        );
        InProcessProvider {
            capabilities: Mutex::new(Capabilities {
                ready: true,
                version: Some(env!("CARGO_PKG_VERSION").to_owned()),
                profiles: vec!["default".into()],
                default_profile: Some("default".into()),
                can_steer: true,
                can_report: true,
                can_review: false,
                extensions,
                diagnosis: None,
                active_from_earlier_sessions: Vec::new(),
            }),
            state: Mutex::new(State::default()),
            changed: watch::channel(0).0,
        }
    }

    /// Replace what it reports as its capabilities.
    pub fn set_capabilities(&self, capabilities: Capabilities) {
        *lock(&self.capabilities) = capabilities;
    }

    /// Change its capabilities in place.
    pub fn edit_capabilities(&self, edit: impl FnOnce(&mut Capabilities)) {
        edit(&mut lock(&self.capabilities));
    }

    /// Queue the outcome of the next delegation.
    pub fn script(&self, outcome: Outcome) {
        lock(&self.state).script.push_back(outcome);
    }

    /// Provider ids of every job, in submission order.
    pub fn job_ids(&self) -> Vec<String> {
        let state = lock(&self.state);
        let mut ids: Vec<(u64, String)> = state
            .jobs
            .keys()
            .map(|k| (k.trim_start_matches("ip-").parse().unwrap_or(0), k.clone()))
            .collect();
        ids.sort();
        ids.into_iter().map(|(_, k)| k).collect()
    }

    /// The job's current status.
    pub fn job_status(&self, id: &str) -> Option<JobStatus> {
        lock(&self.state).jobs.get(id).map(|j| j.job.status)
    }

    /// The prompt a job was given.
    pub fn prompt_of(&self, id: &str) -> Option<String> {
        lock(&self.state).jobs.get(id).map(|j| j.prompt.clone())
    }

    /// The session that submitted a job.
    pub fn owner_of(&self, id: &str) -> Option<String> {
        lock(&self.state).jobs.get(id).map(|j| j.owner.clone())
    }

    /// Guidance a job accepted.
    pub fn steered(&self, id: &str) -> Vec<String> {
        lock(&self.state)
            .jobs
            .get(id)
            .map(|j| j.steered.clone())
            .unwrap_or_default()
    }

    /// Settle a held job with its scripted outcome. False when it is unknown or already final.
    pub fn finish(&self, id: &str) -> bool {
        let fired = {
            let mut state = lock(&self.state);
            let Some(job) = state.jobs.get_mut(id) else {
                return false;
            };
            if job.job.status.is_final() {
                return false;
            }
            let status = job.outcome.status;
            Self::settle(job, status)
        };
        self.fire(fired);
        true
    }

    /// Make a report for job `id`; returns false when the job is unknown.
    pub fn emit(&self, id: &str, event_type: EventType, urgency: Urgency, message: &str) -> bool {
        let fired = {
            let mut state = lock(&self.state);
            let Some(job) = state.jobs.get_mut(id) else {
                return false;
            };
            Self::record(job, event_type, urgency, message, None)
        };
        self.fire(vec![fired]);
        true
    }

    fn record(
        job: &mut Job,
        event_type: EventType,
        urgency: Urgency,
        message: &str,
        lifecycle: Option<&str>,
    ) -> Fired {
        job.events.push(DelegationEvent {
            job_id: job.job.id.clone(),
            seq: None,
            at: now(),
            event_type,
            urgency,
            message: message.to_owned(),
            data: None,
            lifecycle: lifecycle.map(str::to_owned),
        })
    }

    /// Settle `job` as `status`; the lifecycle report to fire. Listeners are dropped: the job
    /// makes no more reports.
    fn settle(job: &mut Job, status: JobStatus) -> Vec<Fired> {
        job.job.status = status;
        job.job.finished_at = Some(now());
        if status == JobStatus::Unknown {
            job.job.raw_status = job.outcome.raw_status.clone();
        }
        let fired = Self::record(
            job,
            EventType::Lifecycle,
            Urgency::Info,
            status.as_str(),
            Some(status.as_str()),
        );
        job.events.close();
        vec![fired]
    }

    /// Call listeners outside the lock, then wake waiters.
    fn fire(&self, fired: Vec<Fired>) {
        for f in fired {
            f.deliver();
        }
        self.changed.send_modify(|v| *v += 1);
    }

    fn with_job<T>(
        &self,
        caller: &Caller,
        id: &str,
        f: impl FnOnce(&mut Job) -> T,
    ) -> Result<T, DelegationError> {
        let mut state = lock(&self.state);
        match state.jobs.get_mut(id) {
            Some(job) if job.owner == caller.session_id => Ok(f(job)),
            _ => Err(DelegationError::unknown_job(id)),
        }
    }
}

#[async_trait]
impl DelegationService for InProcessProvider {
    fn name(&self) -> &str {
        "inprocess"
    }

    async fn capabilities(&self, _caller: &Caller) -> Capabilities {
        lock(&self.capabilities).clone()
    }

    async fn delegate(
        &self,
        caller: &Caller,
        spec: DelegateSpec,
    ) -> Result<DelegationJob, DelegationError> {
        let caps = lock(&self.capabilities).clone();
        if !caps.ready {
            let mut e = DelegationError::new(ErrorCode::NotReady, "the provider is not ready");
            e.diagnosis = caps.diagnosis;
            return Err(e);
        }
        crate::seam::check_extensions(&spec.extensions, &caps)?;
        let (snapshot, fired) = {
            let mut state = lock(&self.state);
            for after in &spec.after {
                if !state.jobs.contains_key(after) {
                    return Err(DelegationError::unknown_job(after));
                }
            }
            state.next += 1;
            let id = format!("ip-{}", state.next);
            let outcome = state.script.pop_front().unwrap_or_default();
            let mut job = DelegationJob::new(id.clone(), JobStatus::Running);
            job.label = spec.label.clone();
            job.profile = spec.profile.clone().or(caps.default_profile);
            job.mode = Some(spec.mode);
            job.kind = Some("delegate".into());
            job.submitted_at = Some(now());
            let mut entry = Job {
                owner: caller.session_id.clone(),
                job,
                prompt: spec.prompt,
                outcome,
                events: EventLog::default(),
                steered: Vec::new(),
            };
            let snapshot = entry.job.clone();
            let mut fired = vec![Self::record(
                &mut entry,
                EventType::Lifecycle,
                Urgency::Info,
                "running",
                Some("running"),
            )];
            if !entry.outcome.hold {
                let status = entry.outcome.status;
                fired.extend(Self::settle(&mut entry, status));
            }
            state.jobs.insert(id, entry);
            (snapshot, fired)
        };
        self.fire(fired);
        Ok(snapshot)
    }

    async fn status(
        &self,
        caller: &Caller,
        id: Option<&str>,
    ) -> Result<Vec<DelegationJob>, DelegationError> {
        if let Some(id) = id {
            return self.with_job(caller, id, |j| vec![j.job.clone()]);
        }
        let ids = self.job_ids();
        let state = lock(&self.state);
        Ok(ids
            .iter()
            .filter_map(|id| state.jobs.get(id))
            .filter(|j| j.owner == caller.session_id)
            .map(|j| j.job.clone())
            .collect())
    }

    async fn wait(
        &self,
        caller: &Caller,
        ids: &[String],
        timeout: Duration,
    ) -> Result<Vec<DelegationJob>, DelegationError> {
        let mut changed = self.changed.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            changed.borrow_and_update();
            let mut jobs = Vec::new();
            for id in ids {
                jobs.push(self.with_job(caller, id, |j| j.job.clone())?);
            }
            if jobs.iter().all(|j| j.status.is_final()) {
                return Ok(jobs);
            }
            match tokio::time::timeout_at(deadline, changed.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) | Err(_) => {
                    return Err(DelegationError::new(
                        ErrorCode::Timeout,
                        format!("still running after {} ms", timeout.as_millis()),
                    ));
                }
            }
        }
    }

    async fn result(&self, caller: &Caller, id: &str) -> Result<DelegationResult, DelegationError> {
        self.with_job(caller, id, |j| {
            if !j.job.status.is_final() {
                return Err(DelegationError::new(
                    ErrorCode::NotFinal,
                    format!("job {id} is {}", j.job.status.as_str()),
                ));
            }
            let mut r = DelegationResult::new(j.job.clone());
            r.final_text = match j.job.status {
                JobStatus::Cancelled => None,
                _ => Some(
                    j.outcome
                        .final_text
                        .clone()
                        .unwrap_or_else(|| format!("done: {}", j.prompt)),
                ),
            };
            r.error_message = j.outcome.error_message.clone();
            r.artifacts = j.outcome.artifacts.clone();
            Ok(r)
        })?
    }

    async fn logs(
        &self,
        caller: &Caller,
        id: &str,
        tail: Option<usize>,
    ) -> Result<String, DelegationError> {
        self.with_job(caller, id, |j| {
            let lines: Vec<&str> = j.outcome.logs.lines().collect();
            let from = tail.map_or(0, |n| lines.len().saturating_sub(n));
            lines[from..].join("\n")
        })
    }

    async fn cancel(&self, caller: &Caller, id: &str) -> Result<DelegationJob, DelegationError> {
        let (job, fired) = self.with_job(caller, id, |j| {
            let fired = if j.job.status.is_final() {
                Vec::new()
            } else {
                Self::settle(j, JobStatus::Cancelled)
            };
            (j.job.clone(), fired)
        })?;
        self.fire(fired);
        Ok(job)
    }

    async fn steer(
        &self,
        caller: &Caller,
        id: &str,
        guidance: &str,
    ) -> Result<SteerOutcome, DelegationError> {
        let can_steer = lock(&self.capabilities).can_steer;
        let (outcome, fired) = self.with_job(caller, id, |j| {
            if !can_steer {
                return (
                    SteerOutcome::Unsupported {
                        reason: "this provider cannot steer running jobs".into(),
                    },
                    None,
                );
            }
            if j.job.status.is_final() {
                return (
                    SteerOutcome::Refused {
                        detail: format!("job {id} is {}", j.job.status.as_str()),
                    },
                    None,
                );
            }
            match j.outcome.steer.clone() {
                SteerScript::Refuse(detail) => (SteerOutcome::Refused { detail }, None),
                SteerScript::Accept => {
                    j.steered.push(guidance.to_owned());
                    let fired = Self::record(j, EventType::Steer, Urgency::Info, guidance, None);
                    (SteerOutcome::Accepted, Some(fired))
                }
            }
        })?;
        self.fire(fired.into_iter().collect());
        Ok(outcome)
    }

    async fn events(
        &self,
        caller: &Caller,
        id: &str,
        from_seq: Option<u64>,
    ) -> Result<Vec<DelegationEvent>, DelegationError> {
        self.with_job(caller, id, |j| j.events.since(from_seq))
    }

    fn watch(
        &self,
        caller: &Caller,
        id: &str,
        listener: EventListener,
    ) -> Result<(), DelegationError> {
        let backlog = self.with_job(caller, id, |j| {
            j.events.watch(&listener, !j.job.status.is_final())
        })?;
        for e in backlog {
            listener(e);
        }
        Ok(())
    }
}
