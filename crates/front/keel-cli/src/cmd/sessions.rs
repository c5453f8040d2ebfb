//! `keel sessions list|search|show|check|export|import`: inspect, validate and move session logs.
//!
//! Every subcommand resolves its argument through the store (a path, an id or an id prefix),
//! loads the file with keel-session's loader (plain or zstd, keel's or dsh's) and only reads it;
//! `import` is the one writer, and it only creates a new session directory. The views (the
//! transcript, the check report, one-line event summaries) are computed by keel-session's
//! `view` module; the modules here render them ([`render`], [`check`], [`fmt`]). Results go to
//! stdout, warnings (a dropped torn tail) to stderr. Exit codes: 0 success, 2 any error (bad
//! argument, unreadable or corrupt file); `check` adds 1 for a repairable session. See
//! `docs/sessions.md`.

mod check;
mod fmt;
pub(super) mod render;
mod transfer;

use super::Ctx;
use crate::cli::SessionsCommand;
use anyhow::{Context, Result, anyhow};
use keel_session::view::{Transcript, call_names, check_file, event_summary};
use keel_session::{Loaded, SessionSummary, Store};
use render::render_text;
use serde_json::json;
use std::fmt::Write as _;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Run a `sessions` subcommand.
pub fn run(ctx: &Ctx, cmd: SessionsCommand) -> Result<ExitCode> {
    let res = match cmd {
        SessionsCommand::List { all, json } => list(ctx, all, json),
        SessionsCommand::Show {
            session,
            last,
            requests: true,
            ..
        } => show_requests(ctx, &show_target(ctx, session, last)?),
        SessionsCommand::Show {
            session,
            last,
            events,
            json,
            ..
        } => show(ctx, &show_target(ctx, session, last)?, events, json),
        SessionsCommand::Check { session, json } => check(ctx, &session, json),
        SessionsCommand::Search {
            query,
            all,
            json,
            limit,
        } => search(ctx, &query.join(" "), all, json, limit),
        SessionsCommand::Export {
            session,
            format,
            output,
            graph_budget,
        } => export(ctx, &session, format, output.as_deref(), graph_budget << 10),
        SessionsCommand::Import { path } => import(ctx, &path),
    };
    match res {
        // `keel sessions show … | head`: the reader left; that is not a failure.
        Err(e) if is_broken_pipe(&e) => Ok(ExitCode::SUCCESS),
        r => r,
    }
}

/// What `keel sessions show` shows: the session named, or with `--last` the latest of this
/// directory as `keel resume --last` picks it (a path, which resolves to itself).
fn show_target(ctx: &Ctx, session: Option<String>, last: bool) -> Result<String> {
    match session {
        Some(q) if !last => Ok(q),
        _ => Ok(super::run::latest_session(ctx)?.display().to_string()),
    }
}

/// The error is stdout closed by its reader (`… | head`).
pub(super) fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Write a result to stdout.
pub(super) fn emit(bytes: &[u8]) -> Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(bytes)
        .and_then(|()| out.flush())
        .context("cannot write to stdout")
}

/// Write a warning to stderr.
pub(super) fn warn(msg: &str) {
    let _ = writeln!(std::io::stderr().lock(), "keel: warning: {msg}");
}

/// The session file `query` names (a path, an id or an id prefix).
fn resolve(ctx: &Ctx, query: &str) -> Result<PathBuf> {
    Ok(ctx.store.resolve(query, &ctx.cwd)?)
}

/// Load a resolved session file, warning about a dropped torn tail.
pub(crate) fn load(file: &Path) -> Result<Loaded> {
    let loaded = Store::load(file).map_err(|e| {
        anyhow!(
            "{e}\n(`keel sessions check {}` reports what it can)",
            file.display()
        )
    })?;
    if let Some(t) = &loaded.report.torn {
        warn(&format!(
            "{}: torn tail at line {} dropped ({} bytes: {}); showing the {} committed events",
            file.display(),
            t.line,
            t.dropped_bytes,
            t.reason,
            loaded.report.events
        ));
    }
    Ok(loaded)
}

fn search(ctx: &Ctx, query: &str, all: bool, as_json: bool, limit: usize) -> Result<ExitCode> {
    let mut index = keel_search::Index::open(ctx.store.home())?;
    let refresh = index.refresh(&ctx.store)?;
    for (file, why) in &refresh.problems {
        warn(&format!("{} is not searchable: {why}", file.display()));
    }
    let project = (!all).then(|| Store::project_key(&ctx.cwd));
    let hits = index.search(query, project.as_deref(), limit)?;
    let mut out = String::new();
    if as_json {
        for hit in &hits {
            out.push_str(&serde_json::to_string(hit).context("cannot encode a hit")?);
            out.push('\n');
        }
    } else {
        for hit in &hits {
            let _ = writeln!(
                out,
                "{}  turn {}  seq {}  {}  {}",
                hit.session, hit.turn, hit.seq, hit.kind, hit.snippet
            );
            if all {
                let _ = writeln!(out, "    in {}", hit.cwd);
            }
        }
        if hits.is_empty() {
            let _ = writeln!(
                std::io::stderr().lock(),
                "no session {} mentions {query:?}{}",
                if all { "anywhere" } else { "of this project" },
                if all {
                    ""
                } else {
                    " (--all searches every project)"
                }
            );
        }
    }
    emit(out.as_bytes())?;
    Ok(if hits.is_empty() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// `keel fork [SESSION] [--at N|seq:S]`: a new session seeded with `SESSION`'s log up to the
/// boundary ([`fork_boundary`]), in the same project.
pub fn fork(ctx: &Ctx, args: &crate::cli::ForkArgs) -> Result<ExitCode> {
    let file = match &args.session {
        Some(q) => resolve(ctx, q)?,
        None => super::run::latest_session(ctx)?,
    };
    let loaded = load(&file)?;
    let parent = &loaded.session;
    let boundary = fork_boundary(parent, args.at.as_deref(), "--at")?;
    // The files' plan first: a fork asked to restore them is not written when it cannot.
    let files_plan = if args.files {
        use keel_checkpoint::rewind::{Point, plan};
        plan(
            parent,
            Point::Seq(boundary.0.min(parent.len().saturating_sub(1))),
        )
        .map_err(|e| anyhow!("--files: {e} ({})", file.display()))?
    } else {
        None
    };
    let (id, path, child) = fork_at(ctx, &file, parent, boundary)?;
    let turns = child
        .events()
        .filter(|e| matches!(e.body, keel_protocol::EventBody::TurnEnd(_)))
        .count();
    let mut restored = None;
    if let Some(plan) = &files_plan {
        let (mut log, _, _) =
            keel_session::PersistentSession::resume(&path, keel_session::WriterOptions::default())
                .with_context(|| format!("cannot open {}", path.display()))?;
        let record = restore_files(ctx, &mut log, &path, plan, args.force)?;
        log.close()
            .with_context(|| format!("cannot write {}", path.display()))?;
        restored = Some((
            keel_checkpoint::rewind::describe(&record, &plan.label),
            record,
        ));
    }
    let text = if args.json {
        let v = json!({
            "session": id, "path": path, "parent": parent.header().id,
            "seedLength": boundary.0, "files": restored.as_ref().map(|r| &r.1),
        });
        format!("{v}\n")
    } else {
        let files = match (&restored, args.files) {
            (Some((said, _)), _) => format!("{said}\n"),
            (None, true) => {
                "The files need no rewind: no step changed them after that point.\n".to_owned()
            }
            (None, false) => String::new(),
        };
        format!(
            "Forked {} at seq {} ({turns} completed turn(s) kept) into {id}\n  {}\n{files}Continue it with: keel resume {id}\n",
            parent.header().id,
            boundary.0,
            path.display()
        )
    };
    emit(text.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

/// Put the workspace of the session open in `log` (from `file`) back to `plan`'s checkpoint
/// and log the rewind (`checkpoint/restored`) in it: the rewind's record.
fn restore_files(
    ctx: &Ctx,
    log: &mut keel_session::PersistentSession,
    file: &Path,
    plan: &keel_checkpoint::rewind::Plan,
    force: bool,
) -> Result<serde_json::Value> {
    let id = log.session().header().id.clone();
    let cwd = log
        .session()
        .header()
        .cwd
        .as_deref()
        .map_or_else(|| ctx.cwd.clone(), PathBuf::from);
    let git_dir = keel_checkpoint::shadow_dir(ctx.store.home(), &cwd);
    let mut shadow = keel_checkpoint::Shadow::open(&git_dir, &cwd, checkpoint_caps(ctx))
        .with_context(|| format!("cannot open the checkpoints of {}", cwd.display()))?;
    let (record, failure) =
        match keel_checkpoint::rewind::apply(&mut shadow, plan, force, id.as_str()) {
            Ok(record) => (record, None),
            Err(keel_checkpoint::rewind::RewindError::Incomplete { reason, record }) => {
                (record, Some(reason))
            }
            Err(e) => {
                return Err(anyhow::Error::new(e).context(format!(
                    "cannot rewind {}; nothing was logged",
                    cwd.display()
                )));
            }
        };
    let mut ev = log.session().stamp(
        keel_protocol::EventBody::Other(Box::new(keel_protocol::OtherEvent {
            type_name: keel_checkpoint::RESTORED_EVENT.to_owned(),
            data: record.clone(),
        })),
        None,
    );
    ev.ignorable = true;
    log.append(ev)
        .with_context(|| format!("cannot log the rewind in {}", file.display()))?;
    if let Some(reason) = failure {
        log.flush()
            .with_context(|| format!("cannot write {}", file.display()))?;
        return Err(anyhow!(
            "the rewind of {} stopped part-way: {reason}; `keel rewind {id} --undo` returns the files to what they were before it",
            cwd.display()
        ));
    }
    Ok(record)
}

/// Write a new session seeded with `parent` (loaded from `file`) up to `boundary`, in its
/// project: its id, file and session.
pub(crate) fn fork_at(
    ctx: &Ctx,
    file: &Path,
    parent: &keel_session::Session,
    boundary: keel_protocol::Seq,
) -> Result<(keel_protocol::SessionId, PathBuf, keel_session::Session)> {
    let id = keel_session::new_session_id();
    let child = parent
        .fork(boundary, id.clone())
        .with_context(|| format!("cannot fork {} at seq {}", file.display(), boundary.0))?;
    let cwd = parent
        .header()
        .cwd
        .as_deref()
        .map_or_else(|| ctx.cwd.clone(), PathBuf::from);
    let options = keel_session::WriterOptions {
        format: keel_session::Format::of_path(file),
        ..keel_session::WriterOptions::default()
    };
    let writer = ctx
        .store
        .create(&cwd, &child, options)
        .with_context(|| format!("cannot write the forked session of {}", file.display()))?;
    let path = writer.path().to_path_buf();
    writer
        .close()
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok((id, path, child))
}

/// `keel rewind [SESSION] --to N|seq:S | --undo [--files|--conversation] [--force]`: the
/// workspace's files back to a checkpoint and the conversation back to that point
/// (`keel_checkpoint::rewind`), logged as `checkpoint/restored` and `surface/rewind`.
pub fn rewind(ctx: &Ctx, args: &crate::cli::RewindArgs) -> Result<ExitCode> {
    use keel_checkpoint::rewind::{Point, Rewind, Scope, describe};
    use keel_protocol::EventBody;
    let file = match &args.session {
        Some(q) => resolve(ctx, q)?,
        None => super::run::latest_session(ctx)?,
    };
    let (point, flag) = match (&args.to, args.undo) {
        (_, true) => (Point::Undo, "--undo".to_owned()),
        (Some(to), false) => match Point::parse(to) {
            Some(Point::Undo) | None => {
                return Err(anyhow!("--to takes a turn number N or seq:S, not {to:?}"));
            }
            Some(p) => (p, format!("--to {to}")),
        },
        (None, false) => return Err(anyhow!("give --to N, --to seq:S or --undo")),
    };
    // Opened for appending first: crash repair closes an interrupted turn, so the
    // conversation can rewind.
    let (mut log, _, repair) =
        keel_session::PersistentSession::resume(&file, keel_session::WriterOptions::default())
            .with_context(|| format!("cannot open {}", file.display()))?;
    if !repair.is_noop() {
        warn(&format!("crash repair {repair}"));
    }
    let session = log.session();
    let id = session.header().id.clone();
    let asked = Scope::of_flags(args.files, args.conversation);
    // Decide everything before changing anything.
    let decided = Rewind::decide(session, point, asked)
        .map_err(|e| anyhow!("{flag}: {e} ({})", file.display()))?;
    let cwd = session
        .header()
        .cwd
        .as_deref()
        .map_or_else(|| ctx.cwd.clone(), PathBuf::from);
    let (record, files_done) = match &decided.files {
        Some(plan) => {
            let record = restore_files(ctx, &mut log, &file, plan, args.force)
                .with_context(|| flag.clone())?;
            let done = format!("{} ({})", describe(&record, &point.target()), cwd.display());
            (Some(record), Some(done))
        }
        None => (None, None),
    };
    let notes = decided.notes(files_done, &point.since());
    let rewound = match &decided.conversation {
        Some(body) => {
            let seq = log.session().next_seq();
            let json =
                json!({"seq": seq.0, "toSeq": body.to_seq.0, "turn": body.turn.map(|t| t.0)});
            let ev = log
                .session()
                .stamp(EventBody::SurfaceRewind(Box::new(body.clone())), None);
            log.append(ev).with_context(|| {
                format!("cannot log the conversation rewind in {}", file.display())
            })?;
            Some(json)
        }
        None => None,
    };
    log.close()
        .with_context(|| format!("cannot write {}", file.display()))?;
    let text = if args.json {
        let mut v = record.unwrap_or_else(|| json!({}));
        v["conversation"] = rewound.unwrap_or(serde_json::Value::Null);
        format!("{v}\n")
    } else {
        format!("{}\nUndo with: keel rewind {id} --undo\n", notes.join("\n"))
    };
    emit(text.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

/// The caps of the `checkpoints` row of the configuration (its defaults when the row or the
/// configuration cannot be read: the rewind then only records the workspace with them).
fn checkpoint_caps(ctx: &Ctx) -> keel_checkpoint::Caps {
    ctx.host()
        .ok()
        .and_then(|host| {
            keel_host::plugins::settings::<keel_checkpoint::CheckpointConfig>(
                host.config(),
                &keel_checkpoint::CheckpointPlugin,
            )
            .ok()
        })
        .map(|s| s.config)
        .unwrap_or_default()
        .caps()
}

/// The seq a fork of `session` starts after: `at` = `N` (just before turn N's prompt was
/// queued), `seq:S` (the start of the turn holding S, or S between turns), or nothing (after
/// the last completed turn).
pub(crate) fn fork_boundary(
    session: &keel_session::Session,
    at: Option<&str>,
    flag: &str,
) -> Result<keel_protocol::Seq> {
    use keel_protocol::{EventBody, Seq};
    // Where each turn starts: its turn/start, moved back over the inbox splices that queued
    // its prompt (so the fork has no pending prompt to run again).
    let starts: Vec<(u32, u64)> = {
        let mut out = Vec::new();
        let mut splices_from: Option<u64> = None;
        for ev in session.events() {
            match &ev.body {
                EventBody::InboxSpliced(_) => {
                    splices_from.get_or_insert(ev.seq.0);
                }
                EventBody::TurnStart(t) => {
                    out.push((t.turn.0, splices_from.unwrap_or(ev.seq.0)));
                    splices_from = None;
                }
                _ => splices_from = None,
            }
        }
        out
    };
    let Some(at) = at else {
        return Ok(match session.last_turn_end() {
            Some(end) => Seq(end.0 + 1),
            None => Seq(starts.first().map_or(session.len(), |s| s.1)),
        });
    };
    if let Some(seq) = at.strip_prefix("seq:") {
        let seq: u64 = seq
            .trim()
            .parse()
            .map_err(|_| anyhow!("{flag} seq:S needs a number, not {seq:?}"))?;
        if seq >= session.len() {
            return Err(anyhow!(
                "{flag} seq:{seq}: the session has {} events (seqs 0..{})",
                session.len(),
                session.len().saturating_sub(1)
            ));
        }
        // The turn holding `seq`, if any: the last turn starting at or before it whose end is
        // not before it.
        let ends: Vec<u64> = session
            .events()
            .filter(|e| matches!(e.body, EventBody::TurnEnd(_)))
            .map(|e| e.seq.0)
            .collect();
        let inside = starts
            .iter()
            .rev()
            .find(|(_, start)| *start <= seq)
            .filter(|(_, start)| !ends.iter().any(|end| *end >= *start && *end < seq));
        return Ok(Seq(inside.map_or(seq, |(_, start)| *start)));
    }
    let n: u32 = at
        .trim()
        .parse()
        .map_err(|_| anyhow!("{flag} takes a turn number N or seq:S, not {at:?}"))?;
    starts
        .iter()
        .find(|(turn, _)| *turn == n)
        .map(|(_, start)| Seq(*start))
        .ok_or_else(|| {
            anyhow!(
                "{flag} {n}: the session has {} turn(s)",
                starts.last().map_or(0, |s| s.0)
            )
        })
}

fn list(ctx: &Ctx, all: bool, as_json: bool) -> Result<ExitCode> {
    let scope = if all { None } else { Some(ctx.cwd.as_path()) };
    let sessions = ctx.store.list(scope);
    if as_json {
        let rows: Vec<serde_json::Value> = sessions.iter().map(summary_json).collect();
        let mut text = serde_json::to_string(&rows).context("cannot encode the listing")?;
        text.push('\n');
        emit(text.as_bytes())?;
        return Ok(ExitCode::SUCCESS);
    }
    if sessions.is_empty() {
        let _ = match scope {
            Some(cwd) => writeln!(
                std::io::stderr().lock(),
                "no sessions for {} in {} (--all lists every project)",
                cwd.display(),
                ctx.store.home().join("sessions").display()
            ),
            None => writeln!(
                std::io::stderr().lock(),
                "no sessions in {}",
                ctx.store.home().join("sessions").display()
            ),
        };
        return Ok(ExitCode::SUCCESS);
    }
    emit(list_table(&sessions, all).as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

fn summary_json(s: &SessionSummary) -> serde_json::Value {
    let modified = s
        .last_modified
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_millis() as u64);
    json!({
        "id": s.id,
        "path": s.path,
        "cwd": s.cwd,
        "created": s.created,
        "modified": modified,
        "events": s.events,
        "turns": s.turns,
        "title": s.title,
        "firstPrompt": s.first_prompt,
        "compressed": s.compressed,
        "parent": s.parent,
        "problem": s.problem,
        "outcome": s.outcome,
    })
}

fn list_table(sessions: &[SessionSummary], with_cwd: bool) -> String {
    let id_w = sessions
        .iter()
        .map(|s| s.id.chars().count())
        .max()
        .unwrap_or(2)
        .max(2);
    let cwd_of = |s: &SessionSummary| s.cwd.clone().unwrap_or_else(|| "-".to_owned());
    let cwd_w = sessions
        .iter()
        .map(|s| cwd_of(s).chars().count())
        .max()
        .unwrap_or(3)
        .max(3);
    let mut out = String::new();
    let _ = write!(
        out,
        "{:<id_w$}  {:<16}  {:>5}  {:<11}  ",
        "ID", "CREATED", "TURNS", "OUTCOME"
    );
    if with_cwd {
        let _ = write!(out, "{:<cwd_w$}  ", "CWD");
    }
    let _ = writeln!(out, "TITLE — FIRST PROMPT");
    for s in sessions {
        let created = fmt::format_time(s.created);
        let created = created.get(..16).unwrap_or(&created);
        let _ = write!(
            out,
            "{:<id_w$}  {created:<16}  {:>5}  {:<11}  ",
            s.id, s.turns, s.outcome
        );
        if with_cwd {
            let _ = write!(out, "{:<cwd_w$}  ", cwd_of(s));
        }
        let title = match (&s.problem, &s.title, &s.first_prompt) {
            (Some(p), _, _) => format!("(unreadable: {})", fmt::one_line(p, 200)),
            (None, Some(t), Some(p)) => {
                format!("{} — {}", fmt::one_line(t, 50), fmt::one_line(p, 60))
            }
            (None, Some(t), None) => fmt::one_line(t, 60),
            (None, None, Some(p)) => fmt::one_line(p, 80),
            (None, None, None) => "-".to_owned(),
        };
        let _ = writeln!(out, "{title}");
    }
    out
}

fn show(ctx: &Ctx, query: &str, events: bool, as_json: bool) -> Result<ExitCode> {
    let file = resolve(ctx, query)?;
    let loaded = load(&file)?;
    let session = &loaded.session;
    let mut out = Vec::new();
    match (events, as_json) {
        (true, true) => {
            for ev in session.events() {
                serde_json::to_writer(&mut out, &*ev)
                    .with_context(|| format!("cannot encode event #{}", ev.seq))?;
                out.push(b'\n');
            }
        }
        (true, false) => {
            let names = call_names(session);
            let mut text = String::new();
            for ev in session.events() {
                let _ = writeln!(
                    text,
                    "{:>6}  {:<25}  {}",
                    ev.seq.0,
                    ev.type_name(),
                    event_summary(&ev, &names)
                );
            }
            out = text.into_bytes();
        }
        (false, true) => {
            serde_json::to_writer(
                &mut out,
                &Transcript::build(session, &keel_host::presenters()),
            )
            .context("cannot encode the transcript")?;
            out.push(b'\n');
        }
        (false, false) => {
            out = render_text(&Transcript::build(session, &keel_host::presenters())).into_bytes()
        }
    }
    emit(&out)?;
    Ok(ExitCode::SUCCESS)
}

/// `keel sessions show ID --requests`: the request bodies rebuilt from the log.
fn show_requests(ctx: &Ctx, query: &str) -> Result<ExitCode> {
    let file = resolve(ctx, query)?;
    let loaded = load(&file)?;
    let rebuilt = keel_agent::rebuild::rebuild_requests(&loaded.session)
        .with_context(|| format!("cannot rebuild the requests of {}", file.display()))?;
    let catalogue = keel_llm::ModelCatalogue::default();
    let mut out = Vec::new();
    for r in &rebuilt {
        let body = keel_llm::request_body(&r.request, &catalogue.lookup(&r.request.model));
        serde_json::to_writer(
            &mut out,
            &serde_json::json!({"turn": r.turn, "step": r.step, "seq": r.at.0, "body": body}),
        )
        .context("cannot encode a request")?;
        out.push(b'\n');
    }
    emit(&out)?;
    Ok(ExitCode::SUCCESS)
}

fn check(ctx: &Ctx, query: &str, as_json: bool) -> Result<ExitCode> {
    let file = resolve(ctx, query)?;
    let (report, loaded) = check_file(&file);
    // The process exits right after this command: freeing a million-event session (every
    // record, run and message, one allocation at a time) would cost a third as much as loading
    // it, for memory the OS takes back at exit anyway.
    std::mem::forget(loaded);
    if as_json {
        let mut text = serde_json::to_string(&report).context("cannot encode the report")?;
        text.push('\n');
        emit(text.as_bytes())?;
    } else {
        emit(check::render(&report).as_bytes())?;
    }
    Ok(ExitCode::from(check::exit_code(report.status)))
}

fn export(
    ctx: &Ctx,
    query: &str,
    format: crate::cli::ExportFormat,
    output: Option<&Path>,
    graph_budget: usize,
) -> Result<ExitCode> {
    let file = resolve(ctx, query)?;
    let loaded = load(&file)?;
    let bytes = match format {
        crate::cli::ExportFormat::Html => html(ctx, &loaded.session, graph_budget)?,
        _ => transfer::export(&loaded.session, format)?,
    };
    match output {
        None => emit(&bytes)?,
        Some(path) => std::fs::write(path, &bytes)
            .with_context(|| format!("cannot write {}", path.display()))?,
    }
    Ok(ExitCode::SUCCESS)
}

/// The HTML page of `session`, with the formation graphs of its tool results when it has a
/// provenance journal (and with its subagents' journals in scope, as `keel trace` has them).
fn html(ctx: &Ctx, session: &keel_session::Session, graph_budget: usize) -> Result<Vec<u8>> {
    let page = keel_viewer::session_page(&ctx.home, session, graph_budget, keel_host::presenters())
        .with_context(|| {
            format!(
                "cannot load the provenance journal of session {}",
                session.header().id
            )
        })?;
    for warning in &page.warnings {
        warn(warning);
    }
    Ok(page.html.into_bytes())
}

fn import(ctx: &Ctx, path: &Path) -> Result<ExitCode> {
    let file = transfer::source_file(path)?;
    let imported = transfer::import(&ctx.store, &ctx.cwd, &file, &mut |w| warn(&w))?;
    let text = format!(
        "imported {} ({} events, {} turns)\nid    {}\npath  {}\n",
        file.display(),
        imported.events,
        imported.turns,
        imported.id,
        imported.path.display()
    );
    emit(text.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}
