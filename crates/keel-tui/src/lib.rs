//! keel's interactive terminal front end (see `docs/tui.md`).

pub mod commands;
pub mod markdown;
