//! Server prompts as slash commands for interactive front ends: `/mcp__<server>__<prompt>
//! ARGS` expands to the prompt's text (`prompts/get`). The words after the name fill the
//! prompt's arguments in order; the last argument takes the rest of the text.

use super::runtime::McpRuntime;
use super::server::{CallFailure, Server};
use super::tool::wire_name;
use futures::FutureExt;
use futures::future::BoxFuture;
use keel_agent::plugin::{CommandError, CommandSource, PluginCommand};
use serde_json::{Map, Value};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// Why a server prompt gave no text.
#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    /// No ready server offers this command.
    #[error("no MCP prompt /{name}")]
    NoPrompt {
        /// The command's name.
        name: String,
    },
    /// The server answered with an empty prompt.
    #[error("MCP server '{server}': the prompt /{name} has no text")]
    NoText {
        /// The server's name.
        server: String,
        /// The command's name.
        name: String,
    },
    /// The server did not answer `prompts/get` in time.
    #[error("MCP server '{server}': no answer to prompts/get within {} s", .after.as_secs_f64())]
    Timeout {
        /// The server's name.
        server: String,
        /// How long it was given.
        after: Duration,
    },
    /// The server is broken or disabled.
    #[error("MCP server '{server}': {why}")]
    Unavailable {
        /// The server's name.
        server: String,
        /// What is wrong with it.
        why: String,
    },
    /// The task that asked the server failed (panicked or was dropped).
    #[error("MCP server '{server}': {error}")]
    Task {
        /// The server's name.
        server: String,
        /// What happened to the task.
        error: tokio::task::JoinError,
    },
    /// The request was abandoned.
    #[error("cancelled")]
    Cancelled,
}

impl From<PromptError> for CommandError {
    fn from(e: PromptError) -> CommandError {
        match e {
            PromptError::Cancelled => CommandError::Cancelled,
            other => CommandError::Failed(Box::new(other)),
        }
    }
}

/// One server prompt.
struct Entry {
    server: Arc<Server>,
    prompt: String,
    arguments: Vec<String>,
    command: PluginCommand,
}

/// The prompts of the ready servers, listed the first time a front end asks (a headless run
/// never does, so it never pays for `prompts/list`).
pub struct PromptCommands {
    runtime: Arc<McpRuntime>,
    servers: Vec<Arc<Server>>,
    entries: OnceLock<Vec<Entry>>,
}

impl PromptCommands {
    /// The prompts of `servers`, not listed yet.
    pub fn new(runtime: Arc<McpRuntime>, servers: Vec<Arc<Server>>) -> PromptCommands {
        PromptCommands {
            runtime,
            servers,
            entries: OnceLock::new(),
        }
    }

    /// Every server's prompts, listed at once (each bounded by its startup timeout; a server
    /// whose listing fails offers none), sorted by command name.
    fn entries(&self) -> &[Entry] {
        self.entries.get_or_init(|| {
            let servers = self.servers.clone();
            let listed = self
                .runtime
                .wait(async move {
                    let lists = servers.iter().map(|s| s.prompts());
                    let lists = futures::future::join_all(lists).await;
                    servers.into_iter().zip(lists).collect::<Vec<_>>()
                })
                .unwrap_or_default();
            let mut entries = Vec::new();
            for (server, prompts) in listed {
                for p in prompts.unwrap_or_default() {
                    entries.push(Entry::new(&server, p));
                }
            }
            entries.sort_by(|a, b| a.command.name.cmp(&b.command.name));
            entries
        })
    }
}

impl Entry {
    fn new(server: &Arc<Server>, p: rmcp::model::Prompt) -> Entry {
        let arguments: Vec<String> = p
            .arguments
            .iter()
            .flatten()
            .map(|a| a.name.clone())
            .collect();
        let hint = (!arguments.is_empty()).then(|| {
            arguments
                .iter()
                .map(|a| a.to_uppercase())
                .collect::<Vec<_>>()
                .join(" ")
        });
        let description = format!(
            "[MCP {}] {}",
            server.config.name,
            p.description.clone().unwrap_or_else(|| p.name.clone())
        );
        Entry {
            command: PluginCommand {
                name: wire_name(&server.config.name, &p.name),
                description,
                argument_hint: hint,
            },
            server: server.clone(),
            prompt: p.name,
            arguments,
        }
    }
}

/// `args` spread over `names`: a word each, the last one takes the rest.
fn fill(names: &[String], args: &str) -> Map<String, Value> {
    let mut out = Map::new();
    let mut rest = args.trim();
    for (i, name) in names.iter().enumerate() {
        if rest.is_empty() {
            break;
        }
        let value = if i + 1 == names.len() {
            std::mem::take(&mut rest)
        } else {
            match rest.split_once(char::is_whitespace) {
                Some((word, tail)) => {
                    let w = word;
                    rest = tail.trim_start();
                    w
                }
                None => std::mem::take(&mut rest),
            }
        };
        out.insert(name.clone(), Value::String(value.to_owned()));
    }
    out
}

impl CommandSource for PromptCommands {
    fn commands(&self) -> Vec<PluginCommand> {
        self.entries().iter().map(|e| e.command.clone()).collect()
    }

    fn expand<'a>(
        &'a self,
        name: &'a str,
        args: &'a str,
    ) -> BoxFuture<'a, Result<String, CommandError>> {
        let Some(entry) = self.entries().iter().find(|e| e.command.name == name) else {
            let missing = PromptError::NoPrompt {
                name: name.to_owned(),
            };
            return futures::future::ready(Err(missing.into())).boxed();
        };
        let server = entry.server.clone();
        let prompt = entry.prompt.clone();
        let arguments = fill(&entry.arguments, args);
        let handle = self
            .runtime
            .spawn(async move { server.get_prompt(&prompt, arguments).await });
        let who = entry.server.config.name.clone();
        async move {
            let outcome = match handle.await {
                Ok(Ok(text)) if text.trim().is_empty() => Err(PromptError::NoText {
                    server: who,
                    name: name.to_owned(),
                }),
                Ok(Ok(text)) => Ok(text),
                Ok(Err(CallFailure::Timeout(after))) => {
                    Err(PromptError::Timeout { server: who, after })
                }
                Ok(Err(CallFailure::Broken(why) | CallFailure::Disabled(why))) => {
                    Err(PromptError::Unavailable { server: who, why })
                }
                Ok(Err(CallFailure::Cancelled)) => Err(PromptError::Cancelled),
                Err(error) => Err(PromptError::Task { server: who, error }),
            };
            outcome.map_err(CommandError::from)
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::fill;

    #[test]
    fn words_fill_arguments_in_order_and_the_last_takes_the_rest() {
        let names = vec!["city".to_owned(), "note".to_owned()];
        let m = fill(&names, " Paris  bring an umbrella ");
        assert_eq!(m["city"], "Paris");
        assert_eq!(m["note"], "bring an umbrella");
        assert!(fill(&names, "").is_empty());
        assert_eq!(fill(&names, "Rome").len(), 1);
    }
}
