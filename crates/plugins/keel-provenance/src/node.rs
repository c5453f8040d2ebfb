//! Graph vocabulary: node and edge kinds, the [`Node`] record, and the canonical material each id
//! is hashed from. Node ids are `<kind>_` + SHA-256 of JCS(`{kind, run_id, …material}`); the
//! node's entry in `graph.json` is that same object plus `id`. Payloads never enter a node: an
//! outcome carries only the SHA-256 of its capture's payload.

use crate::model::{Disposition, Stage};
use keel_jcs::write_str;
use std::io::Write;
use std::sync::Arc;

/// A shared, immutable string (node ids and labels are cloned into many places).
pub type Id = Arc<str>;

/// What a node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NodeKind {
    /// One observed runtime boundary (one receipt).
    Occurrence,
    /// An external source record.
    Source,
    /// A generated origin: an earlier outcome continuing into a later occurrence.
    Origin,
    /// An outcome of an occurrence.
    Outcome,
    /// An outcome that records why a path did not reach a result.
    Disposition,
    /// One binding of one occurrence: origin → outcome.
    Fact,
}

impl NodeKind {
    /// Spelling in nodes and answers; also the id prefix (`<kind>_`).
    pub fn as_str(self) -> &'static str {
        match self {
            NodeKind::Occurrence => "occurrence",
            NodeKind::Source => "source",
            NodeKind::Origin => "origin",
            NodeKind::Outcome => "outcome",
            NodeKind::Disposition => "disposition",
            NodeKind::Fact => "fact",
        }
    }
}

/// What an edge says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EdgeKind {
    /// outcome → generated origin.
    ContinuesAsOrigin,
    /// origin → occurrence.
    ParticipatesIn,
    /// occurrence → fact.
    RealizesFact,
    /// fact → outcome.
    HasOutcome,
}

impl EdgeKind {
    /// Spelling in edges and answers.
    pub fn as_str(self) -> &'static str {
        match self {
            EdgeKind::ContinuesAsOrigin => "continues_as_origin",
            EdgeKind::ParticipatesIn => "participates_in",
            EdgeKind::RealizesFact => "realizes_fact",
            EdgeKind::HasOutcome => "has_outcome",
        }
    }
}

/// One node. Fields not used by a kind are `None`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// `<kind>_<sha256>`.
    pub id: Id,
    /// Kind.
    pub kind: NodeKind,
    /// Occurrence: stage.
    pub stage: Option<Stage>,
    /// Occurrence: native id.
    pub native_id: Option<Id>,
    /// Occurrence, fact: sequence of the receipt.
    pub sequence: Option<u64>,
    /// Occurrence, fact: transform.
    pub transform: Option<Id>,
    /// Occurrence, outcome: receipt id.
    pub receipt_id: Option<Id>,
    /// Source: label.
    pub source: Option<Id>,
    /// Origin: the outcome node it continues.
    pub outcome_id: Option<Id>,
    /// Origin: the run of that outcome when it is a child run.
    pub outcome_run_id: Option<Id>,
    /// Outcome, fact: the occurrence.
    pub occurrence_id: Option<Id>,
    /// Outcome: ordinal within the occurrence.
    pub ordinal: Option<u32>,
    /// Outcome: SHA-256 of the capture payload.
    pub payload_sha256: Option<Id>,
    /// Disposition: why no result.
    pub category: Option<Disposition>,
    /// Fact: `<receipt id>/<binding index>`.
    pub fact_id: Option<Id>,
    /// Fact: origin node id.
    pub origin: Option<Id>,
    /// Fact: outcome node id.
    pub outcome: Option<Id>,
    /// Fact: relation role.
    pub relation_role: Option<Id>,
    /// Fact: hex SHA-256 of the receipt.
    pub receipt_sha256: Option<Id>,
}

impl Node {
    /// An empty node of `kind` (id filled in by the compiler).
    pub fn blank(kind: NodeKind) -> Node {
        Node {
            id: Arc::from(""),
            kind,
            stage: None,
            native_id: None,
            sequence: None,
            transform: None,
            receipt_id: None,
            source: None,
            outcome_id: None,
            outcome_run_id: None,
            occurrence_id: None,
            ordinal: None,
            payload_sha256: None,
            category: None,
            fact_id: None,
            origin: None,
            outcome: None,
            relation_role: None,
            receipt_sha256: None,
        }
    }
}

/// Writes object members; callers add them in sorted key order (checked in debug builds).
pub(crate) struct Members<'a> {
    pub(crate) out: &'a mut Vec<u8>,
    first: bool,
    #[cfg(debug_assertions)]
    last: &'static str,
}

impl<'a> Members<'a> {
    pub(crate) fn new(out: &'a mut Vec<u8>) -> Self {
        out.push(b'{');
        Members {
            out,
            first: true,
            #[cfg(debug_assertions)]
            last: "",
        }
    }
    pub(crate) fn key(&mut self, k: &'static str) {
        #[cfg(debug_assertions)]
        {
            debug_assert!(
                self.last < k,
                "members out of order: {} then {k}",
                self.last
            );
            self.last = k;
        }
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        write_str(self.out, k);
        self.out.push(b':');
    }
    pub(crate) fn str(&mut self, k: &'static str, v: &str) {
        self.key(k);
        write_str(self.out, v);
    }
    pub(crate) fn opt(&mut self, k: &'static str, v: Option<&str>) {
        if let Some(v) = v {
            self.str(k, v);
        }
    }
    pub(crate) fn num(&mut self, k: &'static str, v: u64) {
        self.key(k);
        let _ = write!(self.out, "{v}");
    }
    pub(crate) fn end(self) {
        self.out.push(b'}');
    }
}

/// One edge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    /// `edge_<sha256>`.
    pub id: Id,
    /// Kind.
    pub kind: EdgeKind,
    /// Source node id (may be a child run's node for a join).
    pub from: Id,
    /// Target node id.
    pub to: Id,
}
