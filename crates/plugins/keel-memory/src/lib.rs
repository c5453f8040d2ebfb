//! keel-memory: context projection and memory.
//!
//! | piece | where |
//! |---|---|
//! | the shared lexical scoring (memory search, `history_search`, lore, `relevant`) | [`lexical`] |
//! | context modes (`native`, `managed`), projection policies (`recent`, `relevant`, plugins) | [`context`] |
//! | the memory store (records, variables; SQLite under `$KEEL_HOME/memory/`) and its tools | [`store`] |
//! | `history_search` over the durable log of this session and its ancestors | [`history`] |
//! | the role-play preset (character cards, lorebooks) | [`roleplay`] |
//! | framing of stored text returned to the model as data | [`framing`] |
//! | the `memory` plugin row | [`plugin`] |
//!
//! Design: `docs/memory.md`, `docs/roleplay.md`.
#![deny(missing_docs)]

pub mod context;
pub mod framing;
pub mod history;
pub mod lexical;
pub mod plugin;
pub mod roleplay;
pub mod store;

pub use plugin::{ID, MemoryConfig, MemoryPlugin};
pub use roleplay::{RoleplayConfig, RoleplayPlugin};
