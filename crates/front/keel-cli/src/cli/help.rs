//! Help that is easy to scan. `keel -h` is a one-screen overview ([`overview`]): how to start,
//! the commands grouped by purpose, the flags most runs need, and `keel --help` for every flag.
//! The commands are clap's own (names and visible aliases), so a new one shows there even
//! before [`GROUPS`] places it (under "Other"). `keel --help` is clap's full help.
//!
//! The commands that run no agent ([`NO_AGENT`]: mcp, config, plugin, sessions… and all their
//! subcommands) leave the agent flags of [`Common`] (--model, --sandbox, --provenance…) out of
//! their help and point to `keel --help` instead; they keep [`KEPT`], the flags that say where
//! the workspace and the configuration are. The flags are hidden, not removed: every command
//! still accepts them.
//!
//! All of this happens only once clap's parse has ended in help (an error of kind
//! `DisplayHelp…`): a normal start-up builds no second command.

use super::{Cli, Common};
use clap::error::ErrorKind;
use clap::{Args, CommandFactory};
use std::ffi::OsString;
use std::io::Write;

/// The commands that run no agent: their help (and that of their subcommands) leaves out the
/// agent flags of [`Common`].
const NO_AGENT: &[&str] = &[
    "sessions",
    "rewind",
    "fork",
    "trace",
    "provenance",
    "continuity",
    "cards",
    "attach",
    "config",
    "trust",
    "login",
    "logout",
    "mcp",
    "plugin",
];

/// The global flags (ids) of [`Common`] that the commands of [`NO_AGENT`] still show: where the
/// workspace and the configuration are.
const KEPT: &[&str] = &["cwd", "config_file", "overrides", "profile"];

/// What the commands of [`NO_AGENT`] say in place of the agent flags.
const AGENT_FLAGS_NOTE: &str =
    "The agent flags (--model, --base-url, --sandbox, --approval, --provenance…): keel --help";

/// The overview's command groups: a purpose and its commands, one line each.
const GROUPS: &[(&str, &[&str])] = &[
    (
        "Run an agent",
        &["run", "resume", "demo", "review", "compact", "batch"],
    ),
    (
        "Sessions",
        &[
            "sessions",
            "rewind",
            "fork",
            "trace",
            "provenance",
            "continuity",
        ],
    ),
    ("Serve", &["serve", "web", "attach", "acp", "mcp-server"]),
    ("Role-play", &["chat", "cards"]),
    (
        "Set up",
        &["config", "login", "logout", "trust", "mcp", "plugin"],
    ),
];

/// The common ways to start, and what each does.
const START: &[(&str, &str)] = &[
    ("keel", "the interactive UI here (in a terminal)"),
    (
        "keel \"PROMPT\"",
        "... with a first prompt (no terminal: keel run)",
    ),
    (
        "keel run \"PROMPT\"",
        "one task headless; the answer on stdout",
    ),
    (
        "keel resume --last [PROMPT]",
        "the latest session here (or keel --continue)",
    ),
    ("keel demo", "a scripted agent at work: no key, no network"),
];

/// The flags most runs need (global: before or after the command).
const FLAGS: &[(&str, &str)] = &[
    ("--model NAME", "the model, e.g. deepseek-v4-flash"),
    ("--base-url URL", "an OpenAI-compatible server of your own"),
    (
        "--sandbox MODE",
        "read-only, workspace-write (default), full-access",
    ),
    (
        "--approval ask|deny|allow",
        "when an action needs approval (default: ask)",
    ),
    ("--cwd DIR", "the workspace (default: this directory)"),
    (
        "-c KEY=VALUE",
        "one configuration key, e.g. -c agent.max_steps=50",
    ),
];

/// Exit on a parse error: help as clap prints it, except that `keel -h` prints the [`overview`]
/// and the commands of [`NO_AGENT`] leave the agent flags out; any other error as clap reports
/// it.
pub(super) fn exit(args: &[OsString], err: clap::Error) -> ! {
    if matches!(
        err.kind(),
        ErrorKind::DisplayHelp | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        if asks_overview(args) {
            let mut out = std::io::stdout().lock();
            // A closed stdout (`keel -h | head -1`) is not an error of keel's.
            let _ = out
                .write_all(overview().as_bytes())
                .and_then(|()| out.flush());
            std::process::exit(0);
        }
        if let Err(help) = command().try_get_matches_from_mut(args)
            && help.kind() == err.kind()
        {
            help.exit();
        }
    }
    err.exit()
}

/// Whether `args` ask for the top level's short help: a `-h` (before any `--`) with no command
/// before it (`keel -h`, `keel --model M -h`; not `keel run -h`).
fn asks_overview(args: &[OsString]) -> bool {
    let Some(at) = args
        .iter()
        .skip(1)
        .position(|a| a == "-h" || a == "--")
        .map(|i| i + 1)
    else {
        return false;
    };
    let (Some(flag), Some(before)) = (args.get(at), args.get(..at)) else {
        return false;
    };
    flag == "-h"
        && Cli::command()
            .try_get_matches_from(before)
            .is_ok_and(|m| m.subcommand().is_none())
}

/// `keel -h`: what to type first, the commands by purpose, the flags most runs need.
pub(super) fn overview() -> String {
    let mut cmd = Cli::command();
    let mut out = String::new();
    if let Some(about) = cmd.get_about() {
        out.push_str(&format!("{about}\n\n"));
    }
    out.push_str(&format!("{}\n\nStart:\n", cmd.render_usage()));
    for (what, does) in START {
        out.push_str(&format!("  {what:<28} {does}\n"));
    }
    out.push_str("\nCommands (keel COMMAND -h for one):\n");
    for (purpose, names) in command_groups(&cmd) {
        out.push_str(&format!("  {purpose:<14}{}\n", names.join(", ")));
    }
    out.push_str("\nFlags most runs need (before or after the command):\n");
    for (flag, does) in FLAGS {
        out.push_str(&format!("  {flag:<28} {does}\n"));
    }
    out.push_str("\nkeel --help shows every flag and command.\n");
    out
}

/// The visible commands of `cmd` by [`GROUPS`], each shown with its visible aliases (`run
/// (exec)`); those no group names come last, as "Other". `help` is left out: the last line
/// of the overview says it.
fn command_groups(cmd: &clap::Command) -> Vec<(&'static str, Vec<String>)> {
    let visible: Vec<&clap::Command> = cmd
        .get_subcommands()
        .filter(|sc| !sc.is_hide_set() && sc.get_name() != "help")
        .collect();
    let shown = |sc: &&clap::Command| {
        let aliases: Vec<&str> = sc.get_visible_aliases().collect();
        if aliases.is_empty() {
            sc.get_name().to_owned()
        } else {
            format!("{} ({})", sc.get_name(), aliases.join(", "))
        }
    };
    let mut groups: Vec<(&'static str, Vec<String>)> = GROUPS
        .iter()
        .map(|(purpose, names)| {
            let found = names
                .iter()
                .filter_map(|name| visible.iter().find(|sc| sc.get_name() == *name))
                .map(shown)
                .collect();
            (*purpose, found)
        })
        .collect();
    let other: Vec<String> = visible
        .iter()
        .filter(|sc| {
            !GROUPS
                .iter()
                .any(|(_, names)| names.contains(&sc.get_name()))
        })
        .map(shown)
        .collect();
    groups.push(("Other", other));
    groups.retain(|(_, names)| !names.is_empty());
    groups
}

/// [`Cli`]'s command, built, with the agent flags hidden in the commands of [`NO_AGENT`] and
/// all their subcommands.
fn command() -> clap::Command {
    let mut cmd = Cli::command();
    cmd.build();
    let flags = agent_flags();
    for sc in cmd
        .get_subcommands_mut()
        .filter(|sc| NO_AGENT.contains(&sc.get_name()))
    {
        hide_agent_flags(sc, &flags);
    }
    cmd
}

/// The ids of [`Common`]'s global flags but [`KEPT`].
fn agent_flags() -> Vec<clap::Id> {
    Common::augment_args(clap::Command::new("common"))
        .get_arguments()
        .filter(|a| a.is_global_set() && !KEPT.contains(&a.get_id().as_str()))
        .map(|a| a.get_id().clone())
        .collect()
}

/// Hide `flags` in `cmd` (built: they were propagated to it) and its subcommands, with
/// [`AGENT_FLAGS_NOTE`] after the help. `mut_args` keeps the arguments' order, which the
/// built command's lookup of keys depends on.
fn hide_agent_flags(cmd: &mut clap::Command, flags: &[clap::Id]) {
    let note = |before: Option<&clap::builder::StyledStr>| match before {
        Some(text) => format!("{text}\n\n{AGENT_FLAGS_NOTE}"),
        None => AGENT_FLAGS_NOTE.to_owned(),
    };
    let after = note(cmd.get_after_help());
    let after_long = cmd.get_after_long_help().map(|text| note(Some(text)));
    let mut hidden = std::mem::take(cmd)
        .mut_args(|a| {
            if flags.contains(a.get_id()) {
                a.hide(true)
            } else {
                a
            }
        })
        .after_help(after);
    if let Some(text) = after_long {
        hidden = hidden.after_long_help(text);
    }
    *cmd = hidden;
    for sc in cmd
        .get_subcommands_mut()
        .filter(|sc| sc.get_name() != "help")
    {
        hide_agent_flags(sc, flags);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The commands that run an agent: their help keeps every flag.
    const AGENT: &[&str] = &[
        "run",
        "demo",
        "resume",
        "compact",
        "review",
        "chat",
        "mcp-server",
        "acp",
        "serve",
        "web",
        "batch",
        "batch-job",
    ];

    #[test]
    fn every_command_runs_an_agent_or_not() {
        for sc in Cli::command().get_subcommands() {
            let name = sc.get_name();
            assert!(
                AGENT.contains(&name) != NO_AGENT.contains(&name),
                "{name}: in neither or both of AGENT and NO_AGENT"
            );
        }
    }

    #[test]
    fn every_visible_command_has_a_group() {
        let cmd = Cli::command();
        let groups = command_groups(&cmd);
        assert!(
            groups.iter().all(|(purpose, _)| *purpose != "Other"),
            "{groups:?}"
        );
        let listed: usize = groups.iter().map(|(_, names)| names.len()).sum();
        let visible = cmd
            .get_subcommands()
            .filter(|s| !s.is_hide_set() && s.get_name() != "help")
            .count();
        assert_eq!(listed, visible, "{groups:?}");
    }

    #[test]
    fn the_overview_names_real_flags_and_fits() {
        let cmd = Cli::command();
        for (flag, _) in FLAGS {
            let name = flag.split(' ').next().unwrap_or_default();
            let found = cmd.get_arguments().any(|a| {
                a.get_long().is_some_and(|l| name == format!("--{l}"))
                    || a.get_short().is_some_and(|s| name == format!("-{s}"))
            });
            assert!(found, "{name} is no flag of keel's");
        }
        let text = overview();
        assert!(text.lines().count() < 40, "{text}");
        for line in text.lines() {
            assert!(line.chars().count() <= 80, "too wide: {line}");
        }
    }

    #[test]
    fn kept_flags_are_global_flags() {
        let ids: Vec<String> = Common::augment_args(clap::Command::new("common"))
            .get_arguments()
            .filter(|a| a.is_global_set())
            .map(|a| a.get_id().to_string())
            .collect();
        for id in KEPT {
            assert!(ids.iter().any(|i| i == id), "{id} is not in {ids:?}");
        }
        assert!(agent_flags().iter().any(|id| id == "context_window"));
    }
}
