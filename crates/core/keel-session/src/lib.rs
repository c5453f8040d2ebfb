//! keel's session log: the in-memory [`Session`] and its persistence ([`store`]).
//!
//! A session is an append-only sequence of typed events (dsh log v0 shapes, see
//! `keel-protocol`). [`Session::append`] validates each event (contiguous seq, plain JSON,
//! surface rules) and folds it into the [`Surface`]; [`Session::derive_messages`] maps the
//! surface to model messages incrementally; [`Session::check_invariants`] reports broken
//! turn/step brackets; [`Session::fork`] seeds a child; [`Session::plan_repair`] /
//! [`Session::repair`] close what a crash left open. [`store::Store`] places sessions on disk,
//! [`store::SessionWriter`] appends batches durably, [`store::load`] reads keel and dsh files
//! (plain and zstd, packed chunk rows included). [`PersistentSession`] bundles a session with
//! its writer. [`view`] computes read-only views for front ends (the transcript, the health
//! check). [`synth`] generates realistic synthetic logs for benchmarks.
#![deny(missing_docs)]

mod error;
mod fork;
mod invariants;
mod persistent;
mod record;
mod repair;
mod session;
pub mod store;
mod surface;
pub mod synth;
pub mod view;

pub use error::{AppendError, ForkError, RepairError};
pub use invariants::{InvariantViolation, TurnState};
pub use persistent::{PersistentError, PersistentSession};
pub use repair::RepairReport;
pub use session::{Session, new_session_id, now_ms};
pub use store::{
    Format, LoadError, LoadReport, Loaded, SUMMARY_FILE, SessionLock, SessionSummary,
    SessionWriter, Store, StoreError, TornTail, WriterOptions,
};
pub use surface::{DerivedMessage, Surface};
