//! The six model-facing tools: `delegate`, `delegate_review`, `delegate_status`,
//! `delegate_result`, `delegate_logs`, `delegate_steer`. They depend on the seam
//! ([`crate::seam`]), the renders ([`crate::render`]) and report delivery
//! ([`crate::reports`]) only — never on a provider module (a test reads these files and checks).
//!
//! Identity (calling session id and cwd) comes from the calling agent. `delegate` always runs
//! in the background as a keel job `delegate-N` (the job service of the `jobs` plugin), so
//! `job_output` waits for it and `job_kill` stops it (the job's cancellation fires a
//! best-effort provider cancel). The tools take the keel id `delegate-N` (a provider's own job
//! id also works, for jobs keel did not start in this session).
//!
//! Domain failures are ordinary results rendered `[<code>] <message>` (with the provider's
//! diagnosis); only `internal` (a broken install or a contract violation) is an error result.

mod query;
mod start;

pub use query::{LogsTool, ResultTool, StatusTool, SteerTool};
pub use start::{DelegateTool, ReviewTool};

use crate::render;
use crate::reports::Reports;
use crate::seam::{Caller, DelegationError, DelegationService, ErrorCode};
use keel_protocol::sync::Locked;
use keel_tools::{Tool, ToolContext, ToolError, ToolOutput};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex, MutexGuard};

/// Names of the six tools, in registration order.
pub const TOOL_NAMES: [&str; 6] = [
    "delegate",
    "delegate_review",
    "delegate_status",
    "delegate_result",
    "delegate_logs",
    "delegate_steer",
];

/// Longest guidance `delegate_steer` accepts, in bytes (longer is rejected, never trimmed).
pub const MAX_GUIDANCE_BYTES: usize = 16 * 1024;

/// A delegation keel started as a job.
#[derive(Debug, Clone)]
struct Tracked {
    keel_id: String,
    provider_id: String,
    owner: String,
}

/// What the tools share: the provider, report delivery, the output bound and the map from keel
/// job ids to provider job ids.
pub struct Shared {
    service: Arc<dyn DelegationService>,
    reports: Arc<Reports>,
    max_bytes: usize,
    tracked: Mutex<Vec<Tracked>>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("provider", &self.service.name())
            .field("max_bytes", &self.max_bytes)
            .finish_non_exhaustive()
    }
}

impl Shared {
    /// Tools over `service`, bounding delegate-authored text to `max_bytes`.
    pub fn new(
        service: Arc<dyn DelegationService>,
        reports: Arc<Reports>,
        max_bytes: usize,
    ) -> Arc<Self> {
        Arc::new(Shared {
            service,
            reports,
            max_bytes,
            tracked: Mutex::new(Vec::new()),
        })
    }

    fn tracked(&self) -> MutexGuard<'_, Vec<Tracked>> {
        self.tracked.locked()
    }

    fn track(&self, keel_id: &str, provider_id: &str, owner: &str) {
        self.tracked().push(Tracked {
            keel_id: keel_id.to_owned(),
            provider_id: provider_id.to_owned(),
            owner: owner.to_owned(),
        });
    }

    /// The provider id for `id` as the model wrote it (a keel id of the caller's, else as is).
    fn provider_id(&self, caller: &Caller, id: &str) -> String {
        self.tracked()
            .iter()
            .find(|t| t.keel_id == id && t.owner == caller.session_id)
            .map_or_else(|| id.to_owned(), |t| t.provider_id.clone())
    }

    /// The id to show for provider job `provider_id` (its keel id when keel started it).
    fn display_id(&self, caller: &Caller, provider_id: &str) -> String {
        self.tracked()
            .iter()
            .find(|t| t.provider_id == provider_id && t.owner == caller.session_id)
            .map_or_else(|| provider_id.to_owned(), |t| t.keel_id.clone())
    }
}

/// The six tools over `shared`.
pub fn all(shared: &Arc<Shared>) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(DelegateTool::new(shared.clone())),
        Arc::new(ReviewTool::new(shared.clone())),
        Arc::new(StatusTool::new(shared.clone())),
        Arc::new(ResultTool::new(shared.clone())),
        Arc::new(LogsTool::new(shared.clone())),
        Arc::new(SteerTool::new(shared.clone())),
    ]
}

/// The calling agent and its identity.
fn caller(
    ctx: &ToolContext<'_>,
    tool: &str,
) -> Result<(keel_agent::AgentHandle, Caller), ToolError> {
    let agent = keel_agent::calling_agent(ctx).ok_or_else(|| {
        ToolError::Failed(format!(
            "{tool} runs only inside an agent (identity comes from the calling agent)"
        ))
    })?;
    let caller = Caller {
        session_id: agent.session_id().as_str().to_owned(),
        cwd: agent.config().cwd.clone(),
    };
    Ok((agent, caller))
}

fn parse<T: serde::de::DeserializeOwned>(args: Value) -> Result<T, ToolError> {
    serde_json::from_value(args).map_err(|e| ToolError::InvalidArgs(e.to_string()))
}

/// A domain failure as an ordinary result (`internal` as an error result).
fn failed(
    err: &DelegationError,
    display_id: &str,
    max_bytes: usize,
) -> Result<ToolOutput, ToolError> {
    let text = render::failure(err, display_id, max_bytes);
    if err.code == ErrorCode::Internal {
        return Err(ToolError::Failed(text));
    }
    Ok(ToolOutput::text(text).with_value(json!({ "code": err.code.as_str() })))
}
