//! One line of a session file ([`LogRecord`]), the envelope fields every reader looks at first
//! ([`RecordEnvelope`], borrowed from the line) and why a line could not be read
//! ([`RecordError`]).
//!
//! Data flow: line → [`RecordEnvelope`] (`type`, seqs, times, unparsed `data`, flags) → by
//! `type`: the header, a packed row, or an event whose `data` [`super::EventBody::parse`]
//! reads. The readers are the session store's (keel-session `store::parse`, which also turns a
//! line into an owned [`LogRecord`]); this crate only defines the shapes.

use super::{PackedChunks, SessionEvent, SessionHeader, SurfaceOp};
use crate::ids::Seq;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;

/// One line of a session file.
#[derive(Debug, Clone, PartialEq)]
pub enum LogRecord {
    /// The header (first line).
    Header(SessionHeader),
    /// One event.
    Event(SessionEvent),
    /// A packed run of chunk events.
    Packed(PackedChunks),
}

/// Why a log line could not be parsed.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The line is not JSON or lacks envelope fields.
    #[error("not a session log record: {0}")]
    Envelope(serde_json::Error),
    /// The line is an event whose `data` does not match its type.
    #[error("bad data for {type_name} event (seq {seq:?}): {source}")]
    Payload {
        /// The event type.
        type_name: String,
        /// The seq, when readable.
        seq: Option<u64>,
        /// The parse error.
        source: serde_json::Error,
    },
    /// An event line without `seq` or `time`.
    #[error("event record lacks the `{0}` field")]
    MissingField(&'static str),
}

/// The fields every record line may carry around its `data`, borrowed from the line: what a
/// reader looks at before it knows the record's shape.
#[derive(Debug, Deserialize)]
pub struct RecordEnvelope<'a> {
    /// `type`.
    #[serde(borrow, rename = "type")]
    pub ty: Cow<'a, str>,
    /// `seq` (events).
    pub seq: Option<u64>,
    /// `time` (events).
    pub time: Option<i64>,
    /// `seq0` (packed rows).
    pub seq0: Option<u64>,
    /// `time0` (packed rows).
    pub time0: Option<i64>,
    /// `data`, unparsed.
    #[serde(borrow)]
    pub data: Option<&'a RawValue>,
    /// `ignorable`.
    #[serde(default)]
    pub ignorable: bool,
    /// `surfaceOp`.
    #[serde(rename = "surfaceOp")]
    pub surface_op: Option<SurfaceOp>,
    /// `sourceEventSeqs`.
    #[serde(rename = "sourceEventSeqs")]
    pub source_event_seqs: Option<Vec<Seq>>,
}
