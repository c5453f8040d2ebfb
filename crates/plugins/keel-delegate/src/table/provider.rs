//! What a provider that runs its delegates itself implements ([`Provider`]: its capability
//! report, start, steer, review) and the one [`DelegationService`] every such provider is
//! through its [`Table`]; see the parent module.

use super::{JobLog, Table};
use crate::seam::{
    Caller, Capabilities, DelegateSpec, DelegationError, DelegationEvent, DelegationJob,
    DelegationResult, DelegationService, EventListener, ReviewSpec, RunStatus, SteerOutcome,
};
use async_trait::async_trait;
use std::time::Duration;

/// The capability report of a provider that runs its delegates itself: this build's version,
/// `profiles` (`default` the default), steerable; ready unless `diagnosis` says why not. The
/// provider adds what else it can (reports, reviews).
pub(crate) fn capabilities(diagnosis: Option<String>, profiles: Vec<String>) -> Capabilities {
    Capabilities {
        ready: diagnosis.is_none(),
        version: Some(env!("CARGO_PKG_VERSION").into()),
        profiles,
        default_profile: Some("default".into()),
        can_steer: true,
        diagnosis,
        ..Capabilities::default()
    }
}

/// A provider that runs its delegates itself (keel, acp, inprocess): what is its own — its
/// capability report, starting a job, steering a running one, a review — while its [`Table`]
/// does the rest once. Every such provider is a [`DelegationService`] through the impl below:
/// `status`, `wait`, `result`, `logs`, `events` and `watch` are the table's; `delegate` starts
/// a job and reads it back ([`Provider::submitted`]); `cancel` (stopping) fires the job's cancellation token, which the run task
/// [`Provider::start`] spawned obeys; `steer` is refused by the table unless the job runs.
#[async_trait]
pub(crate) trait Provider: Send + Sync {
    /// What the provider keeps of a job beside the table's part.
    type Own: JobLog + Send + 'static;

    /// The provider's name (`keel`, `acp`, `inprocess`).
    const NAME: &'static str;

    /// Its jobs.
    fn jobs(&self) -> &Table<Self::Own>;

    /// What it can do and whether it is ready.
    async fn own_capabilities(&self, caller: &Caller) -> Capabilities;

    /// Start `spec` as a new job of `caller` in [`Provider::jobs`]; its id, once it runs (or
    /// is queued).
    async fn start(&self, caller: &Caller, spec: &DelegateSpec) -> Result<String, DelegationError>;

    /// The job `delegate` answers with once [`Provider::start`] gave `id`. Default: the
    /// table's record of it as it is now.
    fn submitted(&self, caller: &Caller, id: &str) -> Result<DelegationJob, DelegationError> {
        Ok(self.jobs().lookup(caller, id)?.job)
    }

    /// Hand `guidance` to job `id`, which was running when the table looked.
    async fn steer_running(
        &self,
        caller: &Caller,
        id: &str,
        guidance: &str,
    ) -> Result<SteerOutcome, DelegationError>;

    /// A review (blocking until its findings are in). Default: `review-unsupported`.
    async fn review_change(
        &self,
        _caller: &Caller,
        _spec: ReviewSpec,
    ) -> Result<DelegationResult, DelegationError> {
        Err(DelegationError::review_unsupported(Self::NAME))
    }
}

#[async_trait]
impl<P: Provider> DelegationService for P {
    fn name(&self) -> &str {
        P::NAME
    }

    async fn capabilities(&self, caller: &Caller) -> Capabilities {
        self.own_capabilities(caller).await
    }

    async fn delegate(
        &self,
        caller: &Caller,
        spec: DelegateSpec,
    ) -> Result<DelegationJob, DelegationError> {
        let id = self.start(caller, &spec).await?;
        self.submitted(caller, &id)
    }

    async fn review(
        &self,
        caller: &Caller,
        spec: ReviewSpec,
    ) -> Result<DelegationResult, DelegationError> {
        self.review_change(caller, spec).await
    }

    async fn status(
        &self,
        caller: &Caller,
        id: Option<&str>,
    ) -> Result<Vec<DelegationJob>, DelegationError> {
        self.jobs().status(caller, id)
    }

    async fn wait(
        &self,
        caller: &Caller,
        ids: &[String],
        timeout: Duration,
    ) -> Result<Vec<DelegationJob>, DelegationError> {
        self.jobs().wait(caller, ids, timeout).await
    }

    async fn result(&self, caller: &Caller, id: &str) -> Result<DelegationResult, DelegationError> {
        self.jobs().result(caller, id)
    }

    async fn logs(
        &self,
        caller: &Caller,
        id: &str,
        tail: Option<usize>,
    ) -> Result<String, DelegationError> {
        self.jobs().logs(caller, id, tail)
    }

    async fn cancel(&self, caller: &Caller, id: &str) -> Result<DelegationJob, DelegationError> {
        self.jobs().cancel(caller, id).await
    }

    async fn steer(
        &self,
        caller: &Caller,
        id: &str,
        guidance: &str,
    ) -> Result<SteerOutcome, DelegationError> {
        let status = self.jobs().with_job(caller, id, |j| j.result.job.status)?;
        if status != RunStatus::Running {
            return Ok(SteerOutcome::Refused {
                detail: format!("job {id} is {}", status.as_str()),
            });
        }
        self.steer_running(caller, id, guidance).await
    }

    async fn events(
        &self,
        caller: &Caller,
        id: &str,
        from_seq: Option<u64>,
    ) -> Result<Vec<DelegationEvent>, DelegationError> {
        self.jobs().events(caller, id, from_seq)
    }

    fn watch(
        &self,
        caller: &Caller,
        id: &str,
        listener: EventListener,
    ) -> Result<(), DelegationError> {
        self.jobs().watch(caller, id, listener)
    }
}
