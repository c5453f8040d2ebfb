//! `/schedule`: the person's own handle on a session's schedules, beside the model's tools
//! (the web app's automation page and the terminal UI use it):
//!
//! - `/schedule` or `/schedule list`: the active schedules;
//! - `/schedule every SECONDS PROMPT`, `/schedule in SECONDS PROMPT`, `/schedule at TIME
//!   PROMPT` (RFC 3339): a new schedule, checked as `schedule_create` checks it;
//! - `/schedule delete ID`: remove one.
//!
//! Every form acts at once ([`CommandSource::act`]); nothing goes to the model.

use crate::service::{Shared, When};
use crate::state::{Schedule, human, rfc3339};
use futures::future::BoxFuture;
use keel_agent::plugin::{CommandChoice, CommandError, CommandSource, PluginCommand};
use std::sync::Arc;

/// The command's name.
pub const NAME: &str = "schedule";

/// The `/schedule` command of one session.
pub struct ScheduleCommand {
    /// The session's schedules.
    pub shared: Arc<Shared>,
}

fn failed(message: String) -> CommandError {
    CommandError::Failed(message.into())
}

/// One schedule, as a line.
fn line(s: &Schedule) -> String {
    let how = match s.every_seconds {
        Some(every) => format!(
            "every {}",
            human(
                i64::try_from(every)
                    .unwrap_or(i64::MAX)
                    .saturating_mul(1000)
            )
        ),
        None => "once".to_owned(),
    };
    format!("{} ({how}, next {}): {}", s.id, rfc3339(s.due_ms), s.prompt)
}

impl ScheduleCommand {
    fn run(&self, args: &str) -> Result<String, CommandError> {
        let args = args.trim();
        let (verb, rest) = args.split_once(char::is_whitespace).unwrap_or((args, ""));
        let rest = rest.trim();
        let number = |what: &str, text: &str| {
            text.parse::<u64>()
                .map_err(|_| failed(format!("{what}: {text:?} is not a whole number of seconds")))
        };
        let create = |when: When, prompt: &str| {
            let s = self
                .shared
                .create(prompt, when)
                .map_err(|e| failed(e.to_string()))?;
            Ok(format!("scheduled {}", line(&s)))
        };
        match verb {
            "" | "list" => {
                let fold = self.shared.snapshot();
                if fold.active.is_empty() {
                    return Ok("no schedules in this session".to_owned());
                }
                Ok(fold.active.iter().map(line).collect::<Vec<_>>().join("\n"))
            }
            "every" | "in" | "at" => {
                let (when, prompt) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
                let when = match verb {
                    "every" => When::Every(number(verb, when)?),
                    "in" => When::After(number(verb, when)?),
                    _ => When::At(when.to_owned()),
                };
                create(when, prompt)
            }
            "delete" => {
                let s = self
                    .shared
                    .delete(rest)
                    .map_err(|e| failed(format!("delete: {e}")))?;
                Ok(format!("deleted {}", line(&s)))
            }
            other => Err(failed(format!(
                "{other:?}: say list, every SECONDS PROMPT, in SECONDS PROMPT, at TIME PROMPT \
                 or delete ID"
            ))),
        }
    }
}

impl CommandSource for ScheduleCommand {
    fn commands(&self) -> Vec<PluginCommand> {
        vec![PluginCommand {
            name: NAME.to_owned(),
            description:
                "this session's schedules: list, every/in SECONDS PROMPT, at TIME PROMPT, delete ID"
                    .to_owned(),
            argument_hint: Some(
                "[list | every N PROMPT | in N PROMPT | at TIME PROMPT | delete ID]".to_owned(),
            ),
        }]
    }

    fn expand<'a>(
        &'a self,
        _name: &'a str,
        args: &'a str,
    ) -> BoxFuture<'a, Result<String, CommandError>> {
        Box::pin(async move {
            Err(self
                .run(args)
                .err()
                .unwrap_or_else(|| failed("/schedule acts at once".into())))
        })
    }

    fn act(&self, _name: &str, args: &str) -> Option<Result<String, CommandError>> {
        Some(self.run(args))
    }

    fn choices(&self, _name: &str) -> Vec<CommandChoice> {
        self.shared
            .snapshot()
            .active
            .iter()
            .map(|s| CommandChoice {
                args: format!("delete {}", s.id),
                label: line(s),
                detail: s.prompt.clone(),
                seq: None,
                text: None,
            })
            .collect()
    }
}
