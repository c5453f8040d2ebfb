//! Mistyped subcommands. `keel WORD` sends WORD as a prompt, so `keel sesions` would cost a
//! model turn: a bare one-word prompt that is a near miss of a subcommand's name is refused
//! the way clap refuses an unknown subcommand ("unrecognized subcommand 'sesions'", "tip: a
//! similar subcommand exists: 'sessions'", exit 2), before any front end starts. And `keel runn
//! "hi"`, which clap alone reports as "unexpected argument 'hi'", names the subcommand meant.
//!
//! A near miss ([`near_misses`]): one word of letters, digits and `-`, starting with the
//! subcommand's first letter, within an edit distance (optimal string alignment: a swap of
//! two neighbours counts one) of 1 from a name of up to 6 letters or 2 from a longer one, or
//! a prefix of at least 4 letters of a name. So `sesions`, `sesion`, `runn`, `resmue`,
//! `confg`, `trsut`, `sess` are refused, and `refactor`, `fix`, `test`, `hello`, `continue`
//! are sent. `keel run WORD`, `keel -- WORD` and `keel --continue WORD` always send it.

use super::Cli;
use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{CommandFactory, Parser};
use std::ffi::OsString;

/// Parse `args` (the program name first) as [`Cli`], refusing subcommand typos.
pub(super) fn try_parse(args: &[OsString]) -> Result<Cli, clap::Error> {
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) if e.kind() == ErrorKind::UnknownArgument => {
            return Err(stray_subcommand(args).unwrap_or(e));
        }
        Err(e) => return Err(e),
    };
    let separated = args.iter().skip(1).any(|a| a == "--");
    if let (None, false, false, Some(word)) =
        (&cli.command, cli.continue_latest, separated, &cli.prompt)
    {
        let mut cmd = Cli::command();
        let similar = near_misses(&cmd, word);
        if !similar.is_empty() {
            return Err(typo_error(&mut cmd, word, similar, true));
        }
    }
    Ok(cli)
}

/// `keel runn "hi"`: clap took `runn` for the prompt and stopped at `hi`. When the prompt
/// position, parsed as taking every word, starts with a near miss followed by more words,
/// the error names the subcommand meant; otherwise `None` (clap's own error stands).
fn stray_subcommand(args: &[OsString]) -> Option<clap::Error> {
    let mut cmd = Cli::command().mut_arg("prompt", |a| a.num_args(1..));
    let matches = cmd.try_get_matches_from_mut(args).ok()?;
    if matches.subcommand().is_some() {
        return None;
    }
    let words: Vec<&String> = matches.get_many::<String>("prompt")?.collect();
    let [first, _, ..] = words.as_slice() else {
        return None;
    };
    let similar = near_misses(&cmd, first);
    (!similar.is_empty()).then(|| typo_error(&mut Cli::command(), first, similar, false))
}

/// clap's "unrecognized subcommand" error for `word`, suggesting `similar`; `as_prompt` adds
/// how to send the word as a prompt after all.
fn typo_error(
    cmd: &mut clap::Command,
    word: &str,
    similar: Vec<String>,
    as_prompt: bool,
) -> clap::Error {
    let usage = cmd.render_usage();
    let mut err = clap::Error::new(ErrorKind::InvalidSubcommand).with_cmd(cmd);
    err.insert(
        ContextKind::InvalidSubcommand,
        ContextValue::String(word.to_owned()),
    );
    err.insert(
        ContextKind::SuggestedSubcommand,
        ContextValue::Strings(similar),
    );
    if as_prompt {
        err.insert(
            ContextKind::Suggested,
            ContextValue::StyledStrs(vec![
                format!("to send '{word}' as a prompt, use 'keel run {word}' or 'keel -- {word}'")
                    .into(),
            ]),
        );
    }
    err.insert(ContextKind::Usage, ContextValue::StyledStr(usage));
    err
}

/// The subcommand names and visible aliases `word` is a near miss of (see the module's
/// comment), closest first; empty when it is none.
pub(super) fn near_misses(cmd: &clap::Command, word: &str) -> Vec<String> {
    let word = word.to_ascii_lowercase();
    if word.len() < 2 || !word.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        return Vec::new();
    }
    let names = cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .flat_map(|s| std::iter::once(s.get_name()).chain(s.get_visible_aliases()))
        .chain(["help"]);
    let mut found: Vec<(usize, &str)> = names
        .filter_map(|name| Some((distance(&word, name)?, name)))
        .collect();
    found.sort();
    let mut out: Vec<String> = Vec::new();
    for (_, name) in found {
        if !out.iter().any(|n| n == name) {
            out.push(name.to_owned());
        }
    }
    out
}

/// How far `word` is from `name` when it is a near miss of it, else `None`.
fn distance(word: &str, name: &str) -> Option<usize> {
    if word.chars().next() != name.chars().next() {
        return None;
    }
    let limit = if name.len() <= 6 { 1 } else { 2 };
    let d = strsim::osa_distance(word, name);
    if d <= limit {
        Some(d)
    } else if word.len() >= 4 && name.starts_with(word) {
        Some(limit + 1)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn misses(word: &str) -> Vec<String> {
        near_misses(&Cli::command(), word)
    }

    #[test]
    fn typos_of_subcommands_are_near_misses() {
        for (typo, meant) in [
            ("sesions", "sessions"),
            ("sesion", "sessions"),
            ("Sessions", "sessions"),
            ("runn", "run"),
            ("resmue", "resume"),
            ("confg", "config"),
            ("trsut", "trust"),
            ("sess", "sessions"),
            ("exce", "exec"),
            ("hlep", "help"),
            ("mcp-sever", "mcp-server"),
        ] {
            let found = misses(typo);
            assert_eq!(
                found.first().map(String::as_str),
                Some(meant),
                "{typo}: {found:?}"
            );
        }
    }

    #[test]
    fn one_word_prompts_are_not() {
        for word in [
            "refactor",
            "fix",
            "test",
            "tests",
            "hello",
            "continue",
            "explain",
            "what",
            "work",
            "summarize",
            "hi",
            "go",
            "lint",
            "logs",
            "search",
            "review?",
        ] {
            assert_eq!(misses(word), Vec::<String>::new(), "{word}");
        }
    }

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        let args: Vec<OsString> = std::iter::once("keel")
            .chain(args.iter().copied())
            .map(OsString::from)
            .collect();
        try_parse(&args)
    }

    #[test]
    fn only_the_bare_form_is_checked() {
        let err = parse(&["sesions"])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("unrecognized subcommand 'sesions'"), "{err}");
        assert!(
            err.contains("a similar subcommand exists: 'sessions'"),
            "{err}"
        );
        assert!(err.contains("keel run sesions"), "{err}");
        assert!(parse(&["run", "sesions"]).is_ok());
        assert!(parse(&["--", "sesions"]).is_ok());
        assert!(parse(&["--continue", "sesions"]).is_ok());
        assert!(parse(&["refactor"]).is_ok());
        let err = parse(&["runn", "hi"])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("unrecognized subcommand 'runn'"), "{err}");
        assert!(err.contains("a similar subcommand exists: 'run'"), "{err}");
        let err = parse(&["fix", "it"])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("unexpected argument 'it'"), "{err}");
    }
}
