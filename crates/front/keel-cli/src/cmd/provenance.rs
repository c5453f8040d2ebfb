//! `keel trace TARGET` and `keel provenance verify SESSION`: read-only views of a session's
//! provenance journal (`$KEEL_HOME/provenance/<session id>/`).
//!
//! `trace` loads the journal without side effects ([`keel_provenance::load_snapshot`]), answers
//! the same allow-listed query the model's `trace` tool does and renders it as text, JSON, DOT
//! or SVG (laid out by keel-viewer, no Graphviz); exit 0 with an answer, 1 when the query has
//! none (unknown or ambiguous target, capture incomplete). `verify` runs the offline validator: exit 0 valid, 1 invalid with the first
//! failure named (code, file, line, receipt, field); a journal that cannot be read is an error
//! (exit 2).

use super::Ctx;
use crate::cli::{ProvenanceCommand, TraceArgs, TraceDirection, TraceFormatArg};
use anyhow::{Context, Result, bail};
use keel_provenance::query::{QueryScope, trace_in};
use keel_provenance::verify::{VerifyError, verify};
use keel_provenance::{Direction, Snapshot, TraceFormat, load_snapshot, render};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Where the journal of `session` (an id, an id prefix, a session path or a journal directory)
/// lives.
fn journal_of(ctx: &Ctx, session: &str) -> Result<PathBuf> {
    let as_path = Path::new(session);
    if as_path.join(keel_provenance::RECEIPTS_FILE).is_file() {
        return Ok(as_path.to_path_buf());
    }
    let root = ctx.home.join("provenance");
    let exact = root.join(session);
    if !session.contains('/') && exact.join(keel_provenance::RECEIPTS_FILE).is_file() {
        return Ok(exact);
    }
    if let Ok(file) = ctx.store.resolve(session, &ctx.cwd)
        && let Some(id) = file.parent().and_then(|d| d.file_name())
    {
        let dir = root.join(id);
        if dir.join(keel_provenance::RECEIPTS_FILE).is_file() {
            return Ok(dir);
        }
        bail!(
            "session {} has no provenance journal in {} (run it with --provenance, or enable a \
             [[plugins]] row with use = \"provenance\")",
            id.to_string_lossy(),
            root.display()
        );
    }
    let mut matches: Vec<PathBuf> = std::fs::read_dir(&root)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(session))
        .map(|e| e.path())
        .collect();
    matches.sort();
    match matches.as_slice() {
        [one] => Ok(one.clone()),
        [] => bail!(
            "no provenance journal matches {session:?} under {} (see `keel sessions list`)",
            root.display()
        ),
        many => bail!(
            "{session:?} matches {} provenance journals under {}; give more of the id",
            many.len(),
            root.display()
        ),
    }
}

/// The journal of the newest session of this directory.
fn latest_journal(ctx: &Ctx) -> Result<PathBuf> {
    let newest = ctx
        .store
        .list(Some(&ctx.cwd))
        .into_iter()
        .find(|s| ctx.home.join("provenance").join(&s.id).is_dir());
    match newest {
        Some(s) => Ok(ctx.home.join("provenance").join(s.id)),
        None => bail!(
            "no session of {} has a provenance journal; pass --session ID (see `keel sessions list --all`)",
            ctx.cwd.display()
        ),
    }
}

/// `keel trace`.
pub fn trace_cmd(ctx: &Ctx, args: TraceArgs) -> Result<ExitCode> {
    let dir = match &args.session {
        Some(s) => journal_of(ctx, s)?,
        None => latest_journal(ctx)?,
    };
    let (snapshot, torn) = load_snapshot(&dir)
        .with_context(|| format!("cannot load the provenance journal {}", dir.display()))?;
    let mut err = std::io::stderr().lock();
    if let Some(t) = torn {
        writeln!(
            err,
            "keel: the journal ends in a torn line (line {}, {} bytes); tracing the {} complete receipts before it",
            t.line,
            t.bytes,
            snapshot.receipts().len()
        )?;
    }
    let direction = match args.direction {
        TraceDirection::Backward => Direction::Backward,
        TraceDirection::Forward => Direction::Forward,
    };
    // Subagent sessions joined into this graph (and theirs) are in scope, like for the tool.
    let children = child_snapshots(&dir, &snapshot, &mut err)?;
    let mut scope = QueryScope::new(&snapshot);
    for child in &children {
        scope = scope.with_child(child);
    }
    let answer = match trace_in(&scope, &args.target, direction, args.max_depth) {
        Ok(a) => a,
        Err(e) => {
            writeln!(err, "keel: trace {}: {e}", args.target)?;
            if let keel_provenance::QueryError::AmbiguousTarget { candidates, .. } = &e {
                for c in candidates {
                    writeln!(err, "  {c}")?;
                }
            }
            return Ok(ExitCode::from(1));
        }
    };
    let format = match args.format {
        TraceFormatArg::Text => TraceFormat::Text,
        TraceFormatArg::Json => TraceFormat::Json,
        TraceFormatArg::Dot => TraceFormat::Dot,
        TraceFormatArg::Svg => {
            let svg = keel_viewer::trace_svg_document(&answer);
            std::io::stdout().lock().write_all(svg.as_bytes())?;
            return Ok(ExitCode::SUCCESS);
        }
    };
    let mut out = std::io::stdout().lock();
    out.write_all(render(&answer, format).as_bytes())?;
    if format == TraceFormat::Json {
        writeln!(out)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The subagents' journals of `root` ([`keel_viewer::child_snapshots`]), each one that cannot
/// be read said on `err`.
pub(crate) fn child_snapshots(
    dir: &Path,
    root: &Snapshot,
    err: &mut impl Write,
) -> Result<Vec<Snapshot>> {
    let mut warnings = Vec::new();
    let children = keel_viewer::child_snapshots(dir, root, &mut warnings);
    for warning in warnings {
        writeln!(err, "{warning}")?;
    }
    Ok(children)
}

/// `keel provenance …`.
pub fn run(ctx: &Ctx, cmd: ProvenanceCommand) -> Result<ExitCode> {
    match cmd {
        ProvenanceCommand::Verify { session } => verify_cmd(ctx, &session),
    }
}

fn verify_cmd(ctx: &Ctx, session: &str) -> Result<ExitCode> {
    let dir = journal_of(ctx, session)?;
    let mut out = std::io::stdout().lock();
    match verify(&dir) {
        Ok(report) => {
            write!(
                out,
                "valid: {} receipt(s) in {}",
                report.receipts,
                dir.display()
            )?;
            match (&report.graph_receipts, &report.graph_id) {
                (Some(n), Some(id)) => write!(out, "; graph.json covers {n} (graph_id {id})")?,
                _ => write!(out, "; no graph.json")?,
            }
            if let Some(t) = &report.torn_tail {
                write!(
                    out,
                    "; torn tail at line {} ({} bytes) beyond the graph, verified as the prefix before it",
                    t.line, t.bytes
                )?;
            }
            if report.capture_failures > 0 {
                write!(
                    out,
                    "; capture incomplete ({} capture failure(s) recorded)",
                    report.capture_failures
                )?;
            }
            writeln!(out)?;
            Ok(ExitCode::SUCCESS)
        }
        Err(VerifyError::Failed(f)) => {
            writeln!(out, "invalid: {f} (journal {})", dir.display())?;
            Ok(ExitCode::from(1))
        }
        Err(e @ VerifyError::Io { .. }) => Err(e.into()),
    }
}
