//! The formation graph ([`Snapshot`]): compiled from receipts, one at a time, in sequence order.
//!
//! For each receipt: one occurrence node; for each distinct outcome ordinal of its bindings one
//! outcome node (kind `disposition` with a `category` when a binding to it carries one); for each
//! binding one origin (a source record, or a generated origin continuing an earlier outcome via
//! `continues_as_origin`), one fact, and the edges `participates_in` (origin → occurrence),
//! `realizes_fact` (occurrence → fact) and `has_outcome` (fact → outcome). Outcome aliases map to
//! outcome 0 of the receipt.
//!
//! Indexes are per binding: each node keeps its own backward and forward links, and a fact links
//! back to *its* origin, not to every origin of its occurrence, so several bindings on one event
//! never become a Cartesian product of ancestry. The indexes grow with each receipt (no global
//! closure is ever computed).
//!
//! Compiling is deterministic: the same receipts give the same nodes in the same order and the
//! same `graph.json` bytes ([`Snapshot::to_canonical`]).

use crate::fxhash::FxMap;
use crate::hash::push_hex;
use crate::jcs::{cmp_utf16, write_str};
use crate::model::{Origin, Stage};
use crate::node::{Edge, EdgeKind, Id, Node, NodeKind, write_edge, write_node};
use crate::receipt::{Receipt, disposition_of};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::Write;

/// Schema name written in every snapshot.
pub const SCHEMA: &str = "keel-provenance/jcs/1";

/// A link from one node to a neighbour, through an edge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Link {
    pub node: u32,
    pub edge: u32,
}

/// A capture failure: the graph is incomplete from this receipt on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The failure receipt.
    pub receipt_id: String,
    /// Native id of the capture that failed (call id, event id…).
    pub native_id: String,
    /// Short reason code (`payload_not_canonical`, `journal_tail_torn`…).
    pub reason: String,
}

/// Reference to a receipt the graph was compiled from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiptRef {
    /// Receipt id.
    pub receipt_id: String,
    /// Sequence.
    pub sequence: u64,
    /// Stage.
    pub stage: Stage,
}

/// Why a receipt could not be compiled into the graph.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompileError {
    /// A binding names an outcome node of this run that does not exist (a receipt was lost or
    /// forged). The validator reports it as `SILENT_OCCURRENCE_LOSS`.
    #[error("receipt {receipt_id} binding {binding} references unknown outcome {outcome}")]
    UnknownOutcome {
        /// The receipt.
        receipt_id: String,
        /// Binding index.
        binding: usize,
        /// The missing node id.
        outcome: String,
    },
    /// The receipt belongs to another run or is out of sequence.
    #[error(
        "receipt {receipt_id} has run {run_id:?} sequence {sequence}, expected run {expected_run:?} sequence {expected_sequence}"
    )]
    OutOfSequence {
        /// The receipt.
        receipt_id: String,
        /// Its run.
        run_id: String,
        /// Its sequence.
        sequence: u64,
        /// The graph's run.
        expected_run: String,
        /// The next expected sequence.
        expected_sequence: u64,
    },
}

/// The compiled graph of one run, with its query indexes.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub(crate) run_id: String,
    pub(crate) nodes: Vec<Node>,
    pub(crate) index: FxMap<Id, u32>,
    pub(crate) edges: Vec<Edge>,
    /// `participates_in` edges by (origin, occurrence), the only edge kind that can repeat.
    participation: FxMap<(u32, u32), u32>,
    pub(crate) back: Vec<Vec<Link>>,
    pub(crate) fwd: Vec<Vec<Link>>,
    /// Origin node → its `continues_as_origin` edge (needed when the outcome is in a child run).
    pub(crate) cont_edge: FxMap<u32, u32>,
    pub(crate) aliases: BTreeMap<String, Vec<String>>,
    pub(crate) failures: Vec<Failure>,
    pub(crate) receipts: Vec<ReceiptRef>,
    scratch: Vec<u8>,
}

impl Snapshot {
    /// An empty graph for `run_id`.
    pub fn new(run_id: &str) -> Snapshot {
        Snapshot {
            run_id: run_id.to_owned(),
            nodes: Vec::new(),
            index: FxMap::default(),
            edges: Vec::new(),
            participation: FxMap::default(),
            back: Vec::new(),
            fwd: Vec::new(),
            cont_edge: FxMap::default(),
            aliases: BTreeMap::new(),
            failures: Vec::new(),
            receipts: Vec::new(),
            scratch: Vec::with_capacity(512),
        }
    }

    /// Compile a whole receipt sequence.
    pub fn compile<'a>(
        run_id: &str,
        receipts: impl IntoIterator<Item = &'a Receipt>,
    ) -> Result<Snapshot, CompileError> {
        let mut s = Snapshot::new(run_id);
        for r in receipts {
            s.apply(r)?;
        }
        Ok(s)
    }

    /// The run (session) id.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// `true` when no capture failure was recorded.
    pub fn complete(&self) -> bool {
        self.failures.is_empty()
    }

    /// Capture failures, in order.
    pub fn failures(&self) -> &[Failure] {
        &self.failures
    }

    /// Receipts compiled so far.
    pub fn receipts(&self) -> &[ReceiptRef] {
        &self.receipts
    }

    /// All nodes, in creation order.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// All edges, in creation order.
    pub fn edges(&self) -> &[Edge] {
        &self.edges
    }

    /// A node by id.
    pub fn node(&self, id: &str) -> Option<&Node> {
        self.index.get(id).map(|&i| &self.nodes[i as usize])
    }

    /// Node ids an alias is bound to (more than one means the alias is ambiguous).
    pub fn alias(&self, alias: &str) -> &[String] {
        self.aliases.get(alias).map_or(&[], Vec::as_slice)
    }

    /// The newest outcome (or disposition) node, e.g. a child session's result to join.
    pub fn last_outcome(&self) -> Option<&str> {
        self.nodes
            .iter()
            .rev()
            .find(|n| matches!(n.kind, NodeKind::Outcome | NodeKind::Disposition))
            .map(|n| &*n.id)
    }

    /// Number of fact nodes.
    pub fn fact_count(&self) -> usize {
        self.nodes
            .iter()
            .filter(|n| n.kind == NodeKind::Fact)
            .count()
    }

    fn hash_node(&mut self, node: &mut Node) {
        self.scratch.clear();
        write_node(&mut self.scratch, node, &self.run_id, false);
        let kind = node.kind.as_str();
        let mut id = String::with_capacity(kind.len() + 65);
        id.push_str(kind);
        id.push('_');
        push_hex(&mut id, &Sha256::digest(&self.scratch));
        node.id = Id::from(id);
    }

    /// Insert `node` unless a node with its id exists; returns its index.
    fn intern(&mut self, mut node: Node) -> (u32, bool) {
        self.hash_node(&mut node);
        if let Some(&i) = self.index.get(&node.id) {
            return (i, false);
        }
        let i = self.nodes.len() as u32;
        self.index.insert(node.id.clone(), i);
        self.nodes.push(node);
        self.back.push(Vec::new());
        self.fwd.push(Vec::new());
        (i, true)
    }

    fn edge(&mut self, kind: EdgeKind, from: &Id, to: &Id) -> u32 {
        let mut e = Edge {
            id: Id::from(""),
            kind,
            from: from.clone(),
            to: to.clone(),
        };
        self.scratch.clear();
        write_edge(&mut self.scratch, &e, &self.run_id, false);
        let mut id = String::with_capacity(69);
        id.push_str("edge_");
        push_hex(&mut id, &Sha256::digest(&self.scratch));
        e.id = Id::from(id);
        let i = self.edges.len() as u32;
        self.edges.push(e);
        i
    }

    fn id_of(&self, i: u32) -> Id {
        self.nodes[i as usize].id.clone()
    }

    /// Compile one receipt; returns the outcome node ids of its ordinals, in ordinal order of
    /// first appearance. The receipt must be the next of this run.
    pub fn apply(&mut self, r: &Receipt) -> Result<Vec<(u32, String)>, CompileError> {
        let expected = self.receipts.len() as u64;
        if r.run_id != self.run_id || r.sequence != expected {
            return Err(CompileError::OutOfSequence {
                receipt_id: r.receipt_id.clone(),
                run_id: r.run_id.clone(),
                sequence: r.sequence,
                expected_run: self.run_id.clone(),
                expected_sequence: expected,
            });
        }
        // Check references before changing anything, so a failed apply leaves no trace.
        for (bi, b) in r.bindings.iter().enumerate() {
            if let Origin::Outcome {
                outcome,
                run_id: None,
            } = &b.origin
            {
                let known = self.index.get(outcome.as_str()).is_some_and(|&i| {
                    matches!(
                        self.nodes[i as usize].kind,
                        NodeKind::Outcome | NodeKind::Disposition
                    )
                });
                if !known {
                    return Err(CompileError::UnknownOutcome {
                        receipt_id: r.receipt_id.clone(),
                        binding: bi,
                        outcome: outcome.clone(),
                    });
                }
            }
        }
        self.receipts.push(ReceiptRef {
            receipt_id: r.receipt_id.clone(),
            sequence: r.sequence,
            stage: r.stage,
        });
        if r.stage == Stage::CaptureFailure {
            self.failures.push(Failure {
                receipt_id: r.receipt_id.clone(),
                native_id: r.native_id.clone(),
                reason: r.transform.clone(),
            });
        }
        let receipt_id = Id::from(r.receipt_id.as_str());
        let transform = Id::from(r.transform.as_str());
        let payload_sha256 = Id::from(r.payload_sha256.as_str());
        let receipt_sha256 = Id::from(r.sha256());
        let mut occ = Node::blank(NodeKind::Occurrence);
        occ.stage = Some(r.stage);
        occ.native_id = Some(Id::from(r.native_id.as_str()));
        occ.sequence = Some(r.sequence);
        occ.transform = Some(transform.clone());
        occ.receipt_id = Some(receipt_id.clone());
        let (occ_i, _) = self.intern(occ);
        let occ_id = self.id_of(occ_i);

        let mut outcomes: Vec<(u32, String)> = Vec::new();
        let mut outcome_nodes: Vec<(u32, u32)> = Vec::new();
        for b in &r.bindings {
            if outcome_nodes.iter().any(|&(o, _)| o == b.outcome) {
                continue;
            }
            let category = disposition_of(&r.bindings, b.outcome);
            let mut n = Node::blank(if category.is_some() {
                NodeKind::Disposition
            } else {
                NodeKind::Outcome
            });
            n.category = category;
            n.occurrence_id = Some(occ_id.clone());
            n.ordinal = Some(b.outcome);
            n.payload_sha256 = Some(payload_sha256.clone());
            n.receipt_id = Some(receipt_id.clone());
            let (i, _) = self.intern(n);
            outcome_nodes.push((b.outcome, i));
            outcomes.push((b.outcome, self.id_of(i).to_string()));
        }

        for (bi, b) in r.bindings.iter().enumerate() {
            let origin_i = match &b.origin {
                Origin::Source { source } => {
                    let mut n = Node::blank(NodeKind::Source);
                    n.source = Some(Id::from(source.as_str()));
                    self.intern(n).0
                }
                Origin::Outcome { outcome, run_id } => {
                    let mut n = Node::blank(NodeKind::Origin);
                    let outcome = Id::from(outcome.as_str());
                    n.outcome_id = Some(outcome.clone());
                    n.outcome_run_id = run_id.as_deref().map(Id::from);
                    let (i, fresh) = self.intern(n);
                    if fresh {
                        let origin_id = self.id_of(i);
                        let e = self.edge(EdgeKind::ContinuesAsOrigin, &outcome, &origin_id);
                        self.cont_edge.insert(i, e);
                        if run_id.is_none()
                            && let Some(&prev) = self.index.get(&*outcome)
                        {
                            self.back[i as usize].push(Link {
                                node: prev,
                                edge: e,
                            });
                            self.fwd[prev as usize].push(Link { node: i, edge: e });
                        }
                    }
                    i
                }
            };
            let origin_id = self.id_of(origin_i);
            let part = match self.participation.get(&(origin_i, occ_i)) {
                Some(&e) => e,
                None => {
                    let e = self.edge(EdgeKind::ParticipatesIn, &origin_id, &occ_id);
                    self.participation.insert((origin_i, occ_i), e);
                    self.back[occ_i as usize].push(Link {
                        node: origin_i,
                        edge: e,
                    });
                    e
                }
            };
            let Some(&(_, out_i)) = outcome_nodes.iter().find(|&&(o, _)| o == b.outcome) else {
                continue;
            };
            let outcome_id = self.id_of(out_i);
            let mut f = Node::blank(NodeKind::Fact);
            f.fact_id = Some(Id::from(format!("{}/{bi}", r.receipt_id)));
            f.sequence = Some(r.sequence);
            f.origin = Some(origin_id);
            f.transform = Some(transform.clone());
            f.occurrence_id = Some(occ_id.clone());
            f.outcome = Some(outcome_id.clone());
            f.relation_role = Some(Id::from(b.relation_role.as_str()));
            f.receipt_sha256 = Some(receipt_sha256.clone());
            let (fact_i, _) = self.intern(f);
            let fact_id = self.id_of(fact_i);
            let real = self.edge(EdgeKind::RealizesFact, &occ_id, &fact_id);
            let has = self.edge(EdgeKind::HasOutcome, &fact_id, &outcome_id);
            self.fwd[occ_i as usize].push(Link {
                node: fact_i,
                edge: real,
            });
            self.back[fact_i as usize].push(Link {
                node: occ_i,
                edge: real,
            });
            self.fwd[fact_i as usize].push(Link {
                node: occ_i,
                edge: real,
            });
            self.back[fact_i as usize].push(Link {
                node: origin_i,
                edge: part,
            });
            self.fwd[origin_i as usize].push(Link {
                node: fact_i,
                edge: part,
            });
            self.fwd[fact_i as usize].push(Link {
                node: out_i,
                edge: has,
            });
            self.back[out_i as usize].push(Link {
                node: fact_i,
                edge: has,
            });
        }

        if let Some((_, first)) = outcomes.first() {
            for alias in &r.outcome_aliases {
                let ids = self.aliases.entry(alias.clone()).or_default();
                if !ids.contains(first) {
                    ids.push(first.clone());
                }
            }
        }
        Ok(outcomes)
    }

    /// The snapshot's canonical bytes (what `graph.json` holds, without trailing newline) and its
    /// `graph_id` (hex SHA-256 of the same object without `graph_id`).
    pub fn to_canonical(&self) -> (String, Vec<u8>) {
        let mut head = Vec::with_capacity(self.nodes.len() * 400 + self.edges.len() * 260);
        head.extend_from_slice(b"{\"aliases\":{");
        let mut keys: Vec<&String> = self.aliases.keys().collect();
        keys.sort_by(|a, b| cmp_utf16(a, b));
        for (i, k) in keys.into_iter().enumerate() {
            if i > 0 {
                head.push(b',');
            }
            write_str(&mut head, k);
            head.extend_from_slice(b":[");
            for (j, id) in self.aliases[k].iter().enumerate() {
                if j > 0 {
                    head.push(b',');
                }
                write_str(&mut head, id);
            }
            head.push(b']');
        }
        let _ = write!(head, "}},\"complete\":{},\"edges\":[", self.complete());
        for (i, e) in self.edges.iter().enumerate() {
            if i > 0 {
                head.push(b',');
            }
            write_edge(&mut head, e, &self.run_id, true);
        }
        head.extend_from_slice(b"],\"entities\":[");
        self.write_kinds(
            &mut head,
            &[
                NodeKind::Source,
                NodeKind::Origin,
                NodeKind::Outcome,
                NodeKind::Disposition,
            ],
        );
        head.extend_from_slice(b"],\"facts\":[");
        self.write_kinds(&mut head, &[NodeKind::Fact]);
        head.extend_from_slice(b"],\"failures\":[");
        for (i, f) in self.failures.iter().enumerate() {
            if i > 0 {
                head.push(b',');
            }
            head.extend_from_slice(b"{\"native_id\":");
            write_str(&mut head, &f.native_id);
            head.extend_from_slice(b",\"reason\":");
            write_str(&mut head, &f.reason);
            head.extend_from_slice(b",\"receipt_id\":");
            write_str(&mut head, &f.receipt_id);
            head.push(b'}');
        }
        head.push(b']');
        let mut tail = Vec::with_capacity(self.nodes.len() * 300);
        tail.extend_from_slice(b",\"occurrences\":[");
        self.write_kinds(&mut tail, &[NodeKind::Occurrence]);
        tail.extend_from_slice(b"],\"receipts\":[");
        for (i, r) in self.receipts.iter().enumerate() {
            if i > 0 {
                tail.push(b',');
            }
            tail.extend_from_slice(b"{\"receipt_id\":");
            write_str(&mut tail, &r.receipt_id);
            let _ = write!(tail, ",\"sequence\":{},\"stage\":", r.sequence);
            write_str(&mut tail, r.stage.as_str());
            tail.push(b'}');
        }
        tail.extend_from_slice(b"],\"run_id\":");
        write_str(&mut tail, &self.run_id);
        tail.extend_from_slice(b",\"schema\":");
        write_str(&mut tail, SCHEMA);
        tail.push(b'}');
        let mut hasher = Sha256::new();
        hasher.update(&head);
        hasher.update(&tail);
        let mut graph_id = String::with_capacity(64);
        push_hex(&mut graph_id, &hasher.finalize());
        head.extend_from_slice(b",\"graph_id\":\"");
        head.extend_from_slice(graph_id.as_bytes());
        head.push(b'"');
        head.extend_from_slice(&tail);
        (graph_id, head)
    }

    /// The `graph_id` of the current snapshot.
    pub fn graph_id(&self) -> String {
        self.to_canonical().0
    }

    fn write_kinds(&self, out: &mut Vec<u8>, kinds: &[NodeKind]) {
        let mut first = true;
        for n in self.nodes.iter().filter(|n| kinds.contains(&n.kind)) {
            if !first {
                out.push(b',');
            }
            first = false;
            write_node(out, n, &self.run_id, true);
        }
    }
}
