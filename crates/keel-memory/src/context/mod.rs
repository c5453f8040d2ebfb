//! Context modes and projection policies (in progress).

use crate::plugin::MemoryConfig;
use keel_agent::plugin::{InstallContext, PluginError};
use keel_protocol::Seq;
use keel_session::DerivedMessage;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// A session's context mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ContextMode {
    /// The whole current surface (today's behaviour, byte for byte).
    #[default]
    Native,
    /// A projection policy chooses the history each request carries.
    Managed,
}

/// What a policy chooses from.
#[derive(Debug)]
pub struct PolicyInput<'a> {
    /// The current surface, in order.
    pub nodes: &'a [DerivedMessage],
    /// Seqs the host includes whatever the policy says (the current turn).
    pub required: &'a [Seq],
    /// Seqs the mode keeps (the task, the latest runtime context, summaries).
    pub pinned: &'a [Seq],
    /// The history budget in estimated tokens.
    pub budget_tokens: u64,
    /// The current human message (what `relevant` scores against).
    pub query: &'a str,
}

/// A projection policy: picks surface seqs for one request. The host enforces its
/// invariants on the result.
pub trait Policy: Send + Sync {
    /// The name `policy = "…"` selects.
    fn name(&self) -> &str;
    /// The projection's `revision`: the policy's name and parameters.
    fn revision(&self, input: &PolicyInput<'_>) -> String;
    /// The seqs to include.
    fn project(&self, input: &PolicyInput<'_>) -> Vec<Seq>;
}

/// The built-in policies.
pub fn builtin_policies() -> Vec<Arc<dyn Policy>> {
    Vec::new()
}

/// Install the context mode of `config`.
pub fn install(
    _ctx: &mut InstallContext,
    _config: &MemoryConfig,
    _policies: &[Arc<dyn Policy>],
) -> Result<(), PluginError> {
    Ok(())
}
