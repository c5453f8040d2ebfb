//! `keel sessions list|show|check|export|import`.

use super::Ctx;
use crate::cli::SessionsCommand;
use anyhow::{Result, bail};
use std::process::ExitCode;

/// Run a `sessions` subcommand.
pub fn run(_ctx: &Ctx, cmd: SessionsCommand) -> Result<ExitCode> {
    bail!("not implemented yet: {cmd:?}")
}
