//! A tiny in-process [`DelegationService`]: no process, no network. Each delegation takes the
//! next scripted [`Outcome`] (or a default one that completes at once echoing its prompt).
//! A held outcome keeps its job running until [`InProcessProvider::finish`]; reports are made
//! with [`InProcessProvider::emit`]. Used by tests to prove the tools depend only on the seam,
//! and selectable as `provider = "inprocess"` for demos.
//!
//! Jobs belong to the session that submitted them: another session asking about one gets
//! `unknown-job`.
//!
//! Like the keel and acp providers it implements the crate's `Provider` trait and its jobs live
//! in a job table (in memory only: no files), which answers status, wait, result, logs, cancel,
//! events and watch:
//!
//! ```text
//! delegate ─► start: job ip-N in the table (running), "running" event
//!               ├► not held: settled at once with its outcome
//!               └► held: a task waits for its cancellation (job_kill ─► settled cancelled)
//! finish(id) ─► settled with its outcome   emit(id) ─► a report   steer ─► its SteerScript
//! ```

use crate::seam::{
    Artifacts, Caller, Capabilities, DelegateSpec, DelegationError, DelegationEvent, DelegationJob,
    DelegationResult, ErrorCode, EventType, RunStatus, SteerOutcome, Urgency, check_extensions,
};
use crate::table::{Job, JobLog, Provider, Table, now_rfc3339};
use async_trait::async_trait;
use keel_protocol::sync::Locked;
use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};

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
    pub status: RunStatus,
    /// The provider's raw status word (with [`RunStatus::Unknown`]).
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
            status: RunStatus::Completed,
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

/// What the provider keeps of a job beside the table's part.
pub(crate) struct Own {
    prompt: String,
    outcome: Outcome,
    steered: Vec<String>,
    /// The job as `delegate` answers it (running, whatever happened since).
    submitted: DelegationJob,
    /// Set by the first settling (so a job is settled once).
    settled: bool,
}

impl JobLog for Own {
    fn tail(&self, n: Option<usize>) -> String {
        let lines: Vec<&str> = self.outcome.logs.lines().collect();
        let from = n.map_or(0, |n| lines.len().saturating_sub(n));
        lines[from..].join("\n")
    }
}

/// The in-process provider; see the module docs.
pub struct InProcessProvider {
    capabilities: Mutex<Capabilities>,
    script: Mutex<VecDeque<Outcome>>,
    jobs: Table<Own>,
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

/// Settle job `id` of `jobs` as `status` with its scripted outcome; false when it is unknown or
/// already settled. Its listeners are dropped: the job makes no more reports.
fn settle(jobs: &Table<Own>, id: &str, status: RunStatus) -> bool {
    let first = jobs.update(id, |j| !std::mem::replace(&mut j.own.settled, true));
    if first != Some(true) {
        return false;
    }
    jobs.finish(id, None, |j| {
        let (r, own) = (&mut j.result, &j.own);
        r.job.status = status;
        if status == RunStatus::Unknown {
            r.job.raw_status = own.outcome.raw_status.clone();
        }
        r.final_text = match status {
            RunStatus::Cancelled => None,
            _ => Some(
                own.outcome
                    .final_text
                    .clone()
                    .unwrap_or_else(|| format!("done: {}", own.prompt)),
            ),
        };
        r.error_message = own.outcome.error_message.clone();
        r.artifacts = own.outcome.artifacts.clone();
    });
    true
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
            script: Mutex::new(VecDeque::new()),
            jobs: Table::in_memory("ip"),
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
        lock(&self.script).push_back(outcome);
    }

    /// Provider ids of every job, in submission order.
    pub fn job_ids(&self) -> Vec<String> {
        self.jobs.ids()
    }

    /// The job's current status.
    pub fn job_status(&self, id: &str) -> Option<RunStatus> {
        self.jobs.update(id, |j| j.result.job.status)
    }

    /// The prompt a job was given.
    pub fn prompt_of(&self, id: &str) -> Option<String> {
        self.jobs.update(id, |j| j.own.prompt.clone())
    }

    /// The session that submitted a job.
    pub fn owner_of(&self, id: &str) -> Option<String> {
        self.jobs.update(id, |j| j.caller.clone())
    }

    /// Guidance a job accepted.
    pub fn steered(&self, id: &str) -> Vec<String> {
        self.jobs
            .update(id, |j| j.own.steered.clone())
            .unwrap_or_default()
    }

    /// Settle a held job with its scripted outcome. False when it is unknown or already final.
    pub fn finish(&self, id: &str) -> bool {
        let Some(status) = self.jobs.update(id, |j| j.own.outcome.status) else {
            return false;
        };
        settle(&self.jobs, id, status)
    }

    /// Make a report for job `id`; returns false when the job is unknown.
    pub fn emit(&self, id: &str, event_type: EventType, urgency: Urgency, message: &str) -> bool {
        self.jobs.push(DelegationEvent {
            job_id: id.to_owned(),
            seq: None,
            at: now_rfc3339(),
            event_type,
            urgency,
            message: message.to_owned(),
            data: None,
            lifecycle: None,
        })
    }
}

#[async_trait]
impl Provider for InProcessProvider {
    type Own = Own;

    const NAME: &'static str = "inprocess";

    fn jobs(&self) -> &Table<Own> {
        &self.jobs
    }

    async fn own_capabilities(&self, _caller: &Caller) -> Capabilities {
        lock(&self.capabilities).clone()
    }

    async fn start(&self, caller: &Caller, spec: &DelegateSpec) -> Result<String, DelegationError> {
        let caps = lock(&self.capabilities).clone();
        if !caps.ready {
            let mut e = DelegationError::new(ErrorCode::NotReady, "the provider is not ready");
            e.diagnosis = caps.diagnosis;
            return Err(e);
        }
        check_extensions(&spec.extensions, &caps)?;
        if let Some(after) = spec
            .after
            .iter()
            .find(|a| self.jobs.update(a, |_| ()).is_none())
        {
            return Err(DelegationError::unknown_job(after));
        }
        // Held jobs wait for their cancellation in a task: without a runtime none can run.
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
            DelegationError::new(
                ErrorCode::Internal,
                "the inprocess provider needs a tokio runtime",
            )
        })?;
        let id = self.jobs.next_id(caller);
        let outcome = lock(&self.script).pop_front().unwrap_or_default();
        let mut job = DelegationJob::new(id.clone(), RunStatus::Running);
        job.label = spec.label.clone();
        job.profile = spec.profile.clone().or(caps.default_profile);
        job.mode = Some(spec.mode);
        job.kind = Some("delegate".into());
        job.submitted_at = Some(now_rfc3339());
        let (hold, status) = (outcome.hold, outcome.status);
        let own = Own {
            prompt: spec.prompt.clone(),
            outcome,
            steered: Vec::new(),
            submitted: job.clone(),
            settled: false,
        };
        let entry = Job::new(caller, DelegationResult::new(job), own);
        let (cancel, mut done) = (entry.cancel.clone(), entry.final_tx.subscribe());
        self.jobs.insert(&id, entry);
        self.jobs.lifecycle(&id, "running");
        if !hold {
            settle(&self.jobs, &id, status);
        } else {
            let (jobs, job_id) = (self.jobs.clone(), id.clone());
            runtime.spawn(async move {
                tokio::select! {
                    () = cancel.cancelled() => { settle(&jobs, &job_id, RunStatus::Cancelled); }
                    _ = done.wait_for(|f| *f) => {}
                }
            });
        }
        Ok(id)
    }

    fn submitted(&self, caller: &Caller, id: &str) -> Result<DelegationJob, DelegationError> {
        self.jobs.with_job(caller, id, |j| j.own.submitted.clone())
    }

    async fn steer_running(
        &self,
        caller: &Caller,
        id: &str,
        guidance: &str,
    ) -> Result<SteerOutcome, DelegationError> {
        if !lock(&self.capabilities).can_steer {
            return Ok(SteerOutcome::Unsupported {
                reason: "this provider cannot steer running jobs".into(),
            });
        }
        let outcome = self
            .jobs
            .with_job(caller, id, |j| match j.own.outcome.steer.clone() {
                SteerScript::Refuse(detail) => SteerOutcome::Refused { detail },
                SteerScript::Accept => {
                    j.own.steered.push(guidance.to_owned());
                    SteerOutcome::Accepted
                }
            })?;
        if outcome == SteerOutcome::Accepted {
            self.jobs
                .push_event(id, EventType::Steer, guidance.to_owned(), None, None);
        }
        Ok(outcome)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::seam::DelegationService;
    use std::time::Duration;

    fn caller(session: &str) -> Caller {
        Caller {
            session_id: session.into(),
            cwd: std::env::temp_dir(),
        }
    }

    fn spec(prompt: &str) -> DelegateSpec {
        DelegateSpec {
            prompt: prompt.into(),
            ..DelegateSpec::default()
        }
    }

    #[tokio::test]
    async fn a_job_is_answered_running_settles_once_and_belongs_to_its_session() {
        let p = InProcessProvider::new();
        let (a, b) = (caller("a"), caller("b"));
        // Completed at once, yet `delegate` answers with the job as submitted.
        let job = p.delegate(&a, spec("look")).await.unwrap();
        assert_eq!((job.id.as_str(), job.status), ("ip-1", RunStatus::Running));
        let r = p.result(&a, "ip-1").await.unwrap();
        assert_eq!(r.job.status, RunStatus::Completed);
        assert_eq!(r.final_text.as_deref(), Some("done: look"));
        assert!(!p.finish("ip-1"), "already final");
        // Numbering goes across sessions; another session's job is unknown.
        p.script(Outcome::completed("x").held());
        assert_eq!(p.delegate(&b, spec("two")).await.unwrap().id, "ip-2");
        assert!(p.status(&a, Some("ip-2")).await.is_err());
        assert_eq!(p.job_ids(), ["ip-1", "ip-2"]);
        let e = p
            .wait(&b, &["ip-2".into()], Duration::from_millis(20))
            .await
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::Timeout);
        // Cancelling a held job settles it cancelled, without an answer.
        let job = p.cancel(&b, "ip-2").await.unwrap();
        assert_eq!(job.status, RunStatus::Cancelled);
        assert_eq!(p.result(&b, "ip-2").await.unwrap().final_text, None);
        assert!(!p.finish("ip-2"));
        let states: Vec<_> = p
            .events(&b, "ip-2", None)
            .await
            .unwrap()
            .into_iter()
            .filter_map(|e| e.lifecycle)
            .collect();
        assert_eq!(states, ["running", "cancelled"]);
    }
}
