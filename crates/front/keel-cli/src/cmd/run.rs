//! `keel run`, `keel demo`, `keel resume`: build an agent from configuration and drive it
//! headless, with progress on stderr and the final answer (or JSON events) on stdout.

use super::Ctx;
use crate::cli::{
    CompactArgs, DemoArgs, ModeArgs, PermissionMode, ResumeArgs, ReviewArgs, RunArgs,
};
use crate::cmd::answers::StdinAnswers;
use crate::cmd::progress::{Output, Progress};
use anyhow::{Context, Result, anyhow, bail};
use keel_agent::{Agent, ApprovalPolicy, TurnOutcome};
use keel_host::{AgentFactory, BuildOptions, LogFormat, ModelSource};
use keel_llm::{Provider, ScriptFormat, ScriptedProvider};
use keel_session::{PersistentSession, WriterOptions};
use keel_tools::SandboxMode;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

/// The model a command talks to: `--script FILE` or the configured provider.
fn model_source(script: Option<&Path>) -> ModelSource {
    match script {
        Some(path) => ModelSource::Script(path.to_path_buf()),
        None => ModelSource::Configured,
    }
}

/// Build the agent over `log`, with the progress printer as its own hooks and, when given,
/// `answers` taking `ask_user_question` from stdin.
fn build_agent(
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

fn log_format(zstd: bool) -> LogFormat {
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
pub(super) fn server_model(
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

pub(super) fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// Drive queued turns with Ctrl-C handling; returns the last outcome.
fn drive(agent: &Agent) -> Result<Option<TurnOutcome>> {
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
        signals.abort();
        Ok(out?)
    })
}

/// The files presented (the `present` plugin's `present/files`) in the events from `from` on,
/// listed on stderr after the answer.
fn list_presented(agent: &Agent, from: u64, err: &mut impl Write) -> Result<()> {
    let files: Vec<(String, Option<String>)> = agent
        .log()
        .session()
        .events()
        .skip(usize::try_from(from).unwrap_or(usize::MAX))
        .filter_map(|e| match &e.body {
            keel_protocol::EventBody::Other(o) if o.type_name == keel_schedule::PRESENT_EVENT => {
                Some(keel_schedule::presented(&o.data))
            }
            _ => None,
        })
        .flatten()
        .collect();
    if files.is_empty() {
        return Ok(());
    }
    writeln!(err, "keel: files presented:")?;
    for (path, description) in files {
        match description {
            Some(d) => writeln!(err, "  {path} — {d}")?,
            None => writeln!(err, "  {path}")?,
        }
    }
    Ok(())
}

/// Print the run's end: the answer (text mode), the files presented from event `from` on,
/// how the last turn ended.
fn finish(
    agent: &Agent,
    outcome: Option<TurnOutcome>,
    from: u64,
    output: Output,
) -> Result<ExitCode> {
    let path = agent.log().writer().path().to_path_buf();
    let mut err = std::io::stderr().lock();
    let Some(outcome) = outcome else {
        writeln!(err, "keel: nothing to run (session {})", agent.session_id())?;
        plan_hint(&mut err, agent)?;
        return Ok(ExitCode::SUCCESS);
    };
    if output == Output::Text {
        let mut out = std::io::stdout().lock();
        if !outcome.final_text.is_empty() {
            writeln!(out, "{}", outcome.final_text)?;
        }
        drop(out);
        list_presented(agent, from, &mut err)?;
    }
    let how = if outcome.handed_off {
        "the plan awaits your approval".to_owned()
    } else {
        describe(&outcome.reason)
    };
    writeln!(
        err,
        "keel: turn {} ended: {how} — session {} ({})",
        outcome.turn,
        agent.session_id(),
        path.display()
    )?;
    plan_hint(&mut err, agent)?;
    // A plan handed to the user is this run's answer, not a failure.
    Ok(if outcome.completed() || outcome.handed_off {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
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

/// `--goal`'s exit: 0 when the goal is complete, 3 blocked, 4 out of rounds; otherwise the
/// turn's own `code` (1 when the turn itself succeeded: the goal is still open).
fn goal_exit(agent: &Agent, code: ExitCode) -> Result<ExitCode> {
    let fold = keel_goals::Fold::of(agent.log().session().whole_event_iter());
    let mut err = std::io::stderr().lock();
    let Some(goal) = fold.goal else {
        writeln!(err, "keel: no goal was set")?;
        return Ok(ExitCode::from(1));
    };
    let id = &goal.goal_id;
    Ok(match goal.status {
        keel_goals::Status::Complete => {
            writeln!(err, "keel: goal {id} complete after {} rounds", fold.rounds)?;
            ExitCode::SUCCESS
        }
        keel_goals::Status::Blocked => {
            let why = goal.blocked_reason.as_deref().unwrap_or("no reason given");
            writeln!(
                err,
                "keel: goal {id} blocked after {} rounds: {why}",
                fold.rounds
            )?;
            ExitCode::from(3)
        }
        keel_goals::Status::BudgetSpent => {
            writeln!(
                err,
                "keel: goal {id} not complete: its {} rounds are spent",
                goal.max_rounds
            )?;
            ExitCode::from(4)
        }
        other => {
            writeln!(
                err,
                "keel: goal {id} is still {} after {} rounds",
                other.as_str(),
                fold.rounds
            )?;
            if code == ExitCode::SUCCESS {
                ExitCode::from(1)
            } else {
                code
            }
        }
    })
}

/// How to go on when the session's plan awaits approval (said on stderr).
fn plan_hint(err: &mut impl Write, agent: &Agent) -> Result<()> {
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
pub(super) fn apply_permission_mode(flags: &mut keel_host::Flags, mode: &ModeArgs) {
    let (sandbox, approval) = match mode.permission_mode {
        None | Some(PermissionMode::Default) | Some(PermissionMode::Plan) => (None, None),
        Some(PermissionMode::AcceptEdits) => (Some(SandboxMode::WorkspaceWrite), None),
        Some(PermissionMode::DontAsk) => (None, Some(ApprovalPolicy::Never)),
        Some(PermissionMode::BypassPermissions) => {
            (Some(SandboxMode::FullAccess), Some(ApprovalPolicy::Auto))
        }
    };
    if flags.sandbox.is_none() {
        flags.sandbox = sandbox;
    }
    if flags.approval.is_none() {
        flags.approval = approval;
    }
}

fn describe(reason: &keel_protocol::TurnEndReason) -> String {
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

/// `keel run`.
pub fn run(ctx: &Ctx, args: RunArgs) -> Result<ExitCode> {
    let prompt = match &args.goal {
        Some(_) => String::new(),
        None => read_prompt(args.prompt)?,
    };
    let images = super::images::read(&ctx.cwd, &args.image)?;
    let host = ctx.host()?;
    ctx.warn_untrusted(&host);
    let mut flags = ctx.flags()?;
    apply_permission_mode(&mut flags, &args.mode);
    let factory = host.factory(flags, model_source(args.script.as_deref()))?;
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
    let from = agent.log().session().len();
    let outcome = drive(&agent)?;
    let code = finish(&agent, outcome, from, Output::from_json_flag(args.json))?;
    match args.goal {
        Some(_) => goal_exit(&agent, code),
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
                    Some(answers) => answers.answer(answer),
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

/// Which session `keel resume` continues, and the new prompt if any.
fn resume_target(ctx: &Ctx, args: &ResumeArgs) -> Result<(PathBuf, Option<String>)> {
    match (args.last, &args.session, &args.prompt) {
        (true, Some(first), Some(second)) => bail!(
            "--last takes at most one argument, the new prompt, but got two ({first:?} and \
             {second:?}); to name a session, drop --last: keel resume SESSION PROMPT"
        ),
        (true, first, second) => Ok((latest_session(ctx)?, first.clone().or(second.clone()))),
        (false, None, _) => Ok((latest_session(ctx)?, None)),
        (false, Some(query), prompt) => match ctx.store.resolve(query, &ctx.cwd) {
            Ok(path) => Ok((path, prompt.clone())),
            // A lone argument that names no session is most likely a prompt.
            Err(e @ keel_session::StoreError::NotFound { .. }) if prompt.is_none() => bail!(
                "{e}; to continue the latest session of this directory with it as the new \
                 prompt, run: keel resume --last {}",
                shell_quote(query)
            ),
            Err(e) => Err(e.into()),
        },
    }
}

/// `text` as one shell word: double quotes when nothing inside is special to them, single
/// quotes otherwise.
fn shell_quote(text: &str) -> String {
    if text
        .chars()
        .any(|c| matches!(c, '"' | '\\' | '$' | '`' | '!'))
    {
        format!("'{}'", text.replace('\'', r"'\''"))
    } else {
        format!("\"{text}\"")
    }
}

/// What a resumed session keeps whatever the flags say, unless a flag names it: explicit
/// control when it was started with it (the contract and its leases live on), and managed
/// context mode (without the plugin it would silently send the whole history; `--context
/// native` switches it back). Returns whether explicit control was kept.
pub(super) fn keep_session_modes(flags: &mut keel_host::Flags, log: &PersistentSession) -> bool {
    let edits = |flags: &keel_host::Flags, id: &str| flags.row_edits.iter().any(|e| e.plugin == id);
    let control = !edits(flags, keel_continuity::ID.as_str())
        && keel_continuity::control::was_active(log.session());
    if control {
        flags.row_edits.extend(crate::cmd::control_contract());
    }
    let memory = keel_memory::ID.as_str();
    if !flags.enable.contains(&memory)
        && matches!(
            keel_memory::context::logged_mode(log.session()),
            Some((keel_memory::context::ContextMode::Managed, _))
        )
    {
        flags.enable.push(memory);
    }
    control
}

/// Say on stderr what opening the session at `path` mended: a torn last record dropped, and
/// the crash repair (`of`: the session named in that line, for servers that hold several).
pub(super) fn say_resumed(
    path: &Path,
    load: &keel_session::LoadReport,
    repair: &keel_session::RepairReport,
    of: Option<&str>,
) -> std::io::Result<()> {
    let mut err = std::io::stderr().lock();
    if let Some(torn) = &load.torn {
        writeln!(
            err,
            "keel: dropped a torn last record of {} at line {} ({})",
            path.display(),
            torn.line,
            torn.reason
        )?;
    }
    if !repair.is_noop() {
        match of {
            Some(id) => writeln!(err, "keel: crash repair of {id}: {repair}")?,
            None => writeln!(err, "keel: crash repair {repair}")?,
        }
    }
    Ok(())
}

/// `keel resume`.
pub fn resume(ctx: &Ctx, args: ResumeArgs) -> Result<ExitCode> {
    let (path, prompt) = resume_target(ctx, &args)?;
    let (log, load, repair) = PersistentSession::resume(&path, WriterOptions::default())
        .with_context(|| format!("cannot resume {}", path.display()))?;
    let chat = crate::cmd::cards::resumed(ctx, log.session());
    let ctx = chat.as_ref().unwrap_or(ctx);
    say_resumed(&path, &load, &repair, None)?;
    let mut err = std::io::stderr().lock();
    if args.approve_plan && args.mode.plan_mode() {
        bail!("--approve-plan ends plan mode; it cannot be given with --permission-mode plan");
    }
    let mut flags = ctx.flags()?;
    apply_permission_mode(&mut flags, &args.mode);
    // The model chosen during the session (an editor's selector) is the session's.
    if let Some(model) = keel_agent::session_modes::last_model(log.session()) {
        flags.model = Some(model);
    }
    if keep_session_modes(&mut flags, &log) {
        writeln!(
            err,
            "keel: explicit control stays on for this session (it was started with it)"
        )?;
    }
    drop(err);
    let host = ctx.host()?;
    ctx.warn_untrusted(&host);
    let factory = host.factory(flags, model_source(args.script.as_deref()))?;
    let progress = Progress::new(Output::from_json_flag(args.json));
    if args.json {
        progress.header(log.session().header())?;
    }
    let agent = build_agent(&factory, log, &progress, None)?;
    if args.approve_plan {
        approve_plan(&agent, prompt.as_deref())?;
    } else {
        if args.mode.plan_mode() {
            agent.enter_plan_mode()?;
        }
        if let Some(prompt) = prompt {
            agent.followup(&prompt)?;
        }
    }
    let from = agent.log().session().len();
    let outcome = drive(&agent)?;
    finish(&agent, outcome, from, Output::from_json_flag(args.json))
}

/// `keel resume --approve-plan [NOTE]`: approve the plan the session handed in and queue the
/// turn that carries it out; an error (nothing written) when no plan awaits approval.
fn approve_plan(agent: &Agent, note: Option<&str>) -> Result<()> {
    let id = agent.session_id();
    if !agent.in_plan_mode() {
        bail!("--approve-plan: session {id} is not in plan mode; there is no plan to approve");
    }
    if agent.approve_plan(note)?.is_none() {
        bail!(
            "--approve-plan: session {id} is in plan mode but no plan awaits approval (the \
             model has not handed one in); ask for one: keel resume {id} \"…\""
        );
    }
    Ok(())
}

/// `keel compact`.
pub fn compact(ctx: &Ctx, args: CompactArgs) -> Result<ExitCode> {
    let path = match &args.session {
        Some(q) => ctx.store.resolve(q, &ctx.cwd)?,
        None => latest_session(ctx)?,
    };
    let (log, _, _) = PersistentSession::resume(&path, WriterOptions::default())
        .with_context(|| format!("cannot open {}", path.display()))?;
    let host = ctx.host()?;
    let factory = host.factory(ctx.flags()?, model_source(args.script.as_deref()))?;
    let agent = build_agent(&factory, log, &Progress::new(Output::Text), None)?;
    let report = runtime()?.block_on(keel_agent::compaction::compact_now(
        &agent,
        keel_agent::compaction::CompactionReason::Manual,
    ))?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "compacted {}: {:?}; estimated request tokens {} → {}; pruned {} tool result(s){}",
        agent.session_id(),
        report.outcome,
        report.before_tokens,
        report.after_tokens,
        report.pruned.len(),
        match report.summarised {
            Some(span) => format!("; summarised seqs {}..={}", span.start, span.end),
            None => String::new(),
        }
    )?;
    Ok(ExitCode::SUCCESS)
}

/// `keel review`.
pub fn review(ctx: &Ctx, args: ReviewArgs) -> Result<ExitCode> {
    let (plugin, command) = keel_delegate::DelegatePlugin::with_review_command();
    let mut catalogue = keel_host::plugins::builtin();
    catalogue.retain(|p| p.id() != keel_delegate::ID);
    catalogue.push(Box::new(plugin));
    let host = ctx.host_with(catalogue)?;
    ctx.warn_untrusted(&host);
    let mut flags = ctx.flags()?;
    flags.enable.push(keel_delegate::ID.as_str());
    let factory = host.factory(flags, model_source(args.script.as_deref()))?;
    let log = match (&args.resume, args.last) {
        (Some(q), _) => open_for_injection(&ctx.store.resolve(q, &ctx.cwd)?)?,
        (None, true) => open_for_injection(&latest_session(ctx)?)?,
        (None, false) => factory.new_session(LogFormat::Plain)?,
    };
    let created = (args.resume.is_none() && !args.last).then(|| log.writer().path().to_path_buf());
    let agent = build_agent(&factory, log, &Progress::new(Output::Text), None)?;
    let caller = keel_delegate::seam::Caller {
        session_id: agent.session_id().as_str().to_owned(),
        cwd: agent.config().cwd.clone(),
    };
    let spec = keel_delegate::seam::ReviewSpec {
        base: args.base.clone(),
        job_id: args.job.clone(),
        ..Default::default()
    };
    let mut err = std::io::stderr().lock();
    writeln!(
        err,
        "keel: reviewing {}…",
        match (&args.job, &args.base) {
            (Some(job), _) => format!("the patch of delegation {job}"),
            (None, base) => format!("the change from {}", base.as_deref().unwrap_or("HEAD")),
        }
    )?;
    let outcome = runtime()?.block_on(command.run(&caller, spec));
    match outcome {
        Ok(findings) => {
            agent.enqueue(
                keel_agent::InboxMode::Inject,
                keel_delegate::review::ReviewCommand::notice(&findings),
            )?;
            writeln!(std::io::stdout().lock(), "{findings}")?;
            writeln!(
                err,
                "keel: findings injected into session {}; continue with: keel resume {} \"…\"",
                agent.session_id(),
                agent.session_id()
            )?;
            Ok(ExitCode::SUCCESS)
        }
        Err(failure) => {
            writeln!(err, "keel: review: {failure}")?;
            if let Some(path) = created {
                // Nothing was injected: leave no empty session behind.
                drop(agent);
                discard_new_session(ctx, &path);
            }
            Ok(ExitCode::from(1))
        }
    }
}

/// A session opened to receive injected input (crash repair applied, said on stderr).
fn open_for_injection(path: &Path) -> Result<PersistentSession> {
    let (log, _, repair) = PersistentSession::resume(path, WriterOptions::default())
        .with_context(|| format!("cannot open {}", path.display()))?;
    if !repair.is_noop() {
        writeln!(std::io::stderr(), "keel: crash repair {repair}")?;
    }
    Ok(log)
}

pub(super) fn latest_session(ctx: &Ctx) -> Result<PathBuf> {
    ctx.latest_session().ok_or_else(|| {
        anyhow!(
            "no session to resume in {} (see `keel sessions list --all`)",
            ctx.cwd.display()
        )
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
            approval: Some("auto".into()),
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
        approval: Some(ApprovalPolicy::Auto),
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
    let from = agent.log().session().len();
    let outcome = drive(&agent)?;
    let code = finish(&agent, outcome, from, Output::from_json_flag(args.json))?;
    let path = agent.log().writer().path().to_path_buf();
    let mut err = std::io::stderr().lock();
    writeln!(
        err,
        "keel demo: see the whole session with:\n  keel sessions show {}",
        path.display()
    )?;
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::shell_quote;

    #[test]
    fn shell_quote_keeps_one_word() {
        assert_eq!(shell_quote("Continue."), "\"Continue.\"");
        assert_eq!(shell_quote("say \"hi\""), "'say \"hi\"'");
        assert_eq!(shell_quote("it's $HOME"), r"'it'\''s $HOME'");
    }
}
