//! Test support for keel: a loopback mock chat-completions server with fault modes, agent
//! fixtures built through `keel-host`'s factory ([`agent`]), and recording test doubles for the
//! tool pipeline ([`recording`]).
//!
//! [`MockServer`] serves a keel-llm [`keel_llm::Script`] over real HTTP on `127.0.0.1`, for
//! tests (`MockServer::start(script).await`) and as the `keel-mock-server` binary
//! (`keel-mock-server --script FILE [--port N] [--record FILE]`, which prints its base URL as
//! the first line of stdout and serves until killed).
//!
//! [`recording`] holds the pipeline doubles: [`RecordingHost`] (a `ToolCaller` logging every
//! call), [`RecordingHooks`] (a hook at every seam, logging and deciding as configured) and
//! [`PassThrough`] (hooks that change and record nothing, for benchmarks), all writing into one
//! shared [`Log`]. keel-testkit is a dev-dependency only: keel-tools' own integration tests and
//! benches use it too (Cargo allows that cycle for tests and benches, not for unit tests).
//!
//! [`consult`] is a fake `consult` delegation CLI: the `fake-consult` executable, driven only by
//! `FAKE_CONSULT_*` environment variables ([`consult::FakeConsult`] builds them), found with
//! [`consult::fake_consult_path`].
#![deny(missing_docs)]

pub mod agent;
pub mod consult;
pub mod mock_server;
pub mod recording;

pub use mock_server::{Headers, MockOptions, MockServer};
pub use recording::{Log, PassThrough, RecordingHooks, RecordingHost};
