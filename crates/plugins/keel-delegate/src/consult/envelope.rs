//! Parsing consult's JSON output. Only `schemaVersion: 1` envelopes are trusted; unknown fields
//! are ignored; an unknown job status becomes [`RunStatus::Unknown`] with its raw word kept.

use super::run::ConsultError;
use crate::seam::{
    Artifacts, DelegateMode, DelegationEvent, DelegationJob, DelegationResult, EventType, Lineage,
    RunStatus, Urgency,
};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// The only envelope version keel trusts.
pub const SCHEMA_VERSION: u64 = 1;

/// Parse `stdout` of `subcommand` as a v1 envelope of shape `T`.
pub(crate) fn parse<T: DeserializeOwned>(
    subcommand: &str,
    stdout: &str,
) -> Result<T, ConsultError> {
    let bad = |detail: String| ConsultError::Envelope {
        subcommand: subcommand.to_owned(),
        detail,
    };
    let value: Value =
        serde_json::from_str(stdout.trim()).map_err(|e| bad(format!("not JSON: {e}")))?;
    match value.get("schemaVersion").and_then(Value::as_u64) {
        Some(SCHEMA_VERSION) => {}
        Some(other) => {
            return Err(bad(format!(
                "schemaVersion {other} is not supported (want 1)"
            )));
        }
        None => return Err(bad("no schemaVersion".to_owned())),
    }
    serde_json::from_value(value).map_err(|e| bad(format!("unexpected shape: {e}")))
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct Authority {
    pub mode: Option<String>,
}

/// `job {…}` of an envelope or collection.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct JobV1 {
    pub id: String,
    pub label: Option<String>,
    pub kind: Option<String>,
    pub status: String,
    pub profile: Option<String>,
    pub authority: Option<Authority>,
    pub submitted_at: Option<String>,
    pub completed_at: Option<String>,
    pub host_session_id: Option<String>,
}

impl JobV1 {
    pub fn into_job(self) -> DelegationJob {
        let status = RunStatus::parse(&self.status);
        let mut job = DelegationJob::new(self.id, status);
        if status == RunStatus::Unknown {
            job.raw_status = Some(self.status);
        }
        job.label = self.label;
        job.kind = self.kind;
        job.profile = self.profile;
        job.mode = self
            .authority
            .and_then(|a| a.mode)
            .and_then(|m| match m.as_str() {
                "read-only" => Some(DelegateMode::ReadOnly),
                "write" => Some(DelegateMode::Write),
                _ => None,
            });
        job.submitted_at = self.submitted_at;
        job.finished_at = self.completed_at;
        job
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct OutcomeV1 {
    pub error_message: Option<String>,
    pub final_text: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct ArtifactsV1 {
    pub touched_files: Vec<String>,
    pub log_path: Option<String>,
    pub patch_path: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct LineageV1 {
    pub chain_id: Option<String>,
    pub parent_job_id: Option<String>,
    pub child_job_ids: Vec<String>,
    pub delegation_depth: Option<u32>,
}

/// The job result v1 envelope.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct JobEnvelope {
    pub job: JobV1,
    #[serde(default)]
    pub outcome: OutcomeV1,
    #[serde(default)]
    pub artifacts: ArtifactsV1,
    #[serde(default)]
    pub lineage: LineageV1,
}

impl JobEnvelope {
    pub fn into_result(self) -> DelegationResult {
        let mut r = DelegationResult::new(self.job.into_job());
        r.final_text = self.outcome.final_text;
        r.error_message = self.outcome.error_message;
        r.artifacts = Artifacts {
            patch_path: self.artifacts.patch_path,
            touched_files: self.artifacts.touched_files,
            log_path: self.artifacts.log_path,
        };
        r.lineage = Lineage {
            chain_id: self.lineage.chain_id,
            parent_job_id: self.lineage.parent_job_id,
            child_job_ids: self.lineage.child_job_ids,
            delegation_depth: self.lineage.delegation_depth,
        };
        r
    }
}

/// `{schemaVersion, jobs}`.
#[derive(Debug, Deserialize)]
pub(crate) struct Jobs {
    pub jobs: Vec<JobV1>,
}

/// One event `{seq, at, type, urgency, message, data?}`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct EventV1 {
    pub seq: Option<u64>,
    pub at: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub urgency: Option<String>,
    pub message: String,
    pub data: Option<Value>,
    pub lifecycle: Option<String>,
}

impl EventV1 {
    /// The seam's event; `None` for a type keel does not know.
    pub fn into_event(self, job_id: &str) -> Option<DelegationEvent> {
        let event_type = match self.kind.as_str() {
            "blocked" => EventType::Blocked,
            "decision_needed" => EventType::DecisionNeeded,
            "discovery" => EventType::Discovery,
            "progress" => EventType::Progress,
            "steer" => EventType::Steer,
            "lifecycle" => EventType::Lifecycle,
            _ => return None,
        };
        let urgency = match self.urgency.as_deref() {
            Some("wake") => Urgency::Wake,
            Some(_) => Urgency::Info,
            None if matches!(event_type, EventType::Blocked | EventType::DecisionNeeded) => {
                Urgency::Wake
            }
            None => Urgency::Info,
        };
        Some(DelegationEvent {
            job_id: job_id.to_owned(),
            seq: self.seq,
            at: self.at,
            event_type,
            urgency,
            message: self.message,
            data: self.data,
            lifecycle: self.lifecycle,
        })
    }
}

/// `{schemaVersion, jobId, events}`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Events {
    pub job_id: String,
    #[serde(default)]
    pub events: Vec<EventV1>,
}

/// `doctor --json`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Doctor {
    pub ok: bool,
    pub checks: Vec<Check>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Check {
    pub name: String,
    pub ok: bool,
    pub message: String,
}

/// `agents --json`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Agents {
    pub agents: Vec<Agent>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Agent {
    pub name: String,
    pub available: Option<bool>,
    pub default: bool,
}

/// `capabilities --json` (1.2+).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct CapabilitiesV1 {
    pub features: Features,
    pub extensions: serde_json::Map<String, Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Features {
    pub steer: bool,
    pub events: bool,
    pub review: bool,
}
