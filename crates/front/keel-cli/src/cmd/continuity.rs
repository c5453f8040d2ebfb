//! `keel continuity show [SESSION] [--json]`: what the continuity plugin would re-project for a
//! session now, and the anchors it checks the log against.
//!
//! Read-only: the session is loaded with keel-session's loader (no repair, nothing appended)
//! and the anchors under `$KEEL_HOME/continuity` are only read
//! ([`keel_continuity::show::preview`]). The plugin's settings come from the layered
//! configuration (the `[[plugins]]` row `continuity`). Results go to stdout, warnings to
//! stderr; a corrupt or conflicting anchor, or a session that cannot be found or read, is an
//! error (exit 2) naming the file or the session.

use super::Ctx;
use super::sessions::{emit, warn};
use crate::cli::ContinuityCommand;
use anyhow::{Context, Result, anyhow};
use keel_continuity::ContinuityConfig;
use keel_continuity::anchors::Anchors;
use keel_continuity::show::{Preview, preview};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

/// Run a `continuity` subcommand.
pub fn run(ctx: &Ctx, cmd: ContinuityCommand) -> Result<ExitCode> {
    let res = match cmd {
        ContinuityCommand::Show { session, json } => show(ctx, session.as_deref(), json),
    };
    match res {
        // `keel continuity show | head`: the reader left; that is not a failure.
        Err(e) if super::sessions::is_broken_pipe(&e) => Ok(ExitCode::SUCCESS),
        r => r,
    }
}

/// The session file `query` names, or the latest session of this directory.
fn resolve(ctx: &Ctx, query: Option<&str>) -> Result<PathBuf> {
    match query {
        Some(q) => Ok(ctx.store.resolve(q, &ctx.cwd)?),
        None => ctx.latest_session().ok_or_else(|| {
            anyhow!(
                "no session in {} (see `keel sessions list --all`)",
                ctx.cwd.display()
            )
        }),
    }
}

/// The continuity plugin's effective settings: the `config` table of the `[[plugins]]` row
/// `continuity` of the layered configuration (defaults when it has none). Warns when the row is
/// disabled or not passive: the preview then shows what *would* be projected, not what will.
fn config(ctx: &Ctx) -> Result<ContinuityConfig> {
    let host = ctx.host()?;
    let settings = keel_host::plugins::settings::<ContinuityConfig>(
        host.config(),
        &keel_continuity::ContinuityPlugin,
    )?;
    let (Some(row), config) = (settings.row, settings.config) else {
        warn("no [[plugins]] row uses continuity: nothing is projected; showing its defaults");
        return Ok(ContinuityConfig::default());
    };
    if !settings.enabled {
        warn(&format!(
            "the [[plugins]] row {row} is disabled: nothing is projected (showing what would be)"
        ));
    } else if !config.passive {
        warn(&format!(
            "the [[plugins]] row {row} has passive = false: nothing is projected at boundaries \
             (showing what would be)"
        ));
    }
    Ok(config)
}

fn show(ctx: &Ctx, query: Option<&str>, as_json: bool) -> Result<ExitCode> {
    let file = resolve(ctx, query)?;
    let config = config(ctx)?;
    let loaded = super::sessions::load(&file)?;
    let session = &loaded.session;
    let anchors = Anchors::new(&ctx.home);
    let p = preview(session, &anchors, &config, &keel_host::presenters()).with_context(|| {
        format!(
            "cannot show the continuity of session {} ({})",
            session.header().id,
            file.display()
        )
    })?;
    let out = if as_json {
        let mut text = serde_json::to_string_pretty(&p).context("cannot encode the preview")?;
        text.push('\n');
        text
    } else {
        render_text(&p)
    };
    emit(out.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

/// The first 12 hex digits of a digest.
fn short(digest: &str) -> &str {
    digest.get(..12).unwrap_or(digest)
}

fn render_text(p: &Preview) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "session  {}", p.session);
    let _ = writeln!(out, "root     {}", p.root);
    match &p.pending {
        Some(b) => {
            let _ = writeln!(
                out,
                "pending  {} boundary at seq {}",
                b.kind.as_str(),
                b.seq
            );
        }
        None => {
            let _ = writeln!(out, "pending  no boundary pending");
        }
    }
    if p.delivered.is_empty() {
        let _ = writeln!(out, "delivered projections: none");
    } else {
        let _ = writeln!(out, "delivered projections:");
        for d in &p.delivered {
            let _ = writeln!(
                out,
                "  seq {}  boundary seq {}  {}",
                d.seq,
                d.boundary_seq,
                d.kind.as_str()
            );
        }
    }
    let _ = writeln!(out, "authority anchor {}", p.authority_path.display());
    if p.authority.sources.is_empty() {
        let _ = writeln!(out, "  (no human message anchored)");
    }
    for s in &p.authority.sources {
        let _ = writeln!(
            out,
            "  seq {}  event {}  sha256 {}",
            s.seq,
            s.event_id,
            short(&s.digest)
        );
    }
    if !p.unanchored.is_empty() {
        let seqs: Vec<String> = p.unanchored.iter().map(u64::to_string).collect();
        let _ = writeln!(
            out,
            "unanchored human messages (anchored at the next run): seq {}",
            seqs.join(", ")
        );
    }
    if let Some(d) = &p.delegation {
        let _ = writeln!(
            out,
            "delegation: child {} of parent {}, root {}; first message {} (sha256 {})",
            d.child_session_id,
            d.parent_session_id,
            d.root_session_id,
            d.initial_message.id,
            short(&d.initial_message.digest)
        );
    }
    match (&p.text, &p.pending) {
        (Some(text), Some(_)) => {
            let _ = writeln!(out, "\nWould project now:\n{text}");
        }
        // Items off the surface but their boundary already answered (or none yet): this is
        // what the next boundary would carry, not what the next request will.
        (Some(text), None) => {
            let _ = writeln!(
                out,
                "\nWould project now (only at the next boundary; none is pending):\n{text}"
            );
        }
        (None, _) => {
            let _ = writeln!(
                out,
                "\nWould project now: nothing: every item is still on the surface"
            );
        }
    }
    out
}
