//! What the editor offers and runs after `/` and `@`: slash commands (built-in, custom from
//! Markdown files) and workspace paths (gitignore-aware).

use keel_agent::plugin::PluginCommand;
use std::path::Path;

/// What a slash command does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// A built-in command, by name (`help`, `compact`…).
    Builtin(&'static str),
    /// A prompt to send (a custom command, expanded).
    Prompt(String),
    /// A plugin's command (an MCP server prompt), to expand through the agent.
    External {
        /// Its name.
        name: String,
        /// The text after it.
        args: String,
    },
}

/// The command set: built-ins, custom Markdown commands, and `externals` (the agent's plugin
/// commands).
fn set(cwd: &Path, externals: &[PluginCommand]) -> crate::commands::CommandSet {
    let mut set = crate::commands::CommandSet::load(cwd, &keel_home(), home().as_deref());
    for c in externals {
        // A name taken by a built-in or custom command stays theirs.
        let _ = set.add_external_with_hint(
            c.name.clone(),
            c.description.clone(),
            c.argument_hint.clone(),
            "plugin",
        );
    }
    set
}

/// The built-in commands: name, description.
pub const BUILTINS: [(&str, &str); 13] = [
    ("help", "commands and keys"),
    ("new", "start a new session"),
    (
        "resume",
        "continue a session: /resume [ID] (latest without one)",
    ),
    ("sessions", "this directory's sessions"),
    ("compact", "compact the history now"),
    ("model", "show or switch the model: /model [NAME]"),
    ("plan", "toggle plan mode (also Shift-Tab)"),
    ("todo", "the todo list"),
    ("status", "model, context, cache share, tokens"),
    ("diff", "git diff of the workspace"),
    ("review", "review the workspace change"),
    ("quit", "leave (also /exit, Ctrl-D)"),
    ("exit", "leave"),
];

/// Completions for `typed` (starting with `/`): `(name, description)`.
pub fn complete(typed: &str, cwd: &Path, externals: &[PluginCommand]) -> Vec<(String, String)> {
    let prefix = typed.trim_start_matches('/');
    let set = set(cwd, externals);
    set.complete(typed)
        .into_iter()
        .filter(|c| c.name.starts_with(prefix))
        .map(|c| (format!("/{}", c.name), c.description.clone()))
        .collect()
}

fn keel_home() -> std::path::PathBuf {
    std::env::var_os("KEEL_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| home().map(|h| h.join(".keel")))
        .unwrap_or_default()
}

fn home() -> Option<std::path::PathBuf> {
    std::env::var_os("HOME").map(std::path::PathBuf::from)
}

/// Run `/name args`.
pub fn parse(
    name: &str,
    args: &str,
    cwd: &Path,
    externals: &[PluginCommand],
) -> Result<Action, String> {
    let set = set(cwd, externals);
    let line = if args.is_empty() {
        name.to_owned()
    } else {
        format!("{name} {args}")
    };
    match set.parse(&line) {
        Ok(crate::commands::Invocation::Builtin { which, .. }) => {
            let name = which.name();
            BUILTINS
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(n, _)| Action::Builtin(n))
                .ok_or_else(|| format!("/{name} is not available here"))
        }
        Ok(crate::commands::Invocation::Custom { prompt, .. }) => Ok(Action::Prompt(prompt)),
        Ok(crate::commands::Invocation::External { name, args }) => {
            Ok(Action::External { name, args })
        }
        Err(e) => Err(e.to_string()),
    }
}

/// `/help`: commands and keys.
pub fn help(cwd: &Path, externals: &[PluginCommand]) -> String {
    let set = set(cwd, externals);
    let mut s = String::from("Commands:");
    for c in set.all() {
        s.push_str(&format!("\n  /{:<14} {}", c.name, c.description));
    }
    s.push_str(
        "\nKeys: Enter send · Alt-Enter or Ctrl-J newline · Ctrl-S steer the running turn · \
         Up/Down history · Tab complete · @path attach a path · Shift-Tab plan mode · \
         Ctrl-R show reasoning · PgUp/PgDn scroll · Ctrl-C cancel (twice: exit) · Ctrl-D exit",
    );
    s
}

/// Workspace paths starting with `partial` (files and directories, gitignore-aware), at
/// most 8, directories with a trailing `/`.
pub fn complete_path(cwd: &Path, partial: &str) -> Vec<String> {
    let (dir, stem) = match partial.rfind('/') {
        Some(i) => (&partial[..=i], &partial[i + 1..]),
        None => ("", partial),
    };
    let base = cwd.join(dir);
    let walker = ignore::WalkBuilder::new(&base)
        .max_depth(Some(1))
        .hidden(!stem.starts_with('.'))
        .build();
    let mut out: Vec<String> = walker
        .filter_map(Result::ok)
        .filter(|e| e.depth() == 1)
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_owned();
            if !name.starts_with(stem) {
                return None;
            }
            let slash = if e.file_type().is_some_and(|t| t.is_dir()) {
                "/"
            } else {
                ""
            };
            Some(format!("{dir}{name}{slash}"))
        })
        .collect();
    out.sort();
    out.truncate(8);
    out
}
