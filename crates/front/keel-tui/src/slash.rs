//! What the editor offers and runs after `/` and `@`: slash commands (built-in, custom from
//! Markdown files) and workspace paths (gitignore-aware).

pub use crate::app::UI_COMMANDS;
use crate::commands::{Builtin, CommandKind, CommandSet, Invocation, ParseError};
use keel_agent::plugin::PluginCommand;
use std::path::Path;

/// Whose the UI's own commands are, among the external ones.
const UI_SOURCE: &str = "keel";

/// What a slash command does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// A built-in command.
    Builtin(Builtin),
    /// A prompt to send (a custom command, expanded).
    Prompt(String),
    /// One of the UI's own commands (`/cost`, `/mcp`: [`UI_COMMANDS`]), by name.
    Ui(String),
    /// A plugin's command (an MCP server prompt), to expand through the agent.
    External {
        /// Its name.
        name: String,
        /// The text after it.
        args: String,
    },
}

/// The commands of one agent: built-ins, custom Markdown commands (read once, when the agent
/// is built) and the agent's plugin commands.
#[derive(Debug, Default)]
pub struct Slash {
    set: CommandSet,
}

impl Slash {
    /// Read the custom commands of `cwd`, `keel_home` and `$HOME`, and add `externals`.
    pub fn load(cwd: &Path, keel_home: Option<&Path>, externals: &[PluginCommand]) -> Slash {
        let mut set = CommandSet::load_for(cwd, keel_home);
        // The UI's own commands, before the plugins' (a custom command keeps its name).
        for (name, description) in UI_COMMANDS {
            let _ = set.add_external_with_hint(name, description, None, UI_SOURCE);
        }
        for c in externals {
            // A name taken by a built-in or custom command stays theirs.
            let _ = set.add_external_with_hint(
                c.name.clone(),
                c.description.clone(),
                c.argument_hint.clone(),
                "plugin",
            );
        }
        Slash { set }
    }

    /// Completions for `typed` (starting with `/`): `(name, description)`.
    pub fn complete(&self, typed: &str) -> Vec<(String, String)> {
        let prefix = typed.trim_start_matches('/');
        self.set
            .complete(typed)
            .into_iter()
            .filter(|c| c.name.starts_with(prefix))
            .map(|c| (format!("/{}", c.name), c.description.clone()))
            .collect()
    }

    /// Run `/name args`; `Err`: why the line is not a command this agent knows.
    pub fn parse(&self, name: &str, args: &str) -> Result<Action, ParseError> {
        let line = if args.is_empty() {
            name.to_owned()
        } else {
            format!("{name} {args}")
        };
        Ok(match self.set.parse(&line)? {
            Invocation::Builtin { which, .. } => Action::Builtin(which),
            Invocation::Custom { prompt, .. } => Action::Prompt(prompt),
            Invocation::External { name, args } => {
                let ours = self.set.get(&name).is_some_and(
                    |c| matches!(&c.kind, CommandKind::External { source } if source == UI_SOURCE),
                );
                if ours {
                    Action::Ui(name)
                } else {
                    Action::External { name, args }
                }
            }
        })
    }

    /// `/help`: commands and keys.
    pub fn help(&self) -> String {
        let mut s = String::from("Commands:");
        for c in self.set.all() {
            s.push_str(&format!("\n  /{:<14} {}", c.name, c.description));
        }
        s.push_str(
            "\nKeys: Enter send · Alt-Enter or Ctrl-J newline · Ctrl-S steer the running turn · \
             Up/Down history · Tab complete · @path attach a path · Shift-Tab plan mode · \
             Esc Esc rewind · Ctrl-R show reasoning · PgUp/PgDn scroll · Ctrl-C cancel (twice: exit) · Ctrl-D exit",
        );
        s
    }
}

/// Workspace paths starting with `partial` (files and directories, gitignore-aware), at
/// most 8, directories with a trailing `/` ([`keel_tools::complete::complete_path`]).
pub fn complete_path(cwd: &Path, partial: &str) -> Vec<String> {
    keel_tools::complete::complete_path(cwd, partial, 8)
}
