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
            resume_flags: resume_flags(&ctx.common),
        },
    );
    // Opened and left without a prompt: keep no empty session for `keel resume` to offer.
    source.discard_unused();
    outcome.map_err(|e| anyhow!(e))?;
    Ok(ExitCode::SUCCESS)
}

/// The flags a later `keel resume ID` needs to reach the same model as this UI, as shell words:
/// those the session's log does not remember (it keeps the provider, model, `--base-url` and
/// `--api`, never a key or where one is read from).
fn resume_flags(common: &crate::cli::Common) -> Vec<String> {
    let mut out = Vec::new();
    let mut flag = |name: &str, value: Option<String>| {
        if let Some(v) = value {
            out.push(format!("{name} {}", shell_word(&v)));
        }
    };
    flag("--api-key-env", common.api_key_env.clone());
    flag("--profile", common.profile.clone());
    flag(
        "--config",
        common
            .config_file
            .as_ref()
            .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.clone()))
            .map(|p| p.display().to_string()),
    );
    out
}

/// `s` as one shell word: as it is when it needs no quoting, else in single quotes.
fn shell_word(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c));
    if plain {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resume_flags_name_the_key_variable_and_quote_what_needs_it() {
        let common = crate::cli::Common {
            api_key_env: Some("MY_KEY".into()),
            config_file: Some(PathBuf::from("/tmp/my conf.toml")),
            ..Default::default()
        };
        assert_eq!(
            resume_flags(&common),
            ["--api-key-env MY_KEY", "--config '/tmp/my conf.toml'"]
        );
        assert!(resume_flags(&crate::cli::Common::default()).is_empty());
        assert_eq!(shell_word("it's"), r"'it'\''s'");
    }
}
