//! Queries behind the model tools `trace` and `get_node`, as pure functions over snapshots.
//!
//! Answers are a positive allow-list of structural fields ([`NodeView`]): `id, kind, stage,
//! transform, relation_role, category, origin, outcome, occurrence_id, outcome_id, receipt_id`.
//! Payloads, arguments, canonical values, error text, source labels and native ids never appear,
//! so nothing post-execute redacted can leak through a query (the journal keeps the original).
//!
//! Targets: a node id; or an alias — a provider call id, a `tool/result` event id, or
//! `result:<call id>`. An alias bound to more than one node answers `AMBIGUOUS_TARGET` with the
//! candidates (never "the newest"). A query is scoped to a [`QueryScope`]: the calling session's
//! snapshot and its children's; anything else is `UNKNOWN_TARGET`. A capture failure answers
//! `CAPTURE_INCOMPLETE` instead of a partial picture: a failure that may have lost receipts of
//! any call (journal I/O, a torn tail cut at resume) for every query in scope; a failure of one
//! stage (a payload that could not be canonicalized) for the queries whose walk passes through
//! that call or event.
//!
//! Traversal is a breadth-first walk of the requested neighbourhood only, over the per-binding
//! indexes: backward, an outcome leads to its facts, a fact to its occurrence and to *its own*
//! origin, a generated origin to the outcome it continues (possibly in a child snapshot); an
//! occurrence expands to its origins only when it is the target itself. Forward is the mirror.
//! **Depth counts formation steps**, not graph hops: it increases by one each time the walk crosses
//! from a fact to its origin (backward) or from an origin to a fact (forward), so the default
//! `max_depth` of 32 covers a whole tool-call chain. `truncated` says the limit cut the walk.
//! `complete` is `false` when the walk reached a child run that is not in scope.

use crate::fxhash::{FxMap, FxSet};
use crate::graph::{Rec, Snapshot};
use crate::node::{Id, Node, NodeKind};
use crate::receipt::RECEIPT_PREFIX;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Largest accepted `max_depth`.
pub const MAX_TRACE_DEPTH: u32 = 256;
/// Default `max_depth`.
pub const DEFAULT_TRACE_DEPTH: u32 = 32;

/// Walk direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Towards what formed the target (default).
    #[default]
    Backward,
    /// Towards what the target went on to form.
    Forward,
}

/// Why a query has no answer. Each maps to a stable code ([`QueryError::code`]) that the tool
/// wrapper returns to the model as a tool error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    /// The target names no node and no alias in scope. Surface to the model as is.
    #[error("UNKNOWN_TARGET: {target:?} is not a node id or alias in this session")]
    UnknownTarget {
        /// The target as given.
        target: String,
    },
    /// The alias is bound to several nodes (e.g. a repeated call id); the model should retry with
    /// one of the node ids.
    #[error("AMBIGUOUS_TARGET: {target:?} names {} nodes; use a node id", candidates.len())]
    AmbiguousTarget {
        /// The target as given.
        target: String,
        /// The node ids it names.
        candidates: Vec<String>,
    },
    /// Capture failed somewhere in scope, so no answer may be presented as complete.
    #[error(
        "CAPTURE_INCOMPLETE: provenance capture of run {run_id:?} recorded {failures} failure(s)"
    )]
    CaptureIncomplete {
        /// The incomplete run.
        run_id: String,
        /// How many capture failures it recorded.
        failures: usize,
    },
    /// An argument is out of range.
    #[error("INVALID_ARGUMENT: {detail}")]
    InvalidArgument {
        /// What is wrong.
        detail: String,
    },
}

impl QueryError {
    /// The stable error code.
    pub fn code(&self) -> &'static str {
        match self {
            QueryError::UnknownTarget { .. } => "UNKNOWN_TARGET",
            QueryError::AmbiguousTarget { .. } => "AMBIGUOUS_TARGET",
            QueryError::CaptureIncomplete { .. } => "CAPTURE_INCOMPLETE",
            QueryError::InvalidArgument { .. } => "INVALID_ARGUMENT",
        }
    }
}

/// The snapshots a query may see: the calling session and its children.
#[derive(Debug, Clone)]
pub struct QueryScope<'a> {
    graphs: Vec<&'a Snapshot>,
}

impl<'a> QueryScope<'a> {
    /// A scope of one session.
    pub fn new(root: &'a Snapshot) -> Self {
        QueryScope { graphs: vec![root] }
    }

    /// Add a child (subagent) session's snapshot.
    pub fn with_child(mut self, child: &'a Snapshot) -> Self {
        self.graphs.push(child);
        self
    }

    /// A failure that may have lost receipts of any call makes every answer incomplete.
    fn check_complete(&self) -> Result<(), QueryError> {
        match self
            .graphs
            .iter()
            .find(|g| g.failures().iter().any(|f| !f.is_local()))
        {
            Some(g) => Err(incomplete(g)),
            None => Ok(()),
        }
    }

    /// A failure of one stage makes incomplete the answers that walk through its call or event.
    fn check_visited(&self, visited: &[(usize, u32, u32)]) -> Result<(), QueryError> {
        for (gi, g) in self.graphs.iter().enumerate() {
            if g.failures().is_empty() {
                continue;
            }
            let failed: FxSet<&str> = g.failures().iter().map(|f| &*f.native_id).collect();
            let touched = visited
                .iter()
                .filter(|&&(vg, _, _)| vg == gi)
                .filter_map(|&(_, n, _)| g.native_of(n))
                .any(|native| failed.contains(native));
            if touched {
                return Err(incomplete(g));
            }
        }
        Ok(())
    }

    fn graph_of_run(&self, run_id: &str) -> Option<usize> {
        self.graphs.iter().position(|g| g.run_id() == run_id)
    }

    fn resolve(&self, target: &str) -> Result<(usize, u32), QueryError> {
        for (gi, g) in self.graphs.iter().enumerate() {
            if let Some(i) = g.find(target) {
                return Ok((gi, i));
            }
        }
        let alias = target.strip_prefix("result:").unwrap_or(target);
        let mut hits: Vec<(usize, u32)> = Vec::new();
        for (gi, g) in self.graphs.iter().enumerate() {
            for id in g.alias(alias) {
                if let Some(i) = g.find(id) {
                    hits.push((gi, i));
                }
            }
        }
        match hits.as_slice() {
            [] => Err(QueryError::UnknownTarget {
                target: target.to_owned(),
            }),
            [one] => Ok(*one),
            many => Err(QueryError::AmbiguousTarget {
                target: target.to_owned(),
                candidates: many
                    .iter()
                    .map(|&(g, i)| self.graphs[g].id(i).to_string())
                    .collect(),
            }),
        }
    }
}

/// A fixed word of the vocabulary (kind, stage, category…): borrowed when produced, owned when
/// deserialized.
pub type Label = std::borrow::Cow<'static, str>;

/// The allow-listed structural projection of a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeView {
    /// Node id.
    pub id: Id,
    /// Node kind.
    pub kind: Label,
    /// Occurrence: stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<Label>,
    /// Occurrence, fact: transform.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transform: Option<Id>,
    /// Fact: relation role.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relation_role: Option<Id>,
    /// Disposition: category.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<Label>,
    /// Fact: origin node id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<Id>,
    /// Fact: outcome node id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Id>,
    /// Fact, outcome: occurrence node id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub occurrence_id: Option<Id>,
    /// Origin: the outcome it continues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome_id: Option<Id>,
    /// Occurrence, outcome, fact: the receipt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt_id: Option<Id>,
}

impl NodeView {
    /// Project a node through the allow-list.
    pub fn of(n: &Node) -> NodeView {
        let receipt_id = n.receipt_id.clone().or_else(|| {
            n.receipt_sha256
                .as_ref()
                .map(|s| Id::from(format!("{RECEIPT_PREFIX}{s}")))
        });
        NodeView {
            id: n.id.clone(),
            kind: Label::Borrowed(n.kind.as_str()),
            stage: n.stage.map(|s| Label::Borrowed(s.as_str())),
            transform: n.transform.clone(),
            relation_role: n.relation_role.clone(),
            category: n.category.map(|c| Label::Borrowed(c.as_str())),
            origin: n.origin.clone(),
            outcome: n.outcome.clone(),
            occurrence_id: n.occurrence_id.clone(),
            outcome_id: n.outcome_id.clone(),
            receipt_id: if n.kind == NodeKind::Source || n.kind == NodeKind::Origin {
                None
            } else {
                receipt_id
            },
        }
    }
}

impl NodeView {
    /// Project node `i` of `graph` through the allow-list (what [`NodeView::of`] gives for the
    /// same node, without building it).
    pub(crate) fn at(graph: &Snapshot, i: u32) -> NodeView {
        let kind = graph.recs[i as usize].kind();
        let (stage, transform, relation_role, category) = graph.labels(i);
        let (origin, outcome, occurrence) = graph.refs(i);
        let id = |n: Option<u32>| n.map(|n| graph.id(n).clone());
        NodeView {
            id: graph.id(i).clone(),
            kind: Label::Borrowed(kind.as_str()),
            stage: stage.map(|s| Label::Borrowed(s.as_str())),
            transform: transform.cloned(),
            relation_role: relation_role.cloned(),
            category: category.map(|c| Label::Borrowed(c.as_str())),
            origin: id(origin),
            outcome: id(outcome),
            occurrence_id: id(occurrence),
            outcome_id: match &graph.recs[i as usize] {
                Rec::Origin { outcome, .. } => Some(outcome.clone()),
                _ => None,
            },
            receipt_id: graph.receipt_of(i).cloned(),
        }
    }
}

/// One edge of a trace answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EdgeView {
    /// Edge id.
    pub id: Id,
    /// Edge kind.
    pub kind: Label,
    /// From node id.
    pub from: Id,
    /// To node id.
    pub to: Id,
}

/// A step of the formation path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathStep {
    /// Node id.
    pub node_id: Id,
    /// Formation steps from the target.
    pub depth: u32,
}

/// Where the evidence of a node lives (never the payload itself).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvidenceRef {
    /// Receipt id.
    pub receipt_id: Id,
    /// Hex SHA-256 of the receipt.
    pub receipt_sha256: String,
    /// The receipt is part of the compiled journal.
    pub evidence_available: bool,
    /// Always `"private"`: payloads are not shown by queries.
    pub payload_visibility: Label,
}

/// Answer of `trace`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceResult {
    /// The resolved target node id.
    pub target: Id,
    /// Direction walked.
    pub direction: Direction,
    /// `false` when the walk reached a run outside the scope.
    pub complete: bool,
    /// `true` when `max_depth` cut the walk.
    pub truncated: bool,
    /// Nodes in breadth-first order with their depth.
    pub formation_path: Vec<PathStep>,
    /// The allow-listed nodes, in path order.
    pub nodes: Vec<NodeView>,
    /// Edges walked.
    pub edges: Vec<EdgeView>,
    /// Receipts behind the nodes, in path order.
    pub evidence_refs: Vec<EvidenceRef>,
}

/// `get_node` over one session.
pub fn get_node(snapshot: &Snapshot, id: &str) -> Result<NodeView, QueryError> {
    get_node_in(&QueryScope::new(snapshot), id)
}

/// `get_node` over a scope.
pub fn get_node_in(scope: &QueryScope<'_>, id: &str) -> Result<NodeView, QueryError> {
    scope.check_complete()?;
    let (g, i) = scope.resolve(id)?;
    scope.check_visited(&[(g, i, 0)])?;
    Ok(NodeView::at(scope.graphs[g], i))
}

/// `trace` over one session.
pub fn trace(
    snapshot: &Snapshot,
    target: &str,
    direction: Direction,
    max_depth: u32,
) -> Result<TraceResult, QueryError> {
    trace_in(&QueryScope::new(snapshot), target, direction, max_depth)
}

/// `trace` over a scope (a session and its children).
pub fn trace_in(
    scope: &QueryScope<'_>,
    target: &str,
    direction: Direction,
    max_depth: u32,
) -> Result<TraceResult, QueryError> {
    if max_depth > MAX_TRACE_DEPTH {
        return Err(QueryError::InvalidArgument {
            detail: format!("max_depth {max_depth} is above {MAX_TRACE_DEPTH}"),
        });
    }
    scope.check_complete()?;
    let start = scope.resolve(target)?;
    let mut dist: FxMap<Loc, u32> = FxMap::default();
    let mut done: FxSet<Loc> = FxSet::default();
    let mut edges_seen: FxSet<Loc> = FxSet::default();
    let mut edge_order: Vec<(usize, u32)> = Vec::new();
    let mut path: Vec<(usize, u32, u32)> = Vec::new();
    let mut queue = VecDeque::from([(start, 0u32)]);
    dist.insert(start, 0);
    let (mut truncated, mut complete) = (false, true);
    let mut links: Vec<(Loc, u32, Loc)> = Vec::new();
    while let Some(((g, n), d)) = queue.pop_front() {
        if dist.get(&(g, n)).is_some_and(|&best| best < d) || !done.insert((g, n)) {
            continue;
        }
        path.push((g, n, d));
        let graph = scope.graphs[g];
        let kind = graph.recs[n as usize].kind();
        if kind == NodeKind::Occurrence && (g, n) != start {
            continue;
        }
        links.clear();
        let adjacency = match direction {
            Direction::Backward => &graph.back[n as usize],
            Direction::Forward => &graph.fwd[n as usize],
        };
        for l in adjacency {
            let step = u32::from(is_step(kind, graph.recs[l.node as usize].kind()));
            links.push(((g, l.node), step, (g, l.edge)));
        }
        if direction == Direction::Backward
            && let Rec::Origin {
                outcome,
                run: Some(run),
            } = &graph.recs[n as usize]
        {
            let target = scope
                .graph_of_run(run)
                .and_then(|cg| scope.graphs[cg].find(outcome).map(|i| (cg, i)));
            match (target, graph.cont_edge.get(&n)) {
                (Some(t), Some(&e)) => links.push((t, 0, (g, e))),
                _ => complete = false,
            }
        }
        for &(next, step, edge) in &links {
            let nd = d + step;
            if nd > max_depth {
                truncated |= !dist.contains_key(&next);
                continue;
            }
            if edges_seen.insert(edge) {
                edge_order.push(edge);
            }
            if dist.get(&next).is_none_or(|&best| nd < best) {
                dist.insert(next, nd);
                if step == 0 {
                    queue.push_front((next, nd));
                } else {
                    queue.push_back((next, nd));
                }
            }
        }
    }
    scope.check_visited(&path)?;
    let mut evidence_refs = Vec::new();
    let mut seen_receipts: FxSet<&str> = FxSet::default();
    let mut nodes = Vec::with_capacity(path.len());
    let mut formation_path = Vec::with_capacity(path.len());
    for &(g, n, d) in &path {
        let graph = scope.graphs[g];
        let view = NodeView::at(graph, n);
        if !matches!(graph.recs[n as usize], Rec::Fact { .. })
            && let Some(rid) = graph.receipt_of(n)
            && seen_receipts.insert(rid)
        {
            evidence_refs.push(EvidenceRef {
                receipt_id: rid.clone(),
                receipt_sha256: rid.strip_prefix(RECEIPT_PREFIX).unwrap_or(rid).to_owned(),
                evidence_available: true,
                payload_visibility: Label::Borrowed("private"),
            });
        }
        formation_path.push(PathStep {
            node_id: view.id.clone(),
            depth: d,
        });
        nodes.push(view);
    }
    let edges = edge_order
        .into_iter()
        .map(|(g, e)| {
            let graph = scope.graphs[g];
            let (kind, from, to) = graph.edge_parts(e);
            EdgeView {
                id: graph.edge_id(e).clone(),
                kind: Label::Borrowed(kind.as_str()),
                from: from.clone(),
                to: to.clone(),
            }
        })
        .collect();
    Ok(TraceResult {
        target: scope.graphs[start.0].id(start.1).clone(),
        direction,
        complete,
        truncated,
        formation_path,
        nodes,
        edges,
        evidence_refs,
    })
}

fn incomplete(g: &Snapshot) -> QueryError {
    QueryError::CaptureIncomplete {
        run_id: g.run_id().to_owned(),
        failures: g.failures().len(),
    }
}

/// A node or edge: (graph in scope, index).
type Loc = (usize, u32);

/// Crossing between a fact and its origin is one formation step.
fn is_step(from: NodeKind, to: NodeKind) -> bool {
    matches!(
        (from, to),
        (NodeKind::Fact, NodeKind::Origin | NodeKind::Source)
            | (NodeKind::Origin | NodeKind::Source, NodeKind::Fact)
    )
}
