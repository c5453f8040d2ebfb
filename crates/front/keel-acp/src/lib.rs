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
//! - `session/resume`: `session/load` without the replay; `session/list`: keel's sessions of a
//!   directory, newest first; `session/close`; the unstable `session/fork` (`keel fork`);
//! - `session/set_config_option`: the `mode` and `model` selectors (a model chosen is logged
//!   and kept by the session, its agent rebuilt on it);
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
pub mod ask;
pub mod files;
pub mod map;
mod server;

pub use server::{serve, serve_stdio};

pub use keel_host::{AgentSource, SessionRef, SessionSpec, SourceError};
