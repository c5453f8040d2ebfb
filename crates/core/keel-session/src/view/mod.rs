//! Read-only views of a session for people and tools: the [`transcript`] (turns → steps →
//! items, every event as appended) and the [`check`] report (load, validate, plan crash repair,
//! without writing), plus the one-line [`event_summary`] and the character-safe [`text`]
//! helpers both use.
//!
//! Data flow: a view is computed from a [`crate::Session`] (or, for `check`, from a file loaded
//! through [`crate::Store::load`]) into plain serialisable data; nothing here prints or writes.
//! Front ends (keel-cli's `keel sessions`) render the data as text, Markdown or JSON.

pub mod check;
mod summary;
pub mod text;
pub mod transcript;

pub use check::{
    AfterRepair, CheckReport, LoadedFacts, PlannedEvent, Status, TornFacts, check_file,
};
pub use summary::event_summary;
pub use transcript::{Transcript, call_names};
