//! `keel resume` and `keel compact`: which session to open (the latest of this directory,
//! or the one named), crash repair said on stderr, the modes a resumed session keeps, and
//! `--approve-plan`.

use super::drive::{apply_permission_mode, build_agent, drive, finish, model_source, runtime};
use crate::cli::{CompactArgs, ResumeArgs};
use crate::cmd::Ctx;
use crate::cmd::progress::{Output, Progress};
use anyhow::{Context, Result, anyhow, bail};
use keel_agent::Agent;
use keel_session::{PersistentSession, WriterOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

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
pub(in crate::cmd) fn keep_session_modes(
    flags: &mut keel_host::Flags,
    log: &PersistentSession,
) -> bool {
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
pub(in crate::cmd) fn say_resumed(
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
    flags.reasoning_effort = keel_agent::session_modes::last_effort(log.session());
    if keep_session_modes(&mut flags, &log) {
        writeln!(
            err,
            "keel: explicit control stays on for this session (it was started with it)"
        )?;
    }
    drop(err);
    let host = ctx.host()?;
    ctx.warn_untrusted(&host);
    // The provider, model and `--base-url` the session logged, unless flags name others. A
    // server taken from the log is said: a session file (an imported one) chooses where the
    // conversation goes.
    let given = flags.base_url.is_some();
    let flags = keel_host::resume_flags(&host, flags, log.session());
    if let (false, Some(url)) = (given, &flags.base_url) {
        let _ = writeln!(
            std::io::stderr(),
            "keel: continuing on {url}, the server this session used (--base-url or --provider to change)"
        );
    }
    let factory = host.factory(flags, model_source(args.script.as_deref()))?;
    ctx.note_approval(&factory);
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
    let outcome = drive(&agent)?;
    finish(&agent, outcome, &progress)
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
    let flags = keel_host::resume_flags(&host, ctx.flags()?, log.session());
    let factory = host.factory(flags, model_source(args.script.as_deref()))?;
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

/// The latest session of this directory that has a turn (`--last`, and every command that
/// takes the latest when no session is named): one opened and left without a prompt (0
/// turns) is skipped, it holds nothing to continue.
pub(in crate::cmd) fn latest_session(ctx: &Ctx) -> Result<PathBuf> {
    ctx.latest_session().ok_or_else(|| {
        anyhow!(
            "no session to resume in {} (sessions without a turn are skipped; see `keel \
             sessions list --all`)",
            ctx.cwd.display()
        )
    })
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
