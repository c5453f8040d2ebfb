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
fn governed(ctx: Ctx) -> Result<Vec<keel_host::Ignored>> {
    Ok(ctx.host()?.config().governed.clone())
}
