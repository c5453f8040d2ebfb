//! `keel batch TASKS.jsonl`: many tasks as `keel run` sessions, N at a time, each in a
//! workspace of its own (docs/batch.md). The `keel` binary parses the arguments, picks the
//! engine and prints; everything else is here.
//!
//! - [`Batch`] is the engine-neutral scheduler: [`Batch::open`] reads the task file
//!   ([`tasks`]) and `state.json`; [`Batch::run`] makes each task's workspace, decides per
//!   task whether to start a session, resume one (crash repair, then a "continue" turn) or
//!   only score one that already ended, and writes results.jsonl from the sessions' logs.
//!   What it has to say goes to an [`Observer`].
//! - An [`Engine`] runs the sessions: [`LocalEngine`], child processes of this one, or
//!   [`RayEngine`], jobs on a Ray cluster through its Jobs REST API, whose node side is
//!   [`job`] (`keel batch-job`). [`pack`] is the zip format packages travel in.
//!
//! Errors are typed per concern ([`BatchError`], [`EngineError`], [`ray::RunError`], …); each
//! message names the task, file, session or cluster involved and ends with its cause, so the
//! causes are part of the messages rather than `source()`s (keel prints an error with its
//! whole chain, which would repeat them).
#![deny(missing_docs)]

mod batch;
pub mod engine;
pub mod job;
pub mod local;
pub mod pack;
pub mod ray;
mod score;
mod signals;
mod state;
pub mod tasks;
mod workspace;

pub use batch::{Batch, BatchError, Counters, Observer, Outcome, PriceOf, Pricing};
pub use engine::{Attempt, CheckOutcome, Engine, EngineError, Msg, Reattached};
pub use local::LocalEngine;
pub use ray::{RAY_CONCURRENCY, RayEngine, RayError, RayOptions};
pub use state::StateError;
