//! keel-provenance: how exactly was this tool result formed?
//!
//! Records formation facts observed at real runtime boundaries of the tool pipeline
//! (assistant message → tool call → pre-execute decision → dispatch → post-execute → settled →
//! `tool/result`) as hash-chained receipts in canonical JSON (RFC 8785 + SHA-256, from
//! [`keel_jcs`]), compiles them into a graph, answers the model-callable `trace` / `get_node`
//! queries through a field allow-list, and validates a journal offline. See `docs/provenance.md` for the file layout,
//! the query schemas and the validator codes.
//!
//! Data flow: pipeline stage → [`Recorder`] method → [`receipt::encode`] (canonical payload,
//! payload hash, receipt hash chained to the previous one) → [`Snapshot::apply`] (nodes, edges,
//! per-binding indexes, aliases) → pending journal line → [`Journal::flush`] / [`Journal::sync`]
//! → `receipts.jsonl`; [`Journal::write_graph`] → `graph.json`. Queries ([`query`]) and renderers
//! ([`render`]) are pure functions of snapshots; [`verify()`] re-derives everything from the files.
//!
//! Decisions where the spec is silent:
//! - Node and edge ids hash `{kind, run_id, …material}`; outcomes carry the payload's SHA-256,
//!   never the payload. Fact ids are `<receipt id>/<binding index>`. Outcome aliases map to
//!   outcome 0 of their receipt. Nothing hashed depends on wall-clock time or randomness: run
//!   ids, event ids, call ids and execution tokens come from the caller.
//! - The disposition of a call that did not reach a result is attached at `tools/settled` (its
//!   outcome becomes a `disposition` node with a `category`), by [`recorder::classify`]; a call
//!   still open when the journal closes or resumes gets a `capture/close` disposition
//!   `outcome_unobserved`. An assistant attempt that never became a surface message is a
//!   `assistant/attempt` receipt with `no_surface_message`.
//! - A subagent join is a `subagent/join` receipt in the parent call's chain with a second
//!   binding whose origin is the child run's node (`{outcome, run_id}`); traversal crosses into
//!   the child snapshot when it is in the [`QueryScope`].
//! - Capture failures are receipts (`capture/failure`), so replay reproduces `complete: false`.
//!   Any failure makes the whole scope answer `CAPTURE_INCOMPLETE`.
//! - `trace` depth counts formation steps (fact ↔ origin crossings), not graph hops.
//! - Integers beyond ±2^53 canonicalize as the nearest double (ECMAScript semantics).
//! - `graph.json` may lag `receipts.jsonl`: it is written at checkpoints, and the validator checks
//!   it against the prefix of receipts it lists.
#![deny(missing_docs)]

pub mod capture;
mod fxhash;
pub mod graph;
pub mod journal;
pub mod model;
pub mod node;
pub mod plugin;
pub mod query;
pub mod receipt;
pub mod recorder;
pub mod render;
pub mod verify;

pub use graph::{Failure, ReceiptRef, SCHEMA, Snapshot};
pub use journal::{
    GRAPH_FILE, Journal, JournalError, RECEIPTS_FILE, ResumeReport, journal_dir, load_snapshot,
};
pub use keel_jcs::Payload;
pub use model::{Binding, Disposition, Origin, Stage};
pub use plugin::{ID, Provenance, ProvenanceConfig, ProvenancePlugin};
pub use query::{
    Direction, NodeView, QueryError, QueryScope, TraceResult, get_node, get_node_in, trace,
    trace_in,
};
pub use recorder::{
    Approval, ChildLink, Dispatch, ExecuteResult, PostDecision, PreDecision, Recorder,
    SettledResult,
};
pub use render::{TraceFormat, render};
pub use verify::{VerifyCode, VerifyError, VerifyFailure, VerifyReport, verify, verify_bytes};
