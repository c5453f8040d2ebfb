//! `/review`: a human-triggered, findings-first review by a review-capable provider of a pinned
//! git change (`base`) or a finished isolated job's patch (`job_id`). A front end gets a
//! [`ReviewCommand`] with [`crate::DelegatePlugin::with_review_command`], builds its agent, and
//! runs the command; the findings come back rendered as the model would see them (status line,
//! artifacts, the answer framed as untrusted data), for the front end to show and to inject
//! into the session ([`ReviewCommand::notice`]). Depends on the seam and the renders only.

use crate::render;
use crate::seam::{Caller, DelegationError, DelegationService, ErrorCode, ReviewSpec};
use keel_protocol::sync::Locked;
use keel_protocol::{ContentBlock, KnownSource, Message, MessageSource, Role};
use serde_json::{Map, json};
use std::sync::{Arc, Mutex};

/// What the installed plugin hands the command: its provider and output bound.
type Installed = (Arc<dyn DelegationService>, usize);

/// Why `/review` gave no findings: a delegation error, shown rendered `[<code>] <message>`
/// (the message bounded as the model would see it).
#[derive(Debug, thiserror::Error)]
#[error("{}", render::failure(.error, "review", *.cap))]
pub struct ReviewFailed {
    /// What the delegation service (or the missing plugin) said.
    pub error: DelegationError,
    /// The output bound the message is rendered within.
    pub cap: usize,
}

/// The `/review` command of one front end (filled when the plugin is installed).
#[derive(Clone, Default)]
pub struct ReviewCommand {
    pub(crate) slot: Arc<Mutex<Option<Installed>>>,
}

impl std::fmt::Debug for ReviewCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReviewCommand").finish_non_exhaustive()
    }
}

impl ReviewCommand {
    pub(crate) fn fill(&self, service: Arc<dyn DelegationService>, max_bytes: usize) {
        *self.slot.locked() = Some((service, max_bytes));
    }

    fn installed(&self) -> Option<Installed> {
        self.slot.locked().clone()
    }

    /// Run the review for `caller`; the rendered findings, or the failure rendered
    /// `[<code>] <message>` (`review-unsupported` without the capability; `not-ready` when the
    /// delegation plugin was not installed).
    pub async fn run(&self, caller: &Caller, spec: ReviewSpec) -> Result<String, ReviewFailed> {
        let Some((service, max)) = self.installed() else {
            let e = DelegationError::new(
                ErrorCode::NotReady,
                "delegation is off: enable it with --delegate or a `delegate` plugin row",
            );
            return Err(ReviewFailed {
                error: e,
                cap: 16_000,
            });
        };
        let caps = service.capabilities(caller).await;
        if !caps.can_review {
            let e = DelegationError::new(
                ErrorCode::ReviewUnsupported,
                format!("the {} provider cannot review", service.name()),
            );
            return Err(ReviewFailed { error: e, cap: max });
        }
        match service.review(caller, spec).await {
            Ok(r) => Ok(render::finished(&r.job.id, &r, max).0),
            Err(error) => Err(ReviewFailed { error, cap: max }),
        }
    }

    /// The findings as a message for the session's inbox (source `keel/delegate`).
    pub fn notice(findings: &str) -> Message {
        let mut extra = Map::new();
        extra.insert("review".into(), json!(true));
        Message {
            role: Role::User,
            content: vec![ContentBlock::text(format!(
                "The human asked for a review of their change (/review). The reviewer's findings:\n\n{findings}"
            ))],
            source: MessageSource::Known(KnownSource::Plugin {
                plugin: crate::ID.source().into(),
                extra,
            }),
            id: uuid::Uuid::new_v4().to_string(),
        }
    }
}
