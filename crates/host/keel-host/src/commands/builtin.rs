//! keel's built-in slash commands (names, descriptions, argument hints, the order `/help`
//! lists them in) and the words `/trust` takes.

use super::{CommandInfo, CommandKind};

/// keel's built-in commands, in the order they are listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Builtin {
    /// `/help`: the commands and keys.
    Help,
    /// `/new` (alias `/clear`): a new session.
    New,
    /// `/resume [SESSION]`: resume a session.
    Resume,
    /// `/sessions`: list the sessions.
    Sessions,
    /// `/compact`: compact the conversation.
    Compact,
    /// `/model [NAME]`: show or switch the model.
    Model,
    /// `/plan`: toggle plan mode.
    Plan,
    /// `/todo`: the todo list.
    Todo,
    /// `/status`: the session's status.
    Status,
    /// `/diff`: the workspace's changes.
    Diff,
    /// `/trust [yes|no]`: show whether the workspace's own files (hooks, MCP servers, widening
    /// configuration) may take effect, or record the user's decision (`yes`/`on`,
    /// `no`/`off`/`revoke`; see [`TrustArg`]). The front end records it and rebuilds its agent.
    Trust,
    /// `/quit` (alias `/exit`): leave keel.
    Quit,
}

impl Builtin {
    /// Every built-in, in listing order.
    pub const ALL: [Builtin; 12] = [
        Builtin::Help,
        Builtin::New,
        Builtin::Resume,
        Builtin::Sessions,
        Builtin::Compact,
        Builtin::Model,
        Builtin::Plan,
        Builtin::Todo,
        Builtin::Status,
        Builtin::Diff,
        Builtin::Trust,
        Builtin::Quit,
    ];

    /// The name typed after `/`.
    pub fn name(self) -> &'static str {
        match self {
            Builtin::Help => "help",
            Builtin::New => "new",
            Builtin::Resume => "resume",
            Builtin::Sessions => "sessions",
            Builtin::Compact => "compact",
            Builtin::Model => "model",
            Builtin::Plan => "plan",
            Builtin::Todo => "todo",
            Builtin::Status => "status",
            Builtin::Diff => "diff",
            Builtin::Trust => "trust",
            Builtin::Quit => "quit",
        }
    }

    /// Other names that invoke the same command (`exit` for [`Builtin::Quit`], `clear` for
    /// [`Builtin::New`]).
    pub fn aliases(self) -> &'static [&'static str] {
        match self {
            Builtin::New => &["clear"],
            Builtin::Quit => &["exit"],
            _ => &[],
        }
    }

    /// A one-line description.
    pub fn description(self) -> &'static str {
        match self {
            Builtin::Help => "Show the commands and keys",
            Builtin::New => "Start a new session (a fresh conversation)",
            Builtin::Resume => "Resume a session (the most recent if none is named)",
            Builtin::Sessions => "List the sessions",
            Builtin::Compact => "Compact the conversation now",
            Builtin::Model => "Show the model, or switch to NAME",
            Builtin::Plan => "Toggle plan mode",
            Builtin::Todo => "Show the todo list",
            Builtin::Status => "Show the session's status",
            Builtin::Diff => "Show the changes in the workspace",
            Builtin::Trust => {
                "Show whether this workspace's hooks, MCP servers and settings may run; yes or no decides"
            }
            Builtin::Quit => "Quit keel",
        }
    }

    /// What the arguments look like, for commands that take any.
    pub fn argument_hint(self) -> Option<&'static str> {
        match self {
            Builtin::Resume => Some("[SESSION]"),
            Builtin::Model => Some("[NAME]"),
            Builtin::Trust => Some("[yes|no]"),
            _ => None,
        }
    }

    /// The built-in called `name` (without `/`), by its name or an alias.
    pub fn from_name(name: &str) -> Option<Builtin> {
        Builtin::ALL
            .into_iter()
            .find(|b| b.name() == name || b.aliases().contains(&name))
    }

    pub(super) fn info(self) -> CommandInfo {
        CommandInfo {
            name: self.name().to_owned(),
            description: self.description().to_owned(),
            argument_hint: self.argument_hint().map(str::to_owned),
            kind: CommandKind::Builtin(self),
            aliases: self.aliases().iter().map(|a| (*a).to_owned()).collect(),
        }
    }
}

/// What `/trust ARGS` asks for ([`Builtin::Trust`]), front-end neutral: the terminal UI and an
/// editor (ACP) read the same words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrustArg {
    /// No argument: show the workspace's decision and what its files hold.
    Show,
    /// Record this decision for the workspace: `yes`, `on` (trusted); `no`, `off`, `revoke`
    /// (untrusted). `trusted` and `untrusted` are accepted too.
    Record(crate::trust::ProjectTrust),
}

/// `/trust` was given an argument it does not know; the message names it and the accepted
/// words. The front end shows it and changes nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "/trust {0:?}: expected no argument (show), yes (trust this workspace) or no (keep its files inert)"
)]
pub struct UnknownTrustArg(pub String);

impl TrustArg {
    /// The decision `args` (the text after `/trust`, any case, surrounding space ignored) asks
    /// for.
    pub fn parse(args: &str) -> Result<TrustArg, UnknownTrustArg> {
        use crate::trust::ProjectTrust;
        match args.trim().to_ascii_lowercase().as_str() {
            "" => Ok(TrustArg::Show),
            "yes" | "on" | "trusted" => Ok(TrustArg::Record(ProjectTrust::Trusted)),
            "no" | "off" | "revoke" | "untrusted" => Ok(TrustArg::Record(ProjectTrust::Untrusted)),
            _ => Err(UnknownTrustArg(args.trim().to_owned())),
        }
    }
}
