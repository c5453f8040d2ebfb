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
//!
//! Storage is compact and index-based: nodes are small records that name other nodes and their
//! receipt by index, and only the ids capture needs are hashed when a receipt is applied — the
//! occurrence and its outcomes (a later receipt's binding names an outcome id). Source, origin
//! and fact ids and all edge ids are hashed on first use (a query, `graph.json`) and cached, so
//! each id is still computed once. [`Snapshot::nodes`] and [`Snapshot::edges`] build the public
//! [`Node`] / [`Edge`] view on first call after a change.

use crate::fxhash::FxMap;
use crate::fxhash::FxSet;
use crate::model::{Disposition, Origin, Stage};
use crate::node::{Edge, EdgeKind, Id, Members, Node, NodeKind};
use crate::receipt::{Hex64, RECEIPT_PREFIX, Receipt, ReceiptView, disposition_of};
use keel_jcs::digest::push_hex;
use keel_jcs::{cmp_utf16, write_str};
use sha2::{Digest, Sha256};
use std::io::Write;
use std::sync::{Mutex, OnceLock, PoisonError};

/// Occurrence stage, occurrence/fact transform, fact role, disposition category of a node.
pub(crate) type Labels<'a> = (
    Option<Stage>,
    Option<&'a Id>,
    Option<&'a Id>,
    Option<Disposition>,
);

/// Graphs with at least this many nodes are serialized on two threads.
const PARALLEL_MIN_NODES: usize = 4_000;

/// Schema name written in every snapshot.
pub const SCHEMA: &str = "keel-provenance/jcs/1";

/// A link from one node to a neighbour, through an edge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Link {
    pub node: u32,
    pub edge: u32,
}

/// The links of one node in one direction.
pub(crate) type Links = smallvec::SmallVec<[Link; 2]>;

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

impl Failure {
    /// Whether the failure concerns one stage of one call or event (its payload could not be
    /// canonicalized, or its receipt not compiled): the graph lacks that stage only. Anything
    /// else (journal I/O, a torn tail cut at resume, a journal that could not open) may have
    /// lost receipts of any call.
    pub fn is_local(&self) -> bool {
        self.reason.starts_with("payload_") || self.reason == "compile"
    }
}

/// Reference to a receipt the graph was compiled from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiptRef {
    /// Receipt id.
    pub receipt_id: Id,
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

/// What one receipt contributes to the nodes it creates (shared by index).
#[derive(Debug, Clone)]
struct ReceiptData {
    native_id: Id,
    transform: Id,
    payload_sha256: Hex64,
    stage: Stage,
    sequence: u64,
}

/// A node, naming other nodes and its receipt by index.
#[derive(Debug, Clone)]
pub(crate) enum Rec {
    Occurrence {
        receipt: u32,
    },
    Source {
        label: Id,
    },
    Origin {
        outcome: Id,
        run: Option<Id>,
    },
    Outcome {
        receipt: u32,
        occurrence: u32,
        ordinal: u32,
        category: Option<Disposition>,
    },
    Fact {
        receipt: u32,
        binding: u32,
        origin: u32,
        occurrence: u32,
        outcome: u32,
        role: Id,
    },
}

impl Rec {
    pub(crate) fn kind(&self) -> NodeKind {
        match self {
            Rec::Occurrence { .. } => NodeKind::Occurrence,
            Rec::Source { .. } => NodeKind::Source,
            Rec::Origin { .. } => NodeKind::Origin,
            Rec::Outcome { category: None, .. } => NodeKind::Outcome,
            Rec::Outcome { .. } => NodeKind::Disposition,
            Rec::Fact { .. } => NodeKind::Fact,
        }
    }
}

/// A node's id: hashed when the node was added (occurrences, outcomes: later receipts name
/// them), or on first use (sources, origins, facts).
#[derive(Debug, Clone)]
enum IdSlot {
    Eager(Id),
    Lazy(OnceLock<Id>),
}

/// Where an edge starts: a node of this run, or a node id of a child run.
#[derive(Debug, Clone)]
enum End {
    Node(u32),
    External(Id),
}

/// An edge between nodes by index.
#[derive(Debug, Clone)]
struct EdgeRec {
    kind: EdgeKind,
    from: End,
    to: u32,
}

/// Ids of lazily identified nodes (sources, origins, facts) → index, extended on demand.
#[derive(Debug, Default)]
struct LazyIndex(Mutex<(usize, FxMap<Id, u32>)>);

impl Clone for LazyIndex {
    fn clone(&self) -> Self {
        let inner = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        LazyIndex(Mutex::new(inner.clone()))
    }
}

/// The public [`Node`] / [`Edge`] view, built on demand.
#[derive(Debug, Clone, Default)]
struct View {
    nodes: Vec<Node>,
    edges: Vec<Edge>,
    index: FxMap<Id, u32>,
}

/// The compiled graph of one run, with its query indexes.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub(crate) run_id: String,
    receipt_data: Vec<ReceiptData>,
    pub(crate) recs: Vec<Rec>,
    ids: Vec<IdSlot>,
    /// Occurrence, outcome and disposition ids (hashed at apply) → index.
    index: FxMap<Id, u32>,
    lazy_index: LazyIndex,
    sources: FxMap<Id, u32>,
    /// Generated origins continuing an outcome of this run, by that outcome's index.
    local_origins: FxMap<u32, u32>,
    /// Generated origins continuing a child run's node, by (node id, run id).
    child_origins: FxMap<(Id, Id), u32>,
    edge_recs: Vec<EdgeRec>,
    edge_ids: Vec<OnceLock<Id>>,
    /// `participates_in` edges by (origin, occurrence), the only edge kind that can repeat.
    participation: FxMap<(u32, u32), u32>,
    /// Per-node links; most nodes have one or two in each direction, kept inline.
    pub(crate) back: Vec<Links>,
    pub(crate) fwd: Vec<Links>,
    /// Origin node → its `continues_as_origin` edge (needed when the outcome is in a child run).
    pub(crate) cont_edge: FxMap<u32, u32>,
    pub(crate) aliases: FxMap<String, Vec<Id>>,
    /// Transforms and roles (a small vocabulary), shared.
    interned: FxSet<Id>,
    /// The previous receipt's native id (consecutive stages of a call share it).
    last_native: Option<Id>,
    pub(crate) failures: Vec<Failure>,
    pub(crate) receipts: Vec<ReceiptRef>,
    facts: usize,
    view: OnceLock<View>,
    scratch: Vec<u8>,
    outcome_scratch: Vec<(u32, u32)>,
}

impl Snapshot {
    /// An empty graph for `run_id`.
    pub fn new(run_id: &str) -> Snapshot {
        Snapshot {
            run_id: run_id.to_owned(),
            receipt_data: Vec::new(),
            recs: Vec::new(),
            ids: Vec::new(),
            index: FxMap::default(),
            lazy_index: LazyIndex::default(),
            sources: FxMap::default(),
            local_origins: FxMap::default(),
            child_origins: FxMap::default(),
            edge_recs: Vec::new(),
            edge_ids: Vec::new(),
            participation: FxMap::default(),
            back: Vec::new(),
            fwd: Vec::new(),
            cont_edge: FxMap::default(),
            aliases: FxMap::default(),
            interned: FxSet::default(),
            last_native: None,
            failures: Vec::new(),
            receipts: Vec::new(),
            facts: 0,
            view: OnceLock::new(),
            scratch: Vec::with_capacity(512),
            outcome_scratch: Vec::new(),
        }
    }

    /// Compile a whole receipt sequence.
    pub fn compile<'a>(
        run_id: &str,
        receipts: impl IntoIterator<Item = &'a Receipt>,
    ) -> Result<Snapshot, CompileError> {
        let mut s = Snapshot::new(run_id);
        for r in receipts {
            s.apply_receipt(r.view())?;
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

    /// Node ids an alias is bound to (more than one means the alias is ambiguous).
    pub fn alias(&self, alias: &str) -> &[Id] {
        self.aliases.get(alias).map_or(&[], Vec::as_slice)
    }

    /// The newest outcome (or disposition) node, e.g. a child session's result to join.
    pub fn last_outcome(&self) -> Option<&str> {
        let i = self
            .recs
            .iter()
            .rposition(|r| matches!(r, Rec::Outcome { .. }))?;
        Some(self.id(i as u32))
    }

    /// Runs (child sessions) whose nodes this graph joins, in order of first join.
    pub fn child_runs(&self) -> Vec<&str> {
        let mut runs: Vec<&str> = Vec::new();
        for rec in &self.recs {
            if let Rec::Origin { run: Some(run), .. } = rec
                && !runs.contains(&&**run)
            {
                runs.push(run);
            }
        }
        runs
    }

    /// Number of fact nodes.
    pub fn fact_count(&self) -> usize {
        self.facts
    }

    /// The id of node `i`, hashed on first use.
    pub(crate) fn id(&self, i: u32) -> &Id {
        match &self.ids[i as usize] {
            IdSlot::Eager(id) => id,
            IdSlot::Lazy(cell) => cell.get_or_init(|| {
                let mut buf = Vec::with_capacity(512);
                self.hash_node(&mut buf, i)
            }),
        }
    }

    /// The id of edge `e`, hashed on first use.
    pub(crate) fn edge_id(&self, e: u32) -> &Id {
        self.edge_ids[e as usize].get_or_init(|| {
            let mut buf = Vec::with_capacity(320);
            self.write_edge_rec(&mut buf, e, false);
            let mut id = String::with_capacity(69);
            id.push_str("edge_");
            push_hex(&mut id, &Sha256::digest(&buf));
            Id::from(id)
        })
    }

    /// Kind and endpoint ids of edge `e`.
    pub(crate) fn edge_parts(&self, e: u32) -> (EdgeKind, &Id, &Id) {
        let rec = &self.edge_recs[e as usize];
        let from = match &rec.from {
            End::Node(n) => self.id(*n),
            End::External(id) => id,
        };
        (rec.kind, from, self.id(rec.to))
    }

    /// The node a node id names, in this run.
    pub(crate) fn find(&self, id: &str) -> Option<u32> {
        if let Some(&i) = self.index.get(id) {
            return Some(i);
        }
        if !id.starts_with("fact_") && !id.starts_with("origin_") && !id.starts_with("source_") {
            return None;
        }
        let mut lazy = self
            .lazy_index
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
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

    fn hash_node(&self, buf: &mut Vec<u8>, i: u32) -> Id {
        buf.clear();
        self.write_rec(buf, i, false);
        let kind = self.recs[i as usize].kind().as_str();
        let mut id = String::with_capacity(kind.len() + 65);
        id.push_str(kind);
        id.push('_');
        push_hex(&mut id, &Sha256::digest(&buf[..]));
        Id::from(id)
    }

    /// Canonical JSON of node `i`; with `with_id` its `graph.json` entry, without it the bytes its
    /// id is hashed from. The only serializer of nodes (the public [`Node`] view is built from
    /// the same records).
    fn write_rec(&self, out: &mut Vec<u8>, i: u32, with_id: bool) {
        let id = with_id.then(|| &**self.id(i));
        let rec = &self.recs[i as usize];
        let kind = rec.kind().as_str();
        let run_id = self.run_id.as_str();
        let mut m = Members::new(out);
        match rec {
            Rec::Occurrence { receipt } => {
                let r = &self.receipt_data[*receipt as usize];
                m.opt("id", id);
                m.str("kind", kind);
                m.str("native_id", &r.native_id);
                m.str("receipt_id", &self.receipts[*receipt as usize].receipt_id);
                m.str("run_id", run_id);
                m.num("sequence", r.sequence);
                m.str("stage", r.stage.as_str());
                m.str("transform", &r.transform);
            }
            Rec::Source { label } => {
                m.opt("id", id);
                m.str("kind", kind);
                m.str("run_id", run_id);
                m.str("source", label);
            }
            Rec::Origin { outcome, run } => {
                m.opt("id", id);
                m.str("kind", kind);
                m.str("outcome_id", outcome);
                m.opt("outcome_run_id", run.as_deref());
                m.str("run_id", run_id);
            }
            Rec::Outcome {
                receipt,
                occurrence,
                ordinal,
                category,
            } => {
                let r = &self.receipt_data[*receipt as usize];
                m.opt("category", category.map(Disposition::as_str));
                m.opt("id", id);
                m.str("kind", kind);
                m.str("occurrence_id", self.id(*occurrence));
                m.num("ordinal", u64::from(*ordinal));
                m.str("payload_sha256", r.payload_sha256.as_str());
                m.str("receipt_id", &self.receipts[*receipt as usize].receipt_id);
                m.str("run_id", run_id);
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
                m.key("fact_id");
                m.out.push(b'"');
                let receipt_id = &self.receipts[*receipt as usize].receipt_id;
                m.out.extend_from_slice(receipt_id.as_bytes());
                let _ = write!(m.out, "/{binding}\"");
                m.opt("id", id);
                m.str("kind", kind);
                m.str("occurrence_id", self.id(*occurrence));
                m.str("origin", self.id(*origin));
                m.str("outcome", self.id(*outcome));
                m.str("receipt_sha256", receipt_sha256(receipt_id));
                m.str("relation_role", role);
                m.str("run_id", run_id);
                m.num("sequence", r.sequence);
                m.str("transform", &r.transform);
            }
        }
        m.end();
    }

    fn write_edge_rec(&self, out: &mut Vec<u8>, e: u32, with_id: bool) {
        let (kind, from, to) = self.edge_parts(e);
        let mut m = Members::new(out);
        m.str("from", from);
        if with_id {
            m.str("id", self.edge_id(e));
        }
        m.str("kind", kind.as_str());
        m.str("run_id", &self.run_id);
        m.str("to", to);
        m.end();
    }

    /// Add node `rec`; with `eager` its id is hashed now and indexed.
    fn push(&mut self, rec: Rec, eager: bool) -> u32 {
        let i = self.recs.len() as u32;
        if matches!(rec, Rec::Fact { .. }) {
            self.facts += 1;
        }
        self.recs.push(rec);
        self.back.push(Links::new());
        self.fwd.push(Links::new());
        // Hashing a node reads only earlier nodes' ids, so its own slot can come after.
        let slot = if eager {
            let mut buf = std::mem::take(&mut self.scratch);
            let id = self.hash_node(&mut buf, i);
            self.scratch = buf;
            self.index.insert(id.clone(), i);
            IdSlot::Eager(id)
        } else {
            IdSlot::Lazy(OnceLock::new())
        };
        self.ids.push(slot);
        i
    }

    /// Record `edge` from `from` to `to` in both adjacency lists.
    fn link(&mut self, from: u32, to: u32, edge: u32) {
        self.fwd[from as usize].push(Link { node: to, edge });
        self.back[to as usize].push(Link { node: from, edge });
    }

    fn edge(&mut self, kind: EdgeKind, from: End, to: u32) -> u32 {
        let i = self.edge_recs.len() as u32;
        self.edge_recs.push(EdgeRec { kind, from, to });
        self.edge_ids.push(OnceLock::new());
        i
    }

    /// Compile one receipt; returns the outcome node ids of its ordinals, in ordinal order of
    /// first appearance. The receipt must be the next of this run.
    pub fn apply(&mut self, r: &Receipt) -> Result<Vec<(u32, String)>, CompileError> {
        self.apply_receipt(r.view())?;
        Ok(self
            .outcome_scratch
            .iter()
            .map(|&(o, i)| (o, self.id(i).to_string()))
            .collect())
    }

    /// A shared copy of `s` from the small vocabulary of transforms and roles.
    fn intern(&mut self, s: &str) -> Id {
        if let Some(id) = self.interned.get(s) {
            return id.clone();
        }
        let id = Id::from(s);
        self.interned.insert(id.clone());
        id
    }

    /// [`Snapshot::apply`] without building the answer: returns the first outcome's id.
    pub(crate) fn apply_receipt(&mut self, r: ReceiptView<'_>) -> Result<Option<Id>, CompileError> {
        let expected = self.receipts.len() as u64;
        if r.run_id != self.run_id || r.sequence != expected {
            return Err(CompileError::OutOfSequence {
                receipt_id: r.receipt_id.to_owned(),
                run_id: r.run_id.to_owned(),
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
                let known = self
                    .index
                    .get(&**outcome)
                    .is_some_and(|&i| matches!(self.recs[i as usize], Rec::Outcome { .. }));
                if !known {
                    return Err(CompileError::UnknownOutcome {
                        receipt_id: r.receipt_id.to_owned(),
                        binding: bi,
                        outcome: outcome.to_string(),
                    });
                }
            }
        }
        if self.view.get().is_some() {
            self.view = OnceLock::new();
        }
        self.receipts.push(ReceiptRef {
            receipt_id: Id::from(r.receipt_id),
            sequence: r.sequence,
            stage: r.stage,
        });
        if r.stage == Stage::CaptureFailure {
            self.failures.push(Failure {
                receipt_id: r.receipt_id.to_owned(),
                native_id: r.native_id.to_owned(),
                reason: r.transform.to_owned(),
            });
        }
        let receipt = self.receipt_data.len() as u32;
        let native_id = match &self.last_native {
            Some(last) if **last == *r.native_id => last.clone(),
            _ => {
                let id = Id::from(r.native_id);
                self.last_native = Some(id.clone());
                id
            }
        };
        let transform = self.intern(r.transform);
        self.receipt_data.push(ReceiptData {
            native_id,
            transform,
            payload_sha256: Hex64::parse(r.payload_sha256),
            stage: r.stage,
            sequence: r.sequence,
        });
        let occ = self.push(Rec::Occurrence { receipt }, true);

        let mut outcomes = std::mem::take(&mut self.outcome_scratch);
        outcomes.clear();
        for b in r.bindings {
            if outcomes.iter().any(|&(o, _)| o == b.outcome) {
                continue;
            }
            let rec = Rec::Outcome {
                receipt,
                occurrence: occ,
                ordinal: b.outcome,
                category: disposition_of(r.bindings, b.outcome),
            };
            outcomes.push((b.outcome, self.push(rec, true)));
        }

        for (bi, b) in r.bindings.iter().enumerate() {
            let origin = match &b.origin {
                Origin::Source { source } => match self.sources.get(source.as_str()) {
                    Some(&i) => i,
                    None => {
                        let label = Id::from(source.as_str());
                        let i = self.push(
                            Rec::Source {
                                label: label.clone(),
                            },
                            false,
                        );
                        self.sources.insert(label, i);
                        i
                    }
                },
                Origin::Outcome {
                    outcome,
                    run_id: None,
                } => {
                    // Checked above: the outcome is a node of this run.
                    let prev = self.index.get(&**outcome).copied().unwrap_or(0);
                    match self.local_origins.get(&prev) {
                        Some(&i) => i,
                        None => {
                            let rec = Rec::Origin {
                                outcome: self.id(prev).clone(),
                                run: None,
                            };
                            let i = self.push(rec, false);
                            self.local_origins.insert(prev, i);
                            let e = self.edge(EdgeKind::ContinuesAsOrigin, End::Node(prev), i);
                            self.cont_edge.insert(i, e);
                            self.link(prev, i, e);
                            i
                        }
                    }
                }
                Origin::Outcome {
                    outcome,
                    run_id: Some(run),
                } => {
                    let key = (outcome.clone(), run.clone());
                    match self.child_origins.get(&key) {
                        Some(&i) => i,
                        None => {
                            let rec = Rec::Origin {
                                outcome: key.0.clone(),
                                run: Some(key.1.clone()),
                            };
                            let i = self.push(rec, false);
                            let e = self.edge(
                                EdgeKind::ContinuesAsOrigin,
                                End::External(key.0.clone()),
                                i,
                            );
                            self.cont_edge.insert(i, e);
                            self.child_origins.insert(key, i);
                            i
                        }
                    }
                }
            };
            let part = match self.participation.get(&(origin, occ)) {
                Some(&e) => e,
                None => {
                    let e = self.edge(EdgeKind::ParticipatesIn, End::Node(origin), occ);
                    self.participation.insert((origin, occ), e);
                    self.back[occ as usize].push(Link {
                        node: origin,
                        edge: e,
                    });
                    e
                }
            };
            let Some(&(_, outcome)) = outcomes.iter().find(|&&(o, _)| o == b.outcome) else {
                continue;
            };
            let role = self.intern(&b.relation_role);
            let fact = self.push(
                Rec::Fact {
                    receipt,
                    binding: bi as u32,
                    origin,
                    occurrence: occ,
                    outcome,
                    role,
                },
                false,
            );
            let real = self.edge(EdgeKind::RealizesFact, End::Node(occ), fact);
            let has = self.edge(EdgeKind::HasOutcome, End::Node(fact), outcome);
            self.link(occ, fact, real);
            // A fact also leads forward to its occurrence (traversal from a fact reaches the
            // stage it realises); there is no matching backward link.
            self.fwd[fact as usize].push(Link {
                node: occ,
                edge: real,
            });
            self.link(origin, fact, part);
            self.link(fact, outcome, has);
        }

        let first = outcomes.first().map(|&(_, i)| self.id(i).clone());
        self.outcome_scratch = outcomes;
        if let Some(first) = &first {
            for alias in r.outcome_aliases {
                let ids = self.aliases.entry(alias.clone()).or_default();
                if !ids.iter().any(|id| **id == **first) {
                    ids.push(first.clone());
                }
            }
        }
        Ok(first)
    }

    fn view(&self) -> &View {
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

    /// The snapshot's canonical bytes (what `graph.json` holds, without trailing newline) and its
    /// `graph_id` (hex SHA-256 of the same object without `graph_id`).
    ///
    /// Most of the cost is hashing the lazily identified nodes and edges; a large graph does that,
    /// and writes the two halves of the document, on two threads.
    pub fn to_canonical(&self) -> (String, Vec<u8>) {
        let (mut head, tail) = if self.recs.len() >= PARALLEL_MIN_NODES {
            self.warm_ids();
            std::thread::scope(|s| {
                let tail = std::thread::Builder::new()
                    .name("keel-provenance-graph".into())
                    .spawn_scoped(s, || self.write_tail());
                let head = self.write_head();
                let tail = match tail {
                    Ok(t) => t.join().unwrap_or_else(|_| self.write_tail()),
                    Err(_) => self.write_tail(),
                };
                (head, tail)
            })
        } else {
            (self.write_head(), self.write_tail())
        };
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

    /// Hash every node and edge id now, the two halves on two threads (ids depend only on
    /// earlier nodes, so the threads never wait on each other in a cycle).
    fn warm_ids(&self) {
        let (n, e) = (self.recs.len() as u32, self.edge_recs.len() as u32);
        let warm = |nodes: std::ops::Range<u32>, edges: std::ops::Range<u32>| {
            for i in nodes {
                self.id(i);
            }
            for k in edges {
                self.edge_id(k);
            }
        };
        std::thread::scope(|s| {
            let upper = std::thread::Builder::new()
                .name("keel-provenance-ids".into())
                .spawn_scoped(s, || warm(n / 2..n, e / 2..e));
            warm(0..n / 2, 0..e / 2);
            if let Ok(upper) = upper {
                let _ = upper.join();
            }
        });
    }

    /// `{"aliases":…,"complete":…,"edges":…,"entities":…,"facts":…,"failures":[…]`
    fn write_head(&self) -> Vec<u8> {
        let mut head = Vec::with_capacity(self.recs.len() * 400 + self.edge_recs.len() * 260);
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
        for e in 0..self.edge_recs.len() as u32 {
            if e > 0 {
                head.push(b',');
            }
            self.write_edge_rec(&mut head, e, true);
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
        head
    }

    /// `,"occurrences":…,"receipts":…,"run_id":…,"schema":…}`
    fn write_tail(&self) -> Vec<u8> {
        let mut tail = Vec::with_capacity(self.recs.len() * 300);
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
        tail
    }

    /// The `graph_id` of the current snapshot.
    pub fn graph_id(&self) -> String {
        self.to_canonical().0
    }

    fn write_kinds(&self, out: &mut Vec<u8>, kinds: &[NodeKind]) {
        let mut first = true;
        for i in 0..self.recs.len() as u32 {
            if !kinds.contains(&self.recs[i as usize].kind()) {
                continue;
            }
            if !first {
                out.push(b',');
            }
            first = false;
            self.write_rec(out, i, true);
        }
    }
}

/// The hex SHA-256 part of a receipt id.
fn receipt_sha256(receipt_id: &str) -> &str {
    receipt_id.get(RECEIPT_PREFIX.len()..).unwrap_or("")
}
