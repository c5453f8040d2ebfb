//! The `keel` binary: command-line parsing, configuration, and the commands.
//!
//! Output policy: progress and diagnostics go to stderr, results (final answers, listings,
//! JSON) to stdout. Errors are reported with their whole cause chain and a non-zero exit code.

mod cli;
mod cmd;
mod config;
mod plugins;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    match cmd::dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            #[allow(clippy::print_stderr)]
            {
                eprintln!("keel: error: {e:#}");
            }
            ExitCode::from(2)
        }
    }
}
