//! The provider-neutral delegation seam: the vocabulary of `specs/delegation.md` ("Seam") and
//! the [`DelegationService`] trait every provider implements. The tools and `/review` depend on
//! this module only; nothing here knows about `consult`, keel child processes or the
//! in-process test provider.
//!
//! Every operation carries the [`Caller`] (the calling session id and its working directory),
//! taken from the calling agent by the tools — never from a tool argument.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Who is asking: the calling session and its working directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// Session id of the calling (supervising) agent.
    pub session_id: String,
    /// Its working directory.
    pub cwd: PathBuf,
}

/// The authority granted to a delegate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DelegateMode {
    /// It may read but not change the workspace (the default).
    #[default]
    ReadOnly,
    /// It may change files (providers confine this, e.g. to an isolated worktree).
    Write,
}

impl DelegateMode {
    /// Spelling in renders (`read-only`, `write`).
    pub fn as_str(self) -> &'static str {
        match self {
            DelegateMode::ReadOnly => "read-only",
            DelegateMode::Write => "write",
        }
    }
}

/// One cold, self-contained prompt turn to hand to a delegate.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DelegateSpec {
    /// The whole task: the delegate sees nothing else of the supervisor's context.
    pub prompt: String,
    /// Which agent/profile of the provider runs it (provider default when absent).
    pub profile: Option<String>,
    /// Authority grant.
    pub mode: DelegateMode,
    /// Provider job ids this one waits for.
    pub after: Vec<String>,
    /// A short label (1–80 characters).
    pub label: Option<String>,
    /// Model override.
    pub model: Option<String>,
    /// Reasoning effort override.
    pub effort: Option<String>,
    /// Provider-specific options, keys declared in [`Capabilities::extensions`].
    pub extensions: Map<String, Value>,
}

/// A findings-first review of a pinned change (`base`) or of a finished job's patch (`job_id`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReviewSpec {
    /// Git ref the change is measured against.
    pub base: Option<String>,
    /// A finished (isolated) job whose patch is reviewed.
    pub job_id: Option<String>,
    /// Which agent/profile reviews.
    pub profile: Option<String>,
    /// Model override.
    pub model: Option<String>,
    /// Reasoning effort override.
    pub effort: Option<String>,
    /// A short label.
    pub label: Option<String>,
    /// Provider-specific options.
    pub extensions: Map<String, Value>,
}

/// Where a delegate's run is in its life, as its provider reports it (the status of the
/// session's own background jobs, `delegate-N` among them, is `keel_tools::JobStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// Accepted, not started (waiting for `after` jobs or a slot).
    Queued,
    /// Running.
    Running,
    /// Finished and succeeded.
    Completed,
    /// Cancelled before it finished.
    Cancelled,
    /// Finished and failed.
    Failed,
    /// Never ran (a job it waited for failed).
    Skipped,
    /// The provider reported a status keel does not know (see [`DelegationJob::raw_status`]).
    Unknown,
}

impl RunStatus {
    /// Spelling in renders.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Queued => "queued",
            RunStatus::Running => "running",
            RunStatus::Completed => "completed",
            RunStatus::Cancelled => "cancelled",
            RunStatus::Failed => "failed",
            RunStatus::Skipped => "skipped",
            RunStatus::Unknown => "unknown",
        }
    }

    /// A status from a provider's word: unknown words map to [`RunStatus::Unknown`].
    pub fn parse(raw: &str) -> RunStatus {
        match raw {
            "queued" => RunStatus::Queued,
            "running" => RunStatus::Running,
            "completed" => RunStatus::Completed,
            "cancelled" | "canceled" => RunStatus::Cancelled,
            "failed" => RunStatus::Failed,
            "skipped" => RunStatus::Skipped,
            _ => RunStatus::Unknown,
        }
    }

    /// Whether the job will not change any more. `unknown` counts as final: keel cannot tell,
    /// and waiting on it forever would be worse.
    pub fn is_final(self) -> bool {
        !matches!(self, RunStatus::Queued | RunStatus::Running)
    }
}

/// A delegation as the provider reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DelegationJob {
    /// The provider's job id.
    pub id: String,
    /// Status.
    pub status: RunStatus,
    /// The provider's own word, when it was not one keel knows.
    pub raw_status: Option<String>,
    /// Label.
    pub label: Option<String>,
    /// Profile that runs it.
    pub profile: Option<String>,
    /// Authority it runs under.
    pub mode: Option<DelegateMode>,
    /// `delegate` or `review`.
    pub kind: Option<String>,
    /// When it was submitted (RFC 3339).
    pub submitted_at: Option<String>,
    /// When it finished (RFC 3339).
    pub finished_at: Option<String>,
}

impl DelegationJob {
    /// A job `id` in `status` with nothing else known.
    pub fn new(id: impl Into<String>, status: RunStatus) -> Self {
        DelegationJob {
            id: id.into(),
            status,
            raw_status: None,
            label: None,
            profile: None,
            mode: None,
            kind: None,
            submitted_at: None,
            finished_at: None,
        }
    }
}

/// Files a delegation left behind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Artifacts {
    /// A patch of its changes (write mode in an isolated worktree).
    pub patch_path: Option<String>,
    /// Files it touched.
    pub touched_files: Vec<String>,
    /// Its full log.
    pub log_path: Option<String>,
}

/// Where a delegation sits among others.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lineage {
    /// Chain it belongs to.
    pub chain_id: Option<String>,
    /// The job that started it (a delegate delegating).
    pub parent_job_id: Option<String>,
    /// Jobs it started.
    pub child_job_ids: Vec<String>,
    /// How deep in a delegation chain it runs.
    pub delegation_depth: Option<u32>,
}

/// A delegation's outcome: the job plus what it produced. Every text in it is written by the
/// delegate (or its provider) and is untrusted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DelegationResult {
    /// The job.
    pub job: DelegationJob,
    /// Its final answer.
    pub final_text: Option<String>,
    /// Whether `final_text` was cut (by the provider, or by keel's bound).
    pub final_text_truncated: bool,
    /// Why it failed, when it did.
    pub error_message: Option<String>,
    /// Files it left.
    pub artifacts: Artifacts,
    /// Lineage.
    pub lineage: Lineage,
}

impl DelegationResult {
    /// A result for `job` with nothing produced.
    pub fn new(job: DelegationJob) -> Self {
        DelegationResult {
            job,
            final_text: None,
            final_text_truncated: false,
            error_message: None,
            artifacts: Artifacts::default(),
            lineage: Lineage::default(),
        }
    }
}

/// What a mid-flight report is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventType {
    /// The delegate cannot go on without help.
    Blocked,
    /// The delegate needs a decision.
    DecisionNeeded,
    /// Something the supervisor should know.
    Discovery,
    /// Progress.
    Progress,
    /// The echo of a steer (not delivered to the model).
    Steer,
    /// A lifecycle transition (not delivered: the job service announces completion).
    Lifecycle,
}

impl EventType {
    /// Spelling in renders.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Blocked => "blocked",
            EventType::DecisionNeeded => "decision_needed",
            EventType::Discovery => "discovery",
            EventType::Progress => "progress",
            EventType::Steer => "steer",
            EventType::Lifecycle => "lifecycle",
        }
    }
}

/// How urgently a report wants the supervisor's attention.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Urgency {
    /// Wake an idle supervisor (within its wake budget).
    Wake,
    /// Join the supervisor's next step, without waking it.
    Info,
}

/// A mid-flight report from a delegation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DelegationEvent {
    /// The provider's job id.
    pub job_id: String,
    /// Position in the job's event stream.
    pub seq: Option<u64>,
    /// When (RFC 3339).
    pub at: String,
    /// What it is about.
    #[serde(rename = "type")]
    pub event_type: EventType,
    /// How urgent.
    pub urgency: Urgency,
    /// The delegate's words.
    pub message: String,
    /// Structured details (untrusted).
    pub data: Option<Value>,
    /// For lifecycle events: the new state.
    pub lifecycle: Option<String>,
}

/// What a provider can do, and whether it is ready.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capabilities {
    /// Whether delegations can be started now.
    pub ready: bool,
    /// The provider's version.
    pub version: Option<String>,
    /// Profiles (agents) it offers.
    pub profiles: Vec<String>,
    /// The profile used when none is named.
    pub default_profile: Option<String>,
    /// Whether running jobs accept guidance.
    pub can_steer: bool,
    /// Whether jobs send mid-flight reports.
    pub can_report: bool,
    /// Whether it can review.
    pub can_review: bool,
    /// Extension keys it accepts in [`DelegateSpec::extensions`], each with a one-line meaning.
    pub extensions: BTreeMap<String, String>,
    /// Why it is not ready (or what is degraded).
    pub diagnosis: Option<String>,
    /// Jobs still active from earlier sessions (surfaced, not reaped).
    pub active_from_earlier_sessions: Vec<DelegationJob>,
}

/// The answer to a steer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "lowercase")]
pub enum SteerOutcome {
    /// The delegate got the guidance.
    Accepted,
    /// The job did not take it (finished, not listening).
    Refused {
        /// Why.
        detail: String,
    },
    /// The provider cannot steer.
    Unsupported {
        /// Why.
        reason: String,
    },
}

/// The spec's error codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorCode {
    /// The provider is not installed, not authenticated or failed its preflight.
    NotReady,
    /// The provider is busy (retried once already).
    Busy,
    /// A wait ran out.
    Timeout,
    /// The job has not finished; there is no result yet.
    NotFinal,
    /// The delegate itself failed.
    DelegateFailed,
    /// The provider cannot review.
    ReviewUnsupported,
    /// No such job for this caller.
    UnknownJob,
    /// The request asks for something the provider does not offer (an extension key…).
    Unsupported,
    /// A broken install or a contract violation.
    Internal,
}

impl ErrorCode {
    /// Spelling in renders (`unknown-job`).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::NotReady => "not-ready",
            ErrorCode::Busy => "busy",
            ErrorCode::Timeout => "timeout",
            ErrorCode::NotFinal => "not-final",
            ErrorCode::DelegateFailed => "delegate-failed",
            ErrorCode::ReviewUnsupported => "review-unsupported",
            ErrorCode::UnknownJob => "unknown-job",
            ErrorCode::Unsupported => "unsupported",
            ErrorCode::Internal => "internal",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed delegation operation: a code, a message and the provider's diagnosis.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("[{code}] {message}")]
pub struct DelegationError {
    /// Which failure.
    pub code: ErrorCode,
    /// What happened.
    pub message: String,
    /// The provider's own diagnosis (stderr, doctor output…), when it gave one.
    pub diagnosis: Option<String>,
}

impl DelegationError {
    /// An error `code` with `message` and no diagnosis.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        DelegationError {
            code,
            message: message.into(),
            diagnosis: None,
        }
    }

    /// Attach the provider's diagnosis.
    pub fn with_diagnosis(mut self, diagnosis: impl Into<String>) -> Self {
        self.diagnosis = Some(diagnosis.into());
        self
    }

    /// `unknown-job` for `id`.
    pub fn unknown_job(id: &str) -> Self {
        DelegationError::new(ErrorCode::UnknownJob, format!("no delegation job '{id}'"))
    }

    /// `review-unsupported` from the provider `name`.
    pub fn review_unsupported(name: &str) -> Self {
        DelegationError::new(
            ErrorCode::ReviewUnsupported,
            format!("the {name} provider cannot review"),
        )
    }
}

/// Check `extensions` against the keys `capabilities` declares: the first unknown key is
/// rejected by name (`unsupported`), with the declared keys listed.
pub fn check_extensions(
    extensions: &Map<String, Value>,
    capabilities: &Capabilities,
) -> Result<(), DelegationError> {
    let Some(bad) = extensions
        .keys()
        .find(|k| !capabilities.extensions.contains_key(k.as_str()))
    else {
        return Ok(());
    };
    let known = if capabilities.extensions.is_empty() {
        "none".to_owned()
    } else {
        capabilities
            .extensions
            .keys()
            .cloned()
            .collect::<Vec<_>>()
            .join(", ")
    };
    Err(DelegationError::new(
        ErrorCode::Unsupported,
        format!("unknown extension key '{bad}' (this provider declares: {known})"),
    ))
}

/// Receives a job's reports as they arrive (see [`DelegationService::watch`]).
pub type EventListener = Arc<dyn Fn(DelegationEvent) + Send + Sync>;

/// A delegation provider. Object-safe: the plugin holds an `Arc<dyn DelegationService>`.
#[async_trait]
pub trait DelegationService: Send + Sync {
    /// The provider's name (`inprocess`, `consult`, `keel`).
    fn name(&self) -> &str;

    /// What it can do and whether it is ready.
    async fn capabilities(&self, caller: &Caller) -> Capabilities;

    /// Submit a delegation; returns at once with the job (queued or running).
    async fn delegate(
        &self,
        caller: &Caller,
        spec: DelegateSpec,
    ) -> Result<DelegationJob, DelegationError>;

    /// A review (blocking until its findings are in). Default: `review-unsupported`.
    async fn review(
        &self,
        _caller: &Caller,
        _spec: ReviewSpec,
    ) -> Result<DelegationResult, DelegationError> {
        Err(DelegationError::review_unsupported(self.name()))
    }

    /// One job (`Some(id)`) or the caller's jobs (`None`).
    async fn status(
        &self,
        caller: &Caller,
        id: Option<&str>,
    ) -> Result<Vec<DelegationJob>, DelegationError>;

    /// Wait until every job of `ids` is final; `timeout` past the deadline.
    async fn wait(
        &self,
        caller: &Caller,
        ids: &[String],
        timeout: Duration,
    ) -> Result<Vec<DelegationJob>, DelegationError>;

    /// A final job's result; `not-final` while it runs.
    async fn result(&self, caller: &Caller, id: &str) -> Result<DelegationResult, DelegationError>;

    /// The job's log (the last `tail` lines when given).
    async fn logs(
        &self,
        caller: &Caller,
        id: &str,
        tail: Option<usize>,
    ) -> Result<String, DelegationError>;

    /// Cancel a job (a final job is returned unchanged).
    async fn cancel(&self, caller: &Caller, id: &str) -> Result<DelegationJob, DelegationError>;

    /// Hand guidance to a running job. Never retried.
    async fn steer(
        &self,
        caller: &Caller,
        id: &str,
        guidance: &str,
    ) -> Result<SteerOutcome, DelegationError>;

    /// The job's reports after `from_seq` (all when `None`).
    async fn events(
        &self,
        caller: &Caller,
        id: &str,
        from_seq: Option<u64>,
    ) -> Result<Vec<DelegationEvent>, DelegationError>;

    /// Call `listener` with each report of job `id` — those already made, then each new one —
    /// until the job is final. Each report is handed over once.
    fn watch(
        &self,
        caller: &Caller,
        id: &str,
        listener: EventListener,
    ) -> Result<(), DelegationError>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_extension_keys_are_rejected_by_name() {
        let mut caps = Capabilities::default();
        caps.extensions
            .insert("sandbox".into(), "confined|inherit".into());
        let mut ext = Map::new();
        ext.insert("sandbox".into(), json!("confined"));
        assert_eq!(check_extensions(&ext, &caps), Ok(()));
        ext.insert("turbo".into(), json!(true));
        let err = check_extensions(&ext, &caps).unwrap_err();
        assert_eq!(err.code, ErrorCode::Unsupported);
        assert!(err.message.contains("'turbo'"), "{err}");
        assert!(err.message.contains("sandbox"), "{err}");
        assert_eq!(
            err.to_string(),
            "[unsupported] unknown extension key 'turbo' (this provider declares: sandbox)"
        );
    }

    #[test]
    fn statuses_parse_and_unknown_is_final() {
        assert_eq!(RunStatus::parse("running"), RunStatus::Running);
        assert_eq!(RunStatus::parse("exploded"), RunStatus::Unknown);
        assert!(RunStatus::Unknown.is_final());
        assert!(!RunStatus::Queued.is_final());
        let codes = [
            ErrorCode::NotReady,
            ErrorCode::Busy,
            ErrorCode::Timeout,
            ErrorCode::NotFinal,
            ErrorCode::DelegateFailed,
            ErrorCode::ReviewUnsupported,
            ErrorCode::UnknownJob,
            ErrorCode::Unsupported,
            ErrorCode::Internal,
        ];
        let spelled: Vec<_> = codes.iter().map(|c| c.as_str()).collect();
        assert_eq!(
            spelled.join(","),
            "not-ready,busy,timeout,not-final,delegate-failed,review-unsupported,unknown-job,unsupported,internal"
        );
        for c in codes {
            assert_eq!(serde_json::to_value(c).unwrap(), json!(c.as_str()));
        }
    }
}
