//! Where front ends get their agents: one [`AgentSource`] for every front end.
//!
//! The terminal UI, the ACP server and the MCP server each need agents on new or resumed
//! sessions, built the way the binary builds every agent (configuration layers, flags, model),
//! plus a few things around them: the directory's sessions, prices, the workspace's trust.
//! The binary implements this trait once; each front end asks it for what it needs and turns
//! a [`SourceError`] into its own protocol's error (a JSON-RPC "resource not found", a tool
//! error, a transcript line).

use crate::factory::BuildOptions;
use crate::trust::{ProjectTrust, WorkspaceTrust};
use keel_agent::{Agent, ApprovalPolicy};
use keel_protocol::TimeMs;
use keel_tools::SandboxMode;
use std::path::{Path, PathBuf};

/// What a new or resumed agent runs under, beyond the source's own defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionSpec {
    /// The workspace the agent works in. `None`: the source's own ([`AgentSource::workspace`])
    /// for a new session; for a resumed one, the session's own workspace while it exists.
    pub cwd: Option<PathBuf>,
    /// A sandbox mode instead of the configured one.
    pub sandbox: Option<SandboxMode>,
    /// An approval policy instead of the configured one.
    pub approval: Option<ApprovalPolicy>,
    /// A model instead of the configured one.
    pub model: Option<String>,
    /// A reasoning effort instead of the configured one (or the one the session chose).
    pub effort: Option<String>,
}

impl SessionSpec {
    /// The defaults, in `cwd`.
    pub fn in_dir(cwd: impl Into<PathBuf>) -> Self {
        Self {
            cwd: Some(cwd.into()),
            ..Self::default()
        }
    }
}

/// Which session to resume.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionRef<'a> {
    /// A whole session id (no prefix, no path), as a protocol names it: anything else is
    /// [`SourceError::NotFound`].
    Id(&'a str),
    /// A session file the front end already resolved ([`AgentSource::resolve`]).
    Path(&'a Path),
}

/// Why a source could not do what a front end asked. The text is whole: it names the session,
/// the file or the setting and says what to do, ready for a person.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    /// No session matches what was asked for (ACP answers "resource not found"). The text
    /// names what was looked for and where; the front end adds how its users name a session.
    #[error("{0}")]
    NotFound(String),
    /// The agent could not be built, or the session exists but cannot be resumed (a corrupt
    /// log, a bad configuration), or the operation failed.
    #[error("{0}")]
    Failed(String),
    /// This source does not offer it (a front end without trust management, say).
    #[error("{0}")]
    Unsupported(String),
    /// The session is open for writing in another keel process (or another agent of this
    /// one): one process writes a session ([`keel_session::StoreError::Busy`]). The text names
    /// the session and the holder's pid.
    #[error("{0}")]
    Busy(String),
}

/// One session, for `/sessions` and pickers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionEntry {
    /// Its file.
    pub path: PathBuf,
    /// Its id.
    pub id: String,
    /// Its title (the model's `session/title`, else the first prompt).
    pub title: String,
    /// Last modified (ms since the epoch).
    pub modified: TimeMs,
    /// File size in bytes.
    pub bytes: u64,
}

/// Builds the agents of a front end, the way the binary builds every agent. Calls may block
/// (they read files and start plugins): async front ends make them on a blocking thread.
pub trait AgentSource: Send + Sync {
    /// An agent on a new session under `spec`, built with `options` (the front end's event
    /// feed, approver, hooks).
    fn create(&self, spec: &SessionSpec, options: BuildOptions) -> Result<Agent, SourceError>;

    /// An agent continuing `session` (cold resume with crash repair; the session keeps the
    /// modes set during it) under `spec`, built with `options`.
    fn resume(
        &self,
        session: SessionRef<'_>,
        spec: &SessionSpec,
        options: BuildOptions,
    ) -> Result<Agent, SourceError>;

    /// The workspace the source was made for (the command line's working directory).
    fn workspace(&self) -> &Path;

    /// Whether the model of the agents it builds (as configured, before a session picks
    /// another) reads images: ACP's `promptCapabilities.image`. Default: no.
    fn reads_images(&self) -> bool {
        false
    }

    /// The session file a `/resume` argument names in `cwd` (`None`: the latest there).
    fn resolve(&self, cwd: &Path, query: Option<&str>) -> Result<PathBuf, SourceError>;

    /// `cwd`'s sessions, newest first.
    fn sessions(&self, cwd: &Path) -> Vec<SessionEntry>;

    /// `cwd`'s sessions that mention every word of `query` (`keel sessions search`), best
    /// first, each with its best snippet (the words in `[…]`). Default: not searchable here.
    fn search_sessions(
        &self,
        _cwd: &Path,
        _query: &str,
    ) -> Result<Vec<(PathBuf, String)>, SourceError> {
        Err(SourceError::Unsupported(
            "sessions cannot be searched here".to_owned(),
        ))
    }

    /// The workspace of `cwd`'s trust decision and what its files hold that the decision
    /// governs, as the next agent built there would see them.
    fn trust(&self, _cwd: &Path) -> Result<WorkspaceTrust, SourceError> {
        Err(SourceError::Unsupported(
            "workspace trust is not managed here".to_owned(),
        ))
    }

    /// Record `level` for the workspace of `cwd` in the user's configuration: agents built from
    /// now on follow it (a one-run override such as `--trust-project` no longer applies).
    /// Returns the workspace root the decision was recorded for and the file it went to.
    fn record_trust(
        &self,
        _cwd: &Path,
        _level: ProjectTrust,
    ) -> Result<(PathBuf, PathBuf), SourceError> {
        Err(SourceError::Unsupported(
            "workspace trust cannot be changed from this client".to_owned(),
        ))
    }

    /// The plugin rows and MCP servers of `cwd`'s workspace as its next agent would get them
    /// ([`crate::switches`]).
    fn extensions(&self, _cwd: &Path) -> Result<crate::switches::Extensions, SourceError> {
        Err(SourceError::Unsupported(
            "plugins are not listed here".to_owned(),
        ))
    }

    /// Turn the plugin row or MCP server `name` on or off in the workspace of `cwd`, in the
    /// user's configuration: agents built there from now on follow it. Returns the workspace
    /// root and the file it went to.
    fn switch(
        &self,
        _cwd: &Path,
        _kind: crate::switches::SwitchKind,
        _name: &str,
        _enabled: bool,
    ) -> Result<(PathBuf, PathBuf), SourceError> {
        Err(SourceError::Unsupported(
            "plugins cannot be switched from this client".to_owned(),
        ))
    }

    /// The model endpoint agents are built for (its provider, URL and the environment variable
    /// of its key, never the key), when the source can say.
    fn endpoint(&self) -> Result<crate::Endpoint, SourceError> {
        Err(SourceError::Unsupported(
            "the endpoint is not described here".to_owned(),
        ))
    }

    /// The models a session can be switched to (an editor's model selector): the configured
    /// one first, then the others keel knows. Default: none (no selector is offered).
    fn models(&self) -> Vec<String> {
        Vec::new()
    }

    /// A new session seeded with `session`'s log (`keel fork`), in the parent's workspace: up
    /// to just before event `at` (as `keel fork --at seq:AT`: the start of the turn holding it),
    /// or after its last completed turn when `None`. The new session's id and file. A
    /// [`SessionRef::Id`] is looked up from `cwd`.
    fn fork(
        &self,
        _session: SessionRef<'_>,
        _cwd: &Path,
        _at: Option<u64>,
    ) -> Result<(String, PathBuf), SourceError> {
        Err(SourceError::Unsupported(
            "sessions cannot be forked here".to_owned(),
        ))
    }

    /// What `model`'s tokens cost, when known.
    fn price(&self, _model: &str) -> Option<keel_llm::Price> {
        None
    }
}
