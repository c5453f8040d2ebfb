//! `keel continuity show`: what a projection of a session would carry now, and its anchors,
//! read from the log and `$KEEL_HOME/continuity` without running anything.

use crate::anchors::{AnchorError, Anchors, Authority, Delegation};
use crate::basis::fold;
use crate::plugin::{ContinuityConfig, LogView, pending, projection_marker};
use crate::render::{BoundaryKind, Frame, Lineage, Rendered, render};
use keel_protocol::Seq;
use keel_session::Session;
use serde::Serialize;
use std::collections::HashSet;
use std::path::PathBuf;

/// A delivered projection, as the log records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Delivered {
    /// Seq of the `continuity/projection` event.
    pub seq: u64,
    /// The boundary it answered.
    pub boundary_seq: u64,
    /// Its kind.
    pub kind: BoundaryKind,
}

/// A boundary a request would answer now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Pending {
    /// Its kind.
    pub kind: BoundaryKind,
    /// Its seq: the replacing event for `replace`/`resume`, 0 for a child's first request.
    pub seq: u64,
}

/// What `keel continuity show` prints.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Preview {
    /// The session.
    pub session: String,
    /// The root of its task.
    pub root: String,
    /// The boundary a request would answer now, if one is pending (`null` when none).
    pub pending: Option<Pending>,
    /// Projections already delivered.
    pub delivered: Vec<Delivered>,
    /// What a projection would render now (items whose sources left the surface).
    pub text: Option<String>,
    /// Its items.
    pub items: Vec<crate::render::Item>,
    /// The authority anchor file and what it holds.
    pub authority_path: PathBuf,
    /// The anchored human messages.
    pub authority: Authority,
    /// The delegation record, for a child.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delegation: Option<Delegation>,
    /// Human messages of the log not anchored yet (a session from before continuity, or
    /// imported).
    pub unanchored: Vec<u64>,
}

/// Preview `session` against `anchors`. A corrupt or foreign anchor, or a log that disagrees
/// with its anchor, is an error naming the file.
pub fn preview(
    session: &Session,
    anchors: &Anchors,
    config: &ContinuityConfig,
    presenters: &keel_protocol::present::PresenterSet,
) -> Result<Preview, AnchorError> {
    let header = session.header();
    let id = header.id.to_string();
    let delegation = match header.delegation_depth {
        0 => None,
        _ => anchors.delegation(&id)?,
    };
    let root = delegation
        .as_ref()
        .map_or_else(|| id.clone(), |d| d.root_session_id.clone());
    let seed = header.seed_length.unwrap_or(0);
    let mut delivered = Vec::new();
    for ev in session.whole_event_iter() {
        if ev.seq.0 < seed || ev.type_name() != crate::PROJECTION_EVENT {
            continue;
        }
        if let Some((b, kind)) = projection_marker(ev) {
            delivered.push(Delivered {
                seq: ev.seq.0,
                boundary_seq: b.0,
                kind,
            });
        }
    }
    // The plugin's own rule, as if a request went out now from a fresh process.
    let view = LogView::of(session);
    let last = session.surface().last_replacement();
    let pending = pending(view.child_boundary(), last, seed, view.answered, view.len);
    let basis = fold(
        session,
        session.next_seq(),
        config.child_results,
        presenters,
    );
    let authority = anchors.authority(&root)?;
    let unanchored = if root == id || seed > 0 {
        let sources: Vec<_> = basis.humans.iter().map(|h| h.source()).collect();
        // On a copy: `show` writes nothing.
        authority
            .clone()
            .merge(&anchors.authority_path(&root), &sources)?
    } else {
        Vec::new()
    };
    let on_surface: HashSet<Seq> = session.surface().nodes().iter().copied().collect();
    let lineage = Lineage {
        root: root.clone(),
        parent: header.parent_session.as_ref().map(|p| p.to_string()),
        current: id.clone(),
        first_message: delegation.as_ref().map(|d| {
            (
                d.initial_message.id.clone(),
                d.initial_message.digest.clone(),
            )
        }),
    };
    let (kind, boundary) = pending.unwrap_or((BoundaryKind::Resume, last.unwrap_or(Seq(0))));
    let pending = pending.map(|(kind, seq)| Pending { kind, seq: seq.0 });
    let frame = Frame {
        kind,
        boundary,
        source_session: &id,
        lineage: &lineage,
        budget: config.budget_bytes,
    };
    let Rendered { text, items } = render(&basis, &on_surface, &frame);
    Ok(Preview {
        session: id,
        authority_path: anchors.authority_path(&root),
        root,
        pending,
        delivered,
        text,
        items,
        authority,
        delegation,
        unanchored,
    })
}
