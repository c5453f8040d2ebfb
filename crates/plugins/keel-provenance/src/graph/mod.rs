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
//! [`Node`](crate::node::Node) / [`Edge`](crate::node::Edge) view on first call after a change.
//!
//! Layout: this module holds the records and the public accessors; `compile.rs` applies receipts
//! (nodes, edges, indexes), `encode.rs` is the one serializer of nodes and edges (their ids are
//! hashed from it, `graph.json` is made of it), and `view.rs` answers the query side (the public
//! [`Node`](crate::node::Node) / [`Edge`](crate::node::Edge) view, lookups by id, per-node labels and references).

mod compile;
mod encode;
mod view;

pub use encode::SCHEMA;

use crate::fxhash::FxMap;
use crate::fxhash::FxSet;
use crate::model::{Disposition, Stage};
use crate::node::{EdgeKind, Id, NodeKind};
use crate::receipt::{Hex64, Receipt};
use keel_protocol::sync::Locked;
use std::sync::{Mutex, OnceLock};
use view::View;

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
        let inner = self.0.locked();
        LazyIndex(Mutex::new(inner.clone()))
    }
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
}
