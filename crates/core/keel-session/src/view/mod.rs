//! Read-only views of a session for people and tools, and the one set of text rules they share:
//! - [`cells`]: the conversation as a person sees it (messages, reasoning, tool calls paired
//!   with their results and approvals, plans, boundaries, notices), built one event at a time,
//!   live or replayed; keel-tui draws it, keel-acp sends its changes as `session/update`s;
//! - [`transcript`]: the audit view (turns → steps → items, every event as appended, what
//!   compaction replaced marked); `keel sessions show`/`export` and keel-viewer's HTML page
//!   render it;
//! - [`progress`]: the tree of a call that runs children (workflow, ralph), shown under it;
//! - [`check`]: the check report (load, validate, plan crash repair, without writing);
//! - [`event_summary`]: one line per event;
//! - [`text`]: the character-safe shortening every view and renderer uses (one `one_line`,
//!   kept in `keel_protocol::text` and re-exported).
//!
//! Data flow: a view is computed from events (a [`crate::Session`], a live feed, or for `check`
//! a file loaded through [`crate::Store::load`]) into plain data; nothing here prints, draws or
//! writes. Front ends render the data as terminal cells, ACP updates, text, Markdown, HTML or
//! JSON.

pub mod cells;
pub mod check;
pub mod progress;
mod summary;
pub mod text;
pub mod transcript;

pub use check::{
    AfterRepair, CheckReport, LoadedFacts, PlannedEvent, Status, TornFacts, check_file,
};
pub use summary::event_summary;
pub use transcript::{Transcript, call_names};
