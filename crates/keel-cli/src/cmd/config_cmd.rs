//! `keel config dump`.

use super::Ctx;
use crate::cli::ConfigCommand;
use anyhow::Result;
use std::io::Write;
use std::process::ExitCode;

/// Run a `config` subcommand.
pub fn run(ctx: &Ctx, cmd: ConfigCommand) -> Result<ExitCode> {
    match cmd {
        ConfigCommand::Dump => {
            let loaded = ctx.config()?;
            let mut out = std::io::stdout().lock();
            out.write_all(crate::config::dump(&loaded).as_bytes())?;
            Ok(ExitCode::SUCCESS)
        }
    }
}
