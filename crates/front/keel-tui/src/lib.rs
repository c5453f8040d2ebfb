//! keel's interactive terminal front end (see `docs/tui.md`).
#![deny(missing_docs)]

pub mod app;
pub use keel_host::commands;
pub mod canvas;
pub mod cells;
pub mod input;
pub mod markdown;
pub mod slash;
pub mod trust;
pub mod view;

pub use app::{
    Options, Remote, ServerLink, StreamError, StreamMessage, StreamSink, Target, attach, run,
};
pub use keel_host::{AgentSource, SessionEntry};
pub use trust::WorkspaceTrust;
