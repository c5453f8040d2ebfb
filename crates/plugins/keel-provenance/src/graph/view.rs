//! The query side of a [`Snapshot`]: the public [`Node`] / [`Edge`] view (built on first use after
//! a change), lookups of nodes by id (lazily identified nodes are indexed on demand), and the
//! per-node facts that `query` reads (native id, receipt, labels, references).
//!
//! Data flow: records and ids (`compile.rs`, `encode.rs`) → these read-only accessors → `query`
//! and `render`; nothing here changes the graph except caches behind a `OnceLock` / `Mutex`.

use super::{Rec, Snapshot, encode::receipt_sha256};
use crate::fxhash::FxMap;
use crate::model::{Disposition, Stage};
use crate::node::{Edge, Id, Node};
use keel_protocol::sync::Locked;

/// Occurrence stage, occurrence/fact transform, fact role, disposition category of a node.
pub(crate) type Labels<'a> = (
    Option<Stage>,
    Option<&'a Id>,
    Option<&'a Id>,
    Option<Disposition>,
);

/// The public [`Node`] / [`Edge`] view, built on demand.
#[derive(Debug, Clone, Default)]
pub(super) struct View {
    nodes: Vec<Node>,
    edges: Vec<Edge>,
    index: FxMap<Id, u32>,
}

impl Snapshot {
    /// All nodes, in creation order (the view is built on the first call after a change).
    pub fn nodes(&self) -> &[Node] {
        &self.view().nodes
    }

    /// All edges, in creation order (the view is built on the first call after a change).
    pub fn edges(&self) -> &[Edge] {
        &self.view().edges
    }

    /// A node by id.
    pub fn node(&self, id: &str) -> Option<&Node> {
        let view = self.view();
        view.index.get(id).map(|&i| &view.nodes[i as usize])
    }

    /// The node a node id names, in this run.
    pub(crate) fn find(&self, id: &str) -> Option<u32> {
        if let Some(&i) = self.index.get(id) {
            return Some(i);
        }
        if !id.starts_with("fact_") && !id.starts_with("origin_") && !id.starts_with("source_") {
            return None;
        }
        let mut lazy = self.lazy_index.0.locked();
        let (covered, map) = &mut *lazy;
        for i in *covered..self.recs.len() {
            if matches!(
                self.recs[i],
                Rec::Source { .. } | Rec::Origin { .. } | Rec::Fact { .. }
            ) {
                map.insert(self.id(i as u32).clone(), i as u32);
            }
        }
        *covered = self.recs.len();
        map.get(id).copied()
    }

    /// The native id behind a node: the one its occurrence observed (occurrences, outcomes,
    /// facts), or the id a source label names (`model:<event id>`, `call:<call id>`).
    pub(crate) fn native_of(&self, i: u32) -> Option<&str> {
        match &self.recs[i as usize] {
            Rec::Occurrence { receipt }
            | Rec::Outcome { receipt, .. }
            | Rec::Fact { receipt, .. } => Some(&self.receipt_data[*receipt as usize].native_id),
            Rec::Source { label } => Some(label.split_once(':').map_or(&**label, |(_, id)| id)),
            _ => None,
        }
    }

    /// The receipt id behind a node (occurrences, outcomes, facts).
    pub(crate) fn receipt_of(&self, i: u32) -> Option<&Id> {
        match &self.recs[i as usize] {
            Rec::Occurrence { receipt }
            | Rec::Outcome { receipt, .. }
            | Rec::Fact { receipt, .. } => Some(&self.receipts[*receipt as usize].receipt_id),
            Rec::Source { .. } | Rec::Origin { .. } => None,
        }
    }

    /// Occurrence stage, occurrence/fact transform, fact role, disposition category.
    pub(crate) fn labels(&self, i: u32) -> Labels<'_> {
        match &self.recs[i as usize] {
            Rec::Occurrence { receipt } => {
                let r = &self.receipt_data[*receipt as usize];
                (Some(r.stage), Some(&r.transform), None, None)
            }
            Rec::Fact { receipt, role, .. } => {
                let r = &self.receipt_data[*receipt as usize];
                (None, Some(&r.transform), Some(role), None)
            }
            Rec::Outcome { category, .. } => (None, None, None, *category),
            Rec::Source { .. } | Rec::Origin { .. } => (None, None, None, None),
        }
    }

    /// Fact: (origin, outcome, occurrence); outcome: (-, -, occurrence).
    pub(crate) fn refs(&self, i: u32) -> (Option<u32>, Option<u32>, Option<u32>) {
        match &self.recs[i as usize] {
            Rec::Fact {
                origin,
                outcome,
                occurrence,
                ..
            } => (Some(*origin), Some(*outcome), Some(*occurrence)),
            Rec::Outcome { occurrence, .. } => (None, None, Some(*occurrence)),
            _ => (None, None, None),
        }
    }

    pub(super) fn view(&self) -> &View {
        self.view.get_or_init(|| {
            let nodes: Vec<Node> = (0..self.recs.len() as u32)
                .map(|i| self.public_node(i))
                .collect();
            let index = nodes
                .iter()
                .enumerate()
                .map(|(i, n)| (n.id.clone(), i as u32))
                .collect();
            let edges = (0..self.edge_recs.len() as u32)
                .map(|e| {
                    let (kind, from, to) = self.edge_parts(e);
                    Edge {
                        id: self.edge_id(e).clone(),
                        kind,
                        from: from.clone(),
                        to: to.clone(),
                    }
                })
                .collect();
            View {
                nodes,
                edges,
                index,
            }
        })
    }

    fn public_node(&self, i: u32) -> Node {
        let rec = &self.recs[i as usize];
        let mut n = Node::blank(rec.kind());
        n.id = self.id(i).clone();
        match rec {
            Rec::Occurrence { receipt } => {
                let r = &self.receipt_data[*receipt as usize];
                n.stage = Some(r.stage);
                n.native_id = Some(r.native_id.clone());
                n.sequence = Some(r.sequence);
                n.transform = Some(r.transform.clone());
                n.receipt_id = Some(self.receipts[*receipt as usize].receipt_id.clone());
            }
            Rec::Source { label } => n.source = Some(label.clone()),
            Rec::Origin { outcome, run } => {
                n.outcome_id = Some(outcome.clone());
                n.outcome_run_id = run.clone();
            }
            Rec::Outcome {
                receipt,
                occurrence,
                ordinal,
                category,
            } => {
                let r = &self.receipt_data[*receipt as usize];
                n.category = *category;
                n.occurrence_id = Some(self.id(*occurrence).clone());
                n.ordinal = Some(*ordinal);
                n.payload_sha256 = Some(Id::from(r.payload_sha256.as_str()));
                n.receipt_id = Some(self.receipts[*receipt as usize].receipt_id.clone());
            }
            Rec::Fact {
                receipt,
                binding,
                origin,
                occurrence,
                outcome,
                role,
            } => {
                let r = &self.receipt_data[*receipt as usize];
                let receipt_id = &self.receipts[*receipt as usize].receipt_id;
                n.fact_id = Some(Id::from(format!("{receipt_id}/{binding}")));
                n.sequence = Some(r.sequence);
                n.origin = Some(self.id(*origin).clone());
                n.transform = Some(r.transform.clone());
                n.occurrence_id = Some(self.id(*occurrence).clone());
                n.outcome = Some(self.id(*outcome).clone());
                n.relation_role = Some(role.clone());
                n.receipt_sha256 = Some(Id::from(receipt_sha256(receipt_id)));
            }
        }
        n
    }
}
