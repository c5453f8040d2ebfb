//! The hooks configuration: Claude Code's `hooks` shape, validated once at load.
//!
//! ```json
//! {"hooks": {"PreToolUse": [{"matcher": "Bash|Write",
//!                            "hooks": [{"type": "command", "command": "…", "timeout": 60}]}],
//!            "Stop": [{"hooks": [{"type": "command", "command": "…"}]}]}}
//! ```
//!
//! [`HooksConfig`] is the value of the `hooks` key (event name → matcher groups). It
//! deserializes from JSON (`.claude/settings.json`) and from keel's TOML `[hooks]` table alike;
//! matchers are compiled and timeouts checked during deserialization, so a bad regex or an
//! unknown event name is an error of the file that holds it. Events Claude Code knows but keel
//! does not run (`Notification`, `SubagentStop`, `PreCompact`, `SessionEnd`) are kept in
//! [`HooksConfig::ignored_events`] so a front end can say so; any other name is an error.

use keel_tools::beneath::{BeneathError, Reader};
use regex::{Regex, RegexBuilder};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Timeout of a command without its own `timeout` (Claude Code's default).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// Longest `timeout` accepted, in seconds (one day).
const MAX_TIMEOUT_SECS: f64 = 86_400.0;

/// Claude Code events keel accepts in a configuration but does not run.
const IGNORED_EVENTS: &[&str] = &["Notification", "SubagentStop", "PreCompact", "SessionEnd"];

/// A hook event keel runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HookEvent {
    /// First step of a session in this process (`source`: `startup` or `resume`).
    SessionStart,
    /// A step claimed a human prompt.
    UserPromptSubmit,
    /// Before a tool call runs (`tools/pre-execute`).
    PreToolUse,
    /// After a tool body ran (`tools/post-execute`).
    PostToolUse,
    /// The turn is about to end (`agent/turn-stopping`).
    Stop,
}

impl HookEvent {
    /// Every event, in the order a session meets them.
    pub const ALL: [HookEvent; 5] = [
        HookEvent::SessionStart,
        HookEvent::UserPromptSubmit,
        HookEvent::PreToolUse,
        HookEvent::PostToolUse,
        HookEvent::Stop,
    ];

    /// Claude Code's spelling (`hook_event_name`, config keys, `hook/invoked`).
    pub fn as_str(self) -> &'static str {
        match self {
            HookEvent::SessionStart => "SessionStart",
            HookEvent::UserPromptSubmit => "UserPromptSubmit",
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::PostToolUse => "PostToolUse",
            HookEvent::Stop => "Stop",
        }
    }

    /// Parse Claude Code's spelling.
    pub fn parse(name: &str) -> Option<HookEvent> {
        HookEvent::ALL.into_iter().find(|e| e.as_str() == name)
    }

    /// True when matchers apply (tool events match tool names, `SessionStart` its source).
    fn uses_matcher(self) -> bool {
        matches!(
            self,
            HookEvent::PreToolUse | HookEvent::PostToolUse | HookEvent::SessionStart
        )
    }
}

/// One `{"type": "command", "command": …, "timeout": …}` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookCommand {
    /// Shell command line, run as `/bin/sh -c COMMAND`.
    pub command: String,
    /// Time limit ([`DEFAULT_TIMEOUT`] when absent).
    pub timeout: Option<Duration>,
    /// The plugin bundle folder it comes from (`None` for keel's and the project's hooks):
    /// the command runs with `CLAUDE_PLUGIN_ROOT` set to it ([`crate::bundles`]).
    pub plugin_root: Option<PathBuf>,
}

/// A matcher: which tool names (or `SessionStart` sources) a group applies to.
///
/// Empty, `*` or absent matches everything. A matcher made only of letters, digits, `_` and `|`
/// is a list of exact names (`Bash|Write`); anything else is a regex searched in the name
/// (`mcp__.*`, `Notebook.*`). Both compare case-insensitively, so Claude's `Bash` matches
/// keel's `bash`; see [`super::names`] for names that differ by more than case.
#[derive(Debug, Clone)]
pub struct Matcher {
    source: String,
    kind: MatcherKind,
}

#[derive(Debug, Clone)]
enum MatcherKind {
    All,
    Names(Vec<String>),
    Regex(Regex),
}

impl Matcher {
    /// Compile `source`.
    pub fn new(source: &str) -> Result<Matcher, regex::Error> {
        let trimmed = source.trim();
        let kind = if trimmed.is_empty() || trimmed == "*" {
            MatcherKind::All
        } else if trimmed
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '|')
        {
            MatcherKind::Names(
                trimmed
                    .split('|')
                    .filter(|s| !s.is_empty())
                    .map(str::to_ascii_lowercase)
                    .collect(),
            )
        } else {
            MatcherKind::Regex(RegexBuilder::new(trimmed).case_insensitive(true).build()?)
        };
        Ok(Matcher {
            source: source.to_owned(),
            kind,
        })
    }

    /// The matcher as written.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// True when any of `names` (e.g. keel's name and Claude's alias) matches.
    pub fn matches_any(&self, names: &[&str]) -> bool {
        match &self.kind {
            MatcherKind::All => true,
            MatcherKind::Names(list) => names
                .iter()
                .any(|n| list.iter().any(|m| m.eq_ignore_ascii_case(n))),
            MatcherKind::Regex(re) => names.iter().any(|n| re.is_match(n)),
        }
    }
}

/// A matcher and the commands it selects.
#[derive(Debug, Clone)]
pub struct MatcherGroup {
    /// `None` matches everything.
    pub matcher: Option<Matcher>,
    /// Commands, in configuration order.
    pub hooks: Vec<HookCommand>,
}

/// Validated command hooks: event → matcher groups, in configuration order.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(try_from = "RawHooks")]
pub struct HooksConfig {
    groups: BTreeMap<HookEvent, Vec<MatcherGroup>>,
    ignored: Vec<String>,
}

impl HooksConfig {
    /// Parse the value of a `hooks` key (JSON; TOML converted to JSON works too). `origin`
    /// names where it came from in errors (a path, `keel config`).
    pub fn from_value(
        value: serde_json::Value,
        origin: &str,
    ) -> Result<HooksConfig, HooksConfigError> {
        serde_json::from_value(value).map_err(|e| HooksConfigError::Invalid {
            origin: origin.to_owned(),
            message: e.to_string(),
        })
    }

    /// True when no event has a command.
    pub fn is_empty(&self) -> bool {
        self.groups
            .values()
            .all(|g| g.iter().all(|g| g.hooks.is_empty()))
    }

    /// Event names present in the configuration that keel does not run.
    pub fn ignored_events(&self) -> &[String] {
        &self.ignored
    }

    /// The groups of `event`, in order.
    pub fn groups(&self, event: HookEvent) -> &[MatcherGroup] {
        self.groups.get(&event).map_or(&[], Vec::as_slice)
    }

    /// True when `event` has at least one command.
    pub fn has(&self, event: HookEvent) -> bool {
        self.groups(event).iter().any(|g| !g.hooks.is_empty())
    }

    /// Append `other`'s groups after this one's, event by event (how Claude Code combines
    /// settings files: every matching hook of every file runs).
    pub fn merge(&mut self, other: HooksConfig) {
        for (event, groups) in other.groups {
            self.groups.entry(event).or_default().extend(groups);
        }
        for name in other.ignored {
            if !self.ignored.contains(&name) {
                self.ignored.push(name);
            }
        }
    }

    /// Change every command in place (a bundle's `${CLAUDE_PLUGIN_ROOT}` expanded).
    pub(crate) fn each_command(&mut self, mut f: impl FnMut(&mut HookCommand)) {
        for groups in self.groups.values_mut() {
            for group in groups {
                group.hooks.iter_mut().for_each(&mut f);
            }
        }
    }

    /// The commands of `event` whose matcher accepts any of `names` (ignored for events without
    /// matchers), without duplicates (an identical command line runs once), in order.
    pub fn commands(&self, event: HookEvent, names: &[&str]) -> Vec<HookCommand> {
        let mut out: Vec<HookCommand> = Vec::new();
        for group in self.groups(event) {
            let selected = !event.uses_matcher()
                || group.matcher.as_ref().is_none_or(|m| m.matches_any(names));
            if !selected {
                continue;
            }
            for cmd in &group.hooks {
                if !out.iter().any(|c| c.command == cmd.command) {
                    out.push(cmd.clone());
                }
            }
        }
        out
    }
}

/// Why a hooks configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum HooksConfigError {
    /// Returned by [`load_project_settings`]: a settings file exists but cannot be read. Fix
    /// its permissions or remove it.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Returned by [`load_project_settings`]: a settings file leads out of the workspace (a
    /// symlink), is not a regular file (a FIFO, a directory) or is over
    /// [`MAX_SETTINGS_FILE_BYTES`]; nothing of it was read. Replace or remove it.
    #[error("settings file {} not read: {}", path.display(), refused.reason())]
    NotRead {
        /// The file.
        path: PathBuf,
        /// Why it was refused.
        refused: BeneathError,
    },
    /// Returned by [`load_project_settings`]: a settings file is not valid JSON, or its
    /// `hooks` do not have Claude Code's shape (unknown event, bad matcher regex, a command
    /// without `command`…). The message names the line and column; fix the file.
    #[error("{}:{line}:{column}: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong.
        message: String,
    },
    /// Returned by [`HooksConfig::from_value`]: the value does not have the shape.
    #[error("{origin}: hooks: {message}")]
    Invalid {
        /// Where the value came from.
        origin: String,
        /// What is wrong.
        message: String,
    },
}

impl HooksConfigError {
    /// The file involved, when there is one.
    pub fn path(&self) -> Option<&Path> {
        match self {
            HooksConfigError::Read { path, .. }
            | HooksConfigError::NotRead { path, .. }
            | HooksConfigError::Parse { path, .. } => Some(path),
            HooksConfigError::Invalid { .. } => None,
        }
    }
}

/// Largest project settings file read (1 MiB); a larger one is [`HooksConfigError::NotRead`].
pub const MAX_SETTINGS_FILE_BYTES: u64 = 1024 * 1024;

/// The project's Claude Code settings files, in the order they are merged.
pub const PROJECT_SETTINGS_FILES: [&str; 2] =
    [".claude/settings.json", ".claude/settings.local.json"];

/// Read the `hooks` of `cwd/.claude/settings.json` and then `cwd/.claude/settings.local.json`
/// (merged in that order). `Ok(None)` when neither file exists or neither has `hooks`; other
/// keys of the files are ignored. Each file is opened beneath `cwd` and must be a regular file
/// of at most [`MAX_SETTINGS_FILE_BYTES`]; a link out of `cwd`, a FIFO or a larger file is
/// never read: [`HooksConfigError::NotRead`] names it.
pub fn load_project_settings(cwd: &Path) -> Result<Option<HooksConfig>, HooksConfigError> {
    load_project_settings_where(cwd, &|_| true)
}

/// [`load_project_settings`] of the files `read` accepts (given each absolute path): a file
/// it refuses is left alone as if it did not exist (one that changed since the workspace was
/// trusted, docs/trust.md).
pub fn load_project_settings_where(
    cwd: &Path,
    read: &dyn Fn(&Path) -> bool,
) -> Result<Option<HooksConfig>, HooksConfigError> {
    let mut merged: Option<HooksConfig> = None;
    // Opened beneath `cwd`: a link out of it is never followed.
    let reader = match Reader::beneath(cwd) {
        Ok(reader) => reader,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(refused) => {
            return Err(HooksConfigError::NotRead {
                path: cwd.to_path_buf(),
                refused,
            });
        }
    };
    for rel in PROJECT_SETTINGS_FILES {
        let path = cwd.join(rel);
        if !read(&path) {
            continue;
        }
        let text = match reader.read_text(&path, MAX_SETTINGS_FILE_BYTES) {
            Ok(t) => t,
            Err(e) if e.is_not_found() => continue,
            Err(BeneathError::Io { source, .. }) => {
                return Err(HooksConfigError::Read { path, source });
            }
            Err(refused) => return Err(HooksConfigError::NotRead { path, refused }),
        };
        if let Some(config) = parse_settings(&path, &text)? {
            match &mut merged {
                Some(m) => m.merge(config),
                None => merged = Some(config),
            }
        }
    }
    Ok(merged)
}

/// Parse one settings file's text (`path` only names it in errors).
pub fn parse_settings(path: &Path, text: &str) -> Result<Option<HooksConfig>, HooksConfigError> {
    #[derive(Deserialize)]
    struct Settings {
        #[serde(default)]
        hooks: Option<HooksConfig>,
    }
    serde_json::from_str::<Settings>(text)
        .map(|s| s.hooks)
        .map_err(|e| HooksConfigError::Parse {
            path: path.to_path_buf(),
            line: e.line(),
            column: e.column(),
            message: strip_position(&e.to_string()),
        })
}

/// serde_json appends " at line L column C"; the error carries them separately.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_owned(),
        None => message.to_owned(),
    }
}

/// The shape as written.
type RawHooks = BTreeMap<String, Vec<RawGroup>>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGroup {
    #[serde(default)]
    matcher: Option<String>,
    #[serde(default)]
    hooks: Vec<RawCommand>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCommand {
    #[serde(rename = "type")]
    kind: String,
    command: String,
    #[serde(default)]
    timeout: Option<f64>,
}

/// Why a `hooks` value that parsed as JSON does not have the shape (serde reports it as a
/// custom message).
#[derive(Debug, thiserror::Error)]
enum ShapeError {
    /// An event keel neither runs nor knowingly ignores.
    #[error("unknown hook event {name:?} (keel runs {})", known_events())]
    UnknownEvent { name: String },
    /// A group's matcher is not a valid regex.
    #[error("{at}: matcher {matcher:?} is not a valid regex: {error}")]
    BadMatcher {
        at: String,
        matcher: String,
        error: regex::Error,
    },
    /// A hook of a type other than `command`.
    #[error("{at}: hook type {kind:?} is not supported (keel runs type \"command\")")]
    UnsupportedType { at: String, kind: String },
    /// A hook whose command is blank.
    #[error("{at}: command is empty")]
    EmptyCommand { at: String },
    /// A timeout out of range.
    #[error(
        "{at}: timeout {timeout} must be a number of seconds above 0 and at most {}",
        MAX_TIMEOUT_SECS
    )]
    BadTimeout { at: String, timeout: f64 },
}

/// The events keel runs, for messages.
fn known_events() -> String {
    let known: Vec<&str> = HookEvent::ALL.iter().map(|e| e.as_str()).collect();
    known.join(", ")
}

impl TryFrom<RawHooks> for HooksConfig {
    type Error = ShapeError;

    fn try_from(raw: RawHooks) -> Result<HooksConfig, ShapeError> {
        let mut config = HooksConfig::default();
        for (name, raw_groups) in raw {
            let Some(event) = HookEvent::parse(&name) else {
                if IGNORED_EVENTS.contains(&name.as_str()) {
                    config.ignored.push(name);
                    continue;
                }
                return Err(ShapeError::UnknownEvent { name });
            };
            let mut groups = Vec::with_capacity(raw_groups.len());
            for (i, g) in raw_groups.into_iter().enumerate() {
                let at = format!("{name}[{i}]");
                let matcher = match g.matcher {
                    Some(m) => match Matcher::new(&m) {
                        Ok(matcher) => Some(matcher),
                        Err(error) => {
                            return Err(ShapeError::BadMatcher {
                                at,
                                matcher: m,
                                error,
                            });
                        }
                    },
                    None => None,
                };
                let mut hooks = Vec::with_capacity(g.hooks.len());
                for (j, c) in g.hooks.into_iter().enumerate() {
                    hooks.push(command(format!("{at}.hooks[{j}]"), c)?);
                }
                groups.push(MatcherGroup { matcher, hooks });
            }
            config.groups.insert(event, groups);
        }
        Ok(config)
    }
}

fn command(at: String, c: RawCommand) -> Result<HookCommand, ShapeError> {
    if c.kind != "command" {
        return Err(ShapeError::UnsupportedType { at, kind: c.kind });
    }
    if c.command.trim().is_empty() {
        return Err(ShapeError::EmptyCommand { at });
    }
    let timeout = match c.timeout {
        None => None,
        Some(t) if t > 0.0 && t <= MAX_TIMEOUT_SECS => Duration::try_from_secs_f64(t).ok(),
        Some(timeout) => return Err(ShapeError::BadTimeout { at, timeout }),
    };
    Ok(HookCommand {
        command: c.command,
        timeout,
        plugin_root: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matchers_follow_claude_code() {
        let all = Matcher::new("").unwrap();
        assert!(all.matches_any(&["anything"]));
        assert!(Matcher::new("*").unwrap().matches_any(&["bash"]));
        let names = Matcher::new("Bash|Write").unwrap();
        assert!(names.matches_any(&["bash"]));
        assert!(names.matches_any(&["write"]));
        assert!(
            !names.matches_any(&["bash_extra"]),
            "plain names match exactly"
        );
        let re = Matcher::new("mcp__.*").unwrap();
        assert!(re.matches_any(&["mcp__memory__read"]));
        assert!(!re.matches_any(&["read"]));
        assert!(Matcher::new("(").is_err());
    }

    #[test]
    fn unknown_events_fail_and_claude_only_events_are_listed() {
        let bad = serde_json::json!({"PreTooluse": []});
        let err = HooksConfig::from_value(bad, "test")
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown hook event \"PreTooluse\""), "{err}");
        let ok = serde_json::json!({"Notification": [{"hooks": [{"type": "command", "command": "true"}]}]});
        let config = HooksConfig::from_value(ok, "test").unwrap();
        assert!(config.is_empty());
        assert_eq!(config.ignored_events(), ["Notification".to_owned()]);
    }

    #[test]
    fn commands_are_selected_and_deduplicated_in_order() {
        let v = serde_json::json!({"PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "a"}, {"type": "command", "command": "b", "timeout": 5}]},
            {"hooks": [{"type": "command", "command": "a"}, {"type": "command", "command": "c"}]},
            {"matcher": "Write", "hooks": [{"type": "command", "command": "d"}]}
        ]});
        let config = HooksConfig::from_value(v, "test").unwrap();
        let got: Vec<String> = config
            .commands(HookEvent::PreToolUse, &["bash"])
            .into_iter()
            .map(|c| c.command)
            .collect();
        assert_eq!(got, ["a", "b", "c"]);
        assert_eq!(
            config.commands(HookEvent::PreToolUse, &["bash"])[1].timeout,
            Some(Duration::from_secs(5))
        );
    }

    #[test]
    fn bad_json_names_file_line_and_column() {
        let err = parse_settings(
            Path::new("/p/.claude/settings.json"),
            "{\n  \"hooks\": {\n    \"Stop\": [,]\n  }\n}",
        )
        .unwrap_err();
        let HooksConfigError::Parse { line, column, .. } = &err else {
            panic!("{err:?}")
        };
        assert_eq!((*line, *column), (3, 14));
        assert!(
            err.to_string()
                .starts_with("/p/.claude/settings.json:3:14: "),
            "{err}"
        );
    }
}
