//! Command implementations and what they share ([`Ctx`]).

mod config_cmd;
mod demo;
mod progress;
mod provenance;
mod run;
mod sessions;

use crate::cli::{Cli, Command, Common};
use anyhow::{Context, Result};
use keel_session::Store;
use std::path::PathBuf;
use std::process::ExitCode;

/// What every command may need: flags, `$KEEL_HOME`, the working directory and the store.
#[derive(Debug)]
pub struct Ctx {
    /// Global flags.
    pub common: Common,
    /// `$KEEL_HOME` (default `~/.keel`).
    pub home: PathBuf,
    /// Working directory (canonical).
    pub cwd: PathBuf,
    /// The session store under `home`.
    pub store: Store,
}

impl Ctx {
    fn new(common: Common) -> Result<Ctx> {
        let home = keel_home();
        let cwd = match &common.cwd {
            Some(dir) => dir.clone(),
            None => std::env::current_dir().context("cannot read the current directory")?,
        };
        let cwd = cwd
            .canonicalize()
            .with_context(|| format!("working directory {} does not exist", cwd.display()))?;
        let store = Store::new(home.clone());
        Ok(Ctx {
            common,
            home,
            cwd,
            store,
        })
    }

    /// Load the layered configuration.
    pub fn config(&self) -> Result<crate::config::Loaded> {
        crate::config::load(&crate::config::Sources {
            home: self.home.clone(),
            project: self.cwd.clone(),
            profile: self.common.profile.clone(),
            config_file: self.common.config_file.clone(),
            overrides: self.common.overrides.clone(),
        })
    }
}

/// `$KEEL_HOME`, or `~/.keel`.
pub fn keel_home() -> PathBuf {
    match std::env::var_os("KEEL_HOME") {
        Some(h) if !h.is_empty() => PathBuf::from(h),
        _ => std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("."))
            .join(".keel"),
    }
}

/// Run the parsed command line.
pub fn dispatch(cli: Cli) -> Result<ExitCode> {
    let ctx = Ctx::new(cli.common)?;
    match cli.command {
        Command::Run(args) => run::run(&ctx, args),
        Command::Demo(args) => run::demo(&ctx, args),
        Command::Resume(args) => run::resume(&ctx, args),
        Command::Compact(args) => run::compact(&ctx, args),
        Command::Sessions(cmd) => sessions::run(&ctx, cmd),
        Command::Config(cmd) => config_cmd::run(&ctx, cmd),
        Command::Trace(args) => provenance::trace_cmd(&ctx, args),
        Command::Provenance(cmd) => provenance::run(&ctx, cmd),
    }
}
