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
            let host = ctx.host()?;
            let mut out = std::io::stdout().lock();
            out.write_all(keel_host::config::dump(host.config()).as_bytes())?;
            let endpoint = match host.endpoint(&ctx.flags()?) {
                Ok(endpoint) => endpoint.dump(|var| std::env::var_os(var).is_some()),
                Err(e) => format!("# endpoint: {e}\n"),
            };
            out.write_all(endpoint.as_bytes())?;
            Ok(ExitCode::SUCCESS)
        }
    }
}
