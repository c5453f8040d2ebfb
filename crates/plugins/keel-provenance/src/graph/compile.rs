//! Compiling receipts into the graph, one at a time, in sequence order.
//!
//! Data flow for one receipt ([`Snapshot::apply_receipt`]): check it is the next of this run and
//! that every outcome it names exists (nothing changes on failure) → record the receipt (its ref,
//! a capture failure, the per-receipt data its nodes share) → its occurrence node → one outcome
//! node per distinct ordinal → per binding: its origin (found or created), the
//! `participates_in` edge, the fact with its `realizes_fact` / `has_outcome` edges and links →
//! outcome aliases bound to the first outcome. Occurrence and outcome ids are hashed as they are
//! pushed (later receipts name them); every other id is hashed on first use (`encode.rs`).

use super::{CompileError, EdgeRec, End, Failure, IdSlot, Link, Links, ReceiptData, ReceiptRef};
use super::{Rec, Snapshot};
use crate::model::{Binding, Origin, Stage};
use crate::node::{EdgeKind, Id};
use crate::receipt::{Hex64, Receipt, ReceiptView, disposition_of};
use std::sync::OnceLock;

impl Snapshot {
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

    /// [`Snapshot::apply`] without building the answer: returns the first outcome's id.
    pub(crate) fn apply_receipt(&mut self, r: ReceiptView<'_>) -> Result<Option<Id>, CompileError> {
        // Check before changing anything, so a failed apply leaves no trace.
        self.check_next(&r)?;
        self.check_references(&r)?;
        let receipt = self.record_receipt(&r);
        let occ = self.push(Rec::Occurrence { receipt }, IdHashing::Now);
        let mut outcomes = std::mem::take(&mut self.outcome_scratch);
        self.add_outcomes(receipt, occ, r.bindings, &mut outcomes);
        for (bi, b) in r.bindings.iter().enumerate() {
            self.add_binding(receipt, occ, bi as u32, b, &outcomes);
        }
        let first = outcomes.first().map(|&(_, i)| self.id(i).clone());
        self.outcome_scratch = outcomes;
        if let Some(first) = &first {
            self.bind_aliases(first, r.outcome_aliases);
        }
        Ok(first)
    }

    /// The receipt must belong to this run and carry the next sequence.
    fn check_next(&self, r: &ReceiptView<'_>) -> Result<(), CompileError> {
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
        Ok(())
    }

    /// Every binding continuing an outcome of this run must name an existing outcome node.
    fn check_references(&self, r: &ReceiptView<'_>) -> Result<(), CompileError> {
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
        Ok(())
    }

    /// Drop the stale public view, list the receipt (and its capture failure, if it is one), and
    /// store what its nodes share. Returns the receipt's index.
    fn record_receipt(&mut self, r: &ReceiptView<'_>) -> u32 {
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
        let native_id = self.shared_native(r.native_id);
        let transform = self.intern(r.transform);
        self.receipt_data.push(ReceiptData {
            native_id,
            transform,
            payload_sha256: Hex64::parse(r.payload_sha256),
            stage: r.stage,
            sequence: r.sequence,
        });
        receipt
    }

    /// The native id, shared with the previous receipt's when equal (consecutive stages of a
    /// call observe the same one).
    fn shared_native(&mut self, native_id: &str) -> Id {
        match &self.last_native {
            Some(last) if **last == *native_id => last.clone(),
            _ => {
                let id = Id::from(native_id);
                self.last_native = Some(id.clone());
                id
            }
        }
    }

    /// One outcome node per distinct ordinal, in order of first appearance, into `outcomes`
    /// as (ordinal, node).
    fn add_outcomes(
        &mut self,
        receipt: u32,
        occ: u32,
        bindings: &[Binding],
        outcomes: &mut Vec<(u32, u32)>,
    ) {
        outcomes.clear();
        for b in bindings {
            if outcomes.iter().any(|&(o, _)| o == b.outcome) {
                continue;
            }
            let rec = Rec::Outcome {
                receipt,
                occurrence: occ,
                ordinal: b.outcome,
                category: disposition_of(bindings, b.outcome),
            };
            outcomes.push((b.outcome, self.push(rec, IdHashing::Now)));
        }
    }

    /// Binding `bi` of the receipt: its origin, the origin's participation in occurrence `occ`,
    /// and its fact leading to the outcome of its ordinal.
    fn add_binding(
        &mut self,
        receipt: u32,
        occ: u32,
        bi: u32,
        b: &Binding,
        outcomes: &[(u32, u32)],
    ) {
        let origin = self.origin_node(&b.origin);
        let part = self.participation(origin, occ);
        let Some(&(_, outcome)) = outcomes.iter().find(|&&(o, _)| o == b.outcome) else {
            return;
        };
        let role = self.intern(&b.relation_role);
        let fact = self.push(
            Rec::Fact {
                receipt,
                binding: bi,
                origin,
                occurrence: occ,
                outcome,
                role,
            },
            IdHashing::Later,
        );
        self.link_fact(fact, origin, occ, outcome, part);
    }

    /// The origin node a binding starts from, created on first use.
    fn origin_node(&mut self, origin: &Origin) -> u32 {
        match origin {
            Origin::Source { source } => self.source_origin(source),
            Origin::Outcome {
                outcome,
                run_id: None,
            } => self.local_origin(outcome),
            Origin::Outcome {
                outcome,
                run_id: Some(run),
            } => self.child_origin(outcome, run),
        }
    }

    /// The source node of an external source label.
    fn source_origin(&mut self, source: &str) -> u32 {
        if let Some(&i) = self.sources.get(source) {
            return i;
        }
        let label = Id::from(source);
        let i = self.push(
            Rec::Source {
                label: label.clone(),
            },
            IdHashing::Later,
        );
        self.sources.insert(label, i);
        i
    }

    /// The generated origin continuing an outcome of this run, with its `continues_as_origin`
    /// edge from that outcome.
    fn local_origin(&mut self, outcome: &Id) -> u32 {
        // Checked by `check_references`: the outcome is a node of this run.
        let prev = self.index.get(&**outcome).copied().unwrap_or(0);
        if let Some(&i) = self.local_origins.get(&prev) {
            return i;
        }
        let rec = Rec::Origin {
            outcome: self.id(prev).clone(),
            run: None,
        };
        let i = self.push(rec, IdHashing::Later);
        self.local_origins.insert(prev, i);
        let e = self.edge(EdgeKind::ContinuesAsOrigin, End::Node(prev), i);
        self.cont_edge.insert(i, e);
        self.link(prev, i, e);
        i
    }

    /// The generated origin continuing a node of child run `run`, with its `continues_as_origin`
    /// edge from that (external) node.
    fn child_origin(&mut self, outcome: &Id, run: &Id) -> u32 {
        let key = (outcome.clone(), run.clone());
        if let Some(&i) = self.child_origins.get(&key) {
            return i;
        }
        let rec = Rec::Origin {
            outcome: key.0.clone(),
            run: Some(key.1.clone()),
        };
        let i = self.push(rec, IdHashing::Later);
        let e = self.edge(EdgeKind::ContinuesAsOrigin, End::External(key.0.clone()), i);
        self.cont_edge.insert(i, e);
        self.child_origins.insert(key, i);
        i
    }

    /// The `participates_in` edge from `origin` to occurrence `occ` (one per pair), linked
    /// backward from the occurrence when created.
    fn participation(&mut self, origin: u32, occ: u32) -> u32 {
        if let Some(&e) = self.participation.get(&(origin, occ)) {
            return e;
        }
        let e = self.edge(EdgeKind::ParticipatesIn, End::Node(origin), occ);
        self.participation.insert((origin, occ), e);
        self.back[occ as usize].push(Link {
            node: origin,
            edge: e,
        });
        e
    }

    /// The edges and links of a new fact: occurrence → fact (`realizes_fact`), fact → outcome
    /// (`has_outcome`), origin → fact through the participation edge `part`.
    fn link_fact(&mut self, fact: u32, origin: u32, occ: u32, outcome: u32, part: u32) {
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

    /// Bind each alias to `first` (once; an alias bound to several ids is ambiguous).
    fn bind_aliases(&mut self, first: &Id, aliases: &[String]) {
        for alias in aliases {
            let ids = self.aliases.entry(alias.clone()).or_default();
            if !ids.iter().any(|id| **id == **first) {
                ids.push(first.clone());
            }
        }
    }

    /// Add node `rec`; with [`IdHashing::Now`] its id is hashed now and indexed.
    fn push(&mut self, rec: Rec, hashing: IdHashing) -> u32 {
        let i = self.recs.len() as u32;
        if matches!(rec, Rec::Fact { .. }) {
            self.facts += 1;
        }
        self.recs.push(rec);
        self.back.push(Links::new());
        self.fwd.push(Links::new());
        // Hashing a node reads only earlier nodes' ids, so its own slot can come after.
        let slot = if hashing == IdHashing::Now {
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

    /// Add an edge record; its id is hashed on first use.
    fn edge(&mut self, kind: EdgeKind, from: End, to: u32) -> u32 {
        let i = self.edge_recs.len() as u32;
        self.edge_recs.push(EdgeRec { kind, from, to });
        self.edge_ids.push(OnceLock::new());
        i
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
}

/// When a new node's id is hashed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IdHashing {
    /// At once, and indexed (nodes other receipts refer to by id).
    Now,
    /// When the graph is published.
    Later,
}
