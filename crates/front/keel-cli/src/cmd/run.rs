//! `keel run`, `keel demo`, `keel resume`: build an agent from configuration and drive it
//! headless, with progress on stderr and the final answer (or JSON events) on stdout.
//!
//! Here: `keel run` (its prompt, `--goal`, `--inbox-stdin`) and `keel demo`. Beside it:
//! [`drive`] builds the agent and drives its turns to an end (shared by every command here
//! and by the servers), [`resume`] is `keel resume` and `keel compact` (an existing session),
//! [`review`] is `keel review`.

mod drive;
pub(super) mod remote;
mod resume;
mod review;

pub(super) use drive::{apply_permission_mode, runtime, server_model};
pub(super) use resume::{compact, keep_session_modes, latest_session, resume, say_resumed};
pub(super) use review::review;

use super::Ctx;
use crate::cli::{DemoArgs, RunArgs};
use crate::cmd::answers::StdinAnswers;
use crate::cmd::progress::{Output, Progress};
use anyhow::{Context, Result, bail};
use drive::{build_agent, drive, finish, log_format, model_source};
use keel_agent::{Agent, ApprovalPolicy};
use keel_host::{LogFormat, ModelSource};
use keel_llm::{Provider, ScriptFormat, ScriptedProvider};
use keel_tools::SandboxMode;
use std::io::{Read, Write};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

fn read_prompt(prompt: Option<String>) -> Result<String> {
    let text = match prompt {
        Some(p) => p,
        None => {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .context("cannot read the prompt from stdin")?;
            s
        }
    };
    if text.trim().is_empty() {
        bail!("empty prompt: pass the task as an argument or on stdin");
    }
    Ok(text)
}

/// A prompt that invokes a custom command (`/review src`: a command file's or a plugin's)
/// becomes that command's prompt, as Claude Code's `-p` does; anything else is sent as
/// written (a built-in's name too: it needs the UI).
fn expand_command(ctx: &Ctx, prompt: String) -> String {
    if !prompt.starts_with('/') {
        return prompt;
    }
    let set = keel_host::commands::CommandSet::load_for(&ctx.cwd, Some(&ctx.home));
    match set.parse(prompt.trim()) {
        Ok(keel_host::commands::Invocation::Custom { prompt, .. }) => prompt,
        _ => prompt,
    }
}

/// `keel run`.
pub fn run(ctx: &Ctx, args: RunArgs) -> Result<ExitCode> {
    if let Some(server) = args.server.clone() {
        return remote::run(ctx, args, &server);
    }
    let prompt = match &args.goal {
        Some(_) => String::new(),
        None => expand_command(ctx, read_prompt(args.prompt)?),
    };
    let images = super::images::read(&ctx.cwd, &args.image)?;
    let host = ctx.host()?;
    ctx.warn_untrusted(&host);
    let mut flags = ctx.flags()?;
    apply_permission_mode(&mut flags, &args.mode);
    let factory = host.factory(flags, model_source(args.script.as_deref()))?;
    ctx.note_approval(&factory);
    super::images::check_model(factory.route(), &images)?;
    let progress = Progress::new(Output::from_json_flag(args.json));
    let lineage = match &args.delegated_from {
        Some(parent) => Some((
            keel_protocol::SessionId(parent.clone()),
            args.delegation_depth.unwrap_or(1),
        )),
        None => None,
    };
    let log = factory.new_session_with(log_format(args.zstd), |h| {
        if let Some((parent, depth)) = lineage {
            h.parent_session = Some(parent);
            h.origin = Some("delegate".into());
            h.delegation_depth = depth;
        }
    })?;
    if args.json {
        progress.header(log.session().header())?;
    }
    let path = log.writer().path().to_path_buf();
    // A script on stdin answers the model's questions; a delegated run has no person behind
    // its stdin (the delegating agent only steers), so its questions get "nobody is present".
    let answers = (args.inbox_stdin && args.delegated_from.is_none())
        .then(|| Arc::new(StdinAnswers::default()));
    let agent = match build_agent(&factory, log, &progress, answers.clone()) {
        Ok(agent) => agent,
        Err(e) => {
            // Nothing ran: leave no empty session behind for `keel resume` to pick.
            discard_new_session(ctx, &path);
            return Err(e);
        }
    };
    if args.mode.plan_mode() {
        // Before the first request: it carries the plan-mode section, and write tools are
        // refused from the first step.
        agent.enter_plan_mode()?;
    }
    match &args.goal {
        Some(objective) => super::images::followup(
            &agent,
            &goal_prompt(&agent, objective, args.max_rounds)?,
            images,
        )?,
        None => super::images::followup(&agent, &prompt, images)?,
    }
    if args.inbox_stdin {
        read_inbox(agent.clone(), answers);
    }
    let outcome = drive(&agent)?;
    let code = finish(&agent, outcome, &progress)?;
    match args.goal {
        Some(_) => goal_exit(&progress, code),
        None => Ok(code),
    }
}

/// `--inbox-stdin`: steer, queue or answer questions from JSON lines on stdin until it closes.
/// A line that is not `{"steer": TEXT}`, `{"followup": TEXT}` or `{"answer": {...}}` (only
/// when `answers` takes them) is reported on stderr and skipped.
fn read_inbox(agent: Agent, answers: Option<Arc<StdinAnswers>>) {
    std::thread::spawn(move || {
        for line in std::io::stdin().lines() {
            let Ok(line) = line else { break };
            if line.trim().is_empty() {
                continue;
            }
            let parsed: Result<serde_json::Map<String, serde_json::Value>, _> =
                serde_json::from_str(&line);
            let done = match parsed.as_ref().map(|m| {
                (
                    m.get("steer").and_then(|v| v.as_str()),
                    m.get("followup").and_then(|v| v.as_str()),
                    m.get("answer"),
                )
            }) {
                Ok((Some(text), None, None)) => agent.steer(text).map_err(|e| e.to_string()),
                Ok((None, Some(text), None)) => agent.followup(text).map_err(|e| e.to_string()),
                Ok((None, None, Some(answer))) => match &answers {
                    Some(answers) => answers.answer(answer).map_err(|e| e.to_string()),
                    None => Err("this run takes no answers: its questions are answered \
                                 'no person is present' (a delegated run)"
                        .into()),
                },
                _ => Err(
                    "expected one JSON object {\"steer\": TEXT}, {\"followup\": TEXT} or \
                          {\"answer\": {\"call_id\": ID, \"answers\": {...}}}"
                        .into(),
                ),
            };
            if let Err(e) = done {
                let _ = writeln!(std::io::stderr(), "keel: --inbox-stdin: {e}");
            }
        }
        if let Some(answers) = answers {
            answers.close();
        }
    });
}

/// Remove a session file this process just created, and its directory and spill directory
/// when those are left empty. Best effort: a leftover file is a harmless empty session.
pub(super) fn discard_new_session(ctx: &Ctx, path: &Path) {
    let _ = std::fs::remove_file(path);
    if let Some(dir) = path.parent() {
        let _ = std::fs::remove_dir(dir);
        if let Some(id) = dir.file_name() {
            let _ = std::fs::remove_dir(ctx.home.join("spill").join(id));
        }
    }
}

/// `--goal`: set the goal through the goals plugin's `/goal` and return round 1's prompt.
fn goal_prompt(agent: &Agent, objective: &str, max_rounds: Option<u32>) -> Result<String> {
    let source = agent
        .command_source("goal")
        .context("--goal needs the goals plugin, which is turned off in the configuration")?;
    let args = match max_rounds {
        Some(n) => format!("--max-rounds {n} {objective}"),
        None => objective.to_owned(),
    };
    runtime()?
        .block_on(source.expand("goal", &args))
        .map_err(|e| anyhow::anyhow!("--goal: {e}"))
}

/// `--goal`'s exit: how the goal ended, as its plugin's presenter said (0 complete; 3 blocked
/// and 4 out of rounds, docs/goals.md); a goal still open leaves the turn's own `code` (1 when
/// the turn itself succeeded).
fn goal_exit(progress: &Progress, code: ExitCode) -> Result<ExitCode> {
    let mut err = std::io::stderr().lock();
    progress.shown(|shown| {
        Ok(match (&shown.outcome, shown.status.get("goal")) {
            (Some(outcome), _) => {
                // Text mode said it as it happened.
                if progress.output() == Output::Json {
                    writeln!(err, "keel: {}", outcome.text)?;
                }
                ExitCode::from(outcome.code)
            }
            (None, Some(open)) => {
                writeln!(err, "keel: {open}: the goal is not complete")?;
                if code == ExitCode::SUCCESS {
                    ExitCode::from(1)
                } else {
                    code
                }
            }
            (None, None) => {
                writeln!(err, "keel: no goal was set")?;
                ExitCode::from(1)
            }
        })
    })
}

/// `keel demo`.
pub fn demo(ctx: &Ctx, args: DemoArgs) -> Result<ExitCode> {
    let dir = match &args.dir {
        Some(d) => {
            std::fs::create_dir_all(d).with_context(|| format!("cannot create {}", d.display()))?;
            d.canonicalize()?
        }
        None => tempfile::Builder::new()
            .prefix("keel-demo-")
            .tempdir()
            .context("cannot create a temp dir")?
            .keep(),
    };
    crate::cmd::demo::write_project(&dir)?;
    let demo_ctx = Ctx {
        common: crate::cli::Common {
            cwd: Some(dir.clone()),
            approval: Some("allow".into()),
            approval_from: Some("keel demo".into()),
            ..ctx.common.clone()
        },
        home: ctx.home.clone(),
        cwd: dir.clone(),
        store: keel_session::Store::new(ctx.home.clone()),
    };
    let delegating = ctx.common.delegate.is_some();
    let (source, prompt) = if delegating {
        // The delegate is another keel process: it replays the script from a file.
        let script = dir.with_extension("script.yaml");
        std::fs::write(&script, crate::cmd::demo::DELEGATE_SCRIPT)
            .with_context(|| format!("cannot write {}", script.display()))?;
        (
            ModelSource::Script(script),
            crate::cmd::demo::DELEGATE_PROMPT,
        )
    } else {
        let provider: Arc<dyn Provider> = Arc::new(
            ScriptedProvider::from_str(crate::cmd::demo::SCRIPT, ScriptFormat::Yaml)?
                .without_recording()
                .with_name("scripted"),
        );
        (ModelSource::Provider(provider), crate::cmd::demo::PROMPT)
    };
    let host = demo_ctx.host()?;
    // The demo always runs the default model in the workspace sandbox, approving its edits.
    let flags = keel_host::Flags {
        model: Some(keel_llm::DEFAULT_MODEL.to_owned()),
        sandbox: Some(SandboxMode::WorkspaceWrite),
        approval: Some(ApprovalPolicy::Allow),
        ..demo_ctx.flags()?
    };
    let factory = host.factory(flags, source)?;
    let progress = Progress::new(Output::from_json_flag(args.json));
    let agent = build_agent(
        &factory,
        factory.new_session(LogFormat::Plain)?,
        &progress,
        None,
    )?;
    let mut err = std::io::stderr().lock();
    writeln!(
        err,
        "keel demo: a scripted model works on a small project in {}{}",
        dir.display(),
        if delegating {
            ", delegating to another keel process"
        } else {
            ""
        }
    )?;
    drop(err);
    agent.followup(prompt)?;
    let outcome = drive(&agent)?;
    let code = finish(&agent, outcome, &progress)?;
    let path = agent.log().writer().path().to_path_buf();
    let mut err = std::io::stderr().lock();
    writeln!(
        err,
        "keel demo: see the whole session with:\n  keel sessions show {}",
        path.display()
    )?;
    Ok(code)
}
