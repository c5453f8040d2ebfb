//! Slash commands in ACP sessions: `/compact`, `/trust`, the workspace's custom commands and
//! the plugins' commands, offered in an `available_commands_update` and answered here.

use super::{Live, err, send};
use crate::map;
use agent_client_protocol::Client;
use agent_client_protocol::Error;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    AvailableCommand, AvailableCommandInput, AvailableCommandsUpdate, ErrorCode, PromptResponse,
    SessionUpdate, StopReason, UnstructuredCommandInput,
};
use keel_host::commands::{Builtin, CommandKind, CommandSet, Invocation, TrustArg};
use keel_host::{AgentSource, SourceError};
use std::path::Path;
use std::sync::Arc;

/// `/trust ARGS` typed in a session working in `cwd`: no argument describes the workspace's
/// decision and what it governs, `yes` records it as trusted, `no` as untrusted.
fn trust_slash(source: &dyn AgentSource, cwd: &Path, args: &str) -> Result<String, SourceError> {
    let arg = TrustArg::parse(args).map_err(|e| SourceError::Failed(e.to_string()))?;
    match arg {
        TrustArg::Show => Ok(source.trust(cwd)?.describe()),
        TrustArg::Record(level) => {
            let (root, file) = source.record_trust(cwd, level)?;
            Ok(format!(
                "Recorded {} as {} in {}. It applies to sessions opened or loaded from now on.",
                root.display(),
                level.as_str(),
                file.display()
            ))
        }
    }
}

/// The slash commands of `live` as an `available_commands_update`: `/compact`, `/trust`, the
/// custom commands of the workspace (Markdown files, as in the terminal UI) and the plugins'
/// commands. Sent once listed (reading files and listing may start servers: it runs on a
/// blocking thread, after the session's answer), after the workspace's trust notice when it
/// has one (an agent message: what keel left alone, and how to trust the folder).
pub(super) fn advertise_commands(live: &Arc<Live>, cx: ConnectionTo<Client>) {
    let live = live.clone();
    tokio::task::spawn_blocking(move || {
        let notice = live.source.trust(&live.cwd).ok().and_then(|t| t.notice());
        if let Some(notice) = notice {
            send(
                &cx,
                &live.id,
                SessionUpdate::AgentMessageChunk(map::chunk(format!("keel: {notice}\n"))),
            );
        }
        let mut list = vec![
            AvailableCommand::new(Builtin::Compact.name(), Builtin::Compact.description()),
            offered(
                Builtin::Trust.name(),
                Builtin::Trust.description(),
                Builtin::Trust.argument_hint().map(str::to_owned),
            ),
        ];
        for c in custom_commands(&live).all() {
            if matches!(c.kind, CommandKind::Custom { .. }) {
                list.push(offered(&c.name, &c.description, c.argument_hint.clone()));
            }
        }
        for source in live.agent.commands() {
            for command in source.commands() {
                list.push(offered(
                    &command.name,
                    &command.description,
                    command.argument_hint,
                ));
            }
        }
        send(
            &cx,
            &live.id,
            SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(list)),
        );
    });
}

fn offered(name: &str, description: &str, hint: Option<String>) -> AvailableCommand {
    let entry = AvailableCommand::new(name, description);
    match hint {
        Some(hint) => entry.input(Some(AvailableCommandInput::Unstructured(
            UnstructuredCommandInput::new(hint),
        ))),
        None => entry,
    }
}

/// The custom commands of `live`'s workspace, read on first use.
fn custom_commands(live: &Live) -> &CommandSet {
    live.custom.get_or_init(|| {
        let config = live.agent.config();
        CommandSet::load_for(&config.cwd, config.keel_home.as_deref())
    })
}

/// What a prompt starting with `/` asks for.
pub(super) enum Slash {
    /// Compact the conversation now.
    Compact,
    /// Answer with this text, without a model turn (`/trust`).
    Say(String),
    /// Send this text instead (a custom or plugin command, expanded).
    Prompt(String),
}

/// `/name args` of a slash command: `/compact`, a custom command (expanded with its
/// arguments) or a plugin's (expanded by the plugin); `None` when `text` names none of them
/// (it is sent as typed).
pub(super) async fn slash_command(live: &Live, text: &str) -> Result<Option<Slash>, Error> {
    let Some(rest) = text.strip_prefix('/') else {
        return Ok(None);
    };
    let (name, args) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    if name.is_empty() {
        return Ok(None);
    }
    if name == Builtin::Compact.name() {
        return Ok(Some(Slash::Compact));
    }
    if name == Builtin::Trust.name() {
        let (source, cwd, args) = (
            live.source.clone(),
            live.cwd.clone(),
            args.trim().to_owned(),
        );
        let said = tokio::task::spawn_blocking(move || trust_slash(&*source, &cwd, &args))
            .await
            .map_err(|e| err(ErrorCode::InternalError, format!("keel: {e}")))?
            .map_err(|e| err(ErrorCode::InvalidParams, format!("/trust: {e}")))?;
        return Ok(Some(Slash::Say(said)));
    }
    if let Ok(Invocation::Custom { prompt, .. }) = custom_commands(live).parse(text) {
        return Ok(Some(Slash::Prompt(prompt)));
    }
    let Some(source) = live.agent.command_source(name) else {
        return Ok(None);
    };
    if let Some(done) = source.act_async(name, args.trim()) {
        return done
            .await
            .map(|said| Some(Slash::Say(said)))
            .map_err(|e| err(ErrorCode::InvalidParams, format!("/{name}: {e}")));
    }
    if let Some(done) = source.act(name, args.trim()) {
        return done
            .map(|said| Some(Slash::Say(said)))
            .map_err(|e| err(ErrorCode::InvalidParams, format!("/{name}: {e}")));
    }
    source
        .expand(name, args.trim())
        .await
        .map(|p| Some(Slash::Prompt(p)))
        .map_err(|e| err(ErrorCode::InvalidParams, format!("/{name}: {e}")))
}

/// `/compact`: compact the session now and say how it went as the agent's message.
pub(super) async fn compact(live: &Live) -> Result<PromptResponse, Error> {
    use keel_agent::compaction::{CompactionReason, compact_now};
    let report = compact_now(&live.agent, CompactionReason::Manual)
        .await
        .map_err(|e| err(ErrorCode::InternalError, format!("keel: /compact: {e}")))?;
    let said = report
        .said()
        .unwrap_or_else(|error| format!("Compaction failed: {error}"));
    send(
        &live.feed.cx,
        &live.id,
        SessionUpdate::AgentMessageChunk(map::chunk(said)),
    );
    Ok(PromptResponse::new(StopReason::EndTurn))
}
