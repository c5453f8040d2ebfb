//! Slash commands: the built-in ones, custom commands from Markdown files, and commands other
//! features register at run time (MCP server prompts, plugin commands).
//!
//! Pure logic, no terminal I/O: the UI asks a [`CommandSet`] to list ([`CommandSet::all`]),
//! complete ([`CommandSet::complete`]) and parse ([`CommandSet::parse`]) what the user typed.
//!
//! # Names
//!
//! A command's [`CommandInfo::name`] is stored without its leading `/` (`help`,
//! `frontend:component`, `mcp__github__review`); the user types `/name`.
//!
//! # Custom commands
//!
//! Markdown files, the way Claude Code users already have them, read from (in this order):
//!
//! 1. `<project>/.keel/commands/`
//! 2. `<project>/.claude/commands/`
//! 3. `<keel_home>/commands/`
//! 4. `<home>/.claude/commands/`
//!
//! `review.md` is `/review`-like: its name is the file stem. A file in a subdirectory gets a
//! namespaced name, `frontend/component.md` → `/frontend:component` (deeper ones
//! `a:b:name`). Hidden files and directories (`.name`) are skipped. On a name clash the first
//! one found wins and the later one is reported as shadowed ([`ProblemKind::Shadowed`]); a file
//! named like a built-in is refused ([`ProblemKind::ShadowsBuiltin`]). A directory reached
//! twice (the project is the home directory, say) is read once.
//!
//! The file body is the prompt. It may start with front matter between `---` lines, of which
//! only `key: value` lines are read (values in `"…"` or `'…'` unquoted, other keys and lines
//! ignored): `description:` (shown in completion) and `argument-hint:`. Without a description
//! the first non-empty body line is used (leading `#`s dropped, cut to 80 characters). See
//! [`expand_arguments`] for `$ARGUMENTS` and `$1`…`$9`.
//!
//! A file that can't be used (unreadable, not UTF-8, too large, a name with whitespace) is
//! skipped and recorded in [`CommandSet::problems`]; loading never fails. The project's
//! directories are listed and their files opened beneath the project directory
//! ([`keel_tools::beneath`]): a file or directory linked out of it, a FIFO or a file over
//! [`MAX_COMMAND_FILE_BYTES`] (1 MiB) is a problem naming it, never read. The user's own
//! directories may hold links (to their dotfiles), but a command file is still a regular file
//! within the cap.
//!
//! # Escaping
//!
//! Text not starting with `/` is not a command. `//text` is a message that starts with `/`:
//! [`CommandSet::parse`] says [`ParseError::NotACommand`] and [`unescape`] gives `/text`.

mod builtin;
mod files;
mod init;

pub use builtin::{Builtin, TrustArg, UnknownTrustArg};
use files::{FoundFile, parse_command_file, scan_dir};
pub use init::{INIT, INIT_PROMPT, InitCommand};
use keel_tools::beneath::{BeneathError, Reader};

use std::collections::HashSet;
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

/// A command file larger than this (1 MiB) is skipped ([`ProblemKind::TooLarge`]).
pub const MAX_COMMAND_FILE_BYTES: u64 = 1024 * 1024;

/// How many subdirectory levels below a commands directory are read.
const MAX_DEPTH: usize = 8;

/// The longest description taken from a body line, in characters.
const FALLBACK_DESCRIPTION_CHARS: usize = 80;

/// Where a command comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandKind {
    /// One of keel's own commands.
    Builtin(Builtin),
    /// A Markdown file.
    Custom {
        /// The file.
        path: PathBuf,
    },
    /// Registered at run time with [`CommandSet::add_external`].
    External {
        /// Who registered it, as given (e.g. `mcp:github`, `plugin:foo`).
        source: String,
    },
}

/// A command as listed and completed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandInfo {
    /// The name, without the leading `/`.
    pub name: String,
    /// One line for completion and `/help`.
    pub description: String,
    /// What the arguments look like (`[SESSION]`), if known.
    pub argument_hint: Option<String>,
    /// Where it comes from.
    pub kind: CommandKind,
    /// Other names for it, without `/` (only built-ins have any: `exit`).
    pub aliases: Vec<String>,
}

impl CommandInfo {
    /// The name as typed: `/name`.
    pub fn slash_name(&self) -> String {
        format!("/{}", self.name)
    }

    fn answers_to(&self, name: &str) -> bool {
        self.name == name || self.aliases.iter().any(|a| a == name)
    }
}

/// What an input line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invocation {
    /// A built-in command; `args` is the text after its name, trimmed (maybe empty).
    Builtin {
        /// Which one.
        which: Builtin,
        /// The text after the name, trimmed.
        args: String,
    },
    /// A custom command: its prompt with the arguments substituted, to send as the user's
    /// message.
    Custom {
        /// The command's name, without `/`.
        name: String,
        /// The file's body with `$ARGUMENTS` and `$1`…`$9` expanded.
        prompt: String,
    },
    /// A command registered with [`CommandSet::add_external`]; its owner runs it.
    External {
        /// The command's name, without `/`.
        name: String,
        /// The text after the name, trimmed.
        args: String,
    },
}

/// Why an input line is not an invocation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Not a command: plain text, an escaped `//text` (see [`unescape`]), or a path such as
    /// `/usr/bin/env …`. The UI sends it as a message.
    #[error("not a command")]
    NotACommand,
    /// Only `/` (and maybe whitespace).
    #[error("no command name after '/'")]
    MissingName,
    /// No command has this name.
    #[error("unknown command '/{name}'{}", did_you_mean(.suggestions))]
    Unknown {
        /// The name typed, without `/`.
        name: String,
        /// Up to 3 close names (without `/`), closest first.
        suggestions: Vec<String>,
    },
}

fn did_you_mean(suggestions: &[String]) -> String {
    if suggestions.is_empty() {
        return String::new();
    }
    let names: Vec<String> = suggestions.iter().map(|s| format!("/{s}")).collect();
    format!(" (did you mean {}?)", names.join(", "))
}

/// A command file that was skipped, or a directory that could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The command name the file would have had, without `/` (`None` for a directory).
    pub name: Option<String>,
    /// The file or directory.
    pub path: PathBuf,
    /// What is wrong.
    pub kind: ProblemKind,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.name {
            Some(name) => write!(f, "/{name} ({}): {}", self.path.display(), self.kind),
            None => write!(f, "{}: {}", self.path.display(), self.kind),
        }
    }
}

/// What is wrong with a command file (its [`fmt::Display`] is the reason shown to the user).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProblemKind {
    /// Reading it failed.
    #[error("unreadable: {reason}")]
    Unreadable {
        /// The I/O error.
        reason: String,
    },
    /// Its bytes are not UTF-8.
    #[error("not UTF-8")]
    NotUtf8,
    /// Larger than [`MAX_COMMAND_FILE_BYTES`].
    #[error("larger than {limit} bytes")]
    TooLarge {
        /// The limit.
        limit: u64,
    },
    /// Its name can't be typed: empty, or with whitespace, `/` or control characters.
    #[error("not a usable command name")]
    InvalidName,
    /// Named like a built-in command (or its alias); the built-in is kept.
    #[error("has the name of a built-in command, which it may not replace")]
    ShadowsBuiltin,
    /// An earlier file has the same name and wins.
    #[error("shadowed by {}", .by.display())]
    Shadowed {
        /// The file that wins.
        by: PathBuf,
    },
    /// Plugin bundles share the name: each is kept under its namespaced name only.
    #[error("more than one plugin has it: kept as {}", .names.join(" and "))]
    Namespaced {
        /// The namespaced names (`/a:review`, `/b:review`).
        names: Vec<String>,
    },
}

/// Why [`CommandSet::add_external`] refused a command.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddExternalError {
    /// The name can't be typed: empty, or with whitespace, `/` or control characters.
    #[error("'{0}' is not a usable command name")]
    InvalidName(String),
    /// A built-in, custom or earlier external command has the name; it is kept.
    #[error("'/{name}' is taken")]
    Taken {
        /// The name.
        name: String,
        /// Where the command holding it comes from.
        by: CommandKind,
    },
}

#[derive(Debug, Clone)]
struct Custom {
    info: CommandInfo,
    body: String,
}

impl Custom {
    /// The command of a Markdown file `text` found at `path`.
    fn parsed(name: String, path: PathBuf, text: &str) -> Custom {
        let parsed = parse_command_file(text);
        Custom {
            info: CommandInfo {
                name,
                description: parsed.description,
                argument_hint: parsed.argument_hint,
                kind: CommandKind::Custom { path },
                aliases: Vec::new(),
            },
            body: parsed.body,
        }
    }
}

/// The commands the UI knows: built-ins, custom commands from files, and external ones.
///
/// [`Default`] is the built-ins alone.
#[derive(Debug, Clone)]
pub struct CommandSet {
    builtins: Vec<CommandInfo>,
    /// Sorted by name.
    custom: Vec<Custom>,
    /// Sorted by name.
    external: Vec<CommandInfo>,
    problems: Vec<Problem>,
}

impl Default for CommandSet {
    fn default() -> Self {
        CommandSet {
            builtins: Builtin::ALL.into_iter().map(Builtin::info).collect(),
            custom: Vec::new(),
            external: Vec::new(),
            problems: Vec::new(),
        }
    }
}

impl CommandSet {
    /// [`CommandSet::load`] for a front end: the user's home is `$HOME`, and an agent without
    /// a keel home has no commands of its own there.
    pub fn load_for(project: &Path, keel_home: Option<&Path>) -> CommandSet {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let mut set =
            CommandSet::load(project, keel_home.unwrap_or(Path::new("")), home.as_deref());
        if let Some(keel_home) = keel_home {
            set.add_bundles(&crate::bundles::enabled(keel_home, project));
        }
        set
    }

    /// Add the commands of plugin bundles (`ROOT/commands/*.md`, read beneath the bundle's
    /// folder): each as `/PLUGIN:NAME`, and as `/NAME` too when no other command has that
    /// name. Two bundles with the same command keep both under their namespaced names, and
    /// the clash is a problem naming both ([`ProblemKind::Namespaced`]).
    pub fn add_bundles(&mut self, bundles: &[keel_agent::plugin::Bundle]) {
        let mut found = Vec::new();
        for bundle in bundles {
            let dir = bundle.root.join("commands");
            let Ok(reader) = Reader::beneath(&bundle.root) else {
                continue;
            };
            if reader.metadata(&dir).is_err() {
                continue;
            }
            scan_dir(
                &reader,
                &dir,
                std::slice::from_ref(&bundle.name),
                0,
                &mut found,
                &mut self.problems,
            );
        }
        let mut added: Vec<usize> = Vec::new();
        for FoundFile { name, path, text } in found {
            let text = match text {
                Ok(_) if !valid_name(&name) => Err(ProblemKind::InvalidName),
                other => other,
            };
            let text = match text {
                Ok(text) => text,
                Err(kind) => {
                    self.problems.push(Problem {
                        name: Some(name),
                        path,
                        kind,
                    });
                    continue;
                }
            };
            if let Some(CommandKind::Custom { path: by }) = self.get(&name).map(|c| &c.kind) {
                // A file of the user's or the project's named `PLUGIN/NAME.md`.
                self.problems.push(Problem {
                    name: Some(name),
                    path,
                    kind: ProblemKind::Shadowed { by: by.clone() },
                });
                continue;
            }
            added.push(self.custom.len());
            self.custom.push(Custom::parsed(name, path, &text));
        }
        // The short names: given where unique, said where two bundles share one.
        let short = |name: &str| name.split_once(':').map(|(_, s)| s.to_owned());
        for &i in &added {
            let Some(alias) = short(&self.custom[i].info.name) else {
                continue;
            };
            let sharing: Vec<String> = added
                .iter()
                .filter(|&&j| short(&self.custom[j].info.name).as_deref() == Some(&alias))
                .map(|&j| format!("/{}", self.custom[j].info.name))
                .collect();
            let first =
                sharing.first().map(String::as_str) == Some(&self.custom[i].info.slash_name());
            if sharing.len() > 1 {
                if !first {
                    continue;
                }
                if let CommandKind::Custom { path } = &self.custom[i].info.kind {
                    self.problems.push(Problem {
                        name: Some(alias),
                        path: path.clone(),
                        kind: ProblemKind::Namespaced { names: sharing },
                    });
                }
            } else if self.get(&alias).is_none() && Builtin::from_name(&alias).is_none() {
                self.custom[i].info.aliases.push(alias);
            }
        }
        self.custom.sort_by(|a, b| a.info.name.cmp(&b.info.name));
    }

    /// The built-ins and the custom commands under `project`, `keel_home` and `user_home` (see
    /// the [module docs](self) for the directories and their precedence). Never fails: what
    /// can't be used is in [`CommandSet::problems`]. Missing directories are not problems.
    pub fn load(project: &Path, keel_home: &Path, user_home: Option<&Path>) -> CommandSet {
        // The project's directories are read beneath it; the user's as they are.
        let project_reader = || Reader::beneath(project);
        let user_reader = || Ok(Reader::User);
        type Open<'a> = &'a dyn Fn() -> Result<Reader, BeneathError>;
        let mut roots: Vec<(PathBuf, Open<'_>)> = vec![
            (project.join(".keel").join("commands"), &project_reader),
            (project.join(".claude").join("commands"), &project_reader),
            (keel_home.join("commands"), &user_reader),
        ];
        if let Some(home) = user_home {
            roots.push((home.join(".claude").join("commands"), &user_reader));
        }

        let mut set = CommandSet::default();
        let mut found = Vec::new();
        let mut seen_roots: HashSet<PathBuf> = HashSet::new();
        for (root, open) in roots {
            // A project directory linked out of the workspace is a problem, and does not
            // count as seen (the user's own directory it may lead to is still read).
            let reader = match open().and_then(|r| r.metadata(&root).map(|_| r)) {
                Ok(reader) => reader,
                Err(e) if e.is_not_found() => continue,
                Err(e) => {
                    set.problems.push(Problem {
                        name: None,
                        path: root,
                        kind: ProblemKind::Unreadable { reason: e.reason() },
                    });
                    continue;
                }
            };
            let canonical = match fs::canonicalize(&root) {
                Ok(c) => c,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => {
                    set.problems.push(Problem {
                        name: None,
                        path: root,
                        kind: ProblemKind::Unreadable {
                            reason: e.to_string(),
                        },
                    });
                    continue;
                }
            };
            if !seen_roots.insert(canonical) {
                continue;
            }
            scan_dir(&reader, &root, &[], 0, &mut found, &mut set.problems);
        }

        for file in found {
            let FoundFile { name, path, text } = file;
            if !valid_name(&name) {
                set.problems.push(Problem {
                    name: Some(name),
                    path,
                    kind: ProblemKind::InvalidName,
                });
                continue;
            }
            if Builtin::from_name(&name).is_some() {
                set.problems.push(Problem {
                    name: Some(name),
                    path,
                    kind: ProblemKind::ShadowsBuiltin,
                });
                continue;
            }
            if let Some(winner) = set.custom.iter().find(|c| c.info.name == name) {
                let by = match &winner.info.kind {
                    CommandKind::Custom { path } => path.clone(),
                    _ => PathBuf::new(),
                };
                set.problems.push(Problem {
                    name: Some(name),
                    path,
                    kind: ProblemKind::Shadowed { by },
                });
                continue;
            }
            let text = match text {
                Ok(text) => text,
                Err(kind) => {
                    set.problems.push(Problem {
                        name: Some(name),
                        path,
                        kind,
                    });
                    continue;
                }
            };
            set.custom.push(Custom::parsed(name, path, &text));
        }
        set.custom.sort_by(|a, b| a.info.name.cmp(&b.info.name));
        set
    }

    /// What was skipped while loading, in the order found.
    pub fn problems(&self) -> &[Problem] {
        &self.problems
    }

    /// Every command: the built-ins in [`Builtin::ALL`] order, then the custom commands sorted
    /// by name, then the external ones sorted by name.
    pub fn all(&self) -> impl Iterator<Item = &CommandInfo> {
        self.builtins
            .iter()
            .chain(self.custom.iter().map(|c| &c.info))
            .chain(self.external.iter())
    }

    /// The command called `name` (without `/`; aliases count).
    pub fn get(&self, name: &str) -> Option<&CommandInfo> {
        self.all().find(|c| c.answers_to(name))
    }

    /// The commands `input` may be the start of, in [`CommandSet::all`] order (built-ins
    /// first). `input` starts with `/`; the name typed so far is a prefix of the command's
    /// name or an alias, ignoring ASCII case. `/` alone lists everything. Once the input has
    /// whitespace after the name (the user is typing arguments) only a command with exactly
    /// that name is returned, so the UI can keep showing its argument hint. Anything else
    /// (no `/`, an escaped `//`) completes to nothing.
    pub fn complete(&self, input: &str) -> Vec<&CommandInfo> {
        let Some(rest) = input.strip_prefix('/') else {
            return Vec::new();
        };
        if rest.starts_with('/') {
            return Vec::new();
        }
        match rest.split_once(char::is_whitespace) {
            Some((name, _)) => self.get(name).into_iter().collect(),
            None => {
                let prefix = rest.to_ascii_lowercase();
                self.all()
                    .filter(|c| {
                        std::iter::once(&c.name)
                            .chain(c.aliases.iter())
                            .any(|n| n.to_ascii_lowercase().starts_with(&prefix))
                    })
                    .collect()
            }
        }
    }

    /// What `input` (a line the user submitted) asks for.
    ///
    /// The name runs from after the `/` to the first whitespace (a newline too); the rest,
    /// trimmed, is the arguments. Names are case-sensitive. Plain text, `//text` and a path
    /// (`/usr/bin/env …`, a first word with another `/`) are [`ParseError::NotACommand`].
    pub fn parse(&self, input: &str) -> Result<Invocation, ParseError> {
        let Some(rest) = input.strip_prefix('/') else {
            return Err(ParseError::NotACommand);
        };
        if rest.starts_with('/') {
            return Err(ParseError::NotACommand);
        }
        let (name, args) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        if name.is_empty() {
            return Err(ParseError::MissingName);
        }
        if name.contains('/') {
            return Err(ParseError::NotACommand);
        }
        let args = args.trim();

        if let Some(which) = Builtin::from_name(name) {
            return Ok(Invocation::Builtin {
                which,
                args: args.to_owned(),
            });
        }
        if let Some(custom) = self.custom.iter().find(|c| c.info.answers_to(name)) {
            return Ok(Invocation::Custom {
                name: custom.info.name.clone(),
                prompt: expand_arguments(&custom.body, args),
            });
        }
        if self.external.iter().any(|c| c.name == name) {
            return Ok(Invocation::External {
                name: name.to_owned(),
                args: args.to_owned(),
            });
        }
        Err(ParseError::Unknown {
            name: name.to_owned(),
            suggestions: self.suggestions(name),
        })
    }

    /// Register a command another feature runs: an MCP server's prompt (`mcp__server__prompt`)
    /// or a plugin's command. `source` says whose it is (see
    /// [`CommandSet::remove_external_source`]). Refused if the name is not usable or taken by a
    /// built-in, custom or earlier external command.
    pub fn add_external(
        &mut self,
        name: impl Into<String>,
        description: impl Into<String>,
        source: impl Into<String>,
    ) -> Result<(), AddExternalError> {
        self.add_external_with_hint(name, description, None, source)
    }

    /// [`CommandSet::add_external`] with an argument hint (e.g. an MCP prompt's arguments,
    /// `<file> [focus]`).
    pub fn add_external_with_hint(
        &mut self,
        name: impl Into<String>,
        description: impl Into<String>,
        argument_hint: Option<String>,
        source: impl Into<String>,
    ) -> Result<(), AddExternalError> {
        let name = name.into();
        if !valid_name(&name) {
            return Err(AddExternalError::InvalidName(name));
        }
        if let Some(holder) = self.get(&name) {
            return Err(AddExternalError::Taken {
                by: holder.kind.clone(),
                name,
            });
        }
        let info = CommandInfo {
            name,
            description: description.into(),
            argument_hint,
            kind: CommandKind::External {
                source: source.into(),
            },
            aliases: Vec::new(),
        };
        let at = self
            .external
            .partition_point(|c| c.name.as_str() < info.name.as_str());
        self.external.insert(at, info);
        Ok(())
    }

    /// Remove every external command registered with this `source` (a server that
    /// disconnected or re-listed its prompts). Returns how many were removed.
    pub fn remove_external_source(&mut self, source: &str) -> usize {
        let before = self.external.len();
        self.external
            .retain(|c| !matches!(&c.kind, CommandKind::External { source: s } if s == source));
        before - self.external.len()
    }

    /// Up to 3 names (without `/`) close to `typed`: by edit distance (a transposition counts
    /// once, ASCII case ignored), or names `typed` is the start of; closest first, ties in
    /// listing order.
    fn suggestions(&self, typed: &str) -> Vec<String> {
        let typed = typed.to_ascii_lowercase();
        let limit = (typed.chars().count() / 3).max(2);
        let mut scored: Vec<(usize, usize, &str)> = Vec::new();
        let names = self
            .all()
            .flat_map(|c| std::iter::once(&c.name).chain(c.aliases.iter()));
        for (order, name) in names.enumerate() {
            let lower = name.to_ascii_lowercase();
            let distance = if lower.starts_with(&typed) {
                1
            } else {
                edit_distance(&typed, &lower)
            };
            if distance <= limit {
                scored.push((distance, order, name));
            }
        }
        scored.sort();
        scored
            .into_iter()
            .take(3)
            .map(|(_, _, n)| n.to_owned())
            .collect()
    }
}

/// For an escaped message (`//text`), the message as meant: `/text`. `None` for anything else.
pub fn unescape(input: &str) -> Option<String> {
    input.strip_prefix("//").map(|rest| format!("/{rest}"))
}

/// A custom command's prompt for `args` (the text after the command's name).
///
/// `$ARGUMENTS` becomes all of `args`; `$1`…`$9` the whitespace-separated words of `args`
/// (a missing one becomes empty). Substitution is a single pass: `$` signs inside the
/// arguments are left alone. If `template` has neither and `args` is not empty, the arguments
/// are appended as a last paragraph `ARGUMENTS: <args>` (Claude Code does the same), so they
/// are never silently dropped.
pub fn expand_arguments(template: &str, args: &str) -> String {
    let args = args.trim();
    let words: Vec<&str> = args.split_whitespace().collect();
    let mut out = String::with_capacity(template.len() + args.len());
    let mut used = false;
    let mut rest = template;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix("ARGUMENTS") {
            out.push_str(args);
            used = true;
            rest = tail;
            continue;
        }
        match after.as_bytes().first() {
            Some(digit @ b'1'..=b'9') => {
                let index = usize::from(digit - b'1');
                out.push_str(words.get(index).copied().unwrap_or(""));
                used = true;
                rest = &after[1..];
            }
            _ => {
                out.push('$');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    if !used && !args.is_empty() {
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        out.push_str("ARGUMENTS: ");
        out.push_str(args);
    }
    out
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && !name
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '/')
}

/// Optimal-string-alignment distance between `a` and `b`, in characters: insertions,
/// deletions, substitutions and swaps of neighbours cost 1.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let width = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * width];
    for i in 0..=a.len() {
        d[i * width] = i;
    }
    for (j, cell) in d.iter_mut().enumerate().take(width) {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[(i - 1) * width + j] + 1)
                .min(d[i * width + j - 1] + 1)
                .min(d[(i - 1) * width + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[(i - 2) * width + j - 2] + 1);
            }
            d[i * width + j] = best;
        }
    }
    d[a.len() * width + b.len()]
}
