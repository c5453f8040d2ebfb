//! `keel review`: a delegate's findings-first review of the working tree's change (or a
//! delegation's patch), injected into a new session or the one named.

use super::discard_new_session;
use super::drive::{build_agent, model_source, runtime};
use super::resume::latest_session;
use crate::cli::ReviewArgs;
use crate::cmd::Ctx;
use crate::cmd::progress::{Output, Progress};
use anyhow::{Context, Result};
use keel_host::LogFormat;
use keel_session::{PersistentSession, WriterOptions};
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

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
