//! `/review`: a human-triggered, findings-first review by a review-capable provider of a pinned
//! git change (`base`) or a finished isolated delegation's patch (`job_id`). The plugin offers
//! it as a command of its own ([`ReviewSource`], a [`CommandSource`] action that takes a while):
//! every front end with a command line runs `/review [REF] [--base REF] [--job ID]` the same
//! way, and `keel review` runs it headless. The findings come back rendered as the model would
//! see them (status line, artifacts, the answer framed as untrusted data); the command injects
//! them into the session's next turn ([`ReviewCommand::notice`]) and tells the person. Depends
//! on the seam and the renders only.

use crate::render;
use crate::seam::{Caller, DelegationError, DelegationService, ErrorCode, ReviewSpec};
use futures::future::BoxFuture;
use keel_agent::plugin::{CommandError, CommandSource, PluginCommand};
use keel_agent::{AgentSlot, InboxMode};
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

/// The review of one installed plugin: its provider and output bound, once installed.
#[derive(Clone, Default)]
pub(crate) struct ReviewCommand {
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

/// The command's name.
pub const REVIEW_COMMAND: &str = "review";

/// `/review` as the plugin's command ([`crate::DelegatePlugin`] installs it).
pub(crate) struct ReviewSource {
    pub(crate) command: ReviewCommand,
    /// The agent the plugin is installed in (bound once it is built).
    pub(crate) agent: Arc<AgentSlot>,
}

/// Why `/review`'s arguments were refused, or the review could not be delivered.
#[derive(Debug, thiserror::Error)]
enum ReviewArgsError {
    #[error("/review {0:?}: expected [REF] [--base REF] [--job ID]")]
    Args(String),
    #[error("/review: the agent is not ready")]
    NoAgent,
}

/// `[REF] [--base REF] [--job ID]` → the spec.
fn parse_args(args: &str) -> Result<ReviewSpec, ReviewArgsError> {
    let mut spec = ReviewSpec::default();
    let mut words = args.split_whitespace();
    while let Some(word) = words.next() {
        let slot = match word {
            "--base" => &mut spec.base,
            "--job" => &mut spec.job_id,
            w if !w.starts_with("--") && spec.base.is_none() => {
                spec.base = Some(w.to_owned());
                continue;
            }
            _ => return Err(ReviewArgsError::Args(args.to_owned())),
        };
        match words.next() {
            Some(value) if slot.is_none() => *slot = Some(value.to_owned()),
            _ => return Err(ReviewArgsError::Args(args.to_owned())),
        }
    }
    Ok(spec)
}

impl CommandSource for ReviewSource {
    fn commands(&self) -> Vec<PluginCommand> {
        vec![PluginCommand {
            name: REVIEW_COMMAND.into(),
            description: "A delegated reviewer reviews the workspace's change (from REF, default \
                          HEAD); its findings go to the model with your next prompt"
                .into(),
            argument_hint: Some("[REF] [--job ID]".into()),
        }]
    }

    fn expand<'a>(
        &'a self,
        name: &'a str,
        args: &'a str,
    ) -> BoxFuture<'a, Result<String, CommandError>> {
        // Front ends ask `act_async` first; a caller that did not gets the same action.
        Box::pin(async move {
            match self.act_async(name, args) {
                Some(done) => done.await.map(|_| String::new()),
                None => Err(CommandError::Failed(
                    format!("/{name} is not a review").into(),
                )),
            }
        })
    }

    fn act_async<'a>(
        &'a self,
        name: &'a str,
        args: &'a str,
    ) -> Option<BoxFuture<'a, Result<String, CommandError>>> {
        if name != REVIEW_COMMAND {
            return None;
        }
        Some(Box::pin(async move {
            let failed = |e: Box<dyn std::error::Error + Send + Sync>| CommandError::Failed(e);
            let spec = parse_args(args).map_err(|e| failed(e.into()))?;
            let agent = self
                .agent
                .get()
                .ok_or_else(|| failed(ReviewArgsError::NoAgent.into()))?;
            let caller = Caller {
                session_id: agent.session_id().as_str().to_owned(),
                cwd: agent.config().cwd.clone(),
            };
            let findings = self
                .command
                .run(&caller, spec)
                .await
                .map_err(|e| failed(e.into()))?;
            agent
                .enqueue(InboxMode::Inject, ReviewCommand::notice(&findings))
                .map_err(|e| failed(e.into()))?;
            Ok(findings)
        }))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn arguments_name_the_base_and_the_delegation() {
        let spec = parse_args("main --job d1").unwrap();
        assert_eq!(
            (spec.base.as_deref(), spec.job_id.as_deref()),
            (Some("main"), Some("d1"))
        );
        let spec = parse_args("--base v1").unwrap();
        assert_eq!(spec.base.as_deref(), Some("v1"));
        assert_eq!(parse_args("").unwrap().base, None);
        for bad in [
            "--base",
            "a b",
            "--job x --job y",
            "--frob 1",
            "--base a main",
        ] {
            assert!(parse_args(bad).is_err(), "{bad}");
        }
    }
}
