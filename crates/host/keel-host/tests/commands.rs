#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The slash-command model against real command files in temporary directories.

use std::fs;
use std::path::{Path, PathBuf};

use keel_host::commands::{
    AddExternalError, Builtin, CommandInfo, CommandKind, CommandSet, Invocation, ParseError,
    ProblemKind, TrustArg, UnknownTrustArg, expand_arguments, unescape,
};
use tempfile::TempDir;

/// A project, a `$KEEL_HOME` and a user home, all empty.
struct Dirs {
    project: TempDir,
    keel_home: TempDir,
    home: TempDir,
}

impl Dirs {
    fn new() -> Dirs {
        Dirs {
            project: tempfile::tempdir().unwrap(),
            keel_home: tempfile::tempdir().unwrap(),
            home: tempfile::tempdir().unwrap(),
        }
    }

    fn project_keel(&self) -> PathBuf {
        self.project.path().join(".keel/commands")
    }

    fn project_claude(&self) -> PathBuf {
        self.project.path().join(".claude/commands")
    }

    fn keel_home_commands(&self) -> PathBuf {
        self.keel_home.path().join("commands")
    }

    fn home_claude(&self) -> PathBuf {
        self.home.path().join(".claude/commands")
    }

    fn load(&self) -> CommandSet {
        CommandSet::load(
            self.project.path(),
            self.keel_home.path(),
            Some(self.home.path()),
        )
    }
}

fn write(dir: &Path, relative: &str, contents: impl AsRef<[u8]>) -> PathBuf {
    let path = dir.join(relative);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(&path, contents).unwrap();
    path
}

fn names<'a>(commands: impl IntoIterator<Item = &'a CommandInfo>) -> Vec<String> {
    commands.into_iter().map(|c| c.name.clone()).collect()
}

fn prompt(set: &CommandSet, input: &str) -> String {
    match set.parse(input) {
        Ok(Invocation::Custom { prompt, .. }) => prompt,
        other => panic!("{input}: expected a custom command, got {other:?}"),
    }
}

const BUILTINS: [&str; 12] = [
    "help", "new", "resume", "sessions", "compact", "model", "plan", "todo", "status", "diff",
    "trust", "quit",
];

#[test]
fn builtins_listed_in_order_with_descriptions_and_hints() {
    let set = CommandSet::default();
    assert_eq!(names(set.all()), BUILTINS);
    assert!(set.problems().is_empty());
    for info in set.all() {
        assert!(!info.description.is_empty(), "{}", info.name);
        assert!(!info.description.contains('\n'), "{}", info.name);
        assert!(matches!(info.kind, CommandKind::Builtin(_)));
    }
    let hint = |name: &str| set.get(name).unwrap().argument_hint.clone();
    assert_eq!(hint("resume").as_deref(), Some("[SESSION]"));
    assert_eq!(hint("model").as_deref(), Some("[NAME]"));
    assert_eq!(hint("trust").as_deref(), Some("[yes|no]"));
    assert_eq!(hint("help"), None);
    assert_eq!(Builtin::ALL.map(Builtin::name), BUILTINS);
}

#[test]
fn missing_directories_are_not_problems() {
    let dirs = Dirs::new();
    let set = dirs.load();
    assert!(set.problems().is_empty());
    assert_eq!(set.all().count(), BUILTINS.len());

    let set = CommandSet::load(
        &dirs.project.path().join("nowhere"),
        &dirs.keel_home.path().join("nowhere"),
        None,
    );
    assert!(set.problems().is_empty());
}

#[test]
fn loads_from_all_four_directories_with_project_first_and_shadows_reported() {
    let dirs = Dirs::new();
    let keel = write(&dirs.project_keel(), "deploy.md", "Deploy from .keel");
    let claude = write(&dirs.project_claude(), "deploy.md", "Deploy from .claude");
    write(&dirs.project_claude(), "lint.md", "Lint it");
    let home_keel = write(&dirs.keel_home_commands(), "lint.md", "Lint from keel home");
    write(&dirs.keel_home_commands(), "mine.md", "Mine from keel home");
    let home_claude = write(&dirs.home_claude(), "mine.md", "Mine from ~/.claude");
    write(&dirs.home_claude(), "global.md", "Global");

    let set = dirs.load();
    let custom: Vec<String> = names(set.all()).split_off(BUILTINS.len());
    assert_eq!(custom, ["deploy", "global", "lint", "mine"]);
    assert_eq!(prompt(&set, "/deploy"), "Deploy from .keel");
    assert_eq!(prompt(&set, "/lint"), "Lint it");
    assert_eq!(prompt(&set, "/mine"), "Mine from keel home");
    assert_eq!(prompt(&set, "/global"), "Global");
    assert_eq!(
        set.get("deploy").unwrap().kind,
        CommandKind::Custom { path: keel.clone() }
    );

    let shadows: Vec<_> = set
        .problems()
        .iter()
        .map(|p| (p.name.clone().unwrap(), p.path.clone(), p.kind.clone()))
        .collect();
    assert_eq!(
        shadows,
        [
            (
                "deploy".to_owned(),
                claude,
                ProblemKind::Shadowed { by: keel.clone() }
            ),
            (
                "lint".to_owned(),
                home_keel,
                ProblemKind::Shadowed {
                    by: dirs.project_claude().join("lint.md")
                }
            ),
            (
                "mine".to_owned(),
                home_claude,
                ProblemKind::Shadowed {
                    by: dirs.keel_home_commands().join("mine.md")
                }
            ),
        ]
    );
    let shown = set.problems()[0].to_string();
    assert!(shown.contains("/deploy"), "{shown}");
    assert!(shown.contains("shadowed by"), "{shown}");
    assert!(shown.contains(&keel.display().to_string()), "{shown}");
}

#[test]
fn a_directory_reached_twice_is_read_once() {
    // The project is the home directory: its .claude/commands is both the project's and the
    // user's, and must not shadow itself.
    let dirs = Dirs::new();
    write(&dirs.project_claude(), "once.md", "Once");
    let set = CommandSet::load(
        dirs.project.path(),
        dirs.keel_home.path(),
        Some(dirs.project.path()),
    );
    assert!(set.problems().is_empty(), "{:?}", set.problems());
    assert_eq!(names(set.all()).split_off(BUILTINS.len()), ["once"]);
}

#[test]
fn subdirectories_give_namespaced_names() {
    let dirs = Dirs::new();
    let path = write(
        &dirs.project_claude(),
        "frontend/component.md",
        "Make a component",
    );
    write(&dirs.project_claude(), "a/b/deep.md", "Deep");
    write(&dirs.project_claude(), "notes.txt", "not a command");
    write(&dirs.project_claude(), ".hidden.md", "hidden");
    write(&dirs.project_claude(), ".git/x.md", "hidden directory");

    let set = dirs.load();
    assert!(set.problems().is_empty(), "{:?}", set.problems());
    assert_eq!(
        names(set.all()).split_off(BUILTINS.len()),
        ["a:b:deep", "frontend:component"]
    );
    assert_eq!(
        set.get("frontend:component").unwrap().kind,
        CommandKind::Custom { path }
    );
    assert_eq!(
        set.parse("/frontend:component Button"),
        Ok(Invocation::Custom {
            name: "frontend:component".to_owned(),
            prompt: "Make a component\n\nARGUMENTS: Button".to_owned(),
        })
    );
    assert_eq!(names(set.complete("/front")), ["frontend:component"]);
}

#[test]
fn front_matter_gives_description_and_argument_hint() {
    let dirs = Dirs::new();
    write(
        &dirs.project_keel(),
        "fix.md",
        "---\n\
         description: \"Fix an issue: the smallest change\"\n\
         argument-hint: '[issue] [priority]'\n\
         allowed-tools:\n  - Bash(git:*)\n\
         model: some-model\n\
         # a comment\n\
         ---\n\
         \n\
         Fix issue $1 with priority $2.\n",
    );
    let set = dirs.load();
    let info = set.get("fix").unwrap();
    assert_eq!(info.description, "Fix an issue: the smallest change");
    assert_eq!(info.argument_hint.as_deref(), Some("[issue] [priority]"));
    // The front matter is not part of the prompt.
    assert_eq!(
        prompt(&set, "/fix 123 high"),
        "Fix issue 123 with priority high."
    );
}

#[test]
fn crlf_front_matter_and_unclosed_front_matter() {
    let dirs = Dirs::new();
    write(
        &dirs.project_keel(),
        "win.md",
        "\u{feff}---\r\ndescription: From Windows\r\n---\r\nLine one\r\nLine two\r\n",
    );
    write(
        &dirs.project_keel(),
        "open.md",
        "---\ndescription: never closed\nBody",
    );
    let set = dirs.load();
    let win = set.get("win").unwrap();
    assert_eq!(win.description, "From Windows");
    assert_eq!(prompt(&set, "/win"), "Line one\nLine two");
    // Without a closing `---` there is no front matter: it is all body.
    assert_eq!(set.get("open").unwrap().description, "---");
    assert_eq!(
        prompt(&set, "/open"),
        "---\ndescription: never closed\nBody"
    );
}

#[test]
fn description_falls_back_to_the_first_body_line() {
    let dirs = Dirs::new();
    write(
        &dirs.project_keel(),
        "plain.md",
        "\n\n   \n# Review the code carefully\n\nMore text.",
    );
    write(
        &dirs.project_keel(),
        "empty-description.md",
        "---\ndescription:\nargument-hint: [x]\n---\nFirst line",
    );
    let long_line = "word ".repeat(40);
    write(&dirs.project_keel(), "long.md", &long_line);
    write(&dirs.project_keel(), "blank.md", "");

    let set = dirs.load();
    assert_eq!(
        set.get("plain").unwrap().description,
        "Review the code carefully"
    );
    let empty = set.get("empty-description").unwrap();
    assert_eq!(empty.description, "First line");
    assert_eq!(empty.argument_hint.as_deref(), Some("[x]"));
    let long = &set.get("long").unwrap().description;
    assert_eq!(long.chars().count(), 80);
    assert!(long.ends_with('…'), "{long}");
    assert!(long_line.starts_with(long.trim_end_matches('…')));
    assert_eq!(set.get("blank").unwrap().description, "");
    assert_eq!(set.get("blank").unwrap().argument_hint, None);
}

#[test]
fn arguments_and_positional_expansion() {
    let dirs = Dirs::new();
    write(
        &dirs.project_keel(),
        "all.md",
        "Look at: $ARGUMENTS\nAgain: $ARGUMENTS",
    );
    write(
        &dirs.project_keel(),
        "pos.md",
        "first=$1 second=$2 third=[$3] ninth=[$9] $0 $10 cost $ and $$",
    );
    let set = dirs.load();

    assert_eq!(
        prompt(&set, "/all  src/main.rs   and  tests \n"),
        "Look at: src/main.rs   and  tests\nAgain: src/main.rs   and  tests"
    );
    assert_eq!(prompt(&set, "/all"), "Look at: \nAgain: ");
    assert_eq!(
        prompt(&set, "/pos alpha\tbeta"),
        "first=alpha second=beta third=[] ninth=[] $0 alpha0 cost $ and $$"
    );
    // Arguments are not expanded again.
    assert_eq!(
        prompt(&set, "/all $1 $ARGUMENTS"),
        "Look at: $1 $ARGUMENTS\nAgain: $1 $ARGUMENTS"
    );
    // Arguments on the line after the name.
    assert_eq!(
        prompt(&set, "/pos\nx y"),
        "first=x second=y third=[] ninth=[] $0 x0 cost $ and $$"
    );

    // Without any placeholder the arguments are appended, not dropped.
    assert_eq!(
        expand_arguments("Do it.", "now"),
        "Do it.\n\nARGUMENTS: now"
    );
    assert_eq!(expand_arguments("Do it.", "  "), "Do it.");
    assert_eq!(expand_arguments("", "x"), "ARGUMENTS: x");
}

#[test]
fn non_utf8_file_is_skipped_with_a_problem() {
    let dirs = Dirs::new();
    let bad = write(
        &dirs.project_keel(),
        "bad.md",
        [0x66, 0x6f, 0xff, 0xfe, 0x0a],
    );
    write(&dirs.project_keel(), "good.md", "Good");
    // The same name further down is then the one used.
    write(&dirs.home_claude(), "bad.md", "Fallback bad");

    let set = dirs.load();
    assert_eq!(set.problems().len(), 1, "{:?}", set.problems());
    let problem = &set.problems()[0];
    assert_eq!(problem.name.as_deref(), Some("bad"));
    assert_eq!(problem.path, bad);
    assert_eq!(problem.kind, ProblemKind::NotUtf8);
    assert!(problem.to_string().contains("not UTF-8"), "{problem}");
    assert_eq!(prompt(&set, "/good"), "Good");
    assert_eq!(prompt(&set, "/bad"), "Fallback bad");
}

#[cfg(unix)]
#[test]
fn unreadable_file_is_skipped_with_a_problem() {
    let dirs = Dirs::new();
    fs::create_dir_all(dirs.project_keel()).unwrap();
    let dangling = dirs.project_keel().join("gone.md");
    std::os::unix::fs::symlink(dirs.project.path().join("missing"), &dangling).unwrap();
    // A symlinked command file that exists (in the project, by a relative link) works.
    write(dirs.project.path(), "elsewhere/real.md", "Real");
    std::os::unix::fs::symlink(
        "../../elsewhere/real.md",
        dirs.project_keel().join("linked.md"),
    )
    .unwrap();

    let set = dirs.load();
    assert_eq!(set.problems().len(), 1, "{:?}", set.problems());
    let problem = &set.problems()[0];
    assert_eq!(problem.name.as_deref(), Some("gone"));
    assert_eq!(problem.path, dangling);
    assert!(
        matches!(problem.kind, ProblemKind::Unreadable { .. }),
        "{problem}"
    );
    assert!(set.get("gone").is_none());
    assert_eq!(prompt(&set, "/linked"), "Real");
}

#[test]
fn unusable_names_and_oversized_files_are_problems() {
    let dirs = Dirs::new();
    let spaced = write(&dirs.project_keel(), "two words.md", "x");
    let big = write(&dirs.project_keel(), "big.md", vec![b'a'; 1024 * 1024 + 1]);
    let set = dirs.load();
    let kinds: Vec<_> = set
        .problems()
        .iter()
        .map(|p| (p.path.clone(), p.kind.clone()))
        .collect();
    assert_eq!(
        kinds,
        [
            (big, ProblemKind::TooLarge { limit: 1024 * 1024 }),
            (spaced, ProblemKind::InvalidName),
        ]
    );
    assert_eq!(set.all().count(), BUILTINS.len());
}

#[test]
fn custom_command_may_not_shadow_a_builtin() {
    let dirs = Dirs::new();
    let help = write(&dirs.project_keel(), "help.md", "My help");
    let exit = write(&dirs.home_claude(), "exit.md", "My exit");
    write(&dirs.project_claude(), "helper.md", "Helper");

    let set = dirs.load();
    let refused: Vec<_> = set
        .problems()
        .iter()
        .map(|p| (p.name.clone().unwrap(), p.path.clone(), p.kind.clone()))
        .collect();
    assert_eq!(
        refused,
        [
            ("help".to_owned(), help, ProblemKind::ShadowsBuiltin),
            ("exit".to_owned(), exit, ProblemKind::ShadowsBuiltin),
        ]
    );
    assert_eq!(
        set.parse("/help"),
        Ok(Invocation::Builtin {
            which: Builtin::Help,
            args: String::new()
        })
    );
    assert_eq!(prompt(&set, "/helper"), "Helper");
}

#[test]
fn completion_orders_builtins_first_and_matches_prefixes() {
    let dirs = Dirs::new();
    write(&dirs.project_keel(), "review-pr.md", "Review PR");
    write(&dirs.project_keel(), "refactor.md", "Refactor");
    write(&dirs.project_claude(), "zeta.md", "Zeta");
    let mut set = dirs.load();
    set.add_external("mcp__github__release", "Release notes", "mcp:github")
        .unwrap();

    // `/` alone: everything, in listing order.
    let mut everything: Vec<String> = BUILTINS.iter().map(|s| (*s).to_owned()).collect();
    everything.extend(["refactor", "review-pr", "zeta", "mcp__github__release"].map(String::from));
    assert_eq!(names(set.complete("/")), everything);
    assert_eq!(names(set.all()), everything);

    assert_eq!(
        names(set.complete("/re")),
        ["resume", "refactor", "review-pr"]
    );
    assert_eq!(names(set.complete("/rev")), ["review-pr"]);
    assert_eq!(names(set.complete("/REV")), ["review-pr"]);
    assert_eq!(names(set.complete("/s")), ["sessions", "status"]);
    assert_eq!(names(set.complete("/mcp")), ["mcp__github__release"]);
    // The alias completes to the command it names.
    assert_eq!(names(set.complete("/ex")), ["quit"]);
    assert!(set.complete("/nothing").is_empty());

    // Typing arguments: only the exact command, for its hint.
    let typing = set.complete("/model gpt");
    assert_eq!(names(typing.clone()), ["model"]);
    assert_eq!(typing[0].argument_hint.as_deref(), Some("[NAME]"));
    assert_eq!(names(set.complete("/exit now")), ["quit"]);
    assert!(set.complete("/mod gpt").is_empty());

    // Not commands.
    assert!(set.complete("").is_empty());
    assert!(set.complete("hello /help").is_empty());
    assert!(set.complete("//").is_empty());
}

#[test]
fn builtins_parse_with_their_arguments() {
    let set = CommandSet::default();
    let builtin = |input: &str| match set.parse(input) {
        Ok(Invocation::Builtin { which, args }) => (which, args),
        other => panic!("{input}: {other:?}"),
    };
    assert_eq!(builtin("/new"), (Builtin::New, String::new()));
    assert_eq!(
        builtin("/resume  abc123 "),
        (Builtin::Resume, "abc123".to_owned())
    );
    assert_eq!(
        builtin("/model  deepseek-chat "),
        (Builtin::Model, "deepseek-chat".to_owned())
    );
    assert_eq!(builtin("/plan\n"), (Builtin::Plan, String::new()));
    for b in Builtin::ALL {
        assert_eq!(builtin(&format!("/{}", b.name())).0, b);
    }
}

#[test]
fn trust_reads_yes_and_no_words_and_names_anything_else() {
    use keel_host::ProjectTrust::{Trusted, Untrusted};
    let set = CommandSet::default();
    assert_eq!(
        set.parse("/trust  yes "),
        Ok(Invocation::Builtin {
            which: Builtin::Trust,
            args: "yes".to_owned()
        })
    );
    for (args, expected) in [
        ("", TrustArg::Show),
        ("  ", TrustArg::Show),
        ("yes", TrustArg::Record(Trusted)),
        ("ON", TrustArg::Record(Trusted)),
        ("trusted", TrustArg::Record(Trusted)),
        ("no", TrustArg::Record(Untrusted)),
        ("off", TrustArg::Record(Untrusted)),
        ("revoke", TrustArg::Record(Untrusted)),
        ("untrusted", TrustArg::Record(Untrusted)),
    ] {
        assert_eq!(TrustArg::parse(args), Ok(expected), "{args:?}");
    }
    let err = TrustArg::parse(" maybe ").unwrap_err();
    assert_eq!(err, UnknownTrustArg("maybe".to_owned()));
    assert!(err.to_string().contains("\"maybe\""), "{err}");
}

#[test]
fn exit_is_an_alias_of_quit() {
    let set = CommandSet::default();
    for input in ["/exit", "/quit", "/exit  "] {
        assert_eq!(
            set.parse(input),
            Ok(Invocation::Builtin {
                which: Builtin::Quit,
                args: String::new()
            }),
            "{input}"
        );
    }
    assert_eq!(Builtin::from_name("exit"), Some(Builtin::Quit));
    let quit = set.get("exit").unwrap();
    assert_eq!(quit.name, "quit");
    assert_eq!(quit.aliases, ["exit"]);
    // The alias is not listed as a command of its own.
    assert_eq!(set.all().filter(|c| c.name == "exit").count(), 0);
}

#[test]
fn unknown_commands_get_up_to_three_suggestions() {
    let dirs = Dirs::new();
    write(&dirs.project_keel(), "deploy.md", "Deploy");
    let set = dirs.load();

    let unknown = |input: &str| match set.parse(input) {
        Err(ParseError::Unknown { name, suggestions }) => (name, suggestions),
        other => panic!("{input}: {other:?}"),
    };
    assert_eq!(
        unknown("/hlep"),
        ("hlep".to_owned(), vec!["help".to_owned()])
    );
    assert_eq!(unknown("/Help").1, ["help"]);
    assert_eq!(unknown("/deplyo now").1, ["deploy"]);
    assert_eq!(unknown("/exti").1, ["exit"]);
    // Closest first, at most three.
    let (_, close) = unknown("/stats");
    assert_eq!(close[0], "status");
    assert!(close.len() <= 3, "{close:?}");
    let (_, many) = unknown("/re");
    assert_eq!(many, ["resume", "new"]);
    // Nothing near: no suggestions.
    assert_eq!(unknown("/xyzzyplugh").1, Vec::<String>::new());

    assert_eq!(
        set.parse("/hlep").unwrap_err().to_string(),
        "unknown command '/hlep' (did you mean /help?)"
    );
    assert_eq!(
        set.parse("/xyzzyplugh").unwrap_err().to_string(),
        "unknown command '/xyzzyplugh'"
    );
}

#[test]
fn text_that_is_not_a_command() {
    let set = CommandSet::default();
    assert_eq!(set.parse("hello"), Err(ParseError::NotACommand));
    assert_eq!(set.parse(" /help"), Err(ParseError::NotACommand));
    assert_eq!(set.parse(""), Err(ParseError::NotACommand));
    // A path is a message, not an unknown command.
    assert_eq!(
        set.parse("/usr/bin/env is missing"),
        Err(ParseError::NotACommand)
    );
    assert_eq!(set.parse("/"), Err(ParseError::MissingName));
    assert_eq!(set.parse("/  x"), Err(ParseError::MissingName));
    assert_eq!(unescape("hello"), None);
    assert_eq!(unescape("/help"), None);
}

#[test]
fn double_slash_escapes_a_message_starting_with_slash() {
    let set = CommandSet::default();
    assert_eq!(set.parse("//help me"), Err(ParseError::NotACommand));
    assert_eq!(unescape("//help me").as_deref(), Some("/help me"));
    assert_eq!(unescape("//").as_deref(), Some("/"));
    assert_eq!(unescape("///x").as_deref(), Some("//x"));
}

#[test]
fn external_commands_are_listed_and_invoked() {
    let dirs = Dirs::new();
    write(&dirs.project_keel(), "deploy.md", "Deploy");
    let mut set = dirs.load();

    set.add_external("mcp__github__review", "Review a PR", "mcp:github")
        .unwrap();
    set.add_external_with_hint(
        "mcp__github__issue",
        "Draft an issue",
        Some("<title>".to_owned()),
        "mcp:github",
    )
    .unwrap();
    set.add_external("lint:fix", "Fix lints", "plugin:lint")
        .unwrap();

    assert_eq!(
        names(set.all()).split_off(BUILTINS.len()),
        [
            "deploy",
            "lint:fix",
            "mcp__github__issue",
            "mcp__github__review"
        ]
    );
    let issue = set.get("mcp__github__issue").unwrap();
    assert_eq!(issue.argument_hint.as_deref(), Some("<title>"));
    assert_eq!(
        issue.kind,
        CommandKind::External {
            source: "mcp:github".to_owned()
        }
    );
    assert_eq!(
        set.parse("/mcp__github__review  42 carefully "),
        Ok(Invocation::External {
            name: "mcp__github__review".to_owned(),
            args: "42 carefully".to_owned(),
        })
    );
    assert_eq!(
        set.parse("/lint:fix"),
        Ok(Invocation::External {
            name: "lint:fix".to_owned(),
            args: String::new(),
        })
    );

    // Taken names and unusable ones are refused; what holds the name is kept.
    assert_eq!(
        set.add_external("help", "x", "plugin:p"),
        Err(AddExternalError::Taken {
            name: "help".to_owned(),
            by: CommandKind::Builtin(Builtin::Help),
        })
    );
    assert!(matches!(
        set.add_external("exit", "x", "plugin:p"),
        Err(AddExternalError::Taken { .. })
    ));
    assert!(matches!(
        set.add_external("deploy", "x", "plugin:p"),
        Err(AddExternalError::Taken {
            by: CommandKind::Custom { .. },
            ..
        })
    ));
    assert!(matches!(
        set.add_external("mcp__github__review", "again", "mcp:other"),
        Err(AddExternalError::Taken {
            by: CommandKind::External { .. },
            ..
        })
    ));
    assert_eq!(
        set.add_external("two words", "x", "plugin:p"),
        Err(AddExternalError::InvalidName("two words".to_owned()))
    );
    assert!(set.add_external("", "x", "plugin:p").is_err());
    assert!(set.add_external("a/b", "x", "plugin:p").is_err());
    assert!(set.problems().is_empty());

    // A server going away takes its commands along.
    assert_eq!(set.remove_external_source("mcp:github"), 2);
    assert_eq!(
        names(set.all()).split_off(BUILTINS.len()),
        ["deploy", "lint:fix"]
    );
    assert!(matches!(
        set.parse("/mcp__github__review"),
        Err(ParseError::Unknown { .. })
    ));
    assert_eq!(set.remove_external_source("mcp:github"), 0);
}

#[cfg(unix)]
#[test]
fn project_commands_linked_out_of_the_workspace_or_fifos_are_never_read() {
    let dirs = Dirs::new();
    let outside = tempfile::tempdir().unwrap();
    let secret = write(outside.path(), "secret.md", "MARKER secret");
    write(outside.path(), "dir/inner.md", "MARKER inner");
    fs::create_dir_all(dirs.project_keel()).unwrap();
    let leak = dirs.project_keel().join("leak.md");
    std::os::unix::fs::symlink(&secret, &leak).unwrap();
    let out_dir = dirs.project_keel().join("out");
    std::os::unix::fs::symlink(outside.path().join("dir"), &out_dir).unwrap();
    let fifo = dirs.project_keel().join("fifo.md");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    // The whole project directory linked out.
    fs::create_dir_all(dirs.project.path().join(".claude")).unwrap();
    std::os::unix::fs::symlink(outside.path(), dirs.project_claude()).unwrap();
    // The user's own commands may be links to their dotfiles.
    fs::create_dir_all(dirs.home_claude()).unwrap();
    std::os::unix::fs::symlink(&secret, dirs.home_claude().join("mine.md")).unwrap();

    let set = dirs.load();
    let said: Vec<String> = set.problems().iter().map(ToString::to_string).collect();
    for path in [&leak, &out_dir, &fifo, &dirs.project_claude()] {
        assert!(
            said.iter().any(|p| p.contains(&path.display().to_string())),
            "{path:?} not named in {said:?}"
        );
    }
    assert!(
        said.iter().any(|p| p.contains("outside the workspace")),
        "{said:?}"
    );
    assert!(said.iter().any(|p| p.contains("a FIFO")), "{said:?}");
    assert!(!said.iter().any(|p| p.contains("MARKER")), "{said:?}");
    assert!(set.get("leak").is_none() && set.get("out:inner").is_none());
    assert!(set.get("fifo").is_none() && set.get("secret").is_none());
    assert_eq!(prompt(&set, "/mine"), "MARKER secret");
}

#[test]
fn plugin_bundles_commands_are_namespaced_short_when_unique_and_a_clash_is_said() {
    let dirs = Dirs::new();
    let bundles_dir = tempfile::tempdir().unwrap();
    let bundle = |name: &str| keel_agent::plugin::Bundle {
        name: name.into(),
        root: bundles_dir.path().join(name),
    };
    let (a, b) = (bundle("alpha"), bundle("beta"));
    write(&a.root, "commands/review.md", "ALPHA $ARGUMENTS");
    write(&a.root, "commands/only.md", "ONLY");
    write(&a.root, "commands/mine.md", "PLUGIN MINE");
    write(&a.root, "commands/git/push.md", "PUSH");
    write(&b.root, "commands/review.md", "BETA");
    write(&dirs.project_keel(), "mine.md", "USER MINE");
    let mut set = dirs.load();
    set.add_bundles(&[a, b]);

    let prompt = |input: &str| match set.parse(input) {
        Ok(Invocation::Custom { name, prompt }) => format!("{name}: {prompt}"),
        other => format!("{other:?}"),
    };
    assert_eq!(prompt("/alpha:review x"), "alpha:review: ALPHA x");
    assert_eq!(prompt("/beta:review"), "beta:review: BETA");
    assert_eq!(prompt("/only"), "alpha:only: ONLY");
    assert_eq!(prompt("/alpha:git:push"), "alpha:git:push: PUSH");
    // The user's own command keeps its short name; the plugin's stays reachable.
    assert_eq!(prompt("/mine"), "mine: USER MINE");
    assert_eq!(prompt("/alpha:mine"), "alpha:mine: PLUGIN MINE");
    // Two plugins' `review`: neither takes the short name, and the clash is said once.
    assert!(matches!(
        set.parse("/review"),
        Err(ParseError::Unknown { .. })
    ));
    let said: Vec<String> = set
        .problems()
        .iter()
        .filter(|p| matches!(p.kind, ProblemKind::Namespaced { .. }))
        .map(|p| format!("{} {}", p.name.as_deref().unwrap(), p.kind))
        .collect();
    assert_eq!(
        said,
        vec!["review more than one plugin has it: kept as /alpha:review and /beta:review"]
    );
}
