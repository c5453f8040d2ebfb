//! The header line and the event envelope: [`SessionHeader`], [`SessionEvent`] (seq, time,
//! flags, surface effect, sources around a typed [`EventBody`]) and [`SurfaceOp`].
//!
//! Data flow: an event serializes as one JSON object, `type` first, then `seq`, `time`, the
//! `data` its body writes, and the optional `ignorable` / `sourceEventSeqs` / `surfaceOp`;
//! reading goes through [`super::RecordEnvelope`] and [`EventBody::parse`].

use super::EventBody;
use crate::ids::{Seq, SessionId, TimeMs};
use serde::de::Error as _;
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// Session log format version keel reads and writes.
pub const LOG_VERSION: u32 = 0;

/// First line of a session file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionHeader {
    /// Always `"session"`.
    #[serde(rename = "type")]
    pub record_type: String,
    /// Log format version (0).
    pub version: u32,
    /// Session id.
    pub id: SessionId,
    /// Creation time, ms since epoch.
    pub created_at: TimeMs,
    /// Working directory the session ran in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Parent session for forks and subagents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_session: Option<SessionId>,
    /// Number of events inherited from the parent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed_length: Option<u64>,
    /// Why this session exists (`"subagent"`, `"fork"`…).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    /// How many delegations deep this session is (0 for a top-level session).
    #[serde(default)]
    pub delegation_depth: u32,
}

impl SessionHeader {
    /// A header for a fresh top-level session.
    pub fn new(id: SessionId, created_at: TimeMs, cwd: Option<String>) -> Self {
        SessionHeader {
            record_type: "session".to_owned(),
            version: LOG_VERSION,
            id,
            created_at,
            cwd,
            parent_session: None,
            seed_length: None,
            origin: None,
            delegation_depth: 0,
        }
    }
}

/// How a surface-eligible event affects the surface (the model-visible history).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SurfaceOp {
    /// Appended at the end of the surface.
    Append,
    /// Replaces the inclusive span of current surface nodes whose first node has seq `start`
    /// and last node has seq `end` (DeepSeek Harness writes seqs here).
    Replace {
        /// Seq of the first shadowed surface node.
        start: Seq,
        /// Seq of the last shadowed surface node.
        end: Seq,
    },
}

impl Serialize for SurfaceOp {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            SurfaceOp::Append => s.serialize_str("append"),
            SurfaceOp::Replace { start, end } => {
                let mut m = s.serialize_map(Some(3))?;
                m.serialize_entry("op", "replace")?;
                m.serialize_entry("start", start)?;
                m.serialize_entry("end", end)?;
                m.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for SurfaceOp {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw<'a> {
            Str(#[serde(borrow)] Cow<'a, str>),
            Obj { op: String, start: Seq, end: Seq },
        }
        match Raw::deserialize(d)? {
            Raw::Str(s) if s == "append" => Ok(SurfaceOp::Append),
            Raw::Str(s) => Err(D::Error::custom(format!("unknown surfaceOp {s:?}"))),
            Raw::Obj { op, start, end } if op == "replace" => Ok(SurfaceOp::Replace { start, end }),
            Raw::Obj { op, .. } => Err(D::Error::custom(format!("unknown surfaceOp op {op:?}"))),
        }
    }
}

/// One event of a session log.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionEvent {
    /// Position in the log.
    pub seq: Seq,
    /// Wall-clock time, ms since epoch.
    pub time: TimeMs,
    /// Typed payload (its variant gives the `type`).
    pub body: EventBody,
    /// Readers that do not know this type may skip it.
    pub ignorable: bool,
    /// Surface effect (only on `user/message`, `assistant/message`, `tool/result`).
    pub surface_op: Option<SurfaceOp>,
    /// Events this one was formed from (chunks of a message, the call of a result, the nodes a
    /// replacement shadows).
    pub source_event_seqs: Vec<Seq>,
}

impl SessionEvent {
    /// A plain (non-surface) event.
    pub fn new(seq: Seq, time: TimeMs, body: EventBody) -> Self {
        SessionEvent {
            seq,
            time,
            body,
            ignorable: false,
            surface_op: None,
            source_event_seqs: Vec::new(),
        }
    }

    /// The event's `type` string.
    pub fn type_name(&self) -> &str {
        self.body.type_name()
    }

    /// Serialise as one JSON line (without the trailing newline).
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string(self)
    }
}

impl Serialize for SessionEvent {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("type", self.body.type_name())?;
        m.serialize_entry("seq", &self.seq)?;
        m.serialize_entry("time", &self.time)?;
        self.body.serialize_data(&mut m)?;
        if self.ignorable {
            m.serialize_entry("ignorable", &true)?;
        }
        if !self.source_event_seqs.is_empty() {
            m.serialize_entry("sourceEventSeqs", &self.source_event_seqs)?;
        }
        if let Some(op) = &self.surface_op {
            m.serialize_entry("surfaceOp", op)?;
        }
        m.end()
    }
}
