//! User-invocable skills as slash commands: `/name [args]` sends a user message holding the
//! skill's body and the arguments, as MCP prompts do for their servers. `$ARGUMENTS` in the
//! body is replaced by the arguments; without it, they follow the body on a line
//! `ARGUMENTS: …`.

use crate::plugin::Shared;
use crate::scan::SkillError;
use crate::tool::body;
use futures::FutureExt;
use futures::future::BoxFuture;
use keel_agent::plugin::{CommandError, CommandSource, PluginCommand};
use keel_protocol::text::one_line;
use std::path::PathBuf;
use std::sync::Arc;

/// Why `/name` could not be expanded.
#[derive(Debug, thiserror::Error)]
enum ExpandError {
    /// No user-invocable skill has the name.
    #[error("no skill /{0}")]
    NoSkill(String),
    /// The skill's file could not be read back.
    #[error("skill /{name} ({}): {why}", file.display())]
    Unreadable {
        /// The command.
        name: String,
        /// The skill's file.
        file: PathBuf,
        /// What failed.
        why: SkillError,
    },
}

/// The user-invocable skills of the current skill set.
pub struct SkillCommands {
    pub(crate) shared: Arc<Shared>,
}

/// The message `/name args` sends for `skill` with the body read now.
pub fn message(name: &str, file: &std::path::Path, body: &str, args: &str) -> String {
    let args = args.trim();
    let mut out = format!(
        "Use the skill \"{name}\" (from {}) for this request:\n\n",
        file.display()
    );
    if body.contains("$ARGUMENTS") {
        out.push_str(&body.replace("$ARGUMENTS", args));
    } else {
        out.push_str(body);
        if !args.is_empty() {
            out.push_str("\n\nARGUMENTS: ");
            out.push_str(args);
        }
    }
    out
}

impl CommandSource for SkillCommands {
    fn commands(&self) -> Vec<PluginCommand> {
        self.shared
            .skill_set()
            .skills
            .iter()
            .filter(|s| s.user_invocable)
            .map(|s| PluginCommand {
                name: s.name.clone(),
                description: format!("[skill] {}", one_line(&s.description, 100)),
                argument_hint: s.argument_hint.clone(),
            })
            .collect()
    }

    fn expand<'a>(
        &'a self,
        name: &'a str,
        args: &'a str,
    ) -> BoxFuture<'a, Result<String, CommandError>> {
        let skills = self.shared.skill_set();
        let result = match skills.get(name).filter(|s| s.user_invocable) {
            None => Err(ExpandError::NoSkill(name.to_owned())),
            Some(skill) => body(skill)
                .map(|b| message(&skill.name, &skill.file, &b, args))
                .map_err(|why| ExpandError::Unreadable {
                    name: name.to_owned(),
                    file: skill.file.clone(),
                    why,
                }),
        };
        futures::future::ready(result.map_err(|e| CommandError::Failed(Box::new(e)))).boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::message;
    use std::path::Path;

    #[test]
    fn arguments_fill_the_placeholder_or_follow_the_body() {
        let f = Path::new("/s/x/SKILL.md");
        assert_eq!(
            message("x", f, "Review $ARGUMENTS now.", " src/a.rs "),
            "Use the skill \"x\" (from /s/x/SKILL.md) for this request:\n\nReview src/a.rs now."
        );
        assert!(message("x", f, "Body.", "fast").ends_with("Body.\n\nARGUMENTS: fast"));
        assert!(message("x", f, "Body.", "").ends_with("Body."));
    }
}
