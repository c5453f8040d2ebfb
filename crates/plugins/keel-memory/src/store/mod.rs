//! The memory store: records and variables in one SQLite file under `$KEEL_HOME/memory/`, and
//! the tools over it.
//!
//! | piece | where |
//! |---|---|
//! | records, scopes, limits, revisions, time stamps | [`records`] |
//! | the SQLite file, CAS writes, audit log | [`sqlite`] |
//! | deterministic search over the token index, what the model sees | [`search`] |
//! | variables (`turn`, `session`, `project`, `agent`, `global`), patches | [`variables`] |
//! | the ten tools | [`tools`] |
//!
//! Design: `docs/memory.md` (`## Memory store`, `## Memory and variable tools`).

pub mod records;
pub mod search;
pub mod sqlite;
pub mod tools;
pub mod variables;

pub use records::{Kind, Record, Scope};
pub use search::Hit;
pub use sqlite::{Changes, Identity, MemoryStore, NewRecord, StoreError, default_path};
pub use tools::tools;
