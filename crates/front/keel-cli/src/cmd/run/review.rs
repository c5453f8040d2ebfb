//! `keel review`: a delegate's findings-first review of the working tree's change (or a
//! delegation's patch), injected into a new session or the one named. It is the delegate
//! plugin's `/review` command (the same action the terminal UI and an editor run), headless.

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

/// The plugin whose `/review` this is (turned on for the run: a review is what was asked).
const REVIEWER_PLUGIN: &str = "delegate";

/// `keel review`.
pub fn review(ctx: &Ctx, args: ReviewArgs) -> Result<ExitCode> {
    let host = ctx.host()?;
    ctx.warn_untrusted(&host);
    let mut flags = ctx.flags()?;
    flags.enable.push(REVIEWER_PLUGIN);
    let factory = host.factory(flags, model_source(args.script.as_deref()))?;
    let log = match (&args.resume, args.last) {
        (Some(q), _) => open_for_injection(&ctx.store.resolve(q, &ctx.cwd)?)?,
        (None, true) => open_for_injection(&latest_session(ctx)?)?,
        (None, false) => factory.new_session(LogFormat::Plain)?,
    };
    let created = (args.resume.is_none() && !args.last).then(|| log.writer().path().to_path_buf());
    let agent = build_agent(&factory, log, &Progress::new(Output::Text), None)?;
    let mut words = Vec::new();
    if let Some(base) = &args.base {
        words.extend(["--base", base.as_str()]);
    }
    if let Some(job) = &args.job {
        words.extend(["--job", job.as_str()]);
    }
    let command_args = words.join(" ");
    let source = agent
        .command_source("review")
        .cloned()
        .context("the delegate plugin offers no /review here")?;
    let mut err = std::io::stderr().lock();
    writeln!(
        err,
        "keel: reviewing {}…",
        match (&args.job, &args.base) {
            (Some(job), _) => format!("the patch of delegation {job}"),
            (None, base) => format!("the change from {}", base.as_deref().unwrap_or("HEAD")),
        }
    )?;
    let outcome = runtime()?.block_on(async {
        match source.act_async("review", &command_args) {
            Some(done) => done.await.map_err(|e| e.to_string()),
            None => Err("the delegate plugin's /review is not an action".to_owned()),
        }
    });
    match outcome {
        // The command injected the findings into the session's next turn.
        Ok(findings) => {
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
