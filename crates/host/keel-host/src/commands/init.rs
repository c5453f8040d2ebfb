//! `/init`: a prompt asking the model to study the repository and write its `AGENTS.md`, as
//! Codex's and Claude Code's `/init` do. An agent command, so every front end offers it (the
//! terminal UI, editors over ACP, the web app); a workspace's own `init` command (a Markdown
//! file) keeps the name.

use keel_agent::plugin::{CommandError, CommandSource, PluginCommand};

/// The command's name.
pub const INIT: &str = "init";

/// What `/init` sends.
pub const INIT_PROMPT: &str = "Study this repository and write an AGENTS.md file at the root of \
the workspace: a guide for coding agents (and new contributors) working here. Read the build \
files, the README and other docs, the CI configuration and a sample of the source before \
writing. Include:\n\
- how to build, test (all tests and a single test), lint and format, as exact commands;\n\
- the layout: the main directories and crates or packages, and what each holds;\n\
- the conventions the code follows (style, naming, error handling, testing, commits) that \
are not obvious from one file;\n\
- anything an agent must not do or must check before it is done.\n\
Keep it short and concrete: commands and paths over prose, no generic advice. If an \
AGENTS.md exists already, do not overwrite it silently: say so, show what you would change, \
and edit it only where it is wrong or missing something.";

/// The `/init` command source.
#[derive(Debug, Default)]
pub struct InitCommand;

impl CommandSource for InitCommand {
    fn commands(&self) -> Vec<PluginCommand> {
        vec![PluginCommand {
            name: INIT.into(),
            description: "Ask the model to study the repository and write AGENTS.md".into(),
            argument_hint: None,
        }]
    }

    fn expand<'a>(
        &'a self,
        _name: &'a str,
        args: &'a str,
    ) -> futures::future::BoxFuture<'a, Result<String, CommandError>> {
        // Words after `/init` are the person's: they follow the prompt.
        let prompt = match args.trim() {
            "" => INIT_PROMPT.to_owned(),
            more => format!("{INIT_PROMPT}\n\n{more}"),
        };
        Box::pin(async move { Ok(prompt) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_expands_to_the_prompt_and_keeps_what_follows() {
        let init = InitCommand;
        assert_eq!(init.commands()[0].name, "init");
        let plain = futures::executor::block_on(init.expand("init", "")).unwrap();
        assert_eq!(plain, INIT_PROMPT);
        let more = futures::executor::block_on(init.expand("init", " focus on the CLI ")).unwrap();
        assert!(more.starts_with(INIT_PROMPT) && more.ends_with("\n\nfocus on the CLI"));
    }
}
