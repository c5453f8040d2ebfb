//! End-to-end: help a newcomer can scan (the real binary). `keel -h` is one screen; `keel
//! --help` keeps every flag; the commands that run no agent (mcp, config, plugin…) leave the
//! agent flags out of their help; `keel run --help` hides the flags keel's delegation provider
//! sets, which the parser still takes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::Command;
use support::*;

const ANSWER: &str = "responses:\n  - text: \"The answer.\"\n  - text: \"The answer.\"\n";

/// `keel ARGS` with nothing before ARGS (no `--cwd`): `$KEEL_HOME` set, no key.
fn keel_alone(env: &Env, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_keel"));
    cmd.env_remove("DEEPSEEK_API_KEY")
        .env_remove("DEEPSEEK_BASE_URL")
        .env("KEEL_HOME", env.root().join("home"))
        .env("HOME", env.root())
        .current_dir(env.root())
        .args(args);
    run(&mut cmd)
}

/// The help of `keel ARGS`, insisting it is printed on stdout with exit 0.
fn help(env: &Env, args: &[&str]) -> String {
    let out = keel_alone(env, args);
    assert_eq!(out.code, Some(0), "{args:?}: {out:?}");
    assert!(!out.stdout.is_empty(), "{args:?}: {out:?}");
    out.stdout
}

/// Whether `help` lists `flag` as an option (a line starting with it), not merely names it in
/// some text.
fn lists(help: &str, flag: &str) -> bool {
    help.lines().any(|line| {
        let line = line.trim_start();
        line.strip_prefix(flag)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '=', '[', '<', ',']))
    })
}

/// The visible commands `keel --help` lists (but `help`), with their aliases.
fn commands(full: &str) -> Vec<String> {
    let section = full.split("\nCommands:\n").nth(1).unwrap();
    let section = section.split("\n\n").next().unwrap();
    section
        .lines()
        .filter(|line| line.starts_with("  ") && !line.starts_with("   "))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

#[test]
fn keel_h_is_one_short_screen_naming_every_command() {
    let env = Env::new();
    for args in [&["-h"][..], &["--model", "m", "-h"], &["-c", "a.b=1", "-h"]] {
        let short = help(&env, args);
        let lines = short.lines().count();
        assert!(lines < 40, "{args:?}: {lines} lines:\n{short}");
        let names = commands(&help(&env, &["--help"]));
        assert!(names.len() >= 20, "{names:?}");
        for name in &names {
            assert!(
                [",", "\n", " ("]
                    .iter()
                    .any(|end| short.contains(&format!(" {name}{end}"))),
                "{args:?}: {name} is missing:\n{short}"
            );
        }
        assert!(short.contains("run (exec)"), "{short}");
        for start in [
            "keel run",
            "keel resume --last",
            "keel --continue",
            "keel demo",
        ] {
            assert!(short.contains(start), "{start}:\n{short}");
        }
        for flag in [
            "--model",
            "--base-url",
            "--sandbox",
            "--cwd",
            "-c KEY=VALUE",
        ] {
            assert!(lists(&short, flag), "{flag}:\n{short}");
        }
        assert!(short.contains("--approval ask|deny|allow"), "{short}");
        assert!(!lists(&short, "--context-window"), "{short}");
        let last = short.lines().rev().find(|l| !l.trim().is_empty()).unwrap();
        assert!(last.contains("keel --help"), "{last}");
    }
}

#[test]
fn keel_help_keeps_every_flag() {
    let env = Env::new();
    for args in [&["--help"][..], &["help"]] {
        let full = help(&env, args);
        assert!(full.lines().count() > 100, "{full}");
        for flag in [
            "--context-window",
            "--provenance",
            "--model",
            "--max-output",
            "--delegate",
        ] {
            assert!(lists(&full, flag), "{args:?}: {flag}:\n{full}");
        }
    }
}

#[test]
fn commands_without_an_agent_leave_the_agent_flags_out() {
    let env = Env::new();
    for (args, own) in [
        (&["mcp", "--help"][..], "list"),
        (&["mcp", "-h"], "add"),
        (&["mcp"], "test"),
        (&["help", "mcp"], "remove"),
        (&["mcp", "add", "--help"], "--url"),
        (&["mcp", "list", "-h"], "--json"),
        (&["mcp", "help", "list"], "--json"),
        (&["config", "--help"], "dump"),
        (&["config", "set", "--help"], "--project"),
        (&["plugin", "--help"], "install"),
        (&["plugin", "marketplace", "add", "--help"], "SOURCE"),
        (&["sessions", "--help"], "search"),
        (&["sessions", "list", "--help"], "--all"),
        (&["trust", "--help"], "--revoke"),
        (&["login", "--help"], "--stdin"),
        (&["logout", "-h"], "PROVIDER"),
        (&["rewind", "--help"], "--undo"),
        (&["attach", "--help"], "--server"),
    ] {
        // `keel mcp` without its command is a usage error: the help on stderr, exit 2.
        let text = if args == ["mcp"] {
            let out = keel_alone(&env, args);
            assert_eq!(out.code, Some(2), "{out:?}");
            out.stderr
        } else {
            help(&env, args)
        };
        assert!(text.contains(own), "{args:?}: no {own}:\n{text}");
        for flag in [
            "--context-window",
            "--provenance",
            "--model",
            "--sandbox",
            "--approval",
        ] {
            assert!(!lists(&text, flag), "{args:?} lists {flag}:\n{text}");
        }
        // Where the workspace and the configuration are still shows, and where the rest is.
        for flag in ["--cwd", "--config", "-c"] {
            assert!(lists(&text, flag), "{args:?} lacks {flag}:\n{text}");
        }
        assert!(
            text.contains("The agent flags (--model") && text.contains("keel --help"),
            "{args:?}:\n{text}"
        );
    }
}

#[test]
fn commands_that_run_an_agent_keep_them_and_hide_internal_flags() {
    let env = Env::new();
    for args in [
        &["run", "--help"][..],
        &["run", "-h"],
        &["exec", "--help"],
        &["resume", "--help"],
        &["chat", "--help"],
        &["serve", "--help"],
        &["acp", "--help"],
        &["batch", "--help"],
        &["demo", "--help"],
    ] {
        let text = help(&env, args);
        for flag in ["--context-window", "--provenance", "--model", "--approval"] {
            assert!(lists(&text, flag), "{args:?} lacks {flag}:\n{text}");
        }
        for flag in ["--delegated-from", "--delegation-depth", "--project-trust"] {
            assert!(!lists(&text, flag), "{args:?} lists {flag}:\n{text}");
        }
        assert!(!text.contains("The agent flags ("), "{args:?}:\n{text}");
    }
}

#[test]
fn hidden_delegation_flags_are_still_taken() {
    let env = Env::new();
    let mock = Mock::start(ANSWER);
    let out = run(env.keel(&mock.base_url()).args([
        "run",
        "--json",
        "--delegated-from",
        "PARENT-SESSION-X",
        "--delegation-depth",
        "2",
        "hi",
    ]));
    assert_eq!(out.code, Some(0), "{out:?}");
    let header = out.stdout.lines().next().unwrap();
    assert!(header.contains("PARENT-SESSION-X"), "{header}");
    assert!(header.contains("delegate"), "{header}");
    // A flag that is not there is refused, as before.
    let out = run(env
        .keel(&mock.base_url())
        .args(["run", "--delegated-frm", "X", "hi"]));
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(out.stderr.contains("unexpected argument"), "{}", out.stderr);
}

#[test]
fn a_prompt_or_an_error_is_not_taken_for_help() {
    let env = Env::new();
    let mock = Mock::start(ANSWER);
    // `help` after `run` is a prompt; `-h` after `--` too.
    let out = run(env.keel(&mock.base_url()).args(["run", "help"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(out.stdout.trim(), "The answer.");
    let out = run(env.keel(&mock.base_url()).args(["run", "--", "-h"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(mock.requests().len(), 2);
    // A usage error stays one (exit 2, on stderr).
    let out = keel_alone(&env, &["mcp", "--bogus", "-h"]);
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(out.stderr.contains("--bogus"), "{}", out.stderr);
}
