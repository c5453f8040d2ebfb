//! `keel trust [DIR]`, `keel trust --revoke [DIR]`, `keel trust --list`: record or list the
//! user's decisions about workspaces ([`keel_host::trust`]) in `$KEEL_HOME/config.toml`.

use super::Ctx;
use crate::cli::TrustArgs;
use anyhow::Result;
use keel_host::ProjectTrust;
use std::io::Write;
use std::process::ExitCode;

/// Run `keel trust`.
pub fn run(ctx: &Ctx, args: TrustArgs) -> Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    if args.list {
        let host = ctx.host()?;
        let loaded = host.config();
        if loaded.config.projects.is_empty() {
            writeln!(
                out,
                "no workspace decisions recorded (keel trust [DIR] records one)"
            )?;
        }
        for (dir, section) in &loaded.config.projects {
            let level = section
                .trust_level
                .map_or("(no trust_level)", ProjectTrust::as_str);
            let layer = loaded
                .origin
                .get(&format!("projects.{dir}.trust_level"))
                .map(String::as_str)
                .unwrap_or("?");
            let missing = if std::path::Path::new(dir).is_dir() {
                ""
            } else {
                "  (missing)"
            };
            writeln!(out, "{level:<9}  {dir}  # {layer}{missing}")?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let dir = match &args.dir {
        Some(dir) => ctx.cwd.join(dir),
        None => ctx.cwd.clone(),
    };
    let level = if args.revoke {
        ProjectTrust::Untrusted
    } else {
        ProjectTrust::Trusted
    };
    let file = ctx.home.join("config.toml");
    let root = keel_host::trust::record(&file, &dir, level)?;
    writeln!(
        out,
        "{} {}  (recorded in {})",
        level.as_str(),
        root.display(),
        file.display()
    )?;
    // What the decision turns on or off, as the next run will see it.
    let found = {
        let mut c = ctx.clone();
        c.cwd = root.clone();
        governed(c)?
    };
    let verb = if level.is_trusted() {
        "now takes effect"
    } else {
        "stays inert"
    };
    for i in found {
        writeln!(
            out,
            "  {verb}: {} ({})",
            i.file.display(),
            i.what.join(", ")
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// What `ctx`'s workspace holds that its trust decision governs (hooks, servers, widening
/// keys, by file): what a load as untrusted leaves out, whatever the decision is now.
pub(crate) fn governed(mut ctx: Ctx) -> Result<Vec<keel_host::Ignored>> {
    ctx.common.trust_project = false;
    ctx.common.project_trust = Some(ProjectTrust::Untrusted.as_str().to_owned());
    Ok(ctx.host()?.config().ignored.clone())
}

/// The notice a front end shows for `ctx`'s workspace ([`keel_host::trust::notice`]); `None`
/// when it is trusted, holds nothing keel leaves alone, or its configuration cannot be read
/// (the agent's own build reports that).
pub(crate) fn notice(ctx: &Ctx) -> Option<String> {
    let host = ctx.host().ok()?;
    let loaded = host.config();
    keel_host::trust::notice(&loaded.trust, &loaded.ignored)
}

/// `/trust [yes|no]` typed in an ACP session working in `ctx`'s workspace
/// ([`keel_host::commands::TrustArg`]): no argument describes the decision and what it leaves
/// alone; `yes` records trusted, `no` untrusted. The answer is what the client shows.
pub(crate) fn slash(ctx: &Ctx, args: &str) -> Result<String> {
    let level = match keel_host::commands::TrustArg::parse(args)? {
        keel_host::commands::TrustArg::Show => None,
        keel_host::commands::TrustArg::Record(level) => Some(level),
    };
    let Some(level) = level else {
        let host = ctx.host()?;
        let loaded = host.config();
        let mut said = format!(
            "Workspace {} is {}.",
            loaded.trust.root.display(),
            loaded.trust.describe()
        );
        for i in &loaded.ignored {
            said.push_str(&format!(
                "\nIgnored: {} ({})",
                i.file.display(),
                i.what.join(", ")
            ));
        }
        if !loaded.trust.is_trusted() {
            said.push_str("\n/trust yes trusts it; /trust no records that you do not.");
        }
        return Ok(said);
    };
    let file = ctx.home.join("config.toml");
    let root = keel_host::trust::record(&file, &ctx.cwd, level)?;
    Ok(format!(
        "Recorded {} as {} in {}. It applies to sessions opened or loaded from now on.",
        root.display(),
        level.as_str(),
        file.display()
    ))
}
