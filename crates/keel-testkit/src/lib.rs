//! Test support for keel: a loopback mock chat-completions server with fault modes, and agent
//! fixtures built through `keel-host`'s factory ([`agent`]).
//!
//! [`MockServer`] serves a keel-llm [`keel_llm::Script`] over real HTTP on `127.0.0.1`, for
//! tests (`MockServer::start(script).await`) and as the `keel-mock-server` binary
//! (`keel-mock-server --script FILE [--port N] [--record FILE]`, which prints its base URL as
//! the first line of stdout and serves until killed).
#![deny(missing_docs)]

pub mod agent;
pub mod mock_server;

pub use mock_server::{MockOptions, MockServer};
