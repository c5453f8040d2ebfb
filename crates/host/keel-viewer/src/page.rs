//! The HTML page of a session with the formation graphs of its tool results, read from the
//! provenance journal beside it (and its subagents' journals, as `keel trace` has them in
//! scope): what `keel sessions export --format html` writes and `keel serve` serves
//! (`GET /api/v1/sessions/{id}/export`).

use crate::html::{HtmlOptions, render_html};
use keel_protocol::present::PresenterSet;
use keel_provenance::{JournalError, QueryScope, RECEIPTS_FILE, Snapshot};
use keel_session::Session;
use std::path::Path;

/// A session's page and what was worth saying while it was made.
#[derive(Debug)]
pub struct SessionPage {
    /// The page.
    pub html: String,
    /// A torn journal line, a subagent's journal that could not be read: the page is made
    /// without what they would have given.
    pub warnings: Vec<String>,
}

/// The page of `session`, whose journals live under `home` (`$KEEL_HOME`), with at most
/// `graph_budget` bytes of graphs. An error only when the session's own journal exists and
/// cannot be read.
pub fn session_page(
    home: &Path,
    session: &Session,
    graph_budget: usize,
    presenters: PresenterSet,
) -> Result<SessionPage, JournalError> {
    let dir = keel_provenance::journal_dir(home, &session.header().id)?;
    let mut warnings = Vec::new();
    if !dir.join(RECEIPTS_FILE).is_file() {
        let options = HtmlOptions {
            provenance: None,
            graph_budget,
            presenters,
        };
        return Ok(SessionPage {
            html: render_html(session, &options),
            warnings,
        });
    }
    let (snapshot, children) = load_journals(&dir, &mut warnings)?;
    let mut scope = QueryScope::new(&snapshot);
    for child in &children {
        scope = scope.with_child(child);
    }
    let options = HtmlOptions {
        provenance: Some(&scope),
        graph_budget,
        presenters,
    };
    Ok(SessionPage {
        html: render_html(session, &options),
        warnings,
    })
}

/// Whether session `session` records provenance: its journal exists under `home`.
pub fn records_provenance(home: &Path, session: &keel_protocol::SessionId) -> bool {
    keel_provenance::journal_dir(home, session).is_ok_and(|dir| dir.join(RECEIPTS_FILE).is_file())
}

/// The formation graph of one tool result, for a page that shows it on demand (`keel serve`'s
/// `GET /api/v1/sessions/{id}/provenance`).
#[derive(Debug)]
pub enum ResultGraph {
    /// The session records no provenance (it ran without the `provenance` plugin).
    NoJournal,
    /// The journal has no answer for the result: the query's error, in words.
    NoAnswer(String),
    /// The graph, as a standalone SVG document, with its size.
    Drawn {
        /// The SVG document ([`crate::trace_svg_document`]).
        svg: String,
        /// Nodes drawn.
        nodes: usize,
        /// Edges drawn.
        edges: usize,
    },
}

/// The formation graph of the result of the tool call `call_id` in session `session` (what
/// `keel trace result:<call id> --format svg` draws, with the subagents' journals in scope),
/// read from the journals under `home`. An error only when the journal exists and cannot be
/// read.
pub fn result_graph(
    home: &Path,
    session: &keel_protocol::SessionId,
    call_id: &str,
) -> Result<ResultGraph, JournalError> {
    let dir = keel_provenance::journal_dir(home, session)?;
    if !dir.join(RECEIPTS_FILE).is_file() {
        return Ok(ResultGraph::NoJournal);
    }
    let (snapshot, children) = load_journals(&dir, &mut Vec::new())?;
    let mut scope = QueryScope::new(&snapshot);
    for child in &children {
        scope = scope.with_child(child);
    }
    let target = format!("result:{call_id}");
    Ok(
        match keel_provenance::query::trace_in(
            &scope,
            &target,
            keel_provenance::Direction::Backward,
            crate::GRAPH_DEPTH,
        ) {
            Ok(answer) => ResultGraph::Drawn {
                svg: crate::trace_svg_document(&answer),
                nodes: answer.nodes.len(),
                edges: answer.edges.len(),
            },
            Err(e) => ResultGraph::NoAnswer(e.to_string()),
        },
    )
}

/// The journal in `dir` and its subagents' journals; a torn last line or an unreadable
/// subagent journal is said in `warnings`.
fn load_journals(
    dir: &Path,
    warnings: &mut Vec<String>,
) -> Result<(Snapshot, Vec<Snapshot>), JournalError> {
    let (snapshot, torn) = keel_provenance::load_snapshot(dir)?;
    if let Some(t) = torn {
        warnings.push(format!(
            "{}: the journal ends in a torn line (line {}, {} bytes); graphs use the receipts before it",
            dir.display(),
            t.line,
            t.bytes
        ));
    }
    let children = child_snapshots(dir, &snapshot, warnings);
    Ok((snapshot, children))
}

/// The journals of the subagent sessions `root` joins, transitively (siblings of `dir` under
/// `$KEEL_HOME/provenance/`). A child without a readable journal is left out with a warning: a
/// trace reaching into it reports `complete: false`.
pub fn child_snapshots(dir: &Path, root: &Snapshot, warnings: &mut Vec<String>) -> Vec<Snapshot> {
    let Some(store) = dir.parent() else {
        return Vec::new();
    };
    let mut seen = vec![root.run_id().to_owned()];
    let mut pending: Vec<String> = root.child_runs().into_iter().map(str::to_owned).collect();
    let mut children = Vec::new();
    while let Some(run) = pending.pop() {
        if seen.contains(&run) || run.contains('/') || run.contains("..") {
            continue;
        }
        seen.push(run.clone());
        match keel_provenance::load_snapshot(&store.join(&run)) {
            Ok((child, _)) => {
                pending.extend(child.child_runs().into_iter().map(str::to_owned));
                children.push(child);
            }
            Err(e) => warnings.push(format!("keel: subagent session {run}: {e}")),
        }
    }
    children
}
