//! The one serializer of graph records: canonical JSON (RFC 8785, via [`keel_jcs`]) of nodes and
//! edges, the ids hashed from those bytes, and the `graph.json` document.
//!
//! Data flow: a node or edge record ([`Rec`], [`EdgeRec`]) → `write_rec` / `write_edge_rec`
//! (members in canonical order; without the id for hashing, with it for `graph.json`) → SHA-256 →
//! `<kind>_<hex>` / `edge_<hex>` id, cached in its slot. [`Snapshot::to_canonical`] writes the
//! document in two halves (`write_head`, `write_tail`: both on two threads for a large graph),
//! hashes them into `graph_id`, and splices the id between them.

use super::{End, IdSlot, Rec, Snapshot};
use crate::model::Disposition;
use crate::node::{EdgeKind, Id, Members, NodeKind};
use crate::receipt::RECEIPT_PREFIX;
use keel_jcs::digest::push_hex;
use keel_jcs::{cmp_utf16, write_str};
use sha2::{Digest, Sha256};
use std::io::Write;

/// Graphs with at least this many nodes are serialized on two threads.
const PARALLEL_MIN_NODES: usize = 4_000;

/// Schema name written in every snapshot.
pub const SCHEMA: &str = "keel-provenance/jcs/1";

impl Snapshot {
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
            self.write_edge_rec(&mut buf, e, IdField::Omit);
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

    pub(super) fn hash_node(&self, buf: &mut Vec<u8>, i: u32) -> Id {
        buf.clear();
        self.write_rec(buf, i, IdField::Omit);
        let kind = self.recs[i as usize].kind().as_str();
        let mut id = String::with_capacity(kind.len() + 65);
        id.push_str(kind);
        id.push('_');
        push_hex(&mut id, &Sha256::digest(&buf[..]));
        Id::from(id)
    }

    /// Canonical JSON of node `i`; with [`IdField::Write`] its `graph.json` entry, without it the bytes its
    /// id is hashed from. The only serializer of nodes (the public [`Node`] view is built from
    /// the same records).
    fn write_rec(&self, out: &mut Vec<u8>, i: u32, id_field: IdField) {
        let id = (id_field == IdField::Write).then(|| &**self.id(i));
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

    fn write_edge_rec(&self, out: &mut Vec<u8>, e: u32, id_field: IdField) {
        let (kind, from, to) = self.edge_parts(e);
        let mut m = Members::new(out);
        m.str("from", from);
        if id_field == IdField::Write {
            m.str("id", self.edge_id(e));
        }
        m.str("kind", kind.as_str());
        m.str("run_id", &self.run_id);
        m.str("to", to);
        m.end();
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
            self.write_edge_rec(&mut head, e, IdField::Write);
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
            self.write_rec(out, i, IdField::Write);
        }
    }
}

/// The hex SHA-256 part of a receipt id.
pub(super) fn receipt_sha256(receipt_id: &str) -> &str {
    receipt_id.get(RECEIPT_PREFIX.len()..).unwrap_or("")
}

/// Whether an encoded record carries its own `id` (its `graph.json` entry) or not (the bytes
/// its id is hashed from).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum IdField {
    /// The record as hashed: no `id`.
    Omit,
    /// The record as published: with its `id`.
    Write,
}
