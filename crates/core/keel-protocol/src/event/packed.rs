//! Packed chunk rows: `k` consecutive delta `assistant/chunk` events of one block written as
//! one line (`text-chunks`, `reasoning-chunks`, `tool-call-chunks`), as DeepSeek Harness does.
//!
//! Data flow: a writer serializes a [`PackedChunks`] (`type`, `seq0`, `time0`, `data` with the
//! texts, or `args` for tool calls); a reader builds one from the line and
//! [`PackedChunks::expand`]s it back into the [`SessionEvent`]s it stands for.

use super::{AssistantChunk, EventBody, SessionEvent};
use crate::ids::{Seq, StepNo, TimeMs, TurnNo};
use crate::stream::StreamChunk;
use serde::Serialize;
use serde::ser::SerializeMap;

/// Kind of a packed chunk row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PackedKind {
    /// `text-chunks`: runs of `text-delta`.
    Text,
    /// `reasoning-chunks`: runs of `reasoning-delta`.
    Reasoning,
    /// `tool-call-chunks`: runs of `tool-call-delta`.
    ToolCall,
}

impl PackedKind {
    /// The row's `type` string.
    pub fn type_name(self) -> &'static str {
        match self {
            PackedKind::Text => "text-chunks",
            PackedKind::Reasoning => "reasoning-chunks",
            PackedKind::ToolCall => "tool-call-chunks",
        }
    }

    /// The kind of a row whose `type` is `ty` (`None`: not a packed row). On the loader's
    /// per-line path.
    #[inline]
    pub fn from_type_name(ty: &str) -> Option<PackedKind> {
        match ty {
            "text-chunks" => Some(PackedKind::Text),
            "reasoning-chunks" => Some(PackedKind::Reasoning),
            "tool-call-chunks" => Some(PackedKind::ToolCall),
            _ => None,
        }
    }
}

/// A packed row: `k` consecutive `assistant/chunk` delta events of one block, seqs
/// `seq0 .. seq0+k-1`, times `time0` then `+dt[i]` cumulatively.
#[derive(Debug, Clone, PartialEq)]
pub struct PackedChunks {
    /// Which delta kind.
    pub kind: PackedKind,
    /// Seq of the first member.
    pub seq0: Seq,
    /// Time of the first member.
    pub time0: TimeMs,
    /// Turn of the members.
    pub turn: TurnNo,
    /// Step of the members.
    pub step: StepNo,
    /// Block index of the members.
    pub index: u32,
    /// Time deltas between consecutive members (`k - 1` entries).
    pub dt: Vec<i64>,
    /// The deltas' texts (argument fragments for tool calls); `k` entries.
    pub texts: Vec<String>,
    /// Tool call id (tool-call rows; carried by the first member).
    pub id: Option<String>,
    /// Tool name (tool-call rows; carried by the first member).
    pub name: Option<String>,
}

impl PackedChunks {
    /// Number of events this row stands for.
    pub fn len(&self) -> usize {
        self.texts.len()
    }

    /// True when the row stands for no event.
    pub fn is_empty(&self) -> bool {
        self.texts.is_empty()
    }

    /// Expand into the `assistant/chunk` events it stands for.
    pub fn expand(&self) -> impl Iterator<Item = SessionEvent> + '_ {
        let mut time = self.time0;
        self.texts.iter().enumerate().map(move |(i, text)| {
            if i > 0 {
                time += self.dt.get(i - 1).copied().unwrap_or(0);
            }
            let chunk = match self.kind {
                PackedKind::Text => StreamChunk::TextDelta {
                    index: self.index,
                    text: text.clone(),
                },
                PackedKind::Reasoning => StreamChunk::ReasoningDelta {
                    index: self.index,
                    text: text.clone(),
                },
                PackedKind::ToolCall => StreamChunk::ToolCallDelta {
                    index: self.index,
                    id: if i == 0 { self.id.clone() } else { None },
                    name: if i == 0 { self.name.clone() } else { None },
                    arguments_delta: text.clone(),
                },
            };
            SessionEvent::new(
                Seq(self.seq0.0 + i as u64),
                time,
                EventBody::AssistantChunk(Box::new(AssistantChunk {
                    turn: self.turn,
                    step: self.step,
                    chunk,
                })),
            )
        })
    }
}

impl Serialize for PackedChunks {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Data<'a> {
            turn: TurnNo,
            step: StepNo,
            index: u32,
            dt: &'a [i64],
            #[serde(skip_serializing_if = "Option::is_none")]
            id: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            name: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            texts: Option<&'a [String]>,
            #[serde(skip_serializing_if = "Option::is_none")]
            args: Option<&'a [String]>,
        }
        let tool = self.kind == PackedKind::ToolCall;
        let data = Data {
            turn: self.turn,
            step: self.step,
            index: self.index,
            dt: &self.dt,
            id: self.id.as_deref(),
            name: self.name.as_deref(),
            texts: (!tool).then_some(self.texts.as_slice()),
            args: tool.then_some(self.texts.as_slice()),
        };
        let mut m = s.serialize_map(Some(4))?;
        m.serialize_entry("type", self.kind.type_name())?;
        m.serialize_entry("seq0", &self.seq0)?;
        m.serialize_entry("time0", &self.time0)?;
        m.serialize_entry("data", &data)?;
        m.end()
    }
}
