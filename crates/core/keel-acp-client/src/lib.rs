//! keel as an [Agent Client Protocol] client: run an outside ACP agent command (`keel acp`,
//! Zed's `codex-acp` or `claude-code-acp`…) through keel's subprocess service and hold one
//! conversation with it, keel the client. Delegation's `acp` provider (keel-delegate) is built
//! on it; nothing here knows about delegation jobs, tools or their table.
//!
//! ```text
//! Conversation { command, cwd, prompt, grant, … } ─► client::run
//!   subprocess service ─ argv, cwd, scrubbed env, time limit, process group
//!   initialize ─► session/new {cwd} ─► session/prompt {prompt}
//!   session/update             ─► Account: log lines, the answer, plan reports
//!   session/request_permission ◄─ the authority grant (permission)
//!   Steer                      ─► session/cancel + session/prompt {guidance}
//!   cancel token               ─► session/cancel; the process is ended after a grace
//! ─► Ending (stop reason, cancelled, or a failure naming the command and the step)
//! ```
//!
//! Modules: [`client`] (the process and the conversation), [`permission`] (the authority grant
//! as answers to permission requests), [`account`] (updates → answer, log, reports),
//! [`lines`] (bounded line assembly and logs of a child's output, shared with keel's other
//! delegation providers).
//!
//! [Agent Client Protocol]: https://agentclientprotocol.com

#![deny(missing_docs)]

pub mod account;
pub mod client;
pub mod lines;
pub mod permission;

pub use account::{Account, Report};
pub use agent_client_protocol::v1::schema::StopReason;
pub use client::{Conversation, Ending, NotOpened, Steer, SteerOutcome, run};
pub use permission::Grant;
