//! `keel` (and `keel "PROMPT"`, `keel resume` without a prompt) in a terminal: the interactive
//! UI of `keel-tui`, with agents built here from the configuration and flags like every
//! other command's.

use super::Ctx;
use super::source::{Say, Source};
use anyhow::{Result, anyhow};
use keel_host::ModelSource;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Whether both ends are a terminal (a person is there).
pub fn is_interactive() -> bool {
    std::io::stdin().is_terminal() && std::io::stdout().is_terminal()
}

/// How the UI starts.
#[derive(Debug, Default)]
pub struct Start<'a> {
    /// Sent at once.
    pub prompt: Option<String>,
    /// Continue this session.
    pub resume: Option<&'a Path>,
    /// Ask which session first.
    pub pick: bool,
    /// Plan mode or a permission mode from the start.
    pub mode: crate::cli::ModeArgs,
    /// The alternate screen instead of the terminal's scrollback.
    pub alt_screen: bool,
    /// A model script instead of the configured model.
    pub script: Option<PathBuf>,
}

/// Open the UI: a new session (with `prompt` sent at once), `resume`, or the picker.
pub fn interactive(ctx: &Ctx, start: Start<'_>) -> Result<ExitCode> {
    let Start {
        prompt,
        resume,
        pick,
        mode,
        alt_screen,
        script,
    } = start;
    let plan = mode.plan_mode();
    let mut flags = ctx.flags()?;
    // `--permission-mode`: its sandbox and approval apply to every agent of the UI.
    super::run::apply_permission_mode(&mut flags, &mode);
    let model = match script {
        Some(p) => ModelSource::Script(p),
        None => ModelSource::Configured,
    };
    let source = Source::new(ctx, flags, model, Say::Nothing);
    let outcome = keel_tui::run(
        &source,
        keel_tui::Options {
            prompt,
            resume: resume.map(Path::to_path_buf),
            plan,
            pick,
            alternate_screen: alt_screen,
        },
    );
    // Opened and left without a prompt: keep no empty session for `keel resume` to offer.
    source.discard_unused();
    outcome.map_err(|e| anyhow!(e))?;
    Ok(ExitCode::SUCCESS)
}
