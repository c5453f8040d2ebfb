//! keel as an [Agent Client Protocol](https://agentclientprotocol.com) agent over stdio, for
//! editors (Zed, JetBrains, Neovim…) that drive coding agents through ACP.
//!
//! A front end like the terminal UI: it never builds agents itself. The binary hands it an
//! [`AgentSource`] (the host assembly: configuration, flags, model) and [`serve_stdio`] answers
//! the client:
//!
//! - `initialize`: protocol v1, `loadSession`, text and embedded-text prompts only, MCP servers
//!   over stdio and HTTP; the client's file-system capability is remembered ([`files`]);
//! - `session/new`: an agent on a new keel session in the request's `cwd`, with the request's
//!   MCP servers added to the configured ones;
//! - `session/load`: any keel session by id, its history replayed as `session/update`s, in the
//!   mode it kept (plan mode, the read-only sandbox and automatic approvals set during it are
//!   the session's: [`keel_agent::session_modes`]);
//! - `session/prompt`: one turn; its session events stream as updates ([`map`]) and the
//!   answer is the stop reason;
//! - `session/cancel`: the loop's cancellation; the prompt answers `cancelled`;
//! - `session/set_mode`: `default`, `read-only`, `auto`, `plan` (plan mode, the sandbox's
//!   narrowing and the approval policy together), logged and on disk before the answer;
//! - `available_commands_update`: the plugins' slash commands, expanded when a prompt names one;
//! - approvals keel asks become `session/request_permission` ([`approve`]).
//!
//! When the client goes away (stdin closed), running turns are cancelled and awaited so that
//! every session log ends consistent, then [`serve_stdio`] returns.

#![deny(missing_docs)]

pub mod approve;
pub mod files;
pub mod map;
mod server;

pub use server::{serve, serve_stdio};

use keel_agent::Agent;
use keel_host::BuildOptions;
use std::path::Path;

/// Why a session could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// No keel session has this id: the client named a session keel does not have (answered
    /// as a "resource not found" JSON-RPC error).
    #[error("{0}")]
    NotFound(String),
    /// The session exists but cannot be resumed (a corrupt log, a bad configuration): the
    /// message says what and where (answered as an "invalid params" JSON-RPC error).
    #[error("{0}")]
    Unusable(String),
}

/// Builds the agents of ACP sessions, the way the binary builds every agent (configuration
/// layers, flags, model). Calls may block (they read files and start plugins): they are made
/// on a blocking thread.
pub trait AgentSource: Send + Sync + 'static {
    /// An agent on a new keel session working in `cwd`, built with `options` (the ACP event
    /// feed and approver). `Err` is a message a person can act on.
    fn create(&self, cwd: &Path, options: BuildOptions) -> Result<Agent, String>;

    /// An agent continuing the keel session `id` (cold resume with crash repair), built with
    /// `options`. `cwd` is the client's working directory for it.
    fn load(&self, id: &str, cwd: &Path, options: BuildOptions) -> Result<Agent, LoadError>;

    /// The line a session in `cwd` shows when the workspace is not trusted and holds something
    /// keel left alone (hooks, servers, widening keys; docs/trust.md). `None`: nothing to say.
    fn trust_notice(&self, _cwd: &Path) -> Option<String> {
        None
    }

    /// `/trust ARGS` typed in a session working in `cwd`: no argument shows the workspace's
    /// decision, `yes` records it as trusted, `no` as untrusted. The answer (or the error) is
    /// the agent's message.
    fn trust(&self, _cwd: &Path, _args: &str) -> Result<String, String> {
        Err("workspace trust cannot be changed from this client".to_owned())
    }
}
