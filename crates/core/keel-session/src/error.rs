//! Errors of the in-memory session: append validation, fork and repair.
//!
//! Every variant names the seq involved. Persistence errors live in [`crate::store`].

use keel_protocol::Seq;
use keel_protocol::TurnNo;

/// Why [`crate::Session::append`] refused an event. The session is unchanged.
#[derive(Debug, thiserror::Error)]
pub enum AppendError {
    /// Returned by `append` when the event's seq is not the next one. A caller bug (the agent
    /// loop assigns seqs through `push`); on load it means the file is damaged.
    #[error("event seq {got} is not the next seq {expected}")]
    SeqGap {
        /// The seq the session expected.
        expected: Seq,
        /// The seq the event carried.
        got: Seq,
    },
    /// Returned by `append` when the payload cannot be written as plain JSON. A caller bug:
    /// fix the payload (the event is not recorded).
    #[error("event {seq} ({type_name}) is not plain JSON: {source}")]
    NotJson {
        /// The event's seq.
        seq: Seq,
        /// The event type.
        type_name: String,
        /// The serialiser's complaint.
        source: serde_json::Error,
    },
    /// Returned by `append` when `surfaceOp` is set on a type other than `user/message`,
    /// `assistant/message` or `tool/result`. A caller bug.
    #[error("event {seq} ({type_name}) carries surfaceOp but is not a surface type")]
    SurfaceOpOnNonSurface {
        /// The event's seq.
        seq: Seq,
        /// The event type.
        type_name: String,
    },
    /// Returned by `append` when a surface type carries no `surfaceOp`. A caller bug.
    #[error("event {seq} ({type_name}) is a surface type but carries no surfaceOp")]
    MissingSurfaceOp {
        /// The event's seq.
        seq: Seq,
        /// The event type.
        type_name: String,
    },
    /// Returned by `append` when a replace span names a seq that is not on the current surface.
    #[error(
        "event {seq} replaces span {start}..={end}, but seq {missing} is not on the current surface"
    )]
    SpanNotOnSurface {
        /// The replacing event's seq.
        seq: Seq,
        /// Span start.
        start: Seq,
        /// Span end.
        end: Seq,
        /// The seq not found on the surface.
        missing: Seq,
    },
    /// Returned by `append` when a replace span's end comes before its start in surface order.
    #[error(
        "event {seq} replaces span {start}..={end}, but {end} comes before {start} on the surface"
    )]
    SpanOutOfOrder {
        /// The replacing event's seq.
        seq: Seq,
        /// Span start.
        start: Seq,
        /// Span end.
        end: Seq,
    },
    /// Returned by `append` when a `surface/rewind` names a point that is not before it.
    #[error("event {seq} (surface/rewind) rewinds to seq {to}, which is not an earlier event")]
    RewindNotBefore {
        /// The rewind's seq.
        seq: Seq,
        /// Its target.
        to: Seq,
    },
    /// Returned by `append` when a `surface/rewind` comes while a turn is open, or names a
    /// point inside a turn (the history there would end in unanswered tool calls).
    #[error("event {seq} (surface/rewind): {what}; a conversation rewinds only between turns")]
    RewindInsideTurn {
        /// The rewind's seq.
        seq: Seq,
        /// What is inside a turn.
        what: String,
    },
    /// Returned by `append` when a replacing event does not cite a seq it shadows in
    /// `sourceEventSeqs`.
    #[error("event {seq} shadows seq {shadowed} but does not cite it in sourceEventSeqs")]
    ShadowedSeqNotCited {
        /// The replacing event's seq.
        seq: Seq,
        /// The uncited shadowed seq.
        shadowed: Seq,
    },
    /// Returned by `append` when a replacing `tool/result` shadows anything other than exactly
    /// one `tool/result`, or differs from it other than in its result content.
    #[error("tool/result {seq} may only replace tool/result {replaced} in content, but {what}")]
    ToolResultReplacement {
        /// The replacing event's seq.
        seq: Seq,
        /// The first shadowed seq.
        replaced: Seq,
        /// What differs.
        what: &'static str,
    },
    /// Returned by `append` for an event type keel does not know that is not marked
    /// `ignorable`: readers could not interpret the log. Mark it ignorable or model it.
    #[error("event {seq} has unknown type {type_name:?} and is not marked ignorable")]
    UnknownRequiredType {
        /// The event's seq.
        seq: Seq,
        /// The event type.
        type_name: String,
    },
}

/// Why [`crate::Session::fork`] refused.
#[derive(Debug, thiserror::Error)]
pub enum ForkError {
    /// The boundary is past the end of the log. A caller bug.
    #[error("fork boundary {boundary} is past the end of the log ({len} events)")]
    BeyondEnd {
        /// Requested boundary (number of inherited events).
        boundary: Seq,
        /// Events in the parent.
        len: u64,
    },
    /// The prefix ends inside an open turn: a child would inherit half a turn. Pick the seq
    /// after a `turn/end` (or before a `turn/start`).
    #[error("fork boundary {boundary} is inside open turn {turn}")]
    InsideOpenTurn {
        /// Requested boundary.
        boundary: Seq,
        /// The open turn.
        turn: TurnNo,
    },
    /// Copying the prefix failed validation (the parent itself is inconsistent).
    #[error("fork: {0}")]
    Append(#[from] AppendError),
}

/// Why [`crate::Session::repair`] failed: a closer event was refused (a bug in the session's
/// state; nothing was appended after the failing closer).
#[derive(Debug, thiserror::Error)]
#[error("crash repair: {0}")]
pub struct RepairError(#[from] pub AppendError);
