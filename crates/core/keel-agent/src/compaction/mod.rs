//! Compaction: keeps long sessions inside the model's context window without losing an event.
//!
//! Three triggers, one engine ([`Compactor`]):
//! - **pressure** (`agent/pre-step` middleware): the [`meter`] estimates the request the step
//!   would send (system prompt, tools, the surface or its `agent/context` projection, the
//!   claimed input), calibrated by the last `usage` the provider reported. Past
//!   [`CompactionConfig::threshold`] of the context window, oversized tool results are
//!   [`prune`]d; if that is not enough, the oldest balanced prefix of the surface is summarised
//!   ([`plan::summary_span`]), keeping a recent tail of [`CompactionConfig::keep_tail`].
//! - **overflow** (`agent/request-error` middleware): on `CONTEXT_WINDOW_EXCEEDED`, compact
//!   maximally (prune, then summarise everything but the last balanced group and the open
//!   step's own nodes) once per step, and retry the step only if the surface shrank.
//! - **manual** (`/compact`, `keel compact SESSION`): [`compact_now`] between turns.
//!
//! What is logged, in order: `compaction/start {reason, estimatedTokens, contextWindow}`; per
//! pruned result `compaction/prune {shadowedRange, shadowedSeqs, shadowedTokenCount}` then the
//! replacing `tool/result` (`surfaceOp: {op: replace, start: seq, end: seq}`, same message id);
//! for a summary `compaction/summary {…}` then a `user/message` from plugin `keel/compaction`
//! replacing the span and citing every shadowed seq; finally `compaction/end {outcome,
//! beforeTokens, afterTokens, error?}` with outcome `compacted`, `skipped` or `failed`. The
//! summary request itself is not logged (it is not part of a step). The replaced events stay in
//! the log; only the surface changes.

use keel_protocol::TurnNo;
pub mod config;
mod engine;
pub mod index;
pub mod meter;
pub mod plan;
pub mod prune;
pub mod summary;

pub use config::CompactionConfig;
pub use engine::Compactor;
pub use summary::{SummaryInstruction, SummaryMessage};

use crate::agent::Agent;
use crate::error::AgentError;
use crate::plugin::{InstallContext, Plugin, PluginError, PluginId, plugin_config};
use crate::seams::HookRegistry;
use keel_protocol::{Seq, SeqSpan};
use serde_json::Value;

/// The `compaction` plugin's identity (its summaries' source is `keel/compaction`).
pub const ID: PluginId = crate::plugin_id!("compaction");

/// The `compaction` plugin: [`install`] with the row's [`CompactionConfig`]. Compaction is
/// part of the core (the loop's overflow recovery and `keel compact` need it); the row only
/// turns its automatic triggers on or off.
#[derive(Debug, Clone, Copy, Default)]
pub struct CompactionPlugin;

impl Plugin for CompactionPlugin {
    fn id(&self) -> PluginId {
        ID
    }
    fn description(&self) -> &'static str {
        "prune oversized tool results and summarise old history when the context window fills"
    }
    fn enabled_by_default(&self) -> bool {
        true
    }
    fn install(&self, ctx: &mut InstallContext, config: Value) -> Result<(), PluginError> {
        let config: CompactionConfig = plugin_config(ID, config)?;
        install(&mut ctx.hooks, config);
        Ok(())
    }
}

/// Why compaction ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompactionReason {
    /// The estimated request passed the threshold (runs only when it did).
    Pressure,
    /// The provider refused the request as too long: compact as much as possible.
    Overflow,
    /// Asked for (`/compact`, `keel compact`): prune and summarise whatever the pressure,
    /// keeping the usual tail but at most a quarter of the history.
    Manual,
}

impl CompactionReason {
    /// Spelling in `compaction/start`.
    pub fn as_str(self) -> &'static str {
        match self {
            CompactionReason::Pressure => "pressure",
            CompactionReason::Overflow => "overflow",
            CompactionReason::Manual => "manual",
        }
    }
}

/// How a compaction ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompactionOutcome {
    /// Pressure below the threshold: nothing was logged.
    NotNeeded,
    /// The surface was pruned and/or summarised.
    Compacted,
    /// Nothing could be pruned or summarised (e.g. only the recent tail is left).
    Skipped,
    /// The summary request failed; prunes already made stand, nothing else changed.
    Failed {
        /// Why.
        error: String,
    },
}

impl CompactionOutcome {
    /// Spelling in `compaction/end`.
    pub fn as_str(&self) -> &'static str {
        match self {
            CompactionOutcome::NotNeeded => "not-needed",
            CompactionOutcome::Compacted => "compacted",
            CompactionOutcome::Skipped => "skipped",
            CompactionOutcome::Failed { .. } => "failed",
        }
    }
}

/// What a compaction did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactionReport {
    /// Why it ran.
    pub reason: CompactionReason,
    /// How it ended.
    pub outcome: CompactionOutcome,
    /// Estimated request tokens before.
    pub before_tokens: u64,
    /// Estimated request tokens after.
    pub after_tokens: u64,
    /// Seqs of the tool results pruned (the originals).
    pub pruned: Vec<Seq>,
    /// The span summarised, if any.
    pub summarised: Option<SeqSpan>,
    /// Seq of the summary `user/message`, if any.
    pub summary_seq: Option<Seq>,
}

impl CompactionReport {
    /// True when the estimated request got smaller.
    pub fn shrank(&self) -> bool {
        self.after_tokens < self.before_tokens
    }

    /// What a person who asked for it (`/compact`) is told: how much smaller the requests got,
    /// or that there was nothing to compact; `Err` with the error when it failed.
    pub fn said(&self) -> Result<String, &str> {
        match &self.outcome {
            CompactionOutcome::Compacted => Ok(format!(
                "Compacted the conversation: about {} → {} tokens per request.",
                self.before_tokens, self.after_tokens
            )),
            CompactionOutcome::NotNeeded | CompactionOutcome::Skipped => {
                Ok("Nothing to compact yet.".to_owned())
            }
            CompactionOutcome::Failed { error } => Err(error),
        }
    }
}

/// Why compaction could not run.
#[derive(Debug, thiserror::Error)]
pub enum CompactionError {
    /// Returned by [`CompactionConfig::validate`]: a setting is out of range. Fix the config.
    #[error("compaction config: {key}: {why}")]
    Config {
        /// The offending key.
        key: &'static str,
        /// What is wrong.
        why: String,
    },
    /// Returned by [`compact_now`] while a turn is running: compact between turns.
    #[error("turn {turn} is running; compact between turns (after it ends)")]
    TurnOpen {
        /// The open turn.
        turn: TurnNo,
    },
    /// The session refused a compaction event (a bug); the log is unchanged past the refused
    /// event and `compaction/end {failed}` was attempted.
    #[error(transparent)]
    Log(#[from] AgentError),
}

/// Register pressure compaction (`agent/pre-step`), overflow recovery
/// (`agent/request-error`) and the meter's calibration observer (`llm/request`) on `hooks`.
/// Returns the [`Compactor`] so a front end can also run [`Compactor::compact_now`] with the
/// same settings and calibration.
pub fn install(hooks: &mut HookRegistry, config: CompactionConfig) -> Compactor {
    let compactor = Compactor::new(config);
    compactor.install(hooks);
    compactor
}

/// Compact `agent`'s session now, between turns, with default settings (`/compact`,
/// `keel compact SESSION`). `reason` is normally [`CompactionReason::Manual`].
pub async fn compact_now(
    agent: &Agent,
    reason: CompactionReason,
) -> Result<CompactionReport, CompactionError> {
    Compactor::new(CompactionConfig::default())
        .compact_now(agent, reason)
        .await
}
