//! One line of a session file ([`LogRecord`]), the envelope fields every reader looks at first
//! ([`RecordEnvelope`], borrowed from the line) and why a line could not be read
//! ([`RecordError`]).
//!
//! Data flow: line → [`RecordEnvelope`] (`type`, seqs, times, unparsed `data`, flags) → by
//! `type`: the header, a packed row, or an event whose `data` [`EventBody::parse`] reads.

use super::{EventBody, PackedChunks, PackedKind, SessionEvent, SessionHeader, SurfaceOp};
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

impl LogRecord {
    /// Parse one line (without its newline).
    pub fn parse(line: &str) -> Result<LogRecord, RecordError> {
        let env: RecordEnvelope<'_> = serde_json::from_str(line).map_err(RecordError::Envelope)?;
        let data = env.data.map(RawValue::get).unwrap_or("null");
        let payload_err = |source| RecordError::Payload {
            type_name: env.ty.to_string(),
            seq: env.seq.or(env.seq0),
            source,
        };
        let packed = PackedKind::from_type_name(&env.ty);
        match (env.ty.as_ref(), packed) {
            ("session", _) => serde_json::from_str(line)
                .map(LogRecord::Header)
                .map_err(payload_err),
            (_, Some(kind)) => {
                #[derive(Deserialize)]
                struct Data {
                    turn: u32,
                    step: u32,
                    index: u32,
                    #[serde(default)]
                    dt: Vec<i64>,
                    texts: Option<Vec<String>>,
                    args: Option<Vec<String>>,
                    id: Option<String>,
                    name: Option<String>,
                }
                let d: Data = serde_json::from_str(data).map_err(payload_err)?;
                Ok(LogRecord::Packed(PackedChunks {
                    kind,
                    seq0: Seq(env.seq0.ok_or(RecordError::MissingField("seq0"))?),
                    time0: env.time0.ok_or(RecordError::MissingField("time0"))?,
                    turn: d.turn,
                    step: d.step,
                    index: d.index,
                    dt: d.dt,
                    texts: d.texts.or(d.args).unwrap_or_default(),
                    id: d.id,
                    name: d.name,
                }))
            }
            (ty, None) => {
                let seq = env.seq.ok_or(RecordError::MissingField("seq"))?;
                let time = env.time.ok_or(RecordError::MissingField("time"))?;
                let body = EventBody::parse(ty, data).map_err(payload_err)?;
                Ok(LogRecord::Event(SessionEvent {
                    seq: Seq(seq),
                    time,
                    body,
                    ignorable: env.ignorable,
                    surface_op: env.surface_op,
                    source_event_seqs: env.source_event_seqs.unwrap_or_default(),
                }))
            }
        }
    }
}
