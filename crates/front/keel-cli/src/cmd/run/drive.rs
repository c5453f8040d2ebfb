//! Building an agent over a session log and driving it headless: the model a command talks
//! to, the agent with the progress printer as its hooks, queued turns run with Ctrl-C
//! handling, and the run's end said (the answer, the files presented, how the turn ended, a
//! plan awaiting approval).

use crate::cli::{ModeArgs, PermissionMode};
use crate::cmd::Ctx;
use crate::cmd::answers::StdinAnswers;
use crate::cmd::progress::{Output, Progress};
use anyhow::{Context, Result};
use keel_agent::{Agent, ApprovalPolicy, TurnOutcome};
use keel_host::{AgentFactory, BuildOptions, LogFormat, ModelSource};
use keel_llm::{Provider, ScriptedProvider};
use keel_session::PersistentSession;
use keel_tools::SandboxMode;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

/// The model a command talks to: `--script FILE` or the configured provider.
pub(super) fn model_source(script: Option<&Path>) -> ModelSource {
    match script {
        Some(path) => ModelSource::Script(path.to_path_buf()),
        None => ModelSource::Configured,
    }
}

/// Build the agent over `log`, with the progress printer as its own hooks and, when given,
/// `answers` taking `ask_user_question` from stdin.
pub(super) fn build_agent(
    factory: &AgentFactory<'_>,
    log: PersistentSession,
    progress: &Progress,
    answers: Option<Arc<StdinAnswers>>,
) -> Result<Agent> {
    let mut options = BuildOptions::default();
    if let Some(answers) = answers {
        // Before the progress printer: a question's slot is open before its line is printed.
        let observer = answers.clone();
        options
            .agent_hooks
            .session_event
            .push(Arc::new(move |ev| observer.observe(ev)));
        options.asker = Some(answers);
    }
    progress.install(&mut options.agent_hooks);
    let agent = factory.build(log, options)?;
    let enforcement = agent.sandbox_enforcement();
    if !enforcement.is_complete() {
        // Said once, at start: the mode asks for more than this kernel enforces.
        #[allow(clippy::print_stderr)]
        {
            eprintln!("keel: warning: sandbox {}: {enforcement}", agent.sandbox());
        }
    }
    // A resumed session keeps the modes set during it (keel_agent::session_modes): say so.
    for note in &agent.kept_modes().notes {
        #[allow(clippy::print_stderr)]
        {
            eprintln!("keel: session {} {note}", agent.session_id().as_str());
        }
    }
    for skipped in agent.skipped_instructions() {
        #[allow(clippy::print_stderr)]
        {
            eprintln!("keel: warning: {skipped}");
        }
    }
    Ok(agent)
}

pub(super) fn log_format(zstd: bool) -> LogFormat {
    if zstd {
        LogFormat::Zstd
    } else {
        LogFormat::Plain
    }
}

/// The model of a long-running server (`keel mcp-server`, `keel acp`): with `--script`, one
/// scripted provider for the whole server (its responses are consumed across sessions, as a
/// model server's would be); otherwise the configured model. The configuration and the model
/// endpoint are checked now: a mistake stops the server at start, where its client shows it,
/// instead of failing every session.
pub(in crate::cmd) fn server_model(
    ctx: &Ctx,
    flags: &keel_host::Flags,
    script: Option<&Path>,
) -> Result<ModelSource> {
    let model = match script {
        Some(path) => {
            let provider = ScriptedProvider::from_path(path)
                .with_context(|| format!("cannot load the script {}", path.display()))?
                .without_recording();
            ModelSource::Provider(Arc::new(provider.with_name("scripted")) as Arc<dyn Provider>)
        }
        None => ModelSource::Configured,
    };
    ctx.host()?.factory(flags.clone(), model.clone())?;
    Ok(model)
}

pub(in crate::cmd) fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// How long a run waits, after its last turn, for side work still running (a title request).
const SIDE_WORK_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// Drive queued turns with Ctrl-C handling; returns the last outcome.
pub(super) fn drive(agent: &Agent) -> Result<Option<TurnOutcome>> {
    let rt = runtime()?;
    rt.block_on(async {
        let watcher = agent.clone();
        let signals = tokio::spawn(async move {
            let mut presses = 0;
            while tokio::signal::ctrl_c().await.is_ok() {
                presses += 1;
                if presses == 1 {
                    let _ = writeln!(
                        std::io::stderr(),
                        "\nkeel: cancelling the turn (Ctrl-C again to exit)"
                    );
                    watcher.cancel_turn();
                } else {
                    std::process::exit(130);
                }
            }
        });
        let out = agent.run_until_idle().await;
        // Jobs still running here outlived the wake budget: stop them with the process.
        agent.kill_jobs();
        // Side work (the session title request, started beside the first turn) lands in the
        // log before the process exits; a slow one is given up, never waited for long.
        agent.settle_side_work(SIDE_WORK_GRACE).await;
        signals.abort();
        Ok(out?)
    })
}

/// The files presented during the run (what plugins' presenters showed), listed on stderr
/// after the answer.
fn list_presented(progress: &Progress, err: &mut impl Write) -> Result<()> {
    let files = progress.shown(|s| s.files.clone());
    if files.is_empty() {
        return Ok(());
    }
    writeln!(err, "keel: files presented:")?;
    for file in files {
        writeln!(err, "  {file}")?;
    }
    Ok(())
}

/// Print the run's end: the answer (text mode), the files presented during the run, how the
/// last turn ended.
pub(super) fn finish(
    agent: &Agent,
    outcome: Option<TurnOutcome>,
    progress: &Progress,
) -> Result<ExitCode> {
    let path = agent.log().writer().path().display().to_string();
    let code = say_end(
        progress,
        outcome.as_ref(),
        &agent.session_id().to_string(),
        &path,
    )?;
    plan_hint(&mut std::io::stderr().lock(), agent)?;
    Ok(code)
}

/// The run's end, as [`finish`] says it for a local agent and `keel run --server` for a
/// session on a server: the answer (text mode), the files presented, how the turn ended, for
/// session `id` kept at `place` (its file, or the server); the exit code (0 when the turn
/// completed or handed a plan over, else 1).
pub(super) fn say_end(
    progress: &Progress,
    outcome: Option<&TurnOutcome>,
    id: &str,
    place: &str,
) -> Result<ExitCode> {
    let mut err = std::io::stderr().lock();
    let Some(outcome) = outcome else {
        writeln!(err, "keel: nothing to run (session {id})")?;
        return Ok(ExitCode::SUCCESS);
    };
    if progress.output() == Output::Text {
        let mut out = std::io::stdout().lock();
        if !outcome.final_text.is_empty() {
            writeln!(out, "{}", outcome.final_text)?;
        }
        drop(out);
        list_presented(progress, &mut err)?;
    }
    let how = if outcome.handed_off {
        "the plan awaits your approval".to_owned()
    } else {
        describe(&outcome.reason)
    };
    writeln!(
        err,
        "keel: turn {} ended: {how} — session {id} ({place})",
        outcome.turn,
    )?;
    // A plan handed to the user is this run's answer, not a failure.
    Ok(if outcome.completed() || outcome.handed_off {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// How to go on when the session's plan awaits approval (said on stderr).
pub(super) fn plan_hint(err: &mut impl Write, agent: &Agent) -> Result<()> {
    if agent.proposed_plan().is_some() {
        let id = agent.session_id();
        writeln!(
            err,
            "keel: plan mode stays on. Approve the plan and carry it out: keel resume {id} \
             --approve-plan [\"NOTE\"]; ask for changes: keel resume {id} \"…\""
        )?;
    }
    Ok(())
}

/// `--permission-mode`'s sandbox and approval, where no explicit --sandbox/--approval set them.
pub(in crate::cmd) fn apply_permission_mode(flags: &mut keel_host::Flags, mode: &ModeArgs) {
    let (sandbox, approval) = match mode.permission_mode {
        None | Some(PermissionMode::Default) | Some(PermissionMode::Plan) => (None, None),
        Some(PermissionMode::AcceptEdits) => (Some(SandboxMode::WorkspaceWrite), None),
        Some(PermissionMode::DontAsk) => (None, Some(ApprovalPolicy::Deny)),
        Some(PermissionMode::BypassPermissions) => {
            (Some(SandboxMode::FullAccess), Some(ApprovalPolicy::Allow))
        }
    };
    if flags.sandbox.is_none() {
        flags.sandbox = sandbox;
    }
    if flags.approval.is_none() && approval.is_some() {
        flags.approval = approval;
        flags.approval_from = mode
            .permission_mode
            .and_then(|m| clap::ValueEnum::to_possible_value(&m))
            .map(|v| format!("--permission-mode {}", v.get_name()));
    }
}

pub(super) fn describe(reason: &keel_protocol::TurnEndReason) -> String {
    use keel_protocol::TurnEndReason::*;
    match reason {
        Completed => "completed".into(),
        Aborted { reason } => format!("aborted ({reason})"),
        Blocked { reason } => format!(
            "blocked ({})",
            reason.as_deref().unwrap_or("no reason given")
        ),
        // A model failure's message already starts with its code; say it once.
        Error { code, message } => {
            let detail = message
                .strip_prefix(code.as_str())
                .and_then(|m| m.strip_prefix(": "))
                .unwrap_or(message);
            format!("error {code}: {detail}")
        }
        MaxTokens => "the model hit its output limit (max-tokens)".into(),
        Interrupted => "interrupted".into(),
    }
}
